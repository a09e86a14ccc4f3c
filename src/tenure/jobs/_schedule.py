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

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._timing import to_seconds

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
        seconds = to_seconds(self.interval, "interval")
        if not 0.1 <= seconds <= 366 * 86400:
            raise InvalidArgument(
                f"interval={seconds:g} s is out of range: use 0.1 s to 366 days "
                "(for calendar schedules such as 'monthly', use cron)"
            )
        offset = to_seconds(self.offset, "offset")
        if not 0 <= offset < seconds:
            raise InvalidArgument(f"offset={offset:g} s must be at least 0 and below the "
                                  f"interval ({seconds:g} s)")
        object.__setattr__(self, "interval", timedelta(seconds=seconds))
        object.__setattr__(self, "offset", timedelta(seconds=offset))

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
    """A five-field cron expression evaluated in an IANA time zone (by cronsim, which also
    decides daylight-saving gaps and repeats).

    Example:
        >>> Cron("*/5 * * * *", "Europe/Paris").describe()
        'cron */5 * * * * (Europe/Paris)'
    """

    expression: str
    timezone: str = "UTC"

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

    def period_at(self, moment: datetime) -> datetime:
        """The start of the period that contains `moment`, in UTC."""
        # cronsim's reverse search returns times strictly before its start, at second precision
        local = _utc(moment).astimezone(ZoneInfo(self.timezone)).replace(microsecond=0)
        return _utc(next(CronSim(self.expression, local + _SECOND, reverse=True)))

    def next_after(self, moment: datetime) -> datetime:
        """The first period start strictly after `moment`, in UTC."""
        local = _utc(moment).astimezone(ZoneInfo(self.timezone))
        return _utc(next(CronSim(self.expression, local)))

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
