"""Runners outlive their store's outages: a worker process with a 1 s periodic job, a
leader-mode job, an election and an outbox relay keeps running through a restart of its store
(stopped, down a few seconds, started on the same port) and through a 5 s blackhole between
the worker and the store (tenure.chaos's proxy holds every byte while the connections stay
open), on every server store. After the fault heals every runner works again within ttl + one
period + the runners' retry cap (a generous sanity bound here: the benchmark
bench/outage_recovery.py measures the time), and the worker process never exits.

Each test starts its own server (they start in about a second) and its own worker process
(tests/support/outage_worker.py), so the tests run independently under pytest-xdist and a restart
disturbs no other test. The relay's outbox lives in the store's own database on PostgreSQL and
MariaDB, and in a SQLite file next to Redis and Azurite (which still tests the worker around
the relay).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from servers import (
    Azurite,
    LocalServer,
    MariaDBServer,
    PostgresServer,
    RedisServer,
    start_or_skip,
)

from tenure import outbox
from tenure.chaos._proxy import Proxy, ProxyHost

pytestmark = pytest.mark.slow

EXCEPTION = re.compile(r"^[\s|+]*((?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Group|Unavailable|"
                       r"Refused|Lost|Timeout)\b(?:: |$).*)$", re.MULTILINE)
CHILD = Path(__file__).resolve().parents[1] / "support" / "outage_worker.py"
PERIOD = 1.0  # the jobs' interval
TTL = {"redis": 3.0, "postgres": 3.0, "mariadb": 3.0, "azurite": 15.0}  # azblob: 15 s minimum
# Every store call ends within `timeout` (default 5 s): shorter than the blackhole here, so the
# calls that were in flight when it began fail with StoreUnavailable before it heals.
TIMEOUT = {"redis": 2.0, "postgres": 2.0, "mariadb": 2.0, "azurite": 3.0}
DOWN = 3.0  # how long a restarted store stays down
BLACKHOLE = 5.0
# The runners' longest wait between two tries while the store is unreachable
# (tenure.jobs._outage), and room for a machine shared with other test processes: a sanity
# bound, the benchmark has the figures.
SLACK = 20.0
READY_TIMEOUT = 60.0  # first runs: imports, first connections, a new Redis' restart grace


def retry_cap() -> float:
    """The runners' longest wait between retries (tenure.jobs._outage.RETRY_CAP); 30 s
    (generous) in a tree without it."""
    try:
        from tenure.jobs._outage import RETRY_CAP
    except ImportError:
        return 30.0
    return float(RETRY_CAP)


# -- the store under test ----------------------------------------------------------------------

@dataclass
class Store:
    """A store's own server, how the worker reaches it (directly or through `proxy`) and where
    the relay's outbox lives."""

    kind: str
    server: LocalServer
    tmp: Path
    proxy: Proxy | None = None
    host: ProxyHost | None = None
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def port(self) -> int:
        return self.proxy.port if self.proxy is not None else self.server.port

    def worker_url(self) -> tuple[str, dict[str, str]]:
        """The store URL the worker connects to, and environment variables it needs."""
        port = self.port
        if self.kind == "redis":
            return f"redis://127.0.0.1:{port}/0", {}
        if self.kind == "postgres":
            return f"postgresql://postgres@127.0.0.1:{port}/postgres", {}
        if self.kind == "mariadb":
            return f"mysql://root@127.0.0.1:{port}/tenure", {}
        assert isinstance(self.server, Azurite)
        connection_string = self.server.connection_string.replace(
            f"127.0.0.1:{self.server.port}/", f"127.0.0.1:{port}/")
        return f"azblob:///outage-{self.tag}", {"AZURE_STORAGE_CONNECTION_STRING":
                                                connection_string}

    def outbox_url(self, through_proxy: bool) -> str:
        """SQLAlchemy URL of the relay's database (the store's own for the SQL stores)."""
        port = self.port if through_proxy else self.server.port
        if self.kind == "postgres":
            return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        if self.kind == "mariadb":
            return f"mysql+pymysql://root@127.0.0.1:{port}/tenure"
        return f"sqlite:///{self.tmp / 'outbox.db'}"

    @property
    def outbox(self) -> outbox.Outbox:
        return outbox.Outbox(table_name=f"outbox_{self.tag}")

    def add_message(self) -> str:
        """A new outbox message, written directly (not through the proxy); its id."""
        engine = sa.create_engine(self.outbox_url(through_proxy=False))
        try:
            with engine.begin() as conn:
                return self.outbox.add(conn, "outage.test", {"at": time.time()})
        finally:
            engine.dispose()


