"""AsyncSQLiteStore: the lease operations of the sqlite:// store. A lock is taken and released
with ONE autocommit statement each; a semaphore's slot is chosen in a write transaction;
expiry is this host's monotonic clock together with its boot id. Waiters queue for a name on
this host and a release wakes the first (tenure._async.stores._host_queue).

Example::

    backend = AsyncSQLiteStore("/var/lib/app/locks.db")
    grant = await backend.try_acquire("job", "worker-1", 30.0, 1)
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime, timedelta, timezone

from tenure._async import _shim
from tenure._async.stores._host_queue import AsyncHostQueue
from tenure._async.stores._options import DEFAULT_RETAIN, retain_seconds
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.sqlite._connections import immediate
from tenure._async.stores.sqlite._records import SQLiteRecords
from tenure._async.stores.sqlite._sql import (
    ACQUIRE_LOCK,
    BREAK,
    CHUNK_END,
    COUNT_IDLE,
    FORGET,
    FORGET_CHUNK,
    LEASE_ID,
    LIST,
    RELEASE,
    RELEASE_AND_FORGET,
    RENEW,
    SLOTS,
    TAKE_SLOT,
    with_prefix,
)
from tenure._errors import StoreRefused, StoreUnavailable
from tenure._hostclock import BOOT_ID, host_monotonic, wall_us
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

SWEEP_EVERY = 60.0  # seconds: the longest gap between two sweeps of idle names by one store


class _Attempt:
    """One acquire's grant, handed from its worker thread to its caller, or freed when the
    caller is gone (cancelled) by then."""

    __slots__ = ("_abandoned", "_grant", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._grant: Grant | None = None
        self._abandoned = False

    def answer(self, grant: Grant) -> bool:
        """From the worker: False when the caller already gave up (free the grant then)."""
        with self._mutex:
            self._grant = grant
            return not self._abandoned

    def abandon(self) -> Grant | None:
        """From the cancelled caller: the grant already taken, which the caller must free."""
        with self._mutex:
            self._abandoned = True
            return self._grant


class _AttemptAll:
    """_Attempt for the grants of one try_acquire_all."""

    __slots__ = ("_abandoned", "_grants", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._grants: list[Grant] = []
        self._abandoned = False

    def answer(self, grants: list[Grant]) -> bool:
        """From the worker: False when the caller already gave up (free the grants then)."""
        with self._mutex:
            self._grants = grants
            return not self._abandoned

    def abandon(self) -> list[Grant]:
        """From the cancelled caller: the grants already taken, which the caller must free."""
        with self._mutex:
            self._abandoned = True
            return self._grants


class _OneHeld(Exception):
    """A name of a try_acquire_all is held: its transaction rolls back."""


class AsyncSQLiteStore(SQLiteRecords, AsyncBackend):
    """Leases in a SQLite database file shared by the processes of one host.

    `path` is made absolute at once, against the working directory; its directory must exist.
    `synchronous` is "normal" (default) or "full"; `busy_timeout` (seconds, more than 0 and
    at most 600, default 5) is how long a call waits for another writer's lock before the
    store answers busy, a transient error the core retries. `retain` (seconds, default 3600;
    0: at the release; inf: never) is how long the row of a name nobody holds is kept: a
    release deletes the names idle that long, at most once per SWEEP_EVERY.

    Example::

        backend = AsyncSQLiteStore("/var/lib/app/locks.db", busy_timeout=2)
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "normal",
                 busy_timeout: float | str = 5.0, retain: float | str = DEFAULT_RETAIN) -> None:
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._retain = retain_seconds(retain)
        self._next_sweep = 0.0  # host monotonic time of the next sweep after a release
        super().__init__(path, synchronous=synchronous, busy_timeout=busy_timeout)
        if self._retain != DEFAULT_RETAIN:  # the URL reads back as the same store
            self.url += f"{'&' if '?' in self.url else '?'}retain={self._retain:g}"
        # The waiters' queues: a directory beside the database file, made on first wait.
        self._queue = AsyncHostQueue(f"{self.path}-queues", make_root=True)

    def _start_afresh_in_child(self) -> None:
        super()._start_afresh_in_child()
        self._id_prefix = secrets.token_hex(6)  # lease ids stay unique between the two

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        return await self._take_queued(name, holder, ttl, limit, False)

    async def _take_queued(self, name: str, holder: str, ttl: float, limit: int,
                           queued: bool) -> Grant | None:
        """A try; one from outside the name's queue (not `queued`) leaves the name to the
        waiters queued for it (see _host_queue)."""
        # The statement runs in a worker thread that a cancelled caller cannot stop: whichever
        # of the two comes second (the thread's answer, or the caller's cancellation) frees
        # the grant, so a cancelled acquire never leaves a lease nobody owns.
        attempt = _Attempt()
        try:
            grant: Grant | None = await _shim.offload(self._acquire_for, attempt, name, holder,
                                                      ttl, limit, queued)
        except BaseException:
            orphan = attempt.abandon()
            if orphan is not None:
                _shim.start_soon(self._release_quietly, orphan)
            raise
        return grant

    async def try_acquire_all(self, names: Sequence[str], holder: str,
                              ttl: float) -> list[Grant] | None:
        """Locks on every one of `names` in ONE write transaction, or on none (see
        AsyncTryAcquireAll): the transaction is rolled back at the first name held (or with a
        waiter queued for it).

        Example::

            grants = await backend.try_acquire_all(["a", "b"], "worker-1", 30.0)
        """
        attempt = _AttemptAll()
        try:
            grants: list[Grant] | None = await _shim.offload(self._acquire_all_for, attempt,
                                                             names, holder, ttl)
        except BaseException:
            for orphan in attempt.abandon():
                _shim.start_soon(self._release_quietly, orphan)
            raise
        return grants

    def _acquire_all_for(self, attempt: _AttemptAll, names: Sequence[str], holder: str,
                         ttl: float) -> list[Grant] | None:
        if any(self._queue.blocks(name) for name in names):
            return None
        grants: list[Grant] | None = self._on_connection(
            "acquire", names[0], self._acquire_all_in, names, holder, ttl)
        if grants is not None and not attempt.answer(grants):
            for grant in grants:
                self._release_now(grant)  # the caller was cancelled meanwhile
            return None
        return grants

    def _acquire_all_in(self, db: sqlite3.Connection, names: Sequence[str], holder: str,
                        ttl: float) -> list[Grant] | None:
        grants: list[Grant] = []
        try:
            with immediate(db):
                now = host_monotonic()
                for name in names:
                    lease_id = f"{self._id_prefix}{next(self._ids)}"
                    returned = db.execute(ACQUIRE_LOCK, (name, holder, lease_id, wall_us(),
                                                         BOOT_ID, now + ttl, now)).fetchall()
                    if not returned:
                        raise _OneHeld
                    grants.append(Grant(name, 0, holder, lease_id, returned[0][0], name))
        except _OneHeld:
            return None  # rolled back: none taken
        return grants

    def _acquire_for(self, attempt: _Attempt, name: str, holder: str, ttl: float,
                     limit: int, queued: bool) -> Grant | None:
        if not queued and self._queue.blocks(name):
            return None
        grant: Grant | None = self._on_connection("acquire", name, self._acquire_in, name,
                                                  holder, ttl, limit)
        if grant is not None and not attempt.answer(grant):
            self._release_now(grant)  # the caller was cancelled meanwhile
            return None
        return grant

    async def _release_quietly(self, grant: Grant) -> None:
        with suppress(StoreUnavailable):  # best effort: else the lease expires by itself
            await self.release(grant)

    def _acquire_in(self, db: sqlite3.Connection, name: str, holder: str, ttl: float,
                    limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        now = host_monotonic()
        if limit == 1:
            # fetchall, not fetchone: step the statement to its end so the write commits now
            returned = db.execute(ACQUIRE_LOCK, (name, holder, lease_id, wall_us(), BOOT_ID,
                                                 now + ttl, now)).fetchall()
            if not returned:
                return None
            token: int = returned[0][0]
            return Grant(name, 0, holder, lease_id, token, name)
        with immediate(db):
            rows = db.execute(SLOTS, (name,)).fetchall()
            live = {slot for slot, _, boot, expires in rows if boot == BOOT_ID and expires > now}
            free = next((slot for slot in range(limit) if slot not in live), None)
            if free is None:
                return None
            stored: int | None = max((row[1] for row in rows), default=None)
            token = next_token(stored, wall_us())
            db.execute(TAKE_SLOT, (name, free, holder, lease_id, token, BOOT_ID, now + ttl))
            return Grant(name, free, holder, lease_id, token, name)

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        results: list[Grant | LostReason] = await _shim.offload(
            self._on_connection, "renewal", label, _renew_in, grants, ttl)
        return results

    async def release(self, grant: Grant) -> bool:
        released: bool = await _shim.offload(self._release_now, grant)
        if released and self._sweep_due():
            # In the background: the release (which may run inline on the event loop) never
            # waits for a sweep, however many rows the table has.
            _shim.start_soon(self._sweep)
        return released

    async def release_all(self, grants: Sequence[Grant]) -> list[bool]:
        """release() of each of `grants` in ONE write transaction (one commit, not one per
        lease); their waiters rung after it.

        Example::

            freed = await backend.release_all(grants)
        """
        released: list[bool] = await _shim.offload(self._release_all_now, grants)
        if any(released) and self._sweep_due():
            _shim.start_soon(self._sweep)  # as in release()
        return released

    def _release_all_now(self, grants: Sequence[Grant]) -> list[bool]:
        released: list[bool] = self._on_connection("release", grants[0].name, _release_all_in,
                                                   grants, self._retain == 0)
        for grant, freed in zip(grants, released, strict=True):
            if freed:
                self._queue.ring(grant.name)
        return released

    def _release_now(self, grant: Grant) -> bool:
        released: bool = self._on_connection("release", grant.name, _release_in, grant,
                                             self._retain == 0)
        if released:
            self._queue.ring(grant.name)
        return released

    def _sweep_due(self) -> bool:
        """Whether a release should start a sweep of the names idle for `retain`: at most
        once per SWEEP_EVERY (every retain/4 when shorter, at least a second apart)."""
        now = host_monotonic()
        if not 0 < self._retain < math.inf or now < self._next_sweep:
            return False
        self._next_sweep = now + min(max(self._retain / 4, 1.0), SWEEP_EVERY)
        return True

    async def _sweep(self) -> None:
        """Forget the names idle for `retain`, a chunk of names per write transaction, in a
        worker thread; best effort (a later release's sweep tries again; a store closed
        meanwhile sweeps nothing)."""
        with suppress(StoreUnavailable, StoreRefused):
            await _shim.offload(_forget_chunks, self, self._retain, False)

    async def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names nobody has held for `idle` seconds (their rows; records stay), or
        with `dry_run` only count them; the number of names.

        Example::

            forgotten = await backend.prune(idle=3600.0)
        """
        count: int = await _shim.offload(_forget_chunks, self, idle, dry_run)
        return count

    async def break_lease(self, name: str) -> int:
        broken: int = await _shim.offload(self._on_connection, "break", name, _break_in, name)
        if broken:
            self._queue.ring(name)
        return broken

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        found: list[LeaseInfo] = await _shim.offload(self._leases_now, prefix)
        return found

    def _leases_now(self, prefix: str) -> list[LeaseInfo]:
        try:
            now = host_monotonic()
            wall_now = datetime.now(timezone.utc)
            rows = self._query(*with_prefix(LIST, (BOOT_ID, now), prefix))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("listing", prefix, exc) from exc
        return [
            LeaseInfo(name, holder, token, wall_now + timedelta(seconds=expires - now), slot)
            for name, slot, holder, token, expires in rows
        ]

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        await _shim.sleep(timeout)  # the core's acquires wait in wait_and_acquire

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait in the name's queue on this host, woken by the release, and take a slot when
        it is this waiter's turn (see tenure._async.stores._host_queue); the Grant taken, or
        None when the acquire's patience ran out first.

        Example::

            grant = await backend.wait_and_acquire("job", "worker-1", 30.0, 1, 0.05, 10.0)
        """
        return await self._queue.wait_and_acquire(name, holder, ttl, limit, timeout, patience,
                                                  self._take_queued)


def _renew_in(db: sqlite3.Connection, grants: Sequence[Grant],
              ttl: float) -> list[Grant | LostReason]:
    results: list[Grant | LostReason] = []
    with immediate(db):
        now = host_monotonic()
        for grant in grants:
            renewed = db.execute(RENEW, (now + ttl, grant.name, grant.slot, grant.lease_id,
                                         BOOT_ID, now)).rowcount
            results.append(grant if renewed else _why_lost(db, grant))
    return results


def _why_lost(db: sqlite3.Connection, grant: Grant) -> LostReason:
    row = db.execute(LEASE_ID, (grant.name, grant.slot)).fetchone()
    if row is None:  # expired long enough ago to be forgotten
        return LostReason.EXPIRED
    if row[0] == "":
        return LostReason.BROKEN
    return LostReason.TAKEN if row[0] != grant.lease_id else LostReason.EXPIRED


def _release_in(db: sqlite3.Connection, grant: Grant, forget: bool) -> bool:
    now = host_monotonic()
    ours = (grant.name, grant.slot, grant.lease_id, BOOT_ID, now)
    cursor = db.execute(RELEASE_AND_FORGET, ours) if forget else db.execute(RELEASE, (now, *ours))
    return bool(cursor.rowcount == 1)


def _release_all_in(db: sqlite3.Connection, grants: Sequence[Grant], forget: bool) -> list[bool]:
    with immediate(db):
        return [_release_in(db, grant, forget) for grant in grants]


def _break_in(db: sqlite3.Connection, name: str) -> int:
    now = host_monotonic()
    return int(db.execute(BREAK, (now, name, BOOT_ID, now)).rowcount)


def _forget_chunks(store: AsyncSQLiteStore, idle: float, dry_run: bool) -> int:
    """Forget (or count) the names every row of which has been free for `idle` seconds,
    FORGET_CHUNK names per write transaction, so other writers wait for one chunk at most
    (a table of a million names is a thousand short transactions, not one long one).

    A plain function, not a method of the store: `_shim.offload` runs it in a worker thread,
    never inline on the event loop."""
    after: str | None = ""  # names are never empty: every name is after ""
    total = 0
    while after is not None:
        counted, after = store._on_connection("prune", "", _forget_chunk_in, idle, dry_run,
                                              after)
        total += counted
    return total


def _forget_chunk_in(db: sqlite3.Connection, idle: float, dry_run: bool,
                     after: str) -> tuple[int, str | None]:
    """Forget (or count) the idle names among the FORGET_CHUNK names after `after`; how many,
    and the last name of the chunk (None: the table's end)."""
    with immediate(db):
        last = db.execute(CHUNK_END, (after, FORGET_CHUNK)).fetchone()[0]
        if last is None:
            return 0, None
        now = host_monotonic()
        # CLOCK_MONOTONIC counts from this boot: a row of an earlier boot is at least `now` old.
        parameters = (BOOT_ID, now - idle, int(now > idle), after, last)
        if dry_run:
            counted = int(db.execute(COUNT_IDLE, parameters).fetchone()[0])
        else:
            counted = len({name for (name,) in db.execute(FORGET, parameters).fetchall()})
        return counted, last
