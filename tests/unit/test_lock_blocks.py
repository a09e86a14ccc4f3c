"""One Lock object shared by threads keeps an exact record of its open `with` blocks, so that a
block left in another thread than the one that entered it releases its own lease."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

import tenure


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond: a race between blocks entered and left at once
    shows up within a few thousand blocks instead of rarely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_blocks_in_threads(lock: tenure.Lock, threads: int, blocks: int) -> None:
    def enter_and_leave() -> None:
        for _ in range(blocks):
            with lock:
                pass

    workers = [threading.Thread(target=enter_and_leave) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers), "a block never ended"


def leave_in_another_thread(lock: tenure.Lock) -> tenure.Lease:
    """Enter a block of `lock` here and leave it in another thread (a `with` handed on)."""
    lease = lock.__enter__()
    errors: list[BaseException] = []

    def leave() -> None:
        try:
            lock.__exit__(None, None, None)
        except BaseException as error:  # reported by the assert below
            errors.append(error)

    leaver = threading.Thread(target=leave)
    leaver.start()
    leaver.join(timeout=30)
    assert errors == [], f"leaving the block in another thread failed: {errors[0]}"
    return lease


@pytest.mark.usefixtures("switching_often")
def test_blocks_entered_and_left_at_once_leave_no_trace() -> None:
    with tenure.connect("memory://") as store:
        semaphore = store.semaphore("imports", limit=64, ttl=30)
        for _ in range(5):  # the race, when there is one, shows up within a round or two
            run_blocks_in_threads(semaphore, threads=16, blocks=300)
            assert semaphore.locked() is False and semaphore.leases() == []
            # The one block now open is the one left in another thread: its lease is released,
            # not taken for one of the blocks that ended (which would raise, releasing nothing).
            lease = leave_in_another_thread(semaphore)
            assert lease.released and semaphore.leases() == []
