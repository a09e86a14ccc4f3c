"""Lock semantics every store keeps, through both APIs (one process)."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from conftest import Target, call, eventually

import tenure

pytestmark = pytest.mark.anyio


async def test_try_acquire_excludes_and_never_waits(target: Target, make_lock: Any) -> None:
    first, second, ttl = target.connect(), target.connect(), target.ttl(5)
    lease = await call(make_lock(first, "jobs", ttl=ttl).try_acquire())
    assert lease is not None
    assert (lease.name, lease.holder, lease.slot, lease.lost) == ("jobs", first.holder, 0, False)
    assert 0 < lease.expires_in <= ttl

    started = time.monotonic()
    assert await call(make_lock(second, "jobs", ttl=ttl).try_acquire()) is None
    assert time.monotonic() - started < 1.0, "try_acquire must not wait"

    assert await call(lease.release()) is True
    again = await call(make_lock(second, "jobs", ttl=ttl).try_acquire())
    assert again is not None and again.token > lease.token and again.holder == second.holder


async def test_acquire_times_out_with_lock_timeout(target: Target, make_lock: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ttl = target.ttl(5)
    assert await call(make_lock(target.connect(), "jobs", ttl=ttl).try_acquire()) is not None
    store = target.connect()
    waiter = make_lock(store, "jobs", ttl=ttl, min_wait=0.01, max_wait=0.05)

    started = time.monotonic()
    with pytest.raises(tenure.LockTimeout, match=r"'jobs' was not acquired within 0\.3 s"):
        await call(waiter.acquire(timeout=0.3))
    assert 0.3 <= time.monotonic() - started < 2.0

    # timeout=0: one try, no wait. Counted rather than timed: the one try is one request, but
    # a store's client may retry a request that failed in transit (azblob: up to 2 retries,
    # 0.2 s apart), which a loaded machine sees now and then.
    asked: list[str] = []

    def counted(method: str) -> Any:
        original = getattr(store.backend, method)

        def ask(*args: Any) -> Any:
            asked.append(method)
            return original(*args)
        return ask

    for method in ("try_acquire", "wait_released"):
        monkeypatch.setattr(store.backend, method, counted(method))
    with pytest.raises(tenure.LockTimeout):
        await call(waiter.acquire(timeout=0))
    assert asked == ["try_acquire"]


async def test_waiter_gets_the_lock_soon_after_release(target: Target, make_lock: Any) -> None:
    ttl = target.ttl(5)
    lease = await call(make_lock(target.connect(), "jobs", ttl=ttl).try_acquire())
    waiter = make_lock(target.connect(), "jobs", ttl=ttl, min_wait=0.01, max_wait=0.1)
    got: dict[str, Any] = {}
    waiting = threading.Event()

    def record(acquired: Any) -> None:
        got["lease"], got["at"] = acquired, time.monotonic()

    if target.is_async:
        async def wait() -> None:
            waiting.set()
            record(await waiter.acquire(timeout=None))

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await eventually(waiting.is_set, 5, "the waiter to start")
            released_at = time.monotonic()
            await lease.release()
    else:
        def wait_in_thread() -> None:
            waiting.set()
            record(waiter.acquire(timeout=None))

        thread = threading.Thread(target=wait_in_thread)
        thread.start()
        await eventually(waiting.is_set, 5, "the waiter to start")
        released_at = time.monotonic()
        lease.release()
        thread.join(timeout=10)

    assert got["lease"].token > lease.token
    assert got["at"] - released_at < 1.0, "a waiter must not sleep far past max_wait"


async def test_lease_is_renewed_while_held(target: Target) -> None:
    # A renewal may land up to about half a ttl late before the holder's deadline passes: with
    # 4 test processes on 2 shared cores, a 0.6 s ttl once lost its lease to a stall of over
    # 0.4 s (the store's own expiry passed too), so 1.2 s.
    ttl = target.ttl(1.2)
    lease = await call(target.connect().lock("jobs", ttl=ttl).try_acquire())
    other = target.connect().lock("jobs", ttl=ttl)
    # Hold through three ttls: without renewal the lease would run out after one. Where the
    # shortest ttl is 15 s (Azure), hold through one ttl and a third, which proves renewal too.
    for _ in range(9 if ttl < 5 else 4):
        await anyio.sleep(ttl / 3)  # the protected work
        assert not lease.lost
        assert await call(other.try_acquire()) is None
    assert lease.expires_in > 0
    assert await call(lease.release()) is True


async def test_release_is_idempotent_and_never_frees_another_holder(
        target: Target, make_lock: Any) -> None:
    first, second, admin = target.connect(), target.connect(), target.connect()
    ttl = target.ttl(5)
    lease = await call(make_lock(first, "jobs", ttl=ttl).try_acquire())
    assert await call(lease.release()) is True
    assert await call(lease.release()) is False

    theirs = await call(make_lock(second, "jobs", ttl=ttl).try_acquire())
    assert theirs is not None
    # A stale grant replayed straight at the store frees nothing of the new holder's.
    assert await call(first.backend.release(lease.grant)) is False
    assert await call(make_lock(first, "jobs", ttl=ttl).try_acquire()) is None

    # Broken, then taken over: the old holder's release reports False and frees nothing.
    assert await call(admin.break_lease("jobs")) == 1
    newest = await call(make_lock(admin, "jobs", ttl=ttl).try_acquire())
    assert newest is not None and newest.token > theirs.token
    assert await call(theirs.release()) is False
    assert await call(make_lock(first, "jobs", ttl=ttl).try_acquire()) is None
    assert [info.token for info in await call(admin.leases("jobs"))] == [newest.token]


async def test_break_lease_is_noticed_by_the_holder(target: Target, make_lock: Any) -> None:
    lost_calls: list[Any] = []
    # renew_every is the default ttl/3 of a 1 s ttl: the break is noticed as fast on any store
    lease = await call(make_lock(target.connect(), "jobs", ttl=target.ttl(1.0), renew_every=1 / 3,
                                 on_lost=lost_calls.append).try_acquire())
    admin = target.connect()
    assert await call(admin.break_lease("jobs")) == 1
    await eventually(lambda: lease.lost, 3.0, "the holder to notice the break")
    assert lease.lost_reason in (tenure.LostReason.BROKEN, tenure.LostReason.TAKEN)
    with pytest.raises(tenure.LeaseLost, match="'jobs'"):
        lease.check()
    await eventually(lambda: lost_calls == [lease], 1.0, "on_lost to run once")
    successor = await call(make_lock(admin, "jobs", ttl=target.ttl(5)).try_acquire())
    assert successor is not None and successor.token > lease.token
    assert await call(lease.release()) is False
    assert await call(admin.break_lease("jobs")) == 1
    assert await call(admin.break_lease("jobs")) == 0


async def test_loss_inside_a_with_block(target: Target) -> None:
    """Async: the body is cancelled and LeaseLost comes out. Sync: check() raises, exit too."""
    store, admin = target.connect(), target.connect()
    lock = store.lock("jobs", ttl=target.ttl(1.0), renew_every=1 / 3)  # noticed as with ttl 1 s
    finished_body = False
    started = time.monotonic()
    with pytest.raises(tenure.LeaseLost):
        if target.is_async:
            async with lock.acquire(timeout=1) as lease:
                await admin.break_lease("jobs")
                await anyio.sleep(30)  # long protected work: must be cancelled by the loss
                finished_body = True
        else:
            with lock.acquire(timeout=1) as lease:
                admin.break_lease("jobs")
                await eventually(lambda: lease.lost, 3.0, "the holder to notice")
                with pytest.raises(tenure.LeaseLost):
                    lease.check()
                finished_body = True
    assert time.monotonic() - started < 5
    assert finished_body is (not target.is_async)
    assert lease.released


async def test_body_exception_releases_and_propagates(target: Target) -> None:
    store = target.connect()
    lock = store.lock("jobs", ttl=target.ttl(5))
    with pytest.raises(ZeroDivisionError):
        if target.is_async:
            async with lock.acquire(timeout=1):
                _ = 1 / 0
        else:
            with lock.acquire(timeout=1):
                _ = 1 / 0
    assert await call(target.connect().lock("jobs").try_acquire()) is not None


async def test_async_with_after_try_acquire(target: Target) -> None:
    store = target.connect()
    lease = await call(store.lock("jobs", ttl=target.ttl(5)).try_acquire())
    if target.is_async:
        async with lease as entered:
            assert entered is lease
    else:
        with lease as entered:
            assert entered is lease
    assert lease.released
    assert await call(target.connect().lock("jobs").try_acquire()) is not None


async def test_leases_lists_live_leases_by_prefix(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    held = {name: await call(store.lock(name, ttl=ttl).try_acquire())
            for name in ("jobs/a", "jobs/b", "other")}
    expected = [(name, store.holder, held[name].token) for name in ("jobs/a", "jobs/b")]
    # Another holder sees who holds what within a second of the grant (at once on most stores;
    # Azure writes the holder into the blob's metadata shortly after the grant).
    admin, deadline = target.connect(), time.monotonic() + 1.0
    while True:
        infos = await call(admin.leases("jobs/"))
        if [(i.name, i.holder, i.token) for i in infos] == expected or (
                time.monotonic() > deadline):
            break
        await anyio.sleep(0.05)
    assert [(i.name, i.holder, i.token) for i in infos] == expected
    for info in infos:
        if target.kind.kernel_expiry or not target.kind.lists_expiry:
            assert info.expires_at is None
        else:
            from datetime import datetime, timezone
            left = (info.expires_at - datetime.now(timezone.utc)).total_seconds()
            assert 0 < left <= ttl + 1
    await call(held["jobs/a"].release())
    assert [i.name for i in await call(store.leases())] == ["jobs/b", "other"]


async def test_semaphore_hands_out_limit_slots(target: Target) -> None:
    store = target.connect()
    sem = store.semaphore("imports", limit=3, ttl=target.ttl(5))
    leases = [await call(sem.try_acquire()) for _ in range(3)]
    assert all(lease is not None for lease in leases)
    assert sorted(lease.slot for lease in leases) == [0, 1, 2]
    assert len({lease.token for lease in leases}) == 3
    assert await call(target.connect().semaphore("imports", limit=3).try_acquire()) is None
    assert len(await call(store.leases("imports"))) == 3

    await call(leases[1].release())
    again = await call(target.connect().semaphore("imports", limit=3).try_acquire())
    assert again is not None and again.slot == leases[1].slot
    assert again.token > max(lease.token for lease in leases)


async def test_tokens_grow_across_restarts_and_lost_state(target: Target) -> None:
    async def grant_token() -> int:
        store = target.connect()
        lease = await call(store.lock("jobs", ttl=target.ttl(5)).try_acquire())
        await call(lease.release())
        await call(store.close())
        return int(lease.token)

    first = await grant_token()
    after_restart = await grant_token()
    assert after_restart > first
    target.wipe()  # the database file / lock directory / memory is gone
    after_loss = await grant_token()
    assert after_loss > after_restart
