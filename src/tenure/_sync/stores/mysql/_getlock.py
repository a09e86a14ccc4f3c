# GENERATED from src/tenure/_async/stores/mysql/_getlock.py by scripts/unasync.py: do not edit.
"""GET_LOCK mode (`mode=getlock`): each lease a session lock (GET_LOCK) held by one of the
store's connections, freed by the server when that connection ends; the fencing counter is
bumped in the same round trip (see _getlock_sql). A lock's waiter waits on the server, in a
blocking GET_LOCK that the release ends.

Example::

    backend = MySQLGetLockStore("mysql://app:secret@db/locks?mode=getlock")
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    record_bytes,
)
from tenure._sync.stores.mysql import _getlock_sql as sql
from tenure._sync.stores.mysql._connections import Connections
from tenure._sync.stores.mysql._driver import (
    CONNECTION_LOST,
    DRIVER_ERRORS,
    ER,
    pymysql,
    deadline,
    error_code,
)
from tenure._sync.stores.mysql._forgetting import Forgetting, Forgetful
from tenure._sync.stores.mysql._getlock_sessions import Sessions, Session
from tenure._sync.stores.mysql._options import Settings
from tenure._sync.stores.mysql._sql import Statements, drop
from tenure._errors import StoreUnavailable
from tenure._names import name_digest
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

log = logging.getLogger("tenure")

# A wait on the server lasts this long at most, then the waiter asks again (at the back of the
# queue): a stalled path cannot keep a lock granted to a wait nobody hears for longer.
WAIT_AT_MOST = 1.0
# A wait on the server ends this long before the acquire's patience does, so that its answer
# comes back before the core gives up; with less patience left, one plain try instead.
WAIT_MARGIN = 0.005
_RENEW_BATCH = 1000  # leases checked per statement (a statement of 1,000 UNIONs)


class MySQLGetLockStore(Backend, RecordKeeper):
    """Leases as session locks (GET_LOCK) of a MySQL 8 or MariaDB 10.5+ server; built by
    `tenure.connect` for `mode=getlock` (options as MySQLStore's; the table is
    `<table>_counters`).

    Example::

        backend = MySQLGetLockStore("mysql://app:secret@db/locks", mode="getlock")
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, url: str, **options: Any) -> None:
        settings = Settings.parse(url, options)
        self.url, self.database = settings.url, settings.database
        self.table = f"{settings.table}_counters"
        self.timeout, self.pool_size = settings.timeout, settings.pool_size
        self._settings = settings
        self._errors = Connections(settings, Statements(settings.table))  # its failure()
        self._sessions = Sessions(settings, self._lose)
        self._text = {name: text.replace("{table}", self.table) for name, text in (
            ("list", sql.LIST), ("release", sql.RELEASE), ("holders", sql.HOLDERS),
            ("read record", sql.READ_RECORD), ("records", sql.RECORDS),
            ("write record", sql.WRITE_RECORD))}
        self._statements: dict[int, str] = {}
        self._wait_text = sql.WAIT_LOCK.replace("{table}", self.table)
        self._schema = sql.SCHEMA.replace("{table}", self.table)
        self._mutex = threading.Lock()  # never held across I/O
        self._holding: dict[str, Session] = {}  # lease id -> the session holding its lock
        self._listeners: list[Callable[[list[str]], object]] = []
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(6)
        self._closing = False
        self._forgetting = Forgetting(settings.url, settings.retain, self._call, Forgetful(
            self.table, sql.CANDIDATES.replace("{table}", self.table), 1, sql.FIRST,
            lambda keys: sql.forget(self.table, keys),
            lambda keys: sql.forget(self.table, keys, sql.COUNT_NAMES),
            lambda idle, kept: drop(
                sql.forget(self.table, idle, sql.DROP_NAMES) if idle else "",
                sql.forget(self.table, kept, sql.DROP_KEPT) if kept else ""), sql.HAS_INDEX,
            tuple(alter.replace("{table}", self.table) for alter in sql.ADD_INDEX)))
        _forks.in_child_after_fork(self, MySQLGetLockStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a child after fork(): the parent's sessions and their locks stay the parent's."""
        self._sessions.start_afresh()
        self._mutex = threading.Lock()
        self._holding = {}
        self._id_prefix = secrets.token_hex(6)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} table={self.table}>"

    def report_losses_to(self, listener: Callable[[list[str]], object]) -> None:
        """Call `listener(lease_ids)` at once when this store closes a session that holds
        leases (an error on it, or close()): the server frees their locks with it.

        Example::

            backend.report_losses_to(lambda lease_ids: print("lost:", lease_ids))
        """
        with self._mutex:
            self._listeners.append(listener)

    def _lose(self, session: Session) -> None:
        with self._mutex:
            lost = list(session.leases)
            for lease_id in lost:
                self._holding.pop(lease_id, None)
            session.leases = {}
            listeners = list(self._listeners)
        if not lost:
            return
        log.log(logging.INFO if self._closing else logging.WARNING,
                "tenure: %s: a connection holding %d lease(s) is closed: they are lost, their "
                "holders are told now", self.url, len(lost))
        for listener in listeners:
            try:
                listener(lost)
            except Exception:  # one listener's bug must not keep the others from hearing it
                log.exception("tenure: %s: telling of lost leases failed", self.url)

    # -- running statements --------------------------------------------------------------------

    def _on(self, session: Session, operation: str, label: str,
                  work: Callable[..., Any], *args: Any) -> Any:
        """`work(connection, *args)` on `session`, not interrupted by a cancellation and bounded
        by `timeout`. A connection that failed is dropped (with its leases: see _lose) unless
        the server answered with an error, which leaves the session as it was."""
        try:
            with _shim.shielded(), deadline(self.timeout):
                return work(session.connection, *args)
        except BaseException as exc:
            code = error_code(exc)
            # a server's error (not the client's 2000s) leaves the session as it was
            answered = (isinstance(exc, pymysql.Error) and code is not None
                        and code not in CONNECTION_LOST and not 2000 <= code < 3000)
            # found ended (killed, the server gone), not cut off by this side's bound
            timed_out = isinstance(exc, TimeoutError) or isinstance(exc.__context__,
                                                                   TimeoutError)
            ended = not timed_out and (code in CONNECTION_LOST or isinstance(
                exc, (OSError, EOFError, pymysql.InterfaceError)))
            if not answered:
                self._sessions.drop(session, tell=not ended)
            if isinstance(exc, DRIVER_ERRORS):
                raise self._errors.failure(operation, label, exc) from None
            raise

    def _call(self, operation: str, label: str, work: Callable[..., Any],
                    *args: Any) -> Any:
        """`work(connection, *args)` on a pooled session, run once more on another when the
        session turned out dead (killed, or the server restarted)."""
        for attempt in range(2):
            session = self._take(operation, label)
            try:
                return self._on(session, operation, label, work, *args)
            except StoreUnavailable as exc:
                cause = exc.__cause__ or exc.__context__
                if attempt or not session.gone or isinstance(cause, TimeoutError):
                    raise
            finally:
                self._sessions.give_back(session)
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self, operation: str, label: str) -> Session:
        """A pooled session; a connection that could not be opened raises tenure's error."""
        try:
            return self._sessions.take()
        except DRIVER_ERRORS as exc:
            raise self._errors.failure(operation, label, exc) from None

    # -- acquire, renew, release ----------------------------------------------------------------

    def _statement(self, count: int) -> str:
        """The acquire of `count` slot locks: TRY_LOCK for a lock, else try_slots."""
        text = self._statements.get(count)
        if text is None:
            template = sql.TRY_LOCK if count == 1 else sql.try_slots(count)
            text = self._statements[count] = template.replace("{table}", self.table)
        return text

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        locks = sql.lock_names(self.database, self._settings.table, name, limit)
        for attempt in range(2):
            session = self._take("acquire", name)
            try:
                sent_at = _shim.monotonic()
                found = self._on(session, "acquire", name, self._acquire_in, session,
                                       name, holder, locks)
                # recorded before the session serves anyone else (see _send_grant's strays)
                lease_id = None if found is None else self._lease_id(session, locks[found[0]])
            except StoreUnavailable as exc:
                cause = exc.__cause__ or exc.__context__
                if attempt or not session.gone or isinstance(cause, TimeoutError):
                    raise
                continue  # a dead session: once more on another
            finally:
                self._sessions.give_back(session)
            if found is None or lease_id is None:
                return None
            slot, token = found
            return self._keep_unless_cancelled(
                Grant(name, slot, holder, lease_id, token, name, sent_at))
        raise AssertionError("unreachable")  # pragma: no cover

    def _lease_id(self, session: Session, lock: str) -> str:
        """A new lease id, recorded as held by `session` under `lock`."""
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        with self._mutex:
            session.leases[lease_id] = lock
            self._holding[lease_id] = session
        return lease_id

    def _acquire_in(self, connection: Any, session: Session, name: str, holder: str,
                          locks: list[str]) -> tuple[int, int] | None:
        """The try and the token's bump in one round trip (TRY_LOCK, try_slots)."""
        row = [name_digest(name), name.encode().hex(), holder.encode().hex()]
        arguments: list[Any]
        if len(locks) == 1:
            arguments = [*row, locks[0], locks[0], locks[0]]
        else:
            arguments = [lock for lock in locks for _ in (0, 1)]
            arguments += [*row, *locks, *row, *locks]
        mine = session.locks()
        return self._send_grant(connection, self._statement(len(locks)), arguments,
                                      [lock for lock in locks if lock not in mine])

    def _send_grant(self, connection: Any, statement: str, arguments: list[Any],
                          strays: list[str]) -> tuple[int, int] | None:
        """Send an acquire: (slot, token), or None when nothing was free. A missing table is
        created and the acquire sent again. A statement that failed after it took a lock keeps
        the lock (a session lock outlives its statement): the locks in `strays` (those no lease
        of this session uses) are given back before the session serves anyone else."""
        for attempt in range(2):
            try:
                with connection.cursor() as cursor:
                    changed = cursor.execute(statement, arguments)
                    if ";" not in statement:  # TRY_LOCK, WAIT_LOCK: the OK packet answers
                        return (0, int(cursor.lastrowid)) if changed else None
                    while cursor.nextset():  # a semaphore's: its SELECT comes last
                        rows = cursor.fetchall()
                        if rows:
                            [(slot, token)] = rows
                    return None if slot is None else (int(slot), int(token))
            except pymysql.Error as exc:
                code = error_code(exc)
                if code in CONNECTION_LOST or code is None or 2000 <= code < 3000:
                    raise  # the session ends: its locks with it
                with connection.cursor() as cursor:
                    cursor.execute("ROLLBACK")  # a semaphore's transaction
                    if strays:
                        cursor.execute(sql.unlock_strays(len(strays)),
                                             [lock for lock in strays for _ in (0, 1)])
                if attempt == 0 and code == ER.NO_SUCH_TABLE:
                    with connection.cursor() as cursor:
                        cursor.execute(self._schema)
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _keep_unless_cancelled(self, grant: Grant) -> Grant:
        """`grant`, taken by a statement a cancellation could not interrupt; a cancellation
        that came meanwhile lands here, and the lease is released rather than left held with
        nobody to release it."""
        if _shim.BLOCKING:
            return grant
        try:
            _shim.sleep(0)
        except BaseException:
            with _shim.shielded():
                try:
                    self.release(grant)
                except StoreUnavailable as exc:
                    log.debug("tenure: %s: %s", self.url, exc)
            raise
        return grant

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        with self._mutex:
            found = [(self._holding.get(grant.lease_id), grant) for grant in grants]
        checks = [(session, session.leases.get(grant.lease_id, ""))
                  for session, grant in found if session is not None]
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        holders: list[int | None] = []
        for start in range(0, len(checks), _RENEW_BATCH):
            batch = [lock for _, lock in checks[start:start + _RENEW_BATCH]]
            holders += self._call("renewal", label, self._held_in, batch)
        results: list[Grant | LostReason] = []
        answers = iter(zip(checks, holders, strict=True))
        for session, grant in found:
            if session is None:
                results.append(LostReason.BROKEN)  # released, or its session closed
                continue
            (_, _), holder = next(answers)
            if holder == session.id:
                results.append(grant)
            else:  # ended (a break ends the session) or, since, someone else's
                results.append(LostReason.BROKEN if holder is None else LostReason.TAKEN)
        return results

    @staticmethod
    def _held_in(connection: Any, locks: list[str]) -> list[int | None]:
        with connection.cursor() as cursor:
            cursor.execute(sql.held(len(locks)), locks)
            rows = dict(cursor.fetchall())
        return [None if rows.get(index) is None else int(rows[index])
                for index in range(len(locks))]

    def release(self, grant: Grant) -> bool:
        if self._closing:  # the lease's connection is gone with the store
            raise closed_store(self.url, "release", grant.name)
        with self._mutex:
            session = self._holding.get(grant.lease_id)
        if session is None:
            return False  # released before, lost with its session, or not of this store
        if not self._sessions.take_holding(session):
            return False
        try:
            lock = session.leases.get(grant.lease_id)
            if lock is None:
                return False
            freed: int | None = self._on(session, "release", grant.name,
                                               self._release_in, grant, lock)
        except StoreUnavailable:
            if session.gone:
                return False  # the session ended: the server freed its locks
            raise
        finally:
            with self._mutex:
                session.leases.pop(grant.lease_id, None)
                self._holding.pop(grant.lease_id, None)
            self._sessions.give_back(session)
        if freed == 1:
            self._forgetting.after_release(name_digest(grant.name))
        return freed == 1

    def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names not granted for `idle` seconds whose locks nobody holds (their
        rows of the counters table; a record stays, see _getlock_sql.CANDIDATES), or with
        `dry_run` only count them; the number of names.

        Example::

            forgotten = backend.prune(idle=3600.0)
        """
        return self._forgetting.prune(idle, dry_run)

    def _release_in(self, connection: Any, grant: Grant, lock: str) -> int | None:
        """The release (see _getlock_sql.RELEASE): 1 when this session held the lock. A table
        dropped meanwhile stops the statement before its RELEASE_LOCK, which then goes
        alone."""
        with connection.cursor() as cursor:
            try:
                cursor.execute(self._text["release"],
                                     (name_digest(grant.name), grant.slot, grant.token, lock))
                cursor.nextset()
            except pymysql.Error as exc:
                if error_code(exc) != ER.NO_SUCH_TABLE:
                    raise
                cursor.execute(sql.RELEASE_LOCK, (lock,))
            [(freed,)] = cursor.fetchall()
        return None if freed is None else int(freed)

    def break_lease(self, name: str) -> int:
        """End the sessions holding `name`'s slots (KILL CONNECTION: their other leases go
        with them), or release where this store's own session holds one; wait until the
        server freed their locks. How many were held."""
        broken: int = self._call("break", name, self._break_in, name)
        return broken

    def _break_in(self, connection: Any, name: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(self._text["holders"], (name_digest(name),))
            held = [(bytes(lock).decode(), int(owner)) for lock, owner in cursor.fetchall()]
            own = connection.thread_id()
            for lock, owner in held:
                if owner == own:
                    cursor.execute(sql.RELEASE_LOCK, (lock,))
                    continue
                try:
                    cursor.execute(f"KILL CONNECTION {owner}")
                except pymysql.OperationalError as exc:
                    if error_code(exc) != ER.NO_SUCH_THREAD:
                        raise
            # KILL returns before the killed session has ended: wait until its locks are free.
            pause, give_up = 0.001, _shim.monotonic() + self.timeout * 0.8
            while held and _shim.monotonic() < give_up:
                cursor.execute(sql.held(len(held)), [lock for lock, _ in held])
                now = dict(cursor.fetchall())
                if all(now.get(index) != owner for index, (_, owner) in enumerate(held)):
                    break
                _shim.sleep(pause)
                pause = min(pause * 2, 0.05)
        with self._mutex:  # this store's own sessions' leases of the name: released above
            for session in {*self._holding.values()}:
                if session.id == own:
                    for lease_id, lock in list(session.leases.items()):
                        if lock in {lock for lock, _ in held}:
                            del session.leases[lease_id]
                            self._holding.pop(lease_id, None)
        return len(held)

    # -- the wait on the server -----------------------------------------------------------------

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """No release notice here: sleep `timeout` (semaphores poll; a lock's waiter waits on
        the server, see wait_and_acquire)."""
        _shim.sleep(timeout)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """A lock's waiter waits on the server: a blocking GET_LOCK (at most WAIT_AT_MOST, and
        the acquire's patience) on a connection that holds no lock, with the token's bump in the
        same round trip; the server queues the waiters and grants the lock at the release. A
        wait cut short (timeout, cancellation, error) closes its connection, and the lock it
        may have taken goes with it. A semaphore's waiter polls: sleeps `timeout`, then tries.

        Example::

            grant = backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.05, 10.0)
        """
        wait = min(patience - WAIT_MARGIN, WAIT_AT_MOST, self.timeout * 0.8)
        if limit != 1:
            _shim.sleep(timeout)
        if limit != 1 or wait < WAIT_MARGIN:
            sent_at = _shim.monotonic()
            grant = self.try_acquire(name, holder, ttl, limit)
            return None if grant is None else grant._replace(sent_at=sent_at)
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        [lock] = sql.lock_names(self.database, self._settings.table, name, 1)
        session = self._sessions.take_free()
        connection = None if session is not None else self._sessions.waiting_connection()
        try:
            with deadline(wait + self.timeout):
                if session is None:
                    if connection is None:
                        connection = self._sessions.open()
                    session = Session(connection, pooled=False)
                self._sessions.asleep.add(session.connection)
                if self._closing:
                    raise closed_store(self.url, "acquire", name)
                key = name_digest(name)
                arguments = [key, name.encode().hex(), holder.encode().hex(), lock, lock,
                             round(wait, 3)]
                sent_at = _shim.monotonic()
                found = self._send_grant(session.connection, self._wait_text,
                                               arguments, [lock])
        except BaseException as exc:
            if session is not None:  # closed, and with it any lock the wait took
                self._sessions.asleep.discard(session.connection)
                self._sessions.drop(session)
            elif connection is not None:
                self._sessions.discard(connection)
            if self._closing:
                raise closed_store(self.url, "acquire", name) from None
            if isinstance(exc, DRIVER_ERRORS):
                raise self._errors.failure("waiting", name, exc) from None
            raise
        self._sessions.asleep.discard(session.connection)
        if found is None or self._closing:
            self._sessions.give_back(session)  # holds nothing: serves the next call or wait
            if self._closing:
                raise closed_store(self.url, "acquire", name)
            return None
        slot, token = found
        lease_id = self._lease_id(session, lock)
        self._sessions.give_back(session)
        return self._keep_unless_cancelled(
            Grant(name, slot, holder, lease_id, token, name, sent_at))

    # -- listing and records ---------------------------------------------------------------------

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._forgetting.ensure_index()
        encoded = prefix.encode()
        rows = self._call("listing", prefix, self._query, "list",
                                (len(encoded), encoded.hex()))
        # sorted here too: the server sorts by a name's first max_sort_length bytes only
        return sorted((LeaseInfo(bytes(name).decode(), bytes(holder).decode(), int(token), None,
                                 int(slot)) for name, slot, holder, token in rows),
                      key=lambda info: (info.name, info.slot))

    def read_record(self, name: str) -> str | None:
        rows = self._call("reading the record", name, self._query, "read record",
                                (name_digest(name),))
        return None if not rows or rows[0][0] is None else bytes(rows[0][0]).decode()

    def write_record(self, grant: Grant, record: str) -> bool:
        encoded = record_bytes(record)
        written = self._call("writing the record", grant.name, self._query,
                                   "write record", (grant.slot, encoded.hex(),
                                                    name_digest(grant.name), grant.token))
        return bool(written)

    def records(self, prefix: str = "") -> dict[str, str]:
        encoded = prefix.encode()
        rows = self._call("listing the records", prefix, self._query, "records",
                                (len(encoded), encoded.hex()))
        return {bytes(name).decode(): bytes(record).decode() for name, record in rows}

    def _query(self, connection: Any, statement: str, arguments: tuple[Any, ...]) -> Any:
        """Rows of a SELECT, or the rows an UPDATE changed; a missing table has none."""
        with connection.cursor() as cursor:
            try:
                changed = cursor.execute(self._text[statement], arguments)
            except pymysql.Error as exc:
                if error_code(exc) == ER.NO_SUCH_TABLE:
                    return [] if statement != "write record" else 0
                raise
            if statement == "write record":
                return changed
            return list(cursor.fetchall())

    # -- closing --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection: the server frees the locks they hold. Idempotent."""
        self._closing = True
        for session in self._sessions.close():
            self._sessions.drop(session)
        for connection in list(self._sessions.asleep):
            self._sessions.discard(connection)

