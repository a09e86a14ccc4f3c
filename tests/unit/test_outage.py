"""tenure.jobs._outage: what runner loops log and decide when their store fails (one warning per
outage, one info line at its end, ERROR for permanent errors once per period, the start-up rule),
on a fake clock."""

from __future__ import annotations

import logging

import pytest

from tenure._errors import InvalidArgument, LeaseLost, StoreRefused, StoreUnavailable
from tenure.jobs._outage import (
    RETRY_CAP,
    RETRY_FIRST,
    Outage,
    Retry,
    describe,
    is_transient,
    stamp,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "tenure.jobs" and record.levelno == level]


def test_an_outage_is_one_warning_and_one_info_however_many_runners_retry(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    outage = Outage("store redis://:pw@db:6379/0", clock=clock)
    job, election = Retry(outage, "job 'a'", clock=clock), Retry(outage, "election 'b'",
                                                                  clock=clock)
    job.succeeded()
    for _ in range(5):
        clock.now += 1
        job.failed(StoreUnavailable("connection refused"))
        election.failed(StoreUnavailable("connection refused"))
    assert outage.down and outage.report()["reachable"] is False
    clock.now += 0.5
    election.succeeded()
    job.succeeded()
    [warning] = lines(caplog, logging.WARNING)
    [info] = lines(caplog, logging.INFO)
    assert warning.startswith("tenure: job 'a' cannot reach store redis://:***@db:6379/0;")
    assert "connection refused" in warning
    assert info == ("tenure: store redis://:***@db:6379/0 reachable again after 4.5 s "
                    "(seen by election 'b')")
    assert "pw" not in " ".join(record.getMessage() for record in caplog.records)
    assert outage.report() == {"reachable": True, "since": None, "error": None,
                               "permanent": False}


def test_a_failure_of_a_call_begun_before_the_store_came_back_opens_no_new_outage(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", clock=clock)
    retry.succeeded()
    retry.failed(StoreUnavailable("down"))
    begun = clock.now + 1
    clock.now += 2
    retry.succeeded()
    late = stamp(StoreUnavailable("down"), begun)  # began while down, answered after
    retry.failed(late)
    assert not outage.down
    clock.now += 1
    retry.failed(StoreUnavailable("down again"))  # a new call: a new outage
    assert len(lines(caplog, logging.WARNING)) == 2


def test_a_permanent_error_is_an_error_once_per_period_and_unhealthy_until_it_clears(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", every=60, clock=clock)
    retry.succeeded()  # the store answered once: a refusal now does not stop the worker
    for _ in range(10):
        retry.failed(StoreRefused("s: acquire of 'job:a' refused: authentication refused"))
        clock.now += 10
    assert len(lines(caplog, logging.ERROR)) == 2  # at 0 s and 60 s
    assert lines(caplog, logging.WARNING) == []  # the ERROR says it; no warning as well
    assert outage.report()["permanent"] is True
    retry.succeeded()
    assert outage.report()["permanent"] is False
    assert len(lines(caplog, logging.INFO)) == 1


def test_a_permanent_error_before_the_store_ever_answered_stops_the_worker(
        clock: Clock) -> None:
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", clock=clock)
    retry.failed(StoreUnavailable("connection refused"))  # down at start: retried
    refused = StoreRefused("s: authentication refused")
    with pytest.raises(StoreRefused) as raised:
        retry.failed(refused)
    assert raised.value is refused
    with pytest.raises(InvalidArgument):  # the user's setup: whenever it comes
        Retry(Outage("store s"), "job 'a'").failed(InvalidArgument("ttl=0"))


def test_backoff_doubles_from_the_first_retry_to_the_cap(clock: Clock) -> None:
    retry = Retry(Outage("store s", clock=clock), "job 'a'", clock=clock)
    delays = [retry.delay() for _ in range(20)]
    assert all(RETRY_FIRST <= delay <= RETRY_CAP for delay in delays)
    assert delays[0] <= 2 * RETRY_FIRST
    retry.failed(StoreUnavailable("x"))
    retry.succeeded()
    assert retry.delay() <= 2 * RETRY_FIRST  # a success starts the backoff again


def test_what_counts_as_transient() -> None:
    assert is_transient(StoreUnavailable("x")) and is_transient(LeaseLost("x"))
    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError())
    assert not is_transient(StoreRefused("x")) and not is_transient(KeyError("x"))
    assert describe(StoreRefused("a\n  b")) == "StoreRefused: a b"
