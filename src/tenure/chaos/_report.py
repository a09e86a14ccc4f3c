"""What a chaos run did and what the checkers found: the summary table and its JSON form.

Example::

    report = run_chaos(ChaosSettings("sqlite:////tmp/chaos-locks.db", duration=20))
    print_report(report, Console())
    sys.exit(1 if report.violations else 0)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tenure.chaos._checkers import LATE_SIGNAL, Verdict, Violation, as_dict
from tenure.chaos._history import Event


@dataclass
class Report:
    """A chaos run's figures and verdict; `violations` empty means every check held.

    Example::

        report = run_chaos(settings)
        report.grants, report.accepted_writes, report.faults, report.violations
    """

    store: str
    seed: int
    fencing: bool
    workers: int
    seconds: float
    history: Path
    verdict: Verdict
    grants: dict[str, int] = field(default_factory=dict)  # by lock name
    accepted_writes: int = 0
    rejected_writes: int = 0
    faults: dict[str, int] = field(default_factory=dict)  # by label, e.g. "pause 1.5x ttl"
    not_applicable: dict[str, str] = field(default_factory=dict)  # fault kind -> why
    injectable: tuple[str, ...] = ()  # the fault kinds asked that apply to the store
    liveness_bound: float = 0.0
    late_signal: float = 0.0
    notes: list[str] = field(default_factory=list)
    workload: str = "lock"

    @property
    def violations(self) -> list[Violation]:
        return self.verdict.violations

    @property
    def inconclusive(self) -> str | None:
        """Why the run proves nothing although no check failed (faults were asked and none
        was injected), or None.

        Example::

            if report.inconclusive: print(report.inconclusive); exit(1)
        """
        if self.violations or self.faults or not self.injectable:
            return None
        return ("INCONCLUSIVE: no fault was injected, so nothing was checked under faults: "
                "each phase's fault window (its length less 1 s of warm-up and the "
                f"{self.liveness_bound:g} s liveness bound plus 2 s) had no room for one; "
                "pass a longer --duration")

    @classmethod
    def build(cls, events: list[Event], verdict: Verdict, **fields: Any) -> Report:
        grants: Counter[str] = Counter()
        faults: Counter[str] = Counter()
        accepted = rejected = crashes = 0
        for event in events:
            f, type_ = event["f"], event["type"]
            if event.get("by") == "oracle":
                accepted += f == "write" and type_ == "ok"
                rejected += f == "write" and type_ == "fail"
            elif f == "acquire" and type_ == "ok":
                grants[str(event["name"])] += 1
            elif f == "fault":
                faults[str(event["label"])] += 1
            elif f == "crash":
                crashes += 1
        if crashes:
            history = fields["history"]
            fields["notes"] = [*fields.get("notes", []),
                               f"{crashes} worker process(es) exited without being killed "
                               f"(restarted); see {history.parent / 'workers.log'}"]
        return cls(verdict=verdict, grants=dict(grants), accepted_writes=accepted,
                   rejected_writes=rejected, faults=dict(sorted(faults.items())), **fields)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (`tenure chaos --json`)."""
        return {"store": self.store, "workload": self.workload, "seed": self.seed,
                "fencing": self.fencing,
                "workers": self.workers, "seconds": round(self.seconds, 2),
                "history": str(self.history), "grants": self.grants,
                "accepted_writes": self.accepted_writes, "rejected_writes": self.rejected_writes,
                "faults": self.faults, "not_applicable": self.not_applicable,
                "liveness_bound": self.liveness_bound, "late_signal": self.late_signal,
                "notes": self.notes, "inconclusive": self.inconclusive,
                **as_dict(self.verdict)}


