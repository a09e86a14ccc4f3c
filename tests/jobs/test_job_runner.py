"""The job runner inside one process: schedules, retries, misfires, leader mode, elections,
health, the grace period and bad input. The cross-process guarantees on every store are in
tests/conformance/test_jobs.py."""

from __future__ import annotations

import functools
import logging
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from hypothesis import given
from hypothesis import strategies as st
from waiting import wait_until

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.stores
from tenure.jobs import AsyncWorker, Cron, Every, JobRecord, Run, Worker
from tenure.queues import QueueMessage

pytestmark = pytest.mark.anyio

UTC = timezone.utc


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- schedules --------------------------------------------------------------------------------


@given(moment=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                           timezones=st.just(UTC)),
       seconds=st.integers(min_value=1, max_value=7 * 86400), offset=st.integers(0, 10**6))
def test_every_periods_are_aligned_and_contain_the_moment(moment: datetime, seconds: int,
                                                          offset: int) -> None:
    schedule = Every(timedelta(seconds=seconds), timedelta(seconds=offset % seconds))
    start = schedule.period_at(moment)
    assert start <= moment < schedule.next_after(moment) == start + timedelta(seconds=seconds)
    since_epoch = start - datetime(1970, 1, 1, tzinfo=UTC) - schedule.offset
    assert since_epoch % timedelta(seconds=seconds) == timedelta(0)


def test_cron_periods_at_and_between_fire_times() -> None:
    schedule = Cron("*/5 * * * *")
    at = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
    assert schedule.period_at(at) == at
    assert schedule.period_at(at - timedelta(microseconds=1)) == at - timedelta(minutes=5)
    assert schedule.next_after(at) == at + timedelta(minutes=5)


def test_cron_follows_its_time_zone_across_daylight_saving() -> None:
    schedule = Cron("30 2 * * *", "Europe/Paris")  # 02:30 does not exist on 2026-03-29
    after = schedule.next_after(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    assert after.astimezone(UTC).date() == datetime(2026, 3, 29).date()
    winter = schedule.next_after(datetime(2026, 1, 10, 12, 0, tzinfo=UTC))
    assert winter == datetime(2026, 1, 11, 1, 30, tzinfo=UTC)  # 02:30 CET


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Cron("*/5 * * *"), "cron expression"),
    (lambda: Cron("*/5 * * * *", "Mars/Olympus"), "timezone"),
    (lambda: Every(timedelta(seconds=0.01)), "interval"),
    (lambda: Every(timedelta(minutes=5), timedelta(minutes=5)), "offset"),
])
def test_bad_schedules_are_refused_with_the_argument_named(make: Any, message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        make()


# -- registration -----------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"retries": -1}, "retries"),
    ({"retries": True}, "retries"),
    ({"misfire": "later"}, "misfire"),
    ({"jitter": 1000}, "jitter"),
    ({"ttl": 0}, "ttl"),
    ({"unhealthy_after": 0}, "unhealthy_after"),
    ({"leader": "yes"}, "leader"),
    ({"color": "red"}, "unknown job option"),
])
def test_bad_job_options_fail_at_registration(options: dict[str, Any], message: str) -> None:
    worker = Worker(tenure.connect("memory://"))
    with pytest.raises((tenure.InvalidArgument, tenure.InvalidArgumentType), match=message):
        worker.every(timedelta(minutes=5), **options)


def test_a_job_or_callback_with_the_wrong_signature_fails_at_the_decorator() -> None:
    worker = Worker(tenure.connect("memory://"))

    def no_arguments() -> None: ...

    def one_argument(run: Run) -> None: ...

    with pytest.raises(tenure.InvalidArgumentType, match=r"no_arguments\(\) cannot be called "
                       r"that way; write it as: def my_job\(run: tenure\.Run\)"):
        worker.every(60)(no_arguments)
    with pytest.raises(tenure.InvalidArgumentType, match="a job is called with 1 argument"):
        worker.cron("0 3 * * *")(no_arguments)
    with pytest.raises(tenure.InvalidArgumentType, match="a queue handler"):
        worker.queue(object())(no_arguments)  # checked before the source
    with pytest.raises(tenure.InvalidArgumentType, match="on_elected is called with no arguments"):
        worker.election("primary", on_elected=one_argument)  # type: ignore[arg-type]
    assert worker.jobs == {}  # nothing was registered

    @worker.every(60)
    def with_defaults(run: Run, extra: int = 1) -> None: ...  # callable with one argument


