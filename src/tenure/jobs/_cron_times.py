"""The fire times of a cron expression in an IANA time zone, across daylight-saving changes.

cronsim finds the matching wall-clock times (on naive datetimes, where it has no time zone to
get wrong); this module turns them into instants, one stretch of constant UTC offset at a time.
cronsim's own search on zone-aware times is not used: on a fall-back night it returns times
before its start, and in zones whose clocks move by 30 minutes (Australia/Lord_Howe) it drifts
off the hour.

The rules (Debian cron's, which cronsim also follows):

- When clocks go back, the wall times of the repeated hour happen twice. A job with ``*`` at
  the start of its minute or hour field (``*/15 * * * *``, ``0 * * * *``) runs at both; a job
  at fixed times (``30 2 * * *``) runs once, at the first.
- When clocks go forward, the skipped wall times do not happen. A job with ``*`` in its minute
  or hour field loses nothing (no time passed); a job at fixed times whose time was skipped runs
  once, when the gap ends (03:00 for a 02:30 job on a 02:00 -> 03:00 night).

Example:
    >>> from datetime import datetime, timezone
    >>> from zoneinfo import ZoneInfo
    >>> times = CronTimes("30 2 * * *", ZoneInfo("Europe/Paris"))
    >>> spring = datetime(2026, 3, 29, 0, 0, tzinfo=timezone.utc)
    >>> times.first_at_or_after(spring).astimezone(ZoneInfo("Europe/Paris")).strftime("%H:%M")
    '03:00'
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from cronsim import CronSim

from tenure._errors import InvalidArgument

_SECOND = timedelta(seconds=1)
# Offsets are read every 6 h between two instants, then the change is narrowed down to the
# second. A zone's offset never changes and changes back within 6 h (in tzdata the shortest
# stretch of one offset lasts about 4 days), so no change is missed.
_PROBE = timedelta(hours=6)


class CronTimes:
    """The instants (UTC) at which `expression` fires in `zone`.

    Example:
        >>> from datetime import datetime, timezone
        >>> from zoneinfo import ZoneInfo
        >>> times = CronTimes("0 * * * *", ZoneInfo("Europe/Paris"))
        >>> autumn = datetime(2026, 10, 24, 23, 30, tzinfo=timezone.utc)
        >>> first = times.first_at_or_after(autumn)
        >>> second = times.first_at_or_after(first + timedelta(seconds=1))
        >>> [t.strftime("%H:%M") for t in (first, second)]  # UTC: 02:00 CEST, then 02:00 CET
        ['00:00', '01:00']
    """

    __slots__ = ("expression", "fixed", "zone")

    def __init__(self, expression: str, zone: ZoneInfo) -> None:
        self.expression = expression
        self.zone = zone
        fields = expression.split()
        # Debian cron's test, as cronsim applies it: five fields, neither minute nor hour
        # starting with '*'.
        self.fixed = (len(fields) == 5 and not fields[0].startswith("*")
                      and not fields[1].startswith("*"))

    def first_at_or_after(self, start: datetime) -> datetime:
        """The first fire time at or after `start` (aware), in UTC.

        Example:
            >>> from datetime import datetime, timezone
            >>> t = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
            >>> CronTimes("*/5 * * * *", ZoneInfo("UTC")).first_at_or_after(t) == t
            True
        """
        moment = start.astimezone(timezone.utc)
        if moment.microsecond:  # fire times are whole seconds
            moment += timedelta(microseconds=1_000_000 - moment.microsecond)
        while True:
            offset = self._offset(moment)
            wall = self._first_wall(_wall(moment, offset))
            candidate = _instant(wall, offset)
            change = self._change_after(moment, candidate)
            if change is None:  # one offset from `moment` to `candidate`: the wall time happens
                if not self.fixed or self._first_occurrence(wall) == candidate:
                    return candidate
                moment = candidate + _SECOND  # a fixed time's second occurrence: not a run
                continue
            if self._skipped_a_time(change, self._offset(change - _SECOND), self._offset(change)):
                return change
            moment = change

    def last_at_or_before(self, end: datetime) -> datetime:
        """The last fire time at or before `end` (aware), in UTC.

        Example:
            >>> from datetime import datetime, timezone
            >>> t = datetime(2026, 1, 1, 12, 7, tzinfo=timezone.utc)
            >>> CronTimes("*/5 * * * *", ZoneInfo("UTC")).last_at_or_before(t).strftime("%H:%M")
            '12:05'
        """
        moment = end.astimezone(timezone.utc).replace(microsecond=0)
        while True:
            offset = self._offset(moment)
            wall = self._last_wall(_wall(moment, offset))
            candidate = _instant(wall, offset)
            change = self._change_before(candidate, moment)
            if change is None:
                if not self.fixed or self._first_occurrence(wall) == candidate:
                    return candidate
                moment = candidate - _SECOND
                continue
            # No matching wall time from `change` to `moment`; the gap's end may be a fire time.
            if self._skipped_a_time(change, self._offset(change - _SECOND), offset):
                return change
            moment = change - _SECOND

    # -- wall-clock times (cronsim on naive datetimes) ------------------------------------------

    def _first_wall(self, wall: datetime) -> datetime:
        return self._search(wall - _SECOND, reverse=False)

    def _last_wall(self, wall: datetime) -> datetime:
        return self._search(wall + _SECOND, reverse=True)

    def _search(self, wall: datetime, *, reverse: bool) -> datetime:
        """cronsim's next match strictly after (or before) a naive wall-clock time."""
        try:
            return next(CronSim(self.expression, wall, reverse=reverse))
        except StopIteration:
            raise InvalidArgument(
                f"cron expression {self.expression!r} has no time within 50 years of "
                f"{wall:%Y-%m-%d}; check its day-of-month and month fields") from None

    def _skipped_a_time(self, change: datetime, before: timedelta, after: timedelta) -> bool:
        """True when the clocks jumped forward at `change` over a wall time of a fixed-time job
        (which then runs at `change`, the gap's end)."""
        if not self.fixed or after <= before:
            return False
        return self._first_wall(_wall(change, before)) < _wall(change, after)

    def _first_occurrence(self, wall: datetime) -> datetime:
        return wall.replace(tzinfo=self.zone, fold=0).astimezone(timezone.utc)

    # -- the zone's offset changes -------------------------------------------------------------

    def _offset(self, moment: datetime) -> timedelta:
        offset = moment.astimezone(self.zone).utcoffset()
        assert offset is not None  # a ZoneInfo always has one
        return offset

    def _change_after(self, low: datetime, high: datetime) -> datetime | None:
        """The first instant in (low, high] whose offset differs from low's, or None."""
        offset = self._offset(low)
        probe = low
        while probe < high:
            ahead = min(probe + _PROBE, high)
            if self._offset(ahead) != offset:
                return self._narrow(probe, ahead, offset)
            probe = ahead
        return None

    def _change_before(self, low: datetime, high: datetime) -> datetime | None:
        """The start of high's stretch of one offset when it is in (low, high], or None."""
        offset = self._offset(high)
        probe = high
        while probe > low:
            behind = max(probe - _PROBE, low)
            if self._offset(behind) != offset:
                return self._narrow(behind, probe, self._offset(behind))
            probe = behind
        return None

    def _narrow(self, low: datetime, high: datetime, offset: timedelta) -> datetime:
        """The first second after `low` (which has `offset`) up to `high` (which has not)."""
        while high - low > _SECOND:
            middle = low + (high - low) // 2
            middle -= timedelta(microseconds=middle.microsecond)
            if self._offset(middle) == offset:
                low = middle
            else:
                high = middle
        return high


def _wall(moment: datetime, offset: timedelta) -> datetime:
    return (moment + offset).replace(tzinfo=None)


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=timezone.utc)
