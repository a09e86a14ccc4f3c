"""Shared by test_claims, test_idempotency and test_outbox: a database URL per test (a SQLite
file, or a schema of its own on the suite's PostgreSQL), engines for it, and child processes
running tests/support/exactly_once_child.py."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from waiting import wait_until

CHILD = Path(__file__).resolve().parent / "exactly_once_child.py"


def make_engine(url: str) -> sa.Engine:
    """An engine for `url`; SQLite files get WAL and a generous busy timeout (several
    processes write the same file)."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _wal(connection: Any, _record: Any) -> None:
            connection.execute("PRAGMA journal_mode=WAL")

        return engine
    return sa.create_engine(url, pool_size=10)


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database per test: a SQLite file, a new schema on the suite's PostgreSQL
    (selected through the connection's search_path, so child processes get it from the URL), or
    a new database on the suite's MariaDB."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'app.db'}"
        return
    if request.param == "mariadb":
        yield from mariadb_database(request.getfixturevalue("mariadb_server").url)
        return
    server = request.getfixturevalue("postgres_server")
    schema = "t" + uuid.uuid4().hex[:16]
    base = server.url.replace("postgresql://", "postgresql+psycopg://", 1)
    # No pool: a test may restart the server, and the DROP after it needs a fresh connection.
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{base}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


def mariadb_database(server_url: str) -> Iterator[str]:
    """A new database on the MariaDB server at `server_url` (mysql://...), dropped after."""
    name = "t" + uuid.uuid4().hex[:16]
    base = server_url.replace("mysql://", "mysql+pymysql://", 1).rsplit("/", 1)[0]
    admin = sa.create_engine(f"{base}/tenure", isolation_level="AUTOCOMMIT",
                             poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        admin.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[sa.Engine]:
    created = make_engine(db_url)
    yield created
    created.dispose()


class Child:
    """A child process speaking lines: `expect(prefix)` waits for a line, `send(line)`."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float = 30) -> str:
        """Wait (at most `timeout` s) for a line starting with `prefix`; return it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"timed out after {timeout:g} s waiting for {prefix!r} from child")
            if line is None:
                self.process.wait(10)
                stderr = self.process.stderr.read() if self.process.stderr else ""
                pytest.fail(f"child exited before printing {prefix!r}: {stderr[-2000:]}")
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def wait(self, timeout: float = 30) -> int:
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.close()


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP took effect)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def wait_stopped(child: Child) -> None:
    wait_until(lambda: stopped(child.process.pid), timeout=10, what="the child to stop")
