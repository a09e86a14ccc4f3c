"""Leases belong to whoever took them: a forked child inherits none of its parent's, and a
cancelled acquire leaves none behind (DESIGN.md, "Timing rules")."""

from __future__ import annotations

import asyncio
import atexit
import os

import pytest
from conftest import Target, call, eventually
from waiting import exit_status

pytestmark = pytest.mark.anyio



async def test_a_forked_child_leaves_its_parents_leases_alone(target: Target) -> None:
    if not target.kind.shared_between_processes:
        pytest.skip("the store lives in one process: a child shares nothing with its parent")
    ttl = target.ttl(5)
    store = target.connect()
    lease = await call(store.lock("parent", ttl=ttl).try_acquire())
    assert lease is not None

    pid = os.fork()
    if pid == 0:  # the child: a worker forked after startup (gunicorn --preload, multiprocessing)
        status = 1
        try:
            if not target.is_async:  # an async store needs the child's own event loop
                # The inherited store starts afresh: its own connections, its own lease.
                own = store.lock("child", ttl=ttl).try_acquire()
                inherited = store.lock("parent", ttl=ttl).try_acquire()
                assert own is not None and inherited is None
                assert lease.lost and not lease.release()  # the parent's lease, not ours
                own.release()
            atexit._run_exitfuncs()  # a normal exit: what an interpreter exit runs
            status = 0
        finally:
            os._exit(status)

    assert exit_status(pid, 30) == 0
    assert await call(target.connect().lock("parent", ttl=ttl).try_acquire()) is None, (
        "the child's exit released its parent's lease")
    assert not lease.lost
    # The parent's own connections were not disturbed by the child's use of the store.
    other = await call(store.lock("after-fork", ttl=ttl).try_acquire())
    assert other is not None
    await call(other.release())
    assert await call(lease.release()) is True


async def test_two_children_of_one_parent_exclude_each_other(target: Target) -> None:
    if not target.kind.shared_between_processes or target.is_async:
        pytest.skip("needs a store shared between processes, used by children without a loop")
    ttl = target.ttl(5)
    store = target.connect()
    await call(store.lock("warm-up", ttl=ttl).try_acquire())  # connections open before forking
    held_r, held_w = os.pipe()
    done_r, done_w = os.pipe()

    first = os.fork()
    if first == 0:  # holds "shared" until the parent says it is done
        status = 1
        try:
            lease = store.lock("shared", ttl=ttl).try_acquire()
            os.write(held_w, b"1" if lease is not None else b"0")
            os.read(done_r, 1)
            status = 0 if lease is not None and lease.release() else 1
        finally:
            os._exit(status)
    assert os.read(held_r, 1) == b"1", "the first child could not take the lock"

    second = os.fork()  # from the same parent state as the first: same store, same counters
    if second == 0:
        status = 1
        try:
            status = 0 if store.lock("shared", ttl=ttl).try_acquire() is None else 1
        finally:
            os._exit(status)
    second_status = exit_status(second, 30)
    os.write(done_w, b"x")
    assert exit_status(first, 30) == 0
    assert second_status == 0, "two children of one parent held the same lock at once"


async def test_a_cancelled_acquire_leaves_no_lease_behind(target: Target) -> None:
    if not target.is_async:
        pytest.skip("cancellation is the async API's; a sync call runs to its end")
    ttl = target.ttl(30)  # a lease left behind would block its name far past this test
    store, probe = target.connect(), target.connect()
    await (await store.lock("warm-up", ttl=ttl).acquire(timeout=10)).release()
    for attempt in range(30):
        name = f"cancelled-{attempt}"
        task = asyncio.ensure_future(store.lock(name, ttl=ttl).acquire(timeout=10))
        # Cancel at a different point of the request each time: before it is sent, while the
        # store runs it, after the answer arrived.
        for _ in range(attempt % 6):
            await asyncio.sleep(0)
        await asyncio.sleep(0.0002 * (attempt % 4))
        task.cancel()
        try:
            await (await task).release()  # it finished first: a normal lease, given back
            continue
        except asyncio.CancelledError:
            pass
        taken: list[object] = []

        async def free(name: str = name, taken: list[object] = taken) -> bool:
            lease = await probe.lock(name, ttl=ttl).try_acquire()
            if lease is not None:
                taken.append(lease)
            return lease is not None

        await eventually(free, 5, f"{name!r} to be free after its acquire was cancelled")
        await taken[0].release()  # type: ignore[attr-defined]
