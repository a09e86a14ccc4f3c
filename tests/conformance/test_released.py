"""After a lease ends, and asking again for a lock already held, on every store
through both APIs.

A released lease is no longer held: `check()` raises tenure.LeaseReleased (a LeaseLost), `lost`
stays False, `held` is False, and `token` still fences. Locks are not reentrant: a thread or task
that holds every slot and waits again with no timeout is refused at once (it could only wait for
itself), and a timed-out wait says that this process holds the lease.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import pytest
from conftest import Target, call, count_tries, entered, eventually
from waiting import wait_until

import tenure
from tenure.jobs import AsyncWorker, Run, Worker

pytestmark = pytest.mark.anyio

T = TypeVar("T")

NOT_REENTRANT = "would wait for its own lease forever: tenure locks are not reentrant"


def _drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (sync API calls through `call`) with no event loop,
    so the sync API sees a plain thread, as in a sync program."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coroutine.close()
    raise AssertionError("a sync body suspended: it may only await call(...) of sync calls")


async def in_one_thread_or_task(target: Target, body: Callable[[], Coroutine[Any, Any, T]],
                                timeout: float = 20) -> T:
    """Run `body` in one task (async API) or one plain thread (sync API): the owner of the
    leases it takes. Fails after `timeout` s: a wait for its own lease would last forever."""
    if target.is_async:
        with anyio.fail_after(timeout):
            return await body()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = _drive(body())
        except BaseException as exc:  # re-raised in the test below
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)  # a stuck one ends when stores close
    thread.start()
    await eventually(lambda: not thread.is_alive(), timeout, "the thread's body to finish")
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["value"]
    return result


def assert_ended(lease: Any, token: int) -> None:
    """A lease released while it was held: not held, not lost, its token unchanged."""
    assert (lease.released, lease.lost, lease.held) == (True, False, False)
    assert lease.lost_reason is None
    assert lease.token == token, "the token stays readable after the release"
    with pytest.raises(tenure.LeaseReleased, match=r"lease on 'jobs' \(token \d+\) was rel"):
        lease.check()


# -- after the release ---------------------------------------------------------------------------

async def test_check_after_release_raises_lease_released(target: Target, make_lock: Any) -> None:
    lease = await call(make_lock(target.connect(), "jobs", ttl=target.ttl(5)).try_acquire())
    token = lease.token
    assert (lease.held, lease.released, lease.lost) == (True, False, False)
    lease.check()  # held: passes
    assert await call(lease.release()) is True
    assert_ended(lease, token)
    with pytest.raises(tenure.LeaseLost):  # LeaseReleased is a LeaseLost: one except for both
        lease.check()
    assert await call(lease.release()) is False
    assert_ended(lease, token)


async def test_check_after_leaving_the_block_raises_lease_released(target: Target,
                                                                   make_lock: Any) -> None:
    store = target.connect()
    lock = make_lock(store, "jobs", ttl=target.ttl(5), timeout=5)
    async with entered(target, lock) as lease:  # with lock as lease:
        lease.check()
        token = lease.token
    assert_ended(lease, token)
    async with entered(target, lock.acquire(timeout=5)) as lease:  # with lock.acquire() as ...
        lease.check()
        token = lease.token
    assert_ended(lease, token)
    lease = await call(lock.try_acquire())
    async with entered(target, lease):  # with lease:
        lease.check()
    assert_ended(lease, lease.token)


async def test_a_released_lease_s_token_still_fences(target: Target) -> None:
    """A write fenced by the released lease's token is refused once a newer lease was
    granted: the token is the same number after the release."""
    lease = await call(target.connect().lock("jobs", ttl=target.ttl(5)).try_acquire())
    token = lease.token
    await call(lease.release())
    newer = await call(target.connect().lock("jobs", ttl=target.ttl(5)).try_acquire())
    assert newer is not None
    assert lease.token == token < newer.token
    await call(newer.release())


async def test_a_lease_lost_before_its_release_stays_lost(target: Target) -> None:
    ttl = target.ttl(1)
    store = target.connect()
    lease = await call(store.lock("jobs", ttl=ttl, renew_every=ttl / 10).try_acquire())
    assert await call(target.connect().break_lease("jobs")) == 1
    await eventually(lambda: lease.lost, ttl + 10, "the holder to learn of the break")
    await call(lease.release())
    assert (lease.released, lease.lost, lease.held) == (True, True, False)
    assert lease.lost_reason is not None
    with pytest.raises(tenure.LeaseLost, match="was lost") as raised:
        lease.check()
    assert not isinstance(raised.value, tenure.LeaseReleased), "lost, not merely released"


async def test_a_job_s_run_check_raises_once_the_job_released_its_lease(target: Target) -> None:
    store = target.connect()
    ttl = target.ttl(5)
    seen: list[BaseException | None] = []

    if target.is_async:
        worker: Any = AsyncWorker(store)

        @worker.every(timedelta(minutes=10), name="release", ttl=ttl, jitter=0)
        async def job_async(run: Run) -> None:
            await run.lease.release()
            try:
                run.check()
            except tenure.LeaseLost as exc:
                seen.append(exc)
            else:
                seen.append(None)

        async with worker:
            await eventually(lambda: seen, ttl + 10, "the job to run")
    else:
        worker = Worker(store)

        @worker.every(timedelta(minutes=10), name="release", ttl=ttl, jitter=0)
        def job_sync(run: Run) -> None:
            run.lease.release()
            try:
                run.check()
            except tenure.LeaseLost as exc:
                seen.append(exc)
            else:
                seen.append(None)

        with worker:
            await eventually(lambda: seen, ttl + 10, "the job to run")
    assert isinstance(seen[0], tenure.LeaseReleased), seen[0]
    assert "'release'" in str(seen[0]), "the message names the job"


# -- asking again for what this thread or task holds ----------------------------------------------

async def test_an_endless_wait_for_a_lock_this_thread_or_task_holds_is_refused(
        target: Target, make_lock: Any) -> None:
    store = target.connect()
    ttl = target.ttl(5)
    lock = make_lock(store, "jobs", ttl=ttl)

    async def body() -> tuple[Any, list[str]]:
        lease = await call(lock.try_acquire())
        refusals = []
        for again in (lambda: lock.acquire(),                      # the lock's default: forever
                      lambda: lock.acquire(timeout=math.inf),
                      lambda: make_lock(store, "jobs", ttl=ttl).acquire(),  # another Lock object
                      lambda: store.lock("jobs", ttl=ttl, timeout=None).acquire()):
            with pytest.raises(tenure.InvalidArgument) as raised:
                await call(again())
            refusals.append(str(raised.value))
        assert await call(lock.try_acquire()) is None, "try_acquire() still just says busy"
        return lease, refusals

    lease, refusals = await in_one_thread_or_task(target, body)
    for refusal in refusals:
        assert NOT_REENTRANT in refusal
        assert f"holds it already (lease token {lease.token}, taken through this store)" in refusal
        assert ("this thread" if not target.is_async else "this task") in refusal
    assert lease.held, "the refusal leaves the lease held"
    await call(lease.release())


async def test_a_semaphore_refuses_an_endless_wait_only_when_every_slot_is_its_own(
        target: Target) -> None:
    store = target.connect()
    sem = store.semaphore("jobs", limit=2, ttl=target.ttl(5))

    async def body() -> list[Any]:
        first = await call(sem.acquire())  # one of two: the second slot is free
        second = await call(sem.acquire())
        with pytest.raises(tenure.InvalidArgument, match=r"holds all 2 slots already \(tokens "
                                                         rf"{first.token}, {second.token}"):
            await call(sem.acquire())
        return [first, second]

    leases = await in_one_thread_or_task(target, body)
    assert sorted(lease.slot for lease in leases) == [0, 1]
    for lease in leases:
        await call(lease.release())


async def test_an_endless_wait_for_another_thread_or_task_s_lease_waits_for_its_release(
        target: Target) -> None:
    """The same store and Lock, held by one thread or task, waited for by another: not a wait
    for itself. It gets the lease once the holder releases."""
    store = target.connect()
    lock = store.lock("jobs", ttl=target.ttl(5), min_wait=0.01, max_wait=0.1)
    held = await call(lock.try_acquire())
    got: list[int] = []
    waiting = threading.Event()  # set once the waiter, told busy, looked for its own leases
    looked = lock._refuse_a_wait_for_itself

    def spy() -> None:
        looked()
        waiting.set()

    lock._refuse_a_wait_for_itself = spy

    if target.is_async:
        async def wait() -> None:
            lease = await lock.acquire()
            got.append(lease.token)
            await lease.release()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await eventually(waiting.is_set, 5, "the waiter to be told busy")
            assert got == []
            await held.release()
    else:
        def wait_in_thread() -> None:
            lease = lock.acquire()
            got.append(lease.token)
            lease.release()

        thread = threading.Thread(target=wait_in_thread, daemon=True)
        thread.start()
        await eventually(waiting.is_set, 5, "the waiter to be told busy")
        assert got == []
        held.release()
        await eventually(lambda: not thread.is_alive(), 30, "the waiter to get the lease")
    assert len(got) == 1 and got[0] > held.token


async def test_a_timed_out_wait_says_this_process_holds_the_lock(target: Target,
                                                                 make_lock: Any) -> None:
    store = target.connect()
    ttl = target.ttl(5)
    lock = make_lock(store, "jobs", ttl=ttl, min_wait=0.01, max_wait=0.05)

    async def body() -> tuple[Any, str]:
        lease = await call(lock.try_acquire())
        with pytest.raises(tenure.LockTimeout) as raised:
            await call(lock.acquire(timeout=0.2))
        return lease, str(raised.value)

    lease, message = await in_one_thread_or_task(target, body)
    here = "this thread" if not target.is_async else "this task"
    assert message == (
        f"lock 'jobs' was not acquired within 0.2 s: this process holds it through this store "
        f"(token {lease.token} taken in {here}); tenure locks are not reentrant: use the lease "
        "held, or release it before acquiring again")
    # Waited for elsewhere: the same store, another thread or task
    if target.is_async:
        async def elsewhere() -> str:
            with pytest.raises(tenure.LockTimeout) as raised:
                await lock.acquire(timeout=0.2)
            return str(raised.value)

        async with anyio.create_task_group() as group:
            messages: list[str] = []

            async def run() -> None:
                messages.append(await elsewhere())

            group.start_soon(run)
        other = messages[0]
    else:
        with pytest.raises(tenure.LockTimeout) as raised:
            lock.acquire(timeout=0.2)  # this test's thread: not the one that took the lease
        other = str(raised.value)
    assert f"(token {lease.token} taken in another thread or task)" in other
    await call(lease.release())
    # Held by another store object (another holder): the message says so, and no more
    taken = await call(make_lock(target.connect(), "reports", ttl=ttl).try_acquire())
    with pytest.raises(tenure.LockTimeout, match="within 0 s: another holder has it; wait"):
        await call(make_lock(store, "reports", ttl=ttl).acquire(timeout=0))
    await call(taken.release())


async def test_a_semaphore_s_timeout_counts_the_slots_this_process_holds(
        target: Target) -> None:
    store, other = target.connect(), target.connect()
    ttl = target.ttl(5)
    mine = await call(store.semaphore("jobs", limit=2, ttl=ttl).try_acquire())
    theirs = await call(other.semaphore("jobs", limit=2, ttl=ttl).try_acquire())
    with pytest.raises(tenure.LockTimeout, match=(
            r"this process holds 1 of its 2 slots through this store \(token "
            rf"{mine.token} taken in .*\) and other holders the rest; wait longer")):
        await call(store.semaphore("jobs", limit=2, ttl=ttl).acquire(timeout=0))
    for lease in (mine, theirs):
        await call(lease.release())


async def test_a_new_thread_is_not_the_holder_of_an_ended_threads_lease(target: Target) -> None:
    """Linux gives an ended thread's ident to the next thread: a lease taken by a thread that
    ended (and handed on to be released) must not make a new thread's endless wait refused as
    a wait for its own lease."""
    if target.is_async:
        pytest.skip("threads own leases in the sync API; tasks in the async one")
    lock = target.connect().lock("handed-on", ttl=target.ttl(5))
    spy = count_tries(lock, is_async=False)
    taken: list[Any] = []
    first = threading.Thread(target=lambda: taken.append(lock.acquire(timeout=5)))
    first.start()
    first.join(timeout=30)
    outcome: list[object] = []

    def waiter() -> None:
        def release_after_a_busy_try() -> None:
            tries = spy.tries
            wait_until(lambda: spy.tries > tries + 1, 10, "the waiter to find it busy")
            taken[0].release()

        releaser = threading.Thread(target=release_after_a_busy_try)
        try:
            releaser.start()  # another thread releases it: the wait below ends
            lease = lock.acquire()
            outcome.append(lease.token)
            lease.release()
        except Exception as exc:  # checked below
            outcome.append(exc)
        releaser.join(timeout=30)

    second = threading.Thread(target=waiter)
    second.start()
    second.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], int), outcome
