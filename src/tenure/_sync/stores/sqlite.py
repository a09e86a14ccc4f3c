# GENERATED from src/tenure/_async/stores/sqlite.py by scripts/unasync.py: do not edit.
"""`sqlite:////absolute/locks.db` or `sqlite:///relative/locks.db` (as in SQLAlchemy): the
embedded default. Processes on one host share the file.

One row per (name, slot) in `tenure_leases`, never deleted: it keeps the name's fencing counter
across releases and breaks. Expiry uses this host's monotonic clock (shared by all processes on
the host, immune to wall-clock steps; a process in a Linux time namespace reads it with the
namespace's offset taken off, see tenure._hostclock) together with the boot id, because the
monotonic clock restarts at reboot. A lock is taken and released with ONE autocommit statement
each, so a cycle costs what two bare write transactions cost. Journal: WAL; synchronous=NORMAL
by default (a crash of the host may lose the last commits; counters written before a reboot are
reseeded from the wall clock, so tokens still never go backwards). `?synchronous=full` makes
every commit durable at the price of an fsync. Records (`write_record`) are rows of
`tenure_records`, written by one statement that takes effect only while the writer's lease row
is live. The path is made absolute when the store is built (relative to the working
directory then), and every error shows it; a missing directory is an error, not created.

Example::

    store = tenure.connect("sqlite:////var/lib/app/locks.db")
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._failures import failure, refusal
from tenure._sync.stores._options import merged, only
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    record_bytes,
)
from tenure._errors import InvalidArgument, InvalidArgumentType, StoreRefused, StoreUnavailable
from tenure._hostclock import BOOT_ID, host_monotonic, wall_us
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import local_url, parse_store_url

_SCHEMA = ["""
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
""", """
CREATE TABLE IF NOT EXISTS tenure_records (
    name   TEXT NOT NULL PRIMARY KEY,
    record TEXT NOT NULL  -- kept across releases, expiries and breaks, like the counter
) WITHOUT ROWID
"""]

# A lock (limit 1) in one statement: take slot 0 when it is free, bumping the name's counter.
# Parameters: name, holder, lease_id, seed (wall clock µs), boot, expires_at, now.
_ACQUIRE_LOCK = """
INSERT INTO tenure_leases (name, slot, holder, lease_id, token, boot, expires_at)
VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (name, slot) DO UPDATE SET
    holder = excluded.holder,
    lease_id = excluded.lease_id,
    token = CASE
        WHEN tenure_leases.boot = excluded.boot
            THEN (SELECT max(token) FROM tenure_leases WHERE name = ?1) + 1
        ELSE max((SELECT max(token) FROM tenure_leases WHERE name = ?1) + 1, excluded.token)
    END,
    boot = excluded.boot,
    expires_at = excluded.expires_at
