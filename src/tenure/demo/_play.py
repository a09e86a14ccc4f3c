"""Playing one demo run: setup, the fault schedule, the live view and the report.

Example::

    report = run_demo(DemoSettings(invoices=50, instances=3, live=False))
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

import tenure
from tenure._errors import InvalidArgument
from tenure._jsonlines import read_appended
from tenure._urls import parse_store_url
from tenure.chaos._lifeline import Lifeline
from tenure.demo._instances import FAULT_KINDS, Fleet, Instance
from tenure.demo._report import LAYERS, Report
from tenure.demo._world import World


@dataclass
class DemoSettings:
    """How to run the demo (the defaults are `make demo`'s).

    Example::

        DemoSettings(invoices=100, layers=("lease", "outbox"))  # no fencing, no idempotency
    """

    invoices: int = 500
    instances: int = 5
    store: str | None = None  # default: sqlite in the run's directory
    layers: tuple[str, ...] = LAYERS
    faults: int = 4
    seed: int | None = None
    ttl: float = 2.0
    stale: float = 2.0
    batch: int = 40
    latency: float = 0.02
    timeout: float = 120.0
    directory: Path | None = None  # default: a temporary directory, removed afterwards
    live: bool = True
    console: Console = field(default_factory=Console)

    def check(self) -> None:
        """Fail with a clear message on a bad setting, before anything starts."""
        for name, low, high in (("invoices", 1, 100_000), ("instances", 2, 32),
                                ("faults", 0, 100), ("batch", 1, 10_000)):
            value = getattr(self, name)
            if not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgument(f"--{name} must be {low} to {high}, got {value!r}")
        unknown = sorted(set(self.layers) - set(LAYERS))
        if unknown:
            raise InvalidArgument(f"unknown layer(s) {', '.join(unknown)}; layers: "
                                  f"{', '.join(LAYERS)}")
        for name in ("ttl", "stale", "latency", "timeout"):
            if not 0 <= getattr(self, name) <= 3600:
                raise InvalidArgument(f"--{name} must be 0 to 3600 seconds")
        if self.store is not None and parse_store_url(self.store).scheme == "memory":
            raise InvalidArgument(
                "--store memory:// is private to one process and the demo's instances are "
                "separate processes, so none would exclude another; leave --store out (SQLite) "
                "or use file:///PATH, redis://... or postgresql://...")


def run_demo(settings: DemoSettings) -> Report:
    """Run the demo; returns its report (see `Report.failures()` for broken invariants).

    Example::

        report = run_demo(DemoSettings(invoices=50, instances=3, live=False))
    """
    settings.check()
    seed = random.randrange(1 << 30) if settings.seed is None else settings.seed
    if settings.store is not None:
        _check_store(settings.store)
    with _directory(settings.directory) as directory, \
            Lifeline.start(remove=None if settings.directory else directory) as lifeline:
        store = settings.store or f"sqlite:///{directory}/locks.db"
        world = World(directory)
        world.create(settings.invoices, seed)
        fleet = Fleet({"directory": str(directory), "store": store,
                       "layers": list(settings.layers), "ttl": settings.ttl,
                       "stale": settings.stale, "batch": settings.batch,
                       "latency": settings.latency}, settings.instances,
                      log=directory / "instances.log", lifeline=lifeline)
        try:
            return _play(settings, seed, world, fleet, directory)
        finally:
            fleet.stop()
            world.dispose()


def _check_store(url: str) -> None:
    """Reach the store once before any instance starts: a store that is down or refuses the
    credentials fails the demo at once with the store's one-line error, instead of five
    instances crashing in silence."""
    with tenure.connect(url) as store:
        store.leases("demo:")


@contextmanager
def _directory(chosen: Path | None) -> Iterator[Path]:
    if chosen is not None:
        chosen.mkdir(parents=True, exist_ok=True)
        yield chosen
        return
    temporary = Path(tempfile.mkdtemp(prefix="tenure-demo-"))
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def fault_plan(faults: int, invoices: int, seed: int) -> list[tuple[int, str]]:
    """(invoices paid, kind) for each fault: due spread over the run, so that every fault
    comes while there is work left to hit, whatever the run's size; a freeze first (the case
    fencing and idempotency are for), then kills and freezes by turns.

    Example::

        fault_plan(2, 60, seed=7)  # [(19, 'freeze'), (37, 'kill')]
    """
    chance = random.Random(seed)
    return [(max(1, round(invoices * (number + 1 + chance.uniform(-0.2, 0.2)) / (faults + 1))),
             FAULT_KINDS[number % 2]) for number in range(faults)]


def _next_kind(plan: list[tuple[int, str]], taken: list[str]) -> str:
    """The first kind in the plan not yet matched by a fault taken (landed or asked)."""
    left = list(taken)
    for _, kind in plan:
        if kind in left:
            left.remove(kind)
        else:
            return kind
    return plan[-1][1]


def _play(settings: DemoSettings, seed: int, world: World, fleet: Fleet,
          directory: Path) -> Report:
    plan = fault_plan(settings.faults, settings.invoices, seed)
    freeze_for = 2 * settings.ttl + settings.stale
    events_path = directory / "events.jsonl"
    events: list[dict[str, Any]] = []
    offset = 0
    started = time.monotonic()
    fleet.start()
    counts = world.counts()
    live = Live(console=settings.console, refresh_per_second=8, transient=False) \
        if settings.live and settings.console.is_terminal else None
    if live is not None:
        live.start()
    try:
        while True:
            new, offset = read_appended(events_path, offset)
            events += new
            for event in new:
                fleet.saw(event, freeze_for)
            fleet.tick()
            elapsed = time.monotonic() - started
            counts = world.counts()
            # A request withdrawn (its instance paid nothing more) is asked again of the
            # instance that pays now.
            taken = [fault.kind for fault in fleet.faults] + fleet.pending
            if len(taken) < len(plan) and counts.paid >= plan[len(taken)][0]:
                holder = _holder(fleet, events)
                if holder is not None:  # else nobody is paying this instant: ask again soon
                    kind = _next_kind(plan, taken)
                    fleet.request(holder, kind)
                    if live is None and settings.live:
                        settings.console.print(f"{elapsed:5.1f} s  {kind} instance "
                                               f"{holder.number} (pid {holder.pid}) at its "
                                               "next invoice")
            if live is not None:
                live.update(_view(settings, fleet, events, counts, elapsed))
            done = (counts.paid == counts.invoices and counts.pending_messages == 0
                    and fleet.settled)
            timed_out = elapsed > settings.timeout
            if done or timed_out:
                break
            time.sleep(0.1)
    finally:
        if live is not None:
            live.stop()
    seconds = time.monotonic() - started
    fleet.stop()
    new, offset = read_appended(events_path, offset)
    events += new
    return Report.build(events, fleet.faults, world.counts(), world.provider.summary(), seconds,
                        tuple(settings.layers), faults_asked=settings.faults,
                        timed_out=timed_out)


def _holder(fleet: Fleet, events: list[dict[str, Any]]) -> Instance | None:
    """The running instance that claimed an invoice last, within the last half second."""
    now = time.monotonic()
    for event in reversed(events):
        if now - event["t"] > 0.5:
            return None
        if event["event"] == "claimed":
            instance = fleet.by_pid(event["pid"])
            if instance is not None and instance.state == "running":
                return instance
    return None


def _view(settings: DemoSettings, fleet: Fleet, events: list[dict[str, Any]], counts: Any,
          elapsed: float) -> Group:
    paid_by: dict[int, int] = {}
    for event in events:
        if event["event"] == "paid":
            paid_by[event["instance"]] = paid_by.get(event["instance"], 0) + 1
    holder = next((e for e in reversed(events) if e["event"] == "claimed"), None)
    table = Table(title=None, expand=False)
    for column in ("instance", "pid", "state", "paying now", "paid", "kills", "freezes"):
        table.add_column(column)
    for instance in fleet.instances:
        paying = holder is not None and holder["pid"] == instance.pid
        table.add_row(str(instance.number), str(instance.pid or "-"), instance.state,
                      "◀" if paying else "", str(paid_by.get(instance.number, 0)),
                      str(instance.kills), str(instance.freezes))
    off = [layer for layer in LAYERS if layer not in settings.layers]
    title = Text(f"tenure demo: {counts.paid}/{counts.invoices} invoices paid, "
                 f"{counts.notified} mails, {elapsed:.1f} s"
                 + (f"  (layers off: {', '.join(off)})" if off else ""), style="bold")
    return Group(title, ProgressBar(total=counts.invoices, completed=counts.paid, width=60),
                 table)


def print_report(report: Report, console: Console) -> None:
    """The report table and the verdict.

    Example::

        print_report(run_demo(DemoSettings()), Console())
    """
    table = Table(title="tenure demo: report")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("must be", justify="right")
    for figure, value, must in report.rows():
        style = "red" if must and value != must else ""
        table.add_row(figure, Text(value, style=style), must)
    console.print(table)
    failures = report.failures()
    if not failures:
        console.print(Text("All invariants held: every invoice paid once, one mail each.",
                           style="bold green"))
    else:
        console.print(Text("FAILED: " + "; ".join(failures), style="bold red"))
    for note in report.notes():
        console.print(note)
