"""Runners never die of their store: tenure.Worker and tenure.aio.AsyncWorker with a 1 s
periodic job, a leader-mode job and an election keep running while Redis or PostgreSQL is
stopped for a few seconds and started again on the same port, resume within ttl + one period +
the retry cap, and log the outage exactly once (one WARNING when it starts, one INFO when it
ends); health() answers meanwhile from the instance's own state. `tenure run` survives the same
and exits 0 on SIGTERM; a wrong password at start-up stops it with status 2 and one line; a
refusal while running makes /health 503 until the credentials are fixed, without a restart; a
queue job lives through a restart of its PostgreSQL queue source.

Every test starts its own servers (module scope), so a stop disturbs no other test. The cross-
store fault matrix (restarts and blackholes on every server store, in worker processes) is in
tests/jobs/test_outages.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
import redis
from servers import PostgresServer, RedisServer, start_or_skip
from waiting import wait_until

import tenure
import tenure.aio
from tenure.jobs import AsyncWorker, Worker, serve_health
from tenure.jobs._outage import RETRY_CAP
from tenure.jobs._worker import HEALTH_READ_TIMEOUT
from tenure.queues import PostgresQueue

pytestmark = pytest.mark.slow

PERIOD = 1.0
TTL = 10.0  # longer than the outage: the leader and the election keep their leases through it
DOWN = 3.0  # how long a stopped server stays down
BOUND = TTL + PERIOD + RETRY_CAP  # every runner works again within this after the restart
READY = 30.0  # first runs: imports, connections, a new Redis' 2 s restart grace
PASSWORD = "sekrit-9f2c"


class PasswordRedis(RedisServer):
    """redis-server that requires PASSWORD."""

    def command(self, port: int) -> list[str]:
        return [*super().command(port), "--requirepass", PASSWORD]


@pytest.fixture(scope="module")
def redis_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_or_skip(RedisServer(tmp_path_factory.mktemp("outage-redis")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def postgres_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = start_or_skip(PostgresServer(tmp_path_factory.mktemp("outage-postgres")))
    yield server
    server.stop()
    server.cleanup()


@pytest.fixture
def servers(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    return lambda kind: request.getfixturevalue(f"{kind}_own")


def hold_down(since: float) -> None:
    """Keep the fault on until DOWN seconds after `since` (the fault's length, not a wait for
    something to happen)."""
    time.sleep(max(0.0, since + DOWN - time.monotonic()))


def outage_lines(records: list[logging.LogRecord]) -> tuple[list[str], list[str]]:
    """tenure.jobs' warnings and its 'reachable again' lines."""
    warnings = [r.getMessage() for r in records
                if r.name.startswith("tenure.jobs") and r.levelno >= logging.WARNING]
    ends = [r.getMessage() for r in records
            if r.name.startswith("tenure.jobs") and "reachable again" in r.getMessage()]
    return warnings, ends


# -- in-process workers ----------------------------------------------------------------------