WHERE tenure_leases.expires_at <= ?7 OR tenure_leases.boot != excluded.boot
RETURNING token
"""

# Parameters: name, slot, lease_id, boot, now (+ expires_at first for renewal).
_OURS = "name = ? AND slot = ? AND lease_id = ? AND boot = ? AND expires_at > ?"
_RENEW = f"UPDATE tenure_leases SET expires_at = ? WHERE {_OURS}"
_RELEASE = f"UPDATE tenure_leases SET lease_id = '', expires_at = 0 WHERE {_OURS}"
_BREAK = ("UPDATE tenure_leases SET lease_id = '', expires_at = 0 "
          "WHERE name = ? AND boot = ? AND expires_at > ?")
# One statement that writes only while the writer's lease row is live (_OURS), so a holder
# that lost its lease cannot overwrite its successor's record. Parameters: name, record, _OURS's.
_WRITE_RECORD = f"""
INSERT INTO tenure_records (name, record)
SELECT ?, ? WHERE EXISTS (SELECT 1 FROM tenure_leases WHERE {_OURS})
ON CONFLICT (name) DO UPDATE SET record = excluded.record
"""
_READ_RECORD = "SELECT record FROM tenure_records WHERE name = ?"
# Listings select the names with a prefix as the range [prefix, _after(prefix)) of the primary
# key, not with substr(): SQLite's substr() and length() of TEXT stop at the first NUL, while
# comparisons (BINARY collation: memcmp of the UTF-8) see every byte and use the index.
_LIST_RECORDS = ("SELECT name, record FROM tenure_records WHERE name >= ? {below} "
                 "ORDER BY name")
_LIST = ("SELECT name, slot, holder, token, expires_at FROM tenure_leases "
         "WHERE boot = ? AND expires_at > ? AND name >= ? {below} ORDER BY name, slot")
_LAST_CHAR = 0x10FFFF


def _after(prefix: str) -> str | None:
    """The least string greater than every string that starts with `prefix` (None: no such
    string, every name from `prefix` on starts with it). UTF-8 orders as code points do."""
    stem = prefix.rstrip(chr(_LAST_CHAR))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are not characters of a valid name
        following = 0xE000
    return stem[:-1] + chr(following)


def _with_prefix(statement: str, parameters: tuple[object, ...],
                 prefix: str) -> tuple[str, tuple[object, ...]]:
    """`statement` (ending its WHERE with `name >= ? {below}`) limited to names that start
    with `prefix`, and its parameters."""
    upper = _after(prefix)
    if upper is None:
        return statement.format(below=""), (*parameters, prefix)
    return statement.format(below="AND name < ?"), (*parameters, prefix, upper)


def _read_only(exc: sqlite3.Error) -> bool:
    return "readonly database" in str(exc).lower()


def _identity(path: Path) -> tuple[int, int, int]:
    """What changes when a file is written or replaced."""
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


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


_URL_FORMS = "sqlite:///path is relative to the working directory, sqlite:////path absolute"


log = logging.getLogger("tenure")

SCHEMES: tuple[str, ...] = ("sqlite",)


def from_url(url: str, **options: Any) -> Backend:
    """The store of a `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` URL, as
    `tenure.connect` builds it: option `synchronous` ("normal" or "full") in the URL's
    query or as a keyword (given both ways, they must agree).

    Example::

        backend = from_url("sqlite:////var/lib/app/locks.db?synchronous=full")
    """
    parsed = parse_store_url(url, SCHEMES)
    warn_of_the_old_reading(url, Path(parsed.location))
    return SQLiteStore(parsed.location, **only(
        merged(parsed.options, options), "synchronous", store="sqlite:// stores"))


def warn_of_the_old_reading(url: str, path: Path) -> bool:
    """Warn once when `url` is written `sqlite:///x` (relative after tenure 0.1.0, as in
    SQLAlchemy), `path` (what it means now) differs from `/x` (what it meant before), and a
    file `/x` exists: it may be the database the application's other instances still use,
    and two databases would split the leases. Returns whether it warned.

    Example:
        >>> warn_of_the_old_reading("sqlite:////tmp/locks.db", Path("/tmp/locks.db"))
        False
    """
    after_scheme = url.partition(":")[2]
    if not after_scheme.startswith("///") or after_scheme.startswith("////"):
        return False
    before = "/" + unquote(urlsplit(url, allow_fragments=False).path).lstrip("/")
    if before == str(path) or not os.path.isfile(before):
        return False
    log.warning("tenure: %s is %s (sqlite:/// is relative to the working directory, as in "
                "SQLAlchemy; in tenure 0.1.0 it meant %s, which exists): if %s is the lock "
                "database your other instances use, write sqlite:///%s", local_url(
                    "sqlite", str(path)), path, before, before, before)
    return True


def _database_path(path: object) -> Path:
    """`path` made absolute against the working directory (as SQLAlchemy does), refusing what
    is no database file."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentType(f"path must be a str or os.PathLike such as "
                                  f"'/var/lib/app/locks.db', got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgumentType(f"path must be a str path, got {type(text).__name__}")
    if text in ("", ":memory:"):
        # Each pooled connection would get a database of its own: no mutual exclusion.
        raise InvalidArgument(
            f"path {text!r} names no database file; give a file path such as "
            "'/var/lib/app/locks.db', or use tenure.connect('memory://') for leases within "
            "one process"
        )
    return Path(os.path.abspath(text))


# Connections a forked child inherited: never used, and never closed either (closing one may
# checkpoint or unlink the parent's WAL); kept here so that garbage collection leaves them be.
_INHERITED: list[sqlite3.Connection] = []


