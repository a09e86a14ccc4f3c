"""Advisory mode's waiter waits on the server: a blocking `pg_advisory_lock` queued behind the
holder, woken by the release itself (no polling, no NOTIFY), in the server's FIFO order; a wait
that is cancelled or times out leaves no advisory lock behind, and its store stays usable."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import psycopg
import pytest
from handover import acquired_after_release
from psycopg.client_cursor import ClientCursorMixin
from servers import PostgresServer
from waiting import call, eventually, wait_until

import tenure
import tenure.aio
from tenure._async.stores.postgres._advisory_sql import _advisory_keys

pytestmark = pytest.mark.anyio


@pytest.fixture
def connect(api: str, postgres_server: PostgresServer,
            schema: str) -> Iterator[Callable[..., Any]]:
    """`connect(url_query, **options)`: a new advisory-mode Store on this test's schema
    (`url_query` appended to its URL); sync ones are closed at the end, async ones by the test
    (they need its event loop)."""
    stores: list[Any] = []

    def make(url_query: str = "", **options: Any) -> Any:
        module = tenure.aio if api == "async" else tenure
        store = module.connect(f"{postgres_server.url}?schema={schema}&mode=advisory"
                               f"{url_query}", **options)
        stores.append(store)
        return store

    yield make
    if api == "sync":
        for store in stores:
            store.close()


def query(server: PostgresServer, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(server.url, autocommit=True) as db:
        return db.execute(text, params).fetchall()  # type: ignore[no-any-return]


def key_of(store: Any, name: str) -> int:
    """The advisory lock key of lock `name`'s slot (generation 0: nothing was broken)."""
    return _advisory_keys(store.backend._namespace, name, 1)[0]


def locks(server: PostgresServer, key: int, granted: bool) -> list[int]:
    """The backend pids holding (`granted`) or queued for the advisory lock `key`, queued
    ones in the order the server grants them."""
    return [pid for (pid,) in query(
        server, "SELECT l.pid FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted = %s "
                "AND l.classid = ((%s::int8 >> 32) & 4294967295)::oid "
                "AND l.objid = (%s::int8 & 4294967295)::oid ORDER BY a.query_start",
        granted, key, key)]


