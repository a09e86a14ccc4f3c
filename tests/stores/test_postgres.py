"""PostgreSQL-specific behaviour of the postgresql:// store, on the suite's own server: batched
renewal in one statement, the hand-off by LISTEN/NOTIFY (also after every connection was
dropped), the race of processes creating the tables, the statement timeout, option handling and
secrets in messages. The conformance suite runs everything else (restart and dropped
connections included, in test_server_faults.py)."""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg
import pytest
from handover import acquired_after_release
from refusals import (
    assert_password_hidden,
    assert_retried_until_the_timeout,
    refused_within_a_second,
)
from servers import PostgresServer
from waiting import call, eventually, wait_until

import tenure
import tenure.aio
import tenure.stores
from tenure._async.stores.postgres._table_sql import _ALIVE_CLASS
from tenure._names import name_digest
from tenure.chaos._proxy import Proxy, ProxyHost

pytestmark = pytest.mark.anyio




@pytest.fixture
def connect(api: str, postgres_server: PostgresServer,
            schema: str) -> Iterator[Callable[..., Any]]:
    """`connect(**options)`: a new Store on this test's schema, closed at the end."""
    stores: list[Any] = []

    def make(**options: Any) -> Any:
        module = tenure.aio if api == "async" else tenure
        store = module.connect(f"{postgres_server.url}?schema={schema}", **options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        if api == "sync":
            store.close()
    # async stores are closed by the test (they need the test's event loop)


def query(server: PostgresServer, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(server.url, autocommit=True) as db:
        return db.execute(text, params).fetchall()  # type: ignore[no-any-return]


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, int]]:
    """Every statement psycopg sends from this process, with its number of array items:
    a driver hook on Cursor.execute and AsyncCursor.execute (the store's only way out)."""
    sent: list[tuple[bytes, int]] = []

    def record(query: Any, params: Any) -> None:
        text = query if isinstance(query, bytes) else str(query).encode()
        items = max((len(value) for value in (params or {}).values()
                     if isinstance(value, list)), default=0) if isinstance(params, dict) else 0
        sent.append((text, items))

    sync_execute, async_execute = psycopg.Cursor.execute, psycopg.AsyncCursor.execute

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        record(query, params)
        return sync_execute(self, query, params, **kwargs)

    async def aexecute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        record(query, params)
        return await async_execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(psycopg.AsyncCursor, "execute", aexecute)
    return sent


def renewals(sent: list[tuple[bytes, int]]) -> list[int]:
    """The batch sizes of the renewal statements among `sent`."""
    return [items for text, items in sent if b"unnest(" in text]


async def test_renewal_of_1000_leases_is_one_statement(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer, schema: str,
        statements: list[tuple[bytes, int]]) -> None:
    store = connect()
    # Renewed every 8 s; leases due within 4 s of each other go in one batch, which covers
    # taking 1,000 leases one by one on a loaded machine.
    ttl, every = 60.0, 8.0
    leases = [await call(store.lock(f"batch/{i:04}", ttl=ttl, renew_every=every).try_acquire())
              for i in range(1000)]
    assert all(lease is not None for lease in leases)
    acquired = [row[0] for row in query(
        postgres_server, f"SELECT count(DISTINCT expires_at) FROM {schema}.tenure_leases")]
    assert acquired[0] > 1  # one statement each: as many server timestamps as grants

    def renewed_on_server() -> bool:
        [(distinct,)] = query(postgres_server,
                              f"SELECT count(DISTINCT expires_at) FROM {schema}.tenure_leases")
        return bool(distinct == 1)

    await eventually(lambda: renewals(statements), 2 * every, "the renewal tick")
    # The server agrees: all rows were updated by one statement (one now())...
    await eventually(renewed_on_server, 5, "every lease renewed by one statement")
    # ...and the driver sent one renewal statement for all 1,000 leases.
    assert renewals(statements) == [1000]

    # The backend's own batch call: one statement whatever the size.
    grants = [lease.grant for lease in leases]
    statements.clear()
    results = await call(store.backend.renew(grants, ttl))
    assert results == grants
    assert renewals(statements) == [1000] and len(statements) == 1
    for lease in leases:
        await call(lease.release())
    if api == "async":
        await store.close()


async def test_renew_reports_why_each_lease_was_lost(
        api: str, connect: Callable[..., Any]) -> None:
    store, admin = connect(), connect()
    backend = store.backend  # grants without the core's renewal loop

    async def grant(name: str, ttl: float) -> Any:
        return await call(backend.try_acquire(name, "me", ttl, 1))

    kept, broken = await grant("kept", 5), await grant("broken", 5)
    expired, taken = await grant("expired", 0.2), await grant("taken", 0.2)
    assert await call(admin.break_lease("broken")) == 1
    # "taken" runs out by the server's clock (and "expired", granted before it, too): another
    # store takes it as soon as it does.

    async def taken_over() -> bool:
        return await call(admin.lock("taken", ttl=5).try_acquire()) is not None

    await eventually(taken_over, 5, "a 0.2 s lease to run out by the server's clock")

    grants = [kept, broken, expired, taken]
    results = await call(backend.renew(grants, 5.0))
    assert results == [kept, tenure.LostReason.BROKEN, tenure.LostReason.EXPIRED,
                       tenure.LostReason.TAKEN]
    assert await call(backend.release(kept)) is True
    assert await call(backend.release(expired)) is False
    if api == "async":
        await store.close()
        await admin.close()


async def wait_for_handoff(api: str, holder: Any, waiter: Any, name: str,
                           limit: int = 1) -> tuple[Any, float]:
    """Hold `name` (all `limit` slots) with `holder`, let `waiter` wait with a 10 s backoff,
    release the last slot taken: returns the waiter's lease and the seconds from the release
    to the waiter holding it."""
    held = [await call(holder.semaphore(name, limit, ttl=5).try_acquire())
            for _ in range(limit)]
    assert all(lease is not None for lease in held)
    lease = held[-1]
    lock = waiter.semaphore(name, limit, ttl=5, min_wait=10, max_wait=10)

    def listening() -> bool:
        """The waiter missed, and waits on its event with the listener running."""
        return name_digest(name) in waiter.backend._listener.waiters

    async def release() -> None:
        assert await call(lease.release()) is True

    got, seconds = await acquired_after_release(
        api, lock, listening, "the waiter to fail its first try and listen", release)
    assert got.token > lease.token
    for other in held[:-1]:
        await call(other.release())
    return got, seconds


async def test_waiter_is_woken_by_the_release_notification(
        api: str, connect: Callable[..., Any]) -> None:
    holder, waiter = connect(), connect()
    assert waiter.backend._notify
    for attempt in range(4):  # the first wait opens the listener; later ones reuse it
        lease, latency = await wait_for_handoff(api, holder, waiter, f"handoff-{attempt}",
                                                limit=1 + attempt % 2)
        assert latency < 0.5, f"woken {latency:.3f} s after the release; backoff is 10 s"
        await call(lease.release())
    if api == "async":
        await holder.close()
        await waiter.close()


def notices(server: PostgresServer, channel: str, action: Callable[[], object]) -> list[str]:
    """The payloads NOTIFY sent on `channel` while `action` ran (read for 0.3 s after it)."""
    with psycopg.connect(server.url, autocommit=True) as listener:
        listener.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
        action()
        return [notice.payload for notice in listener.notifies(timeout=0.3)]


def test_release_notifies_only_when_someone_waits(postgres_server: PostgresServer,
                                                  schema: str) -> None:
    """The statements are the same for both APIs; the sync one drives them here."""
    from tenure._names import name_digest

    url = f"{postgres_server.url}?schema={schema}"
    holder, other = tenure.connect(url), tenure.connect(url)
    channel = holder.backend.channel
    assert notices(postgres_server, channel,
                   lambda: holder.lock("quiet").try_acquire().release()) == []

    lease = holder.lock("busy").try_acquire()
    assert other.lock("busy").try_acquire() is None  # marks the name wanted
    assert notices(postgres_server, channel, lease.release) == [name_digest("busy")]
    again = other.lock("busy").try_acquire()  # a grant clears the mark
    assert notices(postgres_server, channel, again.release) == []

    # A semaphore: the mark is on slot 0's row, whichever slot is released.
    first, second = (holder.semaphore("pool", 2).try_acquire() for _ in range(2))
    assert other.semaphore("pool", 2).try_acquire() is None
    assert notices(postgres_server, channel, second.release) == [name_digest("pool")]
    assert notices(postgres_server, channel, first.release) == [name_digest("pool")]
    holder.close()
    other.close()


def slot_zero(server: PostgresServer, schema: str, name: str) -> tuple[str, int, int]:
    """(lease id, token, registrations queued) of `name`'s slot-0 row."""
    [row] = query(server, f"SELECT lease_id, token, coalesce(cardinality(q_ids), 0) "
                          f"FROM {schema}.tenure_leases WHERE name = %s AND slot = 0",
                  name.encode())
    return row[0], row[1], row[2]


