# GENERATED from src/tenure/_async/stores/mysql/_getlock_sessions.py by scripts/unasync.py: do not edit.
"""The sessions of GET_LOCK mode: at most `pool_size` connections for the store's calls, each
holding the session locks of any number of leases (the server frees them when it ends), and
the waits' own connections, which hold no lease while they wait.

A session is used by one call at a time; a release waits for its lease's own session
(take_holding). A statement on a session that holds leases is never interrupted by a
cancellation (it runs to its answer within `timeout`): an interrupted connection is closed,
and every lease it holds would go with it.

Example::

    sessions = Sessions(settings, lose)
    session = sessions.take()
    try:
        ...
    finally:
        sessions.give_back(session)
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from typing import Any

from tenure._sync import _shim
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.mysql._driver import pymysql, deadline, forsake
from tenure._sync.stores.mysql._options import Settings
from tenure._sync.stores.mysql._sql import SESSION
from tenure._errors import StoreUnavailable


class Session:
    """One connection and the leases whose locks it holds (lease id -> lock name).

    Example::

        session.leases[lease_id] = lock
    """

    def __init__(self, connection: Any, pooled: bool) -> None:
        self.connection = connection
        self.id: int = connection.thread_id()  # the server's CONNECTION_ID()
        self.pooled = pooled  # one of the pool's (else a wait's own)
        self.leases: dict[str, str] = {}
        self.busy = True
        self.waiting = False  # a pooled session lent to a wait
        self.gone = False
        self.claims: list[_shim.Event] = []  # releases waiting for this session

    def locks(self) -> set[str]:
        """The lock names this session holds for leases."""
        return set(self.leases.values())


class Sessions:
    """The pool's sessions and the waits' idle connections; `lose(session)` is told when a
    session holding leases is closed (its leases are gone).

    Example::

        session = sessions.take()
    """

    def __init__(self, settings: Settings, lose: Callable[[Session], None]) -> None:
        self.settings = settings
        self.lose = lose
        self.mutex = threading.Lock()  # never held across I/O
        self.pool: list[Session] = []
        self.opening = 0
        self.room: list[_shim.Event] = []
        self.waiting: list[Any] = []  # idle connections of waits
        self.asleep: set[Any] = set()  # connections of waits under way
        self.closed = False

    def open(self) -> Any:
        """A new connection with the session's settings."""
        if self.closed:
            raise closed_store(self.settings.url)
        with deadline(self.settings.timeout):
            connection = pymysql.connect(**self.settings.connect_options)
            try:
                with connection.cursor() as cursor:
                    cursor.execute(SESSION)
            except BaseException:
                self.discard(connection)
                raise
        return connection

    def discard(self, connection: Any) -> None:
        """Close `connection`, best effort."""
        with contextlib.suppress(Exception):
            connection.close()

    def take(self) -> Session:
        """An idle session of the pool, or a new one while fewer than `pool_size` exist; waits
        up to `timeout` while all are busy, then StoreUnavailable."""
        give_up = -math.inf
        while True:
            room: _shim.Event | None = None
            with self.mutex:
                if self.closed:
                    raise closed_store(self.settings.url)
                idle = [session for session in self.pool if not session.busy]
                if idle:
                    # the one with the fewest leases: a session lost takes fewer with it
                    session = min(idle, key=lambda found: len(found.leases))
                    session.busy = True
                    return session
                opening = len(self.pool) + self.opening < self.settings.pool_size
                if opening:
                    self.opening += 1
                else:
                    room = _shim.Event()
                    self.room.append(room)
            if room is None:
                try:
                    connection = self.open()
                finally:
                    with self.mutex:
                        self.opening -= 1
                session = Session(connection, pooled=True)
                with self.mutex:
                    if self.closed:
                        self.discard(connection)
                        raise closed_store(self.settings.url)
                    self.pool.append(session)
                return session
            if give_up == -math.inf:
                give_up = _shim.monotonic() + self.settings.timeout
            left = give_up - _shim.monotonic()
            if left <= 0 or not _shim.wait_event(room, left):
                raise StoreUnavailable(
                    f"{self.settings.url}: all {self.settings.pool_size} connections stayed "
                    f"busy for {self.settings.timeout:g} s; raise pool_size or lower the "
                    "concurrency")

    def take_holding(self, session: Session) -> bool:
        """`session` (a lease's own) for this call, waiting up to `timeout` while another call
        uses it; False when it is gone (closed: its leases with it)."""
        give_up = _shim.monotonic() + self.settings.timeout
        while True:
            with self.mutex:
                if session.gone:
                    return False
                if not session.busy:
                    session.busy = True
                    return True
                claim = _shim.Event()
                session.claims.append(claim)
            left = give_up - _shim.monotonic()
            if left <= 0 or not _shim.wait_event(claim, left):
                raise StoreUnavailable(
                    f"{self.settings.url}: the connection holding the lease stayed busy for "
                    f"{self.settings.timeout:g} s")

    def give_back(self, session: Session) -> None:
        """`session` is free for the next call; a wait's own goes back to the waits' idle
        connections when it holds no lease any more."""
        with self.mutex:
            session.busy = session.waiting = False
            claims, session.claims = session.claims, []
            room, self.room = self.room, []
            if not session.pooled and not session.leases and not session.gone:
                session.gone = True  # as a Session; the connection serves the next wait
                if self.closed or len(self.waiting) >= self.settings.pool_size:
                    self.discard(session.connection)
                else:
                    self.waiting.append(session.connection)
        for event in (*claims, *room):
            event.set()

    def drop(self, session: Session, tell: bool = True) -> None:
        """Close `session` (it saw an error, or its state is unknown): its leases are lost;
        with `tell`, their holders are told now (see `lose`). A session found ended (killed
        by a break, the server restarted) is not told of: its leases' next renewal finds
        their locks gone, and says why (broken, or taken)."""
        if tell:
            self.lose(session)
        with self.mutex:
            session.gone = True
            if session in self.pool:
                self.pool.remove(session)
            claims, session.claims = session.claims, []
            room, self.room = self.room, []
        self.discard(session.connection)
        for event in (*claims, *room):
            event.set()

    def take_free(self) -> Session | None:
        """An idle pooled session that holds no lease, for a wait (no connection is opened for
        it: opening one costs several round trips, while the waiter's turn may come); None
        when there is none, or when pool_size - 1 pooled sessions wait already (one stays
        for the calls that free what they wait for)."""
        with self.mutex:
            waiting = sum(1 for session in self.pool if session.waiting)
            if waiting >= self.settings.pool_size - 1:
                return None
            for session in reversed(self.pool):
                if not session.busy and not session.leases:
                    session.busy = session.waiting = True
                    return session
        return None

    def waiting_connection(self) -> Any | None:
        """An idle connection of a finished wait, or None (the caller opens one)."""
        with self.mutex:
            return self.waiting.pop() if self.waiting else None

    def close(self) -> list[Session]:
        """Take no more calls: close the idle sessions and connections; the sessions holding
        leases, for the caller to tell of their loss."""
        with self.mutex:
            self.closed = True
            sessions, self.pool = self.pool, []
            waiting, self.waiting = self.waiting, []
            room, self.room = self.room, []
        for connection in waiting:
            self.discard(connection)
        for event in room:
            event.set()
        return sessions

    def start_afresh(self) -> None:
        """In a child after fork(): the parent's connections stay the parent's."""
        inherited = [session.connection for session in self.pool] + self.waiting
        self.mutex = threading.Lock()
        self.pool, self.opening, self.room, self.waiting = [], 0, [], []
        self.asleep = set()
        for connection in inherited:
            forsake(connection)
