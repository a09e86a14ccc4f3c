"""The loop of one periodic job on one instance: find the due period, take the job's lock, skip
the period if the store's record says it is done, else run it (with retries) and record it
under the same lease.

Why the record and not just the lock: every instance's timer fires; an instance whose timer
fires after another finished and released would take the free lock and run the same period
again. The record, written while the lease is held and fenced by it, closes that gap.

Leader mode keeps the lease between periods, so one instance runs every period while it leads
and the others wait for the lease (taking over within ttl plus one poll interval of its loss).

A store that fails never ends the loop (see tenure.jobs._outage): the job backs off and tries
again, resuming within RETRY_CAP of the store answering; a leader keeps its lease through an
outage shorter than its ttl (the lease's own deadline decides), so it leads on afterwards.

A period whose record could not be written still counts as done on this instance (it ran
here): it never runs again here. The record is kept and written at the next chance: a leader
retries it with the outage's backoff while its lease holds, and any instance writes it the
next time it holds the job's lease (if no later period was recorded meanwhile). Another
instance, which cannot know, may run that period again.

Example::

    job = PeriodicJob(spec, locks)
    await job.run(stopping)        # returns once `stopping` is set and the current run ended
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from tenure._errors import InvalidArgument, InvalidArgumentType, LeaseLost
from tenure.jobs import _metrics
from tenure.jobs._locks import AnyLease, LockPort
from tenure.jobs._outage import READ, Retry, describe
from tenure.jobs._run import JobRecord, Run
from tenure.jobs._schedule import Schedule, period_seconds
from tenure.jobs._signatures import is_async, refuse_unfinished
from tenure.jobs._tracebacks import from_user_code

log = logging.getLogger("tenure.jobs")
T = TypeVar("T")

JOB_LOCK_PREFIX = "job:"
LEASE_GONE = "its lease was gone"


@dataclass(frozen=True)
class JobSpec:
    """A periodic job's validated settings (see Worker.every and Worker.cron)."""

    name: str
    function: Callable[[Run], Any]
    schedule: Schedule
    leader: bool
    ttl: float
    retries: int
    retry_backoff: float
    jitter: float
    misfire: str
    misfire_grace: float
    poll: float
    unhealthy_after: int

    @property
    def lock_name(self) -> str:
        """The name of the job's lock and record in the store."""
        return JOB_LOCK_PREFIX + self.name


@dataclass
class JobState:
    """What this instance knows of a job, for health() and `tenure jobs`."""

    done_through: datetime | None = None  # latest period known to be done (by anyone)
    last_success: datetime | None = None
    last_outcome: str | None = None
    last_record: JobRecord | None = None  # the newest this instance knows: its own run's, or read
    running_since: datetime | None = None
    leading: bool = False
    runs: int = 0

    def learn_record(self, record: JobRecord) -> None:
        """Keep `record` as the last one known unless a later period is known already (what
        health() reports while the store cannot be read).

        Example::

            state.learn_record(JobRecord.parse(text))
        """
        if self.last_record is None or record.period >= self.last_record.period:
            self.last_record = record


def utc_now() -> datetime:
    """The wall clock in UTC (periods follow the wall-clock schedule)."""
    return datetime.now(timezone.utc)


async def until_stopped(stopping: anyio.Event, call: Callable[[], Awaitable[T]]) -> T | None:
    """`await call()`, or None as soon as `stopping` is set. An exception of `call` is raised
    as it is, never wrapped in an ExceptionGroup (which no `except StoreUnavailable` sees)."""
    result: T | None = None
    error: Exception | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await stopping.wait()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            result = await call()
        except Exception as exc:  # raised out of the group, it would come wrapped
            error = exc
        group.cancel_scope.cancel()
    if error is not None:
        raise error
    return result


async def sleep_unless_stopped(stopping: anyio.Event, seconds: float) -> bool:
    """Sleep `seconds` or until `stopping` is set; True when the full sleep ran."""
    with anyio.move_on_after(max(0.0, seconds)):
        await stopping.wait()
    return not stopping.is_set()


