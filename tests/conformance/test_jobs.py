"""Singleton jobs on every store, with real OS processes: each period runs exactly once across
instances, a killed holder's period is re-run elsewhere, SIGTERM hands over at once, and a lost
lease stops the job. Both Workers: the sync API runs tenure.Worker, the async one
tenure.aio.AsyncWorker (see jobs_worker.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Target, call
from waiting import eventually, wait_until

import tenure
from tenure.jobs import AsyncWorker, JobRecord, Run, Worker
from tenure.queues import QueueMessage

pytestmark = pytest.mark.anyio

JOBS_WORKER = Path(__file__).with_name("jobs_worker.py")


class Instances:
    """App instances (jobs_worker.py processes) sharing one store and one event log."""

    def __init__(self, target: Target, log: Path) -> None:
        self.target, self.log = target, log
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, count: int, **options: Any) -> list[subprocess.Popen[str]]:
        started = [subprocess.Popen(
            [sys.executable, str(JOBS_WORKER), self.target.url, self.target.api,
             str(self.log), json.dumps(options)], stdout=subprocess.PIPE, text=True)
            for _ in range(count)]
        for process in started:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "READY", "an instance failed to start"
        self.processes.extend(started)
        return started

    def events(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def terminate(self, process: subprocess.Popen[str], timeout: float = 30.0) -> int:
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def instances(target: Target, tmp_path: Path) -> Iterator[Instances]:
    if not target.kind.shared_between_processes:
        pytest.skip(f"{target.kind.name}:// lives inside one process; the in-process job tests "
                    "cover it")
    started = Instances(target, tmp_path / "events.jsonl")
    yield started
    started.stop_all()


def by_period(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        grouped[event["period"]].append(event)
    return grouped


def ended_periods(instances: Instances) -> list[str]:
    return sorted({e["period"] for e in instances.events() if e["event"] == "end"})


async def test_each_period_runs_exactly_once_across_5_instances(
        target: Target, instances: Instances) -> None:
    processes = instances.start(5, interval=1.0, ttl=target.ttl(2.0), hold=0.05)
    # 12 periods checked per store and API (240 in the suite): each costs a second of the
    # 20 runs, and `make test` keeps to 20 minutes on 2 cores.
    wait_until(lambda: len(ended_periods(instances)) >= 13, timeout=60,
               what="13 periods of a 1 s job")
    for process in processes:
        assert instances.terminate(process) == 0, "an instance did not stop cleanly on SIGTERM"

    grouped = by_period(instances.events())
    periods = ended_periods(instances)[1:]  # the first may have started before all were up
    starts = [datetime.fromisoformat(period) for period in periods]
    gaps = [later - earlier for earlier, later in pairwise(starts)]
    assert all(gap == timedelta(seconds=1) for gap in gaps), f"periods skipped: {periods}"
    for period in periods:
        kinds = sorted(event["event"] for event in grouped[period])
        assert kinds == ["end", "start"], f"period {period} ran {kinds}"
    tokens = [next(e["token"] for e in grouped[p] if e["event"] == "start") for p in periods]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    assert len({e["pid"] for p in periods for e in grouped[p]}) >= 1


async def test_a_killed_holder_s_period_is_re_run_by_another_instance(
        target: Target, instances: Instances) -> None:
    ttl = target.ttl(1.0)
    interval = ttl + 4.0  # room for the lease to expire and the period to run again in it
    instances.start(3, interval=interval, ttl=ttl, hold=1.0, poll=0.1)

    def on_time_starts() -> list[dict[str, Any]]:
        # The first period was already under way when the instances started (and was run late,
        # coalesced); kill a run of a period that began while they were all up.
        starts = [e for e in instances.events() if e["event"] == "start"]
        return [e for e in starts if e["period"] != starts[0]["period"]]

    wait_until(on_time_starts, timeout=2 * interval + 10, what="a run at a period start")
    first = on_time_starts()[0]
    victim = next(p for p in instances.processes if p.pid == first["pid"])
    victim.kill()
    victim.wait()
    killed_at = time.monotonic()

    def rerun() -> list[dict[str, Any]]:
        return [e for e in instances.events()
                if e["period"] == first["period"] and e["pid"] != first["pid"]]

    wait_until(lambda: any(e["event"] == "end" for e in rerun()), timeout=interval + 10,
               what=f"period {first['period']} re-run after its holder was killed")
    again = rerun()
    assert [e["event"] for e in again] == ["start", "end"], again
    assert again[0]["t"] > killed_at - 0.05 or target.kind.kernel_expiry, \
        "the period started again while its killed holder could still have been running"
    assert again[0]["token"] > first["token"]


async def test_sigterm_finishes_the_run_and_hands_over_at_once(
        target: Target, instances: Instances) -> None:
    ttl = target.ttl(6.0)
    leader_and_follower = instances.start(2, interval=1.0, ttl=ttl, hold=0.6, poll=0.1,
                                          leader=True, grace=10.0)
    wait_until(lambda: any(e["event"] == "start" for e in instances.events()), timeout=ttl + 10,
               what="the leader's first run")
    leader_pid = instances.events()[0]["pid"]
    leader = next(p for p in leader_and_follower if p.pid == leader_pid)
    wait_until(lambda: instances.events()[-1]["event"] == "start", timeout=10,
               what="the leader in the middle of a run")
    running = instances.events()[-1]
    assert instances.terminate(leader) == 0
    stopped_at = time.monotonic()
    finished = [e for e in instances.events()
                if e["period"] == running["period"] and e["pid"] == leader_pid]
    assert [e["event"] for e in finished] == ["start", "end"], \
        "SIGTERM must let the running job finish within the grace period"

    wait_until(lambda: any(e["pid"] != leader_pid and e["event"] == "end"
                           for e in instances.events()), timeout=ttl + 10,
               what="the follower's first run")
    follower_start = next(e for e in instances.events() if e["pid"] != leader_pid)
    assert follower_start["t"] - stopped_at < ttl / 2, (
        "the follower took over only after the lease expired: SIGTERM must release it")
    periods = [e["period"] for e in instances.events() if e["event"] == "end"]
    assert len(periods) == len(set(periods)), "a period ran twice around the hand-over"


async def test_a_killed_leader_is_replaced_within_ttl(target: Target,
                                                      instances: Instances) -> None:
    ttl = target.ttl(1.0)
    pair = instances.start(2, interval=0.5, ttl=ttl, hold=0.01, poll=0.1, leader=True)
    wait_until(lambda: len(ended_periods(instances)) >= 2, timeout=ttl + 10,
               what="the leader's first runs")
    leader_pid = instances.events()[0]["pid"]
    leader = next(p for p in pair if p.pid == leader_pid)
    leader.kill()
    leader.wait()
    killed_at = time.monotonic()
    wait_until(lambda: any(e["pid"] != leader_pid for e in instances.events()),
               timeout=ttl + 10, what="a new leader's first run")
    taken_over = next(e for e in instances.events() if e["pid"] != leader_pid)
    # generous: ttl + the poll interval + one 0.5 s period + scheduling
    assert taken_over["t"] - killed_at < ttl + 1.5


# -- in-process: a lost lease stops the job; its period is not recorded -----------------------


@pytest.mark.parametrize("leader", [False, True], ids=["take-turns", "leader"])
async def test_a_lost_lease_stops_the_job_and_leaves_the_period_unrecorded(
        target: Target, leader: bool) -> None:
    store, admin = target.connect(), target.connect()
    ttl = target.ttl(2.0)
    started, outcome = anyio.Event() if target.is_async else None, []

    if target.is_async:
        worker: Any = AsyncWorker(store, grace=5)

        @worker.every(timedelta(seconds=1), name="long", ttl=ttl, jitter=0, leader=leader)
        async def long_async(run: Run) -> None:
            assert started is not None
            started.set()
            try:
                await anyio.sleep(60)
            except BaseException:
                outcome.append("cancelled" if run.lease.lost else "other")
                raise

        async with worker:
            with anyio.fail_after(ttl + 10):
                await started.wait()
            assert await admin.break_lease("job:long") == 1
            with anyio.fail_after(ttl + 10):
                while not outcome:
                    await anyio.sleep(0.01)
    else:
        worker = Worker(store, grace=5)
        running = []

        @worker.every(timedelta(seconds=1), name="long", ttl=ttl, jitter=0, leader=leader)
        def long_sync(run: Run) -> None:
            running.append(run)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    run.check()
                except tenure.LeaseLost:
                    outcome.append("cancelled")
                    raise
                time.sleep(0.01)

        with worker:
            wait_until(lambda: running, timeout=ttl + 10, what="the job to start")
            assert admin.break_lease("job:long") == 1
            wait_until(lambda: outcome, timeout=ttl + 10, what="the job to see its loss")
    assert outcome[0] == "cancelled"
    record = await call(store.backend.read_record("job:long"))
    assert record is None or JobRecord.parse(record).outcome != "ok"


async def test_an_abandoned_sync_run_s_check_raises_once_the_worker_gave_up(
        target: Target) -> None:
    """Past the grace period at shutdown the worker abandons a sync run (a thread cannot be
    interrupted) and releases its lease: from then on the run's check() raises, although the
    lease is released rather than lost."""
    store, other = target.connect(), target.connect()
    ttl = target.ttl(5.0)
    running: list[Run] = []
    raised: list[str] = []
    passed_after_release: list[int] = []

    def long_sync(run: Run) -> None:
        running.append(run)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            released = run.lease.released  # read first: a release may land during check()
            try:
                run.check()
            except tenure.LeaseLost as exc:
                raised.append(str(exc))
                return
            if released:
                passed_after_release.append(run.token)
            time.sleep(0.01)

    worker: Any = (AsyncWorker if target.is_async else Worker)(store, grace=0.2)
    worker.every(timedelta(minutes=10), name="long", ttl=ttl, jitter=0)(long_sync)
    if target.is_async:
        async with worker:
            await eventually(lambda: running, timeout=ttl + 10, what="the job to start")
    else:
        with worker:
            wait_until(lambda: running, timeout=ttl + 10, what="the job to start")
    # The worker has stopped: it gave up on the run and released the run's lease.
    taken = await call(other.lock("job:long", ttl=ttl).try_acquire())
    assert taken is not None, "the abandoned run's lease must be released at shutdown"
    await eventually(lambda: raised, timeout=10, what="the abandoned run's check() to raise")
    assert passed_after_release == [], "check() passed after the run's lease was released"
    assert "gave up" in raised[0]
    await call(taken.release())


async def test_a_lost_election_lease_stops_the_leader(target: Target) -> None:
    """A lost election lease cancels an async on_elected and turns is_leader false at once, so a
    sync on_elected that polls it stops; then on_lost runs."""
    store, admin = target.connect(), target.connect()
    ttl = target.ttl(2.0)
    events: list[str] = []

    async def lead_async() -> None:
        events.append("elected")
        if events.count("elected") > 1:
            return
        try:
            await anyio.sleep(60)
        except BaseException:
            events.append("stopped" if not election.is_leader else "cancelled while leading")
            raise

    def lead_sync() -> None:
        events.append("elected")
        if events.count("elected") > 1:
            return
        deadline = time.monotonic() + 60
        while election.is_leader and time.monotonic() < deadline:
            time.sleep(0.01)
        events.append("stopped" if not election.is_leader else "still leading")

    worker: Any = (AsyncWorker if target.is_async else Worker)(store, grace=5)
    election = worker.election("primary", ttl=ttl, on_elected=lead_async if target.is_async
                               else lead_sync, on_lost=lambda: events.append("lost"))
    if target.is_async:
        async with worker:
            await eventually(lambda: events, timeout=ttl + 10, what="the election won")
            assert election.is_leader
            assert await admin.break_lease(election.lock_name) == 1
            await eventually(lambda: "lost" in events, timeout=ttl + 10,
                             what="the leader to learn of its loss")
    else:
        with worker:
            wait_until(lambda: events, timeout=ttl + 10, what="the election won")
            assert election.is_leader
            assert admin.break_lease(election.lock_name) == 1
            wait_until(lambda: "lost" in events, timeout=ttl + 10,
                       what="the leader to learn of its loss")
    assert events[:3] == ["elected", "stopped", "lost"]


class ListQueue:
    """A message source in a list (a tenure.queues.MessageSource): the queue tests on real
    queues are in tests/jobs/test_queue_jobs.py; here the scope lock is what is under test."""

    name, max_batch, releases_count = "list", 16, False

    def __init__(self, *bodies: Any) -> None:
        self.ready = [QueueMessage(str(i), json.dumps(body), 0) for i, body in enumerate(bodies)]
        self.completed: list[str] = []

    async def receive(self, max_messages: int, visibility_timeout: float) -> list[QueueMessage]:
        taken, self.ready = self.ready[:max_messages], self.ready[max_messages:]
        for message in taken:
            message.dequeue_count += 1
        return taken

    async def extend(self, message: QueueMessage, seconds: float) -> None:
        pass

    async def complete(self, message: QueueMessage) -> None:
        self.completed.append(message.id)

    async def abandon(self, message: QueueMessage, delay: float, *, failed: bool = True) -> None:
        self.ready.append(QueueMessage(message.id, message.text, message.dequeue_count))

    async def dead_letter(self, message: QueueMessage, reason: str) -> None:
        raise AssertionError(f"message {message.id} poisoned: {reason}")

    async def close(self) -> None:
        pass


async def test_a_lost_scope_lock_stops_the_queue_handler(target: Target) -> None:
    """A lost scope lock cancels an async handler, or makes a sync one's msg.check() raise;
    the message is released untried and handled on its next delivery."""
    store, admin = target.connect(), target.connect()
    ttl = target.ttl(2.0)
    source, events = ListQueue({"Key": "k1"}), []

    async def handle_async(message: QueueMessage) -> None:
        events.append("started")
        if events.count("started") > 1:
            return
        try:
            await anyio.sleep(60)
        except BaseException:
            events.append("stopped" if message.stopped else "cancelled while holding")
            raise

    def handle_sync(message: QueueMessage) -> None:
        events.append("started")
        if events.count("started") > 1:
            return
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                message.check()
                time.sleep(0.01)
        except tenure.LeaseLost:
            events.append("stopped")
            raise

    worker: Any = (AsyncWorker if target.is_async else Worker)(store, grace=5)
    worker.queue(source, scope="Key", name="q", lock_ttl=ttl, min_poll=0.01, max_poll=0.05,
                 release_delay=0)(handle_async if target.is_async else handle_sync)
    if target.is_async:
        async with worker:
            await eventually(lambda: events, timeout=10, what="the handler to start")
            assert await admin.break_lease("queue:q:k1") == 1
            await eventually(lambda: source.completed, timeout=ttl + 10,
                             what="the message handled again")
    else:
        with worker:
            wait_until(lambda: events, timeout=10, what="the handler to start")
            assert admin.break_lease("queue:q:k1") == 1
            wait_until(lambda: source.completed, timeout=ttl + 10,
                       what="the message handled again")
    assert events == ["started", "stopped", "started"]
    assert source.completed == ["0"]
