"""Servers the test suite starts itself from local binaries, on free loopback ports, in temporary
directories: Azurite (the Azure Storage emulator, npm package `azurite` pinned in package.json),
redis-server, PostgreSQL and MariaDB (Debian packages, installed by `make test` where missing).

No Docker, no system services, no cloud account. A server that cannot start raises
ServiceMissing; the fixtures turn that into a skip, or a failure with TENURE_REQUIRE_SERVICES=1.
Each server can be stopped and restarted on the same port, which the fault tests use.

Example::

    server = RedisServer(tmp_path); server.start()
    store = tenure.connect(server.url)
    server.restart()  # Redis keeps nothing on disk here: every lease and counter is gone
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
AZURITE_BLOB = ROOT / "node_modules" / ".bin" / "azurite-blob"
AZURITE_QUEUE = ROOT / "node_modules" / ".bin" / "azurite-queue"
# Azurite's published, well-known development account and key (not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
           "KBHBeksoGMGw==")


class ServiceMissing(RuntimeError):
    """A server the tests need could not be started here."""


def service_missing(reason: str) -> None:
    """Skip, or fail when the run requires every service (CI: TENURE_REQUIRE_SERVICES=1)."""
    if os.environ.get("TENURE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (TENURE_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


ServerT = TypeVar("ServerT", bound="LocalServer")


def start_or_skip(server: ServerT) -> ServerT:
    """`server`, started; the test skips (fails under TENURE_REQUIRE_SERVICES=1) when its
    program is missing.

    Example::

        server = start_or_skip(RedisServer(tmp_path))
    """
    try:
        server.start()
    except ServiceMissing as exc:
        service_missing(str(exc))
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def accepts_connections(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def find_binary(name: str, *patterns: str) -> str | None:
    """`name` on PATH, else the newest match of `patterns` (Debian keeps PostgreSQL off PATH)."""
    found = shutil.which(name)
    if found:
        return found
    matches = sorted((path for pattern in patterns for path in glob.glob(pattern)),
                     key=lambda path: [int(p) if p.isdigit() else p for p in path.split("/")])
    return matches[-1] if matches else None


class LocalServer:
    """A server process in its own session on a free loopback port; subclasses say how to run
    it, how to tell that it is ready, and what to install when it is missing."""

    name = "server"
    install_hint = ""
    start_timeout = 30.0

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{self.name}.log"

    # -- what subclasses provide ---------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time setup before the first start (e.g. initdb); raise ServiceMissing."""

    def ready(self, port: int) -> bool:
        return accepts_connections(port)

    def after_start(self) -> None:
        """Setup that needs the running server (e.g. create a database)."""

    def run_as(self) -> dict[str, object]:
        return {}

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start on a free port (a new one each try: another test process may grab the same);
        `restart()` comes back on the port it had."""
        self.prepare()
        errors = []
        for _ in range(3):
            port = self.port or free_port()
            error = self._start_on(port)
            if error is None:
                self.after_start()
                return
            errors.append(error)
            self.port = 0
        raise ServiceMissing(f"{self.name} did not start: " + " / ".join(errors))

    def _start_on(self, port: int) -> str | None:
        with self.log.open("ab") as output:
            try:
                self.process = subprocess.Popen(
                    self.command(port), cwd=self.workdir, stdout=output,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    **self.run_as())  # type: ignore[call-overload]
            except OSError as exc:
                return f"cannot run {self.command(port)[0]}: {exc}"
        started = time.monotonic()
        while time.monotonic() - started < self.start_timeout:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-800:]
                return f"exited with {self.process.returncode}: {tail}"
            if self.ready(port):
                self.port = port
                return None
            time.sleep(0.05)  # polling a condition with a deadline
        self.stop()
        return f"not ready on port {port} within {self.start_timeout:g} s"

    def stop(self, graceful: bool = True) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s; only SIGKILL when not graceful)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if graceful:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
                return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def restart(self, graceful: bool = True) -> None:
        """Stop it and start it again on the same port."""
        self.stop(graceful)
        self.start()

    def start_again(self) -> None:
        """After `stop()`: start on the port it had, and only there (`start()` moves to another
        port when that one is taken, where clients of the old one would never find it).

        Example::

            server.stop(); ...; server.start_again()   # clients reconnect to server.port
        """
        assert self.port, "start_again() needs a server that was started before"
        error = self._start_on(self.port)
        if error is not None:
            raise ServiceMissing(f"{self.name} did not start again on port {self.port}: {error}")
        self.after_start()

    def drop_connections(self) -> int:
        """Close every client connection from the server's side; how many it closed."""
        raise NotImplementedError