class Harness:
    """A worker running in the background (sync: start()/stop(); async: on a portal's loop)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.is_async = isinstance(worker, AsyncWorker)

    def health(self) -> dict[str, Any]:
        if self.is_async:
            report: dict[str, Any] = self.portal.call(self.worker.health)
            return report
        return dict(self.worker.health())

    @contextmanager
    def running(self) -> Iterator[Harness]:
        if not self.is_async:
            self.worker.start()
            try:
                yield self
            finally:
                self.worker.stop(timeout=60)
            return
        with anyio.from_thread.start_blocking_portal() as portal:
            self.portal = portal
            done = portal.start_task_soon(self.worker.run)
            wait_until(lambda: self.worker.running or done.done(), 10, "the worker to start")
            try:
                yield self
                assert not done.done(), f"the worker stopped: {done.exception()!r}"
            finally:
                portal.call(self.worker.stop)
                done.result(timeout=60)


def connect(api: str, url: str) -> Any:
    if api == "sync":
        return tenure.connect(url)
    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(_aconnect, url)


async def _aconnect(url: str) -> Any:
    return tenure.aio.connect(url)


def make_worker(api: str, url: str, tag: str, events: dict[str, list[float]]) -> Any:
    """A 1 s job, a leader-mode job and an election, each appending its time to `events`."""
    worker = (Worker if api == "sync" else AsyncWorker)(connect(api, url), grace=5)

    def note(what: str) -> Callable[..., None]:
        return lambda *_: events[what].append(time.monotonic())

    worker.every(PERIOD, name=f"tick-{tag}", jitter=0, ttl=TTL, unhealthy_after=10)(
        note("tick"))
    worker.every(PERIOD, name=f"lead-{tag}", leader=True, ttl=TTL, unhealthy_after=10)(
        note("lead"))
    worker.election(f"primary-{tag}", ttl=TTL, on_elected=note("elected"),
                    on_lost=note("unelected"))
    return worker


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_a_worker_runs_through_a_store_restart(kind: str, api: str,
                                               servers: Callable[[str], Any],
                                               caplog: pytest.LogCaptureFixture) -> None:
    server = servers(kind)
    caplog.set_level(logging.INFO, logger="tenure")
    events: dict[str, list[float]] = {"tick": [], "lead": [], "elected": [], "unelected": []}
    tag = uuid.uuid4().hex[:8]
    worker = make_worker(api, server.url, tag, events)
    election = worker._elections[f"primary-{tag}"]
    with Harness(worker).running() as harness:
        wait_until(lambda: events["tick"] and events["lead"] and election.is_leader, READY,
                   "every runner working before the fault")
        caplog.clear()
        server.stop()
        stopped = time.monotonic()
        wait_until(lambda: worker._locks.outage.down, 10, "the worker to see the store down")
        report = harness.health()  # never raises while the store is down
        assert report["store"]["reachable"] is False and report["store"]["since"]
        assert report["store"]["permanent"] is False and report["healthy"] is True
        hold_down(stopped)
        server.start_again()
        back = time.monotonic()

        def resumed(what: str) -> float | None:
            after = [moment for moment in events[what] if moment > back]
            return after[0] - back if after else None

        wait_until(lambda: resumed("tick") is not None and resumed("lead") is not None
                   and election.is_leader, BOUND + 20, "every runner working again")
        assert worker.running
        report = harness.health()
        assert report["store"]["reachable"] is True
        assert events["unelected"] == [], "the election lost its lease during a 3 s outage"
    for what in ("tick", "lead"):
        took = resumed(what)
        assert took is not None and took <= BOUND, f"{what} resumed {took:.1f} s after restart"
    warnings, ends = outage_lines(caplog.records)
    outage_warnings = [line for line in warnings if "cannot reach store" in line]
    assert len(outage_warnings) == 1, warnings
    assert len(ends) == 1, ends
    # Besides the one warning, only a period that ran as the store went away may be reported.
    assert [line for line in warnings if line not in outage_warnings
            and "could not be recorded" not in line] == []


PAUSE = 1.4  # how long Redis holds every command back, a little longer than a period


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_lease_the_store_granted_late_runs_the_period_under_way(
        api: str, redis_own: RedisServer) -> None:
    """A store that answers the acquire after the next period began (Redis paused here; in CI
    a restart on a loaded machine) gives the lease to the period under way, not to the one it
    was asked for: that one's successor has begun, and where a restart had lost the records
    meanwhile, the old period ran a second time (the jobs chaos run on Redis recorded a period
    twice, its second run 2.1 s after the period began)."""
    runs: list[tuple[float, float]] = []  # (the period's start, when its run began), epoch s
    worker = (Worker if api == "sync" else AsyncWorker)(connect(api, redis_own.url), grace=5)
    worker.every(PERIOD, name=f"late-{uuid.uuid4().hex[:8]}", jitter=0, ttl=TTL)(
        lambda run: runs.append((run.period_start.timestamp(), time.time())))
    with Harness(worker).running(), redis.Redis(port=redis_own.port) as admin:
        wait_until(lambda: runs, READY, "a first run")
        # The fault's timing, not a wait for something: hold Redis from just before the next
        # period starts (its acquire is sent then) to past the one after it.
        time.sleep((PERIOD - time.time() % PERIOD - 0.15) % PERIOD)
        admin.client_pause(int(PAUSE * 1000), all=True)
        resumed = time.time() + PAUSE
        wait_until(lambda: any(began > resumed for _, began in runs), 10,
                   "a run after the pause")
    assert [(start, began) for start, began in runs if began >= start + PERIOD] == [], runs


def test_health_turns_unhealthy_once_a_job_misses_its_periods_and_back(
        redis_own: RedisServer) -> None:
    worker = Worker(tenure.connect(redis_own.url), grace=5)
    ran: list[float] = []

    @worker.every(0.5, name=f"fast-{uuid.uuid4().hex[:8]}", jitter=0, unhealthy_after=2)
    def fast(run: tenure.Run) -> None:
        ran.append(time.monotonic())

    with Harness(worker).running(), serve_health(worker) as server:
        wait_until(lambda: ran and probe(server.url)[0] == 200, READY, "a healthy worker")
        redis_own.stop()
        try:
            wait_until(lambda: probe(server.url)[0] == 503, 10, "/health 503 during the outage")
            report = probe(server.url)[1]
            assert report["store"]["reachable"] is False
            assert probe(server.url, "/ready")[0] == 503
        finally:
            redis_own.start_again()
        wait_until(lambda: probe(server.url)[0] == 200, BOUND + 20, "/health 200 again")


def probe(base: str, path: str = "/health") -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_wrong_password_at_start_up_raises_store_refused_itself(api: str,
                                                                  tmp_path: Path) -> None:
    server = start_or_skip(PasswordRedis(tmp_path))
    try:
        worker = (Worker if api == "sync" else AsyncWorker)(
            connect(api, f"redis://:wrong@127.0.0.1:{server.port}/0"), grace=1)
        worker.every(PERIOD, name="refused")(lambda run: None)
        with pytest.raises(tenure.StoreRefused) as raised:
            if api == "sync":
                worker.run()
            else:
                anyio.run(worker.run)
        assert "authentication" in str(raised.value) and "wrong" not in str(raised.value)
    finally:
        server.stop()


def test_a_closed_store_at_start_up_raises_store_refused_itself() -> None:
    store = tenure.connect("memory://")
    worker = Worker(store, grace=1)
    worker.election("closed")
    store.close()
    with pytest.raises(tenure.StoreRefused, match="closed"):
        worker.run()


def test_async_with_worker_raises_store_refused_itself_at_exit() -> None:
    async def main() -> None:
        store = tenure.aio.connect("memory://")
        worker = AsyncWorker(store, grace=1)
        worker.election("closed")
        await store.close()
        async with worker:
            await anyio.sleep(0)
            with anyio.fail_after(10):
                while worker.running:
                    await anyio.sleep(0.01)

    with pytest.raises(tenure.StoreRefused, match="closed"):
        anyio.run(main)


def test_a_refusal_while_running_is_503_until_fixed_without_a_restart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    server = start_or_skip(RedisServer(tmp_path))
    admin = redis.Redis(port=server.port)
    ran: list[float] = []
    worker = Worker(tenure.connect(server.url), grace=5)

    @worker.every(PERIOD, name="guarded", jitter=0)
    def guarded(run: tenure.Run) -> None:
        ran.append(time.monotonic())

    try:
        with Harness(worker).running(), serve_health(worker) as health:
            wait_until(lambda: ran and probe(health.url)[0] == 200, READY, "a healthy worker")
            admin.config_set("requirepass", PASSWORD)  # the credentials are now wrong
            admin = redis.Redis(port=server.port, password=PASSWORD)
            admin.client_kill_filter(_type="normal", skipme=True)
            wait_until(lambda: probe(health.url)[0] == 503 and errors(caplog), 15,
                       "/health 503 and an ERROR line while refused")
            report = probe(health.url)[1]
            assert report["store"]["permanent"] is True and PASSWORD not in json.dumps(report)
            admin.config_set("requirepass", "")  # fixed: no restart needed
            fixed = time.monotonic()
            wait_until(lambda: [t for t in ran if t > fixed] and probe(health.url)[0] == 200,
                       PERIOD + RETRY_CAP + 20, "runs and /health 200 again")
    finally:
        admin.close()
        server.stop()
    assert all("refused" in line and PASSWORD not in line for line in errors(caplog))
    assert any("reachable again" in r.getMessage() for r in caplog.records)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_store_that_refuses_writes_is_one_outage_and_runs_each_period_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Redis turned replica answers reads and refuses writes (READONLY). Before: a read ended
    the outage each time (a WARNING and an INFO line every ~2 s, health flapping), and a
    leader whose record write failed ran the same period again at once, thousands of times."""
    caplog.set_level(logging.INFO, logger="tenure")
    server = start_or_skip(RedisServer(tmp_path))
    admin = redis.Redis(port=server.port)
    runs: dict[str, list[str]] = {"tick": [], "lead": []}
    ran_at: list[float] = []
    worker = Worker(tenure.connect(server.url), grace=5)

    @worker.every(PERIOD, name="tick", jitter=0, ttl=TTL)
    def tick(run: tenure.Run) -> None:
        runs["tick"].append(run.period_start.isoformat())

    @worker.every(PERIOD, name="lead", jitter=0, ttl=TTL, leader=True)
    def lead(run: tenure.Run) -> None:
        runs["lead"].append(run.period_start.isoformat())
        ran_at.append(time.monotonic())

    try:
        with Harness(worker).running() as harness:
            wait_until(lambda: runs["tick"] and runs["lead"], READY, "both jobs running")
            caplog.clear()
            admin.replicaof("127.0.0.1", _free_port())  # a master that is not there
            wait_until(lambda: worker._locks.outage.down, 15, "the outage to open")
            until = time.monotonic() + 6 * PERIOD
            while time.monotonic() < until:  # the fault's length, sampling health meanwhile
                assert harness.health()["store"]["reachable"] is False
                time.sleep(0.2)
            assert [r for r in caplog.records if "reachable again" in r.getMessage()] == []
            admin.replicaof("no", "one")
            back = time.monotonic()
            wait_until(lambda: not worker._locks.outage.down, BOUND + 20, "the outage to end")
            wait_until(lambda: [t for t in ran_at if t > back], BOUND + 20,
                       "the leader job to run again")
    finally:
        admin.close()
        server.stop()
    warnings, ends = outage_lines(caplog.records)
    assert len([line for line in warnings if "cannot reach store" in line]) == 1, warnings
    assert len(ends) == 1, ends
    for job, periods in runs.items():
        assert len(periods) == len(set(periods)), f"{job}: a period ran twice: {periods}"