def test_run_inside_an_event_loop_points_at_the_async_worker() -> None:
    import asyncio

    worker = Worker(tenure.connect("memory://"))

    async def main() -> None:
        worker.run()

    with pytest.raises(tenure.InvalidArgument, match=r"tenure\.aio\.AsyncWorker"):
        asyncio.run(main())


def test_registration_mistakes_are_explained() -> None:
    worker = Worker(tenure.connect("memory://"))

    @worker.every(60)
    def report(run: Run) -> None: ...

    with pytest.raises(tenure.InvalidArgument, match="already registered"):
        worker.every(60)(report)
    with pytest.raises(tenure.InvalidArgumentType, match=r"tenure\.aio\.AsyncWorker"):
        Worker(tenure.aio.connect("memory://"))  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgumentType, match=r"tenure\.Worker"):
        AsyncWorker(tenure.connect("memory://"))  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgument, match="nothing to run"):
        Worker(tenure.connect("memory://")).run()
    assert "test_job_runner.test_registration_mistakes_are_explained.<locals>.report" in worker.jobs


def test_a_generator_job_handler_or_callback_fails_at_the_decorator() -> None:
    """Calling a generator function runs none of its body: accepted, the job would never run
    while every period was recorded ok."""
    worker = Worker(tenure.connect("memory://"))

    def generator_job(run: Run) -> Any:
        print("never printed")
        yield 1

    async def async_generator_job(run: Run) -> Any:
        yield 1

    class GeneratorCall:
        def __call__(self, run: Run) -> Any:
            yield 1

    def generator_callback() -> Any:
        yield 1

    for job in (generator_job, async_generator_job, GeneratorCall(),
                functools.partial(generator_job)):
        with pytest.raises(tenure.InvalidArgumentType, match=r"a job must not be a generator: "
                           r".*generator function.*runs none of its body"):
            worker.every(60, name="gen")(job)
        with pytest.raises(tenure.InvalidArgumentType, match="a job must not be a generator"):
            worker.cron("0 3 * * *", name="gen")(job)
        with pytest.raises(tenure.InvalidArgumentType, match="a queue handler must not be a "
                           "generator"):
            worker.queue(object())(job)
    with pytest.raises(tenure.InvalidArgumentType, match=r"async_generator_job\(\) is an async "
                       "generator function"):
        worker.every(60)(async_generator_job)
    for argument in ("on_elected", "on_lost"):
        with pytest.raises(tenure.InvalidArgumentType, match=f"{argument} must not be a "
                           "generator"):
            worker.election("primary", **{argument: generator_callback})
    assert worker.jobs == {} and worker._elections == {}


def test_a_name_already_taken_says_by_which_job() -> None:
    worker = Worker(tenure.connect("memory://"))

    @worker.every(60, name="billing.nightly")
    def first(run: Run) -> None: ...

    def second(run: Run) -> None: ...

    with pytest.raises(tenure.InvalidArgument) as taken:
        worker.every(60, name="billing.nightly")(second)
    message = str(taken.value)
    assert "name='billing.nightly' is already taken on this worker by the job " in message
    assert "test_a_name_already_taken_says_by_which_job.<locals>.first" in message
    assert "choose another name=" in message and "pass name=" not in message
    with pytest.raises(tenure.InvalidArgument, match=r"\(the same function\); choose another"):
        worker.cron("0 3 * * *", name="billing.nightly")(first)
    with pytest.raises(tenure.InvalidArgument, match="pass name= to register the same function"):
        worker.every(60)(second)
        worker.every(60)(second)


# -- running ----------------------------------------------------------------------------------


async def wait_for(condition: Any, timeout: float) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


