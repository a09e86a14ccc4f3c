"""The Worker: register periodic jobs, queue jobs and elections with decorators, then run them
all on this instance, sharing one store with the other instances.

`tenure.Worker` takes a sync store and blocks in `run()` (or runs in a background thread with
`with worker:`); `tenure.aio.AsyncWorker` takes an async store and runs on your event loop
(`await worker.run()`, or `async with worker:` in e.g. a FastAPI lifespan). Both run async job
functions on an event loop and sync ones in worker threads.

Example::

    worker = tenure.Worker(tenure.connect("sqlite:////var/lib/app/locks.db"))

    @worker.every(timedelta(minutes=5))
    def process_invoices(run: tenure.Run) -> None:
        ...

    worker.run()   # SIGTERM/SIGINT: no new runs, running ones get `grace` seconds, leases freed

A store that fails does not stop a worker: every runner backs off and resumes by itself (see
tenure.jobs._outage), and health() answers from this instance's own state meanwhile. A worker
stops only on SIGTERM/SIGINT or `stop()`, or when its setup is wrong: an error in it
(InvalidArgument, ...) or a permanent store error (StoreRefused: a wrong password, a closed
store) before any call to the store succeeded; `run()` then raises that error, as it is.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
import anyio.abc
import anyio.from_thread

from tenure._async._store import AsyncStore
from tenure._errors import InvalidArgument, InvalidArgumentType, StoreUnavailable
from tenure._names import validate_name
from tenure._sync._store import Store
from tenure._timing import Backoff, check_range, check_ttl, to_seconds
from tenure.jobs._config import did_you_mean
from tenure.jobs._election import AsyncElection, Election, _Campaign
from tenure.jobs._health import job_health
from tenure.jobs._locks import AnyStore, LockPort
from tenure.jobs._outage import READ, RETRY_CAP, RETRY_FIRST, stamp
from tenure.jobs._periodic import (
    JOB_LOCK_PREFIX,
    JobSpec,
    PeriodicJob,
    _parse,
    sleep_unless_stopped,
    utc_now,
)
from tenure.jobs._run import Run
from tenure.jobs._schedule import Cron, Every, Schedule, period_seconds
from tenure.jobs._signatures import check_callable

log = logging.getLogger("tenure.jobs")
F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E", bound=_Campaign)  # the election a Worker makes: Election or AsyncElection
HEALTH_READ_TIMEOUT = 2.0  # seconds health() waits for the store's records
PROBE_PREFIX = "tenure-probe:"  # + the instance id: the lease the store check takes and frees
PROBE_TTL = 10.0  # seconds: the probe lease expires by itself should its release fail

MISFIRE_POLICIES = ("coalesce", "skip")
_runs_started = 0  # Workers of this process that started running; see runs_started()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _no_job(run: Run) -> None:
    """Stands in for the job function while a decorator checks its options."""


class _Registry(Generic[E]):
    """What both Workers share: the decorators and the validated specs they record."""

    _election_type: type[E]

    def __init__(self, store: AnyStore, *, grace: float | timedelta = 30.0) -> None:
        self._locks = LockPort(store)
        self.store = store
        self.grace = check_range(to_seconds(grace, "grace"), "grace", 0.0, 3600.0)
        self.jobs: dict[str, JobSpec] = {}
        self._runners: dict[str, PeriodicJob] = {}
        self._consumers: list[Any] = []
        self._elections: dict[str, E] = {}
        self._options: dict[str, dict[str, Any]] = {}  # as registered, for configure()
        self._started: datetime | None = None
        self._serving: anyio.Event | None = None  # the stop event while the worker runs
        self._fatal: BaseException | None = None  # what stopped the worker, raised by run()
        self.abandoned: list[str] = []
        """The jobs whose sync function was still running, in its thread and without its lease,
        when the worker last stopped (past the grace period, or after the lease was lost): its
        run.check() raises, and it runs on until it returns (Python waits for such a thread at
        exit; os._exit() does not). Empty while running.

        Example::

            worker.run()
            if worker.abandoned:
                sys.exit(f"cut off mid-run: {', '.join(worker.abandoned)}")
        """

    @property
    def running(self) -> bool:
        """True while the worker runs and has not been asked to stop.

        Example::

            assert not worker.running
        """
        return self._serving is not None and not self._serving.is_set()

    @property
    def instance(self) -> str:
        """This instance's id: the store's holder id (host:pid:random unless set)."""
        return self._locks.holder

    def every(self, interval: float | timedelta, *, name: str | None = None,
              offset: float | timedelta = 0, **options: Any) -> Callable[[F], F]:
        """Run the decorated function once per `interval`, on one instance, periods aligned to
        the wall clock (every 5 minutes: at :00, :05, ...).

        Options: leader (keep the lease between periods), ttl (30 s), retries (0),
        retry_backoff (1 s), jitter (the longest random start delay; default interval/20, at
        most 1 s), misfire ('coalesce': after downtime run the latest missed period once;
        'skip': skip a period started more than misfire_grace ago), poll (how often a waiting
        instance looks; default min(1 s, ttl/4)), unhealthy_after (3 periods).

        Example::

            @worker.every(timedelta(minutes=5), retries=2)
            def process_invoices(run: tenure.Run) -> None:
                ...
        """
        schedule = Every.of(interval, offset)
        return self._register(schedule, name, options)

    def cron(self, expression: str, *, timezone: str = "UTC", name: str | None = None,
             **options: Any) -> Callable[[F], F]:
        """Run the decorated function at the times of a five-field cron expression in
        `timezone`, on one instance per scheduled time. Options as for `every`.

        Example::

            @worker.cron("0 3 * * *", timezone="Europe/Paris")
            async def nightly_rollup(run: tenure.Run) -> None:
                ...
        """
        return self._register(Cron(expression, timezone), name, options)

    def election(self, name: str, *, on_elected: Callable[[], Any] | None = None,
                 on_lost: Callable[[], Any] | None = None, ttl: float | timedelta = 30.0,
                 poll: float | timedelta | None = None) -> E:
        """Campaign for leadership of `name` while the worker runs; `on_elected` runs when this
        instance becomes leader and `on_lost` when it stops leading (lease lost, or the worker
        stops). Callbacks may be sync or async. `election.leader()` tells who leads: a plain
        call on `tenure.Worker`, awaited on `tenure.aio.AsyncWorker`.

        Example::

            election = worker.election("primary", on_elected=lambda: print("leading"))
        """
        validate_name(name)
        for callback, argument in ((on_elected, "on_elected"), (on_lost, "on_lost")):
            if callback is not None:
                check_callable(callback, argument, 0, f"def {argument}() -> None")
        if name in self._elections:
            raise InvalidArgument(f"election {name!r} is already registered on this worker")
        lease_ttl = self._ttl(ttl)
        election = self._election_type(name, self._locks, ttl=lease_ttl,
                                       poll=self._poll(poll, lease_ttl),
                                       on_elected=on_elected, on_lost=on_lost)
        self._elections[name] = election
        return election

    def queue(self, source: Any, *, scope: str | None = None, concurrency: int = 16,
              name: str | None = None, **options: Any) -> Callable[[F], F]:
        """Handle messages of a queue `source` (see tenure.queues), locked per `scope` key (a
        JSON property path of the body, ':' between nested properties) so two messages of one
        key never run at once anywhere. Options: see docs/jobs/queues.md.

        Example::

            @worker.queue(tenure.queues.AzureQueue("invoices", connection_string=cs),
                          scope="Invoice:Id", concurrency=16)
            async def handle(message: tenure.QueueMessage) -> None:
                ...
        """
        from tenure.jobs._queue import QueueConsumer

        def register(function: F) -> F:
            check_callable(function, "a queue handler", 1,
                           "def handle(message: tenure.QueueMessage) -> None")
            job = self._job_name(function, name)
            self._consumers.append(QueueConsumer(source, function, locks=self._locks, name=job,
                                                 scope=scope, concurrency=concurrency,
                                                 **options))
            return function

        return register

    # -- validation ----------------------------------------------------------------------------

    def configure(self, job: str, **options: Any) -> None:
        """Change options of a registered job (before the worker runs), checked exactly as the
        decorator checks them; options left out keep their registered values, and defaults
        derived from others (poll from ttl, jitter from the period) follow the new values.

        Example::

            worker.configure("app.jobs.process_invoices", ttl=60, retries=3)
        """
        if job not in self.jobs:
            known = ", ".join(map(repr, self.jobs)) or "none"
            raise InvalidArgument(f"no job {job!r} on this worker; registered jobs: {known}")
        if self.running:
            raise InvalidArgument("configure() jobs before the worker runs")
        old = self.jobs[job]
        merged = {**self._options[job], **options}
        self.jobs[job] = self._spec(old.schedule, job, old.function, merged)
        self._runners[job] = PeriodicJob(self.jobs[job], self._locks)
        self._options[job] = merged

    def _register(self, schedule: Schedule, name: str | None,
                  options: dict[str, Any]) -> Callable[[F], F]:
        self._spec(schedule, "check", _no_job, options)  # bad options fail at the decorator

        def register(function: F) -> F:
            check_callable(function, "a job", 1, "def my_job(run: tenure.Run) -> None")
            job = self._job_name(function, name)
            if job in self.jobs:
                raise self._name_taken(job, name, function)
            self.jobs[job] = self._spec(schedule, job, function, options)
            self._runners[job] = PeriodicJob(self.jobs[job], self._locks)
            self._options[job] = dict(options)
            return function

        return register

    def _name_taken(self, job: str, name: str | None,
                    function: Callable[..., Any]) -> InvalidArgument:
        if name is None:
            return InvalidArgument(f"job {job!r} is already registered on this worker; pass "
                                   "name= to register the same function twice")
        taken_by = _qualified(self.jobs[job].function)
        again = " (the same function)" if self.jobs[job].function is function else ""
        return InvalidArgument(f"name={job!r} is already taken on this worker by the job "
                               f"{taken_by}{again}; choose another name=")

    def _spec(self, schedule: Schedule, job: str, function: Callable[[Run], Any],
              options: dict[str, Any]) -> JobSpec:
        allowed = {"leader", "ttl", "retries", "retry_backoff", "jitter", "misfire",
                   "misfire_grace", "poll", "unhealthy_after"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            named = ", ".join(option + did_you_mean(option, allowed) for option in unknown)
            raise InvalidArgument(f"unknown job option(s) {named}; accepted: "
                                  f"{', '.join(sorted(allowed))}")
        period = period_seconds(schedule)
        leader = options.get("leader", False)
        if not isinstance(leader, bool):
            raise InvalidArgumentType(f"leader must be True or False, got {leader!r}")
        ttl = self._ttl(options.get("ttl", 30.0))
        retries = options.get("retries", 0)
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 100:
            raise InvalidArgument(f"retries={retries!r} must be an int from 0 to 100")
        unhealthy_after = options.get("unhealthy_after", 3)
        if (not isinstance(unhealthy_after, int) or isinstance(unhealthy_after, bool)
                or not 1 <= unhealthy_after <= 10_000):
            raise InvalidArgument(f"unhealthy_after={unhealthy_after!r} must be an int from 1 "
                                  "to 10000 (periods)")
        misfire = options.get("misfire", "coalesce")
        if misfire not in MISFIRE_POLICIES:
            raise InvalidArgument(f"misfire={misfire!r} is not a policy; use 'coalesce' (run "
                                  "the latest missed period once) or 'skip'")
        jitter = options.get("jitter")
        spec_jitter = min(1.0, period / 20) if jitter is None else check_range(
            to_seconds(jitter, "jitter"), "jitter", 0.0, period / 2,
            " (the random start delay must stay well inside the period)")
        grace = options.get("misfire_grace")
        misfire_grace = period / 2 if grace is None else check_range(
            to_seconds(grace, "misfire_grace"), "misfire_grace", 0.1, period,
            " (how late a period may still start; a waking timer is a few ms late)")
        backoff = check_range(to_seconds(options.get("retry_backoff", 1.0), "retry_backoff"),
                              "retry_backoff", 0.001, 3600.0)
        return JobSpec(name=job, function=function, schedule=schedule, leader=leader, ttl=ttl,
                       retries=retries, retry_backoff=backoff, jitter=spec_jitter,
                       misfire=misfire, misfire_grace=misfire_grace,
                       poll=self._poll(options.get("poll"), ttl), unhealthy_after=unhealthy_after)

    def _ttl(self, ttl: Any) -> float:
        return check_ttl(ttl, self.store.backend.capabilities)

    @staticmethod
    def _poll(poll: Any, ttl: float) -> float:
        if poll is None:
            return min(1.0, ttl / 4)
        return check_range(to_seconds(poll, "poll"), "poll", 0.001, ttl)

    @staticmethod
    def _job_name(function: Callable[..., Any], name: str | None) -> str:
        if name is None:
            module = getattr(function, "__module__", None) or "job"
            if module == "__main__":
                module = _main_import_name(function)
            name = f"{module}.{getattr(function, '__qualname__', type(function).__name__)}"
        validate_name(JOB_LOCK_PREFIX + name, "name")
        return name

    # -- running -------------------------------------------------------------------------------

    def _runs(self) -> list[Callable[[anyio.Event], Any]]:
        return ([runner.run for runner in self._runners.values()]
                + [election.run for election in self._elections.values()]
                + [consumer.run for consumer in self._consumers])

    def _runnable(self) -> list[Callable[[anyio.Event], Any]]:
        runs = self._runs()
        if not runs:
            raise InvalidArgument("the worker has nothing to run: register a job with "
                                  "@worker.every, @worker.cron, @worker.queue or worker.election")
        return runs

    async def _serve(self, stopping: anyio.Event, started: anyio.Event | None = None,
                     signals: bool = False) -> None:
        """Run everything until `stopping` is set, then allow `grace` and cancel the rest."""
        runs = self._runnable()
        global _runs_started
        _runs_started += 1
        finished = anyio.Event()
        self._started, self._serving, self._fatal = utc_now(), stopping, None
        self.abandoned = []

        async def guarded(run: Callable[[anyio.Event], Any]) -> None:
            # Nothing may escape a task: the group would raise an ExceptionGroup from run().
            try:
                await run(stopping)
            except Exception as exc:  # a setup error, or refused before the store ever answered
                if self._fatal is None:
                    self._fatal = exc  # run() raises it: the caller reports it, not a log line
                stopping.set()

        async with anyio.create_task_group() as group:
            if signals:
                group.start_soon(self._on_signals, stopping)

            async def run_all() -> None:
                async with anyio.create_task_group() as jobs:
                    for run in runs:
                        jobs.start_soon(guarded, run)
                finished.set()

            group.start_soon(run_all)
            group.start_soon(self._watch_store, stopping)
            if started is not None:
                started.set()
            await stopping.wait()
            with anyio.move_on_after(self.grace) as grace:
                await finished.wait()
            if grace.cancelled_caught:
                log.warning("tenure: work still running after the %g s grace period is being "
                            "cancelled", self.grace)
            group.cancel_scope.cancel()
        self._report_abandoned()
        self._serving = None
        if self._fatal is not None:
            raise self._fatal

    def _report_abandoned(self) -> None:
        """Log and keep (in `abandoned`) each job whose thread runs on without its lease."""
        self.abandoned = [job for job, runner in self._runners.items()
                          if runner.abandoned_runs()]
        for job in self.abandoned:
            log.warning("tenure: job %r still running after grace=%g s; its lease is released, "
                        "its run.check() now raises; it is abandoned (its thread runs on until "
                        "the function returns; Python waits for it at exit)", job, self.grace)

    async def _watch_store(self, stopping: anyio.Event) -> None:
        """While an outage of the store is open, ask the store every retry interval whether it
        answers again: an outage opened by a call no runner repeats (a health check, a
        release) must still end, and a leader's renewals are the core's, not a runner's. The
        question is of the kind that failed: a read when only reads failed, else a lease of
        its own (taken and released), as a store that answers reads may still refuse writes."""
        outage = self._locks.outage
        runner = "the worker's store check"
        backoff = Backoff(RETRY_FIRST, RETRY_CAP)
        while not stopping.is_set():
            if not outage.down:
                backoff = Backoff(RETRY_FIRST, RETRY_CAP)
            if not await sleep_unless_stopped(stopping, backoff.next_delay() if outage.down
                                              else RETRY_CAP):
                return
            if not outage.down:
                continue
            kind = outage.kind
            started = time.monotonic()
            try:
                if kind == READ:
                    await self._locks.records(JOB_LOCK_PREFIX)
                else:
                    await self._probe_lease()
            except Exception as exc:  # never fatal here, and logged by the runners
                outage.failed(runner, exc, started)
                continue
            outage.succeeded(runner, kind)

    async def _probe_lease(self) -> None:
        """Take and release a lease of this instance's own (busy counts: the store answered)."""
        capabilities = self.store.backend.capabilities
        ttl = min(max(capabilities.min_ttl, PROBE_TTL), capabilities.max_ttl)
        lease = await self._locks.try_acquire(PROBE_PREFIX + self.instance, ttl)
        if lease is not None:
            await self._locks.release(lease)

    @staticmethod
    async def _on_signals(stopping: anyio.Event) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for signum in received:
                log.info("tenure: %s received: finishing running jobs, taking no new ones",
                         signal.Signals(signum).name)
                stopping.set()
                return

    def _health(self, records: dict[str, str] | None) -> dict[str, Any]:
        """The report from the store's records, or (None: the store did not answer) from this
        instance's own state: the last record it knows (its own run's, or the one last read),
        flagged `record_unreadable`. Unhealthy once a job missed `unhealthy_after` periods, or while
        a store or queue source refuses (a permanent error)."""
        now = utc_now()
        started = self._started or now
        jobs = {}
        for job, spec in self.jobs.items():
            state = self._runners[job].state
            record = None if records is None else _parse(records.get(spec.lock_name), job)
            if record is not None:
                state.learn_record(record)  # kept for when the store is down
                if record.last_success is not None and (
                        state.last_success is None or record.last_success > state.last_success):
                    state.last_success = record.last_success
            jobs[job] = job_health(spec, state, state.last_record, now, started,
                                   record_unreadable=records is None)
        store = {"url": self.store.url, **self._locks.outage.report()}
        sources = {consumer.source.name: consumer.outage.report()
                   for consumer in self._consumers}
        refused = store["permanent"] or any(entry["permanent"] for entry in sources.values())
        report: dict[str, Any] = {
            "instance": self.instance,
            "healthy": not refused and not any(entry["unhealthy"] for entry in jobs.values()),
            "store": store, "jobs": jobs}
        if sources:
            report["queue_sources"] = sources
        return report

    def _health_failed(self, exc: Exception, started: float) -> dict[str, Any]:
        """health() when reading the records failed: the outage noted, the local report."""
        if isinstance(exc, (InvalidArgument, InvalidArgumentType)):
            raise exc
        if isinstance(exc, TimeoutError) and not isinstance(exc, StoreUnavailable):
            exc = StoreUnavailable(f"{self.store.url}: reading the job records took over "
                                   f"{HEALTH_READ_TIMEOUT:g} s")
        stamp(exc, started, READ)
        self._locks.outage.failed("the health check", exc)
        return self._health(None)