def advisory_locks_of(server: PostgresServer, application_name: str) -> int:
    """How many advisory locks (granted or queued) the backends of one client hold."""
    return int(query(
        server, "SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                "WHERE l.locktype = 'advisory' AND a.application_name = %s",
        application_name)[0][0])


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement psycopg sends from this process through a cursor, and the waits (which
    the store renders with a client cursor's mogrify and sends through libpq itself)."""
    sent: list[str] = []
    sync_execute, async_execute = psycopg.Cursor.execute, psycopg.AsyncCursor.execute
    mogrify = ClientCursorMixin.mogrify

    def rendered(self: Any, query: Any, params: Any = None) -> str:
        text: str = mogrify(self, query, params)
        sent.append(text)
        return text

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return sync_execute(self, query, params, **kwargs)

    async def aexecute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return await async_execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(psycopg.AsyncCursor, "execute", aexecute)
    monkeypatch.setattr(ClientCursorMixin, "mogrify", rendered)
    return sent


async def test_the_waiter_is_queued_on_the_server_and_woken_by_the_release(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        statements: list[str]) -> None:
    """Backoff 10 s and notify=false: only the server's own wake-up can hand the lock over
    quickly; the waiter sends its try and its wait, and nothing else until it holds it."""
    holder, waiter = connect(), connect(notify=False)
    held = await call(holder.lock("bell", ttl=30).try_acquire())
    assert held is not None
    key = key_of(holder, "bell")
    lock = waiter.lock("bell", ttl=30, min_wait=10, max_wait=10)
    sent_before = len(statements)

    async def release() -> None:
        assert await call(held.release()) is True

    lease, seconds = await acquired_after_release(
        api, lock, lambda: len(locks(postgres_server, key, granted=False)) == 1,
        "the waiter to queue on the server for the advisory lock", release)
    assert seconds < 5, f"held {seconds:.3f} s after the release; the backoff is 10 s"
    assert lease.token > held.token
    waiter_statements = [text for text in statements[sent_before:]
                         if "tenure_advisory" in text  # the store's, not this test's
                         and "freed AS" not in text]  # nor the holder's release
    assert len(waiter_statements) == 2, waiter_statements  # its try, then its wait
    assert "pg_advisory_lock(" in waiter_statements[1]
    assert len(locks(postgres_server, key, granted=True)) == 1
    assert await call(lease.release()) is True
    if api == "async":
        await holder.close()
        await waiter.close()


async def test_two_waiters_are_served_in_the_order_they_queued(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer) -> None:
    """FIFO by the server's lock queue; the releaser asking again at once finds the lock
    already handed to the first waiter."""
    holder, first, second = connect(), connect(), connect()
    key = key_of(holder, "line")
    held = await call(holder.lock("line", ttl=30).try_acquire())
    assert held is not None
    order: list[str] = []
    leases: dict[str, Any] = {}
    gates = {"first": threading.Event(), "second": threading.Event()}
    agates = {"first": anyio.Event(), "second": anyio.Event()}

    def queued(count: int) -> Callable[[], bool]:
        return lambda: len(locks(postgres_server, key, granted=False)) == count

    if api == "async":
        async def take(who: str, store: Any) -> None:
            leases[who] = await store.lock("line", ttl=30).acquire(timeout=30)
            order.append(who)
            await agates[who].wait()
            await leases[who].release()

        async with anyio.create_task_group() as group:
            group.start_soon(take, "first", first)
            await eventually(queued(1), 10, "the first waiter to queue")
            group.start_soon(take, "second", second)
            await eventually(queued(2), 10, "the second waiter to queue")
            assert await held.release() is True
            assert await holder.lock("line", ttl=30).try_acquire() is None
            await eventually(lambda: order == ["first"], 10, "the first waiter to hold it")
            agates["first"].set()
            await eventually(lambda: order == ["first", "second"], 10, "the second's turn")
            agates["second"].set()
        await holder.close()
        await first.close()
        await second.close()
    else:
        def take_in_thread(who: str, store: Any) -> None:
            leases[who] = store.lock("line", ttl=30).acquire(timeout=30)
            order.append(who)
            gates[who].wait(30)
            leases[who].release()

        threads = [threading.Thread(target=take_in_thread, args=("first", first)),
                   threading.Thread(target=take_in_thread, args=("second", second))]
        threads[0].start()
        await eventually(queued(1), 10, "the first waiter to queue")
        threads[1].start()
        await eventually(queued(2), 10, "the second waiter to queue")
        assert held.release() is True
        assert holder.lock("line", ttl=30).try_acquire() is None
        await eventually(lambda: order == ["first"], 10, "the first waiter to hold it")
        gates["first"].set()
        await eventually(lambda: order == ["first", "second"], 10, "the second's turn")
        gates["second"].set()
        for thread in threads:
            thread.join(30)
    assert leases["second"].token > leases["first"].token > held.token


async def test_a_cancelled_wait_on_the_server_leaves_no_lock(
        postgres_server: PostgresServer, schema: str) -> None:
    url = f"{postgres_server.url}?schema={schema}&mode=advisory"
    holder = tenure.aio.connect(url)
    waiter = tenure.aio.connect(f"{url}&application_name=cancelled-waiter-{schema}")
    key = key_of(holder, "gone")
    held = await holder.lock("gone", ttl=30).try_acquire()
    assert held is not None
    async def wait() -> None:
        await waiter.lock("gone", ttl=30).acquire(timeout=30)
        pytest.fail("the wait was not cancelled")

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await eventually(lambda: len(locks(postgres_server, key, granted=False)) == 1, 10,
                         "the waiter to queue on the server")
        group.cancel_scope.cancel()
    await eventually(lambda: advisory_locks_of(postgres_server,
                                               f"cancelled-waiter-{schema}") == 0,
                     10, "the cancelled wait to leave the server's lock queue")
    assert await held.release() is True
    # Nothing of the cancelled wait holds it, and the waiter's store still works.
    lease = await waiter.lock("gone", ttl=30).try_acquire()
    assert lease is not None and lease.token > held.token
    assert await lease.release() is True
    assert advisory_locks_of(postgres_server, f"cancelled-waiter-{schema}") == 0
    await holder.close()
    await waiter.close()


async def test_a_timed_out_wait_on_the_server_leaves_no_lock(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer,
        schema: str) -> None:
    holder = connect()
    waiter = connect(f"&application_name=timed-out-waiter-{schema}")
    key = key_of(holder, "late")
    held = await call(holder.lock("late", ttl=30).try_acquire())
    assert held is not None
    seen_queued: list[bool] = []
    result: dict[str, Any] = {}
    lock = waiter.lock("late", ttl=30, min_wait=10, max_wait=10)

    async def watch() -> None:
        await eventually(lambda: len(locks(postgres_server, key, granted=False)) == 1, 10,
                         "the waiter to queue on the server")
        seen_queued.append(True)

    started = time.monotonic()
    if api == "async":
        async def acquire() -> None:
            with pytest.raises(tenure.LockTimeout):
                await lock.acquire(timeout=1.5)
            result["done"] = time.monotonic()

        async with anyio.create_task_group() as group:
            group.start_soon(acquire)
            await watch()
    else:
        def acquire_in_thread() -> None:
            try:
                lock.acquire(timeout=1.5)
            except tenure.LockTimeout:
                result["done"] = time.monotonic()

        thread = threading.Thread(target=acquire_in_thread)
        thread.start()
        await watch()
        thread.join(30)
    assert seen_queued and "done" in result, "the acquire did not time out"
    assert result["done"] - started < 10  # a sanity bound: its timeout is 1.5 s
    assert advisory_locks_of(postgres_server, f"timed-out-waiter-{schema}") == 0
    assert locks(postgres_server, key, granted=False) == []
    assert await call(held.release()) is True
    lease = await call(waiter.lock("late", ttl=30).try_acquire())  # its store still works
    assert lease is not None and lease.token > held.token
    assert await call(lease.release()) is True
    if api == "async":
        await holder.close()
        await waiter.close()


async def test_a_wait_longer_than_the_store_timeout_ends_as_a_lock_timeout(
        api: str, connect: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    """timeout=0.3 (the sessions' statement_timeout) and a wait on the server of up to 1 s:
    the wait's own statement_timeout (the wait plus `timeout`) lets it run to its
    lock_timeout, and the acquire ends with LockTimeout, no store error on the way (the
    session's 0.3 s cancelled each wait: StoreUnavailable after 1.5 s of warnings)."""
    holder, waiter = connect("&timeout=0.3"), connect("&timeout=0.3")
    held = await call(holder.lock("slow", ttl=30).try_acquire())
    assert held is not None
    with caplog.at_level(logging.WARNING, logger="tenure"), pytest.raises(tenure.LockTimeout):
        await call(waiter.lock("slow", ttl=30, min_wait=10, max_wait=10).acquire(timeout=1.5))
    assert [r.getMessage() for r in caplog.records if "store error" in r.getMessage()] == []
    assert await call(held.release()) is True
    if api == "async":
        await holder.close()
        await waiter.close()


async def test_a_semaphore_waiter_still_waits_by_notice(
        api: str, connect: Callable[..., Any], postgres_server: PostgresServer) -> None:
    """A semaphore's waiter is not queued on one slot's lock (another slot may be freed
    first): it waits for the release notice, as before, and takes the freed slot."""
    holder, waiter = connect(), connect()
    keys = _advisory_keys(holder.backend._namespace, "pair", 2)
    sem = holder.semaphore("pair", 2, ttl=30)
    held = [await call(sem.try_acquire()) for _ in range(2)]
    assert all(lease is not None for lease in held)

    def listening() -> bool:
        return bool(waiter.backend._listener.waiters)

    async def release() -> None:
        assert await call(held[1].release()) is True

    lock = waiter.semaphore("pair", 2, ttl=30, min_wait=10, max_wait=10)
    lease, seconds = await acquired_after_release(
        api, lock, listening, "the waiter to listen for a release", release,
        before_release=lambda: [locks(postgres_server, key, granted=False)
                                for key in keys] == [[], []] or pytest.fail("queued"))
    assert seconds < 5
    assert lease.slot == 1
    for other in (lease, held[0]):
        assert await call(other.release()) is True
    if api == "async":
        await holder.close()
        await waiter.close()


def test_a_sync_waiter_on_the_server_runs_signal_handlers_in_arrival_order(
        postgres_server: PostgresServer, schema: str) -> None:
    """A blocking waiter queued on the server takes the process's signals as they come, as a
    waiter sleeping between tries does: SIGURG, then SIGUSR2 once SIGURG's handler ran (or
    50 ms later), run in that order. psycopg's C wait runs handlers only at its 100 ms ticks,
    all pending ones in signal-number order (SIGUSR2 first): how `tenure chaos` asked a waiter
    to hold its section, then to forget it, and the waiter held its next section anyway."""
    url = f"{postgres_server.url}?schema={schema}&mode=advisory"
    with tenure.connect(url) as holder_store, tenure.connect(url, notify=False) as store:
        held = holder_store.lock("bell", ttl=30).try_acquire()
        assert held is not None
        key = key_of(holder_store, "bell")
        order: list[str] = []
        failures: list[BaseException] = []
        released: list[bool] = []
        previous = {number: signal.getsignal(number)
                    for number in (signal.SIGURG, signal.SIGUSR2)}
        signal.signal(signal.SIGURG, lambda *_: order.append("URG"))
        signal.signal(signal.SIGUSR2, lambda *_: order.append("USR2"))

        def nemesis() -> None:
            try:
                for trial in range(6):
                    wait_until(lambda: len(locks(postgres_server, key, granted=False)) == 1,
                               timeout=10, what="the waiter to queue on the server")
                    os.kill(os.getpid(), signal.SIGURG)
                    # The scenario's gap, not a synchronization: USR2 follows URG's handler.
                    deadline = time.monotonic() + 0.05
                    while len(order) < 2 * trial + 1 and time.monotonic() < deadline:
                        time.sleep(0.001)
                    os.kill(os.getpid(), signal.SIGUSR2)
                    wait_until(lambda n=2 * trial + 2: len(order) >= n, timeout=5,
                               what="both handlers to run")
            except BaseException as exc:
                failures.append(exc)
            finally:
                released.append(held.release())

        thread = threading.Thread(target=nemesis)
        try:
            thread.start()
            with store.lock("bell", ttl=30, min_wait=10, max_wait=10).acquire(timeout=60):
                pass
            thread.join(timeout=30)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        assert not failures, failures
        assert released == [True]
        assert order == ["URG", "USR2"] * 6, order
