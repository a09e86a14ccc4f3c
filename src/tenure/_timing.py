"""Pure timing logic: argument checks for durations, the holder's local deadline, backoff with
full jitter, and the next fencing token. No I/O.

Example:
    >>> to_seconds(30, "ttl")
    30.0
    >>> local_deadline(sent_at=100.0, ttl=30.0)
    128.7
"""

from __future__ import annotations

import math
import random
from datetime import timedelta
from typing import TYPE_CHECKING

from tenure._errors import InvalidArgument, InvalidArgumentType

if TYPE_CHECKING:
    from tenure._types import Capabilities

# A lease counts as lost a little before the store lets it expire: 1 % for clock-rate
# differences between this host and the store, plus a margin for the last request's flight.
CLOCK_RATE_TOLERANCE = 0.01
MAX_MARGIN = 1.0


def to_seconds(value: object, argument: str, *, allow_none: bool = False) -> float:
    """Accept seconds as int/float or a timedelta; return float seconds.

    None (when allowed) is math.inf. An int too large for a float becomes +-inf, as float
    arithmetic rounds an overflow, so the caller's range check refuses it with the allowed
    range (check_range), and a timeout reads it as "forever", like math.inf. NaN is refused.

    Example:
        >>> to_seconds(timedelta(minutes=1), "ttl")
        60.0
        >>> to_seconds(10**400, "timeout")
        inf
    """
    if value is None and allow_none:
        return math.inf
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # beyond about 1.8e308
            seconds = math.inf if value > 0 else -math.inf
    elif isinstance(value, float):
        seconds = float(value)
    else:
        expected = "seconds (int or float), a timedelta, or None" if allow_none else (
            "seconds (int or float) or a timedelta"
        )
        raise InvalidArgumentType(f"{argument} must be {expected}, got {type(value).__name__}")
    if math.isnan(seconds):
        raise InvalidArgument(f"{argument} must be a number of seconds, got NaN")
    return seconds


def check_range(seconds: float, argument: str, low: float, high: float, hint: str = "") -> float:
    """Fail with a clear message when `seconds` is outside [low, high].

    Example:
        >>> check_range(5.0, "ttl", 0.1, 60.0)
        5.0
    """
    if not low <= seconds <= high:
        bound = f"between {low:g} and {high:g} seconds" if math.isfinite(high) else (
            f"at least {low:g} seconds"
        )
        given = f"={seconds:g}" + (" (infinite, or an int too large for a float)"
                                   if math.isinf(seconds) else "")
        raise InvalidArgument(f"{argument}{given} is out of range: it must be {bound}{hint}")
    return seconds


def check_ttl(ttl: object, capabilities: Capabilities, argument: str = "ttl") -> float:
    """A lease duration (of a lock, semaphore, job or queue message) in seconds, within the
    range its store takes: the one ttl check, before any I/O.

    Example:
        >>> from tenure._types import Capabilities
        >>> check_ttl(timedelta(seconds=30), Capabilities(min_ttl=15.0, max_ttl=60.0))
        30.0
    """
    return check_range(to_seconds(ttl, argument), argument, capabilities.min_ttl,
                       capabilities.max_ttl, capabilities.ttl_hint)


def margin_for(ttl: float) -> float:
    """The safety margin subtracted from a lease's local deadline: min(1 s, ttl/10).

    Example:
        >>> margin_for(5.0)
        0.5
    """
    return min(MAX_MARGIN, ttl / 10)


def local_deadline(sent_at: float, ttl: float) -> float:
    """When the holder must consider its lease lost without a confirmed renewal.

    `sent_at` is this process's monotonic time when the acquire/renew request was sent,
    so the deadline never depends on how long the answer took to come back.

    Example:
        >>> round(local_deadline(0.0, 10.0), 3)
        8.9
    """
    return sent_at + ttl * (1 - CLOCK_RATE_TOLERANCE) - margin_for(ttl)


def fresh_for(ttl: float) -> float:
    """How long after its request was sent a grant taken while its caller waited (pipelined
    behind a wait on the server) may still be handed out: the lease's deadline stays before
    the server's expiry as long as the request went out at most this long before the deadline
    is counted from (the clock-rate tolerance plus the margin of `local_deadline`).

    Example:
        >>> round(fresh_for(30.0), 3)
        1.3
    """
    return ttl * CLOCK_RATE_TOLERANCE + margin_for(ttl)


def jittered(interval: float, spread: float = 0.1) -> float:
    """`interval` moved randomly by up to +-spread (default 10 %), so holders do not align.

    Example:
        >>> 9.0 <= jittered(10.0) <= 11.0
        True
    """
    return interval * (1 - spread + 2 * spread * random.random())


class Backoff:
    """Exponential backoff with full jitter between `minimum` and `maximum` seconds.

    Example:
        >>> backoff = Backoff(0.01, 1.0)
        >>> 0.01 <= backoff.next_delay() <= 0.02
        True
    """

    __slots__ = ("_attempt", "maximum", "minimum")

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self._attempt = 0

    def next_delay(self) -> float:
        """The next wait: uniform in [minimum, min(maximum, minimum * 2**attempt)].

        Example:
            >>> Backoff(1.0, 1.0).next_delay()
            1.0
        """
        cap = min(self.maximum, self.minimum * 2 ** min(self._attempt + 1, 60))
        self._attempt += 1
        return random.uniform(self.minimum, cap)


def next_token(stored: int | None, now_us: int) -> int:
    """The fencing token for a new grant, given the counter a store kept for the name (None:
    it keeps none, or forgot it): greater than the counter and at least the wall clock in
    microseconds. So a counter that was lost, forgotten after its name's retention window, or
    last written before a reboot (whose final increments may not have reached the disk)
    restarts above every earlier token while the clock has not stepped back by more than the
    time since that token was granted (a grant takes far more than a microsecond, so the
    counter never runs ahead of the clock by itself).

    Example:
        >>> next_token(41, 10**15)
        1000000000000000
        >>> next_token(10**15, 10**15)
        1000000000000001
        >>> next_token(None, 10**15)
        1000000000000000
    """
    return now_us if stored is None else max(stored + 1, now_us)
