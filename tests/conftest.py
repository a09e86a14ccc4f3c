"""Fixtures shared by every test: the servers the suite starts itself (see servers.py), and
`processes`, the OS processes a test starts, killed and reaped at its end.

Each server fixture is session-scoped: one server per test process (pytest-xdist worker), on a
free loopback port, stopped at the end. Each also puts its address in an environment variable,
so store URLs work here and in the worker processes the tests start.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from servers import (
    Azurite,
    AzuriteQueue,
    LocalServer,
    MariaDBServer,
    PostgresServer,
    RedisServer,
    start_or_skip,
)

S = TypeVar("S", bound=LocalServer)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts (it appends them); killed, even stopped ones, and reaped at the
    end whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _serve(server: S, variable: str, address: Callable[[S], str]) -> Iterator[S]:
    start_or_skip(server)
    os.environ[variable] = address(server)
    try:
        yield server
    finally:
        server.stop()
        cleanup = getattr(server, "cleanup", None)
        if cleanup is not None:
            cleanup()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """Azurite in memory; its connection string goes to AZURE_STORAGE_CONNECTION_STRING, so
    `azblob:///CONTAINER` URLs work."""
    yield from _serve(Azurite(tmp_path_factory.mktemp("azurite")),
                      "AZURE_STORAGE_CONNECTION_STRING", lambda server: server.connection_string)


@pytest.fixture(scope="session")
def azurite_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteQueue]:
    """Azurite's queue service in memory; connection string in
    TENURE_TEST_AZURE_QUEUE_CONNECTION_STRING."""
    yield from _serve(AzuriteQueue(tmp_path_factory.mktemp("azurite-queue")),
                      "TENURE_TEST_AZURE_QUEUE_CONNECTION_STRING",
                      lambda server: server.connection_string)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """redis-server without persistence; URL in TENURE_TEST_REDIS_URL."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    for started in _serve(server, "TENURE_TEST_REDIS_URL", lambda server: server.url):
        server.wait_past_restart_grace()
        yield started


@pytest.fixture(scope="session")
def redis_masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three independent redis-servers for the quorum store; their URL (all three masters) in
    TENURE_TEST_REDIS_QUORUM_URL."""
    servers = [RedisServer(tmp_path_factory.mktemp(f"redis-master{i}")) for i in range(3)]
    try:
        for server in servers:
            start_or_skip(server)
        hosts = ",".join(f"127.0.0.1:{server.port}" for server in servers)
        os.environ["TENURE_TEST_REDIS_QUORUM_URL"] = f"redis://{hosts}/0"
        for server in servers:
            server.wait_past_restart_grace()
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A PostgreSQL cluster of its own; URL in TENURE_TEST_POSTGRES_URL."""
    yield from _serve(PostgresServer(tmp_path_factory.mktemp("postgres")),
                      "TENURE_TEST_POSTGRES_URL", lambda server: server.url)


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A MariaDB server of its own with database `tenure`; URL in TENURE_TEST_MYSQL_URL."""
    yield from _serve(MariaDBServer(tmp_path_factory.mktemp("mariadb")), "TENURE_TEST_MYSQL_URL",
                      lambda server: server.url)
