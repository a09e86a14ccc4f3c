"""The core's one waiting path: a store with `wait_and_acquire` has its grant used as is."""

from __future__ import annotations

import math
import threading
import time

import anyio
from waiting import wait_until

import tenure
import tenure.aio
from tenure._types import Grant
from tenure.aio.stores import AsyncMemoryStore
from tenure.stores import MemoryStore


class WakingMemoryStore(MemoryStore):
    """The memory store with a wait_and_acquire that counts its calls and the try_acquires."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0
        self.waits = 0

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        self.tries += 1
        return super().try_acquire(name, holder, ttl, limit)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int, timeout: float,
                         patience: float) -> Grant | None:
        self.waits += 1
        assert 0 <= timeout <= patience
        self.wait_released(name, timeout, patience)
        return super().try_acquire(name, holder, ttl, limit)


class AsyncWakingMemoryStore(AsyncMemoryStore):
    """The async twin of WakingMemoryStore."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0
        self.waits = 0

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        self.tries += 1
        return await super().try_acquire(name, holder, ttl, limit)

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        self.waits += 1
        await self.wait_released(name, timeout, patience)
        return await super().try_acquire(name, holder, ttl, limit)


def _release_once_waiting(backend: WakingMemoryStore, lease: tenure.Lease) -> threading.Thread:
    """A thread that releases `lease` once `backend` has a waiter (started)."""
    def release() -> None:
        wait_until(lambda: backend.waits > 0, 10, "the waiter to wait")
        lease.release()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_a_wait_that_acquires_ends_the_acquire_without_another_try() -> None:
    backend = WakingMemoryStore()
    store = tenure.connect(backend)
    first = store.lock("jobs", ttl=5).acquire()
    released = _release_once_waiting(backend, first)
    try:
        lease = store.lock("jobs", ttl=5).acquire(timeout=5)
    finally:
        released.join()
    assert lease.held and lease.token > first.token
    assert backend.tries == 2  # the first acquire's and the waiter's first; then only waits
    assert backend.waits >= 1
    lease.release()
    store.close()


def test_async_a_wait_that_acquires_ends_the_acquire_without_another_try() -> None:
    async def main() -> None:
        backend = AsyncWakingMemoryStore()
        store = tenure.aio.connect(backend)
        first = await store.lock("jobs", ttl=5).acquire()
        async with anyio.create_task_group() as tasks:
            async def release_soon() -> None:
                with anyio.fail_after(10):  # once the waiter waits: no sleep-and-hope
                    while backend.waits == 0:
                        await anyio.sleep(0.005)
                await first.release()
            tasks.start_soon(release_soon)
            lease = await store.lock("jobs", ttl=5).acquire(timeout=5)
        assert lease.held and lease.token > first.token
        assert backend.tries == 2
        assert backend.waits >= 1
        await lease.release()
        await store.close()

    anyio.run(main)


def test_a_wait_that_finds_it_held_until_the_timeout_raises_lock_timeout() -> None:
    backend = WakingMemoryStore()
    store = tenure.connect(backend)
    first = store.lock("jobs", ttl=5).acquire()
    try:
        store.lock("jobs", ttl=5).acquire(timeout=0.3)
    except tenure.LockTimeout:
        pass
    else:
        raise AssertionError("acquired a held lock")
    assert backend.tries == 2 and backend.waits >= 1  # the holder's, the waiter's; then waits
    first.release()
    store.close()


class LateMemoryStore(MemoryStore):
    """The memory store answering a try only after the lease it took has lapsed (as when the
    process was stopped, or the path stalled, between the request and its answer)."""

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        grant = super().try_acquire(name, holder, ttl, limit)
        time.sleep(ttl)
        return grant


def test_a_grant_answered_after_its_deadline_is_given_back_not_handed_out() -> None:
    backend = LateMemoryStore()
    store = tenure.connect(backend)
    # Its holder could not know it still held it: the store may have granted it again.
    assert store.lock("jobs", ttl=0.3).try_acquire() is None
    store.close()


class TimelessMemoryStore(WakingMemoryStore):
    """A wait_and_acquire whose grants say nothing of when they were sent (math.inf)."""

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int, timeout: float,
                         patience: float) -> Grant | None:
        grant = super().wait_and_acquire(name, holder, ttl, limit, timeout, patience)
        return None if grant is None else grant._replace(sent_at=math.inf)


def test_a_grant_from_a_wait_without_a_send_time_counts_from_the_waits_start() -> None:
    backend = TimelessMemoryStore()
    store = tenure.connect(backend)
    first = store.lock("jobs", ttl=5).acquire()
    released = _release_once_waiting(backend, first)
    started = time.monotonic()
    try:
        lease = store.lock("jobs", ttl=5).acquire(timeout=5)
    finally:
        released.join()
    assert started < lease.deadline <= time.monotonic() + 5  # not math.inf: it can be lost
    store.close()