async def test_failed_runs_are_retried_within_the_period_then_recorded() -> None:
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)
    attempts: list[int] = []

    # An hour's period: the retries fall in the period the first attempt ran in (a 5 s one
    # ended between the second and third attempts when the test started near its end).
    @worker.every(timedelta(hours=1), name="flaky", retries=2, retry_backoff=0.01, jitter=0)
    async def flaky(run: Run) -> None:
        attempts.append(run.attempt)
        if run.attempt < 3:
            raise RuntimeError("payment API timed out")

    async with worker:
        await wait_for(lambda: worker._runners["flaky"].state.last_outcome, 5)
    record = JobRecord.parse(await store.backend.read_record("job:flaky") or "")
    assert attempts == [1, 2, 3]
    assert (record.outcome, record.attempts, record.error) == ("ok", 3, None)
    assert record.last_success is not None


async def test_a_run_that_keeps_failing_is_recorded_as_failed_and_health_says_so() -> None:
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)

    @worker.every(timedelta(seconds=0.2), name="broken", retries=1, retry_backoff=0.01,
                  jitter=0, unhealthy_after=1)
    async def broken(run: Run) -> None:
        raise ValueError("invoice 42 has no customer")

    async with worker:
        await wait_for(lambda: worker._runners["broken"].state.last_outcome == "failed", 5)
        with anyio.fail_after(5):
            while (await worker.health())["healthy"]:
                await anyio.sleep(0.05)
        report = await worker.health()
    entry = report["jobs"]["broken"]
    assert entry["unhealthy"] and entry["last_outcome"] == "failed"
    assert "ValueError: invoice 42 has no customer" in entry["last_error"]
    assert entry["last_success"] is None


async def test_a_period_already_recorded_is_skipped() -> None:
    store = tenure.aio.connect("memory://")
    schedule = Every(timedelta(seconds=30))
    period = schedule.period_at(datetime.now(UTC))
    lease = await store.lock("job:done", ttl=5).try_acquire()
    assert lease is not None
    assert await store.backend.write_record(lease.grant, JobRecord(period=period).dump())
    await lease.release()
    worker = AsyncWorker(store)
    runs: list[Run] = []

    @worker.every(timedelta(seconds=30), name="done", jitter=0)
    async def done(run: Run) -> None:
        runs.append(run)

    async with worker:
        await wait_for(lambda: worker._runners["done"].state.done_through == period, 5)
    assert runs == []


async def test_after_downtime_only_the_latest_period_runs() -> None:
    store = tenure.aio.connect("memory://")
    lease = await store.lock("job:catch-up", ttl=5).try_acquire()
    assert lease is not None
    old = Every(timedelta(seconds=1)).period_at(datetime.now(UTC) - timedelta(seconds=30))
    assert await store.backend.write_record(lease.grant, JobRecord(period=old).dump())
    await lease.release()
    worker = AsyncWorker(store)
    runs: list[datetime] = []

    @worker.every(timedelta(seconds=1), name="catch-up", jitter=0)
    async def catch_up(run: Run) -> None:
        runs.append(run.period_start)

    started = datetime.now(UTC)
    async with worker:
        await wait_for(lambda: runs, 5)
    assert len(runs) == 1 and runs[0] >= started - timedelta(seconds=1)


async def test_misfire_skip_waits_for_the_next_period() -> None:
    worker = AsyncWorker(tenure.aio.connect("memory://"))
    runs: list[datetime] = []

    @worker.every(timedelta(seconds=1), name="strict", misfire="skip", misfire_grace=0.1,
                  jitter=0)
    async def strict(run: Run) -> None:
        runs.append(run.period_start)

    while not 300_000 < datetime.now(UTC).microsecond < 700_000:  # well past the grace
        await anyio.sleep(0.01)
    started = datetime.now(UTC)
    async with worker:
        await wait_for(lambda: runs, 5)
    assert runs[0] > started, "a period already under way must be skipped"


