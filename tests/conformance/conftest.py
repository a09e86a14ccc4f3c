"""Store fixtures for the ONE conformance suite: every test runs on every store x {sync, async}.

Adding a store = adding a StoreKind below (tests/conformance/test_fixtures_cover_stores.py fails
while a store module under src/tenure/_async/stores/ has none). Server-backed stores start their
server from the suite itself; with TENURE_REQUIRE_SERVICES=1 a server that cannot start fails the
run instead of skipping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from waiting import call, eventually  # noqa: F401 - the conformance tests import both from here

import tenure
import tenure.aio
from tenure._names import name_digest
from tenure.aio.stores import AsyncMemoryStore
from tenure.stores import MemoryStore

WORKER = Path(__file__).with_name("worker.py")


def run_together(processes: list[subprocess.Popen[str]], timeout: float) -> None:
    """Wait until each worker process says READY (imported, connected), start them all at
    once (a line on stdin), and wait `timeout` s for each to exit 0."""
    for process in processes:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 120)
        assert ready and process.stdout.readline() == "READY\n", "a worker did not start"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.close()
    for process in processes:
        assert process.wait(timeout=timeout) == 0, "a worker process failed"


@dataclass(frozen=True)
class StoreKind:
    """How to reach one store in tests, and what it promises."""

    name: str
    module: str  # the store module under tenure/_async/stores/
    make_url: Callable[[Path], str]
    shared_between_processes: bool = True
    kernel_expiry: bool = False  # the OS frees the lock with its holder; ttl only paces checks
    min_ttl: float = 0.1  # the shortest ttl the store takes (Azure blob leases: 15 s)
    lists_expiry: bool = True  # leases() reports expires_at
    service: str | None = None  # the session fixture that starts its server
    # The server fault tests (test_server_faults.py) run where this is set: whether the server
    # keeps its data across a restart (None: not restarted by those tests).
    restart_keeps_data: bool | None = None
    # A release wakes the waiters in the order they came (test_fairness.py): a process that
    # releases and asks again goes behind them.
    fair_hand_off: bool = True
    # A break ends the holder's session, and with it the session's other leases (getlock).
    break_ends_session: bool = False
    # Contended acquisitions a second that several processes reach in a loop (acquire, release,
    # acquire again): azblob's waiters poll, and one that asks again after a refusal waits one
    # poll first (its courtesy, see docs/stores/azblob.md), about 18/s for 4 processes.
    contended_per_second: float = 200.0
    # Where its tokens' clock is (test_clock_steps.py): the module fixture that starts this
    # store's server on a clock the tests can step back, returning the environment its URL is
    # made with; None: the clock is the client's (that test steps a client process's clock).
    clock_server: str | None = None

    def ttl(self, seconds: float) -> float:
        """`seconds`, or the store's shortest ttl when that is longer: the tests' ttls are
        short for speed, and stores with a longer minimum run them at their minimum."""
        return max(seconds, self.min_ttl)

    def start_service(self, request: pytest.FixtureRequest) -> None:
        """Start this store's server (once per test process), or skip/fail without it; a
        server that another test restarted a moment ago is waited for until it grants again."""
        if self.service is not None:
            served = request.getfixturevalue(self.service)
            for server in served if isinstance(served, list) else [served]:
                getattr(server, "wait_past_restart_grace", lambda: None)()


def azure_container(tmp: Path) -> str:
    """A container of its own for each test (Azure's rule: 3 to 63 of [a-z0-9-])."""
    return own_space(tmp)


def own_space(tmp: Path) -> str:
    """A key prefix, schema or table of its own for each test on a shared server."""
    return "t" + name_digest(str(tmp))[:24]


def server_url(variable: str, tmp: Path, option: str, suffix: str = "") -> str:
    """The URL of the server the session fixture started, isolated for this test by `option`."""
    return f"{os.environ[variable]}?{option}={own_space(tmp)}{suffix}"


STORE_KINDS = [
    StoreKind("memory", "memory", lambda tmp: "memory://", shared_between_processes=False,
              fair_hand_off=False),
    StoreKind("sqlite", "sqlite", lambda tmp: f"sqlite:///{tmp}/locks.db"),
    StoreKind("file", "file", lambda tmp: f"file://{tmp}/locks", kernel_expiry=True),
    # The connection string comes from AZURE_STORAGE_CONNECTION_STRING (set by the fixture).
    StoreKind("azblob", "azblob", lambda tmp: f"azblob:///{azure_container(tmp)}", min_ttl=15.0,
              lists_expiry=False, service="azurite", fair_hand_off=False,
              contended_per_second=18.0),
    StoreKind("redis", "redis", lambda tmp: server_url("TENURE_TEST_REDIS_URL", tmp, "prefix", ":"),
              service="redis_server", restart_keeps_data=True, clock_server="faked_redis"),
    StoreKind("redis-quorum", "redis_quorum",
              lambda tmp: server_url("TENURE_TEST_REDIS_QUORUM_URL", tmp, "prefix", ":"),
              service="redis_masters", fair_hand_off=False,  # woken, but then tries like anyone
              clock_server="faked_redis_masters",
              # A master's answer counts only within a quarter of the ttl (_quorum.py): 0.3 s
              # leaves 75 ms, less than a new store's first call (connections, script loads)
              # took on a loaded 2-core machine here (all three masters "no answer").
              min_ttl=1.0),
    StoreKind("postgres", "postgres",
              lambda tmp: server_url("TENURE_TEST_POSTGRES_URL", tmp, "schema"),
              service="postgres_server", restart_keeps_data=True, clock_server="faked_postgres"),
    # Session advisory locks: freed with the holder's connection, like a kernel's flock (so no
    # server fault tests: a dropped connection IS the loss of the lease, see docs).
    StoreKind("postgres-advisory", "postgres",
              lambda tmp: server_url("TENURE_TEST_POSTGRES_URL", tmp, "schema", "&mode=advisory"),
              kernel_expiry=True, service="postgres_server", clock_server="faked_postgres"),
    # FIFO: a release wakes the sleeper with the earliest place in the name's queue (the
    # tag of its sleep, see docs/stores/mysql.md).
    StoreKind("mysql", "mysql", lambda tmp: server_url("TENURE_TEST_MYSQL_URL", tmp, "table"),
              service="mariadb_server", restart_keeps_data=True,
              clock_server="faked_mariadb"),
    # Session locks (GET_LOCK): freed with the holder's connection, like a kernel's flock (so no
    # server fault tests: a dropped connection IS the loss of the lease, see docs).
    StoreKind("mysql-getlock", "mysql",
              lambda tmp: server_url("TENURE_TEST_MYSQL_URL", tmp, "table", "&mode=getlock"),
              kernel_expiry=True, service="mariadb_server", fair_hand_off=True,
              clock_server="faked_mariadb", break_ends_session=True),
]




@dataclass
class Target:
    """One store reached through one API, with helpers for processes and restarts."""

    kind: StoreKind
    api: str
    tmp: Path
    url: str
    _stores: list[Any] = field(default_factory=list)
    _memory: Any = None

    @property
    def is_async(self) -> bool:
        return self.api == "async"

    def connect(self, **options: Any) -> Any:
        """A new Store (new holder identity) on the same underlying store."""
        module = tenure.aio if self.is_async else tenure
        if self.kind.name == "memory":
            if self._memory is None:
                self._memory = AsyncMemoryStore() if self.is_async else MemoryStore()
            store = module.connect(self._memory, **options)
        else:
            store = module.connect(self.url, **options)
        self._stores.append(store)
        return store

    def ttl(self, seconds: float) -> float:
        """See StoreKind.ttl."""
        return self.kind.ttl(seconds)

    def wipe(self) -> None:
        """Lose everything the store kept (the database file, the lock directory, the blobs)."""
        if self.kind.name == "memory":
            self._memory = None
        elif self.kind.name == "azblob":
            from azure.storage.blob import ContainerClient

            with ContainerClient.from_connection_string(
                    os.environ["AZURE_STORAGE_CONNECTION_STRING"], azure_container(self.tmp)) as c:
                for blob in c.list_blobs():
                    c.delete_blob(blob.name)
        elif self.kind.name == "redis":
            import redis

            with redis.Redis.from_url(os.environ["TENURE_TEST_REDIS_URL"]) as client:
                keys = list(client.scan_iter(f"{own_space(self.tmp)}:*"))
                if keys:
                    client.delete(*keys)
        elif self.kind.name == "redis-quorum":
            import redis

            for port in urlsplit(os.environ["TENURE_TEST_REDIS_QUORUM_URL"]).netloc.split(","):
                with redis.Redis.from_url(f"redis://{port}/0") as client:
                    keys = list(client.scan_iter(f"{own_space(self.tmp)}:*"))
                    if keys:
                        client.delete(*keys)
        elif self.kind.module == "postgres":
            import psycopg

            with psycopg.connect(os.environ["TENURE_TEST_POSTGRES_URL"], autocommit=True) as db:
                db.execute(f"DROP SCHEMA IF EXISTS {own_space(self.tmp)} CASCADE")
        elif self.kind.module == "mysql":
            import pymysql

            address = urlsplit(os.environ["TENURE_TEST_MYSQL_URL"])
            db = pymysql.connect(host=address.hostname, port=address.port, user="root",
                                 database="tenure")
            with db, db.cursor() as cursor:
                table = own_space(self.tmp)
                cursor.execute(f"DROP TABLE IF EXISTS `{table}`, `{table}_counters`")
        elif self.kind.name == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.tmp}/locks.db{suffix}").unlink(missing_ok=True)
        else:
            shutil.rmtree(self.tmp / "locks")

    async def close_all(self) -> None:
        for store in reversed(self._stores):
            await call(store.close())
        self._stores.clear()

    # -- other holders ----------------------------------------------------------------------

    def spawn(self, mode: str, name: str, **options: Any) -> subprocess.Popen[str]:
        """A worker in a real OS process (see worker.py)."""
        return subprocess.Popen(
            [sys.executable, str(WORKER), self.url, self.api, mode, name, json.dumps(options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def hold_in_process(self, name: str, ttl: float,
                        mode: str = "hold") -> tuple[subprocess.Popen[str], int]:
        """Start a worker (hold, serve or exit mode) that takes `name` and keeps it; returns
        the process and its token once it holds the lease."""
        process = self.spawn(mode, name, ttl=ttl)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("HELD"), f"holder process failed to acquire: {line!r}"
        return process, int(line.split()[1])

    async def run_contenders(self, mode: str, name: str, contenders: int, **options: Any) -> None:
        """`contenders` doing worker cycles: OS processes where the store is shared
        between processes, else threads (sync) or tasks (async) of this process."""
        import worker  # tests/conformance is on sys.path (rootdir-relative import)

        options.setdefault("ttl", self.ttl(5.0))

        if self.kind.shared_between_processes:
            processes = [self.spawn(mode, name, **options) for _ in range(contenders)]
            run_together(processes, 120)
        elif self.is_async:
            stores = [self.connect() for _ in range(contenders)]
            await asyncio.gather(*(worker.cycles_async(s, mode, name, options) for s in stores))
        else:
            errors: list[BaseException] = []

            def run(store: Any) -> None:
                try:
                    worker.cycles_sync(store, mode, name, options)
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(self.connect(),))
                       for _ in range(contenders)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert not errors, errors


@pytest.fixture(params=STORE_KINDS, ids=lambda kind: kind.name)
def store_kind(request: pytest.FixtureRequest) -> StoreKind:
    kind: StoreKind = request.param
    kind.start_service(request)
    return kind


@pytest.fixture(params=["sync", "async"])
async def target(request: pytest.FixtureRequest, store_kind: StoreKind,
                 tmp_path: Path) -> AsyncIterator[Target]:
    target = Target(store_kind, request.param, tmp_path, store_kind.make_url(tmp_path))
    yield target
    await target.close_all()


@pytest.fixture(params=[kind for kind in STORE_KINDS if kind.restart_keeps_data is not None],
                ids=lambda kind: kind.name)
def server_kind(request: pytest.FixtureRequest) -> StoreKind:
    """The stores whose server the tests may restart and cut off."""
    kind: StoreKind = request.param
    kind.start_service(request)
    return kind


@pytest.fixture(params=["sync", "async"])
async def server_target(request: pytest.FixtureRequest, server_kind: StoreKind,
                        tmp_path: Path) -> AsyncIterator[tuple[Target, Any]]:
    """A Target on a server-backed store, with the server object (restart, drop_connections)."""
    assert server_kind.service is not None
    server = request.getfixturevalue(server_kind.service)
    target = Target(server_kind, request.param, tmp_path, server_kind.make_url(tmp_path))
    yield target, server
    await target.close_all()


@pytest.fixture(params=["lock", "semaphore(1)"])
def make_lock(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A lock, or a semaphore of one: the lock tests hold for both."""
    if request.param == "lock":
        return lambda store, name, **options: store.lock(name, **options)
    return lambda store, name, **options: store.semaphore(name, 1, **options)


class CountingTries:
    """A lock's backend that counts its tries: try_acquire calls and, on a store whose waits
    take the lease (wait_and_acquire), those waits too (everything else passes through)."""

    def __init__(self, inner: Any, is_async: bool) -> None:
        self.inner, self.tries = inner, 0
        self.try_acquire = self._counted(inner.try_acquire, is_async)
        waits = getattr(inner, "wait_and_acquire", None)
        if waits is not None:
            self.wait_and_acquire = self._counted(waits, is_async)

    def _counted(self, method: Any, is_async: bool) -> Any:
        if is_async:
            async def counted(*args: Any) -> Any:
                self.tries += 1
                return await method(*args)
            return counted

        def counted_sync(*args: Any) -> Any:
            self.tries += 1
            return method(*args)
        return counted_sync

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def count_tries(lock: Any, is_async: bool) -> CountingTries:
    """Make `lock` go through a CountingTries of its backend, and return the spy."""
    spy = lock._backend = CountingTries(lock._backend, is_async)
    lock._wait_and_acquire = getattr(spy, "wait_and_acquire", None)
    return spy


@contextlib.asynccontextmanager
async def entered(target: Target, context: Any) -> AsyncIterator[Any]:
    """`with context as lease:` (sync) or `async with context as lease:` (async)."""
    if target.is_async:
        async with context as lease:
            yield lease
    else:
        with context as lease:
            yield lease