def queue(server: PostgresServer, schema: str, name: str) -> list[str]:
    """The lease ids registered for a hand-over of `name`, first first."""
    [(ids,)] = query(server, f"SELECT coalesce(q_ids, '{{}}') FROM {schema}.tenure_leases "
                             f"WHERE name = %s AND slot = 0", name.encode())
    return list(ids)


WAITER = """
import json, sys, tenure
with tenure.connect(sys.argv[1]) as store:
    lock = store.lock(sys.argv[2], ttl=30, min_wait=10, max_wait=10)
    with lock.acquire(timeout=30) as lease:
        print(json.dumps([lease.grant.lease_id, lease.token]), flush=True)
        sys.stdin.readline()  # hold until told
"""


def test_release_hands_the_lease_to_a_waiting_process(postgres_server: PostgresServer,
                                                      schema: str) -> None:
    """The release statement itself grants the lease to the registered waiter (a larger
    token), which then holds it without another acquire; nobody else gets it meanwhile."""
    url = f"{postgres_server.url}?schema={schema}"
    with tenure.connect(url) as store:
        lock = store.lock("handed", ttl=30)
        lease = lock.try_acquire()
        assert lease is not None
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, url, "handed"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: slot_zero(postgres_server, schema, "handed")[2] == 1, 30,
                       "the waiting process to register")
            assert lease.release() is True
            lease_id, token, queued = slot_zero(postgres_server, schema, "handed")
            assert lease_id != "" and token == lease.token + 1 and queued == 0
            assert waiter.stdout is not None and waiter.stdin is not None
            assert json.loads(waiter.stdout.readline()) == [lease_id, token]
            assert lock.try_acquire() is None
            waiter.stdin.write("\n")
            waiter.stdin.close()
            assert waiter.wait(timeout=30) == 0
            again = lock.try_acquire()
            assert again is not None and again.token > token
            again.release()
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()


def test_release_hands_over_only_to_a_live_registration(postgres_server: PostgresServer,
                                                       schema: str) -> None:
    """Three registrations: one whose wait ended, one of a store whose listener session is
    gone (nobody holds its advisory key), one alive. A release with an unusable registration
    first drops it and frees the lease (and notifies); the live one is handed the lease."""
    with tenure.connect(f"{postgres_server.url}?schema={schema}") as store, \
            psycopg.connect(postgres_server.url, autocommit=True) as alive:
        lock = store.lock("skip", ttl=30)
        lease = lock.try_acquire()
        assert lease is not None
        alive.execute("SELECT pg_advisory_lock(%s, %s)", (_ALIVE_CLASS, int.from_bytes(
            bytes.fromhex("cccccccc"), "big", signed=True)))
        query(postgres_server, f"""
            UPDATE {schema}.tenure_leases SET
                q_ids = ARRAY['aaaaaaaaaaaa1', 'bbbbbbbbbbbb1', 'cccccccccccc1'],
                q_holders = ARRAY['a', 'b', 'c']::bytea[], q_ttls = ARRAY[30, 30, 30],
                q_until = ARRAY[now() - interval '1 s', now() + interval '1 min',
                                now() + interval '1 min']
            WHERE name = %s AND slot = 0 RETURNING true""", b"skip")
        channel = store.backend.channel
        for remaining in (2, 1):  # the ended one, then the one whose store is gone
            assert notices(postgres_server, channel, lease.release) == [name_digest("skip")]
            assert slot_zero(postgres_server, schema, "skip") == ("", lease.token, remaining)
            lease = lock.try_acquire()
            assert lease is not None
        assert lease.release() is True
        assert slot_zero(postgres_server, schema, "skip") == ("cccccccccccc1", lease.token + 1, 0)
        [(holder,)] = query(postgres_server, f"SELECT holder FROM {schema}.tenure_leases "
                                             "WHERE name = %s AND slot = 0", b"skip")
        assert bytes(holder) == b"c"


