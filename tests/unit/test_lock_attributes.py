"""A lock's public attributes set after the lock was made apply to the leases taken after."""

from __future__ import annotations

import threading

import tenure
from tenure._types import LostReason


def test_on_lost_set_after_the_lock_was_made_is_called() -> None:
    with tenure.connect("memory://") as store:
        lock = store.lock("reports", ttl=1)
        called = threading.Event()
        lock.on_lost = lambda lease: called.set()
        lease = lock.acquire(timeout=1)
        assert store.break_lease("reports") == 1
        assert called.wait(5), "on_lost was not called"
        assert lease.lost and lease.lost_reason is LostReason.BROKEN


def test_renew_every_set_after_the_lock_was_made_paces_the_renewals() -> None:
    with tenure.connect("memory://") as store:
        lock = store.lock("reports", ttl=30)
        lock.renew_every = 0.05
        called = threading.Event()
        lock.on_lost = lambda lease: called.set()
        lock.acquire(timeout=1)
        assert store.break_lease("reports") == 1
        # Renewing every 10 s (ttl/3) would notice the break after about 10 s.
        assert called.wait(3), "the break was not noticed at the new renewal pace"