def test_sync_health_answers_within_its_bound_from_a_store_that_hangs(
        tmp_path: Path) -> None:
    """Like the async worker's, the sync health() waits at most HEALTH_READ_TIMEOUT for the
    records (a frozen Redis: SIGSTOP), then answers from this instance's own state."""
    server = start_or_skip(RedisServer(tmp_path))
    worker = Worker(tenure.connect(server.url + "?timeout=30"), grace=5)
    worker.every(60, name="idle", jitter=0)(lambda run: None)
    assert worker.health()["store"]["reachable"] is True
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        for _ in range(2):  # the second while the first read still hangs
            began = time.monotonic()
            report = worker.health()
            took = time.monotonic() - began
            assert took < HEALTH_READ_TIMEOUT + 1.0, f"health() took {took:.1f} s"
            assert report["store"]["reachable"] is False
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        server.stop()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tenure.jobs" and r.levelno == logging.ERROR]


# -- queue jobs ------------------------------------------------------------------------------


def keyed_queue_worker(lock_url: str, postgres_url: str,
                       name: str) -> tuple[AsyncWorker, list[int], PostgresQueue]:
    """An AsyncWorker taking its locks at `lock_url`, with a job `<name>.handle` by the
    messages' "Key" on a new PostgreSQL queue `<name>-<random>`; the list of the "n" of each
    message it handled; a sender to that queue.

    Example::

        worker, handled, sender = keyed_queue_worker(redis_own.url, postgres_own.url, "q")
    """
    queue_name = f"{name}-{uuid.uuid4().hex[:8]}"
    handled: list[int] = []
    worker = AsyncWorker(connect("async", lock_url), grace=5)

    @worker.queue(PostgresQueue(queue_name, postgres_url), scope="Key", max_poll=0.5,
                  name=f"{name}.handle")
    async def handle(message: tenure.queues.Message) -> None:
        handled.append(message.body["n"])

    return worker, handled, PostgresQueue(queue_name, postgres_url)


