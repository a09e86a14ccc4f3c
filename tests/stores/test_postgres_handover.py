"""The release's side of table mode's hand-over (postgresql://, the default mode): a lock's
release is one round trip whether or not a waiter registered for the lease meanwhile.
tests/stores/test_postgres.py has the rest of the hand-over (who is handed the lease, deadlines,
cancelled waiters)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from handover import acquired_after_release
from servers import PostgresServer

import tenure
import tenure.aio
from tenure._async.stores.postgres import _connection as async_connection
from tenure._sync.stores.postgres import _connection as sync_connection

pytestmark = pytest.mark.anyio


@pytest.fixture
def schema(postgres_server: PostgresServer) -> Iterator[str]:
    """A schema of this test's own, dropped afterwards."""
    name = "h" + uuid.uuid4().hex[:20]
    yield name
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The connection of every exchange with the server (one wait for an answer: one round
    trip) that the stores of this process make, in order: a hook on the one place every
    exchange of a store's connection waits (_Connection.wait, both APIs)."""
    seen: list[object] = []
    sync_wait, async_wait = sync_connection._Connection.wait, async_connection._Connection.wait

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(self)
        return sync_wait(self, *args, **kwargs)

    async def await_wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(self)
        return await async_wait(self, *args, **kwargs)

    monkeypatch.setattr(sync_connection._Connection, "wait", wait)
    monkeypatch.setattr(async_connection._Connection, "wait", await_wait)
    return seen


def registrations(server: PostgresServer, schema: str, name: str) -> int:
    with psycopg.connect(server.url, autocommit=True) as db:
        [(queued,)] = db.execute(
            f"SELECT coalesce(cardinality(q_ids), 0) FROM {schema}.tenure_leases "
            "WHERE name = %s AND slot = 0", (name.encode(),)).fetchall()
    return int(queued)


async def closing(api: str, *stores: Any) -> None:
    for store in stores:
        if api == "async":
            await store.close()
        else:
            store.close()


async def test_a_release_hands_the_lease_to_a_registered_waiter_in_one_round_trip(
        api: str, postgres_server: PostgresServer, schema: str,
        exchanges: list[object]) -> None:
    """The holder took the lease itself (it was not handed over), so its release cannot know
    that a waiter registered meanwhile: the one statement hands the lease over, and the
    waiter (woken only by the hand-over: its backoff is 10 s) holds the next token. With
    nobody waiting, the release is one round trip too."""
    module: Any = tenure.aio if api == "async" else tenure
    url = f"{postgres_server.url}?schema={schema}"
    holder, waiter = module.connect(url), module.connect(url)
    try:
        lock = holder.lock("handed", ttl=30)
        lease = await call(lock.try_acquire())
        assert lease is not None
        mine: list[int] = []

        async def release() -> object:
            before = len(exchanges)
            released = await call(lease.release())
            connections = set(holder.backend._pool.connections)
            mine.append(sum(1 for c in exchanges[before:] if c in connections))
            return released

        taken, _ = await acquired_after_release(
            api, waiter.lock("handed", ttl=30, min_wait=10, max_wait=10),
            lambda: registrations(postgres_server, schema, "handed") == 1,
            "the waiter to register", release, within=30)
        assert mine == [1]
        assert taken.token == lease.token + 1
        await call(taken.release())
        # Nobody waits now: the release frees the lease, also in one round trip.
        again = await call(lock.try_acquire())
        assert again is not None and again.token > taken.token
        before = len(exchanges)
        assert await call(again.release()) is True
        connections = set(holder.backend._pool.connections)
        assert sum(1 for c in exchanges[before:] if c in connections) == 1
    finally:
        await closing(api, holder, waiter)


async def call(result: Any) -> Any:
    """`result`, awaited when the async API gave an awaitable."""
    if hasattr(result, "__await__"):
        return await result
    return result
