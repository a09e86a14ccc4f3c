"""`sqlite:///path/to/locks.db`: the embedded default. Processes on one host share the file.

One row per (name, slot) in `tenure_leases`, never deleted: it keeps the name's fencing counter
across releases and breaks. Expiry uses this host's monotonic clock (shared by all processes on
the host, immune to wall-clock steps) together with the boot id, because the monotonic clock
restarts at reboot. A lock is taken and released with ONE autocommit statement each, so a cycle
costs what two bare write transactions cost. Journal: WAL; synchronous=NORMAL by default (a
crash of the host may lose the last commits; counters written before a reboot are reseeded from
the wall clock, so tokens still never go backwards). `?synchronous=full` makes every commit
durable at the price of an fsync.

Example::

    store = tenure.connect("sqlite:////var/lib/app/locks.db")
"""

from __future__ import annotations

import itertools
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tenure._async import _shim
from tenure._async.stores._protocol import AsyncBackend
from tenure._errors import InvalidArgument, StoreUnavailable
from tenure._hostclock import BOOT_ID, wall_us
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import local_url

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenure_leases (
    name       TEXT    NOT NULL,
    slot       INTEGER NOT NULL,
    holder     TEXT    NOT NULL,
    lease_id   TEXT    NOT NULL,  -- '' once released or broken
    token      INTEGER NOT NULL,  -- last token granted on this row; the name's counter is max()
    boot       TEXT    NOT NULL,  -- host boot id when expires_at was written
    expires_at REAL    NOT NULL,  -- host monotonic clock, seconds
    PRIMARY KEY (name, slot)
) WITHOUT ROWID
"""

# A lock (limit 1) in one statement: take slot 0 when it is free, bumping the name's counter.
_ACQUIRE_LOCK = """
INSERT INTO tenure_leases (name, slot, holder, lease_id, token, boot, expires_at)
VALUES (:name, 0, :holder, :lease_id, :seed, :boot, :expires_at)
ON CONFLICT (name, slot) DO UPDATE SET
    holder = excluded.holder,
    lease_id = excluded.lease_id,
    token = CASE
        WHEN tenure_leases.boot = excluded.boot
            THEN (SELECT max(token) FROM tenure_leases WHERE name = :name) + 1
        ELSE max((SELECT max(token) FROM tenure_leases WHERE name = :name) + 1,
                 excluded.token)
    END,
    boot = excluded.boot,
    expires_at = excluded.expires_at
