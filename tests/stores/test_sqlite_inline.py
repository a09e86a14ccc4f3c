"""The async sqlite:// store runs its statements on the event loop's thread (no thread hop per
statement), never waits there: a write lock held by another process sends the call to a
worker thread, where it waits with the store's busy timeout as before, while the loop goes on;
a commit that syncs to disk (synchronous=full) runs in a thread too; and the WAL is still
checkpointed although the loop's connections never checkpoint.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from waiting import eventually

import tenure.aio
from tenure import _io_threads

pytestmark = pytest.mark.anyio

HOLDER = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # the database's write lock, until told
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
print("committed", flush=True)
sys.stdin.readline()
"""


@asynccontextmanager
async def no_worker_thread() -> AsyncIterator[None]:
    """While in the block, a call that needs a worker thread waits for one: tenure's own
    (tenure._io_threads) are all taken, so the call goes to anyio's, and the one token of the
    loop's default thread limiter is taken."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    total, borrower = limiter.total_tokens, object()
    limiter.total_tokens = 1
    await limiter.acquire_on_behalf_of(borrower)
    take = _io_threads._pool.take
    _io_threads._pool.take = lambda: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        _io_threads._pool.take = take  # type: ignore[method-assign]
        limiter.release_on_behalf_of(borrower)
        limiter.total_tokens = total


@asynccontextmanager
async def opened(tmp_path: Path, query: str = "") -> AsyncIterator[
        tuple[tenure.aio.AsyncStore, tenure.aio.AsyncLock]]:
    """The lock "job" (ttl 30 s) of an async sqlite:// store at `tmp_path`, taken and released
    once first, so the database, its tables and the loop's connection exist; closed after.

    retain=inf: no sweep of idle names, which is a worker thread's write transaction by design;
    one started by that first release could make a statement of the test meet the write lock
    (SQLITE_BUSY on the loop) and go to a worker thread, which no_worker_thread() holds up."""
    options = f"{query}&retain=inf" if query else "?retain=inf"
    store = tenure.aio.connect(f"sqlite:///{tmp_path}/locks.db{options}")
    try:
        lock = store.lock("job", ttl=30)
        async with lock.acquire():
            pass
        yield store, lock
    finally:
        await store.close()


@contextmanager
def write_lock_held(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process, holding the write lock of the database at `path` until sent a line."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(10)


async def test_async_statements_run_without_a_worker_thread(tmp_path: Path) -> None:
    async with opened(tmp_path) as (store, lock), no_worker_thread():
        with anyio.fail_after(30):  # generous: 100 cycles take milliseconds
            for _ in range(100):
                lease = await lock.try_acquire()
                assert lease is not None
                assert [info.name for info in await store.leases()] == ["job"]
                assert await lease.release()
            assert await store.leases() == []


async def test_a_held_write_lock_does_not_block_the_loop_and_the_call_still_waits_for_it(
        tmp_path: Path) -> None:
    # A long busy timeout: the acquire waits for the write lock however slow the machine is,
    # and would stall the loop that long if it waited on the loop's thread.
    ticks: list[float] = []
    acquired: list[tenure.aio.AsyncLease | None] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await anyio.sleep(0.005)

    async with opened(tmp_path, "?busy_timeout=60") as (_, lock):

        async def acquire() -> None:
            acquired.append(await lock.try_acquire())

        with write_lock_held(tmp_path / "locks.db") as holder:
            assert holder.stdout is not None and holder.stdin is not None
            line = await anyio.to_thread.run_sync(holder.stdout.readline)
            assert line.strip() == "locked"
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(tick)
                tasks.start_soon(acquire)
                started = len(ticks)
                await eventually(lambda: len(ticks) >= started + 20, 30,
                                 "the loop to tick while the acquire waits for the write lock")
                assert acquired == [], "the acquire did not wait for the write lock"
                holder.stdin.write("\n")  # commit: the write lock is free
                holder.stdin.flush()
                await eventually(lambda: acquired, 30, "the waiting acquire to take the lease")
                tasks.cancel_scope.cancel()
        lease = acquired[0]
        assert lease is not None, "the acquire gave up instead of waiting for the write lock"
        gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
        assert max(gaps) < 5.0, f"the event loop stalled for {max(gaps):.2f} s"
        assert await lease.release()


async def test_with_synchronous_full_a_write_runs_in_a_thread_and_a_read_on_the_loop(
        tmp_path: Path) -> None:
    async with opened(tmp_path, "?synchronous=full") as (store, lock):
        async with no_worker_thread():
            with anyio.fail_after(30):
                assert await store.leases() == []  # a read: on the loop
            with anyio.move_on_after(0.2) as scope:
                await lock.try_acquire()  # a commit that syncs: needs a worker thread
            assert scope.cancelled_caught
        lease = await lock.try_acquire()
        assert lease is not None
        assert await lease.release()


async def test_the_wal_is_checkpointed_when_every_write_runs_on_the_loop(
        tmp_path: Path) -> None:
    store = tenure.aio.connect(f"sqlite:///{tmp_path}/locks.db")
    lock = store.lock("job", ttl=30)
    try:
        for _ in range(3000):  # 6,000 commits of a page or more each
            async with lock.acquire():
                pass
        page = 4096 + 24  # SQLite's default page size, and a WAL frame's header
        wal_pages = (tmp_path / "locks.db-wal").stat().st_size // page
        assert wal_pages < 2500, f"the WAL grew to {wal_pages} pages: never checkpointed"
    finally:
        await store.close()
