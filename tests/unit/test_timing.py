"""Pure timing logic: durations, deadlines, backoff and the next fencing token."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenure
from tenure import InvalidArgument, InvalidArgumentType
from tenure._timing import Backoff, check_range, local_deadline, margin_for, next_token, to_seconds


def test_durations_accept_seconds_and_timedeltas() -> None:
    assert to_seconds(3, "ttl") == 3.0
    assert to_seconds(2.5, "ttl") == 2.5
    assert to_seconds(timedelta(minutes=2), "ttl") == 120.0
    assert to_seconds(None, "timeout", allow_none=True) == math.inf
    with pytest.raises(InvalidArgumentType, match="ttl must be seconds"):
        to_seconds(None, "ttl")
    with pytest.raises(InvalidArgumentType):
        to_seconds(True, "ttl")
    with pytest.raises(InvalidArgument, match="NaN"):
        to_seconds(math.nan, "ttl")
    with pytest.raises(InvalidArgument, match=r"ttl=70 is out of range: it must be between 15"):
        check_range(70.0, "ttl", 15.0, 60.0)


@given(ttl=st.floats(min_value=0.1, max_value=7 * 86400), sent=st.floats(0, 1e6))
def test_the_local_deadline_always_comes_before_the_store_expiry(ttl: float, sent: float) -> None:
    deadline = local_deadline(sent, ttl)
    assert sent < deadline < sent + ttl
    assert sent + ttl - deadline >= margin_for(ttl)
    assert margin_for(ttl) == min(1.0, ttl / 10)


@given(minimum=st.floats(0.001, 1.0), maximum=st.floats(1.0, 60.0), tries=st.integers(1, 80))
def test_backoff_stays_within_bounds_and_grows(minimum: float, maximum: float,
                                               tries: int) -> None:
    backoff = Backoff(minimum, maximum)
    delays = [backoff.next_delay() for _ in range(tries)]
    assert all(minimum <= delay <= maximum for delay in delays)


def test_backoff_cap_doubles_until_the_maximum() -> None:
    backoff = Backoff(0.01, 0.08)
    caps = []
    for _ in range(6):
        caps.append(min(0.08, 0.01 * 2 ** (backoff._attempt + 1)))
        backoff.next_delay()
    assert caps == [0.02, 0.04, 0.08, 0.08, 0.08, 0.08]


@given(stored=st.none() | st.integers(0, 2**62), now_us=st.integers(0, 2**62))
def test_next_token_is_above_the_stored_counter_and_at_least_the_clock(stored: int | None,
                                                                       now_us: int) -> None:
    # At least the clock: a counter lost, forgotten (retain, prune) or from before a reboot
    # restarts above every earlier token while the clock has not stepped back.
    token = next_token(stored, now_us)
    assert token >= now_us
    if stored is not None:
        assert token > stored
        assert token == max(stored + 1, now_us)


# -- durations out of a float's range, infinite or NaN ----------------------------------------


def test_an_int_too_large_for_a_float_is_infinite_not_an_overflow() -> None:
    assert to_seconds(10**400, "timeout") == math.inf
    assert to_seconds(-(10**400), "timeout") == -math.inf
    with pytest.raises(InvalidArgument, match=r"ttl=inf \(infinite, or an int too large for a "
                                              r"float\) is out of range: it must be between 0.1"):
        check_range(to_seconds(10**400, "ttl"), "ttl", 0.1, 604800.0)
    with pytest.raises(InvalidArgument, match=r"grace=nan is out of range"):
        check_range(math.nan, "grace", 0.0, 3600.0)  # configuration files can hold NaN


@pytest.mark.parametrize("value", [10**400, -(10**400), 1e300, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("argument", ["ttl", "renew_every", "min_wait", "max_wait"])
def test_lock_durations_out_of_range_are_refused_with_the_range(argument: str,
                                                                value: float) -> None:
    store = tenure.connect("memory://")
    with pytest.raises(InvalidArgument, match=rf"{argument}(=| must be a number).*"
                                              r"(between [\d.]+ and [\d.]+ seconds|NaN)"):
        store.lock("x", **{argument: value})
    store.close()


@pytest.mark.parametrize("timeout", [10**400, 1e300, math.inf, None])
def test_a_timeout_beyond_any_float_waits_forever_like_inf_and_none(timeout: float | None) -> None:
    store = tenure.connect("memory://")
    acquiring = store.lock("x").acquire(timeout=timeout)
    with acquiring as lease:
        assert lease.token > 0
    store.close()


@pytest.mark.parametrize(("timeout", "message"), [
    (-(10**400), "timeout=-inf is negative"), (-math.inf, "timeout=-inf is negative"),
    (math.nan, "timeout must be a number of seconds, got NaN"),
])
def test_a_negative_or_nan_timeout_is_refused(timeout: float, message: str) -> None:
    store = tenure.connect("memory://")
    with pytest.raises(InvalidArgument, match=message):
        store.lock("x").acquire(timeout=timeout)
    store.close()


@pytest.mark.parametrize("value", [10**400, 1e300, math.inf, math.nan])
@pytest.mark.parametrize("option", ["ttl", "poll", "jitter", "misfire_grace", "retry_backoff"])
def test_job_durations_out_of_range_are_refused(option: str, value: float) -> None:
    worker = tenure.Worker(tenure.connect("memory://"))
    with pytest.raises(InvalidArgument, match=option):
        worker.cron("* * * * *", name="job", **{option: value})