def runs_started() -> int:
    """How many times a Worker of this process started running (run(), start(), `with`):
    `tenure run` compares it around the import of APP, which must not run a worker itself.

    Example::

        before = runs_started(); importlib.import_module("myapp.jobs")
        assert runs_started() == before
    """
    return _runs_started


class AsyncWorker(_Registry[AsyncElection]):
    """Jobs of this instance on an async store; `tenure.aio.AsyncWorker`.

    Example::

        worker = tenure.aio.AsyncWorker(tenure.aio.connect("redis://cache:6379/0"))

        @worker.every(timedelta(minutes=5))
        async def process_invoices(run: tenure.Run) -> None:
            ...

        async with worker:      # e.g. in a FastAPI lifespan
            ...
    """

    _election_type = AsyncElection

    def __init__(self, store: AsyncStore, *, grace: float | timedelta = 30.0) -> None:
        if not isinstance(store, AsyncStore):
            raise InvalidArgumentType(
                "tenure.aio.AsyncWorker needs an async store from tenure.aio.connect(url); for a "
                f"sync store use tenure.Worker; got {type(store).__name__}")
        super().__init__(store, grace=grace)
        self._stopping: anyio.Event | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._exit_error: Exception | None = None

    async def run(self) -> None:
        """Run until `stop()`, SIGTERM or SIGINT (signals only from the main thread). Sync jobs
        still running in their threads when it returns are listed in `abandoned`.

        Example::

            await worker.run()
        """
        self._stopping = anyio.Event()
        await self._serve(self._stopping, signals=threading.current_thread()
                          is threading.main_thread())

    def stop(self) -> None:
        """Take no new runs; running ones get the grace period. Call from the loop's thread."""
        if self._stopping is not None:
            self._stopping.set()

    async def health(self) -> dict[str, Any]:
        """Per-job health: last success, last outcome, next due time, and `unhealthy` when a
        job has not succeeded for `unhealthy_after` periods on any instance; `store` says
        whether the store answers (else since when, and the error). Never raises for a store
        that fails: it answers from this instance's own state, and `healthy` turns False once
        a job missed its allowed periods, or at once when the store refuses (StoreRefused).

        Example::

            report = await worker.health()
            if not report["healthy"]: ...
        """
        if self._locks.outage.down and self.running:  # at once: the runners see its end
            return self._health(None)
        started = time.monotonic()
        try:
            with anyio.fail_after(HEALTH_READ_TIMEOUT):
                records = await self._locks.records(JOB_LOCK_PREFIX)
        except Exception as exc:
            return self._health_failed(exc, started)
        self._locks.outage.succeeded("the health check", READ)
        return self._health(records)

    async def __aenter__(self) -> AsyncWorker:
        self._runnable()
        self._stopping = stopping = anyio.Event()
        started = anyio.Event()
        self._exit_error = None

        async def serve() -> None:
            # What stops the worker is raised by __aexit__ as it is, not as an ExceptionGroup.
            try:
                await self._serve(stopping, started)
            except Exception as exc:
                self._exit_error = exc

        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(serve)
        await started.wait()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.stop()
        group, self._group = self._group, None
        if group is not None:
            await group.__aexit__(exc_type, exc, traceback)
        error, self._exit_error = self._exit_error, None
        if error is not None and exc is None:
            raise error