class Azurite(LocalServer):
    """One Azurite blob service in memory; `restart()` loses everything it stored.

    Example::

        server = Azurite(tmp_path); server.start()
        tenure.connect("azblob:///locks", connection_string=server.connection_string)
    """

    name = "azurite"
    program = AZURITE_BLOB
    service = "blob"  # Azurite's service: "blob" or "queue"
    flags: tuple[str, ...] = ()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{DEV_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
                f"{self.service.capitalize()}Endpoint={self.endpoint};")

    def prepare(self) -> None:
        if not self.program.exists():
            raise ServiceMissing(
                f"Azurite is not installed ({self.program.relative_to(ROOT)} is missing): run "
                "`make test`, which runs `npm ci` (needs node and npm)")

    def command(self, port: int) -> list[str]:
        return [str(self.program), "--inMemoryPersistence", "--skipApiVersionCheck",
                "--disableTelemetry", "--loose", *self.flags, f"--{self.service}Host",
                "127.0.0.1", f"--{self.service}Port", str(port)]

    def stop(self, graceful: bool = False) -> None:
        super().stop(graceful)  # in memory: nothing to flush


class AzuriteQueue(Azurite):
    """One Azurite queue service in memory, for the queue-message jobs.

    Example::

        server = AzuriteQueue(tmp_path); server.start()
        AzureQueue("invoices", connection_string=server.connection_string)
    """

    name = "azurite-queue"
    program = AZURITE_QUEUE
    service = "queue"
    flags = ("--silent",)


class RedisServer(LocalServer):
    """redis-server with no persistence: `restart()` loses every key, as a cache node would.

    Example::

        server = RedisServer(tmp_path); server.start(); server.url  # redis://127.0.0.1:PORT/0
    """

    name = "redis"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def prepare(self) -> None:
        self.binary = find_binary("redis-server")
        if self.binary is None:
            raise ServiceMissing("redis-server is not installed: run `make test` as root on "
                                 "Debian/Ubuntu (it installs redis-server), or install it")

    def command(self, port: int) -> list[str]:
        assert self.binary is not None
        return [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.workdir), "--daemonize", "no",
                "--maxclients", "1000"]

    def uptime(self) -> float:
        import redis

        with redis.Redis(port=self.port) as client:
            return float(client.info("server")["uptime_in_seconds"])

    started_at = float("-inf")  # monotonic time of its last start (after_start)

    def after_start(self) -> None:
        self.started_at = time.monotonic()

    def wait_past_restart_grace(self, grace: float = 2.0) -> None:
        """Return once the server is older than the store's restart grace (default 2 s): a
        young server grants no name it has no counter for, so a test that runs right after
        another one restarted the session's server would see free names refused."""
        from waiting import wait_until

        if time.monotonic() - self.started_at < grace + 1:
            wait_until(lambda: self.uptime() >= grace, timeout=10, what="redis restart grace")

    def drop_connections(self) -> int:
        import redis

        with redis.Redis(port=self.port) as client:
            return int(client.client_kill_filter(_type="normal", skipme=True))


def _owned_by(user: str) -> tuple[Path, dict[str, object]]:
    """A fresh directory under the system temp dir owned by `user`, and how to run as it:
    PostgreSQL refuses to run as root, and pytest's temp dirs are private to root."""
    directory = Path(tempfile.mkdtemp(prefix=f"tenure-{user}-"))
    if os.geteuid() != 0:
        return directory, {}
    import pwd

    entry = pwd.getpwnam(user)
    os.chown(directory, entry.pw_uid, entry.pw_gid)
    return directory, {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


class PostgresServer(LocalServer):
    """A PostgreSQL cluster of its own (initdb, trust auth, fsync off); `restart()` keeps data.

    Run as the `postgres` OS user when the tests run as root.

    Example::

        server = PostgresServer(tmp_path); server.start()
        server.url  # postgresql://postgres@127.0.0.1:PORT/postgres
    """

    name = "postgres"
    _data: Path | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def prepare(self) -> None:
        if self._data is not None:
            return
        initdb = find_binary("initdb", "/usr/lib/postgresql/*/bin/initdb")
        if initdb is None:
            raise ServiceMissing("PostgreSQL is not installed (no initdb): run `make test` as "
                                 "root on Debian/Ubuntu (it installs postgresql), or install it")
        self.bindir = Path(initdb).resolve().parent
        home, self._as_user = _owned_by("postgres")
        data = home / "data"
        result = subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-sync"],
            capture_output=True, text=True, cwd=home, **self._as_user)  # type: ignore[call-overload]
        if result.returncode != 0:
            raise ServiceMissing(f"initdb failed: {result.stderr[-800:]}")
        self._data = data

    def run_as(self) -> dict[str, object]:
        return self._as_user

    def command(self, port: int) -> list[str]:
        assert self._data is not None
        return [str(self.bindir / "postgres"), "-D", str(self._data), "-p", str(port),
                "-h", "127.0.0.1", "-k", "", "-c", "fsync=off",
                "-c", "full_page_writes=off", "-c", "max_connections=300",
                "-c", "shared_buffers=32MB"]

    def ready(self, port: int) -> bool:
        import psycopg

        try:
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                                 connect_timeout=1) as connection:
                connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def drop_connections(self) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            killed = connection.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchone()
        return int(killed[0]) if killed else 0

    def stop(self, graceful: bool = True) -> None:
        # SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients; SIGINT is "fast".
        process = self.process
        if graceful and process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        super().stop(graceful=False)

    def cleanup(self) -> None:
        if self._data is not None:
            shutil.rmtree(self._data.parent, ignore_errors=True)


