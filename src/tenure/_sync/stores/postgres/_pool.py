# GENERATED from src/tenure/_async/stores/postgres/_pool.py by scripts/unasync.py: do not edit.
"""The store's pool of connections: a BoundedPool of at most `pool_size` sessions, idle ones
checked without a round trip; on top of it, what advisory mode needs: a session that holds
advisory leases is handed from call to call (take_holding) rather than closed when a
statement gets no answer (settle).

Example::

    pool = _Pool(settings, lose=store_lose, mutex=threading.Lock())
    session = pool.take()
    try:
        ...
    finally:
        pool.give_back(session)
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

import psycopg
from psycopg import generators
from psycopg.pq import TransactionStatus

from tenure._sync import _shim
from tenure._sync.stores._pool import BoundedPool
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.postgres._connection import (
    Connection,
    _alive,
    _Connection,
    _NoAnswer,
    _Session,
)
from tenure._sync.stores.postgres._failures import clean
from tenure._sync.stores.postgres._settings import Settings
from tenure._errors import StoreUnavailable

log = logging.getLogger("tenure")

# Advisory mode: a statement that got no answer within `timeout` on a session holding leases is
# cancelled, and the session kept when it is idle again within this many seconds (at most
# `timeout`); else it is closed, and its leases with it.
_SETTLE = 0.5


class _Pool(BoundedPool[_Session]):
    """Up to `settings.pool_size` connections for the store's calls (the listener's is not one
    of them; see BoundedPool). `lose(session)` is told first whenever a session is closed or
    found broken (its advisory leases are lost). `mutex` is the store's: never held across
    I/O."""

    def __init__(self, settings: Settings, lose: Callable[[_Session], None],
                 mutex: threading.Lock) -> None:
        super().__init__(settings.url, settings.pool_size, settings.timeout, mutex)
        self.params, self.prepare, self.password = (settings.params, settings.prepare,
                                                    settings.password)
        self.lose = lose
        # Every connection opened and not dropped (the listener's too), for a fork's child.
        self.connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self.waits = 0  # sessions taken for a wait on the server (see take_free)

    def clean(self, exc: BaseException) -> str:
        return clean(exc, self.password)

    def start_afresh(self, mutex: threading.Lock) -> list[_Session]:
        """After fork(): the parent's connections are the parent's (see the store's
        _start_afresh_in_child, which has already made their sockets harmless)."""
        self.connections = weakref.WeakSet()
        self.waits = 0
        return super().start_afresh(mutex)

    def connect(self, prepare_threshold: int | None) -> _Connection:
        """A new connection whose waits for the server are bounded by `timeout`. Connecting is
        bounded by psycopg itself (libpq's connect_timeout, at least 2 s)."""
        connection = _Connection.connect(
            **self.params, autocommit=True, prepare_threshold=prepare_threshold)
        connection.bound = self.timeout
        with self.mutex:
            self.connections.add(connection)
        return connection

    def open_one(self) -> _Session:
        return _Session(self.connect(self.prepare))

    def alive(self, connection: _Session) -> bool:
        return _alive(connection.connection)

    def close_one(self, connection: _Session) -> None:
        self.lose(connection)
        try:
            connection.connection.close()
        except (psycopg.Error, OSError):
            log.debug("tenure: closing a broken PostgreSQL connection failed", exc_info=True)

    def claimed(self, connection: _Session) -> _shim.Event | None:
        if not connection.claims:
            return None
        # a release waits for this very session (take_holding): its turn
        connection.handed_to = connection.claims.pop(0)
        return connection.handed_to

    def give_back(self, connection: _Session) -> None:
        pg = connection.connection
        # Broken, or no answer came: closed, unless its statement can be cancelled and the
        # leases it holds (advisory mode) kept.
        if (pg.closed or pg.pgconn.transaction_status != TransactionStatus.IDLE
                ) and (pg.closed or not connection.leases
                       or not self.settle(connection)):
            self.discard(connection)
            return
        super().give_back(connection)

    def settle(self, session: _Session) -> bool:
        """A statement on `session`, which holds advisory leases, got no answer within
        `timeout`: cancel it on the server and read the rest of its answer (an error, or
        late rows: dropped), within _SETTLE seconds, so that the session, and every lease on
        it, lives on. False: it is not idle again in time (a silent path, a stalled server);
        the caller closes it, the last resort."""
        connection = session.connection
        if connection.closed or connection.broken or not isinstance(connection, _Connection):
            return False
        until = _shim.monotonic() + min(_SETTLE, self.timeout)
        bound = connection.bound
        try:
            with _shim.shielded():
                connection.cancel_safe(timeout=max(0.001, until - _shim.monotonic()))
                connection.bound = max(0.001, until - _shim.monotonic())
                connection.wait(generators.execute(connection.pgconn))
        except (psycopg.Error, _NoAnswer, OSError) as exc:
            log.debug("tenure: %s: a statement with no answer could not be cancelled: %s",
                      self.url, self.clean(exc))
            return False
        finally:
            connection.bound = bound
        settled = connection.pgconn.transaction_status == TransactionStatus.IDLE
        if settled:
            log.info("tenure: %s: a statement with no answer within timeout=%g s was cancelled;"
                     " its connection and the %d advisory lease(s) it holds live on",
                     self.url, self.timeout, len(session.leases))
        return settled

    def take_free(self) -> _Session | None:
        """An idle session that holds no advisory lease, or a new one while fewer than
        `pool_size` are open: for a wait on the server, which keeps its session busy for as long
        as it waits (a session holding leases would keep their releases waiting). None, without
        waiting, when there is none, or when `pool_size` - 1 sessions wait already: one is
        always left to the other calls (renewals above all). Give it back with end_wait.

        Example::

            session = pool.take_free()
        """
        while True:
            with self.mutex:
                if self.closed:
                    raise closed_store(self.url)
                if self.waits >= self.size - 1:
                    return None
                session = next((idle for idle in reversed(self.idle) if not idle.leases), None)
                if session is not None:
                    self.idle.remove(session)
                elif self.opened < self.size:
                    self.opened += 1
                else:
                    return None
            if session is None:
                try:
                    session = self.open_one()
                except BaseException:
                    self.forget_one()
                    raise
            elif not self.alive(session):
                self.discard(session)  # dropped by the server: another
                continue
            with self.mutex:
                self.waits += 1
            return session

    def end_wait(self, session: _Session) -> None:
        """Give back a session taken by take_free (closed when its wait left it unusable).

        Example::

            pool.end_wait(session)
        """
        with self.mutex:
            self.waits -= 1
        self.give_back(session)

    def take_holding(self, session: _Session, name: str) -> bool:
        """The session that holds a lease's lock, for this caller alone (a release must unlock
        on the session that locked): from the pool when idle, else handed over by the call
        using it (see _give_back). False when the session is gone, and its locks with it."""
        deadline = _shim.monotonic() + self.timeout
        while True:
            claim: _shim.Event | None = None
            with self.mutex:
                if session.gone or self.closed:
                    return False
                if session in self.idle:
                    self.idle.remove(session)
                else:
                    claim = _shim.Event()
                    session.claims.append(claim)
            if claim is None:
                if _alive(session.connection):
                    return True
                self.discard(session)
                return False
            try:
                _shim.wait_event(claim, max(0.0, deadline - _shim.monotonic()))
            except BaseException:  # cancelled: no claim may outlive its wait
                with self.mutex:
                    handed = session.handed_to is claim
                    if handed:
                        session.handed_to = None
                    elif claim in session.claims:
                        session.claims.remove(claim)
                if handed:  # handed over meanwhile: the next claim's turn, or the pool's
                    with _shim.shielded():
                        self.give_back(session)
                raise
            with self.mutex:
                if session.handed_to is claim:
                    session.handed_to = None
                    return True
                if claim in session.claims:
                    session.claims.remove(claim)
            if _shim.monotonic() >= deadline and not session.gone:
                raise StoreUnavailable(
                    f"{self.url}: release of {name!r}: the connection that holds its lock "
                    f"stayed busy for timeout={self.timeout:g} s; is the server overloaded?")
