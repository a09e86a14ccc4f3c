"""Cron schedules on daylight-saving nights: the regressions found there, each pinned to the
night it broke, and the rule for the spring-forward gap (docs/jobs/periodic.md)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest

import tenure
import tenure.aio
from tenure.jobs import Cron, Every, _periodic

UTC = timezone.utc
PARIS = "Europe/Paris"  # 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def fire_times(schedule: Cron, start: datetime, end: datetime) -> list[datetime]:
    times = []
    moment = schedule.next_after(start)
    while moment < end:
        times.append(moment)
        moment = schedule.next_after(moment)
    return times


def local(times: list[datetime], zone: str = PARIS) -> list[str]:
    return [t.astimezone(ZoneInfo(zone)).strftime("%d %H:%M %Z") for t in times]


# -- clocks go back: 2026-10-25 in Paris, 02:00-02:59 happens twice ---------------------------


def test_every_15_minutes_fires_through_the_repeated_hour() -> None:
    schedule = Cron("*/15 * * * *", PARIS)
    times = fire_times(schedule, utc(2026, 10, 25, 0, 40), utc(2026, 10, 25, 2, 20))
    assert times == [utc(2026, 10, 25, 0, 45) + timedelta(minutes=15 * i) for i in range(7)]
    for moment in times:
        assert schedule.period_at(moment) == moment
        assert schedule.period_at(moment + timedelta(minutes=14)) == moment
    # was 00:45 (the summer-time 02:45, already done): the runner skipped 01:00-01:45 UTC
    assert schedule.period_at(utc(2026, 10, 25, 1, 10)) == utc(2026, 10, 25, 1, 0)


def test_an_hourly_job_fires_at_both_2_oclocks() -> None:
    schedule = Cron("0 * * * *", PARIS)
    times = fire_times(schedule, utc(2026, 10, 24, 22, 30), utc(2026, 10, 25, 2, 30))
    assert local(times) == ["25 01:00 CEST", "25 02:00 CEST", "25 02:00 CET", "25 03:00 CET"]
    assert schedule.period_at(utc(2026, 10, 25, 1, 30)) == utc(2026, 10, 25, 1, 0)


def test_a_daily_job_in_the_repeated_hour_runs_once_and_never_looks_back() -> None:
    schedule = Cron("30 2 * * *", PARIS)
    times = fire_times(schedule, utc(2026, 10, 23, 12), utc(2026, 10, 27, 12))
    assert local(times) == ["24 02:30 CEST", "25 02:30 CEST", "26 02:30 CET", "27 02:30 CET"]
    # was 00:30 UTC, in the past: the runner's "sleep until next" slept 0 s for 25 minutes
    assert schedule.next_after(utc(2026, 10, 25, 1, 10)) == utc(2026, 10, 26, 1, 30)
    moment = utc(2026, 10, 25, 0, 0)
    while moment < utc(2026, 10, 25, 2, 0):  # every second of the night would take too long
        following = schedule.next_after(moment)
        assert schedule.period_at(moment) <= moment < following, moment
        moment += timedelta(seconds=37)


def test_a_fixed_time_in_the_repeated_hour_counts_from_its_first_occurrence() -> None:
    # Sydney, 2021-04-04: 03:00 AEDT -> 02:00 AEST; 02:26 AEST comes after 02:45 AEDT
    schedule = Cron("45 2 * * *", "Australia/Sydney")
    assert schedule.period_at(utc(2021, 4, 3, 16, 26)) == utc(2021, 4, 3, 15, 45)


def test_a_half_hour_shift_keeps_fire_times_on_the_hour() -> None:
    # Lord Howe Island, 2018-10-07: 02:00 -> 02:30 (+10:30 -> +11); cronsim's own zone-aware
    # search drifted to 15:30
    schedule = Cron("*/5 15 * * *", "Australia/Lord_Howe")
    assert schedule.next_after(utc(2018, 10, 6, 13, 57)) == utc(2018, 10, 7, 4, 0)


# -- clocks go forward: 2026-03-29 in Paris, 02:00-02:59 does not happen ---------------------


def test_a_fixed_time_job_skipped_by_the_gap_runs_once_at_its_end() -> None:
    schedule = Cron("30 2 * * *", PARIS)
    times = fire_times(schedule, utc(2026, 3, 27, 12), utc(2026, 3, 31, 12))
    assert local(times) == ["28 02:30 CET", "29 03:00 CEST", "30 02:30 CEST", "31 02:30 CEST"]
    assert schedule.period_at(utc(2026, 3, 29, 1, 30)) == utc(2026, 3, 29, 1, 0)
    assert schedule.period_at(utc(2026, 3, 29, 0, 59)) == utc(2026, 3, 28, 1, 30)
    # two skipped times, one run
    both = Cron("0,30 2 * * *", PARIS)
    times = fire_times(both, utc(2026, 3, 28, 12), utc(2026, 3, 30, 12))
    assert local(times) == ["29 03:00 CEST", "30 02:00 CEST", "30 02:30 CEST"]


def test_wildcard_jobs_have_no_times_in_the_gap() -> None:
    times = fire_times(Cron("*/30 * * * *", PARIS), utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 2))
    assert local(times) == ["29 01:30 CET", "29 03:00 CEST", "29 03:30 CEST"]
    times = fire_times(Cron("0 * * * *", PARIS), utc(2026, 3, 28, 23, 30), utc(2026, 3, 29, 2))
    assert local(times) == ["29 01:00 CET", "29 03:00 CEST"]


# -- microseconds, UTC ------------------------------------------------------------------------


def test_next_after_is_strictly_later_at_any_precision() -> None:
    schedule = Cron("*/5 * * * *")
    at = utc(2026, 3, 1, 12, 5)
    assert schedule.next_after(at - timedelta(microseconds=1)) == at
    assert schedule.next_after(at) == at + timedelta(minutes=5)
    assert schedule.period_at(at + timedelta(microseconds=999_999)) == at
    assert schedule.period_at(at - timedelta(microseconds=1)) == at - timedelta(minutes=5)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(tenure.InvalidArgument, match="timezone-aware"):
        Cron("*/5 * * * *").next_after(datetime(2026, 1, 1))


# -- the job runner on the fall-back night (a simulated clock) --------------------------------


@pytest.fixture
def simulated_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Replaces the runner's clock and its sleep; counts the sleeps of 0 s or less."""
    clock: dict[str, Any] = {"now": None, "zero_sleeps": 0}

    async def sleep(stopping: anyio.Event, seconds: float) -> bool:
        if seconds <= 0:
            clock["zero_sleeps"] += 1
            clock["now"] += timedelta(seconds=1)  # a busy loop shows as many of these
        else:
            clock["now"] += timedelta(seconds=seconds)
        await anyio.sleep(0)
        return not stopping.is_set()

    monkeypatch.setattr(_periodic, "utc_now", lambda: clock["now"])
    monkeypatch.setattr(_periodic, "sleep_unless_stopped", sleep)
    yield clock


