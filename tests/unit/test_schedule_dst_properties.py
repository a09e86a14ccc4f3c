"""Property tests: cron schedules across daylight-saving changes, checked against a brute-force
oracle that walks UTC minute by minute.

The oracle knows nothing of cronsim: expressions are drawn as sets of minutes, hours and
weekdays, written out as cron text, and matched by set membership on each minute's wall time.
Its rules (docs/jobs/periodic.md, "Daylight saving"):

- a job with '*' at the start of its minute or hour field fires at every instant whose wall
  time matches (both occurrences of a repeated time; nothing in a gap);
- a fixed-time job fires at the first occurrence of each matching wall time, and once at the end
  of a gap that swallowed one or more of its times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.jobs import Cron

UTC = timezone.utc
MINUTE = timedelta(minutes=1)

# Transitions at 02:00/03:00 (Europe, North America, southern hemisphere), at midnight
# (Santiago, Havana), by 30 minutes (Lord_Howe), at 02:45 local (Chatham), by 2 hours (Troll),
# in a zone whose daylight saving ended in 2022 (Tehran), and at 00:00 UTC+3:30/+4:30 (Tehran).
ZONES = ("Europe/Paris", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
         "Pacific/Chatham", "America/Santiago", "America/Havana", "Antarctica/Troll",
         "Asia/Tehran", "Europe/London")
YEARS = range(2018, 2031)


@cache
def transitions(name: str) -> tuple[tuple[datetime, str], ...]:
    """(instant, 'forward' | 'back') of each offset change of `name` in YEARS (a daily scan,
    then a bisection to the second: this zone set never changes twice within a day)."""
    zone = ZoneInfo(name)
    found = []
    moment = datetime(YEARS[0], 1, 1, tzinfo=UTC)
    end = datetime(YEARS[-1] + 1, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(zone).utcoffset()
    while moment < end:
        later = moment + timedelta(days=1)
        later_offset = later.astimezone(zone).utcoffset()
        if later_offset != offset:
            low, high = moment, later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) // 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            assert offset is not None and later_offset is not None
            found.append((high, "forward" if later_offset > offset else "back"))
            offset = later_offset
        moment = later
    return tuple(found)


@dataclass(frozen=True)
class Expression:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    weekdays: frozenset[int] | None  # cron's numbering: 0 = Sunday

    @property
    def fixed(self) -> bool:
        minute, hour = self.text.split()[:2]
        return not minute.startswith("*") and not hour.startswith("*")

    def matches(self, wall: datetime) -> bool:
        return (wall.minute in self.minutes and wall.hour in self.hours
                and (self.weekdays is None or wall.isoweekday() % 7 in self.weekdays))


@st.composite
def fields(draw: st.DrawFn, size: int) -> tuple[str, frozenset[int]]:
    kind = draw(st.sampled_from(["star", "step", "one", "list", "range"]))
    if kind == "star":
        return "*", frozenset(range(size))
    if kind == "step":
        step = draw(st.sampled_from([2, 3, 5, 7, 15, 20, 30]))
        return f"*/{step}", frozenset(range(0, size, step))
    if kind == "one":
        value = draw(st.integers(0, size - 1))
        return str(value), frozenset([value])
    if kind == "list":
        values = sorted(draw(st.sets(st.integers(0, size - 1), min_size=2, max_size=4)))
        return ",".join(map(str, values)), frozenset(values)
    low = draw(st.integers(0, size - 2))
    high = draw(st.integers(low + 1, size - 1))
    step = draw(st.sampled_from([1, 1, 2, 5]))
    text = f"{low}-{high}" + (f"/{step}" if step > 1 else "")
    return text, frozenset(range(low, high + 1, step))


@st.composite
def expressions(draw: st.DrawFn) -> Expression:
    minute_text, minutes = draw(fields(60))
    # Hours near the usual transition times (0-3) are drawn often, so gaps and repeats matter.
    hour_text, hours = draw(st.one_of(
        fields(24), st.sampled_from([0, 1, 2, 3]).map(lambda h: (str(h), frozenset([h])))))
    weekday = draw(st.sampled_from([None] * 14 + list(range(7))))  # one in three: a weekday
    weekday_text = "*" if weekday is None else str(weekday)
    return Expression(f"{minute_text} {hour_text} * * {weekday_text}", minutes, hours,
                      None if weekday is None else frozenset([weekday]))


def fires_at(expression: Expression, zone: ZoneInfo, minute: datetime) -> bool:
    """The oracle: does `expression` fire at this UTC minute?"""
    wall = minute.astimezone(zone).replace(tzinfo=None)
    if not expression.fixed:
        return expression.matches(wall)
    if expression.matches(wall) and wall.replace(tzinfo=zone, fold=0).astimezone(UTC) == minute:
        return True  # the first occurrence of a matching wall time
    skipped = (minute - MINUTE).astimezone(zone).replace(tzinfo=None) + MINUTE
    while skipped < wall:  # wall times that did not exist just before this minute
        if expression.matches(skipped):
            return True
        skipped += MINUTE
    return False


def oracle_at_or_before(expression: Expression, zone: ZoneInfo, moment: datetime) -> datetime:
    minute = moment.replace(second=0, microsecond=0)
    for _ in range(9 * 24 * 60):
        if fires_at(expression, zone, minute):
            return minute
        minute -= MINUTE
    raise AssertionError("no fire time within 9 days")


def oracle_after(expression: Expression, zone: ZoneInfo, moment: datetime) -> datetime:
    minute = moment.replace(second=0, microsecond=0) + MINUTE
    for _ in range(9 * 24 * 60):
        if fires_at(expression, zone, minute):
            return minute
        minute += MINUTE
    raise AssertionError("no fire time within 9 days")


@st.composite
def moments_near(draw: st.DrawFn, direction: str) -> tuple[str, datetime]:
    """A zone and a moment within 30 h of one of its transitions in `direction`."""
    name = draw(st.sampled_from([z for z in ZONES
                                 if any(d == direction for _, d in transitions(z))]))
    instant = draw(st.sampled_from([t for t, d in transitions(name) if d == direction]))
    seconds = draw(st.one_of(st.integers(-3 * 3600, 3 * 3600), st.integers(-30 * 3600, 30 * 3600)))
    moment = instant + timedelta(seconds=seconds)
    precision = draw(st.sampled_from(["minute", "second", "microsecond"]))
    if precision == "minute":  # exactly on a (possible) fire time
        moment = moment.replace(second=0)
    elif precision == "microsecond":
        moment += timedelta(microseconds=draw(st.integers(1, 999_999)))
    return name, moment


def test_every_zone_has_transitions_both_ways() -> None:
    for name in ZONES:
        directions = {d for _, d in transitions(name)}
        assert directions == {"forward", "back"}, name


@pytest.mark.parametrize("direction", ["forward", "back"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), expression=expressions())
def test_cron_times_around_transitions_match_the_oracle(direction: str, data: st.DataObject,
                                                        expression: Expression) -> None:
    name, moment = data.draw(moments_near(direction))
    zone = ZoneInfo(name)
    schedule = Cron(expression.text, name)

    following = schedule.next_after(moment)
    current = schedule.period_at(moment)
    assert current <= moment < following
    assert schedule.period_at(following) == following
    assert schedule.period_at(current) == current
    assert schedule.next_after(current) == following  # nothing fires between them
    assert following == oracle_after(expression, zone, moment)
    assert current == oracle_at_or_before(expression, zone, moment)
