"""`tenure demo`: its options and its exit status (0 when every invariant held, 1 when one
broke, 2 for bad options).

Example::

    $ tenure demo                       # 500 invoices, 5 instances, every layer on
    $ tenure demo --no-fencing --no-idempotency   # the same faults: duplicates appear
    $ tenure demo --no-outbox                     # a kill after a commit: a mail is lost
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Any

from rich.console import Console

LAYER_SWITCHES = {
    "lease": "every instance runs the job at once (each has a lock of its own); the claims "
             "still keep each invoice to one payer, and the report says so",
    "fencing": "claims and the final write ignore fencing tokens: a frozen holder's late write "
               "lands and mails the invoice again",
    "idempotency": "charges carry no idempotency key: a frozen holder charges again",
    "outbox": "the mail is sent after the commit (a dual write): a kill between the two loses it",
}


def add_parser(commands: Any) -> None:
    """Add the `demo` command to the `tenure` command's subparsers."""
    demo = commands.add_parser(
        "demo", help="the invoice demo: 5 instances, faults, and the exactly-once checks",
        description="Pay N invoices with a singleton job on several app instances (OS "
                    "processes) while killing and freezing the instance that pays, then check "
                    "that no invoice was charged twice or left unpaid and that each got one "
                    "mail. Exit 0 when every invariant held, 1 when one broke.")
    demo.add_argument("--invoices", type=int, default=500, help="default 500")
    demo.add_argument("--instances", type=int, default=5, help="default 5")
    demo.add_argument("--faults", type=int, default=4,
                      help="faults to inject, spread over the run: a freeze of the paying "
                           "instance right after a claim, then a kill right after a payment's "
                           "commit, by turns (default 4)")
    demo.add_argument("--store", metavar="URL", default=None,
                      help="the locks' store (default: SQLite in the run's directory), e.g. "
                           "redis://localhost:6379/0 or file:///tmp/locks")
    demo.add_argument("--seed", type=int, default=None, help="replay a run's fault timing")
    demo.add_argument("--dir", type=Path, default=None,
                      help="keep the run's databases and logs here (default: a temporary "
                           "directory, removed)")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    for layer, effect in LAYER_SWITCHES.items():
        demo.add_argument(f"--no-{layer}", action="store_true", help=f"{effect}")


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def run(args: argparse.Namespace) -> int:
    """Run the demo with the parsed options; the exit status."""
    from tenure.demo import DemoSettings, print_report, run_demo

    layers = tuple(layer for layer in LAYER_SWITCHES if not getattr(args, f"no_{layer}"))
    console = Console(highlight=False)
    settings = DemoSettings(invoices=args.invoices, instances=args.instances,
                            faults=args.faults, store=args.store, seed=args.seed,
                            layers=layers, directory=args.dir, live=not args.json,
                            console=console)
    # SIGTERM ends the demo as Ctrl-C does: its instances stop and its temporary directory
    # is removed (the default action would kill the process before any cleanup ran).
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        report = run_demo(settings)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print_report(report, console)
    return 1 if report.failures() else 0
