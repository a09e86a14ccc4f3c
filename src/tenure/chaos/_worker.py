"""One chaos worker, as its own OS process:

    python -m tenure.chaos._worker SETTINGS_JSON

It waits for the run's control file (the phases, on the shared monotonic clock), then loops
until the last phase ends: acquire the phase's lock (or a slot of its semaphore), read the
counter of that name and slot from the oracle, sleep a random time (the work: mostly a few
milliseconds, one section in twenty about half the ttl, so that renewals happen inside), check the
lease, write value + 1 with the lease's fencing token, release. Every step goes to the history;
so do renewals and losses.

On SIGUSR1 the worker stops itself (SIGSTOP) in its next critical section, after the check and
right before the write: the worst moment for a GC pause, the one only fencing covers. The
orchestrator sends SIGCONT after the pause's length.

Example (what the orchestrator runs)::

    subprocess.Popen([sys.executable, "-m", "tenure.chaos._worker", json.dumps(settings)])
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._oracle import OracleClient

CONTROL_WAIT = 60.0  # how long a worker waits for the control file before giving up


class ChaosWorker:
    """The worker's loop and its history."""

    def __init__(self, settings: dict[str, Any], history: HistoryWriter,
                 oracle: OracleClient) -> None:
        self.settings = settings
        self.history = history
        self.oracle = oracle
        self.random = random.Random(f"{settings['seed']}-{settings['number']}-{os.getpid()}")
        self.pause_requested = False
        self.stopping = False

    def run(self, store: tenure.Store, phases: Sequence[dict[str, Any]]) -> None:
        for phase in phases:
            if phase["kind"] == "lock":
                lock = store.lock(phase["name"], ttl=self.settings["ttl"], min_wait=0.01,
                                  max_wait=self.settings["retry"], on_lost=self._lost)
            else:
                lock = store.semaphore(phase["name"], phase["limit"], ttl=self.settings["ttl"],
                                       min_wait=0.01, max_wait=self.settings["retry"],
                                       on_lost=self._lost)
            while not self.stopping and time.monotonic() < phase["until"]:
                self.cycle(lock, phase["until"])

    def cycle(self, lock: tenure.Lock, until: float) -> None:
        """One acquire, read, work, write, release."""
        name = lock.name
        self.history.emit("invoke", "acquire", name=name)
        try:
            lease = lock.acquire(timeout=max(0.0, until - time.monotonic()))
        except tenure.LockTimeout:
            self.history.emit("fail", "acquire", name=name, error="timeout")
            return
        except tenure.TenureError as exc:
            self.history.emit("fail", "acquire", name=name, error=type(exc).__name__)
            time.sleep(self.settings["retry"])  # pacing after a store failure, not a wait
            return
        self.history.emit("ok", "acquire", name=name, slot=lease.slot, token=lease.token)
        try:
            value = self.oracle.read(name, lease.slot, lease.token)
            time.sleep(self._work_seconds())
            if lease.lost:
                self.history.emit("info", "skip-write", name=name, slot=lease.slot,
                                  token=lease.token, reason="lease lost before the write")
                return
            if self.pause_requested:
                self.pause_requested = False
                self.history.emit("info", "pause", name=name, slot=lease.slot, token=lease.token)
                # To this thread, not the process: a process-wide SIGSTOP may be taken by the
                # renewal thread while this one goes on to write. The orchestrator sends SIGCONT.
                signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                self.history.emit("info", "resume", name=name, slot=lease.slot,
                                  token=lease.token)
            self.oracle.write(name, lease.slot, lease.token, value + 1)
        finally:
            self._release(lease)

    def _work_seconds(self) -> float:
        """Mostly 5 to 50 ms; one section in twenty lasts about half the ttl, so renewals (and
        the faults that delay them) happen inside critical sections too."""
        if self.random.random() < 0.05:
            return float(self.random.uniform(0.4, 0.6) * self.settings["ttl"])
        return self.random.uniform(0.005, 0.05)

    def _release(self, lease: tenure.Lease) -> None:
        fields: dict[str, Any] = {"name": lease.name, "slot": lease.slot, "token": lease.token}
        self.history.emit("invoke", "release", **fields)
        try:
            freed = lease.release()
        except tenure.TenureError as exc:
            self.history.emit("fail", "release", error=type(exc).__name__, **fields)
        else:
            self.history.emit("ok", "release", freed=freed, **fields)

    def _lost(self, lease: tenure.Lease) -> None:
        reason = lease.lost_reason.value if lease.lost_reason else None
        self.history.emit("info", "lost", name=lease.name, slot=lease.slot, token=lease.token,
                          reason=reason)


def log_renewals(store: tenure.Store, history: HistoryWriter) -> None:
    """Record every batched renewal the lease monitor sends (invoke, then ok or fail per
    lease), by wrapping the store object's `renew`."""
    backend = store.backend
    renew = backend.renew

    def renew_and_record(grants: Any, ttl: float) -> Any:
        tokens = [grant.token for grant in grants]
        history.emit("invoke", "renew", name=grants[0].name if grants else None, tokens=tokens)
        try:
            results = renew(grants, ttl)
        except Exception as exc:
            history.emit("fail", "renew", tokens=tokens, error=type(exc).__name__)
            raise
        for grant, result in zip(grants, results, strict=False):
            error = {"error": result.value} if isinstance(result, tenure.LostReason) else {}
            history.emit("fail" if error else "ok", "renew", name=grant.name, slot=grant.slot,
                         token=grant.token, **error)
        return results

    setattr(backend, "renew", renew_and_record)  # noqa: B010 (an instance attribute on purpose)


def wait_for_control(path: Path, timeout: float) -> dict[str, Any] | None:
    """The control file's content once the orchestrator has written it (atomically)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            control: dict[str, Any] = json.loads(path.read_text())
            return control
        time.sleep(0.01)  # polling a condition with a deadline
    return None


def main(argv: list[str]) -> int:
    settings = json.loads(argv[0])
    process = f"worker-{settings['number']}"
    history = HistoryWriter(Path(settings["history"]), process)
    oracle = OracleClient(settings["oracle_port"], process)
    worker = ChaosWorker(settings, history, oracle)
    signal.signal(signal.SIGUSR1, lambda *_: setattr(worker, "pause_requested", True))
    signal.signal(signal.SIGUSR2, lambda *_: setattr(worker, "pause_requested", False))
    signal.signal(signal.SIGTERM, lambda *_: setattr(worker, "stopping", True))
    store = tenure.connect(settings["store"], holder=f"{process}:{os.getpid()}")
    log_renewals(store, history)
    history.emit("info", "start")
    control = wait_for_control(Path(settings["control"]), CONTROL_WAIT)
    try:
        if control is not None:
            worker.run(store, control["phases"])
    finally:
        try:
            store.close()
        except tenure.TenureError as exc:
            history.emit("fail", "close", error=type(exc).__name__)
        history.emit("info", "stop")
        oracle.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
