"""store.lock_all(names): every name or none, in one canonical order, held and lost as one
(issue 22, part 2), on every store through both APIs."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from conftest import Target, call, eventually

import tenure
from tenure._async.stores._protocol import releases_all, takes_all

pytestmark = pytest.mark.anyio


async def listed(store: Any) -> dict[str, int]:
    return {info.name: info.token for info in await call(store.leases())}


async def test_takes_every_name_with_its_own_token_and_releases_them_together(
        target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    before = await call(store.lock("invoice-1", ttl=ttl).try_acquire())
    assert await call(before.release()) is True
    leases = await call(store.lock_all(["invoice-1", "customer-7"], ttl=ttl, timeout=5))
    assert leases.names == ("customer-7", "invoice-1")  # the canonical order
    assert [lease.name for lease in leases] == ["customer-7", "invoice-1"] and len(leases) == 2
    assert leases.held and not leases.lost and not leases.released
    assert leases.tokens == {"customer-7": leases["customer-7"].token,
                             "invoice-1": leases["invoice-1"].token}
    assert leases["invoice-1"].token > before.token
    assert await listed(target.connect()) == leases.tokens
    assert await call(leases.release()) is True
    assert leases.released and not leases.held
    assert await listed(store) == {}
    with pytest.raises(tenure.LeaseReleased, match="lock_all"):
        leases.check()
    assert await call(leases.release()) is False  # idempotent


async def test_a_name_not_free_means_none_is_taken(target: Target) -> None:
    ttl = target.ttl(5)
    other = target.connect()
    held = await call(other.lock("b", ttl=ttl).try_acquire())
    store = target.connect()
    started = time.monotonic()
    with pytest.raises(tenure.LockTimeout,
                       match=r"lock_all of \['a', 'b', 'c'\] was not acquired within 0\.3 s, so "
                             r"it holds none of them: 'b' was not free"):
        await call(store.lock_all(["c", "b", "a"], ttl=ttl, timeout=0.3))
    assert time.monotonic() - started < 5
    assert await listed(target.connect()) == {"b": held.token}  # "a" was given back
    with pytest.raises(tenure.LockTimeout):
        await call(store.lock_all(["a", "b"], ttl=ttl, timeout=0))
    assert await listed(target.connect()) == {"b": held.token}
    assert await call(held.release()) is True


async def test_waits_for_a_held_name_and_takes_them_all_once_it_is_released(
        target: Target) -> None:
    ttl = target.ttl(5)
    held = await call(target.connect().lock("b", ttl=ttl).try_acquire())
    store = target.connect()
    got: list[Any] = []

    async def take() -> None:
        got.append(await call(store.lock_all(["a", "b"], ttl=ttl, timeout=30)))

    watcher = target.connect()

    async def holds_a() -> bool:
        return "a" in await listed(watcher)

    if target.is_async:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(take)
            await eventually(holds_a, 10, "lock_all to hold 'a' while it waits for 'b'")
            await held.release()
    else:
        thread = threading.Thread(target=lambda: anyio.run(take))
        thread.start()
        await eventually(holds_a, 10, "lock_all to hold 'a' while it waits for 'b'")
        held.release()
        thread.join(30)
    [leases] = got
    assert leases.held and leases["b"].token > held.token
    assert await call(leases.release()) is True


async def test_overlapping_sets_in_any_order_never_deadlock(target: Target) -> None:
    # Two holders each taking {x, y} many times, one naming them [x, y] and one [y, x]: taken
    # in one order, the one waiting never holds what the other needs. No round takes long.
    ttl, rounds = target.ttl(5), 5
    done: list[str] = []

    async def loop(store: Any, names: list[str]) -> None:
        for _ in range(rounds):
            leases = await call(store.lock_all(names, ttl=ttl, timeout=30, max_wait=0.05))
            assert leases.held
            assert await call(leases.release()) is True
        done.append(names[0])

    stores = [target.connect(), target.connect()]
    if target.is_async:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(loop, stores[0], ["x", "y"])
            tasks.start_soon(loop, stores[1], ["y", "x"])
    else:
        threads = [threading.Thread(target=anyio.run, args=(loop, store, names))
                   for store, names in zip(stores, (["x", "y"], ["y", "x"]), strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert sorted(done) == ["x", "y"]


async def test_losing_one_lease_loses_the_set(target: Target) -> None:
    lost_calls: list[Any] = []
    store, admin = target.connect(), target.connect()
    # Noticed as with a 1 s ttl on any store (see test_locks.py).
    leases = await call(store.lock_all(["a", "b"], ttl=target.ttl(1.0), renew_every=1 / 3,
                                       on_lost=lost_calls.append, timeout=5))
    assert await call(admin.break_lease("b")) == 1
    # on_lost runs once the set's other leases are marked lost too (in the renewal's thread)
    await eventually(lambda: lost_calls, 3.0, "the set to notice the break")
    assert lost_calls == [leases]
    broken = {tenure.LostReason.BROKEN, tenure.LostReason.TAKEN}
    reasons = {lease.name: lease.lost_reason for lease in leases}
    if target.kind.break_ends_session:  # 'a' shared b's session: broken with it, in any order
        assert set(reasons.values()) <= broken | {tenure.LostReason.WITH_ITS_SET}, reasons
        assert set(reasons.values()) & broken, reasons
    else:
        assert reasons["b"] in broken and reasons["a"] is tenure.LostReason.WITH_ITS_SET, reasons
    assert leases.lost and not leases.held
    with pytest.raises(tenure.LeaseLost, match=r"lock_all of \['a', 'b'\]"):
        leases.check()
    # Lost together, released together: 'a' is free again once the set is released.
    await call(leases.release())
    assert await listed(admin) == {}


async def test_a_loss_cancels_the_async_body_and_raises_from_the_block(target: Target) -> None:
    store, admin = target.connect(), target.connect()
    finished_body = False
    started = time.monotonic()
    with pytest.raises(tenure.LeaseLost, match="lock_all"):
        if target.is_async:
            async with store.lock_all(["a", "b"], ttl=target.ttl(1.0), renew_every=1 / 3,
                                      timeout=5) as leases:
                await admin.break_lease("a")
                await anyio.sleep(30)  # long protected work: cancelled by the loss
                finished_body = True
        else:
            with store.lock_all(["a", "b"], ttl=target.ttl(1.0), renew_every=1 / 3,
                                timeout=5) as leases:
                admin.break_lease("a")
                await eventually(lambda: leases.lost, 3.0, "the set to notice")
                finished_body = True
    assert time.monotonic() - started < 10
    assert finished_body is (not target.is_async)
    assert leases.released
    assert await listed(admin) == {}


@pytest.mark.parametrize(("names", "error", "message"), [
    ("invoice-1", tenure.InvalidArgumentType,
     r"names must be a list of lock names, got the str 'invoice-1': "
     r"write lock_all\(\['invoice-1'\]\)"),
    ([], tenure.InvalidArgument, "names is empty"),
    (["a", "b", "a"], tenure.InvalidArgument, "names lists 'a' twice"),
    (["a", ""], tenure.InvalidArgument, "name"),
    (None, tenure.InvalidArgumentType, "names must be a list of lock names, got NoneType"),
])
async def test_bad_names_are_refused_before_the_store_is_touched(
        target: Target, names: Any, error: type[Exception], message: str) -> None:
    store = target.connect()
    with pytest.raises(error, match=message):
        store.lock_all(names, ttl=target.ttl(5))
    with pytest.raises(tenure.InvalidArgument, match="ttl"):
        store.lock_all(["a"], ttl=-1)
    assert await listed(store) == {}


async def test_a_store_that_takes_all_in_one_request_takes_all_or_none(target: Target) -> None:
    store = target.connect()
    take_all = takes_all(store.backend)
    if take_all is None:
        pytest.skip("this store takes lock_all's names one by one (no try_acquire_all)")
    ttl = target.ttl(5)
    before = await call(store.lock("y", ttl=ttl).try_acquire())
    assert await call(before.release()) is True
    odd = "ünï\x00cödé/" + "n" * 1000  # any str: the names go as the store's keys do
    grants = await call(take_all(["x", "y", odd], "me", ttl))
    assert [(grant.name, grant.slot) for grant in grants] == [("x", 0), ("y", 0), (odd, 0)]
    assert grants[1].token > before.token
    taken = {grant.name: grant.token for grant in grants}
    assert await listed(target.connect()) == taken
    assert await call(take_all(["y", "z"], "me", ttl)) is None  # "y" is held: nothing taken
    assert await listed(target.connect()) == taken
    free = await call(target.connect().lock("z", ttl=ttl).try_acquire())
    assert free is not None
    for grant in grants:
        assert await call(store.backend.release(grant)) is True
    assert await call(free.release()) is True
    assert await listed(target.connect()) == {}


async def test_a_store_that_releases_all_in_one_request_frees_only_its_own(
        target: Target) -> None:
    store = target.connect()
    release_all = releases_all(store.backend)
    if release_all is None:
        pytest.skip("this store releases a lease set's leases one by one (no release_all)")
    ttl = target.ttl(5)
    mine = [await call(store.lock(name, ttl=ttl).try_acquire()) for name in ("p", "q", "r")]
    assert await call(mine[1].release()) is True
    again = await call(target.connect().lock("q", ttl=ttl).try_acquire())  # another's now
    assert await call(release_all([lease.grant for lease in mine])) == [True, False, True]
    assert await listed(target.connect()) == {"q": again.token}
    assert await call(again.release()) is True