def first_message_handled(harness: Harness, sender: PostgresQueue, handled: list[int],
                          caplog: pytest.LogCaptureFixture) -> None:
    """Send message 1 (key "a") and wait until the worker handled it; the log starts afresh
    (tenure's INFO lines and above).

    Example::

        first_message_handled(harness, sender, handled, caplog)
    """
    caplog.set_level(logging.INFO, logger="tenure")
    harness.portal.call(sender.send, {"Key": "a", "n": 1})
    wait_until(lambda: 1 in handled, READY, "message 1 handled")
    caplog.clear()


def test_a_queue_job_lives_through_a_restart_of_its_postgres_source(
        postgres_own: PostgresServer, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    worker, handled, sender = keyed_queue_worker(f"sqlite:///{tmp_path / 'locks.db'}",
                                                 postgres_own.url, "outage")
    with Harness(worker).running() as harness:
        first_message_handled(harness, sender, handled, caplog)
        postgres_own.stop()
        stopped = time.monotonic()
        consumer = worker._consumers[0]
        wait_until(lambda: consumer.outage.down, 15, "the consumer to see its source down")
        assert harness.health()["queue_sources"][sender.name]["reachable"] is False
        hold_down(stopped)
        postgres_own.start_again()
        back = time.monotonic()
        # The same sender: its pooled connection died with the server, and is replaced.
        harness.portal.call(sender.send, {"Key": "a", "n": 2})
        wait_until(lambda: 2 in handled, RETRY_CAP + 20, "message 2 handled after the restart")
        took = time.monotonic() - back
        harness.portal.call(sender.close)
    assert took <= BOUND
    warnings, ends = outage_lines(caplog.records)
    assert len([line for line in warnings if "cannot reach queue source" in line]) == 1, warnings
    assert len(ends) == 1, ends


def test_a_queue_job_waits_out_a_restart_of_its_lock_store(
        redis_own: RedisServer, postgres_own: PostgresServer,
        caplog: pytest.LogCaptureFixture) -> None:
    worker, handled, sender = keyed_queue_worker(redis_own.url, postgres_own.url, "lockstore")
    with Harness(worker).running() as harness:
        first_message_handled(harness, sender, handled, caplog)
        redis_own.stop()
        stopped = time.monotonic()
        harness.portal.call(sender.send, {"Key": "a", "n": 2})  # waits for its scope lock
        wait_until(lambda: worker._locks.outage.down, 15, "the consumer to see its lock store down")
        hold_down(stopped)
        assert 2 not in handled
        redis_own.start_again()
        back = time.monotonic()
        wait_until(lambda: 2 in handled, BOUND + 20, "message 2 handled after the restart")
        took = time.monotonic() - back
        harness.portal.call(sender.close)
    assert took <= BOUND and handled.count(2) == 1
    warnings, ends = outage_lines(caplog.records)
    assert len([line for line in warnings if "cannot reach store" in line]) == 1, warnings
    assert len(ends) == 1, ends


def test_a_queue_source_that_refuses_at_start_up_stops_the_worker(
        postgres_own: PostgresServer, tmp_path: Path) -> None:
    worker = AsyncWorker(connect("async", f"sqlite:///{tmp_path / 'locks.db'}"), grace=1)
    missing = postgres_own.url.rsplit("/", 1)[0] + "/no_such_database"

    @worker.queue(PostgresQueue("refused", missing), name="refused.handle")
    async def handle(message: tenure.queues.Message) -> None: ...

    with pytest.raises(tenure.StoreRefused, match="does not exist"):
        anyio.run(worker.run)


def test_an_azure_queue_with_a_wrong_key_stops_the_worker_at_start_up(
        azurite_queue: Any, tmp_path: Path) -> None:
    from tenure.queues import AzureQueue

    key = azurite_queue.connection_string.split("AccountKey=")[1].split(";")[0]
    wrong = azurite_queue.connection_string.replace(key, "d3Jvbmcta2V5" * 7 + "AA==")
    worker = AsyncWorker(connect("async", f"sqlite:///{tmp_path / 'locks.db'}"), grace=1)

    @worker.queue(AzureQueue("refused-key", connection_string=wrong), name="azure.handle")
    async def handle(message: tenure.queues.Message) -> None: ...

    with pytest.raises(tenure.StoreRefused, match="HTTP 403") as raised:
        anyio.run(worker.run)
    assert "d3Jvbmcta2V5" not in str(raised.value)


# -- tenure run ------------------------------------------------------------------------------

APP = '''
import os
import tenure

worker = tenure.Worker(tenure.connect(os.environ["TENURE_STORE"]), grace=5)


@worker.every(1, name="app.tick", jitter=0)
def tick(run):
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(f"{run.period_start.isoformat()}\\n")


worker.election("app.primary", ttl=10)
'''


def run_cli(tmp_path: Path, url: str) -> tuple[subprocess.Popen[str], Path, Path]:
    module = f"outageapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP)
    runs, stderr = tmp_path / "runs.txt", tmp_path / "stderr.txt"
    env = {key: value for key, value in os.environ.items() if not key.startswith("TENURE_")}
    env.update(RUNS_FILE=str(runs), PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "tenure", "run", f"{module}:worker", "--store", url],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=stderr.open("w"), text=True)
    return process, runs, stderr


