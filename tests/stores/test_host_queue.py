"""The host queue of sqlite:// and file:// (tenure._async.stores._host_queue): waiters of one
host are served first come, first served, woken by the release; a killed waiter does not block
the queue, a waiter that times out or is cancelled leaves it, and a releaser that asks again
goes behind the waiters already queued.

The waiters here are real OS processes (or, for cancellation, a task of this process). Their
backoff is long (min_wait 20 s) where the test needs to know that the release woke them, not
their next poll.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from waiting import wait_until

import tenure
import tenure.aio
from tenure._names import safe_key

pytestmark = pytest.mark.anyio

NAME = "jobs"
# A waiter in its own process: it prints HELD once it holds NAME, and releases when stdin closes.
WAITER = """
import sys, tenure
with tenure.connect(sys.argv[1]) as store:
    lock = store.lock(sys.argv[2], ttl=30, min_wait=float(sys.argv[3]), max_wait=60)
    with lock.acquire(timeout=60):
        print("HELD", flush=True)
        sys.stdin.read()
"""


@pytest.fixture(params=["sqlite", "file"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/locks.db"
    return f"file://{tmp_path}/locks"


def queue_of(url: str, name: str) -> Path:
    """The queue directory of `name` in the store at `url`."""
    location = url.partition(":///")[2] if url.startswith("sqlite") else url[len("file://"):]
    root = f"/{location}-queues" if url.startswith("sqlite") else location
    return Path(root) / f"{safe_key(name)}.queue"


def queued(url: str, name: str) -> list[str]:
    try:
        return sorted(os.listdir(queue_of(url, name)))
    except FileNotFoundError:
        return []


def spawn_waiter(url: str, processes: list[subprocess.Popen[str]],
                 min_wait: float = 20.0) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", WAITER, url, NAME, str(min_wait)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    processes.append(process)
    return process


def wait_for_queue(url: str, length: int) -> list[str]:
    wait_until(lambda: len(queued(url, NAME)) == length, 60, f"{length} waiter(s) queued")
    return queued(url, NAME)


def held(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    assert process.stdout.readline() == "HELD\n", "the waiter did not get the lock"


def released_to_a_waiter(store: tenure.Store, url: str, processes: list[subprocess.Popen[str]]
                         ) -> tuple[tenure.Lock, subprocess.Popen[str]]:
    """NAME taken through `store`, a waiter process queued for it, then released: the lock
    and the waiter (woken by the release, its next poll 20 s away)."""
    lock = store.lock(NAME, ttl=30)
    lease = lock.acquire(timeout=5)
    waiter = spawn_waiter(url, processes)
    wait_for_queue(url, 1)
    lease.release()
    return lock, waiter


def test_a_releaser_that_asks_again_goes_behind_the_queued_waiter(
        url: str, processes: list[subprocess.Popen[str]]) -> None:
    with tenure.connect(url) as store:
        lock, waiter = released_to_a_waiter(store, url, processes)
        assert lock.try_acquire() is None, "the releaser took the lock back from its waiter"
        held(waiter)  # woken by the release: its next poll would be 20 s away
        assert queued(url, NAME) == []


def test_the_queue_is_gone_once_the_waiter_that_took_the_name_releases_it(
        url: str, processes: list[subprocess.Popen[str]]) -> None:
    with tenure.connect(url) as store:
        lock, waiter = released_to_a_waiter(store, url, processes)
        held(waiter)
        assert waiter.stdin is not None
        waiter.stdin.close()  # it releases and exits
        assert waiter.wait(60) == 0
        assert not queue_of(url, NAME).exists(), "the release of a queued waiter left its queue"
        again = lock.try_acquire()  # and nothing blocks the name
        assert again is not None
        again.release()


def test_a_killed_waiter_does_not_block_the_queue(
        url: str, processes: list[subprocess.Popen[str]]) -> None:
    with tenure.connect(url) as store:
        lease = store.lock(NAME, ttl=30).acquire(timeout=5)
        doomed = spawn_waiter(url, processes)
        [dead] = wait_for_queue(url, 1)
        second = spawn_waiter(url, processes)
        wait_for_queue(url, 2)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        lease.release()
        held(second)  # the release skipped the dead ticket and woke the live one
        assert dead not in queued(url, NAME), "the dead waiter's ticket was left in the queue"


def test_a_waiter_that_times_out_leaves_the_queue(url: str) -> None:
    with tenure.connect(url) as holder, tenure.connect(url) as other:
        lease = holder.lock(NAME, ttl=30).acquire(timeout=5)
        with pytest.raises(tenure.LockTimeout):
            other.lock(NAME, ttl=30).acquire(timeout=0.3)
        assert queued(url, NAME) == []
        assert not queue_of(url, NAME).exists(), "the last waiter out leaves no queue"
        lease.release()


async def test_a_cancelled_waiter_leaves_the_queue(url: str) -> None:
    async with tenure.aio.connect(url) as holder, tenure.aio.connect(url) as other:
        lease = await holder.lock(NAME, ttl=30).acquire(timeout=5)
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tasks:
                waiter = other.lock(NAME, ttl=30, min_wait=20, max_wait=60)

                async def wait() -> None:
                    await waiter.acquire()

                tasks.start_soon(wait)
                while not queued(url, NAME):
                    await anyio.sleep(0.005)
                tasks.cancel_scope.cancel()
        assert not scope.cancelled_caught, "the waiter never queued"
        assert queued(url, NAME) == []
        await lease.release()
        again = await other.lock(NAME, ttl=30).try_acquire()
        assert again is not None, "a cancelled waiter left something that blocks the name"
        await again.release()


def test_waiters_are_served_in_the_order_they_came(
        url: str, processes: list[subprocess.Popen[str]]) -> None:
    with tenure.connect(url) as store:
        lease = store.lock(NAME, ttl=30).acquire(timeout=5)
        waiters = []
        for length in (1, 2, 3):
            waiters.append(spawn_waiter(url, processes))
            wait_for_queue(url, length)
        lease.release()
        for waiter in waiters:  # each release (stdin closed) wakes the next one in line
            held(waiter)
            assert waiter.stdin is not None
            waiter.stdin.close()
            assert waiter.wait(timeout=60) == 0


# A waiter (in a thread) that forks once it is queued; the parent prints the child's pid, and
# both wait for stdin to close (or to be killed).
FORKING_WAITER = """
import os, sys, threading, time, tenure
url, name, queue = sys.argv[1:4]
store = tenure.connect(url)
lock = store.lock(name, ttl=30, min_wait=20, max_wait=60)
threading.Thread(target=lambda: lock.acquire(timeout=60), daemon=True).start()
while not (os.path.isdir(queue) and os.listdir(queue)):
    time.sleep(0.005)  # until the thread's ticket is in the queue
child = os.fork()
if child == 0:
    sys.stdin.read()
    os._exit(0)
print(child, flush=True)
sys.stdin.read()
"""


def test_a_forked_child_does_not_keep_its_parents_ticket_alive(
        url: str, processes: list[subprocess.Popen[str]]) -> None:
    with tenure.connect(url) as store:
        lease = store.lock(NAME, ttl=30).acquire(timeout=5)
        parent = subprocess.Popen(
            [sys.executable, "-c", FORKING_WAITER, url, NAME, str(queue_of(url, NAME))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        processes.append(parent)
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        try:
            [parents] = wait_for_queue(url, 1)
            second = spawn_waiter(url, processes)
            wait_for_queue(url, 2)
            parent.send_signal(signal.SIGKILL)  # its child lives on, with copies of its files
            parent.wait()
            lease.release()
            held(second)  # the parent's ticket is dead although its child lives
            assert parents not in queued(url, NAME)
        finally:
            os.kill(child, signal.SIGKILL)
