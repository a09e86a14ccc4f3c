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
import os
import random
import signal
import sys
import threading
import time
import traceback
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._lifeline import watch_parent
from tenure.chaos._oracle import OracleClient
from tenure.chaos._worker import CONTROL_WAIT, log_renewals, wait_for_control


class JobsChaos:
    """The job function and the requests the nemesis sends by signal."""

    def __init__(self, settings: dict[str, Any], history: HistoryWriter,
                 oracle: OracleClient) -> None:
        self.settings = settings
        self.history = history
        self.oracle = oracle
        self.random = random.Random(f"{settings['seed']}-{settings['number']}-{os.getpid()}")
        self.pause_requested = False
        self.hold_requested = False
        self.lock = threading.Lock()  # the oracle connection is one socket

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
            if self.pause_requested:
                self.pause_requested = False
                self.history.emit("info", "pause", **fields)
                signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                self.history.emit("info", "resume", **fields)
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
        self.hold_requested = False
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


def main(argv: list[str]) -> int:
    watch_parent()  # exit soon after the chaos run, even one killed with SIGKILL
    settings = json.loads(argv[0])
    process = f"worker-{settings['number']}"
    history = HistoryWriter(Path(settings["history"]), process)
    oracle = OracleClient(settings["oracle_port"], process)
    chaos = JobsChaos(settings, history, oracle)
    signal.signal(signal.SIGUSR1, lambda *_: setattr(chaos, "pause_requested", True))
    signal.signal(signal.SIGURG, lambda *_: setattr(chaos, "hold_requested", True))

    def forget(*_: object) -> None:
        chaos.pause_requested = chaos.hold_requested = False

    signal.signal(signal.SIGUSR2, forget)
    signal.signal(signal.SIGWINCH, signal.SIG_IGN)  # no fork in this workload
    store = tenure.connect(settings["store"], holder=f"{process}:{os.getpid()}")
    log_renewals(store, history)
    log_records(store, history, bool(settings.get("skip_record")))
    history.emit("info", "start")
    control = wait_for_control(Path(settings["control"]), CONTROL_WAIT)
    code = 0
    try:
        if control is not None:
            phase = control["phases"][0]
            worker = tenure.Worker(store, grace=settings["ttl"])
            worker.every(timedelta(seconds=settings["period"]), name=phase["name"],
                         ttl=settings["ttl"], retries=0)(chaos.job)
            # The Worker stops cleanly on SIGTERM (its own handler, in run()).
            stop = threading.Timer(max(0.0, phase["until"] - time.monotonic()),
                                   os.kill, (os.getpid(), signal.SIGTERM))
            stop.daemon = True
            stop.start()
            worker.run()
    except BaseException as exc:  # the runner died: what the exits checker looks for
        code = 1
        history.emit("fail", "exit", error=f"{type(exc).__name__}: {exc}"[:500],
                     detail=innermost_errors(exc))
        traceback.print_exc()
    finally:
        try:
            store.close()
        except tenure.TenureError as exc:
            history.emit("fail", "close", error=type(exc).__name__)
        history.emit("info", "stop", code=code)
        oracle.close()
    return code


def innermost_errors(exc: BaseException) -> list[str]:
    """The innermost exceptions of an exception group (or the exception), as short text."""
    inner = getattr(exc, "exceptions", None)
    if not inner:
        return [f"{type(exc).__name__}: {exc}"[:300]]
    return [leaf for each in inner for leaf in innermost_errors(each)][:5]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
