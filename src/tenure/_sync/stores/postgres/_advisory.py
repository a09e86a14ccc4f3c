# GENERATED from src/tenure/_async/stores/postgres/_advisory.py by scripts/unasync.py: do not edit.
"""Advisory mode (`mode=advisory`): each lease a session advisory lock held by one of the pool's
connections (many leases share one; freed when that connection ends), with a table for its
holder, token and generation (see _advisory_sql).

Example::

    backend = PostgresStore("postgresql://app@db/app?mode=advisory")
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from tenure._sync import _shim
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.postgres._advisory_sql import (
    _ADVISORY_ACQUIRE,
    _ADVISORY_BREAK,
    _ADVISORY_DDL,
    _ADVISORY_LIST,
    _ADVISORY_RELEASE,
    _ADVISORY_RENEW,
    _ADVISORY_SHAPE,
    _ADVISORY_UNLOCK_AFTER,
    _ADVISORY_UNLOCK_STRAYS,
    _ADVISORY_WRITE_RECORD,
    _advisory_keys,
)
from tenure._sync.stores.postgres._base import PostgresStore, log
from tenure._sync.stores.postgres._connection import _NoAnswer, _Session, close_quietly
from tenure._sync.stores.postgres._statements import _render, _Script, _Statement
from tenure._errors import StoreUnavailable
from tenure._names import name_digest
from tenure._types import Grant, LeaseInfo

# Two acquirers may pick the same slot, or a break move it to a new key meanwhile: tries.
_SLOT_RETRIES = 4


class PostgresAdvisoryStore(PostgresStore):
    """Leases as session advisory locks (see the package's docstring); built by
    PostgresStore for `mode=advisory`. Its sessions are shared by many leases, so a
    statement on one is never interrupted (see _on_session).

    Example::

        backend = PostgresStore("postgresql://app@db/app", mode="advisory")
    """

    _ddl_template = _ADVISORY_DDL
    _shape = _ADVISORY_SHAPE
    _write_record_template = _ADVISORY_WRITE_RECORD
    _record_slot = -1

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        table = self._sql_table
        self._advisory_sql = {
            name: _render(template, table) for name, template in (
                ("acquire", _ADVISORY_ACQUIRE), ("strays", _ADVISORY_UNLOCK_STRAYS),
                ("release", _ADVISORY_RELEASE), ("unlock after", _ADVISORY_UNLOCK_AFTER),
                ("break", _ADVISORY_BREAK), ("list", _ADVISORY_LIST))}
        self._renew_sql = _render(_ADVISORY_RENEW, table)
        # The key of its lock keys (see _advisory_keys).
        self._namespace = hashlib.blake2b(f"{self.schema}.{self.table}".encode(),
                                          digest_size=32).digest()

    def _held_leases(self) -> str:
        return f", holding {len(self._holding)} advisory lease(s)"

    def _on_session(self, session: _Session, query: bytes | _Statement | _Script,
                          params: dict[str, Any], lease_id: str, reading: bool = False) -> Any:
        """A statement is not interrupted by a cancellation (it runs to its answer, within
        `timeout`): a connection interrupted mid-statement is closed, and its session's locks,
        those of other leases too, would go with it. With `lease_id`: an acquire."""
        with _shim.shielded():
            if lease_id:
                return self._send_acquire(session, query, params, lease_id)
            return self._send_creating(session, query, params, reading)

    def _send_acquire(self, session: _Session, query: bytes | _Statement | _Script,
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
            rows = self._send_creating(session, query, params)
        except BaseException as exc:
            connection = session.connection
            if (isinstance(exc, _NoAnswer) and session.leases
                    and not self._pool.settle(session)):
                self._lose(session)  # its holders are told before the server frees them
                close_quietly(connection)
            if (not connection.closed
                    and connection.pgconn.transaction_status == TransactionStatus.IDLE):
                try:
                    with _shim.shielded():
                        self._send(session, self._advisory_sql["strays"], params)
                except BaseException:  # (the first exception is the one raised)
                    # A stray lock would keep its name until the store closes: end the session,
                    # even though the leases it holds go with it.
                    self._lose(session)
                    close_quietly(connection)
            raise
        if rows and rows[0][0] >= 0:
            with self._mutex:
                session.hold(lease_id, name, rows[0][2])
                self._holding[lease_id] = session
        return rows

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "limit": limit, "holder": holder.encode(),
                  "lease_id": lease_id, "ttl": ttl}
        started = _shim.monotonic()
        params["keys"] = _advisory_keys(self._namespace, name, limit)
        for _ in range(_SLOT_RETRIES):
            rows = self._execute("acquire", name, self._advisory_sql["acquire"],
                                       params, lease_id=lease_id)
            if not rows:
                break  # no slot was free
            slot, token, _key = rows[0]
            if slot >= 0:
                return self._keep_unless_cancelled(
                    Grant(name, slot, holder, lease_id, token, name))
            # A break moved the slot to a new key meanwhile: it may be free now.
        if self._notify:  # see wait_and_acquire
            self._listener.note_missed(name, started)
        return None

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        encoded = prefix.encode()
        rows = self._execute("listing", prefix, self._advisory_sql["list"],
                                   {"prefix": encoded, "length": len(encoded)}, reading=True)
        return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token, None, slot)
                for name, slot, holder, token in rows]
    def _keep_unless_cancelled(self, grant: Grant) -> Grant:
        """`grant`, taken by a statement that a cancellation could not interrupt (see
        _execute); a cancellation that came meanwhile lands here, and the lease is released
        rather than left held by a session with nobody to release it."""
        try:
            _shim.sleep(0)
        except BaseException:
            with _shim.shielded(), contextlib.suppress(StoreUnavailable):
                self._release_held(grant)
            raise
        return grant

    def release(self, grant: Grant) -> bool:
        if self._pool.closed:  # the lease's pinned connection is gone with the store
            raise closed_store(self.url, "release", grant.name)
        return self._release_held(grant)

    def _release_held(self, grant: Grant) -> bool:
        """Unlock on the session that holds the lease's lock (waiting for its turn when that
        session runs another statement), which stays in the pool. Its session gone (closed,
        dropped): False, its locks went with it."""
        with self._mutex:
            session = self._holding.get(grant.lease_id)
        if session is None:
            return False  # released before, lost with its session, or not of this store
        if not self._pool.take_holding(session, grant.name):
            return False
        params = {"name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
                  "lock": session.leases[grant.lease_id][1], "channel": self.channel,
                  "key": name_digest(grant.name)}
        try:
            with _shim.shielded():  # interrupted, the session would close: all its leases
                try:
                    rows = self._send(session, self._advisory_sql["release"], params)
                except (_NoAnswer, psycopg.Error) as exc:
                    rows = self._unlock_after(session, grant, params, exc)
            with self._mutex:
                if grant.lease_id in session.leases:
                    session.unhold(grant.lease_id)
                self._holding.pop(grant.lease_id, None)
            return bool(rows and rows[0][1])
        finally:
            self._pool.give_back(session)

    def _unlock_after(self, session: _Session, grant: Grant, params: dict[str, Any],
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
            settled = self._pool.settle(session)
        else:
            settled = connection.pgconn.transaction_status == TransactionStatus.IDLE
        if settled:
            try:
                rows = self._send(session, self._advisory_sql["unlock after"], params)
            except (_NoAnswer, psycopg.Error) as again:
                log.debug("tenure: %s: release of %r: unlocking after a failure failed too: %s",
                          self.url, grant.name, self._clean(again))
            else:
                log.debug("tenure: %s: release of %r failed (%s); its lock was given back",
                          self.url, grant.name, self._clean(exc))
                return rows
        self._lose(session)  # its other leases: their holders are told before the close
        close_quietly(connection)
        if isinstance(exc, _NoAnswer):
            raise self._no_answer("release", grant.name) from None
        raise self._failure("release", grant.name, exc) from exc

    def break_lease(self, name: str) -> int:
        """Mark the live leases of `name` broken and move their slots to new lock keys (see
        _ADVISORY_BREAK): their holders' sessions, which hold other leases too, live on."""
        rows = self._execute("break", name, self._advisory_sql["break"], {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)
