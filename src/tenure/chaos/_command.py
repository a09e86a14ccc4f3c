"""`tenure chaos`: its options and its exit status (0 when every check held, 1 on any
violation, when no fault could be injected, or when the store fails, 2 for bad options).

Example::

    $ tenure chaos --store sqlite:////tmp/chaos-locks.db --duration 30 --seed 7
    $ tenure chaos --store redis://127.0.0.1:6379/0 --faults kill,pause,proxy --workers 8
    $ tenure chaos --store sqlite:////tmp/chaos-locks.db --no-fencing --faults pause  # exit 1
    $ tenure chaos --store sqlite:////tmp/chaos-locks.db --late-signal 0.5 --faults pause  # 1
    $ tenure chaos --workload jobs --store redis://127.0.0.1:6379/0 --duration 40
    $ tenure chaos --workload jobs --store sqlite:////tmp/chaos-locks.db --skip-record  # exit 1
    $ tenure chaos --workload queue --store postgresql://app@db/app --duration 40
    $ tenure chaos --workload queue --store postgresql://app@db/app --no-key-lock  # exit 1
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from tenure._errors import InvalidArgument


def add_parser(commands: Any) -> None:
    """Add the `chaos` command to the `tenure` command's subparsers."""
    from tenure.chaos._settings import FAULT_KINDS

    chaos = commands.add_parser(
        "chaos", help="check a store's safety under kills, pauses, network faults, restarts",
        usage="tenure chaos [-h] [--store URL] [--workload lock|jobs|queue] [--workers N]\n"
              "                    [--duration S] [--faults LIST] [--seed N] [--no-fencing]\n"
              "                    [--late-signal S] [--ttl S] [--semaphore-phase]\n"
              "                    [--lock-all-phase] [--group-phase] [--period S]\n"
              "                    [--skip-record] [--queue-url URL] [--keys N] [--no-key-lock]\n"
              "                    [--restart-command CMD] [--dir DIR] [--json]",
        description="Run worker processes that increment a counter under a lock with its "
                    "fencing token while faults are injected, then check the history: writes "
                    "never interleave or go backwards, tokens are unique and increasing, no "
                    "update is lost, a new holder takes over once the faults stop, every loss "
                    "is signalled within 100 ms of the lease's deadline, and a forked child "
                    "leaves its parent's lease alone. --workload jobs runs a periodic job "
                    "(tenure.Worker) on every worker and checks that runs never overlap, each "
                    "period is recorded once, and no runner dies; --workload queue runs keyed "
                    "queue messages through a PostgreSQL queue and checks that handlers of a "
                    "key never overlap and each message is handled once or poisoned. Exit 0 "
                    "when every check held, 1 on any violation.")
    chaos.add_argument("--workload", choices=("lock", "jobs", "queue"), default="lock",
                       help="what the workers run (default lock; see docs/chaos.md)")
    chaos.add_argument("--store", metavar="URL", default=None,
                       help="the store to check (default: $TENURE_STORE), e.g. "
                            "sqlite:////tmp/chaos-locks.db or "
                            "redis://127.0.0.1:6379/0 (azblob:///CONTAINER reads "
                            "AZURE_STORAGE_CONNECTION_STRING)")
    chaos.add_argument("--workers", metavar="N", type=int, default=8,
                       help="worker processes (default 8)")
    chaos.add_argument("--duration", metavar="S", type=float, default=60.0,
                       help="seconds of the run, both phases included (default 60)")
    chaos.add_argument("--faults", metavar="LIST", default=",".join(FAULT_KINDS),
                       help=f"comma-separated subset of {','.join(FAULT_KINDS)} (default: all; "
                            "those that cannot apply to the store are named in the summary)")
    chaos.add_argument("--seed", metavar="N", type=int, default=None,
                       help="the fault schedule's seed (default: random, printed)")
    chaos.add_argument("--ttl", type=float, default=None, metavar="S",
                       help="lease ttl in seconds (default 2; 15 on azblob)")
    chaos.add_argument("--no-fencing", action="store_true",
                       help="the oracle accepts every write (the positive control: the pause "
                            "fault must then produce violations)")
    chaos.add_argument("--late-signal", type=float, default=0.0, metavar="S",
                       help="each worker's on_lost waits S seconds before it records the loss "
                            "(the positive control of the signal checker: with the pause or "
                            "stall fault it must find late signals and exit 1)")
    chaos.add_argument("--semaphore-phase", action="store_true",
                       help="a phase on a semaphore (limit 2), an equal share of the duration")
    chaos.add_argument("--lock-all-phase", action="store_true",
                       help="a last phase of store.lock_all() over overlapping sets of 2-3 "
                            "names, an equal share of the duration")
    chaos.add_argument("--group-phase", action="store_true",
                       help="a last phase of store.group() members (3 ids, contended) "
                            "joining, listing the group and leaving, an equal share")
    chaos.add_argument("--period", type=float, default=1.0, metavar="S",
                       help="jobs: the job's period in seconds (default 1)")
    chaos.add_argument("--skip-record", action="store_true",
                       help="jobs: the runner never finds a period's record (the positive "
                            "control: periods then run twice, exit 1)")
    chaos.add_argument("--queue-url", metavar="URL", default=None,
                       help="queue: the PostgreSQL database of the queue (default: the store, "
                            "when it is postgresql://), or azqueue:// for Azure Queue Storage "
                            "(reads AZURE_STORAGE_QUEUE_CONNECTION_STRING)")
    chaos.add_argument("--keys", metavar="N", type=int, default=6,
                       help="queue: distinct message keys (default 6)")
    chaos.add_argument("--no-key-lock", action="store_true",
                       help="queue: handle messages without the per-key lock (the positive "
                            "control: handlers of one key then overlap, exit 1)")
    chaos.add_argument("--restart-command", metavar="CMD", default=None,
                       help="shell command that restarts the store server (the restart fault)")
    chaos.add_argument("--dir", type=Path, default=None, metavar="DIR",
                       help="where the history and logs go (default: a new temporary directory, "
                            "kept)")
    chaos.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """Run chaos with the parsed options; the exit status."""
    from tenure.chaos import ChaosSettings, print_report, run_chaos

    store = args.store or os.environ.get("TENURE_STORE")
    if not store:
        raise InvalidArgument("no store given: pass --store URL or set TENURE_STORE (e.g. "
                              "sqlite:////tmp/chaos-locks.db)")
    console = Console(highlight=False)
    faults = tuple(kind.strip() for kind in args.faults.split(",") if kind.strip())
    settings = ChaosSettings(store, workers=args.workers, duration=args.duration,
                             faults=faults, seed=args.seed, ttl=args.ttl,
                             fencing=not args.no_fencing, semaphore_phase=args.semaphore_phase,
                             lock_all_phase=args.lock_all_phase,
                             group_phase=args.group_phase,
                             late_signal=args.late_signal, workload=args.workload,
                             period=args.period, skip_record=args.skip_record,
                             queue_url=args.queue_url, keys=args.keys,
                             key_lock=not args.no_key_lock,
                             directory=args.dir, restart_command=args.restart_command,
                             console=None if args.json else console)
    report = run_chaos(settings)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print_report(report, console)
    return 1 if report.violations or report.inconclusive else 0