async def test_leader_mode_runs_every_period_on_one_instance_and_fails_over() -> None:
    backend = tenure.aio.stores.AsyncMemoryStore()
    runs: list[tuple[str, datetime]] = []
    workers = [AsyncWorker(tenure.aio.connect(backend), grace=1) for _ in range(2)]
    for worker in workers:

        @worker.every(timedelta(seconds=0.2), name="lead", leader=True, ttl=1, poll=0.05,
                      jitter=0)
        async def lead(run: Run) -> None:
            runs.append((run.instance, run.period_start))

    async with workers[0], workers[1]:
        await wait_for(lambda: len(runs) >= 4, 10)
        leaders = {instance for instance, _ in runs}
        assert len(leaders) == 1
        [leader] = leaders
        first = next(w for w in workers if w.instance == leader)
        first.stop()
        await wait_for(lambda: {instance for instance, _ in runs} != leaders, 10)
    periods = [period for _, period in runs]
    assert len(periods) == len(set(periods)), "a period ran twice around the fail-over"


async def test_an_election_has_one_leader_and_hands_over_when_it_stops() -> None:
    backend = tenure.aio.stores.AsyncMemoryStore()
    events: list[tuple[str, int]] = []
    workers = [AsyncWorker(tenure.aio.connect(backend), grace=1) for _ in range(2)]
    elections = [worker.election("primary", ttl=1, poll=0.05,
                                 on_elected=lambda i=i: events.append(("elected", i)),
                                 on_lost=lambda i=i: events.append(("lost", i)))
                 for i, worker in enumerate(workers)]
    async with workers[0], workers[1]:
        await wait_for(lambda: events, 5)
        first = events[0][1]
        assert elections[first].is_leader and not elections[1 - first].is_leader
        assert await elections[1 - first].leader() == workers[first].instance
        workers[first].stop()
        await wait_for(lambda: ("elected", 1 - first) in events, 5)
        assert await elections[first].leader() == workers[1 - first].instance
    assert events[:3] == [("elected", first), ("lost", first), ("elected", 1 - first)]


async def test_past_the_grace_period_a_running_job_is_cancelled_and_not_recorded() -> None:
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store, grace=0.2)
    started, cancelled = anyio.Event(), []

    @worker.every(timedelta(seconds=30), name="slow", jitter=0)
    async def slow(run: Run) -> None:
        started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.append(run.period_start)
            raise

    with anyio.fail_after(5):
        async with worker:
            await started.wait()
    assert cancelled
    assert await store.backend.read_record("job:slow") is None
    assert await store.leases() == [], "the job's lease must be released at shutdown"


def test_sync_worker_runs_sync_and_async_jobs_in_the_background(tmp_path: Path) -> None:
    store = tenure.connect(f"sqlite:///{tmp_path}/locks.db")
    worker = Worker(store, grace=1)
    seen: list[str] = []

    @worker.every(timedelta(seconds=0.5), name="sync-job", jitter=0)
    def sync_job(run: Run) -> None:
        seen.append("sync")

    @worker.every(timedelta(seconds=0.5), name="async-job", jitter=0)
    async def async_job(run: Run) -> None:
        seen.append("async")

    with worker:
        anyio.run(wait_for, lambda: {"sync", "async"} <= set(seen), 5)
        assert worker.health()["healthy"]
    assert store.leases() == []
    store.close()


# -- work that never ran ----------------------------------------------------------------------


async def _invoice_total() -> int:
    return 42


async def test_a_sync_job_that_returns_a_coroutine_is_recorded_failed_not_ok() -> None:
    """The coroutine's body never runs: recording the period ok would hide that. The error
    says how to write the job, and no "never awaited" RuntimeWarning is left behind."""
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)
    created: list[Any] = []

    @worker.every(timedelta(seconds=30), name="forgot-async", jitter=0)
    def forgot_async(run: Run) -> Any:
        created.append(_invoice_total())
        return created[-1]

    async with worker:
        await wait_for(lambda: worker._runners["forgot-async"].state.last_outcome, 5)
    record = JobRecord.parse(await store.backend.read_record("job:forgot-async") or "")
    assert record.outcome == "failed", record
    assert record.error is not None
    assert record.error.startswith("TypeError: the job returned a coroutine, which nothing "
                                   "awaits: its body did not run. Define the function with "
                                   "async def")
    assert created and created[0].cr_frame is None, "the coroutine must be closed"
    assert not (await worker.health())["jobs"]["forgot-async"]["last_success"]


