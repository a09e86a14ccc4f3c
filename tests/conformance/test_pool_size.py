"""`pool_size` means one thing on every store that takes it: the most connections the store
opens for its lease calls (waits have their own). Calls beyond that wait for a connection
instead of opening more. Seen from the server: with the store's tables locked by another
client, its blocked statements are at most `pool_size`.

Runs where the store takes `pool_size` and the suite can see the store's statements on its
server (SERVER_VIEWS, keyed by the store's module); skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
import pytest
from conftest import Target, call, eventually, own_space

pytestmark = pytest.mark.anyio


class ServerView(Protocol):
    """Another client of the store's server: locks the store's tables, and counts the
    store's statements blocked by that lock."""

    def locked(self, target: Target) -> contextlib.AbstractContextManager[None]: ...

    def blocked(self, target: Target) -> int: ...


class PostgresView:
    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(os.environ["TENURE_TEST_POSTGRES_URL"], autocommit=True)

    @contextlib.contextmanager
    def locked(self, target: Target) -> Iterator[None]:
        schema = own_space(target.tmp)
        with self._connect() as db:
            tables = [f'"{schema}"."{name}"' for (name,) in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
            assert tables, "the store made no table"
            with db.transaction():
                db.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
                yield

    def blocked(self, target: Target) -> int:
        with self._connect() as db:
            [(count,)] = db.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND pid <> pg_backend_pid() AND query LIKE %s",
                (f"%{own_space(target.tmp)}%",)).fetchall()
            return int(count)


class MySQLView:
    def _connect(self) -> Any:
        import pymysql

        address = urlsplit(os.environ["TENURE_TEST_MYSQL_URL"])
        return pymysql.connect(host=address.hostname, port=address.port, user="root",
                               database="tenure", autocommit=True)

    @contextlib.contextmanager
    def locked(self, target: Target) -> Iterator[None]:
        table = own_space(target.tmp)
        db = self._connect()
        with db, db.cursor() as cursor:
            cursor.execute("SELECT table_name FROM information_schema.tables "
                           "WHERE table_schema = 'tenure' AND table_name LIKE %s", (f"{table}%",))
            tables = [f"`{name}` WRITE" for (name,) in cursor.fetchall()]
            assert tables, "the store made no table"
            cursor.execute(f"LOCK TABLES {', '.join(tables)}")
            try:
                yield
            finally:
                cursor.execute("UNLOCK TABLES")

    def blocked(self, target: Target) -> int:
        db = self._connect()
        with db, db.cursor() as cursor:
            # Only the store's connections use database `tenure` with a statement waiting for
            # the lock: the other tests' tables have names of their own, and are not locked.
            cursor.execute("SELECT COUNT(*) FROM information_schema.processlist "
                           "WHERE state LIKE %s AND id <> CONNECTION_ID()",
                           ("%metadata lock%",))
            [(count,)] = cursor.fetchall()
            return int(count)


SERVER_VIEWS: dict[str, ServerView] = {"postgres": PostgresView(), "mysql": MySQLView()}


def view_of(target: Target) -> ServerView:
    view = SERVER_VIEWS.get(target.kind.module)
    if view is None:
        pytest.skip("the store takes no pool_size, or its server's sessions are not visible")
    return view


async def test_calls_beyond_pool_size_wait_for_a_connection_instead_of_opening_more(
        target: Target) -> None:
    view = view_of(target)
    store = target.connect(pool_size=2, timeout=10)
    ttl = target.ttl(30)
    warm = await call(store.lock("pool-warm-up", ttl=ttl).try_acquire())  # the tables exist
    assert warm is not None
    await call(warm.release())
    names = [f"pool-{index}" for index in range(4)]
    leases: dict[str, Any] = {}
    errors: list[BaseException] = []

    def take_sync(name: str) -> None:
        try:
            leases[name] = store.lock(name, ttl=ttl).try_acquire()
        except BaseException as exc:  # reported below
            errors.append(exc)

    async def take(name: str) -> None:
        try:
            leases[name] = await store.lock(name, ttl=ttl).try_acquire()
        except BaseException as exc:  # reported below
            errors.append(exc)

    peak = 0
    threads = [threading.Thread(target=take_sync, args=(name,)) for name in names]
    async with anyio.create_task_group() as calls:
        with view.locked(target):
            for index, name in enumerate(names):
                if target.is_async:
                    calls.start_soon(take, name)
                else:
                    threads[index].start()
            await eventually(lambda: view.blocked(target) >= 2, 10,
                             "two calls blocked by the lock on the server")
            # The two other calls wait in the store for a connection: they never reach the
            # server while the first two hold both of the pool's.
            watch_until = time.monotonic() + 1.0
            while time.monotonic() < watch_until and peak <= 2:
                peak = max(peak, view.blocked(target))
                await anyio.sleep(0.02)
        # The lock gone, the calls that waited for a connection get one.
        await eventually(lambda: len(leases) + len(errors) == len(names), 20,
                         "every call to end")
    for thread in threads:
        if thread.ident is not None:  # started
            thread.join(timeout=20)
    assert peak == 2, f"{peak} calls reached the server at once with pool_size=2"
    assert not errors, errors
    assert all(leases[name] is not None for name in names), leases
    for lease in leases.values():
        await call(lease.release())
