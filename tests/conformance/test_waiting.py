"""A store's wait that takes the lease (wait_and_acquire, where the store has one) returns a
grant whose `sent_at` is a real moment no later than its answer: the lease's deadline counts
from it, and one counted from math.inf would never end (never renewed, never reported lost)."""

from __future__ import annotations

import math
import time

import anyio
import pytest
from conftest import Target, call

from tenure._async.stores._protocol import waits_and_acquires

pytestmark = pytest.mark.anyio


def _waiting_backend(target: Target) -> tuple[object, object]:
    store = target.connect()
    wait = waits_and_acquires(store.backend)
    if wait is None:
        pytest.skip("the store has no wait_and_acquire: the core waits, then tries")
    return store, wait


def _fresh(sent_at: float, asked_at: float) -> bool:
    return math.isfinite(sent_at) and asked_at <= sent_at <= time.monotonic()


@pytest.mark.parametrize("timeout", [0.05, 0.5])
async def test_a_wait_on_a_free_name_returns_a_grant_sent_at_a_real_moment(
        target: Target, timeout: float) -> None:
    """0.05 s: shorter than Redis's timer slack, the wait ends in a plain try."""
    store, wait = _waiting_backend(target)
    asked_at = time.monotonic()
    grant = await call(wait("free", "me", target.ttl(5), 1, timeout, timeout))  # type: ignore[operator]
    assert grant is not None and _fresh(grant.sent_at, asked_at), grant
    await call(store.backend.release(grant))


async def test_a_wait_woken_by_a_release_returns_a_grant_sent_at_a_real_moment(
        target: Target) -> None:
    store, wait = _waiting_backend(target)
    held = await call(target.connect().lock("busy", ttl=target.ttl(5)).acquire(timeout=5))
    asked_at = time.monotonic()
    if target.is_async:
        async with anyio.create_task_group() as group:
            async def release_soon() -> None:
                await anyio.sleep(0.2)
                await held.release()
            group.start_soon(release_soon)
            grant = await wait("busy", "me", target.ttl(5), 1, 3.0, 3.0)  # type: ignore[operator]
    else:
        import threading

        releaser = threading.Timer(0.2, held.release)
        releaser.start()
        grant = wait("busy", "me", target.ttl(5), 1, 3.0, 3.0)  # type: ignore[operator]
        releaser.join()
    assert grant is not None and _fresh(grant.sent_at, asked_at), grant
    await call(store.backend.release(grant))
