"""MySQL/MariaDB-specific behaviour of the mysql:// store: round trips per operation counted by
the driver and by the server, batched renewal of 1,000 leases, the reasons given for lost ones,
a killed connection replaced without an error, a hung server bounded by `timeout`, a table
dropped under a running store, and the store's errors and options. The conformance suite
(tests/conformance, StoreKind "mysql") runs everything else on the same MariaDB.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiomysql
import anyio
import pymysql
import pytest
from handover import acquired_after_release
from refusals import (
    assert_password_hidden,
    assert_retried_until_the_timeout,
    refused_within_a_second,
)
from servers import MariaDBServer
from waiting import call, eventually, wait_until

import tenure
import tenure.aio
from tenure._async.stores import mysql as async_mysql
from tenure._async.stores.mysql import _waking as async_waking
from tenure._names import name_digest
from tenure._sync.stores import mysql as sync_mysql
from tenure._sync.stores.mysql import _store as sync_store_module
from tenure._sync.stores.mysql import _waking as sync_waking
from tenure._types import Grant, LostReason
from tenure.aio.stores import AsyncMySQLStore
from tenure.stores import MySQLStore

pytestmark = pytest.mark.anyio



@pytest.fixture
def table() -> str:
    return "t" + uuid.uuid4().hex[:20]


def stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (state T in /proc)."""
    states = [(task / "stat").read_text().rpartition(")")[2].split()[0]
              for task in Path(f"/proc/{pid}/task").iterdir()]
    return all(state == "T" for state in states)