def print_report(report: Report, console: Console) -> None:
    """The summary table, the violations, and where the history is.

    Example::

        print_report(run_chaos(settings), Console())
    """
    if report.workload != "lock":
        _print_workload(report, console)
        return
    mode = "fenced" if report.fencing else "NOT fenced (positive control)"
    if report.late_signal:
        mode += f", loss signals delayed {report.late_signal:g} s (positive control)"
    table = Table(title=f"tenure chaos: {report.store}, {report.workers} workers, "
                        f"{report.seconds:.0f} s, seed {report.seed}, {mode}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, count in report.grants.items():
        table.add_row(f"grants of {name!r}", str(count))
    table.add_row("writes accepted", str(report.accepted_writes))
    table.add_row("writes rejected (stale token)", str(report.rejected_writes))
    for label, count in report.faults.items():
        table.add_row(f"fault: {label}", str(count))
    if not report.faults:
        table.add_row("faults injected", "0")
    for kind, why in report.not_applicable.items():
        table.add_row(Text(f"fault {kind}: not applied ({why})", style="dim"), "-")
    verdict = report.verdict
    if verdict.takeovers:
        waits = ", ".join(f"{t:.2f}" for t in verdict.takeovers)
        table.add_row(f"new holder after the faults stopped (bound {report.liveness_bound:g} s)",
                      f"{waits} s")
    if verdict.signal_delays:
        worst, median = verdict.worst_signal_delay or 0.0, verdict.median_signal_delay or 0.0
        table.add_row(f"losses past the deadline: count: worst / median delay to the "
                      f"signal (bound {LATE_SIGNAL * 1000:.0f} ms)",
                      f"{len(verdict.signal_delays)}: {worst * 1000:.1f} / "
                      f"{median * 1000:.1f} ms")
    if verdict.losses_before_deadline:
        table.add_row("losses refused by the store before the deadline",
                      str(verdict.losses_before_deadline))
    if verdict.forks:
        table.add_row("forks of a holder", str(verdict.forks))
    if verdict.member_listings:
        table.add_row("group listings checked (each right after its member's join)",
                      str(verdict.member_listings))
    if verdict.grants_after_restarts:
        table.add_row("grants after the first store restart", str(verdict.grants_after_restarts))
    table.add_row("overlapping critical sections", _red(verdict.overlaps))
    table.add_row("lost updates", _red(verdict.lost_updates))
    for checker, count in verdict.by_checker().items():
        table.add_row(f"violations: {checker} ({verdict.checkers[checker]})", _red(count))
    console.print(table)
    _print_end(report, console)


def _print_workload(report: Report, console: Console) -> None:
    """The jobs and queue workloads' summary: their figures, then the violations by checker."""
    table = Table(title=f"tenure chaos --workload {report.workload}: {report.store}, "
                        f"{report.workers} workers, {report.seconds:.0f} s, seed {report.seed}"
                        + (f", {report.notes[0]}" if report.notes and
                           "positive control" in report.notes[0] else ""))
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in report.verdict.figures.items():
        table.add_row(name, _value(value))
    for label, count in report.faults.items():
        table.add_row(f"fault: {label}", str(count))
    for kind, why in report.not_applicable.items():
        table.add_row(Text(f"fault {kind}: not applied ({why})", style="dim"), "-")
    table.add_row("liveness bound after the faults stop", f"{report.liveness_bound:g} s")
    for checker, count in report.verdict.by_checker().items():
        table.add_row(f"violations: {checker} ({report.verdict.checkers[checker]})",
                      _red(count))
    console.print(table)
    _print_end(report, console)


def _value(value: object) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_value(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "-"
    return str(value)


def _print_end(report: Report, console: Console) -> None:
    for note in report.notes:
        console.print(Text(note, style="yellow"))
    for violation in report.violations:
        console.print(Text(f"VIOLATION [{violation.checker}] {violation.message}",
                           style="bold red"))
    if report.inconclusive:
        console.print(Text(report.inconclusive, style="bold red"))
    elif not report.violations:
        console.print(Text("No violation: every check held.", style="bold green"))
    console.print(f"history: {report.history}", markup=False, highlight=False)


def _red(count: int) -> Text:
    return Text(str(count), style="bold red" if count else "")