class Worker(_Registry[Election]):
    """Jobs of this instance on a sync store; `tenure.Worker`.

    Example::

        worker = tenure.Worker(tenure.connect("sqlite:////var/lib/app/locks.db"))

        @worker.every(timedelta(minutes=5))
        def process_invoices(run: tenure.Run) -> None:
            ...

        worker.run()            # or: with worker: serve_http()  (runs in a thread)
    """

    _election_type = Election

    def __init__(self, store: Store, *, grace: float | timedelta = 30.0) -> None:
        if not isinstance(store, Store):
            raise InvalidArgumentType(
                "tenure.Worker needs a sync store from tenure.connect(url); for an async store "
                f"use tenure.aio.AsyncWorker; got {type(store).__name__}")
        super().__init__(store, grace=grace)
        self._portal: Any = None
        self._portal_context: Any = None
        self._health_lock = threading.Lock()
        self._health_read: threading.Thread | None = None
        self._stopping: anyio.Event | None = None
        self._thread_done: Any = None

    def run(self) -> None:
        """Block running the jobs until `stop()`, SIGTERM or SIGINT. Jobs still running past
        the grace period (a sync job cannot be interrupted) are listed in `abandoned`.

        Example::

            worker.run()
        """
        if _loop_running():
            raise InvalidArgument(
                "Worker.run() blocks, and this thread already runs an event loop: in async "
                "code use tenure.aio.AsyncWorker(tenure.aio.connect(...)) and "
                "`await worker.run()`, or call worker.start() to run this one in a background "
                "thread")
        signals = threading.current_thread() is threading.main_thread()

        async def main() -> None:
            self._stopping = anyio.Event()
            await self._serve(self._stopping, signals=signals)

        anyio.run(main)

    def start(self) -> None:
        """Run the jobs in a background thread (with its own event loop) and return.

        Example::

            worker.start(); ...; worker.stop()
        """
        if self._portal is not None:
            raise InvalidArgument("the worker is already running; call stop() first")
        self._runnable()
        self._portal_context = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_context.__enter__()
        self._stopping = self._portal.call(anyio.Event)
        started = self._portal.call(anyio.Event)
        self._thread_done = self._portal.start_task_soon(self._serve, self._stopping, started)
        self._portal.call(started.wait)

    def stop(self, timeout: float | None = None) -> None:
        """Take no new runs, let running ones finish within the grace period, free the
        leases; waits for all of it when the worker runs in the background (`start()`).

        Example::

            worker.stop()
        """
        portal, self._portal = self._portal, None
        if portal is None:
            if self._stopping is not None:  # run() in another thread: its loop owns the event
                raise InvalidArgument("a worker blocked in run() stops on SIGTERM/SIGINT; use "
                                      "start()/stop() to control it from another thread")
            return
        portal.call(self._stopping.set)  # type: ignore[union-attr]
        try:
            self._thread_done.result(timeout=timeout)
        finally:
            self._portal_context.__exit__(None, None, None)

    def health(self) -> dict[str, Any]:
        """Per-job health (see tenure.aio.AsyncWorker.health).

        Example::

            assert worker.health()["healthy"]
        """
        if self._locks.outage.down and self.running:  # at once: the runners see its end
            return self._health(None)
        started = time.monotonic()
        try:
            records = self._read_records_bounded()
        except Exception as exc:
            return self._health_failed(exc, started)
        self._locks.outage.succeeded("the health check", READ)
        return self._health(records)

    def _read_records_bounded(self) -> dict[str, str]:
        """The job records, within HEALTH_READ_TIMEOUT (as the async worker's health()): the
        read runs in a thread of its own, left to finish by itself when the store hangs; while
        one is still running, health() answers from this instance's state instead of piling
        up threads."""
        with self._health_lock:
            if self._health_read is not None and self._health_read.is_alive():
                raise TimeoutError("the previous read of the job records is still running")
            box: dict[str, Any] = {}

            def read() -> None:
                try:
                    box["records"] = self._locks.records_of.records(JOB_LOCK_PREFIX)
                except Exception as exc:
                    box["error"] = exc

            self._health_read = thread = threading.Thread(
                target=read, name="tenure-health-read", daemon=True)
            thread.start()
        thread.join(HEALTH_READ_TIMEOUT)
        if thread.is_alive():
            raise TimeoutError(f"reading the job records took over {HEALTH_READ_TIMEOUT:g} s")
        if "error" in box:
            raise box["error"]
        records: dict[str, str] = box["records"]
        return records

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


