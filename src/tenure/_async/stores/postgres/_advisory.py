"""Advisory mode (`mode=advisory`): each lease a session advisory lock held by one of the pool's
connections (many leases share one; freed when that connection ends), with a table for its
holder, token and generation (see _advisory_sql).

Example::

    backend = AsyncPostgresStore("postgresql://app@db/app?mode=advisory")
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import psycopg
from psycopg import errors, generators, waiting
from psycopg.abc import PQGen
from psycopg.pq import ExecStatus, TransactionStatus

from tenure._async import _shim
from tenure._async.stores._protocol import closed_store
from tenure._async.stores.postgres._advisory_sql import (
    _ADVISORY_ACQUIRE,
    _ADVISORY_BREAK,
    _ADVISORY_DDL,
    _ADVISORY_FORGET,
    _ADVISORY_LIST,
    _ADVISORY_RELEASE,
    _ADVISORY_RELEASE_FORGET,
    _ADVISORY_RENEW,
    _ADVISORY_SHAPE,
    _ADVISORY_UNLOCK_AFTER,
    _ADVISORY_UNLOCK_ALL,
    _ADVISORY_UNLOCK_STRAYS,
    _ADVISORY_UPGRADE,
    _ADVISORY_WAIT,
    _ADVISORY_WRITE_RECORD,
    _advisory_keys,
)
from tenure._async.stores.postgres._base import AsyncPostgresStore, log
from tenure._async.stores.postgres._connection import (
    _WAIT_INTERVAL,
    RV,
    Connection,
    _bounded,
    _Connection,
    _NoAnswer,
    _Session,
    close_quietly,
)
from tenure._async.stores.postgres._statements import _render, _Script, _Statement
from tenure._errors import StoreUnavailable
from tenure._names import name_digest
from tenure._types import Grant, LeaseInfo

# Two acquirers may pick the same slot, or a break move it to a new key meanwhile: tries.
_SLOT_RETRIES = 4
# A lock's wait on the server lasts this long at most, then the waiter asks again (at the back
# of the queue): a break moves the slot to a new key, which a wait on the old one does not see.
_WAIT_AT_MOST = 1.0
# A wait on the server ends this long before the acquire's patience does, so that its answer
# (LockNotAvailable) comes back before the core cuts the call short; with less patience than
# twice this left, one plain try instead.
_WAIT_MARGIN = 0.002


def _wait_promptly(connection: Connection, gen: PQGen[RV]) -> RV:
    """A blocking wait for the server's answer to `gen` on `connection`, within its client-side
    bound, in Python's poll(): a signal that comes meanwhile has its Python handler run at once
    (PEP 475), as it would in a waiter's time.sleep. psycopg's C wait runs the handlers only at
    its 100 ms ticks, and then all pending ones in signal-number order, not arrival order: a
    process told SIGURG then, 24 ms later, SIGUSR2 while its waiter waited on the server ran
    the SIGUSR2 handler first (how `tenure chaos` tells a worker to hold its section, then to
    forget it: the waiter held its next section for 5 s).

    Example::

        results = _wait_promptly(connection, generators.execute(connection.pgconn))
    """
    bound = connection.bound if isinstance(connection, _Connection) else None
    if bound is not None:
        gen = _bounded(gen, bound)
    wait = getattr(waiting, "wait_poll", waiting.wait_select)  # no poll() on Windows
    # The interval positionally: psycopg 3.2 names it `timeout`, 3.3 `interval`.
    result: RV = wait(gen, connection.pgconn.socket, _WAIT_INTERVAL)
    return result


class AsyncPostgresAdvisoryStore(AsyncPostgresStore):
    """Leases as session advisory locks (see the package's docstring); built by
    AsyncPostgresStore for `mode=advisory`. Its sessions are shared by many leases, so a
    statement on one is never interrupted (see _on_session).

    Example::

        backend = AsyncPostgresStore("postgresql://app@db/app", mode="advisory")
    """

    _ddl_template = _ADVISORY_DDL
    _upgrade_template = _ADVISORY_UPGRADE
    _forget_template = _ADVISORY_FORGET
    _shape = _ADVISORY_SHAPE
    _write_record_template = _ADVISORY_WRITE_RECORD
    _record_slot = -1

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        table = self._sql_table
        self._advisory_sql = {
            name: _render(template, table) for name, template in (
                ("acquire", _ADVISORY_ACQUIRE), ("strays", _ADVISORY_UNLOCK_STRAYS),
                # retain=0: a release deletes the lease's row (see _ADVISORY_RELEASE_FORGET)
                ("release", _ADVISORY_RELEASE_FORGET if self.retain == 0 else
                 _ADVISORY_RELEASE), ("unlock after", _ADVISORY_UNLOCK_AFTER),
                ("break", _ADVISORY_BREAK), ("list", _ADVISORY_LIST))}
        self._renew_sql = _render(_ADVISORY_RENEW, table)
        self._wait_sql = _render(_ADVISORY_WAIT, table)
        # The key of its lock keys (see _advisory_keys).
        self._namespace = hashlib.blake2b(f"{self.schema}.{self.table}".encode(),
                                          digest_size=32).digest()

    def _held_leases(self) -> str:
        return f", holding {len(self._holding)} advisory lease(s)"

    async def _on_session(self, session: _Session, query: bytes | _Statement | _Script,
                          params: dict[str, Any], lease_id: str, reading: bool = False) -> Any:
        """A statement is not interrupted by a cancellation (it runs to its answer, within
        `timeout`): a connection interrupted mid-statement is closed, and its session's locks,
        those of other leases too, would go with it. With `lease_id`: an acquire."""
        with _shim.shielded():
            if lease_id:
                return await self._send_acquire(session, query, params, lease_id)
            return await self._send_creating(session, query, params, reading)

    async def _send_acquire(self, session: _Session, query: bytes | _Statement | _Script,
                            params: dict[str, Any], lease_id: str) -> Any:
        """An advisory acquire on `session`: it skips the keys this session holds for the name
        (a session lock is re-entrant), and a grant is recorded as held by this session. A
        statement that failed, or was interrupted (psycopg then cancels it on the server and
        waits until the connection is idle: it may have run to its end), may have taken a lock,
        which outlives the statement: given back before the session serves anyone else. One
        that got no answer within `timeout` is cancelled first when the session holds leases
        (see _settle); else the session is closed, and the lock with it."""
        name = params["name"].decode()
        params["mine"] = list(session.keys.get(name, ()))
        try:
            rows = await self._send_creating(session, query, params)
        except BaseException as exc:
            connection = session.connection
            if (isinstance(exc, _NoAnswer) and session.leases
                    and not await self._pool.settle(session)):
                self._lose(session)  # its holders are told before the server frees them
                await close_quietly(connection)
            if (not connection.closed
                    and connection.pgconn.transaction_status == TransactionStatus.IDLE):
                try:
                    with _shim.shielded():
                        await self._send(session, self._advisory_sql["strays"], params)
                except BaseException:  # (the first exception is the one raised)
                    # A stray lock would keep its name until the store closes: end the session,
                    # even though the leases it holds go with it.
                    self._lose(session)
                    await close_quietly(connection)
            raise
        if rows and rows[0][0] >= 0:
            with self._mutex:
                session.hold(lease_id, name, rows[0][2])
                self._holding[lease_id] = session
        return rows

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "limit": limit, "holder": holder.encode(),
                  "lease_id": lease_id, "ttl": ttl}
        started = _shim.monotonic()
        params["keys"] = _advisory_keys(self._namespace, name, limit)
        for _ in range(_SLOT_RETRIES):
            rows = await self._execute("acquire", name, self._advisory_sql["acquire"],
                                       params, lease_id=lease_id)
            if not rows:
                break  # no slot was free
            slot, token, _key = rows[0]
            if slot >= 0:
                return await self._keep_unless_cancelled(
                    Grant(name, slot, holder, lease_id, token, name))
            # A break moved the slot to a new key meanwhile: it may be free now.
        if self._notify:  # see wait_and_acquire
            self._listener.note_missed(name, started)
        return None

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """A lock's waiter waits on the server: a blocking `pg_advisory_lock` on a session that
        holds no lease, bounded by `lock_timeout` (the acquire's patience, at most
        _WAIT_AT_MOST), that takes the lease, counter and row included, in the same round trip
        once the release frees the lock (see _ADVISORY_WAIT). The server queues waiters in
        arrival order and hands the lock to the first: no polling, no backoff, FIFO. A
        semaphore's waiter, or one that finds no session free of leases (or pool_size - 1
        waiting already: see take_free), waits for a release notice and tries, as in table mode
        (see the base class).

        Example::

            grant = await backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.05, 10.0)
        """
        if limit != 1:
            return await super().wait_and_acquire(name, holder, ttl, limit, timeout, patience)
        wait = min(patience - _WAIT_MARGIN, _WAIT_AT_MOST)
        if wait < _WAIT_MARGIN:  # about to give up: one plain try
            sent_at = _shim.monotonic()
            grant = await self.try_acquire(name, holder, ttl, limit)
            return None if grant is None else grant._replace(sent_at=sent_at)
        session = await self._pool.take_free()
        if session is None:
            return await super().wait_and_acquire(name, holder, ttl, limit, timeout, patience)
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "holder": holder.encode(), "lease_id": lease_id,
                  "key": _advisory_keys(self._namespace, name, 1)[0],
                  "wait": f"{max(1, int(wait * 1000))}ms",
                  "statement": f"{max(1, int((wait + self._timeout) * 1000))}ms"}
        sent_at = _shim.monotonic()
        try:
            rows = await self._wait_on(session, name, params, wait)
        finally:
            await self._pool.end_wait(session)  # closed there if the wait left it unusable
        if not rows or rows[0][0] < 0:
            return None  # timed out, or a break moved the lock to a new key meanwhile
        _slot, token, _key = rows[0]
        return await self._keep_unless_cancelled(
            Grant(name, 0, holder, lease_id, token, name, sent_at))

    async def _wait_on(self, session: _Session, name: str, params: dict[str, Any],
                       wait: float) -> Any:
        """_ADVISORY_WAIT on `session` (which holds no lease): its rows, none when the wait
        timed out. Its client-side bound is `wait` plus `timeout`. A cancellation interrupts
        it: psycopg cancels the statement on the server and reads its answer. Whatever ended
        it early (a timeout, a cancellation, an error), the lock it may have taken is given
        back before the session serves anyone else (_ADVISORY_UNLOCK_ALL: the session holds
        nothing else); when that cannot be done the session is closed, and the lock with it."""
        connection = session.connection
        bound = connection.bound if isinstance(connection, _Connection) else None
        if isinstance(connection, _Connection):
            connection.bound = wait + self._timeout
        try:
            try:
                rows = await self._send_wait(session, params)
            except (errors.UndefinedTable, errors.InvalidSchemaName, errors.UndefinedColumn):
                await self._create_tables(session.cursor)
                rows = await self._send_wait(session, params)
        except errors.LockNotAvailable:
            await self._unlock_all(session)
            return []
        except BaseException as exc:
            await self._unlock_all(session)
            if isinstance(exc, _NoAnswer):
                raise self._no_answer("waiting", name) from None
            if isinstance(exc, psycopg.Error):
                raise self._failure("waiting", name, exc) from exc
            raise
        finally:
            if isinstance(connection, _Connection):
                connection.bound = bound
        if rows and rows[0][0] >= 0:
            with self._mutex:
                session.hold(params["lease_id"], name, rows[0][2])
                self._holding[params["lease_id"]] = session
        return rows

    async def _send_wait(self, session: _Session, params: dict[str, Any]) -> Any:
        """Send _ADVISORY_WAIT (two statements in one simple query): the second's rows, as
        ints. A blocking (sync) wait waits for the answer in Python's poll(), not psycopg's C
        wait (see _wait_promptly)."""
        connection = session.connection
        pgconn = connection.pgconn
        query = psycopg.AsyncClientCursor(connection).mogrify(self._wait_sql, params)
        pgconn.send_query(query.encode(connection.info.encoding))
        if _shim.BLOCKING:
            results = _wait_promptly(connection, generators.execute(pgconn))
        else:
            results = await connection.wait(generators.execute(pgconn))
        for result in results:
            if result.status == ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=connection.info.encoding)
        last = results[-1]
        return [tuple(int(last.get_value(row, column) or 0) for column in range(3))
                for row in range(last.ntuples)]

    async def _unlock_all(self, session: _Session) -> None:
        """Free every lock of `session`, a waiter's, which holds no lease; closed when that
        cannot be done (the server then frees them)."""
        connection = session.connection
        with _shim.shielded():
            if (not connection.closed
                    and connection.pgconn.transaction_status == TransactionStatus.IDLE):
                try:
                    await self._send(session, _ADVISORY_UNLOCK_ALL.encode(), {})
                    return
                except (_NoAnswer, psycopg.Error, OSError) as exc:
                    log.debug("tenure: %s: unlocking a waiter's session failed, closing it: "
                              "%s", self.url, self._clean(exc))
            await close_quietly(connection)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        encoded = prefix.encode()
        rows = await self._execute("listing", prefix, self._advisory_sql["list"],
                                   {"prefix": encoded, "length": len(encoded)}, reading=True)
        return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token, None, slot)
                for name, slot, holder, token in rows]
    async def _keep_unless_cancelled(self, grant: Grant) -> Grant:
        """`grant`, taken by a statement that a cancellation could not interrupt (see
        _execute); a cancellation that came meanwhile lands here, and the lease is released
        rather than left held by a session with nobody to release it. A blocking (sync) call
        has no cancellation to take: sleep(0) there would only give the CPU away, a context
        switch in the middle of every grant."""
        if _shim.BLOCKING:
            return grant
        try:
            await _shim.sleep(0)
        except BaseException:
            with _shim.shielded(), contextlib.suppress(StoreUnavailable):
                await self._release_held(grant)
            raise
        return grant

    async def release(self, grant: Grant) -> bool:
        if self._pool.closed:  # the lease's pinned connection is gone with the store
            raise closed_store(self.url, "release", grant.name)
        self._sweep_soon()
        return await self._release_held(grant)

    async def _release_held(self, grant: Grant) -> bool:
        """Unlock on the session that holds the lease's lock (waiting for its turn when that
        session runs another statement), which stays in the pool. Its session gone (closed,
        dropped): False, its locks went with it."""
        with self._mutex:
            session = self._holding.get(grant.lease_id)
        if session is None:
            return False  # released before, lost with its session, or not of this store
        if not await self._pool.take_holding(session, grant.name):
            return False
        params = {"name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
                  "lock": session.leases[grant.lease_id][1], "channel": self.channel,
                  "key": name_digest(grant.name)}
        try:
            with _shim.shielded():  # interrupted, the session would close: all its leases
                try:
                    rows = await self._send(session, self._advisory_sql["release"], params)
                except (_NoAnswer, psycopg.Error) as exc:
                    rows = await self._unlock_after(session, grant, params, exc)
            with self._mutex:
                if grant.lease_id in session.leases:
                    session.unhold(grant.lease_id)
                self._holding.pop(grant.lease_id, None)
            return bool(rows and rows[0][1])
        finally:
            await self._pool.give_back(session)

    async def _unlock_after(self, session: _Session, grant: Grant, params: dict[str, Any],
                            exc: _NoAnswer | psycopg.Error) -> Any:
        """The release statement of `grant` failed, or got no answer, so whether its unlock
        ran is unknown. A broken connection: the session ended, and its locks with it (no
        rows: False). Else, once the session is idle again (a statement with no answer is
        cancelled first, see _settle), the lock is given back for sure (_ADVISORY_UNLOCK_AFTER,
        whose rows answer for the release). When that cannot be done, the session is closed,
        the last resort (its other leases are lost, their holders told at once), and the
        failure raised."""
        connection = session.connection
        if connection.broken or connection.closed:
            return []
        if isinstance(exc, _NoAnswer):
            settled = await self._pool.settle(session)
        else:
            settled = connection.pgconn.transaction_status == TransactionStatus.IDLE
        if settled:
            try:
                rows = await self._send(session, self._advisory_sql["unlock after"], params)
            except (_NoAnswer, psycopg.Error) as again:
                log.debug("tenure: %s: release of %r: unlocking after a failure failed too: %s",
                          self.url, grant.name, self._clean(again))
            else:
                log.debug("tenure: %s: release of %r failed (%s); its lock was given back",
                          self.url, grant.name, self._clean(exc))
                return rows
        self._lose(session)  # its other leases: their holders are told before the close
        await close_quietly(connection)
        if isinstance(exc, _NoAnswer):
            raise self._no_answer("release", grant.name) from None
        raise self._failure("release", grant.name, exc) from exc

    async def break_lease(self, name: str) -> int:
        """Mark the live leases of `name` broken and move their slots to new lock keys (see
        _ADVISORY_BREAK): their holders' sessions, which hold other leases too, live on."""
        rows = await self._execute("break", name, self._advisory_sql["break"], {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)
