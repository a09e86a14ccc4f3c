"""Job and lock metrics through the OpenTelemetry API: no-ops until the application configures
an OpenTelemetry SDK MeterProvider, so tenure never decides where metrics go.

Instruments: counters tenure.lock.acquired, tenure.lock.skipped, tenure.lock.lost and
tenure.job.runs (attribute outcome); histograms tenure.job.duration and tenure.lock.wait
(seconds). Every instrument carries the job's name as attribute `job`.

Example::

    from tenure.jobs import _metrics
    _metrics.record_run("invoices", "ok", seconds=1.25)
"""

from __future__ import annotations

from opentelemetry import metrics

_meter = metrics.get_meter("tenure")
_acquired = _meter.create_counter("tenure.lock.acquired", unit="{lease}",
                                  description="Leases taken by jobs")
_skipped = _meter.create_counter(
    "tenure.lock.skipped", unit="{run}",
    description="Runs skipped: the lock was busy or the period was already done")
_lost = _meter.create_counter("tenure.lock.lost", unit="{lease}",
                              description="Leases lost while a job held them")
_runs = _meter.create_counter("tenure.job.runs", unit="{run}",
                              description="Job runs by outcome (ok, failed, lost, cancelled)")
_duration = _meter.create_histogram("tenure.job.duration", unit="s",
                                    description="How long job runs took")
_wait = _meter.create_histogram("tenure.lock.wait", unit="s",
                                description="Time from wanting a job's lock to holding it")


def record_acquired(job: str, waited: float) -> None:
    """A job took its lease after waiting `waited` seconds."""
    _acquired.add(1, {"job": job})
    _wait.record(waited, {"job": job})


def record_skipped(job: str, reason: str) -> None:
    """A run was skipped: reason 'busy' (another instance holds it) or 'done' (period done)."""
    _skipped.add(1, {"job": job, "reason": reason})


def record_lost(job: str) -> None:
    """A job's lease was lost while it held it."""
    _lost.add(1, {"job": job})


def record_run(job: str, outcome: str, seconds: float) -> None:
    """One run of a job ended with `outcome` after `seconds`."""
    _runs.add(1, {"job": job, "outcome": outcome})
    _duration.record(seconds, {"job": job, "outcome": outcome})