WHERE tenure_leases.expires_at <= :now OR tenure_leases.boot != excluded.boot
RETURNING token
"""

_RENEW = """
UPDATE tenure_leases SET expires_at = :expires_at
WHERE name = :name AND slot = :slot AND lease_id = :lease_id AND boot = :boot AND expires_at > :now
"""

_RELEASE = """
UPDATE tenure_leases SET lease_id = '', expires_at = 0
WHERE name = :name AND slot = :slot AND lease_id = :lease_id AND boot = :boot AND expires_at > :now
"""

_LIVE = "boot = :boot AND expires_at > :now"


@contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock up front, so its reads stay valid."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class AsyncSQLiteStore(AsyncBackend):
    """Leases in a SQLite database file shared by the processes of one host.

    Example::

        backend = AsyncSQLiteStore("/var/lib/app/locks.db")
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0, batched_renewal=True)

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "normal",
                 busy_timeout: float | str = 5.0) -> None:
        if synchronous.lower() not in ("normal", "full"):
            raise InvalidArgument(
                f"synchronous={synchronous!r} is not supported; use 'normal' (default) or 'full'"
            )
        self.path = Path(path)
        self.url = local_url("sqlite", str(self.path))
        self._synchronous = synchronous.upper()
        self._busy_ms = int(float(busy_timeout) * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._mutex = threading.Lock()
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._closed = False

    # -- connections -------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections must not be shared between threads)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            self._local.connection = connection
        return connection

    def _open(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreUnavailable(f"{self.url}: the store is closed; connect again")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000
        )
        connection.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(f"PRAGMA synchronous = {self._synchronous}")
        connection.execute(_SCHEMA)
        with self._mutex:
            self._connections.append(connection)
        return connection

    @contextmanager
    def _database(self, operation: str, name: str) -> Iterator[sqlite3.Connection]:
        """This thread's connection, with sqlite3 errors turned into StoreUnavailable."""
        try:
            yield self._connection()
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(
                f"{self.url}: {operation} of {name!r} failed: {exc}; check that the database "
                "file and its directory are writable and not on a network file system"
            ) from exc

    # -- the Backend protocol ----------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        return await _shim.offload(self._acquire_now, name, holder, ttl, limit)

    def _acquire_now(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        with self._database("acquire", name) as db:
            return self._acquire_in(db, name, holder, ttl, limit)

    def _acquire_in(self, db: sqlite3.Connection, name: str, holder: str, ttl: float,
                    limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        now = _shim.monotonic()
        if limit == 1:
            row = db.execute(_ACQUIRE_LOCK, {
                "name": name, "holder": holder, "lease_id": lease_id, "seed": wall_us(),
                "boot": BOOT_ID, "expires_at": now + ttl, "now": now,
            }).fetchone()
            if row is None:
                return None
            token: int = row[0]
            return Grant(name, 0, holder, lease_id, token, name)
        with _immediate(db):
            rows = db.execute(
                "SELECT slot, token, boot, expires_at FROM tenure_leases WHERE name = ?", (name,)
            ).fetchall()
            live = {slot for slot, _, boot, expires in rows if boot == BOOT_ID and expires > now}
            free = next((slot for slot in range(limit) if slot not in live), None)
            if free is None:
                return None
            stored: int | None = max((row[1] for row in rows), default=None)
            same_boot = all(row[2] == BOOT_ID for row in rows)
            token = next_token(stored, same_boot, wall_us())
            db.execute(
                "INSERT OR REPLACE INTO tenure_leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, free, holder, lease_id, token, BOOT_ID, now + ttl),
            )
            return Grant(name, free, holder, lease_id, token, name)

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        return await _shim.offload(self._renew_now, label, grants, ttl)

    def _renew_now(self, label: str, grants: Sequence[Grant],
                   ttl: float) -> list[Grant | LostReason]:
        results: list[Grant | LostReason] = []
        with self._database("renewal", label) as db, _immediate(db):
            now = _shim.monotonic()
            for grant in grants:
                renewed = db.execute(_RENEW, {
                    "expires_at": now + ttl, "name": grant.name, "slot": grant.slot,
                    "lease_id": grant.lease_id, "boot": BOOT_ID, "now": now,
                }).rowcount
                results.append(grant if renewed else self._why_lost(db, grant, now))
        return results

    @staticmethod
    def _why_lost(db: sqlite3.Connection, grant: Grant, now: float) -> LostReason:
        row = db.execute(
            "SELECT lease_id, boot, expires_at FROM tenure_leases WHERE name = ? AND slot = ?",
            (grant.name, grant.slot),
        ).fetchone()
        if row is None or row[0] == "":
            return LostReason.BROKEN
        if row[0] != grant.lease_id:
            return LostReason.TAKEN
        return LostReason.EXPIRED

    async def release(self, grant: Grant) -> bool:
        return await _shim.offload(self._release_now, grant)

    def _release_now(self, grant: Grant) -> bool:
        with self._database("release", grant.name) as db:
            cursor = db.execute(_RELEASE, {
                "name": grant.name, "slot": grant.slot, "lease_id": grant.lease_id,
                "boot": BOOT_ID, "now": _shim.monotonic(),
            })
        return bool(cursor.rowcount == 1)

    async def break_lease(self, name: str) -> int:
        return await _shim.offload(self._break_now, name)

    def _break_now(self, name: str) -> int:
        with self._database("break", name) as db:
            cursor = db.execute(
                "UPDATE tenure_leases SET lease_id = '', expires_at = 0 "
                f"WHERE name = :name AND {_LIVE}",
                {"name": name, "boot": BOOT_ID, "now": _shim.monotonic()},
            )
        return int(cursor.rowcount)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        return await _shim.offload(self._leases_now, prefix)

    def _leases_now(self, prefix: str) -> list[LeaseInfo]:
        now = _shim.monotonic()
        wall_now = datetime.now(timezone.utc)
        with self._database("listing", prefix) as db:
            rows = db.execute(
                "SELECT name, slot, holder, token, expires_at FROM tenure_leases "
                f"WHERE {_LIVE} AND substr(name, 1, :length) = :prefix ORDER BY name, slot",
                {"boot": BOOT_ID, "now": now, "length": len(prefix), "prefix": prefix},
            ).fetchall()
        return [
            LeaseInfo(name, holder, token, wall_now + timedelta(seconds=expires - now), slot)
            for name, slot, holder, token, expires in rows
        ]

    async def wait_released(self, name: str, timeout: float) -> None:
        await _shim.sleep(timeout)  # SQLite has no notifications; the core polls with backoff

    async def close(self) -> None:
        with self._mutex:
            self._closed = True
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()