SERVERS: dict[str, type[LocalServer]] = {"redis": RedisServer, "postgres": PostgresServer,
                                         "mariadb": MariaDBServer, "azurite": Azurite}


@contextlib.contextmanager
def own_store(kind: str, tmp: Path, proxied: bool) -> Iterator[Store]:
    """A server of this test's own (a restart here disturbs no other test), with a proxy in
    front when `proxied`, and the outbox table created."""
    server = start_or_skip(SERVERS[kind](tmp))
    host = ProxyHost() if proxied else None
    try:
        store = Store(kind, server, tmp, host.add("127.0.0.1", server.port) if host else None,
                      host)
        engine = sa.create_engine(store.outbox_url(through_proxy=False))
        try:
            store.outbox.create_tables(engine)
        finally:
            engine.dispose()
        yield store
    finally:
        if host is not None:
            host.close()
        server.stop(graceful=False)
        cleanup = getattr(server, "cleanup", None)
        if cleanup is not None:
            cleanup()


# -- the worker process ------------------------------------------------------------------------

class WorkerProcess:
    """tests/support/outage_worker.py in a process of its own; its JSON-line events as they come."""

    def __init__(self, store: Store, api: str, through_proxy: bool) -> None:
        url, env = store.worker_url()
        settings = {"url": url, "api": api, "ttl": TTL[store.kind], "tag": store.tag,
                    "options": {"timeout": TIMEOUT[store.kind]},
                    "outbox_url": store.outbox_url(through_proxy),
                    "outbox_table": store.outbox.table.name}
        self.stderr_path = store.tmp / "worker.stderr"
        self.events: list[dict[str, Any]] = []
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(settings)], stdout=subprocess.PIPE,
                stderr=stderr, stdin=subprocess.DEVNULL, text=True,
                env={**os.environ, **env})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def stderr_tail(self, chars: int = 3000) -> str:
        """The exceptions the worker's stderr names (once each), then its last `chars`."""
        text = self.stderr_path.read_text(errors="replace")
        named = dict.fromkeys(match.group(1).strip()[:300] for match in EXCEPTION.finditer(text))
        return "exceptions: " + " | ".join(named) + "\n...\n" + text[-chars:]

    def check_alive(self) -> None:
        """Fail the test at once when the worker process has exited."""
        code = self.process.poll()
        if code is not None:
            pytest.fail(f"the worker process exited with status {code}; its stderr ends:\n"
                        f"{self.stderr_tail()}")

    def seen(self, event: str, after: float = 0.0,
             where: Callable[[dict[str, Any]], bool] = lambda event: True) -> float | None:
        """The time of the first `event` after `after` that satisfies `where`, or None."""
        for entry in list(self.events):
            if entry["event"] == event and entry["t"] > after and where(entry):
                return float(entry["t"])
        return None

    def wait_for(self, what: Callable[[], object], timeout: float,
                 description: Callable[[], str]) -> None:
        """Wait for `what` with a deadline, failing at once if the process exits."""
        deadline = time.monotonic() + timeout
        while not what():
            self.check_alive()
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:g} s waiting for {description()}; the "
                            f"worker's stderr ends:\n{self.stderr_tail()}")
            time.sleep(0.02)  # polling a condition with a deadline

    def live_through(self, seconds: float) -> None:
        """The fault's own duration: `seconds`, checking all along that the process lives."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.check_alive()
            time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 15 s; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._reader.join(timeout=5)
        return self.process.returncode


def runners_work(worker: WorkerProcess, store: Store, after: float,
                 timeout: float) -> dict[str, float]:
    """Wait until every runner did its work after `after` (a new message is added to the outbox
    then); returns the seconds from `after` to each runner's first sign."""
    message = store.add_message()
    signs = {
        "periodic job": lambda: worker.seen("every", after),
        "leader-mode job": lambda: worker.seen("leader", after),
        "election held": lambda: worker.seen("every", after, lambda e: e["leading"]),
        "outbox relayed": lambda: worker.seen("relayed", 0.0, lambda e: e["id"] == message),
    }
    found: dict[str, float] = {}

    def all_seen() -> bool:
        for name, sign in signs.items():
            if name not in found:
                at = sign()
                if at is not None:
                    found[name] = max(0.0, at - after)
        return len(found) == len(signs)

    worker.wait_for(all_seen, timeout, lambda: "every runner to work again: missing " + ", ".join(
        name for name in signs if name not in found))
    return found