async def test_a_waiter_that_gave_up_is_not_handed_the_lease(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    """It registers once and keeps its place across its 0.05 s waits; its last try after the
    timeout withdraws the registration."""
    holder, waiter = connect(), connect()
    lease = await call(holder.lock("gave-up", ttl=30).try_acquire())
    lock = waiter.lock("gave-up", ttl=30, min_wait=0.05, max_wait=0.05)
    failed: list[BaseException] = []
    registrations: set[str] = set()

    def watch() -> bool:  # the registrations seen in the queue, until the waiter gave up
        registrations.update(queue(postgres_server, schema, "gave-up"))
        return bool(failed)

    if api == "async":
        async def wait() -> None:
            with pytest.raises(tenure.LockTimeout) as raised:
                await lock.acquire(timeout=1.0)
            failed.append(raised.value)

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await eventually(watch, 10, "the waiter to give up")
    else:
        def wait_in_thread() -> None:
            try:
                lock.acquire(timeout=1.0)
            except tenure.LockTimeout as exc:
                failed.append(exc)

        thread = threading.Thread(target=wait_in_thread)
        thread.start()
        await eventually(watch, 10, "the waiter to give up")
        thread.join(timeout=10)
    assert len(registrations) == 1  # registered while it waited, with one place throughout...
    assert slot_zero(postgres_server, schema, "gave-up")[2] == 0  # ...and withdrew
    assert await call(lease.release()) is True
    assert slot_zero(postgres_server, schema, "gave-up") == ("", lease.token, 0)
    if api == "async":
        await holder.close()
        await waiter.close()


async def test_a_cancelled_waiter_does_not_keep_the_lease(postgres_server: PostgresServer,
                                                          schema: str) -> None:
    """Cancelled after it registered: its store withdraws the registration (and frees what a
    release handed it meanwhile) at once, long before the 30 s ttl."""
    url = f"{postgres_server.url}?schema={schema}"
    holder, waiter, other = (tenure.aio.connect(url) for _ in range(3))
    lease = await holder.lock("cancelled", ttl=30).try_acquire()
    assert lease is not None
    lock = waiter.lock("cancelled", ttl=30, min_wait=10, max_wait=10)
    async with anyio.create_task_group() as group:
        async def wait() -> None:
            await lock.acquire(timeout=30)

        group.start_soon(wait)
        await eventually(lambda: slot_zero(postgres_server, schema, "cancelled")[2] == 1, 10,
                         "the waiter to register")
        group.cancel_scope.cancel()
    await eventually(lambda: slot_zero(postgres_server, schema, "cancelled")[2] == 0, 10,
                     "the cancelled waiter's store to withdraw its registration")
    assert await lease.release() is True
    assert slot_zero(postgres_server, schema, "cancelled")[:2] == ("", lease.token)  # free
    again = await other.lock("cancelled", ttl=30).try_acquire()
    assert again is not None and again.token > lease.token
    await again.release()
    for store in (holder, waiter, other):
        await store.close()


async def test_a_handed_over_lease_counts_its_deadline_from_the_registration(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    """The waiter's local deadline counts from when it sent its registration, which was
    before the release, never from when it noticed the hand-over."""
    holder, waiter = connect(), connect()
    lease = await call(holder.lock("deadline", ttl=30).try_acquire())
    lock = waiter.lock("deadline", ttl=30, min_wait=10, max_wait=10)
    got: dict[str, Any] = {}

    async def registered() -> float:
        await eventually(lambda: slot_zero(postgres_server, schema, "deadline")[2] == 1, 10,
                         "the waiter to register")
        released_at = time.monotonic()
        assert await call(lease.release()) is True
        return released_at

    if api == "async":
        async def wait() -> None:
            got["lease"] = await lock.acquire(timeout=30)

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            released_at = await registered()
    else:
        thread = threading.Thread(target=lambda: got.update(lease=lock.acquire(timeout=30)))
        thread.start()
        released_at = await registered()
        thread.join(timeout=30)
    handed = got["lease"]
    assert handed.token == lease.token + 1
    assert handed.deadline - lock.deadline_after < released_at
    await call(handed.release())
    if api == "async":
        await holder.close()
        await waiter.close()


def listeners(server: PostgresServer, schema: str) -> set[int]:
    """The server's sessions that listen on the channel of `schema`'s lease table."""
    return {pid for (pid,) in query(
        server, "SELECT pid FROM pg_stat_activity WHERE query LIKE %s",
        f'LISTEN "tenure.{schema}.%')}


async def test_listener_comes_back_after_connections_drop(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    holder, waiter = connect(), connect()
    lease, latency = await wait_for_handoff(api, holder, waiter, "before")
    await call(lease.release())
    before = listeners(postgres_server, schema)
    assert before

    assert postgres_server.drop_connections() > 0
    # Waits right after the drop poll (at least once a second) while the listener is down...
    lease, latency = await wait_for_handoff(api, holder, waiter, "just after")
    assert latency < 1.5, f"woken {latency:.3f} s after the release; backoff is 10 s"
    await call(lease.release())
    # ...and the next wait listens again on a new connection.
    lease, latency = await wait_for_handoff(api, holder, waiter, "after")
    assert latency < 0.5, f"woken {latency:.3f} s after the release; backoff is 10 s"
    assert listeners(postgres_server, schema) - before
    await call(lease.release())
    if api == "async":
        await holder.close()
        await waiter.close()


def first_uses(url: str, stores: int) -> tuple[list[tuple[str, int]], list[Exception]]:
    """`stores` stores on `url` acquire at the same moment, each on its own connection;
    the (name, token) of each grant and the errors raised."""
    start = threading.Barrier(stores)
    grants: list[tuple[str, int]] = []
    failures: list[Exception] = []

    def first_use(index: int) -> None:
        name = "shared" if index % 2 else f"own-{index}"
        with tenure.connect(url) as store:
            start.wait()
            try:
                lease = store.lock(name).try_acquire()
                if lease is not None:
                    grants.append((name, lease.token))
            except tenure.StoreUnavailable as exc:
                failures.append(exc)

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return grants, failures


def test_stores_creating_the_tables_at_once(postgres_server: PostgresServer) -> None:
    """CREATE TABLE IF NOT EXISTS races on pg_type's unique index; the store retries."""
    for _ in range(3):
        schema = "t" + uuid.uuid4().hex[:20]
        grants, failures = first_uses(f"{postgres_server.url}?schema={schema}", 6)
        with psycopg.connect(postgres_server.url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {schema} CASCADE")
        assert failures == []
        # Three own names, and "shared" at least once (a store frees it when it closes).
        # Tokens are unique per name: two names granted in the same server microsecond
        # may share one (it failed once under make test with the tokens of all names pooled).
        assert len(grants) >= 4
        shared = [token for name, token in grants if name == "shared"]
        assert shared and len(set(shared)) == len(shared), grants


async def test_statements_are_bounded_by_timeout(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    store = connect(timeout=0.5)
    lease = await call(store.lock("stuck", ttl=5).try_acquire())
    await call(lease.release())
    # Someone holds the name's counter row in a long transaction: the acquire waits on it.
    with psycopg.connect(postgres_server.url) as blocker:
        blocker.execute(f"SELECT * FROM {schema}.tenure_leases FOR UPDATE")
        started = time.monotonic()
        with pytest.raises(tenure.StoreUnavailable, match=r"acquire of 'stuck'.*timeout=0\.5"):
            await call(store.lock("stuck").try_acquire())
        assert time.monotonic() - started < 3.0
        blocker.rollback()
    # The statement may still have taken the lease after the rollback (the server cancels it
    # a little after the client gave up); the store's undo frees it in the background, long
    # before the orphan's 30 s ttl (the CI run failed once acquiring at once after the raise).
    async def free_again() -> bool:
        return await call(store.lock("stuck").try_acquire()) is not None

    await eventually(free_again, 5.0, "the interrupted acquire's lease to be undone")
    if api == "async":
        await store.close()


async def test_names_tables_and_schema_are_quoted(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"{postgres_server.url}?schema={schema}&table=Leases_Of_App",
                           notify=False, pool_size=2)
    lease = await call(store.lock("'; DROP TABLE x; --").try_acquire())
    assert lease is not None
    tables = {row[0] for row in query(
        postgres_server, "SELECT tablename FROM pg_tables WHERE schemaname = %s", schema)}
    assert tables == {"Leases_Of_App"}
    assert not store.backend._notify
    await call(lease.release())
    await call(store.close())


async def test_pgbouncer_mode_polls_without_listening(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    holder, waiter = connect(), connect(pgbouncer=True)
    assert not waiter.backend._notify
    lease = await call(holder.lock("bouncer", ttl=5).try_acquire())
    lock = waiter.lock("bouncer", ttl=5, min_wait=0.01, max_wait=0.05)
    with pytest.raises(tenure.LockTimeout):
        await call(lock.acquire(timeout=0.3))
    assert listeners(postgres_server, schema) == set()  # polled; nothing listened
    await call(lease.release())
    assert await call(lock.acquire(timeout=5)) is not None
    if api == "async":
        await holder.close()
        await waiter.close()


def test_passwords_never_appear_in_messages() -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/db?timeout=1"
    store = tenure.connect(url)
    assert "hunter2" not in repr(store) and "hunter2" not in store.url
    with pytest.raises(tenure.StoreUnavailable) as raised:
        store.lock("jobs").try_acquire()
    assert "hunter2" not in str(raised.value) and "app:***@" in str(raised.value)
    store.close()
    for bad, message in [("?schema=1x", "schema='1x'"), ("?bogus=1", "unknown option 'bogus'"),
                         ("?timeout=-1", "timeout='-1'"), ("?notify=maybe", "notify='maybe'"),
                         ("?pgbouncer=true&notify=true", "needs a direct connection")]:
        with pytest.raises(tenure.InvalidArgument, match=message) as invalid:
            tenure.connect(url.partition("?")[0] + bad)
        assert "hunter2" not in str(invalid.value)
    with pytest.raises(tenure.InvalidArgument, match="unknown option"):
        tenure.connect(url, sslmode="require")


# -- advisory mode ---------------------------------------------------------------------------------


def advisory_locks(server: PostgresServer) -> list[tuple[int, int]]:
    """(backend pid, bigint key) of every advisory lock granted on the server."""
    return [(pid, key) for pid, key in query(
        server, "SELECT pid, (classid::bigint << 32 | objid::bigint) FROM pg_locks "
                "WHERE locktype = 'advisory' AND granted AND objsubid = 1")]


def signed(key: int) -> int:
    return key - (1 << 64) if key >= 1 << 63 else key


async def test_advisory_leases_are_session_locks_sharing_the_pools_connections(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    from tenure._async.stores.postgres._advisory_sql import _advisory_keys

    store = connect(mode="advisory", pool_size=1)
    assert store.backend.table == "tenure_advisory"
    sem = store.semaphore("imports", 3, ttl=30)
    leases = [await call(sem.try_acquire()) for _ in range(3)]  # more leases than pool_size
    assert all(lease is not None for lease in leases)
    keys = _advisory_keys(store.backend._namespace, "imports", 3)
    assert len(set(keys)) == 3 and all(-(1 << 63) <= key < 1 << 63 for key in keys)
    held = {signed(key): pid for pid, key in advisory_locks(postgres_server)}
    assert [held.get(key) is not None for key in keys] == [True, True, True]
    assert len({held[key] for key in keys}) == 1, "one session holds the three locks"
    # Another lock table of the same database has keys of its own.
    assert set(_advisory_keys(b"other", "imports", 3)).isdisjoint(keys)

    for lease in leases:
        assert await call(lease.release()) is True
    assert {signed(key) for _, key in advisory_locks(postgres_server)}.isdisjoint(keys)
    again = await call(store.lock("imports", ttl=30).try_acquire())
    assert again is not None and again.token > max(lease.token for lease in leases)
    await call(again.release())
    if api == "async":
        await store.close()


async def test_advisory_lease_is_lost_when_its_connection_ends(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer) -> None:
    holder, other = connect(mode="advisory"), connect(mode="advisory")
    lease = await call(holder.lock("pinned", ttl=3).try_acquire())  # checked every second
    assert lease is not None
    assert await call(other.lock("pinned", ttl=3).try_acquire()) is None

    assert postgres_server.drop_connections() > 0  # the server frees the lock at once
    await eventually(lambda: lease.lost, 3.0, "the holder to notice its session ended")
    assert lease.lost_reason in (tenure.LostReason.EXPIRED, tenure.LostReason.TAKEN)
    successor = await call(other.lock("pinned", ttl=3).acquire(timeout=5))
    assert successor.token > lease.token
    assert await call(lease.release()) is False  # its connection is gone: frees nothing
    assert await call(holder.lock("pinned", ttl=3).try_acquire()) is None
    await call(successor.release())
    if api == "async":
        await holder.close()
        await other.close()


def test_advisory_mode_options() -> None:
    url = "postgresql://app@127.0.0.1:1/db"
    with pytest.raises(tenure.InvalidArgument, match="mode='locks' is not"):
        tenure.connect(url, mode="locks")
    with pytest.raises(tenure.InvalidArgument, match="mode=advisory needs a direct connection"):
        tenure.connect(f"{url}?mode=advisory&pgbouncer=true")
    store = tenure.connect(f"{url}?mode=advisory&table=locks")
    assert store.backend.mode == "advisory" and store.backend.table == "locks"
    assert type(store.backend).__name__ == "PostgresAdvisoryStore"  # picked once, by mode
    assert isinstance(store.backend, tenure.stores.PostgresStore)
    store.close()
    store = tenure.connect(url)
    assert type(store.backend).__name__ == "PostgresTableStore"
    assert isinstance(store.backend, tenure.stores.PostgresStore)
    store.close()


def test_hot_statements_are_prepared_again_when_the_session_drops_them(
        postgres_server: PostgresServer, schema: str) -> None:
    """Acquire and release run through libpq as prepared statements (prepare_threshold=0: at
    once); DISCARD ALL (a pooler's reset) drops them, and the next call prepares them again."""
    url = f"{postgres_server.url}?schema={schema}&pool_size=1&prepare_threshold=0"
    with tenure.connect(url) as store:
        store.lock("prepared").try_acquire().release()
        [session] = store.backend._pool.idle
        assert session.prepared == {b"tenure_acquire_lock", b"tenure_release"}
        session.connection.execute("DISCARD ALL")
        for _ in range(2):
            lease = store.lock("prepared").try_acquire()
            assert lease is not None and lease.release() is True
        assert session.prepared == {b"tenure_acquire_lock", b"tenure_release"}
        assert store.backend._pool.idle == [session]


# -- silent paths, cancelled acquires, fork ----------------------------------------------------


@pytest.fixture
def path(postgres_server: PostgresServer) -> Iterator[tuple[ProxyHost, Proxy, str]]:
    """A loopback forwarder to the test server that can be frozen (blackhole: every byte held
    in both directions, the kernel still acknowledging) or slowed down; and the server's URL
    through it."""
    host = ProxyHost()
    parts = urlsplit(postgres_server.url)
    assert parts.hostname is not None and parts.port is not None
    proxy = host.add(parts.hostname, parts.port)
    user = parts.netloc.rpartition("@")[0]
    yield host, proxy, urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{proxy.port}"))
    host.close()


async def within(api: str, seconds: float, function: Callable[[], Any]) -> Any:
    """`function()`'s result (or the exception it raised), failing the test when it has not
    returned after `seconds`: an unbounded call must fail the test, not hang it."""
    if api == "async":
        try:
            with anyio.fail_after(seconds):
                return await function()
        except TimeoutError:
            pytest.fail(f"the call did not return within {seconds:g} s")
        except Exception as exc:
            return exc
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(function())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)  # left behind if it hangs
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"the call did not return within {seconds:g} s")
    return outcome[0]


@pytest.mark.parametrize("mode", ["table", "advisory"])
async def test_a_silent_path_ends_each_call_within_the_timeout(
        api: str, mode: str, path: tuple[ProxyHost, Proxy, str], schema: str) -> None:
    """The server's statement_timeout and TCP keepalives never fire while the peer's kernel
    still acknowledges: the store's own bound ends the call, closes its connection, and the
    store works again on new connections once the path thaws."""
    host, proxy, url = path
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"{url}?schema={schema}&mode={mode}", timeout=1)
    backend = store.backend
    grant = await call(backend.try_acquire("stalled", "me", 30.0, 1))
    assert grant is not None
    # Two idle connections: the renewal and the release find one each (advisory: the one that
    # holds the lease's lock, given back first, is the release's; the renewal takes the last).
    sessions = [await call(backend._pool.take()) for _ in range(2)]
    for session in sessions:
        await call(backend._pool.give_back(session))

    host.set_mode(proxy, "blackhole")
    for operation, attempt in [("renewal", lambda: backend.renew([grant], 30.0)),
                               ("release", lambda: backend.release(grant))]:
        started = time.monotonic()
        failure = await within(api, 10, attempt)
        assert isinstance(failure, tenure.StoreUnavailable), failure
        assert f"{operation} of 'stalled' got no answer within timeout=1 s" in str(failure)
        assert time.monotonic() - started < 3.0  # a sanity limit: the bound is 1 s
    assert backend._pool.idle == []  # both connections were closed, not given back

    # Thawed, the held bytes go through: the release sent before the bound frees the lease
    # (advisory: the end of its closed connection does); the store works on new connections.
    host.set_mode(proxy, "normal")
    again = await within(api, 10, lambda: store.lock("stalled", ttl=30).acquire(timeout=5))
    assert not isinstance(again, Exception), again
    assert again.token > grant.token
    assert await call(again.release()) is True
    await call(store.close())


async def test_a_cancelled_acquire_frees_what_the_server_granted(
        path: tuple[ProxyHost, Proxy, str], postgres_server: PostgresServer,
        schema: str) -> None:
    """Cancelled while its request is on its way: the server runs it after the cancellation
    (the lease is granted), and the store frees it by its lease id in the background."""
    host, proxy, url = path
    store = tenure.aio.connect(f"{url}?schema={schema}")
    probe = tenure.aio.connect(f"{postgres_server.url}?schema={schema}")
    await (await store.lock("warm-up", ttl=30).acquire(timeout=10)).release()
    host.set_mode(proxy, "latency", latency=0.3)  # each chunk to the server, in order
    cancelled_at = time.monotonic()
    with anyio.move_on_after(0.15):
        await store.lock("ghost", ttl=30).acquire(timeout=10)
        pytest.fail("the acquire was not cancelled")

    def undone() -> bool:
        """A's grant was freed: the row keeps A as its last holder, with no lease id."""
        return query(postgres_server, f"SELECT holder, lease_id FROM {schema}.tenure_leases "
                                      "WHERE name = %s AND slot = 0",
                     b"ghost") == [(store.holder.encode(), "")]

    await eventually(undone, 10, "the cancelled acquire's grant to be freed")
    assert time.monotonic() - cancelled_at < 10  # the ttl is 30 s
    lease = await probe.lock("ghost", ttl=30).try_acquire()
    assert lease is not None
    await lease.release()
    host.set_mode(proxy, "normal")
    await store.close()
    await probe.close()


async def test_a_cancelled_lock_all_frees_every_name_the_server_granted(
        path: tuple[ProxyHost, Proxy, str], postgres_server: PostgresServer,
        schema: str) -> None:
    """As above, for lock_all's one statement (_ACQUIRE_ALL): each name freed by its lease id."""
    host, proxy, url = path
    store = tenure.aio.connect(f"{url}?schema={schema}")
    await (await store.lock_all(["warm-a", "warm-b"], ttl=30, timeout=10)).release()
    host.set_mode(proxy, "latency", latency=0.3)
    with anyio.move_on_after(0.15):
        await store.lock_all(["ghost-a", "ghost-b"], ttl=30, timeout=10)
        pytest.fail("the lock_all was not cancelled")

    def undone() -> bool:
        """Both rows were granted (each has a counter) and freed (no lease id)."""
        return query(postgres_server, f"SELECT name, lease_id FROM {schema}.tenure_leases "
                                      "WHERE name = ANY(%s) AND slot = 0 ORDER BY name",
                     [b"ghost-a", b"ghost-b"]) == [(b"ghost-a", ""), (b"ghost-b", "")]

    await eventually(undone, 10, "the cancelled lock_all's grants to be freed")
    host.set_mode(proxy, "normal")
    await store.close()


async def test_a_lease_set_s_release_hands_each_name_to_its_registered_waiter(
        postgres_server: PostgresServer, schema: str) -> None:
    """The set's release is one statement (_HAND_OVER_ALL): each name goes to the waiter
    registered on it and leaves its queue, as one release does."""
    url = f"{postgres_server.url}?schema={schema}"
    names = ["set-a", "set-b"]
    holder, waiting = tenure.aio.connect(url), tenure.aio.connect(url)
    leases = await holder.lock_all(names, ttl=30, timeout=5)
    tokens = leases.tokens
    got: dict[str, Any] = {}

    async def wait_for(name: str) -> None:
        got[name] = await waiting.lock(name, ttl=30).acquire(timeout=20)

    def registered() -> int:
        return len(query(postgres_server, f"SELECT name FROM {schema}.tenure_leases "
                                          "WHERE name = ANY(%s) AND q_ids IS NOT NULL",
                         [name.encode() for name in names]))

    async with anyio.create_task_group() as tasks:
        for name in names:
            tasks.start_soon(wait_for, name)
        await eventually(lambda: registered() == 2, 10, "both waiters registered")
        assert await leases.release() is True
    # counter + 1, or + 2 when the waiter's try took it as "already ours" (see
    # _ACQUIRE_QUEUED) before the hand-over's notification came in
    assert all(got[name].token in (tokens[name] + 1, tokens[name] + 2) for name in names), (
        got, tokens)
    rows = query(postgres_server, f"SELECT name, lease_id, q_ids FROM {schema}.tenure_leases "
                                  "WHERE name = ANY(%s) AND slot = 0 ORDER BY name",
                 [name.encode() for name in names])
    assert rows == [(name.encode(), got[name].grant.lease_id, None) for name in names]
    for name in names:
        assert await got[name].release() is True
    await holder.close()
    await waiting.close()


def backends(server: PostgresServer, pids: set[int]) -> set[int]:
    """Which of the backends `pids` still run on the server."""
    return {pid for (pid,) in query(server, "SELECT pid FROM pg_stat_activity "
                                            "WHERE pid = ANY(%s)", list(pids))}


def test_a_forked_child_leaves_the_parents_connections_and_leases_alone(
        postgres_server: PostgresServer, schema: str) -> None:
    """The child acquires through the same store object on connections of its own and exits
    (closing the store, running the exit hooks, collecting garbage): nothing is sent on the
    parent's connections, whose sessions stay up, and the parent's lease stays held."""
    url = f"{postgres_server.url}?schema={schema}"
    store, other = tenure.connect(url), tenure.connect(url)
    lease = store.lock("parent", ttl=30).try_acquire()
    assert lease is not None
    store.backend.wait_released("nobody", 0.01)  # starts the listener: a connection of its own
    listener = store.backend._listener.connection
    assert listener is not None
    pooled = {session.pid for session in store.backend._pool.idle}
    parents = pooled | {listener.info.backend_pid}
    assert len(parents) == 2 and backends(postgres_server, parents) == parents

    pid = os.fork()
    if pid == 0:  # the child: a worker forked after startup (gunicorn --preload, multiprocessing)
        status = 1
        try:
            own = store.lock("child", ttl=30).try_acquire()
            assert own is not None and own.release() is True
            assert {session.pid for session in store.backend._pool.idle}.isdisjoint(parents)
            store.close()
            atexit._run_exitfuncs()
            del own, store
            gc.collect()
            status = 0
        finally:
            os._exit(status)
    _, code = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(code) == 0

    assert backends(postgres_server, parents) == parents  # no Terminate on the parent's sockets
    assert other.lock("parent", ttl=30).try_acquire() is None and not lease.lost
    again = store.lock("after-fork", ttl=30).try_acquire()  # on the parent's own connection
    assert again is not None and again.release() is True
    assert {session.pid for session in store.backend._pool.idle} == pooled
    assert lease.release() is True
    store.close()
    other.close()


# -- errors that cannot clear fail at once --------------------------------------------------------

ROLE, ROLE_PASSWORD = "tenure_pw_user", "right-horse-battery-staple"


@pytest.fixture(scope="module")
def password_role(postgres_server: PostgresServer) -> Iterator[str]:
    """A role that must log in with a password over TCP (scram-sha-256): the suite's cluster
    trusts everyone, so a pg_hba.conf line for this role alone goes first, and goes again."""
    hba = postgres_server._data / "pg_hba.conf"  # type: ignore[operator]
    original = hba.read_text()
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {ROLE} CASCADE")
        db.execute(f"DROP ROLE IF EXISTS {ROLE}")
        db.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE_PASSWORD}'")
        db.execute(f"CREATE SCHEMA {ROLE} AUTHORIZATION {ROLE}")
        hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + original)
        db.execute("SELECT pg_reload_conf()")
    yield ROLE
    hba.write_text(original)
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute("SELECT pg_reload_conf()")
        db.execute(f"DROP SCHEMA IF EXISTS {ROLE} CASCADE")
        db.execute(f"DROP ROLE IF EXISTS {ROLE}")


@pytest.mark.parametrize("wrong", ["1", "not-the-password-but-a-long-one"])
async def test_a_wrong_password_is_refused_at_once(postgres_server: PostgresServer,
                                                    password_role: str, api: str,
                                                    wrong: str) -> None:
    """acquire(timeout=None) used to retry a refused password forever, silently. "1" also
    occurs in the host: the message must still show the address whole."""
    module = tenure.aio if api == "async" else tenure
    address = f"127.0.0.1:{postgres_server.port}/postgres"
    works = module.connect(f"postgresql://{password_role}:{ROLE_PASSWORD}@{address}",
                           timeout=2, schema=password_role)
    lease = await call(works.lock("jobs", ttl=5).try_acquire())
    assert lease is not None, "the right password works"
    await call(works.close())
    store = module.connect(f"postgresql://{password_role}:{wrong}@{address}", timeout=2)
    message = await refused_within_a_second(store)
    assert "authentication refused" in message and "password in the URL" in message, message
    assert_password_hidden(message, f"postgresql://{password_role}:***@{address}", wrong)


async def test_a_missing_database_is_refused_at_once_and_named(
        postgres_server: PostgresServer, api: str) -> None:
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"postgresql://postgres@127.0.0.1:{postgres_server.port}/nosuchdb",
                           timeout=2)
    message = await refused_within_a_second(store, timeout=30)
    assert '"nosuchdb" does not exist' in message and "CREATE DATABASE" in message, message


async def test_a_closed_port_is_retried_until_the_timeout(api: str) -> None:
    from servers import free_port

    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", timeout=1)
    await assert_retried_until_the_timeout(store)


async def test_a_missing_privilege_is_refused_at_once(postgres_server: PostgresServer,
                                                      password_role: str, api: str) -> None:
    """The role may not create the tables in schema public (PostgreSQL 15+: no CREATE there)."""
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"postgresql://{password_role}:{ROLE_PASSWORD}@127.0.0.1:"
                           f"{postgres_server.port}/postgres?schema=public&table=t_forbidden",
                           timeout=2)
    message = await refused_within_a_second(store)
    assert "permission denied" in message and "grant this user" in message, message
    assert ROLE_PASSWORD not in message