class _AsyncCall:
    """A callable object whose __call__ is an async def: an async job."""

    def __init__(self) -> None:
        self.periods: list[datetime] = []

    async def __call__(self, run: Run) -> None:
        self.periods.append(run.period_start)


async def _record_run(seen: list[str], run: Run) -> None:
    seen.append(run.job)


async def test_async_callables_that_are_not_async_defs_are_awaited() -> None:
    """A partial of an async def and an object with an async __call__ are async jobs: their
    body runs (before: the object ran in a thread, its coroutine was dropped, the period
    recorded ok)."""
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)
    call, seen = _AsyncCall(), []
    worker.every(timedelta(seconds=30), name="object", jitter=0)(call)
    worker.every(timedelta(seconds=30), name="partial", jitter=0)(
        functools.partial(_record_run, seen))
    async with worker:
        await wait_for(lambda: all(runner.state.last_outcome
                                   for runner in worker._runners.values()), 5)
    assert len(call.periods) == 1 and seen == ["partial"]
    for job in ("object", "partial"):
        record = JobRecord.parse(await store.backend.read_record(f"job:{job}") or "")
        assert (record.outcome, record.error) == ("ok", None)


async def test_an_election_callback_that_returns_a_coroutine_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    worker = AsyncWorker(tenure.aio.connect("memory://"))
    election = worker.election("primary", on_elected=lambda: _invoice_total())
    with caplog.at_level(logging.ERROR, logger="tenure.jobs"):
        async with worker:
            await wait_for(lambda: election.is_leader and "returned a coroutine" in caplog.text,
                           5)
    assert "the callback returned a coroutine, which nothing awaits" in caplog.text


# -- sync jobs past the grace period -----------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_sync_job_still_running_after_the_grace_period_is_reported_abandoned(
        api: str, caplog: pytest.LogCaptureFixture) -> None:
    """A thread cannot be interrupted: when the grace period ends the worker releases the
    lease and returns; it must say which jobs still run (a warning, and `abandoned`)."""
    release = threading.Event()
    started = threading.Event()
    finished = threading.Event()

    def stuck(run: Run) -> None:  # never calls run.check()
        started.set()
        release.wait(30)
        finished.set()

    def quick(run: Run) -> None: ...

    def register(worker: Any) -> None:
        worker.every(timedelta(minutes=10), name="stuck", jitter=0)(stuck)
        worker.every(timedelta(minutes=10), name="quick", jitter=0)(quick)

    try:
        with caplog.at_level(logging.WARNING, logger="tenure.jobs"):
            if api == "sync":
                store = tenure.connect("memory://")
                worker: Any = Worker(store, grace=0.2)
                register(worker)
                with worker:
                    assert started.wait(10)
                assert store.leases() == []
            else:
                async def main() -> Any:
                    async_store = tenure.aio.connect("memory://")
                    async_worker = AsyncWorker(async_store, grace=0.2)
                    register(async_worker)
                    async with async_worker:
                        await anyio.to_thread.run_sync(started.wait, 10)
                    assert await async_store.leases() == []
                    return async_worker

                worker = anyio.run(main)
        assert not finished.is_set()
        assert worker.abandoned == ["stuck"]
        assert ("job 'stuck' still running after grace=0.2 s; its lease is released, its "
                "run.check() now raises; it is abandoned") in caplog.text
        assert "'quick' still running" not in caplog.text
    finally:
        release.set()
    assert finished.wait(10)


def test_a_job_that_ends_within_the_grace_period_is_not_reported_abandoned(
        caplog: pytest.LogCaptureFixture) -> None:
    worker = Worker(tenure.connect("memory://"), grace=10)
    started = threading.Event()

    @worker.every(timedelta(minutes=10), name="brief", jitter=0)
    def brief(run: Run) -> None:
        started.set()
        wait_until(lambda: run.stopping, timeout=10, what="the stop")

    with caplog.at_level(logging.WARNING, logger="tenure.jobs"), worker:
        assert started.wait(10)
    assert worker.abandoned == []
    assert "still running" not in caplog.text


