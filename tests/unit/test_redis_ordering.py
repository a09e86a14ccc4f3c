"""The order of a Redis lease's renewal and release (tenure._async.stores.redis._ordering): a
release waits for a renewal of its lease on its way, for at most its patience; a renewal
leaves out the leases being released. (The bug it prevents, seen on a real server, is in
tests/stores/test_redis.py.)"""

from __future__ import annotations

import time

import anyio
import pytest
from waiting import eventually

import tenure.aio
from tenure._async import _shim
from tenure._async.stores.redis._fan_out import Masters
from tenure._async.stores.redis._ordering import RenewalOrder

pytestmark = pytest.mark.anyio


async def test_a_renewal_leaves_out_the_leases_being_released() -> None:
    order = RenewalOrder()
    await order.start_release(["a"], patience=1.0)  # nothing on its way: at once
    on_its_way = _shim.Event()
    assert order.start_renewal(on_its_way, ["a", "b"]) == {"a"}
    order.end_renewal(on_its_way, ["a", "b"])
    order.end_release(["a"])
    again = _shim.Event()
    assert order.start_renewal(again, ["a", "b"]) == set(), "released: renewed as any"
    order.end_renewal(again, ["a", "b"])


async def test_a_release_waits_for_the_renewal_on_its_way() -> None:
    order = RenewalOrder()
    on_its_way = _shim.Event()
    assert order.start_renewal(on_its_way, ["a"]) == set()
    released: list[str] = []

    async def release() -> None:
        await order.start_release(["a"], patience=30.0)
        released.append("a")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(release)
        await anyio.sleep(0.05)
        assert released == [], "sent while the renewal was on its way"
        order.end_renewal(on_its_way, ["a"])
    assert released == ["a"]
    assert order.start_renewal(_shim.Event(), ["a"]) == {"a"}, "now being released"


async def test_a_release_stops_waiting_after_its_patience() -> None:
    order = RenewalOrder()
    order.start_renewal(_shim.Event(), ["a"])  # never answered
    started = time.monotonic()
    with anyio.fail_after(10):
        await order.start_release(["a"], patience=0.1)
    assert time.monotonic() - started >= 0.1


async def test_a_call_of_a_name_waits_for_the_work_left_in_the_background_on_it() -> None:
    """A quorum acquire leaves a release (or a late grant's join) to the background: the next
    call of that name to that master runs after it, or it would find the name still held
    there (a quorum acquire right after a release and a master's death answered "held")."""
    # Two masters' stores, never connected: the calls here are the test's own.
    stores = [tenure.aio.connect(f"redis://127.0.0.1:{port}/0") for port in (1, 2)]
    masters = Masters([store.backend for store in stores])
    steps: list[str] = []
    work_may_end = anyio.Event()

    async def work() -> None:
        await work_may_end.wait()
        steps.append("background release")

    async def call(index: int) -> str:
        steps.append(f"call on master {index}")
        return "done"

    masters.in_background("jobs", [0], work)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(masters.first, call, [0], lambda _: False, 5.0, None, "jobs")
        tasks.start_soon(masters.first, call, [1], lambda _: False, 5.0, None, "jobs")
        tasks.start_soon(masters.first, call, [0], lambda _: False, 5.0, None, "other")
        await eventually(lambda: len(steps) >= 2, 5, "the calls not held back")
        assert steps == ["call on master 1", "call on master 0"]  # not held back
        work_may_end.set()
    assert steps[2:] == ["background release", "call on master 0"]
    assert masters.unfinished() == 0
    for store in stores:
        await store.close()