# -- libpq configuration errors fail at once; the listener's trouble logged once --------------


@pytest.fixture
def ssl_answering_port() -> Iterator[int]:
    """A port whose listener says yes ('S') to libpq's SSLRequest and then stays silent: enough
    for libpq to reach its own certificate checks (which run before any TLS byte is sent), on a
    suite server that has no SSL."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            accepted.append(connection)
            with contextlib.suppress(OSError):
                connection.recv(8)  # SSLRequest: length 8, code 80877103
                connection.sendall(b"S")

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in accepted:
        connection.close()


CONFIGURATION_ERRORS = {
    # query of the URL: words of the message (libpq's, then the fix)
    "sslmode=require": ["server does not support SSL", "sslmode"],
    "sslmode=bogus": ['invalid sslmode value: "bogus"', "libpq parameter"],
    "target_session_attrs=bogus": ['invalid target_session_attrs value', "libpq parameter"],
    "options=-c%20no_such_setting%3D1": ['unrecognized configuration parameter',
                                          "options"],
}


@pytest.mark.parametrize("query", sorted(CONFIGURATION_ERRORS))
async def test_a_libpq_configuration_error_is_refused_at_once(
        postgres_server: PostgresServer, api: str, query: str) -> None:
    """sslmode=require against a server without SSL (or any other setting of the URL that
    libpq or the server refuses) used to be retried as a transient error: acquire() with its
    default timeout=None waited forever."""
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"{postgres_server.url}?{query}", timeout=2)
    message = await refused_within_a_second(store, timeout=5)
    for words in CONFIGURATION_ERRORS[query]:
        assert words in message, message


async def test_a_missing_root_certificate_is_refused_at_once(ssl_answering_port: int,
                                                             api: str) -> None:
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"postgresql://postgres@127.0.0.1:{ssl_answering_port}/postgres"
                           "?sslmode=verify-full&sslrootcert=/nonexistent/root.crt", timeout=2)
    message = await refused_within_a_second(store, timeout=5)
    assert 'root certificate file "/nonexistent/root.crt" does not exist' in message, message
    assert "sslrootcert" in message and "CREATE DATABASE" not in message, message


def listener_lines(records: list[logging.LogRecord], level: int) -> list[str]:
    return [record.getMessage() for record in records
            if record.levelno == level and "listen" in record.getMessage()]


async def test_the_listener_logs_its_trouble_once_per_outage(
        api: str, path: tuple[ProxyHost, Proxy, str], schema: str,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listener used to log an INFO line at each try (every second or so) for as long as
    it could not connect. Now: a WARNING when it starts failing, DEBUG at each try after
    that, an INFO when it listens again; for an outage that begins while it listens, too."""
    from tenure._async.stores.postgres import _listener as async_listener
    from tenure._sync.stores.postgres import _listener as sync_listener

    for module in (async_listener, sync_listener):  # each wait tries the listener again
        monkeypatch.setattr(module, "_LISTEN_RETRY", 0.0)
    caplog.set_level(logging.DEBUG, logger="tenure")
    host, proxy, url = path
    store = (tenure.aio if api == "async" else tenure).connect(f"{url}?schema={schema}",
                                                               timeout=1)
    backend = store.backend

    def listening() -> bool:
        task = backend._listener.task
        return task is not None and task.alive()

    async def tries(count: int) -> None:
        for _ in range(count):
            await call(backend.wait_released("jobs", 0.0))

    async def down_then_healed(debug: int) -> None:
        """Five tries in the outage: one WARNING, `debug` DEBUG lines, none at INFO; healed,
        one try listens again, with one INFO line."""
        await tries(5)
        assert not listening()
        assert len(listener_lines(caplog.records, logging.WARNING)) == 1, caplog.text
        assert len(listener_lines(caplog.records, logging.DEBUG)) == debug, caplog.text
        assert listener_lines(caplog.records, logging.INFO) == [], caplog.text
        host.set_mode(proxy, "normal")
        await tries(1)
        assert listening()
        assert len(listener_lines(caplog.records, logging.INFO)) == 1, caplog.text

    # Outage 1: the listener cannot connect from its first try on.
    host.set_mode(proxy, "reset")
    await down_then_healed(debug=4)

    # Outage 2: it begins while the listener listens (its connection is reset).
    caplog.clear()
    host.set_mode(proxy, "reset")
    await eventually(lambda: not listening(), 10.0, "the listener to stop")
    await down_then_healed(debug=5)
    assert len(listener_lines(caplog.records, logging.WARNING)) == 1, caplog.text
    await call(store.close())


