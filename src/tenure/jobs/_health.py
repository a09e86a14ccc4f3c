"""Per-job health from the store's records and this instance's view: the last success, the last
outcome, and an `unhealthy` flag once a job has not succeeded for `unhealthy_after` periods
(on any instance), the alert that catches a job that silently stopped running.

Example::

    report = job_health(spec, state, record, now)
    report["unhealthy"]   # True when no success for spec.unhealthy_after periods
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tenure.jobs._periodic import JobSpec, JobState
from tenure.jobs._run import JobRecord


def periods_between(spec: JobSpec, since: datetime, now: datetime, limit: int) -> int:
    """How many periods started after `since` and at or before `now` (counted up to `limit`)."""
    count = 0
    moment = since
    while count < limit:
        moment = spec.schedule.next_after(moment)
        if moment > now:
            break
        count += 1
    return count


def job_health(spec: JobSpec, state: JobState, record: JobRecord | None, now: datetime,
               started: datetime, *, record_unreadable: bool = False) -> dict[str, Any]:
    """One job's health entry (JSON-ready values). `record` is the last one known; with
    `record_unreadable` the store's could not be read just now, so `record` may be older than
    the store's (this instance's own run, or the record read last).

    Example::

        job_health(spec, JobState(), None, now, started)["unhealthy"]
    """
    last_success = state.last_success
    if record is not None and record.last_success is not None and (
            last_success is None or record.last_success > last_success):
        last_success = record.last_success
    since = last_success or started
    missed = periods_between(spec, since, now, spec.unhealthy_after + 1)
    return {
        "job": spec.name,
        "schedule": spec.schedule.describe(),
        "leader_mode": spec.leader,
        "leading": state.leading,
        "running": state.running_since is not None,
        "last_period": None if record is None else record.period.isoformat(),
        "last_outcome": None if record is None else record.outcome,
        "last_holder": None if record is None else record.holder,
        "last_success": None if last_success is None else last_success.isoformat(),
        "last_error": None if record is None else record.error,
        "record_unreadable": record_unreadable,
        "next_due": spec.schedule.next_after(now).isoformat(),
        "periods_without_success": missed,
        "unhealthy": missed > spec.unhealthy_after,
    }
