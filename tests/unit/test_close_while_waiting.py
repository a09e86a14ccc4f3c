"""A store closed while one of its threads waits for a lease leaves no lease behind: close()
releases what is held, and a waiter woken by that release must not take a lease that nobody
would then renew or release (it gets StoreRefused instead)."""

from __future__ import annotations

import threading
from pathlib import Path

import tenure
from tenure.stores import MemoryStore


def _close_while_a_thread_waits(store: tenure.Store) -> object:
    holder = store.lock("jobs", ttl=30).acquire(timeout=1)
    assert holder.held
    outcome: list[object] = []
    waiting = threading.Event()

    def wait() -> None:
        waiting.set()
        try:
            outcome.append(store.lock("jobs", ttl=30, min_wait=0.001, max_wait=0.002)
                           .acquire(timeout=10))
        except tenure.TenureError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    assert waiting.wait(5)
    store.close()
    thread.join(15)
    assert not thread.is_alive()
    return outcome[0]


def test_a_sqlite_store_closed_while_a_thread_waits_leaves_no_lease(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    for _ in range(30):
        got = _close_while_a_thread_waits(tenure.connect(url))
        with tenure.connect(url) as observer:
            left = observer.leases("jobs")
        assert left == [], f"{len(left)} lease(s) left held after close (the waiter got {got!r})"


def test_a_memory_store_closed_while_a_thread_waits_leaves_no_lease() -> None:
    for _ in range(30):
        backend = MemoryStore()
        got = _close_while_a_thread_waits(tenure.connect(backend))
        left = [key for key, held in backend._held.items() if held.expires_at > 0]
        assert not isinstance(got, tenure.Lease) or not got.held
        assert left == [], f"{len(left)} lease(s) left held after close (the waiter got {got!r})"
