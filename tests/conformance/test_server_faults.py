"""Faults of the server behind a store: a restart while leases are held, and every connection
dropped by the server. The invariant: never two live holders. A holder either keeps its lease
through reconnection (servers that keep their data) or sees it lost before anyone else is
granted it (servers that lose their data), and tokens never go backwards.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from conftest import Target, call

import tenure

pytestmark = pytest.mark.anyio


async def contend(store: Any, name: str, ttl: float, seconds: float, holder: Any) -> Any:
    """Try to take `name` from another store for `seconds`; each time, `holder` must not be
    live while another holder is granted. Returns the other lease, or None."""
    lock = store.lock(name, ttl=ttl)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            other = await call(lock.try_acquire())
        except tenure.StoreUnavailable:
            other = None  # the server is still coming back
        if other is not None:
            assert holder.lost, "two live holders: the old holder's lease was not lost"
            assert other.token > holder.token
            return other
        await anyio.sleep(0.02)
    return None


async def test_restart_while_a_lease_is_held(server_target: tuple[Target, Any]) -> None:
    target, server = server_target
    ttl = 2.0
    for attempt in range(3):
        name = f"restart-{attempt}"
        holder = target.connect()
        lease = await call(holder.lock(name, ttl=ttl).try_acquire())
        assert lease is not None
        began = time.monotonic()
        server.restart(graceful=False)  # SIGKILL: the server gets no chance to say goodbye
        down = time.monotonic() - began
        other = await contend(target.connect(), name, ttl, 2.5 * ttl, lease)
        if not target.kind.restart_keeps_data:
            assert other is not None, "the restarted server never granted the lost lease again"
            assert lease.lost
            return
        # A lease outlives a restart only when the server is back before its deadline: the
        # last renewal was up to a third of the ttl before the kill. A server slower than that
        # to come back (a loaded machine: MariaDB's crash recovery took 2 s in CI) may rightly
        # let the lease go, and contend() checked it was lost first; then once more, with a ttl
        # that outlasts such a restart. A restart quicker than that must keep the lease.
        if (other is None and not lease.lost) or down < ttl / 3 or attempt == 2:
            break
        ttl = max(2 * ttl, 4 * down)
    assert other is None, (
        f"the server kept the lease, yet another holder got it (down {down:.2f} s, ttl {ttl} s)")
    assert not lease.lost, f"the holder did not keep its lease ({lease.lost_reason})"
    await call(lease.release())


async def test_dropped_connections_are_reopened(server_target: tuple[Target, Any]) -> None:
    target, server = server_target
    ttl = 1.0
    holder, waiter = target.connect(), target.connect()
    lease = await call(holder.lock("dropped", ttl=ttl).try_acquire())
    assert lease is not None
    assert await call(waiter.lock("dropped", ttl=ttl).try_acquire()) is None

    assert server.drop_connections() > 0
    # Renewals go on through new connections: the lease outlives several ttls.
    assert await contend(waiter, "dropped", ttl, 2.5 * ttl, lease) is None
    assert not lease.lost, f"lease lost after the connections dropped ({lease.lost_reason})"

    await call(lease.release())
    taken = await call(waiter.lock("dropped", ttl=ttl).acquire(timeout=5))
    assert taken.token > lease.token
    await call(taken.release())
