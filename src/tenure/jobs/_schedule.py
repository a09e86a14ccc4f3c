"""When a job is due: fixed intervals aligned to the wall clock, or cron expressions.

A schedule maps a moment to its *period*: the start of the latest scheduled time at or before
that moment. Every instance computes the same period for the same moment, which is what lets
the store's record say "this period is done" for all of them.

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> every = Every(timedelta(minutes=5))
    >>> every.period_at(datetime(2026, 1, 1, 12, 7, tzinfo=timezone.utc)).strftime("%H:%M")
    '12:05'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._timing import to_seconds
from tenure.jobs._cron_times import CronTimes

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SECOND = timedelta(seconds=1)


class Schedule(Protocol):
    """What the job runner needs from a schedule."""

    def period_at(self, moment: datetime) -> datetime:
        """The start of the period that contains `moment` (aware, UTC)."""
        ...

    def next_after(self, moment: datetime) -> datetime:
        """The first period start strictly after `moment` (aware, UTC)."""
        ...

    def describe(self) -> str:
        """A short human description, e.g. 'every 5m' or 'cron */5 * * * * (UTC)'."""
        ...

    def spec(self) -> str:
        """A text that `parse_schedule` turns back into this schedule (kept in job records)."""
        ...


@dataclass(frozen=True)
class Every:
    """Periods of a fixed length, aligned to the Unix epoch plus `offset` (so every 5 minutes
    means :00, :05, :10 ... on every instance).

    Example:
        >>> from datetime import timedelta
        >>> Every(timedelta(hours=1), offset=timedelta(minutes=30)).describe()
        'every 1h (offset 30m)'
    """

    interval: timedelta
    offset: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        seconds, offset = _every_seconds(self.interval, self.offset)
        object.__setattr__(self, "interval", timedelta(seconds=seconds))
        object.__setattr__(self, "offset", timedelta(seconds=offset))

    @classmethod
    def of(cls, interval: float | timedelta, offset: float | timedelta = 0) -> Every:
        """The schedule for an interval and offset in seconds or timedeltas, checked before
        any timedelta is made (so 1e300 s is an InvalidArgument, not an OverflowError).

        Example:
            >>> Every.of(300, 60).describe()
            'every 5m (offset 1m)'
        """
        seconds, offset_seconds = _every_seconds(interval, offset)
        return cls(timedelta(seconds=seconds), timedelta(seconds=offset_seconds))

    def period_at(self, moment: datetime) -> datetime:
        """The start of the period that contains `moment`, in UTC."""
        since = _utc(moment) - _EPOCH - self.offset
        return _EPOCH + self.offset + (since // self.interval) * self.interval

    def next_after(self, moment: datetime) -> datetime:
        """The first period start strictly after `moment`, in UTC."""
        return self.period_at(moment) + self.interval

    def spec(self) -> str:
        """The schedule as text for parse_schedule, e.g. 'every 300 0'."""
        return f"every {self.interval.total_seconds():g} {self.offset.total_seconds():g}"

    def describe(self) -> str:
        """A short description for tables and logs."""
        text = f"every {_short(self.interval)}"
        return f"{text} (offset {_short(self.offset)})" if self.offset else text


@dataclass(frozen=True)
class Cron:
    """A cron expression (five fields; cronsim's syntax) evaluated in an IANA time zone.

    Daylight-saving changes follow Debian cron: on the night clocks go back, a job with '*'
    at the start of its minute or hour field runs at both occurrences of the repeated times, a
    job at fixed times ('30 2 * * *') runs once, at the first; on the night clocks go forward,
    a fixed-time job whose time was skipped runs once at the end of the gap (03:00), the others
    simply have no times in the gap. See tenure.jobs._cron_times.

    Example:
        >>> Cron("*/5 * * * *", "Europe/Paris").describe()
        'cron */5 * * * * (Europe/Paris)'
    """

    expression: str
    timezone: str = "UTC"
    _times: CronTimes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise InvalidArgumentType(
                f"cron expression must be a str such as '*/5 * * * *', got "
                f"{type(self.expression).__name__}")
        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
            raise InvalidArgument(
                f"timezone={self.timezone!r} is not a known IANA time zone; use e.g. 'UTC' or "
                "'Europe/Paris'") from exc
        try:
            CronSim(self.expression, datetime.now(zone))
        except CronSimError as exc:
            raise InvalidArgument(
                f"cron expression {self.expression!r} is invalid: {exc}; use five fields, "
                "e.g. '*/5 * * * *' (every 5 minutes)") from exc
        object.__setattr__(self, "_times", CronTimes(self.expression, zone))

    def period_at(self, moment: datetime) -> datetime:
        """The start of the period that contains `moment`: the last fire time at or before it,
        in UTC."""
        return self._times.last_at_or_before(_utc(moment))

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after `moment`, in UTC."""
        # Fire times are whole seconds: the first one after `moment` is the first one at or
        # after its next whole second, counted in UTC (local time arithmetic would drop the
        # fold that tells the two occurrences of a repeated hour apart).
        return self._times.first_at_or_after(_utc(moment).replace(microsecond=0) + _SECOND)

    def spec(self) -> str:
        """The schedule as text for parse_schedule, e.g. 'cron UTC */5 * * * *'."""
        return f"cron {self.timezone} {self.expression}"

    def describe(self) -> str:
        """A short description for tables and logs."""
        return f"cron {self.expression} ({self.timezone})"


def parse_schedule(text: str) -> Schedule:
    """The schedule that `spec()` wrote as `text`; ValueError when it is not one.

    Example:
        >>> parse_schedule(Cron("0 3 * * *", "Europe/Paris").spec()).describe()
        'cron 0 3 * * * (Europe/Paris)'
    """
    kind, _, rest = text.partition(" ")
    if kind == "every":
        interval, offset = rest.split()
        return Every(timedelta(seconds=float(interval)), timedelta(seconds=float(offset)))
    if kind == "cron":
        zone, _, expression = rest.partition(" ")
        try:
            return Cron(expression, zone)
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from exc
    raise ValueError(f"not a schedule: {text!r}")


def period_seconds(schedule: Schedule) -> float:
    """A schedule's period length in seconds (for cron: the gap between its next two times),
    from which job defaults such as the start jitter are derived.

    Example:
        >>> period_seconds(Every(timedelta(minutes=5)))
        300.0
    """
    if isinstance(schedule, Every):
        return schedule.interval.total_seconds()
    first = schedule.next_after(datetime.now(timezone.utc))
    return (schedule.next_after(first) - first).total_seconds()


def _every_seconds(interval: object, offset: object) -> tuple[float, float]:
    seconds = to_seconds(interval, "interval")
    if not 0.1 <= seconds <= 366 * 86400:
        raise InvalidArgument(
            f"interval={seconds:g} s is out of range: use 0.1 s to 366 days "
            "(for calendar schedules such as 'monthly', use cron)"
        )
    offset_seconds = to_seconds(offset, "offset")
    if not 0 <= offset_seconds < seconds:
        raise InvalidArgument(f"offset={offset_seconds:g} s must be at least 0 and below the "
                              f"interval ({seconds:g} s)")
    return seconds, offset_seconds


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise InvalidArgument("datetimes must be timezone-aware (e.g. datetime.now(timezone.utc))")
    return moment.astimezone(timezone.utc)


def _short(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
