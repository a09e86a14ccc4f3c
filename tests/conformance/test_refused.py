"""Errors retrying cannot clear fail at once: every call on a closed store raises
tenure.StoreRefused (not a transient StoreUnavailable that acquire() retries forever)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import Target, call

import tenure

pytestmark = pytest.mark.anyio


async def refused_at_once(what: str, make: Any) -> tenure.StoreRefused:
    """Run `make()` (sync or async) and check it raises StoreRefused within 1 s."""
    started = time.monotonic()
    with pytest.raises(tenure.StoreRefused) as caught:
        await call(make())
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"{what} took {elapsed:.2f} s to fail on a closed store"
    assert not caught.value.transient
    assert "the store was closed" in str(caught.value), str(caught.value)
    assert "connect(" in str(caught.value), "the message names the fix"
    return caught.value


async def test_a_closed_store_refuses_every_call_at_once(target: Target) -> None:
    store = target.connect()
    lock = store.lock("jobs", ttl=target.ttl(5))
    held = await call(lock.try_acquire())
    assert held is not None
    lost = await call(store.lock("other", ttl=target.ttl(5)).try_acquire())
    assert lost is not None
    await call(store.close())
    assert held.released, "close() released the lease it held"

    error = await refused_at_once("try_acquire", lock.try_acquire)
    assert "'jobs'" in str(error) and store.url in str(error)
    await refused_at_once("acquire(timeout=None)", lambda: lock.acquire(timeout=None))
    await refused_at_once("acquire(timeout=30)", lambda: lock.acquire(timeout=30))
    await refused_at_once("semaphore acquire",
                          lambda: store.semaphore("imports", 2, ttl=target.ttl(5)).acquire())
    await refused_at_once("leases", store.leases)
    await refused_at_once("break_lease", lambda: store.break_lease("jobs"))
    assert await call(held.release()) is False, "a released lease stays released"
    assert store.closed


async def test_a_closed_backend_refuses_every_call_at_once(target: Target) -> None:
    """The store object itself, as jobs and the CLI use it (records included)."""
    if not target.kind.shared_between_processes:
        pytest.skip("an in-process store object is shared by the Stores wrapping it and "
                    "outlives their close()")
    store = target.connect()
    backend = store.backend
    lease = await call(store.lock("jobs", ttl=target.ttl(5)).try_acquire())
    assert lease is not None
    await call(store.close())
    await refused_at_once("backend try_acquire",
                          lambda: backend.try_acquire("jobs", "me", target.ttl(5), 1))
    await refused_at_once("backend leases", backend.leases)
    await refused_at_once("backend break_lease", lambda: backend.break_lease("jobs"))
    await refused_at_once("backend release", lambda: backend.release(lease.grant))
    await refused_at_once("read_record", lambda: backend.read_record("jobs"))
    await refused_at_once("write_record", lambda: backend.write_record(lease.grant, "x"))
    await refused_at_once("records", backend.records)