# -- tables of earlier versions (keyed by the name itself) ------------------------------------

# The DDL of tenure before rows were keyed by a digest of the name (long names: 1,024 chars).
OLD_TABLE = """CREATE TABLE {t} (
    name bytea NOT NULL, slot integer NOT NULL, holder bytea NOT NULL, lease_id text NOT NULL,
    token bigint NOT NULL, counter bigint NOT NULL, expires_at timestamptz NOT NULL,
    wanted boolean NOT NULL, record bytea, q_ids text[], q_holders bytea[], q_ttls float8[],
    q_until timestamptz[], PRIMARY KEY (name, slot)) WITH (fillfactor = 50)"""
OLD_ADVISORY_TABLE = """CREATE TABLE {t} (
    name bytea NOT NULL, slot integer NOT NULL, holder bytea NOT NULL, lease_id text NOT NULL,
    token bigint NOT NULL, counter bigint NOT NULL, pid integer NOT NULL, key bigint NOT NULL,
    wanted boolean NOT NULL, record bytea, PRIMARY KEY (name, slot))"""
LONG_NAME = "".join(chr(0x4E00 + (i * 7919) % 0x5200) for i in range(1000))  # 3,000 bytes


def execute(server: PostgresServer, text: str) -> None:
    with psycopg.connect(server.url, autocommit=True) as db:
        db.execute(text)


