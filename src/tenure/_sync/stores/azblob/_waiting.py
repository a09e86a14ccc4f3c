# GENERATED from src/tenure/_async/stores/azblob/_waiting.py by scripts/unasync.py: do not edit.
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

A lock's waiter costs one Lease Blob request (answered 409 while held) per pause: about 4.7
requests per second; a semaphore's tries its `limit` slots per pause.

Example::

    grant = wait_and_acquire(leases, "jobs", "worker-1", 30.0, 1, 0.5, 10.0)
"""

from __future__ import annotations

import random

from tenure._sync import _shim
from tenure._sync.stores.azblob._leases import Leases
from tenure._types import Grant

POLL_EVERY = 0.25  # the longest pause between a waiter's tries (seconds)
POLL_JITTER = 0.25  # a pause is POLL_EVERY x uniform(1 - POLL_JITTER, 1)


def poll_pause() -> float:
    """The pause before a waiter's next try: at most POLL_EVERY seconds, jittered below it.

    Example:
        >>> POLL_EVERY * (1 - POLL_JITTER) <= poll_pause() <= POLL_EVERY
        True
    """
    return POLL_EVERY * random.uniform(1.0 - POLL_JITTER, 1.0)


def wait_and_acquire(leases: Leases, name: str, holder: str, ttl: float, limit: int,
                           timeout: float, patience: float) -> Grant | None:
    """Pause (see `poll_pause`), then try; again until `timeout` is over: the Grant taken, or
    None when every slot was still held.

    The pace is the store's, not the core's backoff: a try every pause until `timeout` is
    over, and at least one pause and try even when `timeout` is shorter, so a waiter that
    just arrived never tries faster than those that waited long. No pause outlasts
    `patience`, so an acquire still makes its last try by its own timeout. Cancelled or
    failing mid-try, the try frees what it may have taken (Leases.try_acquire).

    Example::

        grant = wait_and_acquire(leases, "jobs", "worker-1", 30.0, 1, 0.5, 10.0)
    """
    started = _shim.monotonic()
    # Tries until `timeout` is over (a store's wait takes a slot "when woken or at the end"),
    # at least once, never past `patience`.
    until = started + min(max(timeout, 0.0), patience)
    while True:
        left = started + patience - _shim.monotonic()
        _shim.sleep(max(0.0, min(poll_pause(), left)))
        sent_at = _shim.monotonic()  # the lease's deadline counts from this request
        grant = leases.try_acquire(name, holder, ttl, limit)
        if grant is not None:
            return grant._replace(sent_at=sent_at)
        if _shim.monotonic() >= until:
            return None
