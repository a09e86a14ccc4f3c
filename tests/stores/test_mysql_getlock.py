"""MySQL/MariaDB `?mode=getlock`: what the conformance suite (StoreKind "mysql-getlock") cannot
see from outside: a lease lost at once when its session ends, a break that ends the holder's
session, long names mapped to distinct GET_LOCK names of at most 64 characters, the waiter
queued on the server (a blocking GET_LOCK) and woken by the release, a wait cut short that
leaves no lock behind, and the mode option's error.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pymysql
import pytest
from servers import MariaDBServer
from waiting import call, eventually

import tenure
from tenure._async.stores.mysql import _getlock_sql
from tenure._async.stores.mysql import from_url as async_from_url
from tenure._sync.stores.mysql import from_url as sync_from_url
from tenure._types import LostReason

pytestmark = pytest.mark.anyio


@pytest.fixture
def url(mariadb_server: MariaDBServer) -> Iterator[str]:
    table = "g" + uuid.uuid4().hex[:20]
    yield f"{mariadb_server.url}?table={table}&mode=getlock"
    with admin(mariadb_server) as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS `{table}_counters`")


@contextlib.contextmanager
def admin(server: MariaDBServer) -> Iterator[Any]:
    """A cursor of another client of the server (root, autocommit)."""
    connection = pymysql.connect(host="127.0.0.1", port=server.port, user="root",
                                 database="tenure", autocommit=True)
    with connection, connection.cursor() as cursor:
        yield cursor


def backend(api: str, url: str, **options: Any) -> Any:
    return (sync_from_url if api == "sync" else async_from_url)(url, **options)


def lock_of(url: str, name: str, slot: int = 0) -> str:
    table = url.split("table=")[1].split("&")[0]
    return _getlock_sql.lock_names("tenure", table, name, slot + 1)[slot]


def holder_of(server: MariaDBServer, lock: str) -> int | None:
    with admin(server) as cursor:
        cursor.execute("SELECT IS_USED_LOCK(%s)", (lock,))
        [(found,)] = cursor.fetchall()
    return None if found is None else int(found)


def alive(server: MariaDBServer, connection_id: int) -> bool:
    with admin(server) as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE id = %s",
                       (connection_id,))
        [(count,)] = cursor.fetchall()
    return bool(count)


def user_lock_waits(server: MariaDBServer) -> int:
    """Sessions blocked in GET_LOCK now (MariaDB shows them as 'User lock')."""
    with admin(server) as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.processlist "
                       "WHERE state = 'User lock'")
        [(count,)] = cursor.fetchall()
    return int(count)


async def test_a_lease_is_lost_at_once_when_its_session_ends(
        api: str, url: str, mariadb_server: MariaDBServer) -> None:
    holder, other = backend(api, url), backend(api, url)
    try:
        grant = await call(holder.try_acquire("jobs", "me", 30.0, 1))
        assert grant is not None
        session = holder_of(mariadb_server, lock_of(url, "jobs"))
        assert session is not None
        with admin(mariadb_server) as cursor:
            cursor.execute(f"KILL CONNECTION {session}")
        await eventually(lambda: holder_of(mariadb_server, lock_of(url, "jobs")) is None, 10,
                         "the server to free the killed session's lock")
        # No expiry to wait for: the lock went with the session, and the next renewal says so.
        assert await call(holder.renew([grant], 30.0)) == [LostReason.BROKEN]
        successor = await call(other.try_acquire("jobs", "you", 30.0, 1))
        assert successor is not None and successor.token > grant.token
        assert await call(holder.release(grant)) is False
        assert await call(other.release(successor)) is True
    finally:
        await call(holder.close())
        await call(other.close())


async def test_break_ends_the_holders_session(api: str, url: str,
                                              mariadb_server: MariaDBServer) -> None:
    holder, breaker = backend(api, url), backend(api, url)
    try:
        grant = await call(holder.try_acquire("jobs", "me", 30.0, 1))
        assert grant is not None
        session = holder_of(mariadb_server, lock_of(url, "jobs"))
        assert session is not None
        assert await call(breaker.break_lease("jobs")) == 1
        assert not alive(mariadb_server, session)  # break returns once the session ended
        assert holder_of(mariadb_server, lock_of(url, "jobs")) is None
        assert await call(holder.renew([grant], 30.0)) == [LostReason.BROKEN]
        assert await call(breaker.break_lease("jobs")) == 0
        successor = await call(breaker.try_acquire("jobs", "you", 30.0, 1))
        assert successor is not None and successor.token > grant.token
        assert await call(holder.release(grant)) is False
        # The holder's store replaced the killed connection by itself.
        again = await call(holder.try_acquire("other", "me", 30.0, 1))
        assert again is not None and await call(holder.release(again)) is True
    finally:
        await call(holder.close())
        await call(breaker.close())


async def test_long_names_map_to_distinct_short_lock_names(
        api: str, url: str, mariadb_server: MariaDBServer) -> None:
    first, second = "x" * 1023 + "a", "x" * 1023 + "b"
    locks = {lock_of(url, first), lock_of(url, second), lock_of(url, first, 1)}
    assert len(locks) == 3 and all(len(lock) <= 64 for lock in locks)
    assert all(lock.startswith("tenure:xxxx") for lock in locks)  # readable
    store = backend(api, url)
    try:
        one = await call(store.try_acquire(first, "me", 30.0, 1))
        two = await call(store.try_acquire(second, "me", 30.0, 2))
        three = await call(store.try_acquire(second, "me", 30.0, 2))
        assert one is not None and two is not None and three is not None
        assert (two.slot, three.slot) == (0, 1)
        assert await call(store.try_acquire(first, "me", 30.0, 1)) is None
        assert holder_of(mariadb_server, lock_of(url, first)) is not None
        listed = [(info.name, info.slot) for info in await call(store.leases("xxx"))]
        assert listed == [(first, 0), (second, 0), (second, 1)]
        for grant in (one, two, three):
            assert await call(store.release(grant)) is True
    finally:
        await call(store.close())


async def test_the_waiter_waits_on_the_server_and_the_release_hands_it_the_lock(
        api: str, url: str, mariadb_server: MariaDBServer) -> None:
    holder, waiter = backend(api, url), backend(api, url)
    results: list[Any] = []
    try:
        grant = await call(holder.try_acquire("jobs", "me", 30.0, 1))
        assert grant is not None
        assert await call(waiter.try_acquire("jobs", "you", 30.0, 1)) is None
        before = user_lock_waits(mariadb_server)

        if api == "sync":
            thread = threading.Thread(target=lambda: results.append(
                waiter.wait_and_acquire("jobs", "you", 30.0, 1, 0.5, 30.0)))
            thread.start()
        else:
            async def wait() -> None:
                results.append(await waiter.wait_and_acquire("jobs", "you", 30.0, 1, 0.5, 30.0))

        async with anyio.create_task_group() as tasks:
            if api == "async":
                tasks.start_soon(wait)
            await eventually(lambda: user_lock_waits(mariadb_server) > before, 10,
                             "the waiter to block in GET_LOCK on the server")
            # Queued on the server: the releaser asking again at once does not get it.
            assert await call(holder.release(grant)) is True
            taken = await call(holder.try_acquire("jobs", "me", 30.0, 1))
            assert taken is None
            await eventually(lambda: bool(results), 10, "the waiter to return")
        if api == "sync":
            thread.join(10)
        [handed] = results
        assert handed is not None and handed.holder == "you" and handed.token > grant.token
        assert await call(waiter.renew([handed], 30.0)) == [handed]
        assert await call(waiter.release(handed)) is True
    finally:
        await call(holder.close())
        await call(waiter.close())


async def test_a_cancelled_wait_leaves_no_lock_behind(url: str,
                                                      mariadb_server: MariaDBServer) -> None:
    holder, waiter = async_from_url(url), async_from_url(url)
    try:
        grant = await holder.try_acquire("jobs", "me", 30.0, 1)
        assert grant is not None
        before = user_lock_waits(mariadb_server)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(waiter.wait_and_acquire, "jobs", "you", 30.0, 1, 0.5, 30.0)
                await eventually(lambda: user_lock_waits(mariadb_server) > before, 10,
                                 "the waiter to block in GET_LOCK on the server")
                scope.cancel()
        # Cancelled while queued on the server: the release must not hand the lock to a wait
        # nobody hears any more.
        assert await holder.release(grant) is True
        await eventually(lambda: holder_of(mariadb_server, lock_of(url, "jobs")) is None, 10,
                         "the lock to be free again")
        again = await holder.try_acquire("jobs", "me", 30.0, 1)
        assert again is not None and await holder.release(again) is True
    finally:
        await holder.close()
        await waiter.close()


def test_a_bad_mode_is_refused_naming_the_allowed_ones(mariadb_server: MariaDBServer) -> None:
    with pytest.raises(tenure.InvalidArgument, match="'table', 'getlock'"):
        tenure.connect(f"{mariadb_server.url}?mode=advisory")
