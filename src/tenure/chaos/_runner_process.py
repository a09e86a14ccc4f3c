"""What the jobs and the queue workloads' worker processes share: a `tenure.Worker` runs the
phase's work until the phase ends (then SIGTERM to itself: the Worker's own clean stop), the
nemesis' requests arrive by signal (SIGUSR1 pause, SIGURG hold, SIGUSR2 forget both; no fork),
and a Worker that dies records `exit` (fail) with its error before the process exits 1.

Example (a workload's worker module)::

    class JobsChaos(WorkloadChaos):
        def job(self, run: tenure.Run) -> None: ...

    def main(argv: list[str]) -> int:
        return run_process(argv, JobsChaos, schedule)  # schedule(phase, chaos): its Worker
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._oracle import OracleClient
from tenure.chaos._worker import Chaos, close_process, connect_and_wait, start_process


@dataclass
class Phase:
    """What a workload needs to set its Worker up for the run's one phase.

    Example::

        worker = tenure.Worker(phase.store, grace=phase.settings["ttl"])
    """

    settings: dict[str, Any]
    store: tenure.Store
    history: HistoryWriter
    name: str
    until: float  # when the phase ends, on the shared monotonic clock


def run_process(argv: list[str],
                make_chaos: Callable[[dict[str, Any], HistoryWriter, OracleClient], Chaos],
                build: Callable[[Phase, Chaos], tuple[tenure.Worker, float]]) -> int:
    """A workload's worker process: `make_chaos(settings, history, oracle)` holds the state,
    `build(phase, chaos)` returns the Worker and when to stop it (SIGTERM, on the monotonic
    clock). Returns the exit code: 1 when the Worker died.

    Example::

        sys.exit(run_process(sys.argv[1:], QueueChaos, consume))
    """
    chaos = start_process(argv, make_chaos)
    signal.signal(signal.SIGWINCH, signal.SIG_IGN)  # no fork in these workloads
    store, control = connect_and_wait(chaos)
    code = 0
    try:
        if control is not None:
            first = control["phases"][0]
            phase = Phase(chaos.settings, store, chaos.history, first["name"], first["until"])
            worker, stop_at = build(phase, chaos)
            # The Worker stops cleanly on SIGTERM (its own handler, in run()).
            stop = threading.Timer(max(0.0, stop_at - time.monotonic()),
                                   os.kill, (os.getpid(), signal.SIGTERM))
            stop.daemon = True
            stop.start()
            worker.run()
    except BaseException as exc:  # the runner died: what the exits checker looks for
        code = 1
        chaos.history.emit("fail", "exit", error=f"{type(exc).__name__}: {exc}"[:500],
                           detail=innermost_errors(exc))
        traceback.print_exc()
    finally:
        close_process(chaos, store, code=code)
    return code


def innermost_errors(exc: BaseException) -> list[str]:
    """The innermost exceptions of an exception group (or the exception), as short text.

    Example::

        innermost_errors(ExceptionGroup("x", [ValueError("v")]))  # ['ValueError: v']
    """
    inner = getattr(exc, "exceptions", None)
    if not inner:
        return [f"{type(exc).__name__}: {exc}"[:300]]
    return [leaf for each in inner for leaf in innermost_errors(each)][:5]
