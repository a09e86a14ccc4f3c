"""The short forms users type first, on every store through both APIs: `with store.lock(...)`
(`async with`), `lock.locked()` / `lock.leases()`, and the `@store.locked("name-{arg}")`
decorator."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from conftest import Target, call, count_tries, entered, eventually

import tenure

pytestmark = pytest.mark.anyio


async def free(target: Target, name: str) -> bool:
    """Whether another holder could take `name` now (it is released at once if so)."""
    lease = await call(target.connect().lock(name, ttl=target.ttl(5)).try_acquire())
    if lease is None:
        return False
    await call(lease.release())
    return True


# -- with lock ---------------------------------------------------------------------------------

async def test_with_lock_binds_the_lease_and_releases_it(target: Target, make_lock: Any) -> None:
    store = target.connect()
    lock = make_lock(store, "jobs", ttl=target.ttl(5), timeout=5)
    async with entered(target, lock) as lease:
        assert isinstance(lease, tenure.aio.AsyncLease if target.is_async else tenure.Lease)
        assert (lease.name, lease.holder, lease.lost) == ("jobs", store.holder, False)
        assert lease.token > 0
        assert not await free(target, "jobs")
    assert lease.released
    assert await free(target, "jobs")
    async with entered(target, lock) as again:  # the same Lock object enters again
        assert again.token > lease.token


async def test_with_lock_releases_when_the_body_raises(target: Target) -> None:
    lock = target.connect().lock("jobs", ttl=target.ttl(5))
    with pytest.raises(ZeroDivisionError):
        async with entered(target, lock) as lease:
            1 / 0  # noqa: B018 - the body fails
    assert lease.released
    assert await free(target, "jobs")


async def test_with_lock_waits_up_to_the_lock_timeout(target: Target, make_lock: Any) -> None:
    ttl = target.ttl(5)
    assert await call(make_lock(target.connect(), "jobs", ttl=ttl).try_acquire()) is not None
    lock = make_lock(target.connect(), "jobs", ttl=ttl, timeout=0.3, min_wait=0.01,
                     max_wait=0.05)
    assert lock.timeout == 0.3
    started = time.monotonic()
    with pytest.raises(tenure.LockTimeout, match=r"'jobs' was not acquired within 0\.3 s"):
        async with entered(target, lock):
            pytest.fail("the body ran without the lease")
    assert 0.3 <= time.monotonic() - started < 3.0
    # acquire() without a timeout waits the lock's; one given to acquire() wins
    with pytest.raises(tenure.LockTimeout, match=r"within 0\.3 s"):
        await call(lock.acquire())
    with pytest.raises(tenure.LockTimeout, match=r"within 0 s"):
        await call(lock.acquire(timeout=0))


async def test_with_lock_without_a_timeout_waits_for_the_release(target: Target) -> None:
    ttl = target.ttl(5)
    held = await call(target.connect().lock("jobs", ttl=ttl).try_acquire())
    lock = target.connect().lock("jobs", ttl=ttl, min_wait=0.01, max_wait=0.1)
    assert lock.timeout is None
    spy = count_tries(lock, target.is_async)
    got: list[int] = []

    if target.is_async:
        async def wait() -> None:
            async with lock as lease:
                got.append(lease.token)

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            # It tried, found the lease held, and waits (it has not given up).
            await eventually(lambda: spy.tries >= 2, 5, "the waiter to try twice")
            assert got == []
            await held.release()
    else:
        def wait_in_thread() -> None:
            with lock as lease:
                got.append(lease.token)

        thread = threading.Thread(target=wait_in_thread)
        thread.start()
        await eventually(lambda: spy.tries >= 2, 5, "the waiter to try twice")
        assert got == [] and thread.is_alive()
        held.release()
        thread.join(timeout=30)
    assert len(got) == 1 and got[0] > held.token


async def test_with_lock_left_in_another_thread_or_task_releases_its_lease(
        target: Target) -> None:
    """An `async with` torn down in another task (an async fixture's teardown) or a `with`
    left in another thread: the lease is released all the same, not renewed for ever."""
    lock = target.connect().lock("jobs", ttl=target.ttl(5), timeout=5)
    if target.is_async:
        lease = await lock.__aenter__()
        errors: list[BaseException] = []

        async def leave() -> None:
            try:
                await lock.__aexit__(None, None, None)
            except RuntimeError as exc:  # anyio: a cancel scope is left in another task
                errors.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(leave)
        assert [str(error) for error in errors] == [
            "Attempted to exit cancel scope in a different task than it was entered in"]
    else:
        lease = lock.__enter__()
        thread = threading.Thread(target=lock.__exit__, args=(None, None, None))
        thread.start()
        thread.join(timeout=30)
    assert lease.released
    assert await free(target, "jobs")


async def test_nested_with_of_one_name_is_refused(target: Target, make_lock: Any) -> None:
    store = target.connect()
    lock = make_lock(store, "jobs", ttl=target.ttl(5), timeout=5)
    async with entered(target, lock) as outer:
        with pytest.raises(tenure.InvalidArgument, match="would wait for its own lease"):
            async with entered(target, lock):
                pytest.fail("a nested block of one lock ran")
        # another Lock object of the same name and store: the same self-wait
        with pytest.raises(tenure.InvalidArgument, match="'jobs' is already held by an enclos"):
            async with entered(target, make_lock(store, "jobs", ttl=target.ttl(5))):
                pytest.fail("a nested block of one name ran")
        async with entered(target, make_lock(store, "other", ttl=target.ttl(5))) as inner:
            assert inner.name == "other"  # other names nest
        assert not outer.released and not await free(target, "jobs")
    assert outer.released and await free(target, "jobs")


async def test_one_lock_object_is_shared_by_threads_or_tasks(target: Target) -> None:
    """A block of another thread (sync) or task (async), even one started inside the block,
    is no nesting: it waits for the lease like any other holder (here: until its timeout)."""
    lock = target.connect().lock("jobs", ttl=target.ttl(5), timeout=0.2)
    outcome: list[object] = []

    async with entered(target, lock):
        if target.is_async:
            async def other_task() -> None:
                try:
                    async with lock:
                        outcome.append("entered")
                except Exception as exc:  # checked below
                    outcome.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(other_task)
        else:
            def other_thread() -> None:
                try:
                    with lock:
                        outcome.append("entered")
                except Exception as exc:  # checked below
                    outcome.append(exc)

            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join(timeout=30)
        assert len(outcome) == 1 and isinstance(outcome[0], tenure.LockTimeout), outcome


async def test_semaphore_blocks_nest_up_to_its_limit(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    sem = store.semaphore("imports", 2, ttl=ttl, timeout=5)
    async with entered(target, sem) as first:
        assert await call(sem.locked()) is False
        async with entered(target, sem) as second:  # a second slot: no self-wait
            assert {first.slot, second.slot} == {0, 1}
            assert await call(sem.locked()) is True
            assert len(await call(sem.leases())) == 2
            with pytest.raises(tenure.InvalidArgument, match="has all 2 slots held by enclos"):
                async with entered(target, sem):
                    pytest.fail("a block past the limit ran")
        assert len(await call(sem.leases())) == 1
    assert await call(sem.leases()) == []


# -- locked() and leases() -----------------------------------------------------------------------

async def test_locked_asks_the_store_about_any_holder(target: Target, make_lock: Any) -> None:
    ttl = target.ttl(5)
    mine = make_lock(target.connect(), "jobs", ttl=ttl)
    theirs = make_lock(target.connect(), "jobs", ttl=ttl)
    assert await call(mine.locked()) is False and await call(mine.leases()) == []
    # a longer name that starts with this one is another lock
    longer = await call(make_lock(target.connect(), "jobs-2", ttl=ttl).try_acquire())
    assert await call(mine.locked()) is False

    lease = await call(theirs.try_acquire())
    assert await call(mine.locked()) is True  # held by another holder
    assert await call(theirs.locked()) is True  # and by its own
    # who holds it, as the holder got it: within a second (Azure writes the holder shortly
    # after the grant; a quorum's lagging master is raised to the granted token)
    expected = [("jobs", lease.holder, lease.token, 0)]
    await eventually(
        lambda: listed(mine, expected), 1.0, "the listing to show the holder and its token")
    await call(lease.release())
    assert await call(mine.locked()) is False
    await call(longer.release())


async def listed(lock: Any, expected: list[tuple[str, str, int, int]]) -> bool:
    infos = await call(lock.leases())
    return [(i.name, i.holder, i.token, i.slot) for i in infos] == expected


async def test_locked_for_names_the_store_maps(target: Target) -> None:
    ttl = target.ttl(5)
    for name in ("a/../b c", "é" * 40, "x" * 1024):
        lock = target.connect().lock(name, ttl=ttl)
        lease = await call(target.connect().lock(name, ttl=ttl).try_acquire())
        assert await call(lock.locked()) is True, name[:20]
        await call(lease.release())
        assert await call(lock.locked()) is False, name[:20]


async def test_locked_on_a_closed_store_is_refused(target: Target) -> None:
    store = target.connect()
    lock = store.lock("jobs", ttl=target.ttl(5))
    await call(store.close())
    with pytest.raises(tenure.StoreRefused, match="closed"):
        await call(lock.locked())


# -- @store.locked -----------------------------------------------------------------------------

async def test_locked_decorator_holds_the_lock_named_by_the_call(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    seen: list[tuple[bool, bool]] = []

    if target.is_async:
        @store.locked("invoice-{invoice_id}-{kind}", ttl=ttl, timeout=5)
        async def charge(invoice_id: int, amount: int, kind: str = "card") -> int:
            """Charge an invoice."""
            seen.append((await free(target, f"invoice-{invoice_id}-{kind}"),
                         await free(target, "invoice-7-card")))
            return amount * 2
    else:
        @store.locked("invoice-{invoice_id}-{kind}", ttl=ttl, timeout=5)
        def charge(invoice_id: int, amount: int, kind: str = "card") -> int:
            """Charge an invoice."""
            other = target.connect().lock
            seen.append((other(f"invoice-{invoice_id}-{kind}", ttl=ttl).locked() is False,
                         other("invoice-7-card", ttl=ttl).locked() is False))
            return amount * 2

    assert (charge.__name__, charge.__doc__) == ("charge", "Charge an invoice.")
    assert charge.__wrapped__ is not None  # type: ignore[attr-defined]
    assert await call(charge(42, amount=100)) == 200
    assert seen == [(False, True)]  # "invoice-42-card" (the default applied) held, no other
    assert await free(target, "invoice-42-card")


async def test_locked_decorator_waits_up_to_its_timeout(target: Target) -> None:
    ttl = target.ttl(5)
    held = await call(target.connect().lock("report-mon", ttl=ttl).try_acquire())
    store = target.connect()
    ran: list[str] = []
    if target.is_async:
        @store.locked("report-{day}", ttl=ttl, timeout=0.2, max_wait=0.05)
        async def report(day: str) -> None:
            ran.append(day)
    else:
        @store.locked("report-{day}", ttl=ttl, timeout=0.2, max_wait=0.05)
        def report(day: str) -> None:
            ran.append(day)

    with pytest.raises(tenure.LockTimeout, match=r"'report-mon' was not acquired within 0\.2"):
        await call(report("mon"))
    assert ran == []
    await call(report("tue"))  # another name: no wait
    await call(held.release())
    await call(report("mon"))
    assert ran == ["tue", "mon"]


async def test_locked_decorator_releases_when_the_function_raises(target: Target) -> None:
    store = target.connect()
    if target.is_async:
        @store.locked("job", ttl=target.ttl(5))
        async def fail() -> None:
            raise KeyError("boom")
    else:
        @store.locked("job", ttl=target.ttl(5))
        def fail() -> None:
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await call(fail())
    assert await free(target, "job")


async def test_locked_decorator_refuses_a_call_nested_in_its_own_name(target: Target) -> None:
    """A decorated function that calls itself for the same name would wait for its own lease."""
    store = target.connect()
    if target.is_async:
        @store.locked("tree-{root}", ttl=target.ttl(5), timeout=5)
        async def walk(root: str, depth: int) -> int:
            return 0 if depth == 0 else 1 + await walk("leaf" if depth == 1 else root, depth - 1)
    else:
        @store.locked("tree-{root}", ttl=target.ttl(5), timeout=5)
        def walk(root: str, depth: int) -> int:
            return 0 if depth == 0 else 1 + walk("leaf" if depth == 1 else root, depth - 1)

    assert await call(walk("a", 1)) == 1  # "tree-a", then "tree-leaf" inside it
    with pytest.raises(tenure.InvalidArgument, match=r"'tree-a' is already held by an enclos"):
        await call(walk("a", 2))  # "tree-a" inside "tree-a"
    assert await free(target, "tree-a")


async def test_locked_decorator_refuses_at_decoration(target: Target) -> None:
    store = target.connect()

    def plain(invoice_id: int) -> None:
        pass

    async def coroutine(invoice_id: int) -> None:
        pass

    def generator(invoice_id: int) -> Any:
        yield invoice_id

    ours, other = (coroutine, plain) if target.is_async else (plain, coroutine)
    with pytest.raises(tenure.InvalidArgument,
                       match=r"placeholder \{invoce_id\} names no parameter of .*"
                             r"(its parameters: invoice_id)"):
        store.locked("invoice-{invoce_id}")(ours)
    with pytest.raises(tenure.InvalidArgument, match="positional placeholder"):
        store.locked("invoice-{}")(ours)
    kind = "a plain function" if target.is_async else "a coroutine function"
    with pytest.raises(TypeError, match=f"{other.__name__} is {kind}, but this store is"):
        store.locked("invoice-{invoice_id}")(other)
    with pytest.raises(TypeError, match="generator function"):
        store.locked("invoice-{invoice_id}")(generator)
    with pytest.raises(tenure.InvalidArgument, match="timeout=-1 is negative"):
        store.locked("invoice", timeout=-1)
    with pytest.raises(tenure.InvalidArgumentType, match="name must be a str"):
        store.locked(7)
    assert await call(store.leases()) == []


@pytest.mark.parametrize(("timeout", "error", "message"), [
    (-1, tenure.InvalidArgument, "timeout=-1 is negative"),
    ("10", tenure.InvalidArgumentType, "timeout must be seconds"),
    (float("nan"), tenure.InvalidArgument, "NaN"),
])
async def test_bad_lock_timeout_fails_at_the_call(target: Target, timeout: object,
                                                  error: type[Exception], message: str) -> None:
    store = target.connect()
    with pytest.raises(error, match=message):
        store.lock("jobs", timeout=timeout)
    with pytest.raises(error, match=message):
        store.semaphore("jobs", 2, timeout=timeout)


async def test_leaving_one_of_several_open_blocks_elsewhere_releases_none(
        target: Target) -> None:
    """Two threads (tasks) are inside blocks of one shared semaphore; a third leaves a block of
    it: which one cannot be told, so it raises and releases neither (releasing the other's
    lease would let a third holder in while it still works)."""
    sem = target.connect().semaphore("shared", 2, ttl=target.ttl(5), timeout=5)
    inside = [threading.Event(), threading.Event()]
    leave = threading.Event()
    leases: list[Any] = []
    errors: list[BaseException] = []

    if target.is_async:
        async def holder(index: int) -> None:
            async with sem as lease:
                leases.append(lease)
                inside[index].set()
                await eventually(leave.is_set, 30, "the test to let the holders go")

        async def stranger() -> None:
            try:
                await sem.__aexit__(None, None, None)
            except RuntimeError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(holder, 0)
            group.start_soon(holder, 1)
            await eventually(lambda: all(event.is_set() for event in inside), 10, "two holders")
            await stranger()
            assert all(lease.held for lease in leases)
            leave.set()
    else:
        def holder_thread(index: int) -> None:
            with sem as lease:
                leases.append(lease)
                inside[index].set()
                leave.wait(30)

        threads = [threading.Thread(target=holder_thread, args=(index,)) for index in (0, 1)]
        for thread in threads:
            thread.start()
        await eventually(lambda: all(event.is_set() for event in inside), 10, "two holders")
        def leave_elsewhere() -> None:
            try:
                sem.__exit__(None, None, None)
            except RuntimeError as exc:
                errors.append(exc)

        stranger = threading.Thread(target=leave_elsewhere)
        stranger.start()
        stranger.join(timeout=30)
        assert all(lease.held for lease in leases)
        leave.set()
        for thread in threads:
            thread.join(timeout=30)
    assert len(errors) == 1 and "2 blocks of this object are open" in str(errors[0])
    assert len(leases) == 2 and all(lease.released for lease in leases)