@contextlib.contextmanager
def running_worker(store: Store, api: str, through_proxy: bool) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(store, api, through_proxy)
    try:
        worker.wait_for(lambda: worker.seen("ready"), READY_TIMEOUT, lambda: "the worker to start")
        runners_work(worker, store, 0.0, READY_TIMEOUT)
        yield worker
        worker.check_alive()
    finally:
        code = worker.stop()
    assert code == 0, f"the worker ended with status {code}:\n{worker.stderr_tail()}"


def quiet_during(worker: WorkerProcess, began: float, ended: float) -> None:
    """The fault landed: no periodic run completed from a period after it began (a run that
    had its lease already may finish) until it ended."""
    runs = [e["t"] - began for e in worker.events
            if e["event"] == "every" and began + PERIOD + 0.5 < e["t"] < ended]
    assert not runs, f"the periodic job ran during the fault (at +{runs} s): it did not land"


def bound(kind: str) -> float:
    return TTL[kind] + PERIOD + retry_cap() + SLACK


# -- the faults --------------------------------------------------------------------------------

STORES = ["redis", "postgres", "mariadb", "azurite"]


def restart(store: Store, worker: WorkerProcess) -> None:
    """Stop the store's server, keep it down DOWN seconds, start it on the same port."""
    began = time.monotonic()
    store.server.stop()
    worker.live_through(DOWN)
    quiet_during(worker, began, time.monotonic())
    store.server.start_again()


def blackhole(store: Store, worker: WorkerProcess) -> None:
    """The proxy holds every byte both ways for BLACKHOLE seconds, connections left open."""
    assert store.host is not None and store.proxy is not None
    began = time.monotonic()
    store.host.set_mode(store.proxy, "blackhole")
    worker.live_through(BLACKHOLE)
    quiet_during(worker, began, time.monotonic())
    store.host.set_mode(store.proxy, "normal")


@pytest.mark.parametrize("kind", STORES)
def test_runners_live_through_a_store_restart(kind: str, tmp_path: Path) -> None:
    with own_store(kind, tmp_path, proxied=False) as store, \
            running_worker(store, "sync", through_proxy=False) as worker:
        restart(store, worker)
        back = time.monotonic()
        took = runners_work(worker, store, back, bound(kind))
        print(f"{kind} restart: back to work after {took}")


@pytest.mark.parametrize("kind", STORES)
def test_runners_live_through_a_blackhole(kind: str, tmp_path: Path) -> None:
    with own_store(kind, tmp_path, proxied=True) as store, \
            running_worker(store, "sync", through_proxy=True) as worker:
        blackhole(store, worker)
        healed = time.monotonic()
        took = runners_work(worker, store, healed, bound(kind))
        print(f"{kind} blackhole: back to work after {took}")


@pytest.mark.parametrize("fault", ["restart", "blackhole"])
def test_async_runners_live_through_a_postgres_fault(fault: str, tmp_path: Path) -> None:
    proxied = fault == "blackhole"
    with own_store("postgres", tmp_path, proxied=proxied) as store, \
            running_worker(store, "async", through_proxy=proxied) as worker:
        if proxied:
            blackhole(store, worker)
        else:
            restart(store, worker)
        healed = time.monotonic()
        took = runners_work(worker, store, healed, bound("postgres"))
        print(f"async postgres {fault}: back to work after {took}")