class SQLiteStore(Backend, RecordKeeper):
    """Leases in a SQLite database file shared by the processes of one host.

    `path` is made absolute at once, against the working directory; its directory must exist.

    Example::

        backend = SQLiteStore("/var/lib/app/locks.db")
        store = tenure.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "normal",
                 busy_timeout: float | str = 5.0) -> None:
        if not isinstance(synchronous, str):
            raise InvalidArgumentType(f"synchronous must be a str, 'normal' (default) or 'full', "
                                      f"got {type(synchronous).__name__}")
        if synchronous.lower() not in ("normal", "full"):
            raise InvalidArgument(
                f"synchronous={synchronous!r} is not supported; use 'normal' (default) or 'full'"
            )
        self.path = _database_path(path)
        self.url = local_url("sqlite", str(self.path))
        self._synchronous = synchronous.upper()
        self._busy_ms = int(float(busy_timeout) * 1000)
        # Connections are pooled, not tied to threads: any thread may use an idle one, so the
        # pool only grows to the number of concurrent calls (worker threads come and go).
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._mutex = threading.Lock()
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._closed = False
        _forks.in_child_after_fork(self, SQLiteStore._start_afresh_in_child)

    def _start_afresh_in_child(self) -> None:
        """After fork(): the parent's connections stay the parent's (SQLite forbids using one
        across fork); the child opens its own on first use."""
        _INHERITED.extend(self._all)
        self._idle, self._all = [], []
        self._mutex = threading.Lock()
        self._id_prefix = secrets.token_hex(6)  # lease ids stay unique between the two

    # -- connections -------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._closed:
            raise closed_store(self.url)
        self._check_directory()
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            connection.execute(f"PRAGMA synchronous = {self._synchronous}")
            self._initialize(connection)
        except sqlite3.OperationalError as exc:
            connection.close()
            if not _read_only(exc):
                raise
            # A file this process may only read (an operator listing an application's
            # store): reads work when its -wal and -shm files exist; writes are refused.
            connection = self._connect_uri("mode=ro")
            try:
                connection.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                connection.execute("SELECT 1 FROM tenure_leases LIMIT 0")
            except sqlite3.Error:
                connection.close()
                raise
        with self._mutex:
            self._all.append(connection)
        return connection

    def _check_directory(self) -> None:
        """Refuse a missing directory rather than create it: a path that means another place
        than the user thinks (sqlite:///var/... is relative) must not split the leases
        between two databases silently."""
        directory = self.path.parent
        if not directory.is_dir():
            code = errno.ENOTDIR if directory.exists() else errno.ENOENT
            raise OSError(code, os.strerror(code), str(directory))

    def _connect_uri(self, options: str) -> sqlite3.Connection:
        uri = f"{self.path.absolute().as_uri()}?{options}"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                               timeout=self._busy_ms / 1000)

    def _query(self, statement: str, parameters: Sequence[object]) -> list[tuple[Any, ...]]:
        """The rows of one read, on a pooled connection or, when the database is read-only for
        this process and SQLite cannot open it so (see _snapshot), on a snapshot of the file;
        none when the database has no lease table (see _has_tables)."""
        if not self._has_tables():
            return []
        try:
            db = self._take()
        except sqlite3.OperationalError as exc:
            if not _read_only(exc):
                raise
            return self._snapshot(statement, parameters, exc)
        try:
            return db.execute(statement, parameters).fetchall()
        finally:
            self._give_back(db)

    def _has_tables(self) -> bool:
        """Whether the database may hold leases, found without creating anything: a read (a
        listing, an operator's `tenure locks`) must leave a path with no database, or an
        application's own database without tenure's tables, as it is. True once this store
        opened a connection (which made the tables), and whenever the look fails: the read
        then runs as usual and says what is wrong (a missing directory, not a database...)."""
        if self._all or self._closed or not self.path.parent.is_dir():
            return True
        if not self.path.exists():
            return False
        try:
            probe = self._connect_uri("mode=ro")
        except sqlite3.Error:
            return True
        try:
            found = probe.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                  "AND name = 'tenure_leases'").fetchone()[0]
        except sqlite3.Error:
            return True
        finally:
            probe.close()
        return bool(found)

    def _snapshot(self, statement: str, parameters: Sequence[object],
                  refused: sqlite3.OperationalError) -> list[tuple[Any, ...]]:
        """Read a WAL database when this process can write neither the file nor its directory
        and no -shm file exists: SQLite cannot create one, so even a read-only connection
        fails. With no -wal file no connection is open and every commit is in the file
        itself, which is then read as immutable; the rows are kept only if the file did not
        change meanwhile (a writer that starts creates the -wal file first)."""
        wal = Path(f"{self.path}-wal")
        for _attempt in range(3):
            if wal.exists():  # a writer is active: its -shm is needed, missing or unreadable
                break
            before = _identity(self.path)
            connection = self._connect_uri("immutable=1")
            try:
                rows = connection.execute(statement, parameters).fetchall()
            finally:
                connection.close()
            if not wal.exists() and _identity(self.path) == before:
                return rows
        raise refused

    def _initialize(self, connection: sqlite3.Connection) -> None:
        """Switch a new database to WAL and create the table. Switching the journal mode does
        not wait on SQLite's busy handler, so processes opening a new file at once retry here."""
        deadline = time.monotonic() + self._busy_ms / 1000
        for attempt in itertools.count():
            try:
                if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    connection.execute("PRAGMA journal_mode = WAL")
                for statement in _SCHEMA:
                    connection.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    connection.close()
                    raise
                time.sleep(min(0.001 * 2**attempt, 0.05))  # runs in a worker thread when async

    def _take(self) -> sqlite3.Connection:
        try:
            return self._idle.pop()
        except IndexError:  # none idle (also when another thread took the last one)
            return self._open()

    def _give_back(self, db: sqlite3.Connection) -> None:
        """Return a connection to the pool, or close it when close() ran while it was in use
        (close() closes only idle connections: closing one that another thread is using
        crashes the interpreter)."""
        with self._mutex:
            if not self._closed:
                self._idle.append(db)
                return
            with suppress(ValueError):
                self._all.remove(db)
        db.close()

    def _failure(self, operation: str, name: str, exc: Exception) -> StoreUnavailable:
        """One clear error for a failure of SQLite or the file system: StoreRefused for what
        retrying cannot clear (see `_refusal`), else StoreUnavailable (a busy database, a full
        disk, an I/O error), which the core retries."""
        if self._closed:  # also a call that was running when close() came
            return closed_store(self.url, operation, name)
        if isinstance(exc, StoreRefused):
            return StoreRefused(str(exc))
        fix = self._refusal(exc)
        if fix is not None:
            return refusal(self.url, operation, name, fix, exc)
        return failure(self.url, operation, name, "check that the database file and its "
                       "directory are writable and not on a network file system", exc)

    def _refusal(self, exc: Exception) -> str | None:
        """What to fix when `exc` is permanent (None: transient, such as a busy database)."""
        directory = self.path.parent
        message = str(exc).lower()
        opening = isinstance(exc, OSError) or "unable to open database file" in message
        if opening and self.path.is_dir():
            return (f"{str(self.path)!r} is a directory, not a database file; name a file in "
                    f"it, e.g. {local_url('sqlite', str(self.path / 'locks.db'))}")
        if opening and not directory.exists():
            return (f"the database's directory {str(directory)!r} does not exist; create it, "
                    f"or fix the path in the URL ({_URL_FORMS})")
        if isinstance(exc, (PermissionError, NotADirectoryError, FileExistsError)):
            return (f"the database's directory {str(directory)!r} cannot be created or "
                    "written by this user; fix the path in the URL or the permissions")
        if "readonly database" in message or "read-only" in message:
            return (f"the database file {str(self.path)!r} is read-only for this process; make "
                    "it (and its directory, for the -wal and -shm files) writable")
        if "file is not a database" in message or "malformed" in message:
            return (f"the file {str(self.path)!r} is not a usable SQLite database; point the "
                    "URL at another path")
        if "unable to open database file" in message and not self._can_open():
            return (f"this user cannot create or open {str(self.path)!r}; fix the path in the "
                    "URL or the permissions of the file and its directory")
        return None

    def _can_open(self) -> bool:
        directory = self.path.parent
        if not os.access(directory, os.W_OK | os.X_OK):
            return False
        return not self.path.exists() or os.access(self.path, os.R_OK | os.W_OK)

    # Each operation: take an idle connection (or open one), run, give it back. Written out
    # rather than through a context manager: this is the whole cost of a cycle besides SQLite.

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        # The statement runs in a worker thread that a cancelled caller cannot stop: whichever
        # of the two comes second (the thread's answer, or the caller's cancellation) frees
        # the grant, so a cancelled acquire never leaves a lease nobody owns.
        attempt = _Attempt()
        try:
            grant: Grant | None = _shim.offload(self._acquire_for, attempt, name, holder,
                                                      ttl, limit)
        except BaseException:
            orphan = attempt.abandon()
            if orphan is not None:
                _shim.start_soon(self._release_quietly, orphan)
            raise
        return grant

    def _acquire_for(self, attempt: _Attempt, name: str, holder: str, ttl: float,
                     limit: int) -> Grant | None:
        grant = self._acquire_now(name, holder, ttl, limit)
        if grant is not None and not attempt.answer(grant):
            self._release_now(grant)  # the caller was cancelled meanwhile
            return None
        return grant

    def _release_quietly(self, grant: Grant) -> None:
        with suppress(StoreUnavailable):  # best effort: else the lease expires by itself
            self.release(grant)

    def _acquire_now(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        try:
            db = self._take()
            try:
                return self._acquire_in(db, name, holder, ttl, limit)
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("acquire", name, exc) from exc

    def _acquire_in(self, db: sqlite3.Connection, name: str, holder: str, ttl: float,
                    limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        now = host_monotonic()
        if limit == 1:
            # fetchall, not fetchone: step the statement to its end so the write commits now
            returned = db.execute(_ACQUIRE_LOCK, (name, holder, lease_id, wall_us(), BOOT_ID,
                                                  now + ttl, now)).fetchall()
            if not returned:
                return None
            token: int = returned[0][0]
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

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        results: list[Grant | LostReason] = _shim.offload(self._renew_now, grants, ttl)
        return results

    def _renew_now(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        try:
            db = self._take()
            try:
                results: list[Grant | LostReason] = []
                with _immediate(db):
                    now = host_monotonic()
                    for grant in grants:
                        renewed = db.execute(_RENEW, (now + ttl, grant.name, grant.slot,
                                                      grant.lease_id, BOOT_ID, now)).rowcount
                        results.append(grant if renewed else self._why_lost(db, grant))
                return results
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("renewal", label, exc) from exc

    @staticmethod
    def _why_lost(db: sqlite3.Connection, grant: Grant) -> LostReason:
        row = db.execute("SELECT lease_id FROM tenure_leases WHERE name = ? AND slot = ?",
                         (grant.name, grant.slot)).fetchone()
        if row is None or row[0] == "":
            return LostReason.BROKEN
        return LostReason.TAKEN if row[0] != grant.lease_id else LostReason.EXPIRED

    def release(self, grant: Grant) -> bool:
        released: bool = _shim.offload(self._release_now, grant)
        return released

    def _release_now(self, grant: Grant) -> bool:
        try:
            db = self._take()
            try:
                cursor = db.execute(_RELEASE, (grant.name, grant.slot, grant.lease_id, BOOT_ID,
                                               host_monotonic()))
                return bool(cursor.rowcount == 1)
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("release", grant.name, exc) from exc

    def break_lease(self, name: str) -> int:
        broken: int = _shim.offload(self._break_now, name)
        return broken

    def _break_now(self, name: str) -> int:
        try:
            db = self._take()
            try:
                return int(db.execute(_BREAK, (name, BOOT_ID, host_monotonic())).rowcount)
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("break", name, exc) from exc

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        found: list[LeaseInfo] = _shim.offload(self._leases_now, prefix)
        return found

    def _leases_now(self, prefix: str) -> list[LeaseInfo]:
        try:
            now = host_monotonic()
            wall_now = datetime.now(timezone.utc)
            rows = self._query(*_with_prefix(_LIST, (BOOT_ID, now), prefix))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("listing", prefix, exc) from exc
        return [
            LeaseInfo(name, holder, token, wall_now + timedelta(seconds=expires - now), slot)
            for name, slot, holder, token, expires in rows
        ]

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        _shim.sleep(timeout)  # SQLite has no notifications; the core polls with backoff

    def read_record(self, name: str) -> str | None:
        record: str | None = _shim.offload(self._read_record_now, name)
        return record

    def _read_record_now(self, name: str) -> str | None:
        try:
            rows = self._query(_READ_RECORD, (name,))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("reading the record", name, exc) from exc
        return str(rows[0][0]) if rows else None

    def write_record(self, grant: Grant, record: str) -> bool:
        record_bytes(record)
        written: bool = _shim.offload(self._write_record_now, grant, record)
        return written

    def _write_record_now(self, grant: Grant, record: str) -> bool:
        try:
            db = self._take()
            try:
                cursor = db.execute(_WRITE_RECORD, (grant.name, record, grant.name, grant.slot,
                                                    grant.lease_id, BOOT_ID, host_monotonic()))
                return bool(cursor.rowcount == 1)
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("writing the record", grant.name, exc) from exc

    def records(self, prefix: str = "") -> dict[str, str]:
        found: dict[str, str] = _shim.offload(self._records_now, prefix)
        return found

    def _records_now(self, prefix: str) -> dict[str, str]:
        try:
            rows = self._query(*_with_prefix(_LIST_RECORDS, (), prefix))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("listing the records", prefix, exc) from exc
        return {name: record for name, record in rows}

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
            self._all = [db for db in self._all if db not in idle]  # in use: closed when back
        for connection in idle:
            connection.close()