def _qualified(function: Callable[..., Any]) -> str:
    """`module.qualname` of a function, for messages."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", type(function).__name__)
    return f"{module}.{qualname}" if module else qualname


def _main_import_name(function: Callable[..., Any]) -> str:
    """The name `tenure run module:worker` imports the running script under, so that instances
    started as a script and by `tenure run` name a job alike (`__main__.f` would not match).

    `python -m pkg.app` gives `pkg.app` (its spec). `python path/app.py` gives `app` when
    app.py's directory is no package: the name it imports under from there (the script's own
    sys.path[0], and `tenure run`'s when started in that directory). A script inside a package
    (pkg.app or app?), or code with no file (python -c, a REPL), is refused: pass name=.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    what = getattr(function, "__qualname__", type(function).__name__)
    path = getattr(main, "__file__", None)
    if not path:
        raise InvalidArgument(f"job {what!r} is defined in __main__ with no file (python -c or "
                              "a REPL), so it has no module name instances share; pass name=, "
                              f"for example @worker.every(..., name='app.{what}')")
    script = Path(path)
    if (script.parent / "__init__.py").exists():
        raise InvalidArgument(f"job {what!r} is defined in the script {script.name}, which sits "
                              f"in a package, so its module name is ambiguous ({script.stem!r} or "
                              f"a dotted package path); pass name=, or start it as python -m "
                              "package.module")
    return script.stem
