"""What a job function receives (Run) and what the store keeps per job (JobRecord).

Example:
    >>> from datetime import datetime, timezone
    >>> record = JobRecord(period=datetime(2026, 1, 1, tzinfo=timezone.utc), outcome="ok",
    ...                    attempts=1, finished=datetime(2026, 1, 1, 0, 0, 3, tzinfo=timezone.utc),
    ...                    holder="web-1", last_success=None, error=None)
    >>> JobRecord.parse(record.dump()).outcome
    'ok'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tenure._errors import LeaseLost, LeaseReleased

if TYPE_CHECKING:
    import anyio

    from tenure.jobs._locks import AnyLease

MAX_ERROR_CHARS = 1000
# The error as JSON text (escaped: one emoji is 12 bytes) stays under this, so a record stays
# far below the stores' 8 KiB whatever a job's error says.
MAX_ERROR_BYTES = 2000


def cut_error(text: str) -> str:
    """`text` cut to MAX_ERROR_CHARS characters and to MAX_ERROR_BYTES bytes as JSON text.

    Example:
        >>> len(json.dumps(cut_error("\U0001F600" * 1000))) <= MAX_ERROR_BYTES
        True
    """
    text = text[:MAX_ERROR_CHARS]
    size = 2  # the quotes
    for index, char in enumerate(text):
        size += len(json.dumps(char)) - 2
        if size > MAX_ERROR_BYTES:
            return text[:index]
    return text


@dataclass
class Run:
    """One run of a job: its lease and fencing token, the period it is for, the attempt.

    Example::

        @worker.every(timedelta(minutes=5))
        def process_invoices(run: tenure.Run) -> None:
            for invoice in pending():
                run.check()                      # raises tenure.LeaseLost once lost
                pay(invoice, fence=run.token)
    """

    job: str
    lease: AnyLease
    period_start: datetime
    attempt: int
    instance: str
    _stopping: anyio.Event | None = field(default=None, repr=False)
    _abandoned: bool = field(default=False, repr=False)
    _in_thread: bool = field(default=False, repr=False)  # a sync job, run in a worker thread
    _thread_done: bool = field(default=False, repr=False)  # ... whose function has returned

    @property
    def token(self) -> int:
        """The lease's fencing token: pass it to writes that must refuse a stale holder."""
        return self.lease.token

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to stop: finish soon, no need to start more work."""
        return self._stopping is not None and self._stopping.is_set()

    def check(self) -> None:
        """Raise tenure.LeaseLost once the run may no longer work under its lease: the lease
        was lost, or released (whoever released it), or the worker gave up on the run (a sync
        run still going after the grace period at shutdown, or after its lease was lost).
        Call it between steps. A lease released by the job itself raises tenure.LeaseReleased,
        a LeaseLost.

        Example::

            run.check()
        """
        if self.lease.lost:
            self.lease.check()  # raises with the reason
        if self._abandoned:
            raise LeaseLost(f"the worker gave up on this run of job {self.job!r} (token "
                            f"{self.token}) and released its lease: stop the protected work, "
                            "it may now run elsewhere")
        if self.lease.released:
            raise LeaseReleased(f"the lease of job {self.job!r} (token {self.token}) was "
                                "released: stop the protected work, it may now run elsewhere")

    def _abandon(self) -> None:
        """The worker stopped waiting for this run; from now on check() raises."""
        self._abandoned = True

    def _running_unleased(self) -> bool:
        """Whether the worker gave up on this run while its thread still runs the job."""
        return self._abandoned and self._in_thread and not self._thread_done


@dataclass(frozen=True)
class JobRecord:
    """The store's memory of a job: its last finished period and how it ended.

    `outcome` is "ok" or "failed" (retries exhausted); either way the period is done.

    Example:
        >>> JobRecord.parse('{"v": 1, "period": "2026-01-01T00:00:00+00:00"}').outcome
        'ok'
    """

    period: datetime
    outcome: str = "ok"
    attempts: int = 1
    finished: datetime | None = None
    holder: str = ""
    last_success: datetime | None = None
    error: str | None = None
    schedule: str | None = None  # Schedule.spec(), so `tenure jobs` can tell the next due time

    def dump(self) -> str:
        """The record as compact JSON text."""
        values: dict[str, Any] = {"v": 1, **asdict(self)}
        for key in ("period", "finished", "last_success"):
            if values[key] is not None:
                values[key] = values[key].isoformat()
        if self.error is not None:
            values["error"] = cut_error(self.error)
        return json.dumps(values, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> JobRecord:
        """Read a record written by `dump` (unknown keys from newer versions are ignored)."""
        values = json.loads(text)

        def when(key: str) -> datetime | None:
            value = values.get(key)
            return None if value is None else datetime.fromisoformat(value)

        period = when("period")
        if period is None:
            raise ValueError("a job record without a period")
        return cls(period=period, outcome=values.get("outcome", "ok"),
                   attempts=int(values.get("attempts", 1)), finished=when("finished"),
                   holder=values.get("holder", ""), last_success=when("last_success"),
                   error=values.get("error"), schedule=values.get("schedule"))

    def then(self, **changes: Any) -> JobRecord:
        """A copy with `changes` applied."""
        return replace(self, **changes)
