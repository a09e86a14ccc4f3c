"""The order of a Redis lease's renewal and release (tenure._async.stores.redis._ordering): a
release waits for a renewal of its lease on its way, for at most its patience; a renewal
leaves out the leases being released. (The bug it prevents, seen on a real server, is in
tests/stores/test_redis.py.)"""

from __future__ import annotations

import time

import anyio
import pytest

from tenure._async import _shim
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
