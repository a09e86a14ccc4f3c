"""What a demo run did, from the events of its instances and from the databases: the report
and its invariants (no duplicate charge, no unpaid invoice, one mail per paid invoice).

Example::

    report = Report.build(events, faults, world.counts(), world.provider.summary(), seconds,
                          layers=("lease", "fencing"), faults_asked=4, timed_out=False)
    print(report.failures(), report.notes())
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tenure.demo._instances import Fault
from tenure.demo._world import Counts
from tenure.idempotency import ProviderSummary

LAYERS = ("lease", "fencing", "idempotency", "outbox")
# What each layer's absence does under the fault aimed at it (a freeze after a claim for
# fencing and idempotency, a kill between a payment's commit and its mail for the outbox).
LAYER_HARM = {
    "fencing": "the woken holder's late write was applied and mailed the invoice again",
    "idempotency": "the woken holder charged the invoice again",
    "outbox": "the instance killed between the payment's commit and its mail never sent it",
}


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
    claims_lost: int = 0  # claims another instance won first
    faults_asked: int = 0
    timed_out: bool = False

    @classmethod
    def build(cls, events: list[dict[str, Any]], faults: list[Fault], counts: Counts,
              provider: ProviderSummary, seconds: float, layers: tuple[str, ...],
              faults_asked: int, timed_out: bool) -> Report:
        """The report of a finished run (`faults`: those that took effect)."""
        return cls(seconds=seconds, counts=counts, provider=provider,
                   rejected_writes=sum(e["event"] == "rejected" for e in events),
                   replays=sum(e["event"] == "replayed" for e in events),
                   kills=sum(f.kind == "kill" for f in faults),
                   freezes=sum(f.kind == "freeze" for f in faults),
                   takeover_seconds=takeovers(events, faults), layers=layers,
                   claims_lost=sum(e["event"] == "claim_lost" for e in events),
                   faults_asked=faults_asked, timed_out=timed_out)

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

    def notes(self) -> list[str]:
        """What the run shows beyond its invariants: faults that could not be injected, and
        for each layer switched off, the harm its absence did or why there was none."""
        notes = []
        injected = self.kills + self.freezes
        if injected < self.faults_asked:
            why = ("the run timed out" if self.timed_out
                   else "every invoice was paid before the next fault's moment came; "
                        "ask for more --invoices")
            notes.append(f"{injected} of {self.faults_asked} fault(s) injected: {why}.")
        off = [layer for layer in LAYERS if layer not in self.layers]
        notes += [self._layer_note(layer) for layer in off]
        return notes

    def _layer_note(self, layer: str) -> str:
        if layer == "lease":
            return (f"lease off: the instances paid side by side and raced for the same "
                    f"invoices ({self.claims_lost} claim(s) lost to another instance); the "
                    "per-invoice claims, not the lease, kept each invoice to one payer: that "
                    "is defence in depth. The lease keeps the job on one instance at a time.")
        harm, fault, why_none = {
            "fencing": (self.counts.duplicate_notifications,
                        self.freezes, "no frozen holder woke up to write late"),
            "idempotency": (self.provider.duplicate_charges,
                            self.freezes, "no frozen holder woke up to charge again"),
            "outbox": (self.missing_notifications,
                       self.kills, "no instance died between a payment's commit and its mail"),
        }[layer]
        if harm:
            return f"{layer} off: {LAYER_HARM[layer]} ({harm}): that is what {layer} prevents."
        if not fault:
            return f"{layer} off, but nothing to show: {why_none} (no such fault injected)."
        return f"{layer} off: the faults did no visible harm this run."

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
            ("faults injected", f"{self.kills} kill(s), {self.freezes} freeze(s)"
             + (f" of {self.faults_asked} asked" if self.kills + self.freezes
                < self.faults_asked else ""), ""),
            ("claims lost to another instance", str(self.claims_lost), ""),
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
            "kills": self.kills, "freezes": self.freezes, "faults_asked": self.faults_asked,
            "claims_lost": self.claims_lost,
            "takeover_seconds": [round(value, 3) for value in self.takeover_seconds],
            "failures": self.failures(), "notes": self.notes(),
        }