async def simulate(clock: dict[str, Any], expression: str, start: datetime, hours: float,
                   runs_for: timedelta = timedelta(0)) -> list[datetime]:
    clock.update(now=start, zero_sleeps=0)
    ran: list[datetime] = []
    worker = tenure.aio.AsyncWorker(tenure.aio.connect("memory://"))

    @worker.cron(expression, timezone=PARIS, jitter=0, name="job")
    async def job(run: tenure.aio.Run) -> None:
        ran.append(run.period_start)
        clock["now"] += runs_for

    runner = worker._runners["job"]
    stopping = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(runner.run, stopping)
        while clock["now"] < start + timedelta(hours=hours):
            await anyio.sleep(0)
        stopping.set()
    return ran


@pytest.mark.anyio
async def test_the_runner_runs_every_period_of_the_repeated_hour(
        simulated_clock: dict[str, Any]) -> None:
    ran = await simulate(simulated_clock, "*/15 * * * *", utc(2026, 10, 25, 0, 40), 1.6)
    assert ran == [utc(2026, 10, 25, 0, 30) + timedelta(minutes=15 * i) for i in range(8)]
    assert simulated_clock["zero_sleeps"] == 0  # jitter=0: no start delay at all


@pytest.mark.anyio
async def test_the_runner_does_not_spin_after_a_run_that_ends_in_the_repeated_hour(
        simulated_clock: dict[str, Any]) -> None:
    # 02:30 CEST daily, 35 minutes long: the 2026-10-25 run ends at 02:05 CET (01:05 UTC)
    ran = await simulate(simulated_clock, "30 2 * * *", utc(2026, 10, 24, 0, 29), 25.2,
                         runs_for=timedelta(minutes=35))
    assert ran == [utc(2026, 10, 23, 0, 30), utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30)]
    assert simulated_clock["zero_sleeps"] == 0  # was 1,502: a sleep of 0 s every second


# -- schedules refuse durations they cannot hold ----------------------------------------------


@pytest.mark.parametrize("interval", [10**400, 1e300, math.inf, -math.inf, math.nan])
def test_every_refuses_huge_infinite_and_nan_intervals(interval: float) -> None:
    with pytest.raises(tenure.InvalidArgument, match="interval"):
        Every(interval)  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgument, match="interval"):
        Every.of(interval)  # checked before a timedelta (which would overflow) is made
    with pytest.raises(tenure.InvalidArgument, match="offset"):
        Every.of(60, interval)
    with pytest.raises(tenure.InvalidArgument, match="interval"):
        tenure.Worker(tenure.connect("memory://")).every(interval)


def test_every_of_takes_seconds_or_timedeltas() -> None:
    assert Every.of(300, 60) == Every(timedelta(minutes=5), timedelta(minutes=1))
    assert Every.of(timedelta(hours=1)) == Every(timedelta(hours=1))