def primary_key(server: PostgresServer, table: str) -> list[str]:
    return [column for (column,) in query(
        server, "SELECT a.attname FROM pg_index AS i JOIN pg_attribute AS a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = %s::regclass AND i.indisprimary "
                "ORDER BY array_position(i.indkey::int2[], a.attnum)", table)]


async def test_a_table_of_an_earlier_version_is_rekeyed_with_its_live_lease(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    from tenure._types import Grant

    table = f"{schema}.tenure_leases"
    execute(postgres_server, f"CREATE SCHEMA {schema}")
    execute(postgres_server, OLD_TABLE.format(t=table))
    execute(postgres_server, f"INSERT INTO {table} (name, slot, holder, lease_id, token, counter, "
                           "expires_at, wanted) VALUES ('held', 0, 'old', 'old-1', 1000, 1000, "
                           "now() + interval '60 seconds', false)")
    store = connect()
    assert await call(store.lock("held", ttl=30).try_acquire()) is None  # migrates, still held
    assert primary_key(postgres_server, table) == ["digest", "slot"]
    old = Grant("held", 0, "old", "old-1", 1000, "held")
    assert [(info.name, info.holder, info.token) for info in await call(store.leases())] == [
        ("held", "old", 1000)]
    assert await call(store.backend.renew([old], 30)) == [old]
    assert await call(store.backend.release(old)) is True
    lease = await call(store.lock("held", ttl=30).try_acquire())
    assert lease is not None and lease.token == 1001
    long = await call(store.lock(LONG_NAME, ttl=30).try_acquire())
    assert long is not None and [info.name for info in await call(store.leases())] == sorted(
        ["held", LONG_NAME])
    assert await call(long.release()) is True and await call(lease.release()) is True
    if api == "async":
        await store.close()


async def test_an_advisory_table_of_an_earlier_version_is_rekeyed_with_its_live_lease(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    from tenure._async.stores.postgres._advisory_sql import _advisory_keys
    from tenure._types import Grant

    table = f"{schema}.tenure_advisory"
    execute(postgres_server, f"CREATE SCHEMA {schema}")
    execute(postgres_server, OLD_ADVISORY_TABLE.format(t=table))
    store = connect(mode="advisory")
    [key] = _advisory_keys(store.backend._namespace, "held", 1)
    with psycopg.connect(postgres_server.url, autocommit=True) as session:  # the old holder
        session.execute("SELECT pg_advisory_lock(%s)", (key,))
        session.execute(
            f"INSERT INTO {table} (name, slot, holder, lease_id, token, counter, pid, key, "
            "wanted) VALUES ('held', -1, '', '', 0, 1000, 0, 0, false), ('held', 0, 'old', "
            "'old-1', 1000, 0, pg_backend_pid(), %s, false)", (key,))
        assert await call(store.lock("held", ttl=30).try_acquire()) is None  # still held
        assert primary_key(postgres_server, table) == ["digest", "slot"]
        old = Grant("held", 0, "old", "old-1", 1000, "held")
        assert await call(store.backend.renew([old], 30)) == [old]
        assert [(info.name, info.token) for info in await call(store.leases())] == [
            ("held", 1000)]
    # Its session ended: the lease is lost, and the name's tokens go on from its counter.
    async def lost() -> bool:
        return await call(store.backend.renew([old], 30)) == [tenure.LostReason.EXPIRED]

    await eventually(lost, 5.0, "the old holder's session to end")
    lease = await call(store.lock("held", ttl=30).acquire(timeout=5))
    assert lease.token == 1001
    long = await call(store.lock(LONG_NAME, ttl=30).try_acquire())
    assert long is not None and await call(long.release()) is True
    assert await call(lease.release()) is True
    if api == "async":
        await store.close()


def test_stores_rekeying_an_earlier_table_at_once(postgres_server: PostgresServer) -> None:
    """Six stores meet a table of an earlier version at the same moment: one migrates it, the
    others wait for it and go on; none fails."""
    for _ in range(3):
        schema = "t" + uuid.uuid4().hex[:20]
        execute(postgres_server, f"CREATE SCHEMA {schema}")
        execute(postgres_server, OLD_TABLE.format(t=f"{schema}.tenure_leases"))
        grants, failures = first_uses(f"{postgres_server.url}?schema={schema}", 6)
        key = primary_key(postgres_server, f"{schema}.tenure_leases")
        execute(postgres_server, f"DROP SCHEMA {schema} CASCADE")
        assert failures == []
        assert key == ["digest", "slot"]
        assert len(grants) >= 4


def test_a_program_limit_error_is_permanent(postgres_server: PostgresServer) -> None:
    """SQLSTATE class 54 (an index row, a value or a statement too big) is refused at once:
    retrying the same request cannot succeed."""
    with psycopg.connect(postgres_server.url, autocommit=True) as db, pytest.raises(
            psycopg.errors.ProgramLimitExceeded) as caught:
        db.execute("SELECT repeat('xx', 600000000)")  # past 1 GB: "requested length too large"
    with tenure.connect(postgres_server.url) as store:
        error = store.backend._failure("acquire", "jobs", caught.value)
    assert isinstance(error, tenure.StoreRefused) and error.transient is False
    assert "retrying will not help" in str(error)


SHAPE_CHANGES = {
    "keyed by name": "DROP CONSTRAINT {table}_pkey, ADD PRIMARY KEY (name, slot)",  # 42P10
    "a column gone": "DROP COLUMN wanted",  # 42703, also after trying to create or re-key
}


@pytest.mark.parametrize("change", sorted(SHAPE_CHANGES))
@pytest.mark.parametrize("mode", ["table", "advisory"])
async def test_a_table_of_another_shape_is_refused_at_once(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer, schema: str,
        mode: str, change: str) -> None:
    """A table keyed otherwise than this version's statements expect (by (name, slot), as
    another version of tenure could leave it) fails each acquire with 42P10 ("no unique or
    exclusion constraint matching the ON CONFLICT specification"), one without a column they
    use with 42703. Both used to be retried as transient errors until the timeout (for ever
    with timeout=None): now refused at once."""
    store = connect(mode=mode)
    lease = await call(store.lock("made", ttl=30).try_acquire())  # creates the table
    assert lease is not None and await call(lease.release()) is True
    table = f"{schema}.{store.backend.table}"
    execute(postgres_server, f"ALTER TABLE {table} "
                             + SHAPE_CHANGES[change].format(table=store.backend.table))
    message = await refused_within_a_second(store, timeout=5)
    assert f'table "{schema}"."{store.backend.table}"' in message, message
    assert "another version of tenure" in message and "upgrade" in message, message


# -- advisory mode: many leases on few sessions -------------------------------------------------


def advisory_store(api: str, server: PostgresServer, schema: str, **options: Any) -> Any:
    """An advisory store whose connections carry an application_name of their own."""
    module = tenure.aio if api == "async" else tenure
    name = "t" + uuid.uuid4().hex[:12]
    store = module.connect(f"{server.url}?schema={schema}&mode=advisory&application_name={name}",
                           **options)
    store.application_name = name
    return store


def backends_of(server: PostgresServer, application_name: str) -> set[int]:
    return {pid for (pid,) in query(server, "SELECT pid FROM pg_stat_activity "
                                            "WHERE application_name = %s", application_name)}


async def test_10000_advisory_leases_use_at_most_pool_size_connections(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    # retain=inf: no sweep of idle names takes a connection of its own meanwhile
    store = advisory_store(api, postgres_server, schema, pool_size=3, notify=False,
                           retain="inf")
    backend = store.backend
    grants = []
    for i in range(10_000):
        grants.append(await call(backend.try_acquire(f"many/{i:05}", "me", 60.0, 1)))
    assert all(grant is not None for grant in grants)
    pids = backends_of(postgres_server, store.application_name)
    assert 1 <= len(pids) <= 3
    locks = [pid for pid, _ in advisory_locks(postgres_server) if pid in pids]
    assert len(locks) == 10_000
    assert await call(backend.renew(grants, 60.0)) == grants  # one statement, all alive
    assert len(await call(store.leases("many/"))) == 10_000
    other = advisory_store(api, postgres_server, schema)
    assert await call(other.backend.try_acquire("many/01234", "other", 60.0, 1)) is None
    for grant in grants:
        assert await call(backend.release(grant)) is True
    assert [pid for pid, _ in advisory_locks(postgres_server) if pid in pids] == []
    assert backends_of(postgres_server, store.application_name) <= pids
    await call(other.close())
    await call(store.close())


async def test_a_lost_advisory_session_loses_only_its_own_leases(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    store = advisory_store(api, postgres_server, schema, pool_size=2)
    backend = store.backend
    first = await call(backend.try_acquire("first", "me", 30.0, 1))
    busy = await call(backend._pool.take())  # the first lease's session: the next acquire opens one
    second = await call(backend.try_acquire("second", "me", 30.0, 1))
    await call(backend._pool.give_back(busy))
    third = await call(backend.try_acquire("third", "me", 30.0, 1))
    sessions = {grant.name: backend._holding[grant.lease_id].pid
                for grant in (first, second, third)}
    assert sessions["first"] != sessions["second"]
    victim = sessions["first"]
    query(postgres_server, "SELECT pg_terminate_backend(%s, 5000)", victim)
    lost = {name for name, pid in sessions.items() if pid == victim}
    expected = [tenure.LostReason.EXPIRED if grant.name in lost else grant
                for grant in (first, second, third)]
    assert await call(backend.renew([first, second, third], 30.0)) == expected
    other = advisory_store(api, postgres_server, schema)
    for grant in (first, second, third):
        taken = await call(other.backend.try_acquire(grant.name, "other", 30.0, 1))
        assert (taken is not None) is (grant.name in lost), grant.name
        assert await call(backend.release(grant)) is (grant.name not in lost)
        if taken is not None:
            assert taken.token > grant.token
    await call(other.close())
    await call(store.close())


async def test_an_advisory_break_spares_the_other_leases_of_the_session(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    store = advisory_store(api, postgres_server, schema, pool_size=1)
    admin = advisory_store(api, postgres_server, schema)
    broken = await call(store.lock("broken", ttl=30).try_acquire())
    spared = await call(store.lock("spared", ttl=30).try_acquire())
    [pid] = backends_of(postgres_server, store.application_name)
    assert await call(admin.break_lease("broken")) == 1
    assert await call(store.backend.renew([broken.grant, spared.grant], 30.0)) == [
        tenure.LostReason.BROKEN, spared.grant]
    successor = await call(admin.lock("broken", ttl=30).try_acquire())  # at once: a new key
    assert successor is not None and successor.token > broken.token
    assert await call(admin.lock("spared", ttl=30).try_acquire()) is None
    assert backends_of(postgres_server, store.application_name) == {pid}  # not ended
    assert len([p for p, _ in advisory_locks(postgres_server) if p == pid]) == 2
    assert await call(broken.release()) is False  # and its old key is unlocked
    assert len([p for p, _ in advisory_locks(postgres_server) if p == pid]) == 1
    assert await call(spared.release()) is True
    assert await call(successor.release()) is True
    if api == "async":
        await store.close()
        await admin.close()


async def test_advisory_exhaustion_names_the_cause(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    role = "t" + uuid.uuid4().hex[:12]
    execute(postgres_server, f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")
    execute(postgres_server, f"GRANT CREATE ON DATABASE postgres TO {role}")
    url = urlunsplit(urlsplit(postgres_server.url)._replace(
        netloc=f"{role}@{urlsplit(postgres_server.url).netloc.split('@')[1]}"))
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"{url}?schema={schema}&mode=advisory", pool_size=5, timeout=1,
                           notify=False)
    try:
        first = await call(store.lock("first", ttl=30).try_acquire())
        busy = await call(store.backend._pool.take())
        second = await call(store.lock("second", ttl=30).try_acquire())  # the role's 2nd
        assert first is not None and second is not None
        also_busy = await call(store.backend._pool.take())
        with pytest.raises(tenure.StoreUnavailable) as caught:
            await call(store.backend._execute("listing", "", b"SELECT 1", {}))  # a 3rd: refused
        await call(store.backend._pool.give_back(busy))
        await call(store.backend._pool.give_back(also_busy))
        message = str(caught.value)
        assert caught.value.transient is True
        assert "too many connections" in message and "pool_size=5" in message
        assert "holding 2 advisory lease(s)" in message, message
        assert "check that PostgreSQL is running" not in message
        await call(first.release())
        await call(second.release())
    finally:
        await call(store.close())
        query(postgres_server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE usename = %s", role)
        execute(postgres_server, f"DROP OWNED BY {role}")
        execute(postgres_server, f"DROP ROLE {role}")


async def test_a_cancelled_advisory_acquire_spares_the_sessions_other_leases(
        postgres_server: PostgresServer, schema: str) -> None:
    """A cancellation mid-statement must not end the session (its other leases would go)
    nor leave a lock behind on it."""
    import asyncio

    store = advisory_store("async", postgres_server, schema, pool_size=1)
    probe = advisory_store("async", postgres_server, schema)
    kept = await store.lock("kept", ttl=30).try_acquire()
    assert kept is not None
    [pid] = backends_of(postgres_server, store.application_name)
    for attempt in range(20):
        name = f"cancelled-{attempt}"
        task = asyncio.ensure_future(store.lock(name, ttl=30).acquire(timeout=10))
        for _ in range(attempt % 6):
            await asyncio.sleep(0)
        await asyncio.sleep(0.0002 * (attempt % 4))
        task.cancel()
        try:
            await (await task).release()
            continue
        except asyncio.CancelledError:
            pass
        lease = await probe.lock(name, ttl=30).try_acquire()  # free at once: nothing left
        assert lease is not None, name
        await lease.release()
    assert await store.backend.renew([kept.grant], 30.0) == [kept.grant]
    assert backends_of(postgres_server, store.application_name) == {pid}
    assert await kept.release() is True
    await store.close()
    await probe.close()


# -- advisory mode: sessions shared by many leases -------------------------------------------------


async def test_an_advisory_acquire_never_locks_its_own_sessions_key_twice(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    """On the session that holds the name, a second acquire must skip the key, not take it
    again (a session lock counts re-entries: one release would leave it held). Past psycopg's
    prepare threshold (5 runs) the statement runs as a generic plan, whose planner once tried
    the lock before the skip."""
    store = advisory_store(api, postgres_server, schema, pool_size=1, notify=False)
    other = advisory_store(api, postgres_server, schema)
    for attempt in range(15):
        lease = await call(store.lock("again", ttl=30).try_acquire())
        assert lease is not None, attempt
        assert await call(store.lock("again", ttl=30).try_acquire()) is None, attempt
        assert await call(lease.release()) is True
        taken = await call(other.lock("again", ttl=30).try_acquire())
        assert taken is not None, f"still locked after release {attempt}"
        assert await call(taken.release()) is True
    assert await call(store.leases()) == []
    await call(other.close())
    await call(store.close())


async def test_a_cancelled_advisory_release_leaves_its_session_to_the_pool(
        postgres_server: PostgresServer, schema: str) -> None:
    """A release waiting for its lease's session (busy with another call) is cancelled: its
    claim must not keep the session, which then serves nobody and is never closed."""
    store = advisory_store("async", postgres_server, schema, pool_size=1, timeout=2)
    other = advisory_store("async", postgres_server, schema)
    first = await store.lock("first", ttl=30).acquire()
    second = await store.lock("second", ttl=30).acquire()
    session = await store.backend._pool.take()  # another call uses the only session
    with anyio.move_on_after(0.2):
        await first.release()
        pytest.fail("the release did not wait for the busy session")
    await store.backend._pool.give_back(session)
    assert store.backend._pool.idle == [session] and session.handed_to is None
    assert await second.release() is True
    taken = await other.lock("second", ttl=30).try_acquire()
    assert taken is not None and await taken.release() is True
    assert await first.release() is True  # the cancelled release can be done again
    await store.close()
    assert session.connection.closed
    await other.close()


def cancel_the_lock_waiter(server: PostgresServer, pids: set[int]) -> None:
    """Cancel the statement of one of the backends `pids` once it waits for a row lock."""
    def waiting() -> list[tuple[Any, ...]]:
        return query(server, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                             "AND pid = ANY(%s)", list(pids))

    wait_until(waiting, 10, "the release to wait for the locked row")
    query(server, "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s)",
          list(pids))


async def test_an_advisory_release_cancelled_on_the_server_still_frees_the_lease(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    """The release statement fails on a session that lives on (here cancelled while it waits
    for its row, which another transaction locked): whether its unlock ran is unknown, so the
    store unlocks for sure on that session; the release says it freed the lease, the lease
    is free for everyone, and the session keeps its other leases."""
    store = advisory_store(api, postgres_server, schema, pool_size=1)
    other = advisory_store(api, postgres_server, schema)
    lease = await call(store.lock("released", ttl=30).acquire())
    kept = await call(store.lock("kept", ttl=30).acquire())
    pids = backends_of(postgres_server, store.application_name)
    with psycopg.connect(postgres_server.url) as blocker:  # a transaction: the row stays locked
        blocker.execute(f"SELECT FROM {schema}.tenure_advisory WHERE name = 'released' "
                        "AND slot = 0 FOR UPDATE")
        canceller = threading.Thread(target=cancel_the_lock_waiter,
                                     args=(postgres_server, pids))
        canceller.start()
        released = await call(lease.release())
        canceller.join()
    assert released is True
    assert list(store.backend._holding) == [kept.grant.lease_id]
    taken = await call(other.lock("released", ttl=30).try_acquire())
    assert taken is not None and taken.token > lease.token
    assert [info.name for info in await call(other.leases())] == ["kept", "released"]
    assert await call(store.backend.renew([kept.grant], 30.0)) == [kept.grant]
    assert backends_of(postgres_server, store.application_name) == pids
    assert await call(taken.release()) is True
    again = await call(store.lock("released", ttl=30).try_acquire())
    assert again is not None and await call(again.release()) is True
    assert await call(kept.release()) is True
    await call(other.close())
    await call(store.close())


async def test_a_statement_past_the_timeout_is_cancelled_and_spares_the_sessions_leases(
        api: str, postgres_server: PostgresServer, schema: str) -> None:
    """An acquire of an unrelated name waits past `timeout` for a row another transaction
    locked (the server's own statement_timeout set longer, so that the client's bound ends
    it): the store cancels the statement and keeps the session, whose other leases live on
    (closing it would free them on the server, unknown to their holders until their next
    renewal), and gives back the lock the cancelled statement took."""
    module = tenure.aio if api == "async" else tenure
    application_name = "t" + uuid.uuid4().hex[:12]
    store = module.connect(
        f"{postgres_server.url}?schema={schema}&mode=advisory&application_name="
        f"{application_name}&options=-cstatement_timeout%3D20000", pool_size=1, timeout=1)
    other = advisory_store(api, postgres_server, schema)
    held = [await call(store.lock(f"held-{i}", ttl=30).acquire()) for i in range(5)]
    first = await call(store.lock("slow", ttl=30).acquire())
    assert await call(first.release()) is True  # the name's counter row exists
    pids = backends_of(postgres_server, application_name)
    with psycopg.connect(postgres_server.url) as blocker:
        blocker.execute(f"SELECT FROM {schema}.tenure_advisory WHERE name = 'slow' "
                        "AND slot = -1 FOR UPDATE")
        failure = await within(api, 10, lambda: store.lock("slow", ttl=30).try_acquire())
    assert isinstance(failure, tenure.StoreUnavailable), failure
    assert "got no answer within timeout=1 s, so it was cancelled" in str(failure), failure
    assert not any(lease.lost for lease in held)
    assert backends_of(postgres_server, application_name) == pids
    grants = [lease.grant for lease in held]
    assert await call(store.backend.renew(grants, 30.0)) == grants
    for lease in held:
        assert await call(other.lock(lease.name, ttl=30).try_acquire()) is None, lease.name
    slow = await call(other.lock("slow", ttl=30).try_acquire())  # no lock left behind
    assert slow is not None and await call(slow.release()) is True
    for lease in held:
        assert await call(lease.release()) is True
    await call(other.close())
    await call(store.close())


async def test_holders_learn_at_once_that_a_closed_advisory_session_lost_their_leases(
        api: str, path: tuple[ProxyHost, Proxy, str], postgres_server: PostgresServer,
        schema: str) -> None:
    """A statement on the path gone silent cannot be cancelled (the cancel request goes the
    same way): its session is closed, the last resort, and the holders of the leases it held
    are told before that, not at their next renewal (ttl/3 later, when another process may
    hold the name already)."""
    host, proxy, url = path
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"{url}?schema={schema}&mode=advisory", pool_size=1, timeout=1)
    other = advisory_store(api, postgres_server, schema)
    told: list[str] = []
    held = [await call(store.lock(f"held-{i}", ttl=30, on_lost=lambda lease: told.append(
        lease.name)).acquire()) for i in range(3)]
    host.set_mode(proxy, "blackhole")
    failure = await within(api, 10, lambda: store.lock("unrelated", ttl=30).try_acquire())
    assert isinstance(failure, tenure.StoreUnavailable), failure
    assert "so its connection was closed" in str(failure), failure
    assert [lease.lost_reason for lease in held] == [tenure.LostReason.EXPIRED] * 3
    # Still held on the server while the path is frozen: the holders knew first.
    assert await call(other.lock("held-0", ttl=30).try_acquire()) is None
    await eventually(lambda: sorted(told) == ["held-0", "held-1", "held-2"], 5, "on_lost")
    host.set_mode(proxy, "normal")

    async def taken() -> bool:
        lease = await call(other.lock("held-0", ttl=30).try_acquire())
        return lease is not None and await call(lease.release()) is True

    await eventually(taken, 10, "the closed session's locks to be freed")
    await call(other.close())
    await call(store.close())


@pytest.mark.parametrize("mode", ["table", "advisory"])
@pytest.mark.parametrize("key", ["PRIMARY KEY (name, slot)", "UNIQUE (name, slot)"])
async def test_a_table_that_is_not_tenures_is_refused_untouched(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer, schema: str,
        mode: str, key: str) -> None:
    """table= naming someone else's table with a `name bytea` column: the re-keying of an
    earlier version's table (which drops the primary key) must not touch it; nor fail
    obscurely when it has no primary key at all."""
    execute(postgres_server, f"CREATE SCHEMA {schema}")
    execute(postgres_server, f"CREATE TABLE {schema}.theirs (name bytea NOT NULL, slot integer "
                             f"NOT NULL, payload text, {key})")
    execute(postgres_server, f"INSERT INTO {schema}.theirs VALUES ('a', 0, 'kept')")
    store = connect(mode=mode, table="theirs", timeout=30)
    started = time.monotonic()
    with pytest.raises(tenure.StoreRefused) as caught:
        await call(store.lock("jobs", ttl=30).try_acquire())
    assert time.monotonic() - started < 5  # at once, not retried until the timeout
    assert f'"{schema}"."theirs" is not a lease table of tenure' in str(caught.value)
    assert "table=" in str(caught.value)
    expected = ["name", "slot"] if key.startswith("PRIMARY") else []
    assert primary_key(postgres_server, f"{schema}.theirs") == expected
    assert query(postgres_server, f"SELECT * FROM {schema}.theirs") == [(b"a", 0, "kept")]
    if api == "async":
        await store.close()


def test_a_libpq_option_with_a_space_reaches_the_server(postgres_server: PostgresServer,
                                                         schema: str) -> None:
    """`options=-c%20statement_timeout%3D...`: the space stays a space for libpq (it was sent
    as '+', and the server refused "+statement_timeout")."""
    store = tenure.connect(f"{postgres_server.url}?schema={schema}"
                           "&options=-c%20statement_timeout%3D20001")
    try:
        lease = store.lock("spaced").try_acquire()
        assert lease is not None
        lease.release()
    finally:
        store.close()


async def test_wait_released_is_a_plain_wait_that_takes_nothing(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    """The job runner's wait_released then try_acquire: the wait registers for no hand-over,
    so the release frees the lease (nothing is taken for a later try_acquire to pick up), and
    the try after it takes the lease with a new token."""
    holder, waiter = connect(), connect()
    lease = await call(holder.lock("plain", ttl=30).try_acquire())
    backend = waiter.backend
    assert await call(backend.try_acquire("plain", "w", 30.0, 1)) is None
    if api == "async":
        async with anyio.create_task_group() as group:
            group.start_soon(backend.wait_released, "plain", 10.0, 10.0)
            await eventually(lambda: name_digest("plain") in backend._listener.waiters, 10,
                             "the waiter to listen")
            assert slot_zero(postgres_server, schema, "plain")[2] == 0  # not registered
            assert await lease.release() is True
    else:
        thread = threading.Thread(target=backend.wait_released, args=("plain", 10.0, 10.0))
        thread.start()
        await eventually(lambda: name_digest("plain") in backend._listener.waiters, 10,
                         "the waiter to listen")
        assert slot_zero(postgres_server, schema, "plain")[2] == 0  # not registered
        assert lease.release() is True
        thread.join(timeout=10)
    assert slot_zero(postgres_server, schema, "plain")[:2] == ("", lease.token)  # freed
    grant = await call(backend.try_acquire("plain", "w", 30.0, 1))
    assert grant is not None and grant.token == lease.token + 1
    assert await call(backend.release(grant)) is True
    if api == "async":
        await holder.close()
        await waiter.close()
