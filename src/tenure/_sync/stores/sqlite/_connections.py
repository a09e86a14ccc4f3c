# GENERATED from src/tenure/_async/stores/sqlite/_connections.py by scripts/unasync.py: do not edit.
"""The sqlite:// store's connections: opened with its pragmas (WAL journal, `synchronous`, busy
timeout), pooled rather than tied to threads, left to the parent after fork(), and the reads
that must create nothing (a listing of a path with no database, or of a database this process
may only read).

Async calls run their statements on the event loop's own thread first (see _on_loop): a thread
hop costs several times a SQLite statement. There they never wait: a connection kept for the
loop has busy_timeout 0 and no automatic checkpoint, so a write lock held by another
connection answers SQLITE_BUSY at once instead of waiting, and the call runs again in a worker
thread (with the store's busy timeout) as every call did before. Commits that sync to disk
(synchronous=full) and anything that opens files run in a thread too.

Example::

    class Store(SQLiteConnections):
        def count(self) -> int:
            return self._on_connection("count", "", lambda db: 1)
"""

from __future__ import annotations

import errno
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.sqlite._failures import store_failure
from tenure._sync.stores.sqlite._settings import (
    DEFAULT_BUSY_TIMEOUT,
    busy_timeout_seconds,
    database_path,
    store_url,
    synchronous_pragma,
)
from tenure._sync.stores.sqlite._sql import HAS_LEASE_TABLE, PROBE_LEASE_TABLE, SCHEMA
from tenure._errors import StoreUnavailable

T = TypeVar("T")

# One in this many writes run on the event loop goes to a worker thread instead, whose connection
# checkpoints the WAL (write it back into the database and sync both files) when it grew past
# SQLite's usual 1,000 pages: the loop's own connections never do, a checkpoint syncs to disk.
CHECKPOINT_EVERY = 256

# Connections a forked child inherited: never used, and never closed either (closing one may
# checkpoint or unlink the parent's WAL); kept here so that garbage collection leaves them be.
_INHERITED: list[sqlite3.Connection] = []


def _read_only(exc: sqlite3.Error) -> bool:
    return "readonly database" in str(exc).lower()


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY (another connection holds a lock this statement needs) or SQLITE_LOCKED."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return (code & 0xFF) in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (named in Python 3.11+)
    return "locked" in str(exc)


def _identity(path: Path) -> tuple[int, int, int]:
    """What changes when a file is written or replaced."""
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


@contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock up front, so its reads stay valid.

    Example::

        with immediate(db):
            rows = db.execute(SLOTS, (name,)).fetchall()
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class SQLiteConnections:
    """The pool of connections to one database file, and what a failure there means.

    Example::

        connections = SQLiteConnections("/var/lib/app/locks.db")
        rows = connections._query("SELECT 1", ())
    """

    # Async calls (_shim.offload) run on the event loop's thread first: see _on_loop.
    offload_inline_first = True

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "normal",
                 busy_timeout: float | str = DEFAULT_BUSY_TIMEOUT) -> None:
        self._synchronous = synchronous_pragma(synchronous)
        # With synchronous=full a commit syncs the WAL to disk, which has no time bound on a
        # busy disk: writes run in a worker thread then; reads still run on the loop.
        self._writes_on_loop = self._synchronous == "NORMAL"
        busy_seconds = busy_timeout_seconds(busy_timeout)
        self.path = database_path(path)
        self.url = store_url(self.path, self._synchronous, busy_seconds)
        self._busy_ms = max(1, round(busy_seconds * 1000))
        # Connections are pooled, not tied to threads: any thread may use an idle one, so the
        # pool only grows to the number of concurrent calls (worker threads come and go).
        self._idle: list[sqlite3.Connection] = []
        self._loop_idle: list[sqlite3.Connection] = []  # busy_timeout 0: see _on_loop
        self._loop_writes = 0
        self._all: list[sqlite3.Connection] = []
        self._mutex = threading.Lock()
        self._closed = False
        _forks.in_child_after_fork(self, type(self)._start_afresh_in_child)

    def _start_afresh_in_child(self) -> None:
        """After fork(): the parent's connections stay the parent's (SQLite forbids using one
        across fork); the child opens its own on first use."""
        _INHERITED.extend(self._all)
        self._idle, self._loop_idle, self._all = [], [], []
        self._mutex = threading.Lock()

    # Each operation takes an idle connection (or opens one), runs and gives it back, through a
    # plain call rather than a context manager: this is the whole cost of a cycle besides SQLite.

    def _on_connection(self, operation: str, name: str,
                       work: Callable[..., T], *arguments: object) -> T:
        """`work(db, *arguments)` on a pooled connection; a failure of SQLite or the file
        system raised as the store's error for `operation` on `name`."""
        if _shim.running_inline():
            return self._write_on_loop(operation, name, work, arguments)
        try:
            db = self._take()
            try:
                return work(db, *arguments)
            finally:
                self._give_back(db)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure(operation, name, exc) from exc

    def _write_on_loop(self, operation: str, name: str, work: Callable[..., T],
                       arguments: tuple[object, ...]) -> T:
        if not self._writes_on_loop:
            raise _shim.WouldBlock  # the commit syncs to disk
        self._loop_writes += 1
        if self._loop_writes % CHECKPOINT_EVERY == 0:
            raise _shim.WouldBlock  # a thread's connection checkpoints if the WAL is long
        try:
            return self._on_loop(work, arguments)
        except (sqlite3.Error, OSError) as exc:
            raise self._failure(operation, name, exc) from exc

    def _on_loop(self, work: Callable[..., T], arguments: tuple[object, ...]) -> T:
        """`work(db, *arguments)` right here on the event loop's thread, on a connection kept
        for the loop, or WouldBlock (nothing done) where it would have to wait.

        Such a connection has busy_timeout 0: SQLite takes its file locks without waiting
        (it never sleeps for them unless a busy handler tells it to), so a lock that another
        connection holds, of this process or another, answers SQLITE_BUSY at once, before
        the statement changed anything (the write lock is the first thing a write takes; in
        a BEGIN IMMEDIATE transaction, the BEGIN). A statement otherwise reads and writes
        the database and its WAL through the page cache: no sync to disk with
        synchronous=normal, and no checkpoint (wal_autocheckpoint 0, see CHECKPOINT_EVERY).
        Opening a connection, which may create files and wait for another process's journal
        switch, is left to a worker thread, which lends the loop a connection afterwards
        (see _give_back).
        """
        try:
            db = self._loop_idle.pop()
        except IndexError:  # none yet, or another event loop's thread has it
            raise _shim.WouldBlock from None
        try:
            return work(db, *arguments)
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise _shim.WouldBlock from exc
            raise
        finally:
            self._give_back(db, self._loop_idle)

    def _take(self) -> sqlite3.Connection:
        try:
            return self._idle.pop()
        except IndexError:  # none idle (also when another thread took the last one)
            return self._open()

    def _give_back(self, db: sqlite3.Connection,
                   pool: list[sqlite3.Connection] | None = None) -> None:
        """Return a connection to its pool (the worker threads' unless told), or close it when
        close() ran while it was in use (close() closes only idle connections: closing one
        that another thread is using crashes the interpreter).

        Async, a worker thread's connection goes to the event loop's pool when that is empty:
        the first call opened it in a thread, the next ones run on the loop."""
        if pool is None:
            pool = self._idle
            if not _shim.BLOCKING and not self._loop_idle and self._lend_to_loop(db):
                pool = self._loop_idle
        with self._mutex:
            if not self._closed:
                pool.append(db)
                return
            with suppress(ValueError):
                self._all.remove(db)
        db.close()

    def _lend_to_loop(self, db: sqlite3.Connection) -> bool:
        """Make a worker thread's connection one for the event loop (see _on_loop)."""
        try:
            db.execute("PRAGMA busy_timeout = 0")
            db.execute("PRAGMA wal_autocheckpoint = 0")
        except sqlite3.Error:
            with suppress(sqlite3.Error):  # back as it was, for the threads
                db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                db.execute("PRAGMA wal_autocheckpoint = 1000")
            return False
        return True

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
                connection.execute(PROBE_LEASE_TABLE)
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

    def _initialize(self, connection: sqlite3.Connection) -> None:
        """Switch a new database to WAL and create the table. Switching the journal mode does
        not wait on SQLite's busy handler, so processes opening a new file at once retry here."""
        deadline = time.monotonic() + self._busy_ms / 1000
        for attempt in itertools.count():
            try:
                if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    connection.execute("PRAGMA journal_mode = WAL")
                for statement in SCHEMA:
                    connection.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    connection.close()
                    raise
                time.sleep(min(0.001 * 2**attempt, 0.05))  # runs in a worker thread when async

    def _query(self, statement: str, parameters: Sequence[object]) -> list[tuple[Any, ...]]:
        """The rows of one read, on a pooled connection or, when the database is read-only for
        this process and SQLite cannot open it so (see _snapshot), on a snapshot of the file;
        none when the database has no lease table (see _has_tables). On the event loop's
        thread, on the loop's connection or not at all (WouldBlock), with or without
        synchronous=full: a read syncs nothing."""
        if _shim.running_inline():
            return self._on_loop(_fetch_all, (statement, parameters))
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
            found = probe.execute(HAS_LEASE_TABLE).fetchone()[0]
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

    def _failure(self, operation: str, name: str, exc: Exception) -> StoreUnavailable:
        """One clear error for a failure of SQLite or the file system (see store_failure);
        a closed store's, once close() came."""
        if self._closed:  # also a call that was running when close() came
            return closed_store(self.url, operation, name)
        return store_failure(self.url, self.path, operation, name, exc)

    def close(self) -> None:
        """Close the idle connections now and the others when given back; later calls are
        refused as calls of a closed store.

        Example::

            backend.close()
        """
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle + self._loop_idle, []
            self._loop_idle = []
            self._all = [db for db in self._all if db not in idle]  # in use: closed when back
        for connection in idle:
            connection.close()


def _fetch_all(db: sqlite3.Connection, statement: str,
               parameters: Sequence[object]) -> list[tuple[Any, ...]]:
    return db.execute(statement, parameters).fetchall()