class Forwarder:
    """A loopback TCP forwarder to `port` on a thread (and event loop) of its own, used as
    `with Forwarder(port) as forwarder:`. Each chunk is delayed by `delay` seconds (the value
    when it came in) in each direction; `pending` counts chunks not yet passed on. While frozen
    it forwards nothing, and the path goes silent (both kernels still acknowledge TCP, as with
    a hung pooler or a dropped route)."""

    def __init__(self, port: int, delay: float = 0.0) -> None:
        self.target, self.delay = port, delay
        self.pending = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.port: int = self._run(self._start())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _start(self) -> int:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: list[asyncio.StreamWriter] = []
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1",
                                                                         self.target)
        self._writers += (writer, upstream_writer)
        with contextlib.suppress(asyncio.CancelledError):  # closing: asyncio logs it otherwise
            await asyncio.gather(self._pipe(reader, upstream_writer),
                                 self._pipe(upstream_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward in order, each chunk `delay` after it came in; the end (EOF) too."""
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await chunks.get()
                await asyncio.sleep(due - self._loop.time())
                await self._flowing.wait()
                self.pending -= 1
                if not data:
                    writer.close()
                    return
                writer.write(data)

        sender = self._loop.create_task(send())
        try:
            while data := await reader.read(65536):
                self.pending += 1
                chunks.put_nowait((self._loop.time() + self.delay, data))
        finally:
            self.pending += 1
            chunks.put_nowait((self._loop.time() + self.delay, b""))
            await sender

    def freeze(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def thaw(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._run(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class Admin:
    """The test's own way into the server: a new PyMySQL connection per statement (so a test
    may kill every connection), marked so that round-trip counts leave it out."""

    def __init__(self, server: MariaDBServer) -> None:
        self.server = server

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        connection = pymysql.connect(unix_socket=str(self.server.socket_path), user="root",
                                     database="tenure", autocommit=True, read_timeout=5)
        connection.admin = True
        with connection, connection.cursor() as cursor:
            cursor.execute(statement)
            return list(cursor.fetchall())

    def answers(self) -> bool:
        try:
            self.sql("SELECT 1")
        except pymysql.Error:
            return False
        return True

    def counts(self) -> dict[str, int]:
        rows = self.sql("SHOW GLOBAL STATUS WHERE Variable_name IN "
                        "('Questions', 'Com_insert', 'Com_update', 'Com_select')")
        return {name: int(value) for name, value in rows}


@pytest.fixture
def admin(mariadb_server: MariaDBServer, table: str) -> Iterator[Admin]:
    """Drops the test's table after the test."""
    admin = Admin(mariadb_server)
    yield admin
    wait_until(admin.answers, 10.0, "the server to answer")
    admin.sql(f"DROP TABLE IF EXISTS `{table}`")


class Counted:
    """Statements the server ran (its global counters, less the SHOW that reads them) and
    round trips the driver made (calls of its Connection.query, one COM_QUERY each) while the
    block ran. Only this test's store talks to this test process's server meanwhile."""

    def __init__(self, admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
        self.admin, self.monkeypatch = admin, monkeypatch
        self.round_trips = 0
        for driver in (pymysql.connections.Connection, aiomysql.Connection):
            original = driver.query

            def counting(connection: Any, *args: Any, _original: Any = original,
                         **kwargs: Any) -> Any:
                self.round_trips += not getattr(connection, "admin", False)
                return _original(connection, *args, **kwargs)

            monkeypatch.setattr(driver, "query", counting)

        first = admin.counts()
        self.baseline = admin.counts()["Questions"] - first["Questions"]  # the SHOW's own cost

    def __enter__(self) -> Counted:
        self.round_trips = 0
        self.before = self.admin.counts()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self.admin.counts()
        self.statements = after["Questions"] - self.before["Questions"] - self.baseline
        self.updates = after["Com_update"] - self.before["Com_update"]


def backend(api: str, url: str, **options: Any) -> Any:
    return MySQLStore(url, **options) if api == "sync" else AsyncMySQLStore(url, **options)


# -- round trips ---------------------------------------------------------------------------------


def sleeping(admin: Admin, table: str) -> list[int]:
    """The connections that sleep for waiters of `table` (the tag built with CONCAT, so that
    this query does not find itself)."""
    rows = admin.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE "
                     f"CONCAT('%tenure', '-wait {table} %')")
    return [int(connection_id) for connection_id, in rows]


def sleepers(admin: Admin, table: str) -> int:
    """How many connections sleep for waiters of `table`."""
    return len(sleeping(admin, table))


async def wait_for_handoff(api: str, admin: Admin, table: str, holder: Any, waiter: Any,
                           name: str, limit: int,
                           before_release: Callable[[], object] = lambda: None,
                           after_release: Callable[[], object] = lambda: None) -> float:
    """Hold every slot of `name` with `holder`, let `waiter` wait with a 10 s backoff, release
    the last slot: the seconds from the release to the waiter holding it. The hooks run right
    before and right after the release (what `after_release` returns is awaited when it can
    be)."""
    held = [await call(holder.semaphore(name, limit, ttl=30).try_acquire())
            for _ in range(limit)]
    assert all(lease is not None for lease in held)
    lock = waiter.semaphore(name, limit, ttl=30, min_wait=10, max_wait=10)

    async def release() -> None:
        assert await call(held[-1].release()) is True
        await call(after_release())

    lease, seconds = await acquired_after_release(
        api, lock, lambda: sleepers(admin, table) == 1, "the waiter to sleep on the server",
        release, before_release=before_release)
    assert lease.token > held[-1].token
    for other in held[:-1]:
        await call(other.release())
    await call(lease.release())
    return seconds


@asynccontextmanager
async def holder_and_waiter(api: str, url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Two stores on `url` (the `api`'s kind), closed when the block ends."""
    module = tenure.aio if api == "async" else tenure
    holder, waiter = module.connect(url), module.connect(url)
    try:
        yield holder, waiter
    finally:
        await call(holder.close())
        await call(waiter.close())


async def test_release_wakes_a_sleeping_waiter(api: str, mariadb_server: MariaDBServer,
                                               table: str, admin: Admin) -> None:
    async with holder_and_waiter(api, f"{mariadb_server.url}?table={table}") as (holder, waiter):
        for limit in (1, 2, 1):
            latency = await wait_for_handoff(api, admin, table, holder, waiter,
                                             f"wake-{limit}", limit)
            # The waiter sleeps up to 4 s (0.8 x timeout); KILL QUERY ends it at the release.
            assert latency < 1.0, f"woken {latency:.3f} s after the release"
        assert sleepers(admin, table) == 0


async def test_the_waiters_flag_is_cleared_once_nobody_sleeps(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait flags slot 0 (releases then look for a sleeper); a release that finds none
    clears the flag, so that later releases of the name cost one statement again."""
    flags = []

    def flag() -> None:
        flags.append(admin.sql(f"SELECT sleepers FROM `{table}` WHERE slot = 0"))

    async with holder_and_waiter(api, f"{mariadb_server.url}?table={table}") as (holder, waiter):
        latency = await wait_for_handoff(api, admin, table, holder, waiter, "flag", 1, flag)
        assert latency < 1.0, f"woken {latency:.3f} s after the release"  # it sleeps 4 s
        assert flags == [[(b",w,",)]]  # set while the waiter slept
        # The waiter's own release found nobody asleep: cleared.
        assert admin.sql(f"SELECT sleepers FROM `{table}` WHERE slot = 0") == [(b",",)]
        counted = Counted(admin, monkeypatch)
        for _ in range(2):  # the first still sends a wake-up along: it saw the name contended
            lease = await call(holder.lock("flag", ttl=30).try_acquire())
            with counted:
                assert lease is not None and await call(lease.release()) is True
        assert (counted.round_trips, counted.statements) == (1, 1)


async def test_the_woken_waiter_goes_before_the_releaser(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a release woke a waiter, the releasing store's own try of the name fails
    without a statement (the head start, 5 s here), so it does not take the lease back from
    the waiter it woke."""
    waking = async_waking if api == "async" else sync_waking
    monkeypatch.setattr(waking, "WAKE_HEAD_START", 5.0)
    tries: list[Any] = []
    calls: list[str] = []  # what the holder's store asks its server
    async with holder_and_waiter(api, f"{mariadb_server.url}?table={table}") as (holder, waiter):
        lock = holder.lock("first", ttl=30)
        ask = holder.backend._connections.call

        def recording(operation: str, *args: Any) -> Any:
            calls.append(operation)
            return ask(operation, *args)

        async def try_again() -> None:  # right after the release
            tries.append(await call(lock.try_acquire()))

        monkeypatch.setattr(holder.backend._connections, "call", recording)
        await wait_for_handoff(api, admin, table, holder, waiter, "first", 1,
                               after_release=try_again)
        assert tries == [None] and calls == ["acquire", "release", "wake"]
        assert await call(lock.try_acquire()) is not None  # the head start is used up


async def test_the_try_behind_a_wait_takes_the_lease_at_the_wake_up(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """wait_and_acquire sends its try right behind its sleep: the release's KILL QUERY ends
    the sleep and the server runs that try at once. The wait returns that grant, with no
    round trip after the wake-up, its deadline counted from before the wait; the store keeps
    nothing of it."""
    holder = backend(api, f"{mariadb_server.url}?table={table}")
    waiter = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        lease = await call(holder.try_acquire("behind", "holder", 30.0, 1))
        got: dict[str, Any] = {}
        ask = waiter._connections.call

        def recording(operation: str, *args: Any) -> Any:
            got.setdefault("calls", []).append(operation)
            return ask(operation, *args)

        monkeypatch.setattr(waiter._connections, "call", recording)  # other round trips
        before_wait = time.monotonic()
        if api == "async":
            async def waiting() -> None:
                got["grant"] = await waiter.wait_and_acquire("behind", "waiter", 30.0, 1,
                                                             10.0, 10.0)
                got["returned"] = time.monotonic()

            async with anyio.create_task_group() as group:
                group.start_soon(waiting)
                await eventually(lambda: sleepers(admin, table) == 1, 5, "the waiter to sleep")
                released_at = time.monotonic()
                assert await holder.release(lease) is True
        else:
            def waiting_thread() -> None:
                got["grant"] = waiter.wait_and_acquire("behind", "waiter", 30.0, 1, 10.0, 10.0)
                got["returned"] = time.monotonic()

            thread = threading.Thread(target=waiting_thread)
            thread.start()
            await eventually(lambda: sleepers(admin, table) == 1, 5, "the waiter to sleep")
            released_at = time.monotonic()
            assert holder.release(lease) is True
            thread.join(timeout=10)
        grant = got["grant"]
        assert grant is not None and grant.token > lease.token and grant.holder == "waiter"
        assert "calls" not in got, got  # the try went out with the wait: no other call
        assert before_wait <= grant.sent_at < released_at  # sent with the sleep, before
        assert got["returned"] - released_at < 1.0  # woken by the release (it sleeps 4 s)
        assert [info.holder for info in await call(holder.leases("behind"))] == ["waiter"]
        assert await call(waiter.release(grant)) is True
        assert not [name for name in vars(waiter) if "prefetch" in name or "unclaimed" in name]
    finally:
        await call(holder.close())
        await call(waiter.close())


async def test_a_plain_wait_is_woken_by_the_release_and_takes_nothing(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """wait_released (the job runner's wait) sleeps on the server without a try behind it:
    the release wakes it, and the name stays free for whoever tries first."""
    holder = backend(api, f"{mariadb_server.url}?table={table}")
    waiter = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        lease = await call(holder.try_acquire("plain", "holder", 30.0, 1))
        got: dict[str, float] = {}
        if api == "async":
            async def waiting() -> None:
                await waiter.wait_released("plain", 10.0)
                got["woken"] = time.monotonic()

            async with anyio.create_task_group() as group:
                group.start_soon(waiting)
                await eventually(lambda: sleepers(admin, table) == 1, 5, "the waiter to sleep")
                released_at = time.monotonic()
                assert await holder.release(lease) is True
        else:
            def waiting_thread() -> None:
                waiter.wait_released("plain", 10.0)
                got["woken"] = time.monotonic()

            thread = threading.Thread(target=waiting_thread)
            thread.start()
            await eventually(lambda: sleepers(admin, table) == 1, 5, "the waiter to sleep")
            released_at = time.monotonic()
            assert holder.release(lease) is True
            thread.join(timeout=10)
        assert got["woken"] - released_at < 1.0  # it sleeps 4 s (0.8 x timeout) unless woken
        assert await call(holder.leases("plain")) == []
    finally:
        await call(holder.close())
        await call(waiter.close())


async def test_a_cancelled_wait_takes_nothing(mariadb_server: MariaDBServer, table: str,
                                              admin: Admin) -> None:
    """The server runs the try sent behind a sleep even after the client closed the
    connection; a cancelled wait ends that connection (KILL CONNECTION) and frees what that
    try took, so that the release which would have woken it leaves the name free, not held by
    nobody until it expires."""
    url = f"{mariadb_server.url}?table={table}"
    holder, waiter = AsyncMySQLStore(url), AsyncMySQLStore(url)
    try:
        lease = await holder.try_acquire("cancelled", "holder", 30.0, 1)

        async def waiting() -> None:
            await waiter.wait_and_acquire("cancelled", "waiter", 30.0, 1, 10.0, 10.0)

        async with anyio.create_task_group() as group:
            group.start_soon(waiting)
            await eventually(lambda: sleepers(admin, table) == 1, 5, "the waiter to sleep")
            [sleeper] = sleeping(admin, table)
            group.cancel_scope.cancel()
        assert lease is not None and await holder.release(lease) is True

        def gone() -> bool:
            return not admin.sql(
                f"SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {sleeper}")

        await eventually(gone, 5, "the cancelled wait's connection to end")
        # The undo runs in the background (the cancellation does not wait for it).
        await eventually(lambda: admin.sql(f"SELECT lease_id FROM `{table}` WHERE slot = 0")
                         == [(0,)], 5, "what the try behind the wait took to be freed")
    finally:
        await holder.close()
        await waiter.close()


async def test_a_try_behind_a_wait_cut_short_is_made_again_with_its_lease_id(
        mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A KILL QUERY meant for a sleep that reaches the try behind it instead leaves that try's
    outcome unknown: the connection is closed (a semaphore's transaction may be open) and the
    wait makes the try again at once with the same lease id, which takes back what the
    cut-off try may have taken, and returns its grant."""
    url = f"{mariadb_server.url}?table={table}"
    holder, waiter = AsyncMySQLStore(url), AsyncMySQLStore(url)
    try:
        lease = await holder.try_acquire("cut", "holder", 30.0, 1)
        assert lease is not None
        statement = waiter._acquire_statement
        sent: list[int] = []

        def slow_once(parameters: dict[str, Any]) -> str:
            sent.append(parameters["lease_id"])
            return ("SELECT SLEEP(10); " if len(sent) == 1 else "") + statement(parameters)

        monkeypatch.setattr(waiter, "_acquire_statement", slow_once)

        def slow_try() -> list[tuple[Any, ...]]:
            return admin.sql("SELECT ID FROM information_schema.PROCESSLIST "
                             "WHERE INFO LIKE CONCAT('SELECT ', 'SLEEP(10)%')")

        async def kill_the_try() -> None:
            await eventually(lambda: len(slow_try()) == 1, 5, "the try behind the wait to run")
            [(connection_id,)] = slow_try()
            assert await holder.release(lease) is True  # wakes nobody: the wait's sleep ended
            admin.sql(f"KILL QUERY {connection_id}")

        async with anyio.create_task_group() as group:
            group.start_soon(kill_the_try)
            grant = await waiter.wait_and_acquire("cut", "waiter", 30.0, 1, 0.05, 10.0)
        assert len(sent) == 2 and sent[0] == sent[1]  # made again, with its lease id
        assert grant is not None and grant.lease_id == str(sent[0])
        assert waiter._sleepers.idle == []  # closed, not kept
        assert await waiter.release(grant) is True
    finally:
        await holder.close()
        await waiter.close()


async def test_a_release_nobody_waits_for_costs_one_statement(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed try without a wait flags nothing: the next release wakes nobody."""
    store = backend(api, f"{mariadb_server.url}?table={table}")
    other = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        lease = await call(store.try_acquire("quiet", "me", 30.0, 1))
        assert await call(other.try_acquire("quiet", "you", 30.0, 1)) is None
        counted = Counted(admin, monkeypatch)
        with counted:
            assert await call(store.release(lease)) is True
        assert (counted.round_trips, counted.statements) == (1, 1)
    finally:
        await call(store.close())
        await call(other.close())


async def test_assignments_stay_left_to_right_whatever_the_server_s_sql_mode(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """MariaDB's SIMULTANEOUS_ASSIGNMENT would make the lock's upsert see the old row in every
    assignment; the store's sessions turn it off."""
    [(mode,)] = admin.sql("SELECT @@GLOBAL.sql_mode")
    admin.sql("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',SIMULTANEOUS_ASSIGNMENT')")
    try:
        first = backend(api, f"{mariadb_server.url}?table={table}")
        second = backend(api, f"{mariadb_server.url}?table={table}")
        mine = await call(first.try_acquire("mode", "first", 30.0, 1))
        assert mine is not None
        assert await call(second.try_acquire("mode", "second", 30.0, 1)) is None
        assert await call(first.release(mine)) is True
        theirs = await call(second.try_acquire("mode", "second", 30.0, 1))
        assert theirs is not None and theirs.token > mine.token
        [(holder,)] = admin.sql(f"SELECT holder FROM `{table}` WHERE slot = 0")
        assert bytes(holder) == b"second"
        await call(first.close())
        await call(second.close())
    finally:
        admin.sql(f"SET GLOBAL sql_mode = '{mode}'")


async def test_one_round_trip_per_operation(api: str, mariadb_server: MariaDBServer, table: str,
                                            admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    other = backend(api, f"{mariadb_server.url}?table={table}")
    counted = Counted(admin, monkeypatch)
    try:
        await call(store.try_acquire("warm-up", "me", 30.0, 1))  # creates the table
        await call(other.try_acquire("warm-up", "you", 30.0, 1))  # connects
        with counted:
            lock = await call(store.try_acquire("jobs", "me", 30.0, 1))
        assert lock is not None
        assert (counted.round_trips, counted.statements) == (1, 1)
        with counted:
            assert await call(other.try_acquire("jobs", "you", 30.0, 1)) is None
        assert (counted.round_trips, counted.statements) == (1, 1)
        with counted:
            slot = await call(store.try_acquire("imports", "me", 30.0, 3))
        assert slot is not None and counted.round_trips == 1  # one multi-statement transaction
        with counted:
            assert await call(store.renew([lock, slot], 30.0)) == [lock, slot]
        assert (counted.round_trips, counted.statements, counted.updates) == (1, 1, 1)
        with counted:
            assert await call(store.release(lock)) is True
        assert (counted.round_trips, counted.statements) == (1, 1)
        # After this store found the name taken, its release also wakes the longest sleeper,
        # found in the process list and woken by KILL QUERY, in the same round trip (none
        # sleeps here: the KILL fails, harmlessly).
        lock = await call(store.try_acquire("jobs", "me", 30.0, 1))
        assert lock is not None
        assert await call(store.try_acquire("jobs", "you", 30.0, 1)) is None
        with counted:
            assert await call(store.release(lock)) is True
        assert (counted.round_trips, counted.statements) == (1, 3)
        with counted:
            assert await call(store.break_lease("imports")) == 1
        assert (counted.round_trips, counted.statements) == (1, 1)
    finally:
        await call(store.close())
        await call(other.close())


async def test_renewal_of_1000_leases_is_one_statement(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    counted = Counted(admin, monkeypatch)
    try:
        grants = [await call(store.try_acquire(f"job/{i}", "me", 30.0, 1 + i % 3))
                  for i in range(1000)]
        assert all(grant is not None for grant in grants)
        with counted:
            renewed = await call(store.renew(grants, 30.0))
        assert renewed == grants
        assert (counted.round_trips, counted.statements, counted.updates) == (1, 1, 1)
    finally:
        await call(store.close())


async def test_lost_leases_get_their_reason_in_one_more_query(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    counted = Counted(admin, monkeypatch)
    try:
        kept = await call(store.try_acquire("kept", "me", 30.0, 1))
        broken = await call(store.try_acquire("broken", "me", 30.0, 2))
        taken = await call(store.try_acquire("taken", "me", 0.1, 1))
        expired = await call(store.try_acquire("expired", "me", 0.1, 1))
        released = await call(store.try_acquire("released", "me", 30.0, 1))
        assert await call(store.break_lease("broken")) == 1
        assert await call(store.release(released)) is True
        wait_until(lambda: not admin.sql(f"SELECT 1 FROM `{table}` WHERE expires_at > "
                                         "UTC_TIMESTAMP(6) AND name IN ('taken', 'expired')"),
                   5.0, "the 0.1 s leases to expire on the server")
        thief = await call(store.try_acquire("taken", "thief", 30.0, 1))
        assert thief is not None and thief.token > taken.token
        gone = Grant("never-held", 0, "me", "nope", 1, "never-held")
        with counted:
            results = await call(store.renew([kept, broken, taken, expired, released, gone], 30.0))
        assert results == [kept, LostReason.BROKEN, LostReason.TAKEN, LostReason.EXPIRED,
                           LostReason.BROKEN, LostReason.BROKEN]
        assert (counted.round_trips, counted.statements) == (2, 2)
    finally:
        await call(store.close())


# -- tokens --------------------------------------------------------------------------------------


async def test_locks_and_semaphores_of_one_name_share_one_counter(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        lock = await call(store.try_acquire("mixed", "me", 30.0, 1))
        assert await call(store.release(lock)) is True
        first, second = [await call(store.try_acquire("mixed", "me", 30.0, 3)) for _ in "ab"]
        assert (first.slot, second.slot) == (0, 1)
        assert await call(store.try_acquire("mixed", "me", 30.0, 1)) is None  # slot 0 is held
        assert await call(store.try_acquire("mixed", "me", 30.0, 2)) is None
        third = await call(store.try_acquire("mixed", "me", 30.0, 3))
        tokens = [lock.token, first.token, second.token, third.token]
        assert third.slot == 2 and tokens == sorted(set(tokens))
        assert lock.token > 1_600_000_000_000_000  # seeded from the server clock in µs
        # Refused attempts do not move the counter; it is the last token granted.
        [(counter,)] = admin.sql(f"SELECT counter FROM `{table}` WHERE slot = 0")
        assert counter == third.token
    finally:
        await call(store.close())


async def test_table_dropped_under_a_running_store(api: str, mariadb_server: MariaDBServer,
                                                   table: str, admin: Admin) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        first = await call(store.try_acquire("jobs", "me", 30.0, 1))
        admin.sql(f"DROP TABLE `{table}`")
        # The pooled connection finds the table missing: created again, and the call retried.
        again = await call(store.try_acquire("jobs", "me", 30.0, 1))
        assert again is not None and again.token > first.token
        admin.sql(f"DROP TABLE `{table}`")
        slot = await call(store.try_acquire("imports", "me", 30.0, 2))
        assert slot is not None and slot.token > first.token
    finally:
        await call(store.close())


def prepared_counts(admin: Admin) -> tuple[int, int]:
    """The server's PREPARE and EXECUTE statement counters (text protocol)."""
    rows = dict(admin.sql("SHOW GLOBAL STATUS WHERE Variable_name IN "
                          "('Com_prepare_sql', 'Com_execute_sql')"))
    return int(rows["Com_prepare_sql"]), int(rows["Com_execute_sql"])


async def test_the_cycle_runs_statements_prepared_per_connection_also_after_a_restart(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """On MariaDB a new connection prepares the lock's acquire and release (one PREPARE each),
    and every cycle runs them with EXECUTE; after a restart the new connection prepares them
    again, and tokens keep growing."""
    store = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        await call(store.try_acquire("warm-up", "me", 30.0, 1))  # creates the table
        before = prepared_counts(admin)
        for _ in range(4):
            grant = await call(store.try_acquire("prepared", "me", 30.0, 1))
            assert grant is not None and await call(store.release(grant)) is True
        after = prepared_counts(admin)
        assert (after[0] - before[0], after[1] - before[1]) == (0, 8)
        mariadb_server.restart()
        again = await call(store.try_acquire("prepared", "me", 30.0, 1))
        assert again is not None and again.token > grant.token
        assert await call(store.release(again)) is True
        restarted = prepared_counts(admin)  # the server's counters start again from 0
        assert restarted == (2, 2)
    finally:
        await call(store.close())


async def test_servers_other_than_mariadb_get_the_statement_text(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MySQL 8 takes only user variables after EXECUTE ... USING: there the store sends the
    statements' text. The same statements run here on MariaDB, announced as a MySQL."""
    for driver in (pymysql.connections.Connection, aiomysql.Connection):
        monkeypatch.setattr(driver, "get_server_info", lambda connection: "8.0.40")
    store = backend(api, f"{mariadb_server.url}?table={table}")
    other = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        before = prepared_counts(admin)
        mine = await call(store.try_acquire("text", "me", 30.0, 1))
        assert mine is not None
        assert await call(other.try_acquire("text", "you", 30.0, 1)) is None
        assert await call(store.release(mine)) is True
        theirs = await call(other.try_acquire("text", "you", 30.0, 1))
        assert theirs is not None and theirs.token > mine.token
        assert await call(store.release(mine)) is False  # no longer its lease
        assert await call(other.release(theirs)) is True
        assert prepared_counts(admin) == before
    finally:
        await call(store.close())
        await call(other.close())


# -- faults --------------------------------------------------------------------------------------


async def test_killed_connection_is_replaced_without_an_error(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}")
    try:
        grant = await call(store.try_acquire("jobs", "me", 30.0, 1))
        for operation in ("renew", "acquire", "release", "semaphore"):
            assert mariadb_server.drop_connections() >= 1  # the store's idle connection
            if operation == "renew":
                assert await call(store.renew([grant], 30.0)) == [grant]
            elif operation == "acquire":
                assert await call(store.try_acquire("other", "me", 30.0, 1)) is not None
            elif operation == "release":
                assert await call(store.release(grant)) is True
            else:
                assert await call(store.try_acquire("imports", "me", 30.0, 2)) is not None
    finally:
        await call(store.close())


async def test_hung_server_fails_within_timeout(api: str, mariadb_server: MariaDBServer,
                                                table: str, admin: Admin) -> None:
    store = backend(api, f"{mariadb_server.url}?table={table}", timeout=0.5)
    try:
        grant = await call(store.try_acquire("jobs", "me", 30.0, 1))
        assert mariadb_server.process is not None
        pid = mariadb_server.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            # The stop takes effect asynchronously: wait until every thread has stopped.
            wait_until(lambda: stopped(pid), 10.0, "the server to stop")
            for _ in ("pooled connection", "new connection"):
                started = time.monotonic()
                with pytest.raises(tenure.StoreUnavailable, match=r"timeout=0\.5"):
                    await call(store.renew([grant], 30.0))
                assert time.monotonic() - started < 3.0
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until(admin.answers, 10.0, "the server to resume")
        assert await call(store.renew([grant], 30.0)) == [grant]
    finally:
        await call(store.close())


@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.parametrize("cancel_after", [0.5, 1.5], ids=["on-the-way", "run-by-the-server"])
async def test_a_cancelled_acquire_is_undone(mariadb_server: MariaDBServer, table: str,
                                             admin: Admin, limit: int,
                                             cancel_after: float) -> None:
    """An acquire cancelled in mid-request (its request still on the way, or run by the server
    while the answer is on the way back) leaves no lease behind: the name is free again well
    within its ttl, and the store works on."""
    delay = 0.05
    with Forwarder(mariadb_server.port, delay) as forwarder:
        store = AsyncMySQLStore(f"mysql://root@127.0.0.1:{forwarder.port}/tenure?table={table}")
        try:
            warm = await store.try_acquire("warm-up", "a", 30.0, 1)  # connected, table made
            assert warm is not None and await store.release(warm) is True
            with anyio.move_on_after(cancel_after * delay) as scope:
                await store.try_acquire("cancelled", "a", 30.0, limit)
            assert scope.cancelled_caught

            def taken_and_freed() -> bool:
                rows = admin.sql(f"SELECT holder, expires_at > UTC_TIMESTAMP(6) FROM `{table}` "
                                 "WHERE name = 'cancelled'")
                return (b"a", 0) in [(bytes(holder), live) for holder, live in rows] and not any(
                    live for _, live in rows)

            # The acquire ran on the server (its holder is on a row), and nothing is held.
            await eventually(taken_and_freed, 5, "the cancelled acquire to be undone")
            grant = await store.try_acquire("cancelled", "a", 30.0, 1)
            assert grant is not None and await store.release(grant) is True
        finally:
            await store.close()


async def test_the_undo_of_a_cancelled_acquire_never_overtakes_it(
        mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """The server runs a query that reaches it after the client gave up on it. An acquire
    cancelled while slow on its way, whose undo takes a faster path, must not take the lease
    after the undo ran: the undo ends the acquire's connection before it frees anything."""
    with Forwarder(mariadb_server.port) as forwarder:
        store = AsyncMySQLStore(f"mysql://root@127.0.0.1:{forwarder.port}/tenure?table={table}")
        try:
            warm = await store.try_acquire("warm-up", "a", 30.0, 1)  # connected, table made
            assert warm is not None and await store.release(warm) is True
            [acquiring] = [connection.thread_id() for connection in store._connections.idle]
            forwarder.delay = 0.5
            with anyio.move_on_after(0.1):
                await store.try_acquire("overtaken", "a", 30.0, 1)
            forwarder.delay = 0.0  # the undo's new connection is fast

            def acquire_done() -> bool:  # passed on (or dropped), and its connection ended
                return forwarder.pending == 0 and acquiring not in connection_ids(admin)

            await eventually(acquire_done, 5, "the cancelled acquire to reach the server")
            assert not admin.sql(f"SELECT 1 FROM `{table}` WHERE name = 'overtaken' "
                                 "AND expires_at > UTC_TIMESTAMP(6)")
        finally:
            await store.close()


async def test_a_silent_path_fails_within_the_timeout_and_the_store_recovers(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """Every call has a client-side bound: on a path gone silent (the server's own timeouts
    never fire) a renewal raises StoreUnavailable after about `timeout`, the connection is
    dropped, and the store works again once the path is back."""
    with Forwarder(mariadb_server.port) as forwarder:
        store = backend(api, f"mysql://root@127.0.0.1:{forwarder.port}/tenure?table={table}",
                        timeout=0.5)
        try:
            grant = await call(store.try_acquire("silent", "me", 30.0, 1))
            forwarder.freeze()
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable, match=r"timeout=0\.5"):
                await call(store.renew([grant], 30.0))
            assert time.monotonic() - started < 2.0  # 0.5 s, and a generous margin
            assert store._connections.idle == []  # dropped, not kept for the next call
            forwarder.thaw()
            assert await call(store.renew([grant], 30.0)) == [grant]
            assert await call(store.release(grant)) is True
        finally:
            await call(store.close())


def connection_ids(admin: Admin) -> set[int]:
    return {int(connection_id) for connection_id, in admin.sql(
        "SELECT ID FROM information_schema.PROCESSLIST")}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_uses_connections_of_its_own(mariadb_server: MariaDBServer, table: str,
                                                    admin: Admin) -> None:
    """A child forked with the store's connection idle in its pool acquires another name
    through the same store object, closes it and exits: it never sent anything on the
    parent's connection (no query, no COM_QUIT), and the parent's lease and connection live on."""
    store = MySQLStore(f"{mariadb_server.url}?table={table}")
    try:
        grant = store.try_acquire("parent", "parent", 30.0, 1)
        assert grant is not None
        [parents] = [connection.thread_id() for connection in store._connections.idle]
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report the connection it used, exit without atexit hooks
            status = 1
            try:
                os.close(read_end)
                theirs = store.try_acquire("child", "child", 30.0, 1)
                used = [connection.thread_id() for connection in store._connections.idle]
                released = theirs is not None and store.release(theirs)
                store.close()
                os.write(write_end, f"{released} {' '.join(map(str, used))}".encode())
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        with os.fdopen(read_end) as report:
            child_said = report.read()
        assert os.waitpid(pid, 0)[1] == 0
        released, *used = child_said.split()
        assert released == "True" and used and str(parents) not in used
        assert parents in connection_ids(admin)  # the child's close did not end it
        assert store.renew([grant], 30.0) == [grant]
        assert [connection.thread_id() for connection in store._connections.idle] == [parents]
        assert store.release(grant) is True
    finally:
        store.close()


# -- errors and options --------------------------------------------------------------------------


async def test_missing_database_is_named(api: str, mariadb_server: MariaDBServer) -> None:
    url = mariadb_server.url.replace("/tenure", "/no_such_db")
    store = backend(api, url)
    with pytest.raises(tenure.StoreUnavailable) as raised:
        await call(store.try_acquire("jobs", "me", 30.0, 1))
    message = str(raised.value)
    assert "'no_such_db' does not exist" in message and "CREATE DATABASE" in message
    assert "acquire of 'jobs'" in message
    await call(store.close())


async def test_password_never_shown(api: str, mariadb_server: MariaDBServer) -> None:
    url = mariadb_server.url.replace("root@", "root:hunter2@")
    store = backend(api, url)
    assert "hunter2" not in repr(store) and "hunter2" not in store.url
    with pytest.raises(tenure.StoreUnavailable) as raised:
        await call(store.try_acquire("jobs", "me", 30.0, 1))
    assert "hunter2" not in str(raised.value)
    assert "check the user name and password" in str(raised.value)
    await call(store.close())
    module = tenure if api == "sync" else tenure.aio
    with pytest.raises(tenure.InvalidArgument) as invalid:
        module.connect(url + "?table=no-dashes")
    assert "hunter2" not in str(invalid.value)


@pytest.mark.parametrize(("options", "message"), [
    ({"table": "bad-name"}, "table='bad-name' is not a usable SQL identifier"),
    ({"table": "x" * 65}, "is not a usable SQL identifier: use 1 to 64"),
    ({"timeout": "soon"}, "timeout='soon' is not a number: give seconds, from 0.1 to 600"),
    ({"timeout": 0}, "timeout='?0'? is out of range: give seconds"),
    ({"pool_size": "1.5"}, "pool_size='1.5' is not a whole number: give one from 1 to 1000"),
    ({"pool_size": -1}, "pool_size='?-1'? is out of range: give a whole number"),
    ({"ssl_mode": "on"}, "unknown option 'ssl_mode' for mysql:// stores; accepted: table, "
                         "timeout"),
])
def test_bad_options(options: dict[str, Any], message: str) -> None:
    for store in (MySQLStore, AsyncMySQLStore):
        with pytest.raises(tenure.InvalidArgument, match=message):
            store("mysql://u:pw@db/locks", **options)
        query = "&".join(f"{key}={value}" for key, value in options.items())
        with pytest.raises(tenure.InvalidArgument, match=message):
            store(f"mysql://u:pw@db/locks?{query}")
    with pytest.raises(tenure.InvalidArgument, match="must name a database"):
        MySQLStore("mysql://db:3306")


def test_keyword_options_win_over_the_url() -> None:
    store = MySQLStore("mariadb://app@db:3307/locks?table=a&timeout=9", table="b")
    assert (store.table, store.timeout, store.pool_size, store.database) == ("b", 9.0, 10, "locks")
    # A release ends a sleep: the store has the wait that returns what the wake-up took.
    assert callable(tenure.stores.MySQLStore.wait_and_acquire)


def test_from_url_builds_the_store_connect_builds() -> None:
    """The registry's entry point: every scheme of SCHEMES, options from the URL's query and as
    keywords, the same class connect() hands out."""
    for module, kind in ((sync_mysql, MySQLStore), (async_mysql, AsyncMySQLStore)):
        assert module.SCHEMES == ("mysql", "mariadb")
        for scheme in module.SCHEMES:
            store = module.from_url(f"{scheme}://app@db:3307/locks?table=a&timeout=9", table="b")
            assert type(store) is kind
            assert (store.table, store.timeout, store.database) == ("b", 9.0, "locks")
        with pytest.raises(tenure.InvalidArgument, match="unknown option"):
            module.from_url("mysql://app@db/locks", ssl_mode="on")


# -- errors that cannot clear fail at once --------------------------------------------------------

USER, USER_PASSWORD = "tenure_pw", "right-horse-battery-staple"


@pytest.fixture(scope="module")
def password_user(mariadb_server: MariaDBServer) -> Iterator[str]:
    """A user with a password and the rights tenure needs on database `tenure`, and a user
    'tenure_none' with no rights at all."""
    admin = Admin(mariadb_server)
    for user in (USER, "tenure_none"):
        admin.sql(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
        admin.sql(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{USER_PASSWORD}'")
    admin.sql(f"GRANT ALL ON tenure.* TO '{USER}'@'127.0.0.1'")
    yield USER
    for user in (USER, "tenure_none"):
        admin.sql(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


@pytest.mark.parametrize("wrong", ["1", "not-the-password-but-a-long-one"])
async def test_a_wrong_password_is_refused_at_once(api: str, mariadb_server: MariaDBServer,
                                                    password_user: str, table: str,
                                                    wrong: str) -> None:
    """acquire(timeout=None) used to retry a refused password forever, silently. "1" also
    occurs in the host: the message must still show the address whole."""
    module = tenure.aio if api == "async" else tenure
    address = f"127.0.0.1:{mariadb_server.port}/tenure"
    works = module.connect(f"mysql://{password_user}:{USER_PASSWORD}@{address}?table={table}")
    lease = await call(works.lock("jobs", ttl=5).try_acquire())
    assert lease is not None, "the right password works"
    await call(works.close())
    store = module.connect(f"mysql://{password_user}:{wrong}@{address}?table={table}")
    message = await refused_within_a_second(store)
    assert "authentication refused" in message and "password in the URL" in message, message
    assert_password_hidden(message, f"mysql://{password_user}:***@{address}", wrong)


async def test_a_missing_database_or_right_is_refused_at_once(
        api: str, mariadb_server: MariaDBServer, password_user: str, table: str) -> None:
    module = tenure.aio if api == "async" else tenure
    missing = module.connect(mariadb_server.url.replace("/tenure", "/no_such_db"))
    message = await refused_within_a_second(missing, timeout=30)
    assert "'no_such_db' does not exist" in message and "CREATE DATABASE" in message
    denied = module.connect(f"mysql://tenure_none:{USER_PASSWORD}@127.0.0.1:"
                            f"{mariadb_server.port}/tenure?table={table}")
    message = await refused_within_a_second(denied)
    assert "may not use database 'tenure'" in message and USER_PASSWORD not in message, message


async def test_a_closed_port_is_retried_until_the_timeout(api: str) -> None:
    from servers import free_port

    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"mysql://root@127.0.0.1:{free_port()}/tenure", timeout=1)
    await assert_retried_until_the_timeout(store)


# -- lock order ----------------------------------------------------------------------------------

# One process of the test below: takes and frees a slot of a semaphore as fast as it can for
# `seconds`, with the sync or the async API; prints how many releases it made and what failed.
SEMAPHORE_CHURN = """
import json, random, sys, time
import anyio, tenure, tenure.aio

url, name, api, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
done, errors = 0, []

def churn_sync():
    global done
    with tenure.connect(url) as store:
        semaphore = store.semaphore(name, limit=3, ttl=30)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            lease = semaphore.try_acquire()
            if lease is None:
                time.sleep(0.001)  # pacing, not synchronization
                continue
            time.sleep(random.uniform(0, 0.003))
            try:
                lease.release()
                done += 1
            except tenure.TenureError as exc:
                errors.append(repr(exc)[:300])

async def churn_async():
    global done
    async with tenure.aio.connect(url) as store:
        semaphore = store.semaphore(name, limit=3, ttl=30)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            lease = await semaphore.try_acquire()
            if lease is None:
                await anyio.sleep(0.001)
                continue
            await anyio.sleep(random.uniform(0, 0.003))
            try:
                await lease.release()
                done += 1
            except tenure.TenureError as exc:
                errors.append(repr(exc)[:300])

churn_sync() if api == "sync" else anyio.run(churn_async)
print(json.dumps({"releases": done, "errors": errors}))
"""


def test_semaphore_releases_never_deadlock_with_acquires(mariadb_server: MariaDBServer,
                                                         table: str, admin: Admin) -> None:
    """8 processes (4 sync, 4 async) churn one semaphore of limit 3 for 4 s. An acquire locks
    slot 0's row, then reads the other slots; a release that locked its slot and then slot 0
    (to pop a sleeper) deadlocked with it (InnoDB 1213): the release raised and its slot stayed
    held until its ttl. Every release succeeds, and no slot is held once all are released."""
    url, name = f"{mariadb_server.url}?table={table}", "churn"
    with tenure.connect(url) as store:  # creates the table before the processes race to
        grant = store.semaphore(name, limit=3, ttl=30).try_acquire()
        assert grant is not None
        grant.release()
    processes = [subprocess.Popen(
        [sys.executable, "-c", SEMAPHORE_CHURN, url, name, api, "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for api in ["sync", "async"] * 4]
    reports = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    releases = sum(report["releases"] for report in reports)
    errors = [error for report in reports for error in report["errors"]]
    assert errors == [], f"{len(errors)} of {releases + len(errors)} releases failed: {errors[:3]}"
    assert all(report["releases"] > 0 for report in reports), reports
    with tenure.connect(url) as store:
        assert store.leases(name) == [], f"slots held after {releases} releases"


def test_a_semaphore_slot_is_taken_only_if_still_free_when_locked(
        mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """The acquire picks a free slot, then upserts it. Where the pick reads a snapshot (MySQL 8
    may), a renewal that committed after it would be overwritten: two holders of one slot. The
    upsert re-checks the row it locks. Here the pick is forced to slot 1, which a live lease
    holds: the acquire takes nothing and the holder keeps its slot."""
    store = MySQLStore(f"{mariadb_server.url}?table={table}")
    try:
        first = store.try_acquire("recheck", "first", 30.0, 3)
        second = store.try_acquire("recheck", "second", 30.0, 3)
        assert first is not None and second is not None and second.slot == 1
        attempt = sync_store_module._Attempt("intruder", 30.0, 3)
        parameters = store._parameters(name_digest("recheck"), "recheck", attempt)
        statement = store._acquire_statement(parameters)
        counter = f"UPDATE `{table}` SET counter"
        assert statement.count(counter) == 1
        stale = statement.replace(counter, f"SET @tenure_slot = 1;\n{counter}")
        connection = pymysql.connect(unix_socket=str(mariadb_server.socket_path), user="root",
                                     database="tenure", autocommit=True,
                                     client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
        answers = []
        with connection, connection.cursor() as cursor:
            cursor.execute(stale)
            while True:
                if cursor.description:
                    answers.append(cursor.fetchall())
                if not cursor.nextset():
                    break
        assert answers == [((None, None),)]  # the last statement's answer: nothing taken
        assert store.renew([first, second], 30.0) == [first, second]
        held = {(info.slot, info.holder, info.token) for info in store.leases("recheck")}
        assert held == {(0, "first", first.token), (1, "second", second.token)}
    finally:
        store.close()


def test_a_release_that_meets_a_lock_wait_timeout_is_retried(
        mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """Another client holds the slot's row past the server's lock wait timeout (1 s here): the
    release gets error 1205, waits a jittered pause and tries again, within the store's
    timeout, and succeeds once the row is let go: no error reaches the caller."""
    [(before,)] = admin.sql("SELECT @@GLOBAL.innodb_lock_wait_timeout")
    store = MySQLStore(f"{mariadb_server.url}?table={table}", timeout=10)
    try:
        grant = store.try_acquire("waited", "me", 30.0, 3)
        assert grant is not None and store.try_acquire("waited", "me", 30.0, 3) is not None
        grant = store.try_acquire("waited", "me", 30.0, 3)
        assert grant is not None and grant.slot == 2
        admin.sql("SET GLOBAL innodb_lock_wait_timeout = 1")  # for connections opened later
        store._connections.discard_idle()

        def waits() -> int:
            [(_, value)] = admin.sql("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")
            return int(value)

        blocker = pymysql.connect(unix_socket=str(mariadb_server.socket_path), user="root",
                                  database="tenure", autocommit=False)
        with blocker, blocker.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM `{table}` WHERE slot = 2 FOR UPDATE")
            first = waits()
            released: dict[str, Any] = {}
            thread = threading.Thread(
                target=lambda: released.update(result=store.release(grant)))
            thread.start()
            # The first attempt waited, timed out after 1 s, and the retry waits again.
            wait_until(lambda: waits() >= first + 2, 10.0, "a retry of the release")
            blocker.commit()
            thread.join(timeout=10)
        assert released == {"result": True}
        assert [info.slot for info in store.leases("waited")] == [0, 1]
    finally:
        admin.sql(f"SET GLOBAL innodb_lock_wait_timeout = {int(before)}")
        store.close()


# -- many waiters on one name --------------------------------------------------------------------

# One process of the test below: `tasks` async tasks loop acquire(timeout) / hold 1 ms / release
# on one lock for `seconds`; prints the tokens it was handed, when (CLOCK_MONOTONIC: one clock
# for every process of the host), its LockTimeouts and the slowest acquire (until it returned or
# raised).
CROWD = """
import json, sys, time
import anyio, tenure, tenure.aio

url, name, tasks, seconds, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
    float(sys.argv[4]), float(sys.argv[5])
tokens, granted, timeouts, slowest = [], [], 0, 0.0

async def task(store):
    global timeouts, slowest
    lock = store.lock(name, ttl=10, max_wait=0.05)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            async with lock.acquire(timeout=timeout) as lease:
                slowest = max(slowest, time.monotonic() - started)
                tokens.append(lease.token)
                granted.append(time.monotonic())
                await anyio.sleep(0.001)
        except tenure.LockTimeout:
            timeouts += 1
            slowest = max(slowest, time.monotonic() - started)

async def main():
    async with tenure.aio.connect(url) as store, anyio.create_task_group() as group:
        for _ in range(tasks):
            group.start_soon(task, store)

anyio.run(main)
print(json.dumps({"tokens": tokens, "granted": granted, "timeouts": timeouts,
                  "slowest": slowest}))
"""


def test_many_waiters_on_one_lock_keep_handing_it_over(mariadb_server: MariaDBServer,
                                                        table: str) -> None:
    """3 processes x 20 tasks wait for one lock for 4 s. Waiters that all slept on the server
    with their ids written into slot 0's row (the row every acquire and release locks) stalled
    each hand-off: a few dozen grants, grants taken for one waiter claimed by another or left to
    expire, and acquire(timeout=1) returning after seconds. Here no grant outlives the run
    unclaimed (ttl 10 s: one left to expire would still be there), the lock keeps moving (a
    generous floor: a twentieth of what this machine does unloaded), and no acquire outlasts
    its timeout by more than a margin (a sanity limit for a loaded machine; benchmarks
    measure)."""
    url, name = f"{mariadb_server.url}?table={table}", "crowd"
    with tenure.connect(url) as store:  # creates the table before the processes race to
        store.lock(name, ttl=3).try_acquire().release()  # type: ignore[union-attr]
    processes = [subprocess.Popen([sys.executable, "-c", CROWD, url, name, "20", "4", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
    reports = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    handed = {token for report in reports for token in report["tokens"]}
    assert len(handed) == sum(len(report["tokens"]) for report in reports)  # tokens unique
    with tenure.connect(url) as store:  # each process closed its store, which ran its undos
        assert store.leases(name) == [], "a grant no caller was handed is left to expire"
    # Said on failure: a long gap is the lock stuck (a grant nobody claimed), an even crawl a
    # starved machine.
    times = sorted(t for report in reports for t in report["granted"])
    gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    assert len(handed) >= 60, (
        f"{len(handed)} grants in 4 s: {[r['timeouts'] for r in reports]} timeouts; the longest "
        f"time without a grant {gap:.3f} s")
    slowest = max(report["slowest"] for report in reports)
    assert slowest < 4.0, f"an acquire(timeout=1) returned after {slowest:.2f} s"


WAITER = """
import asyncio, sys, tenure.aio
async def main():
    async with tenure.aio.connect(sys.argv[1]) as store:
        async with store.lock(sys.argv[2], ttl=30).acquire():
            pass
asyncio.run(main())
"""


def test_ctrl_c_of_an_async_waiter_leaves_no_lease_behind(
        mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """An async waiter interrupted by SIGINT while it sleeps on the server: once the holder
    releases, the name is free for another store at once, not held by the dead waiter's try
    for a ttl (found by a new user: 2 of 5 async waiters left a 30 s lease)."""
    url = f"{mariadb_server.url}?table={table}"
    store = MySQLStore(url)
    try:
        for attempt in range(4):
            name = f"ctrl-c-{attempt}"
            held = store.try_acquire(name, "holder", 30.0, 1)
            assert held is not None
            waiter = subprocess.Popen([sys.executable, "-c", WAITER, url, name],
                                      stderr=subprocess.DEVNULL)
            wait_until(lambda name=name: admin.sql(  # type: ignore[misc]
                "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                f"AND INFO LIKE '%tenure-wait {table}%' AND INFO LIKE '%SLEEP(%'"), 15,
                "the waiter to sleep on the server")
            waiter.send_signal(signal.SIGINT)
            assert waiter.wait(20) != 0  # KeyboardInterrupt
            assert store.release(held) is True

            def free(name: str = name) -> bool:
                grant = store.try_acquire(name, "after", 30.0, 1)
                return grant is not None and store.release(grant)

            wait_until(free, 5, f"{name} to be free after the waiter's Ctrl-C")
    finally:
        store.close()


async def test_a_store_closed_while_its_waiter_sleeps_leaves_no_lease_behind(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """close() while a waiter of the store sleeps on the server: the waiter gets the
    closed-store error, and when the holder then releases (which would wake that sleep, and
    run the try sent behind it), the name is free for a third store at once, not held by
    nobody for a ttl (a review found the lease left behind 3 of 3)."""
    url = f"{mariadb_server.url}?table={table}"
    module = tenure.aio if api == "async" else tenure
    holder, waiter, third = module.connect(url), module.connect(url), module.connect(url)
    got: dict[str, Any] = {}
    lock = waiter.lock("closing", ttl=30, min_wait=3, max_wait=3)

    def asleep() -> bool:
        return sleepers(admin, table) == 1

    try:
        held = await call(holder.lock("closing", ttl=30).acquire(timeout=5))
        if api == "async":
            async def wait() -> None:
                try:
                    got["lease"] = await lock.acquire(timeout=20)
                except tenure.StoreRefused as exc:
                    got["error"] = exc

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await eventually(asleep, 5, "the waiter to sleep on the server")
                await waiter.close()
                assert await held.release() is True
        else:
            def wait_in_thread() -> None:
                try:
                    got["lease"] = lock.acquire(timeout=20)
                except tenure.StoreRefused as exc:
                    got["error"] = exc

            thread = threading.Thread(target=wait_in_thread)
            thread.start()
            await eventually(asleep, 5, "the waiter to sleep on the server")
            waiter.close()
            assert held.release() is True
            thread.join(timeout=30)
            assert not thread.is_alive()
        assert "lease" not in got, f"a closed store handed out {got['lease']!r}"
        assert "the store was closed" in str(got.get("error")), got
        lease = await call(third.lock("closing", ttl=30).acquire(timeout=5))
        assert await call(lease.release()) is True
    finally:
        await call(holder.close())
        await call(waiter.close())
        await call(third.close())


async def test_a_release_wakes_a_sleeper_of_its_own_database_only(
        mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """The same table and name in two databases: a release in one wakes that database's
    sleeper, not the other's even when the other has slept longer (found in review)."""
    admin.sql("CREATE DATABASE IF NOT EXISTS tenure_other")
    url = f"{mariadb_server.url}?table={table}"
    other_url = url.replace("/tenure?", "/tenure_other?")
    holder, waiter = AsyncMySQLStore(url), AsyncMySQLStore(url)
    other_holder, other_waiter = AsyncMySQLStore(other_url), AsyncMySQLStore(other_url)
    woken: dict[str, float] = {}

    def oldest_sleep_seconds() -> int:
        return max((int(seconds) for seconds, in admin.sql(
            "SELECT TIME FROM information_schema.PROCESSLIST WHERE INFO LIKE "
            f"CONCAT('%tenure', '-wait {table} %')")), default=0)

    async def waiting(store: AsyncMySQLStore, which: str) -> None:
        # A long ttl: the sleep lasts 4 s (0.8 x timeout), not half the grant's freshness.
        grant = await store.wait_and_acquire("twin", which, 600.0, 1, 10.0, 10.0)
        woken[which] = time.monotonic()
        if which == "ours":
            assert grant is not None and await store.release(grant) is True

    try:
        lease = await holder.try_acquire("twin", "holder", 30.0, 1)
        other = await other_holder.try_acquire("twin", "holder", 30.0, 1)
        assert lease is not None and other is not None
        async with anyio.create_task_group() as group:
            group.start_soon(waiting, other_waiter, "other")
            await eventually(lambda: sleepers(admin, table) == 1, 5, "the other to sleep")
            await eventually(lambda: oldest_sleep_seconds() >= 1, 5, "a second of its sleep")
            group.start_soon(waiting, waiter, "ours")
            await eventually(lambda: sleepers(admin, table) == 2, 5, "ours to sleep")
            released_at = time.monotonic()
            assert await holder.release(lease) is True
            await eventually(lambda: "ours" in woken, 5, "our waiter to wake")
            assert woken["ours"] - released_at < 1.0, "woken by its sleep's end, not the release"
            assert "other" not in woken
            assert await other_holder.release(other) is True
    finally:
        for store in (holder, waiter, other_holder, other_waiter):
            await store.close()
        admin.sql(f"DROP TABLE IF EXISTS tenure_other.`{table}`")


async def test_an_acquire_answered_after_close_began_frees_what_it_took(
        api: str, mariadb_server: MariaDBServer, table: str, admin: Admin) -> None:
    """An acquire in flight when another thread or task closes the store: its grant, which
    the answer brings after the close, is freed on the acquire's connection and the caller
    gets the closed-store error, instead of a lease from a closed store that nobody can
    release (found in review: acquire() returned a held Lease whose release() was refused)."""
    with Forwarder(mariadb_server.port) as forwarder:
        url = f"{mariadb_server.url}?table={table}"
        store = backend(api, url.replace(f":{mariadb_server.port}/", f":{forwarder.port}/"))
        other = backend(api, url)
        got: dict[str, Any] = {}
        try:
            assert await call(store.leases("in-flight")) == []  # a connection, open and idle
            forwarder.freeze()
            if api == "async":
                async def acquire() -> None:
                    try:
                        got["grant"] = await store.try_acquire("in-flight", "late", 30.0, 1)
                    except tenure.StoreRefused as exc:
                        got["error"] = exc

                async with anyio.create_task_group() as group:
                    group.start_soon(acquire)
                    await eventually(lambda: forwarder.pending > 0, 5, "the acquire to be sent")
                    await store.close()
                    forwarder.thaw()
            else:
                def acquire_in_thread() -> None:
                    try:
                        got["grant"] = store.try_acquire("in-flight", "late", 30.0, 1)
                    except tenure.StoreRefused as exc:
                        got["error"] = exc

                thread = threading.Thread(target=acquire_in_thread)
                thread.start()
                await eventually(lambda: forwarder.pending > 0, 5, "the acquire to be sent")
                store.close()
                forwarder.thaw()
                thread.join(timeout=10)
                assert not thread.is_alive()
            assert "grant" not in got, f"a closed store handed out {got['grant']!r}"
            assert "the store was closed" in str(got.get("error")), got
            grant = await call(other.try_acquire("in-flight", "other", 30.0, 1))
            assert grant is not None, "the late acquire's grant was left held"
            assert await call(other.release(grant)) is True
        finally:
            forwarder.thaw()
            await call(store.close())
            await call(other.close())
