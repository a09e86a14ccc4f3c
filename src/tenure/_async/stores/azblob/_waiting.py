"""How an azblob store's waiters wait: a try every POLL_EVERY seconds or a little less,
whatever the core's backoff asks.

Blob leases cannot tell anyone of a release, so a waiter learns of one only by trying. Between
processes that poll, the lock goes to whoever tries first after the release: a waiter's share is
its share of the tries. With the core's backoff (10 ms doubling to 1 s, full jitter) a waiter
that has waited long tries about twice a second while one that just arrived tries five times in
its first 0.3 s, so the fresh ones (often the last holder, asking again) keep taking the lock.
Here every waiter tries at the same pace, the bare SDK's usual fixed retry or a little faster,
from the first wait on: a wait is one pause of POLL_EVERY x uniform(1 - POLL_JITTER, 1) seconds
(the jitter keeps waiters from trying in lockstep), then one try. The core's first try of an
acquire is still made at once, so an uncontended acquire costs nothing more.

That alone does not stop a process that releases and asks again at once: its first try comes
a round trip after its release, before any waiter's next one, so it keeps the lock while the
others starve (the bare SDK's retry loop does the same). So a process that was refused a name
in the last CONTENDED_FOR seconds (others are polling for it) begins its next acquire of it with
a pause too (the store's `waits_its_turn`, which the core asks before the first try): then the
lock goes to whichever waiter tries first after the release. A try_acquire() and an acquire
with timeout 0 still try at once, and a name nobody else wants is never refused, so its
acquires never pause.

A lock's waiter costs one Lease Blob request (answered 409 while held) per pause: about 4.7
requests per second; a semaphore's tries its `limit` slots per pause.

Example::

    grant = await wait_and_acquire(leases, "jobs", "worker-1", 30.0, 1, 0.5, 10.0)
"""

from __future__ import annotations

import random

from tenure._async import _shim
from tenure._async.stores.azblob._leases import Leases
from tenure._types import Grant

POLL_EVERY = 0.25  # the longest pause between a waiter's tries (seconds)
POLL_JITTER = 0.25  # a pause is POLL_EVERY x uniform(1 - POLL_JITTER, 1)
CONTENDED_FOR = 4 * POLL_EVERY  # a name refused this recently: its next acquire waits its turn
_REMEMBERED = 4096  # refused names remembered per store: the names a process waits for are few


class Contention:
    """The names this store was refused lately (see the module docstring).

    Example:
        >>> contention = Contention()
        >>> contention.refused("jobs")
        >>> contention.waits_its_turn("jobs"), contention.waits_its_turn("other")
        (True, False)
    """

    def __init__(self) -> None:
        self._refused_at: dict[str, float] = {}

    def refused(self, name: str) -> None:
        """Note that a try of `name` found every slot held."""
        now = _shim.monotonic()
        if len(self._refused_at) >= _REMEMBERED and name not in self._refused_at:
            self._refused_at = {known: at for known, at in self._refused_at.items()
                                if now - at < CONTENDED_FOR}
            if len(self._refused_at) >= _REMEMBERED:
                self._refused_at.clear()  # that many contended at once: forget, stay bounded
        self._refused_at[name] = now

    def waits_its_turn(self, name: str) -> bool:
        """Whether `name` was refused in the last CONTENDED_FOR seconds."""
        at = self._refused_at.get(name)
        return at is not None and _shim.monotonic() - at < CONTENDED_FOR


def poll_pause() -> float:
    """The pause before a waiter's next try: at most POLL_EVERY seconds, jittered below it.

    Example:
        >>> POLL_EVERY * (1 - POLL_JITTER) <= poll_pause() <= POLL_EVERY
        True
    """
    return POLL_EVERY * random.uniform(1.0 - POLL_JITTER, 1.0)


async def wait_and_acquire(leases: Leases, name: str, holder: str, ttl: float, limit: int,
                           timeout: float, patience: float) -> Grant | None:
    """Pause (see `poll_pause`), then try; again until `timeout` is over: the Grant taken, or
    None when every slot was still held.

    The pace is the store's, not the core's backoff: a try every pause until `timeout` is
    over, and at least one pause and try even when `timeout` is shorter, so a waiter that
    just arrived never tries faster than those that waited long. No pause outlasts
    `patience`, so an acquire still makes its last try by its own timeout. Cancelled or
    failing mid-try, the try frees what it may have taken (Leases.try_acquire).

    Example::

        grant = await wait_and_acquire(leases, "jobs", "worker-1", 30.0, 1, 0.5, 10.0)
    """
    started = _shim.monotonic()
    # Tries until `timeout` is over (a store's wait takes a slot "when woken or at the end"),
    # at least once, never past `patience`.
    until = started + min(max(timeout, 0.0), patience)
    while True:
        left = started + patience - _shim.monotonic()
        await _shim.sleep(max(0.0, min(poll_pause(), left)))
        sent_at = _shim.monotonic()  # the lease's deadline counts from this request
        grant = await leases.try_acquire(name, holder, ttl, limit)
        if grant is not None:
            return grant._replace(sent_at=sent_at)
        if _shim.monotonic() >= until:
            return None
