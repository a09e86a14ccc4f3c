"""`tenure chaos`: a Jepsen-style safety check of a store under faults, shipped with tenure.

Worker processes loop acquire -> read a counter from the oracle -> work -> write value + 1
with the fencing token -> release, on a lock (then, optionally, a semaphore), while a seeded
schedule kills and pauses the holder, degrades or stalls its network through a per-worker TCP
proxy, makes it fork, and restarts the store server. Six checkers read the history afterwards:
no interleaved or backwards writes, unique and increasing tokens, no lost update, liveness once
the faults stop, every loss signalled within 100 ms of the lease's deadline, and forks that
leave the parent's lease alone. With `fencing=False` the oracle only records: the pause fault
must then produce overlapping critical sections (the positive control); with `late_signal`
the signal checker must find late signals.

Two more workloads run tenure's own runners under the same faults: `workload="jobs"` (a
periodic job on every worker: runs never overlap, each period is recorded once or a misfire
rule covers it, no runner dies; control `skip_record`) and `workload="queue"` (keyed messages
through a PostgreSQL queue: handlers of a key never overlap, each message is completed once or
poisoned, none is lost; control `key_lock=False`). See docs/chaos.md.

Example::

    from tenure.chaos import ChaosSettings, run_chaos
    report = run_chaos(ChaosSettings("sqlite:////tmp/chaos-locks.db", duration=20, seed=1))
    assert report.violations == []
    report = run_chaos(ChaosSettings("redis://127.0.0.1:6379/0", workload="jobs", duration=30))
    report.verdict.figures["periods recorded"]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenure.chaos._report import Report, print_report
    from tenure.chaos._run import run_chaos
    from tenure.chaos._settings import FAULT_KINDS, ChaosSettings

__all__ = ["FAULT_KINDS", "ChaosSettings", "Report", "print_report", "run_chaos"]

# Loaded on first use: `tenure locks` builds the chaos command's parser, and should not pay for
# the chaos engine (its proxy imports asyncio) to list a store.
_HOMES = {"FAULT_KINDS": "_settings", "ChaosSettings": "_settings", "Report": "_report",
          "print_report": "_report", "run_chaos": "_run"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tenure.chaos' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tenure.chaos.{home}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
