"""One worker process of the jobs workload:

    python -m tenure.chaos._jobs_worker SETTINGS_JSON

It runs a `tenure.Worker` with one periodic job (every `period` seconds, the run's ttl, no
retries) until the phase ends (then SIGTERM to itself: the Worker's own clean stop). Each run
records `run` (invoke, then ok or fail; each with the wall clock too) with its period (epoch
seconds), attempt and fencing token, reads the job's counter from the oracle, works (mostly 50
to 300 ms; one run in ten about half the ttl, so renewals happen inside), checks the run, and
writes value + 1 with the token (fenced). The
store's `write_record` is wrapped to record every period record the runner writes (`record`,
with `written`), so the checkers know which runs completed their period. With `skip_record`
(the positive control) `read_record` always answers "no record": every instance whose timer
fires runs the period again after the previous holder released.

Signals as in the lock workload's worker: SIGUSR1 stops the run (SIGSTOP) right before its
write, SIGURG holds the next run until `run.check()` raises (its lease was lost) or 2 ttl + 1 s
passed, SIGUSR2 forgets both. A Worker that dies (it must not: runners survive store outages)
records `exit` (fail) with the error before the process exits 1.

Example (what the orchestrator runs)::

    subprocess.Popen([sys.executable, "-m", "tenure.chaos._jobs_worker", json.dumps(settings)])
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta
from typing import Any

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._runner_process import Phase, run_process
from tenure.chaos._worker import WorkloadChaos


class JobsChaos(WorkloadChaos):
    """The job function and the requests the nemesis sends by signal."""

    def job(self, run: tenure.Run) -> None:
        """One run: read, work, check, write with the token; every step to the history."""
        fields: dict[str, Any] = {"name": run.job, "slot": 0, "token": run.token,
                                  "period": run.period_start.timestamp(),
                                  "attempt": run.attempt}
        self.history.emit("invoke", "run", wall=time.time(), **fields)
        try:
            with self.lock:
                value = self.oracle.read(run.job, 0, run.token)
            if self.hold_requested:
                self._hold(run, fields)
            time.sleep(self._work_seconds())
            run.check()
            self.pause_if_requested(**fields)
            with self.lock:
                accepted = self.oracle.write(run.job, 0, run.token, value + 1)
        except BaseException as exc:
            self.history.emit("fail", "run", error=type(exc).__name__, wall=time.time(),
                              deadline=run.lease.deadline, **fields)
            raise
        self.history.emit("ok", "run", accepted=accepted, deadline=run.lease.deadline,
                          lost=run.lease.lost, wall=time.time(), **fields)

    def _hold(self, run: tenure.Run, fields: dict[str, Any]) -> None:
        """Go on with the run until it is told its lease is lost, or 2 ttl + 1 s."""
        self.requests.take("hold")
        self.history.emit("info", "hold", **fields)
        until = time.monotonic() + 2 * self.settings["ttl"] + 1.0
        told = False
        while time.monotonic() < until:
            try:
                run.check()
            except tenure.LeaseLost:
                told = True
                break
            time.sleep(0.005)  # the work, in slices: a sync run checks for the loss
        self.history.emit("info", "hold-end", told=told, **fields)

    def _work_seconds(self) -> float:
        if self.random.random() < 0.1:
            return float(self.random.uniform(0.4, 0.6) * self.settings["ttl"])
        return self.random.uniform(0.05, 0.3)


def log_records(store: tenure.Store, history: HistoryWriter, skip_record: bool) -> None:
    """Record every period record the runner writes (`record`: invoke, then ok with `written`
    or fail), by wrapping the store object's `write_record`; with `skip_record`, make
    `read_record` find no record (the positive control)."""
    backend: Any = store.backend
    write = backend.write_record

    def write_and_record(grant: Any, text: str) -> Any:
        period = datetime.fromisoformat(json.loads(text)["period"]).timestamp()
        fields: dict[str, Any] = {"name": grant.name, "token": grant.token, "period": period}
        history.emit("invoke", "record", **fields)
        try:
            written = write(grant, text)
        except Exception as exc:
            history.emit("fail", "record", error=type(exc).__name__, **fields)
            raise
        history.emit("ok", "record", written=bool(written), **fields)
        return written

    setattr(backend, "write_record", write_and_record)  # noqa: B010 (the instance, on purpose)
    if skip_record:
        setattr(backend, "read_record", lambda name: None)  # noqa: B010


def schedule(phase: Phase, chaos: JobsChaos) -> tuple[tenure.Worker, float]:
    """The phase's Worker: `chaos.job` every `period` seconds, no retries (each period record
    it writes recorded); it stops at the phase's end.

    Example::

        worker, stop_at = schedule(phase, JobsChaos(settings, history, oracle))
    """
    settings = phase.settings
    log_records(phase.store, phase.history, bool(settings.get("skip_record")))
    worker = tenure.Worker(phase.store, grace=settings["ttl"])
    worker.every(timedelta(seconds=settings["period"]), name=phase.name,
                 ttl=settings["ttl"], retries=0)(chaos.job)
    return worker, phase.until


def main(argv: list[str]) -> int:
    return run_process(argv, JobsChaos, schedule)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
