"""What a demo run did, from the events of its instances and from the databases: the report
and its invariants (no duplicate charge, no unpaid invoice, one mail per paid invoice).

Example::

    report = Report.build(events, faults, world.counts(), world.provider.summary(), seconds)
    print(report.failures())
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tenure.demo._instances import Fault
from tenure.demo._world import Counts
from tenure.exactly_once.provider import ProviderSummary


def takeovers(events: list[dict[str, Any]], faults: list[Fault]) -> list[float]:
    """For each fault, seconds until another process claimed an invoice."""
    claimed = [e for e in events if e["event"] == "claimed"]
    found = []
    for fault in faults:
        after = next((e["t"] for e in claimed if e["t"] > fault.at and e["pid"] != fault.pid),
                     None)
        if after is not None:
            found.append(after - fault.at)
    return found


@dataclass(frozen=True)
class Report:
    """The figures of one run."""

    seconds: float
    counts: Counts
    provider: ProviderSummary
    rejected_writes: int
    replays: int
    kills: int
    freezes: int
    takeover_seconds: list[float]
    layers: tuple[str, ...]

    @classmethod
    def build(cls, events: list[dict[str, Any]], faults: list[Fault], counts: Counts,
              provider: ProviderSummary, seconds: float, layers: tuple[str, ...]) -> Report:
        """The report of a finished run."""
        return cls(seconds=seconds, counts=counts, provider=provider,
                   rejected_writes=sum(e["event"] == "rejected" for e in events),
                   replays=sum(e["event"] == "replayed" for e in events),
                   kills=sum(f.kind == "kill" for f in faults),
                   freezes=sum(e["event"] == "frozen" for e in events),  # that took effect
                   takeover_seconds=takeovers(events, faults), layers=layers)

    @property
    def unpaid(self) -> int:
        return self.counts.invoices - self.counts.paid

    @property
    def missing_notifications(self) -> int:
        return max(0, self.counts.paid - self.counts.notified)

    def failures(self) -> list[str]:
        """The invariants this run broke (empty: all held)."""
        broken = []
        if self.provider.duplicate_charges:
            broken.append(f"{self.provider.duplicate_charges} duplicate charge(s) at the "
                          "payment provider")
        if self.unpaid:
            broken.append(f"{self.unpaid} invoice(s) left unpaid")
        if self.counts.duplicate_notifications:
            broken.append(f"{self.counts.duplicate_notifications} duplicate 'invoice paid' "
                          "mail(s)")
        if self.missing_notifications:
            broken.append(f"{self.missing_notifications} paid invoice(s) without a mail")
        return broken

    def rows(self) -> list[tuple[str, str, str]]:
        """(figure, value, must be) rows for the report table."""
        takeover = self.takeover_seconds
        return [
            ("invoices paid", f"{self.counts.paid} of {self.counts.invoices}", ""),
            ("charges made at the provider", str(self.provider.charges), ""),
            ("duplicate charges", str(self.provider.duplicate_charges), "0"),
            ("unpaid invoices", str(self.unpaid), "0"),
            ("'invoice paid' mails", str(self.counts.notified), ""),
            ("duplicate or missing mails",
             str(self.counts.duplicate_notifications + self.missing_notifications), "0"),
            ("stale late writes rejected by fencing", str(self.rejected_writes), ""),
            ("idempotent replays", str(self.replays), ""),
            ("faults injected", f"{self.kills} kill(s), {self.freezes} freeze(s)", ""),
            ("time to takeover p50 / max",
             f"{statistics.median(takeover):.2f} s / {max(takeover):.2f} s" if takeover
             else "-", ""),
            ("run time", f"{self.seconds:.1f} s", ""),
        ]

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values."""
        return {
            "layers": list(self.layers), "seconds": round(self.seconds, 2),
            "invoices": self.counts.invoices, "paid": self.counts.paid, "unpaid": self.unpaid,
            "charges": self.provider.charges,
            "duplicate_charges": self.provider.duplicate_charges,
            "notifications": self.counts.notified,
            "duplicate_notifications": self.counts.duplicate_notifications,
            "missing_notifications": self.missing_notifications,
            "rejected_writes": self.rejected_writes, "replays": self.replays,
            "kills": self.kills, "freezes": self.freezes,
            "takeover_seconds": [round(value, 3) for value in self.takeover_seconds],
            "failures": self.failures(),
        }