def test_tenure_run_lives_through_a_redis_restart_and_exits_0_on_sigterm(
        redis_own: RedisServer, tmp_path: Path) -> None:
    process, runs, stderr = run_cli(tmp_path, redis_own.url)
    try:
        def ticks() -> int:
            return len(runs.read_text().splitlines()) if runs.exists() else 0

        wait_until(lambda: ticks() >= 1, READY, "the first tick")
        redis_own.stop()
        stopped = time.monotonic()
        wait_until(lambda: "cannot reach" in stderr.read_text(), 15, "the outage warning")
        hold_down(stopped)
        assert process.poll() is None, stderr.read_text()
        redis_own.start_again()
        before = ticks()
        wait_until(lambda: ticks() > before, BOUND + 20, "ticks after the restart")
        assert process.poll() is None, stderr.read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = stderr.read_text()
    assert "Traceback" not in log and "ExceptionGroup" not in log
    lines = log.splitlines()
    assert len([line for line in lines if " WARNING tenure.jobs" in line]) == 1, log
    assert len([line for line in lines if "reachable again" in line]) == 1, log


def test_tenure_run_with_a_wrong_password_exits_2_with_one_line(tmp_path: Path) -> None:
    server = start_or_skip(PasswordRedis(tmp_path))
    try:
        process, runs, stderr = run_cli(tmp_path,
                                        f"redis://:{PASSWORD}x@127.0.0.1:{server.port}/0")
        assert process.wait(timeout=60) == 2
    finally:
        server.stop()
    lines = stderr.read_text().splitlines()
    errors = [line for line in lines if line.startswith("tenure: error:")]
    assert len(errors) == 1 and "refused" in errors[0] and "password" in errors[0], lines
    assert [line for line in lines if line not in errors and " INFO " not in line] == []
    assert PASSWORD not in stderr.read_text()
    assert not runs.exists()


def test_a_worker_thread_is_not_left_running_by_a_fatal_error() -> None:
    store = tenure.connect("memory://")
    worker = Worker(store, grace=1)
    worker.election("closed-in-background")
    store.close()
    worker.start()
    wait_until(lambda: worker._thread_done.done(), 10, "the worker to stop by itself")
    with pytest.raises(tenure.StoreRefused):
        worker.stop(timeout=10)
    assert not worker.running