# -- after the lease is gone -------------------------------------------------------------------


def test_a_run_s_check_raises_once_someone_else_released_its_lease() -> None:
    store = tenure.connect("memory://")
    worker = Worker(store, grace=1)
    running: list[Run] = []
    outcome: list[str] = []

    @worker.every(timedelta(minutes=10), name="released", jitter=0)
    def released(run: Run) -> None:
        running.append(run)
        wait_until(lambda: run.lease.released, timeout=10, what="the lease released")
        try:
            run.check()
            outcome.append("passed")
        except tenure.LeaseLost as exc:
            outcome.append(str(exc))

    with worker:
        wait_until(lambda: running, timeout=10, what="the job to start")
        running[0].lease.release()  # e.g. the store closed under a running job
        wait_until(lambda: outcome, timeout=10, what="the job's check()")
    assert "was released" in outcome[0]


def test_a_message_s_check_raises_once_its_scope_lock_was_released() -> None:
    store = tenure.connect("memory://")
    lease = store.lock("queue:billing:42", ttl=5).try_acquire()
    assert lease is not None
    message = QueueMessage("m1", '{"Invoice": {"Id": 42}}', dequeue_count=1)
    message.lease = lease
    message.check()
    lease.release()
    assert message.stopped
    with pytest.raises(tenure.LeaseLost, match="scope lock was released"):
        message.check()


@pytest.mark.parametrize("kind", ["job", "election"])
def test_a_lease_that_comes_back_after_stop_was_asked_starts_no_run(kind: str) -> None:
    """A sync store's acquire cannot be cancelled: the worker waits for it when asked to stop.
    A lease it brings back then is released at once: no new run starts, no one is elected."""
    backend = tenure.stores.MemoryStore()
    store, other = tenure.connect(backend), tenure.connect(backend)
    held = other.lock(f"{kind}:late", ttl=30).try_acquire()
    assert held is not None
    worker = Worker(store, grace=5)
    runs: list[str] = []
    waiting = threading.Event()
    if kind == "job":
        worker.every(timedelta(minutes=10), name="late", jitter=0, poll=5)(
            lambda run: runs.append("ran"))
    else:
        worker.election("late", poll=5, on_elected=lambda: runs.append("elected"))

    acquire = worker._locks.acquire

    async def acquire_and_tell(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        return await acquire(*args, **kwargs)

    worker._locks.acquire = acquire_and_tell  # type: ignore[method-assign]
    worker.start()
    assert waiting.wait(10), "the worker never waited for the job's lock"
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    wait_until(lambda: not worker.running, timeout=10, what="the stop to be asked")
    held.release()  # the worker's acquire, still waiting in its thread, takes the lease now
    stopper.join(30)
    assert not stopper.is_alive()
    assert runs == [], f"{runs} after the worker was asked to stop"
    assert store.leases() == [], "the lease taken after the stop must be released"


# -- a record that cannot be written ----------------------------------------------------------


@pytest.mark.parametrize("leader", [False, True])
async def test_a_period_whose_record_write_failed_never_runs_again_on_this_instance(
        leader: bool) -> None:
    """The period ran here: a failed record write must not make it due again (before: the
    same period ran again at once, tens of thousands of times per period while writes kept
    failing). The record is written once the store takes writes again."""
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store, grace=1)
    runs: dict[datetime, int] = {}
    broken = {"writes": True}

    @worker.every(timedelta(seconds=0.3), name="rollup", leader=leader, jitter=0)
    async def rollup(run: Run) -> None:
        runs[run.period_start] = runs.get(run.period_start, 0) + 1

    write_record = worker._locks.write_record

    async def failing_write(lease: Any, record: str) -> bool:
        if broken["writes"]:
            await anyio.sleep(0)  # a real store's call yields: so does this failure
            raise tenure.StoreUnavailable("memory://: injected: writes fail")
        return await write_record(lease, record)

    worker._locks.write_record = failing_write  # type: ignore[method-assign]
    async with worker:
        await wait_for(lambda: len(runs) >= 3, 10)
        broken["writes"] = False
        with anyio.fail_after(10):
            while (text := await store.backend.read_record("job:rollup")) is None:
                await anyio.sleep(0.01)
    assert max(runs.values()) == 1, f"a period ran more than once: {runs}"
    assert JobRecord.parse(text).period in runs


