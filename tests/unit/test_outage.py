"""tenure.jobs._outage: what runner loops log and decide when their store fails (one warning per
outage, one info line at its end, ERROR for permanent errors once per period, the start-up rule),
on a fake clock."""

from __future__ import annotations

import logging
import threading

import pytest

from tenure._errors import InvalidArgument, LeaseLost, StoreRefused, StoreUnavailable
from tenure.jobs._outage import (
    READ,
    RETRY_CAP,
    RETRY_FIRST,
    WRITE,
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


def test_an_outage_a_write_opened_is_not_ended_by_a_read(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    """A store that answers reads but refuses writes (a Redis turned replica) stays one
    outage: before, every successful read ended it and the next write opened a new one."""
    caplog.set_level(logging.INFO, logger="tenure")
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", clock=clock)
    retry.succeeded()
    for _ in range(5):
        clock.now += 1
        retry.failed(stamp(StoreUnavailable("READONLY"), clock.now, WRITE))
        retry.succeeded(READ)  # the record read that follows
        outage.succeeded("the health check", READ)
    assert outage.down and outage.kind == WRITE
    assert len(lines(caplog, logging.WARNING)) == 1 and lines(caplog, logging.INFO) == []
    retry.succeeded()  # a write answered: over
    assert not outage.down and len(lines(caplog, logging.INFO)) == 1
    outage.failed("the health check", StoreUnavailable("timed out"), kind=READ)
    outage.succeeded("the health check", READ)  # an outage of reads ends with a read
    assert not outage.down


def test_a_refusal_persisting_through_reads_is_one_error_per_period(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", every=60, clock=clock)
    retry.succeeded()
    for _ in range(12):  # 2 minutes: a refused acquire, then the store check's read answers
        retry.failed(stamp(StoreRefused("NOPERM"), clock.now, WRITE))
        outage.succeeded("the worker's store check", READ)
        clock.now += 10
    assert len(lines(caplog, logging.ERROR)) == 2 and lines(caplog, logging.INFO) == []


def test_an_error_tenure_does_not_know_is_retried_even_at_start_up(
        caplog: pytest.LogCaptureFixture, clock: Clock) -> None:
    """A custom queue source's driver error (httpx.ConnectError, ...) may be transient: it is
    retried, logged at ERROR with its traceback once per period, and is an outage; only a
    refusal (`transient` False) stops a worker that never reached its store."""
    caplog.set_level(logging.INFO, logger="tenure")

    class ConnectError(Exception):
        pass

    outage = Outage("queue source q", clock=clock)
    retry = Retry(outage, "queue job 'h'", every=60, clock=clock)
    for _ in range(12):
        try:
            raise ConnectError("temporary failure in name resolution")
        except ConnectError as exc:
            retry.failed(exc)  # no raise
        clock.now += 10
    errors = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert len(errors) == 2 and all(record.exc_info for record in errors)
    assert "ConnectError: temporary failure" in errors[0].getMessage()
    assert outage.report()["reachable"] is False and outage.report()["permanent"] is False
    assert not outage.refused_at_start


def test_a_late_refusal_does_not_make_a_later_outage_permanent(clock: Clock) -> None:
    outage = Outage("store s", clock=clock)
    retry = Retry(outage, "job 'a'", clock=clock)
    retry.succeeded()
    begun = clock.now
    clock.now += 1
    retry.failed(StoreRefused("bad password"))
    clock.now += 1
    retry.succeeded()  # fixed
    retry.failed(stamp(StoreRefused("bad password"), begun))  # an echo from before the fix
    assert outage.report()["permanent"] is False
    clock.now += 1
    retry.failed(StoreUnavailable("connection refused"))  # a new, transient outage
    report = outage.report()
    assert report["reachable"] is False and report["permanent"] is False


def test_outage_is_safe_to_share_with_a_health_server_thread() -> None:
    outage = Outage("store s")
    outage.succeeded("job 'a'")
    opened: list[bool] = []
    start = threading.Barrier(8)

    def fail() -> None:
        start.wait()
        opened.append(outage.failed("health", StoreUnavailable("down")))

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert opened.count(True) == 1