async def call_job(function: Callable[[Run], Any], run: Run) -> None:
    """Await an async job; run a sync one in a worker thread (it sees a loss via run.check()).
    A job that returns a coroutine or a generator fails: its body never ran."""
    if is_async(function):
        refuse_unfinished(await function(run), "the job")
        return

    def in_thread() -> Any:
        try:
            return function(run)
        finally:
            run._thread_done = True

    run._in_thread = True
    try:
        # abandon_on_cancel: past the grace period at shutdown, or once the lease is lost, the
        # worker stops waiting for a thread it cannot interrupt and releases the lease; the
        # thread's next run.check() raises.
        result = await anyio.to_thread.run_sync(in_thread, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        run._abandon()
        raise
    refuse_unfinished(result, "the job")


class PeriodicJob:
    """Runs one job spec on this instance; see the module docstring."""

    def __init__(self, spec: JobSpec, locks: LockPort) -> None:
        self.spec = spec
        self.locks = locks
        self.state = JobState()
        self.retry = Retry(locks.outage, f"job {spec.name!r}",
                           every=period_seconds(spec.schedule))
        self._unreleased: list[tuple[AnyLease, float]] = []  # release failed; retry until
        self._pending: JobRecord | None = None  # ran here, its record not written yet
        self._abandoned: list[Run] = []  # runs given up on whose thread may still run

    def abandoned_runs(self) -> list[Run]:
        """The runs of this job the worker gave up on (at shutdown past the grace period, or
        when the lease was lost) whose sync function still runs in its thread, unleased."""
        self._abandoned = [run for run in self._abandoned if run._running_unleased()]
        return list(self._abandoned)

    async def run(self, stopping: anyio.Event) -> None:
        """Loop until `stopping` is set. A store that fails is retried, never fatal; raises
        only what stops the worker (see tenure.jobs._outage: a setup error, or a permanent
        store error before the store ever answered)."""
        loop = self._lead if self.spec.leader else self._take_turns
        while not stopping.is_set():
            try:
                await loop(stopping)
            except Exception as exc:
                self.retry.failed(exc)
                await sleep_unless_stopped(stopping, self.retry.delay())

    # -- every instance competes each period ---------------------------------------------------

    async def _take_turns(self, stopping: anyio.Event) -> None:
        while not stopping.is_set():
            now = utc_now()
            period = self.spec.schedule.period_at(now)
            if self._due(period, now):
                jitter = self.spec.jitter  # no jitter: no zero-length sleep on every turn
                if jitter and not await sleep_unless_stopped(stopping, random.uniform(0, jitter)):
                    return
                await self._contend(period, stopping)
            else:
                await self._sleep_until_next(now, stopping)

    async def _contend(self, period: datetime, stopping: anyio.Event) -> None:
        """Wait for the lock until the next period starts; run `period` unless it is done."""
        spec = self.spec
        await self._release_unreleased()
        waited_from = anyio.current_time()
        until_next = (spec.schedule.next_after(period) - utc_now()).total_seconds()
        lease = await until_stopped(stopping, lambda: self.locks.acquire(
            spec.lock_name, spec.ttl, timeout=max(0.0, until_next), max_wait=spec.poll,
            retry=self.retry))
        if lease is None:
            if not stopping.is_set():
                _metrics.record_skipped(spec.name, "busy")
            return
        self.retry.succeeded()
        _metrics.record_acquired(spec.name, anyio.current_time() - waited_from)
        try:
            # A sync store's acquire runs on in its thread after a stop: no new run then.
            due = None if stopping.is_set() else self._still_due(period)
            if due is not None:
                await self._run_unless_done(lease, due, stopping)
        finally:
            with anyio.CancelScope(shield=True):
                await self._release(lease)

    def _still_due(self, period: datetime) -> datetime | None:
        """The period to run with a lease taken for `period`: that one, or the period that
        began while a store answered the acquire late, if it is due. Never the older one: its
        successor has begun, which coalescing runs instead, and a store that lost its records
        meanwhile (a restart) would see it run twice."""
        now = utc_now()
        current = self.spec.schedule.period_at(now)
        if current <= period:
            return period
        return current if self._due(current, now) else None

    # -- one instance leads and runs every period ----------------------------------------------

    async def _lead(self, stopping: anyio.Event) -> None:
        spec = self.spec
        while not stopping.is_set():
            await self._release_unreleased()
            waited_from = anyio.current_time()
            lease = await until_stopped(stopping, lambda: self.locks.acquire(
                spec.lock_name, spec.ttl, timeout=float("inf"), max_wait=spec.poll,
                retry=self.retry))
            if lease is None:
                return
            self.retry.succeeded()
            _metrics.record_acquired(spec.name, anyio.current_time() - waited_from)
            log.info("tenure: %s now leads job %r (token %d)", self.locks.holder, spec.name,
                     lease.token)
            self.state.leading = True
            try:
                async with self.locks.guard(lease):
                    await self._lead_with(lease, stopping)
            except LeaseLost as lost:
                _metrics.record_lost(spec.name)
                log.warning("tenure: job %r lost its leadership: %s", spec.name, lost)
            finally:
                self.state.leading = False
                with anyio.CancelScope(shield=True):
                    await self._release(lease)

    async def _lead_with(self, lease: AnyLease, stopping: anyio.Event) -> None:
        while not stopping.is_set():
            now = utc_now()
            period = self.spec.schedule.period_at(now)
            due = self._due(period, now)
            if self._pending is not None and not due:
                # The last period ran but is not recorded: retry the record, not the job.
                until_next = (self.spec.schedule.next_after(now) - utc_now()).total_seconds()
                if await sleep_unless_stopped(stopping, min(self.retry.delay(), until_next)):
                    pending = self._pending
                    if pending is not None and await self._write(lease, pending) == LEASE_GONE:
                        raise LeaseLost(f"the lease of job {self.spec.name!r} was gone when "
                                        "its record was written")
                continue
            if not due:
                await self._sleep_until_next(now, stopping)
                continue
            try:
                await self._run_unless_done(lease, period, stopping)
            except LeaseLost:
                raise
            except Exception as exc:  # the store failed: keep the lease (its deadline decides)
                self.retry.failed(exc)
                await sleep_unless_stopped(stopping, self.retry.delay())

    # -- shared --------------------------------------------------------------------------------

    def _due(self, period: datetime, now: datetime) -> bool:
        done = self.state.done_through
        if done is not None and period <= done:
            return False
        if self.spec.misfire == "skip" and (now - period).total_seconds() > self.spec.misfire_grace:
            self.state.done_through = period  # too late for this one: wait for the next period
            _metrics.record_skipped(self.spec.name, "misfire")
            return False
        return True

    async def _sleep_until_next(self, now: datetime, stopping: anyio.Event) -> None:
        wake = self.spec.schedule.next_after(now)
        await sleep_unless_stopped(stopping, (wake - utc_now()).total_seconds())

    async def _run_unless_done(self, lease: AnyLease, period: datetime,
                               stopping: anyio.Event) -> None:
        spec = self.spec
        text = await self.locks.read_record(spec.lock_name)
        self.retry.succeeded(READ)
        previous = _parse(text, spec.name)
        pending = self._pending
        if pending is not None:
            if previous is None or pending.period > previous.period:
                # Best effort: the record of this period supersedes it anyway.
                await self._write(lease, pending)
                previous = pending
            else:
                self._pending = None  # a later period was recorded meanwhile
        if previous is not None:
            self._learn(previous)
            if previous.period >= period:
                self.state.done_through = max(period, previous.period)
                _metrics.record_skipped(spec.name, "done")
                return
        await self._run_period(lease, period, previous, stopping)

    async def _run_period(self, lease: AnyLease, period: datetime, previous: JobRecord | None,
                          stopping: anyio.Event) -> None:
        spec = self.spec
        next_period = spec.schedule.next_after(period)
        error: str | None = None
        attempt = 0
        for attempt in range(1, spec.retries + 2):
            run = Run(spec.name, lease, period, attempt, self.locks.holder, stopping)
            started = anyio.current_time()
            self.state.running_since = utc_now()
            try:
                async with self.locks.guard(lease):
                    await call_job(spec.function, run)
            except LeaseLost as lost:
                _metrics.record_lost(spec.name)
                _metrics.record_run(spec.name, "lost", anyio.current_time() - started)
                log.warning("tenure: job %r lost its lease during period %s; the period is "
                            "not recorded and may run elsewhere: %s", spec.name,
                            period.isoformat(), lost)
                if spec.leader:
                    raise
                return
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                _metrics.record_run(spec.name, "failed", anyio.current_time() - started)
                if getattr(exc, "_tenure_logged", False):
                    # Its own runner (the outbox relay) logged the outage once already: a
                    # traceback per period would bury that one line.
                    log.debug("tenure: job %r failed (period %s, attempt %d of %d): %s",
                              spec.name, period.isoformat(), attempt, spec.retries + 1,
                              describe(exc))
                else:
                    log.error("tenure: job %r failed (period %s, attempt %d of %d)",
                              spec.name, period.isoformat(), attempt, spec.retries + 1,
                              exc_info=from_user_code(exc))
                delay = spec.retry_backoff * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
                retry_by = utc_now() + timedelta(seconds=delay)
                if attempt > spec.retries or retry_by >= next_period:
                    break
                if not await sleep_unless_stopped(stopping, delay):
                    return  # stopping: leave the period to another instance
                continue
            else:
                _metrics.record_run(spec.name, "ok", anyio.current_time() - started)
                error = None
                break
            finally:
                self.state.running_since = None
                self.state.runs += 1
                if run._running_unleased():
                    self._abandoned = [*self.abandoned_runs(), run]
        await self._record(lease, period, previous, attempt, error)

    async def _record(self, lease: AnyLease, period: datetime, previous: JobRecord | None,
                      attempts: int, error: str | None) -> None:
        now = utc_now()
        last_success = now if error is None else (previous.last_success if previous else None)
        record = JobRecord(period=period, outcome="ok" if error is None else "failed",
                           attempts=attempts, finished=now, holder=self.locks.holder,
                           last_success=last_success, error=error,
                           schedule=self.spec.schedule.spec())
        self._learn(record)  # it ran here: never again here, whatever the store says now
        failure = await self._write(lease, record)
        if failure is None:
            return
        _metrics.record_lost(self.spec.name)
        log.warning("tenure: job %r finished period %s but it could not be recorded (%s); this "
                    "instance will not run it again and records it at the next chance, another "
                    "instance may run it again", self.spec.name, period.isoformat(), failure)

    async def _write(self, lease: AnyLease, record: JobRecord) -> str | None:
        """Write `record` under `lease`; None once done, else why not (kept as pending)."""
        try:
            written = await self.locks.write_record(lease, record.dump())
        except (InvalidArgument, InvalidArgumentType) as exc:
            # The store refused this record's content: a bug to report, never a reason to stop
            # the worker or to run the period again; writing it again would fail the same way.
            self._pending = None
            log.error("tenure: job %r: the store refused the record of period %s; the period "
                      "stays done on this instance only: %s", self.spec.name,
                      record.period.isoformat(), describe(exc))
            return None
        except Exception as exc:
            self._pending = record
            self.retry.failed(exc)
            return f"the store failed: {describe(exc)}"
        self.retry.succeeded()
        if not written:
            self._pending = record
            return LEASE_GONE
        if self._pending is not None and self._pending.period <= record.period:
            self._pending = None
        return None

    def _learn(self, record: JobRecord) -> None:
        state = self.state
        if state.done_through is None or record.period > state.done_through:
            state.done_through = record.period
        state.last_outcome = record.outcome
        state.learn_record(record)
        if record.last_success is not None and (
                state.last_success is None or record.last_success > state.last_success):
            state.last_success = record.last_success

    async def _release(self, lease: AnyLease) -> None:
        try:
            await self.locks.release(lease)
        except Exception as exc:  # shielded and best effort: the outage is reported elsewhere
            log.info("tenure: releasing the lease of job %r failed; released once the store "
                     "answers, else it expires by itself: %s", self.spec.name, describe(exc))
            self._unreleased.append((lease, time.monotonic() + self.spec.ttl))

    async def _release_unreleased(self) -> None:
        """Release the leases whose release failed (the store was down): left to expire, they
        would keep this job from running anywhere for up to a ttl after the store is back."""
        left, self._unreleased = self._unreleased, []
        for lease, until in left:
            if time.monotonic() >= until:
                continue  # expired by now
            try:
                await self.locks.release(lease)
            except Exception:
                self._unreleased.append((lease, until))


def _parse(text: str | None, job: str) -> JobRecord | None:
    if text is None:
        return None
    try:
        return JobRecord.parse(text)
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("tenure: job %r has an unreadable record (%s); treating it as never run",
                    job, exc)
        return None