async def test_a_long_non_ascii_error_is_recorded_cut_and_the_worker_runs_on() -> None:
    """One emoji is 12 bytes of JSON: a 1,000-emoji error made a record over the stores'
    8 KiB, and the store's InvalidArgument stopped the whole worker."""
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)
    others: list[datetime] = []

    @worker.every(timedelta(seconds=0.2), name="emoji", jitter=0)
    async def emoji(run: Run) -> None:
        raise ValueError("\U0001F600" * 1000)

    @worker.every(timedelta(seconds=0.2), name="other", jitter=0)
    async def other(run: Run) -> None:
        others.append(run.period_start)

    async with worker:
        await wait_for(lambda: len(others) >= 3, 10)
        assert worker.running
    record = JobRecord.parse(await store.backend.read_record("job:emoji") or "")
    assert record.outcome == "failed" and (record.error or "").startswith("ValueError: \U0001F600")
    assert len(record.dump().encode()) < 4096


def test_a_record_stays_small_whatever_the_error_says() -> None:
    for text in ("\U0001F600" * 5000, "\x00" * 5000, "é" * 5000, "a" * 5000):
        record = JobRecord(period=datetime(2026, 1, 1, tzinfo=UTC), outcome="failed",
                           holder="h" * 1024, error=text, schedule="cron 0 3 * * * Europe/Paris")
        assert len(record.dump().encode()) < 8192
        assert text.startswith(JobRecord.parse(record.dump()).error or "")


async def test_a_custom_source_s_unknown_error_at_start_up_is_retried() -> None:
    """A MessageSource is the user's: its driver's errors (httpx.ConnectError, ...) are not
    tenure's. Before: one at start-up stopped the worker."""

    class ConnectError(Exception):
        pass

    class FlakySource:
        name, max_batch, releases_count = "flaky:jobs", 8, False
        calls = 0

        async def receive(self, max_messages: int, visibility_timeout: float) -> list[Any]:
            FlakySource.calls += 1
            if FlakySource.calls <= 2:
                raise ConnectError("temporary failure in name resolution")
            return []

        async def extend(self, message: Any, seconds: float) -> None: ...
        async def complete(self, message: Any) -> None: ...
        async def abandon(self, message: Any, delay: float, *, failed: bool = True) -> None: ...
        async def dead_letter(self, message: Any, reason: str) -> None: ...
        async def close(self) -> None: ...

    worker = AsyncWorker(tenure.aio.connect("memory://"))

    @worker.queue(FlakySource(), name="flaky")
    async def handle(message: QueueMessage) -> None: ...

    async with worker:
        await wait_for(lambda: FlakySource.calls >= 4 or not worker.running, 10)
        assert worker.running


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_failed_job_s_traceback_starts_at_the_job(
        api: str, caplog: pytest.LogCaptureFixture) -> None:
    """The runner's frames (tenure's, anyio's thread hop) above the job say nothing the user
    can act on: the logged traceback starts in the job's own code."""
    worker = AsyncWorker(tenure.aio.connect("memory://"))

    def charge(run: Run) -> None:
        raise ValueError("invoice 42 has no customer")

    async def charge_async(run: Run) -> None:
        charge(run)

    worker.every(timedelta(seconds=5), name="charge", jitter=0)(
        charge if api == "sync" else charge_async)
    with caplog.at_level(logging.ERROR, logger="tenure.jobs"):
        async with worker:
            await wait_for(lambda: any(r.exc_info for r in caplog.records), 5)
    record = next(r for r in caplog.records if r.exc_info)
    shown = logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
    frames = [line for line in shown.splitlines() if line.lstrip().startswith("File ")]
    assert frames and all(__file__ in line for line in frames), shown
    assert "ValueError: invoice 42 has no customer" in shown