class MariaDBServer(LocalServer):
    """A MariaDB server of its own with a database `tenure`; `restart()` keeps data.

    root may log in from 127.0.0.1 without a password (a throwaway test server).

    Example::

        server = MariaDBServer(tmp_path); server.start()
        server.url  # mysql://root@127.0.0.1:PORT/tenure
    """

    name = "mariadb"
    start_timeout = 60.0
    _data: Path | None = None

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/tenure"

    @property
    def socket_path(self) -> Path:
        assert self._data is not None
        return self._data.parent / "mysqld.sock"

    def prepare(self) -> None:
        if self._data is not None:
            return
        self.mariadbd = find_binary("mariadbd", "/usr/sbin/mariadbd") or find_binary(
            "mysqld", "/usr/sbin/mysqld")
        install = find_binary("mariadb-install-db", "/usr/bin/mariadb-install-db") or \
            find_binary("mysql_install_db", "/usr/bin/mysql_install_db")
        if self.mariadbd is None or install is None:
            raise ServiceMissing("MariaDB is not installed: run `make test` as root on "
                                 "Debian/Ubuntu (it installs mariadb-server), or install it")
        home = Path(tempfile.mkdtemp(prefix="tenure-mariadb-"))
        data = home / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        result = subprocess.run(
            [install, "--no-defaults", f"--datadir={data}", *user,
             "--auth-root-authentication-method=normal", "--skip-test-db",
             "--skip-name-resolve", f"--tmpdir={home}"],  # installs at once collide in /tmp
            capture_output=True, text=True, cwd=home)
        if result.returncode != 0:
            shutil.rmtree(home, ignore_errors=True)
            raise ServiceMissing(f"mariadb-install-db failed: {result.stderr[-800:]}")
        self._data = data

    def command(self, port: int) -> list[str]:
        assert self._data is not None and self.mariadbd is not None
        user = ["--user=root"] if os.geteuid() == 0 else []
        return [self.mariadbd, "--no-defaults", f"--datadir={self._data}", *user,
                f"--port={port}", "--bind-address=127.0.0.1", f"--socket={self.socket_path}",
                f"--pid-file={self._data.parent / 'mysqld.pid'}", "--skip-name-resolve",
                "--skip-log-bin", "--innodb-buffer-pool-size=64M", f"--tmpdir={self._data.parent}",
                "--innodb-flush-log-at-trx-commit=2", "--max-connections=500",
                f"--log-error={self.log}"]

    def ready(self, port: int) -> bool:
        import pymysql

        try:
            pymysql.connect(unix_socket=str(self.socket_path), user="root",
                            connect_timeout=1).close()
        except pymysql.Error:
            return False
        return True

    def after_start(self) -> None:
        """Let root in over TCP from 127.0.0.1 and create the database (idempotent)."""
        import pymysql

        connection = pymysql.connect(unix_socket=str(self.socket_path), user="root")
        try:
            with connection.cursor() as cursor:
                cursor.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
                cursor.execute("GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
                cursor.execute("CREATE DATABASE IF NOT EXISTS tenure")
        finally:
            connection.close()

    def drop_connections(self) -> int:
        import pymysql

        connection = pymysql.connect(unix_socket=str(self.socket_path), user="root")
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT id FROM information_schema.processlist "
                           "WHERE id <> CONNECTION_ID() AND command <> 'Daemon' "
                           "AND user NOT IN ('system user', 'event_scheduler')")
            ids = [row[0] for row in cursor.fetchall()]
            for connection_id in ids:
                with contextlib.suppress(pymysql.err.OperationalError):  # gone meanwhile
                    cursor.execute(f"KILL CONNECTION {int(connection_id)}")
        return len(ids)

    def cleanup(self) -> None:
        if self._data is not None:
            shutil.rmtree(self._data.parent, ignore_errors=True)
