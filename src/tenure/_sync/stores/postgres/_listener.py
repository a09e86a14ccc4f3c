# GENERATED from src/tenure/_async/stores/postgres/_listener.py by scripts/unasync.py: do not edit.
"""The store's listener: one connection of its own that LISTENs for the NOTIFY of releases
(waking the waits of this store for that name) and for the hand-overs to this store's
registered waits, read by a background task (async) or thread (sync); started on the first
wait, and again after a failure.

Example::

    listener = _Listener(pool, channel, id_prefix, on_handed=handover.handed)
    if listener.listening():
        with listener.watching("jobs") as (event, released):
            ...
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterator

import psycopg
from psycopg import sql

from tenure._sync import _shim
from tenure._sync.stores.postgres._connection import Connection, _NoAnswer, close_quietly
from tenure._sync.stores.postgres._pool import _Pool
from tenure._sync.stores.postgres._table_sql import _ALIVE_CLASS, _HANDOVER_CHANNEL
from tenure._names import name_digest

log = logging.getLogger("tenure")

# How often the sync listener thread looks at the store's closed flag between notifications.
_LISTEN_TICK = 1.0
# After the listener connection failed, waiters poll for this long before it is tried again.
_LISTEN_RETRY = 1.0


class _Listener:
    """LISTEN on `channel` (releases of the store's table: payload the name's key) and on the
    hand-over channel of this store (`id_prefix`: payloads go to `on_handed`). `waiters` are
    the events of the waits under way by key; `missed` says when a try of a key last found it
    held, `released` when its last release notice came (see watching)."""

    def __init__(self, pool: _Pool, channel: str, id_prefix: str,
                 on_handed: Callable[[str], None], mutex: threading.Lock) -> None:
        self.pool, self.channel, self.on_handed, self.mutex = pool, channel, on_handed, mutex
        self.start_afresh(id_prefix, mutex)

    def start_afresh(self, id_prefix: str, mutex: threading.Lock) -> None:
        """Nothing listening yet (a new store, or the child of a fork)."""
        self.id_prefix, self.mutex = id_prefix, mutex
        self.handover_channel = _HANDOVER_CHANNEL + id_prefix
        self.connection: Connection | None = None
        self.task: _shim.Background | None = None
        self.starting = False
        self.retry_at = -math.inf
        self.failing = False  # logged once per outage: see _failed
        self.alive = False  # its session holds the lock that says so (see _ALIVE)
        self.waiters: dict[str, list[_shim.Event]] = {}
        self.missed: dict[str, float] = {}  # key -> when a try that found it held began
        self.released: dict[str, float] = {}  # key -> when its last release notice arrived

    def stop(self) -> None:
        """The store closes: async cancels the task; sync: the thread sees it within a tick."""
        task, self.task = self.task, None
        if task is not None:
            task.stop()
        self.wake_all()

    @contextlib.contextmanager
    def watching(self, name: str) -> Iterator[tuple[_shim.Event, bool]]:
        """An event set by the next release notice of `name`, for the length of a wait, and
        whether a notice came after the last failed try of it began (so that it is not lost
        on us: a try right away, then)."""
        key = name_digest(name)
        event = _shim.Event()
        with self.mutex:
            self.waiters.setdefault(key, []).append(event)
            missed = self.missed.pop(key, None)
            released = missed is not None and self.released.get(key, -math.inf) >= missed
        try:
            yield event, released
        finally:
            with self.mutex:
                waiting = self.waiters.get(key, [])
                if event in waiting:
                    waiting.remove(event)
                if not waiting:
                    self.waiters.pop(key, None)
                    self.released.pop(key, None)

    def note_missed(self, name: str, started: float) -> None:
        with self.mutex:
            if len(self.missed) > 10_000:  # try_acquire callers that never wait
                self.missed.clear()
                self.released.clear()
            self.missed[name_digest(name)] = started

    def wake(self, key: str) -> None:
        with self.mutex:
            if key in self.missed or key in self.waiters:
                self.released[key] = _shim.monotonic()
            events = self.waiters.get(key, [])
        for event in events:
            event.set()

    def wake_all(self) -> None:
        """The listener stopped: everyone polls now rather than at the end of its backoff."""
        with self.mutex:
            events = [event for waiting in self.waiters.values() for event in waiting]
        for event in events:
            event.set()

    def listening(self) -> bool:
        """True while the listener runs; starts it on first use (and again after a failure,
        at most once per _LISTEN_RETRY seconds)."""
        task = self.task
        if task is not None and task.alive():
            return True
        with self.mutex:
            if (self.pool.closed or self.starting
                    or _shim.monotonic() < self.retry_at):
                return False
            self.starting = True
        try:
            connection = self.pool.connect(None)
            try:
                cursor = connection.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)",
                    (_ALIVE_CLASS, int.from_bytes(bytes.fromhex(self.id_prefix[:8]), "big",
                                                  signed=True)))
                row = cursor.fetchone()
                alive = bool(row and row[0])  # False: another session has our key (rare)
                connection.execute(sql.SQL("LISTEN {}; LISTEN {}").format(
                    sql.Identifier(self.channel), sql.Identifier(self.handover_channel)))
            except BaseException:
                connection.close()
                raise
            # From now on it only waits for notices: idle time, not a call. (A silent path
            # there costs the waiters their wake-ups: they poll with their backoff.)
            connection.bound = None
        except BaseException as exc:
            self.starting = False
            if not isinstance(exc, (psycopg.Error, _NoAnswer)):
                raise
            self._failed("cannot listen for releases", exc)
            return False
        stale, self.connection = self.connection, connection
        self.alive = alive
        if self.failing:
            self.failing = False
            log.info("tenure: %s: listening for releases again (waiters are woken by them)",
                     self.pool.url)

        def run() -> None:
            self._listen(connection)

        self.task = _shim.spawn(run, "tenure-postgres-listener")
        self.starting = False
        if stale is not None:  # the listener of an event loop that is gone
            close_quietly(stale)
        return True

    def _listen(self, connection: Connection) -> None:
        try:
            while not self.pool.closed:
                for notice in connection.notifies(timeout=_LISTEN_TICK):
                    if notice.channel == self.handover_channel:
                        self.on_handed(notice.payload)
                    else:
                        self.wake(notice.payload)
        except (psycopg.Error, OSError) as exc:
            if not self.pool.closed:
                self._failed("the release listener stopped", exc)
        finally:
            if self.connection is connection:
                self.task = None
                self.connection = None
                self.alive = False
            self.wake_all()
            close_quietly(connection)

    def _failed(self, what: str, exc: BaseException) -> None:
        """The listener could not start, or stopped: waiters poll, and the next wait tries it
        again after _LISTEN_RETRY. Logged once per outage (a WARNING when it begins, an INFO
        when it listens again, DEBUG for each try in between), not at every try."""
        self.retry_at = _shim.monotonic() + _LISTEN_RETRY
        if self.failing:
            log.debug("tenure: %s: %s, again (waiters poll): %s", self.pool.url, what,
                      self.pool.clean(exc))
            return
        self.failing = True
        log.warning("tenure: %s: %s: %s; waiters poll (each at least once a second) until it "
                    "listens again", self.pool.url, what, self.pool.clean(exc))
