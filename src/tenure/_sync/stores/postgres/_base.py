# GENERATED from src/tenure/_async/stores/postgres/_base.py by scripts/unasync.py: do not edit.
"""What the two modes of the PostgreSQL store share: options, the pool and the listener, running
a statement (creating the tables when missing), failures, records, plain waits, close and fork;
PostgresStore(url) builds the mode's class, picked once from the URL (`mode=`).

Example::

    backend = PostgresStore("postgresql://app@db/app?mode=advisory")
    assert type(backend).__name__ == "PostgresAdvisoryStore"
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import random
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import psycopg
from psycopg import errors, sql

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    record_bytes,
    subject,
)
from tenure._sync.stores.postgres._connection import (
    Cursor,
    _NoAnswer,
    _Session,
    send,
)
from tenure._sync.stores.postgres._failures import _TOO_MANY, clean, refusal
from tenure._sync.stores.postgres._listener import _LISTEN_RETRY, _Listener
from tenure._sync.stores.postgres._pool import _Pool
from tenure._sync.stores.postgres._settings import Settings, read_settings
from tenure._sync.stores.postgres._statements import _render, _Script, _Statement
from tenure._sync.stores.postgres._table_sql import (
    _MIGRATE,
    _READ_RECORD,
    _RECORDS,
)
from tenure._errors import StoreRefused, StoreUnavailable, TenureError
from tenure._names import name_digest
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

log = logging.getLogger("tenure")

SWEEP_EVERY = 60.0  # seconds: the longest gap between two sweeps of idle names by one store
_SWEEP_PAGES = 1024  # pages of the table one sweep looks at (8 MB with 8 kB pages)
_RANGE_PAGES = 8  # pages one forgetting statement looks at (see _table_sql._FORGET)
_MOST_FORGOTTEN = 256  # names one forgetting statement forgets at most (a lock each)


def _channel(schema: str, table: str) -> str:
    """The NOTIFY channel of one lease table: readable when it fits PostgreSQL's 63 bytes.

    Example:
        >>> _channel("public", "tenure_leases")
        'tenure.public.tenure_leases'
    """
    channel = f"tenure.{schema}.{table}"
    return channel if len(channel) <= 63 else f"tenure.{name_digest(channel)}"


class PostgresStore(Backend, RecordKeeper):
    """Leases in a PostgreSQL table, reached with psycopg 3 through a small connection pool.

    `url` is a libpq URL (`postgresql://` or `postgres://`); its query parameters go to libpq
    (sslmode, application_name, ...) except tenure's own options, which may also be given as
    keywords (the keyword wins): schema ("public"), table ("tenure_leases"; "tenure_advisory"
    in advisory mode), timeout (5 s), pool_size (10), notify (True), pgbouncer (False),
    prepare_threshold (psycopg's 5, or None), mode ("table", or "advisory": each lease is a
    session advisory lock held by one of the pool's connections, freed when that one ends),
    retain (3600 s: the rows of a name free that long are deleted by a sweep that releases and
    renewals start now and then; 0 at its release, inf never; see prune).

    Example::

        backend = PostgresStore("postgresql://app@db/app", schema="locks", timeout=3)
        store = tenure.connect(backend)
    """


    # What a mode's class says (see _table and _advisory): its tables, the shape of an earlier
    # version's table (see _MIGRATE) and the columns added since (_upgrade_template), its record
    # statement, the row keeping a record, and its forgetting of idle names (_forget_template:
    # see _table_sql._FORGET).
    _ddl_template: ClassVar[str]
    _upgrade_template: ClassVar[str]
    _forget_template: ClassVar[str]
    _shape: ClassVar[tuple[tuple[str, str], ...]]
    _write_record_template: ClassVar[str]
    _record_slot: ClassVar[int]

    def __new__(cls, url: str, **options: Any) -> PostgresStore:
        if cls is PostgresStore:  # picked once, from the URL's (or keywords') mode
            from tenure._sync.stores.postgres._advisory import PostgresAdvisoryStore
            from tenure._sync.stores.postgres._table import PostgresTableStore

            mode = read_settings(url, options).mode
            cls = PostgresAdvisoryStore if mode == "advisory" else PostgresTableStore
        return super().__new__(cls)

    def __init__(self, url: str, **options: Any) -> None:
        settings: Settings = read_settings(url, options)
        self.url, self.mode = settings.url, settings.mode
        self.schema, self.table = settings.schema, settings.table
        self._password, self._timeout = settings.password, settings.timeout
        self._notify, self._pgbouncer = settings.notify, settings.pgbouncer
        self._prepare = settings.prepare
        self.retain = settings.retain
        self.capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)
        self.channel = _channel(self.schema, self.table)

        self._sql_table = table = sql.Identifier(self.schema, self.table)
        self._ddl = _render(self._ddl_template, table)
        self._upgrade = sql.SQL(self._upgrade_template.strip()).format(
            t=table, live=sql.Identifier(f"{self.table[:58]}_live")).as_bytes(None)
        self._regclass = f'"{self.schema}"."{self.table}"'
        self._forget_sql = _render(self._forget_template, table)
        # When this store sweeps next (see _sweep_soon): one period after it starts, not at its
        # first release (a short-lived store, a CLI's, sweeps nothing).
        self._next_sweep = _shim.monotonic() + self._sweep_period()
        self._sweep_page = -1  # the page its next sweep starts at (-1: a random one)
        self._migrate = sql.SQL(_MIGRATE.strip()).format(
            t=table, regclass=sql.Literal(f'"{self.schema}"."{self.table}"'),
            shape=sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(column),
                                                                   sql.Literal(kind))
                                     for column, kind in self._shape),
            columns=sql.Literal(len(self._shape))).as_bytes(None)
        self._create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(self.schema)).as_bytes(None)
        self._write_record_sql = _render(self._write_record_template, table)
        self._read_record_sql = _render(_READ_RECORD, table)
        self._records_sql = _render(_RECORDS, table)

        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._mutex = threading.Lock()  # never held across I/O: serves threads and tasks alike
        # Advisory mode: the pooled session that holds each lease's lock, by lease id, until
        # release (empty in table mode: its sessions hold nothing between statements).
        self._holding: dict[str, _Session] = {}
        # Who is told at once when this store closes, or finds broken, a session holding
        # advisory leases (see report_losses_to): the lease monitor of each Store on it.
        self._loss_listeners: list[Callable[[list[str]], object]] = []
        self._pool = _Pool(settings, self._lose, self._mutex)
        self._listener = _Listener(self._pool, self.channel, self._id_prefix, self._handed,
                                   self._mutex)
        _forks.in_child_after_fork(self, type(self)._start_afresh_in_child)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # The renewal statement of the mode (its class sets it): the same parameters in both.
    _renew_sql: bytes

    # -- what each mode's class does its own way ---------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        raise NotImplementedError

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        """Renew `grants` in one statement (each mode's `_renew_sql`): each grant renewed,
        or why it is lost."""
        if not grants:
            return []
        self._sweep_soon()
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        rows = self._execute("renewal", label, self._renew_sql, {
            "names": [grant.name.encode() for grant in grants],
            "slots": [grant.slot for grant in grants],
            "ids": [grant.lease_id for grant in grants],
            "ttl": ttl,
        })
        return [grant if not row[0] else LostReason(row[0])
                for grant, row in zip(grants, rows, strict=True)]

    def release(self, grant: Grant) -> bool:
        raise NotImplementedError

    def break_lease(self, name: str) -> int:
        raise NotImplementedError

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        raise NotImplementedError

    def _handed(self, payload: str) -> None:
        """A hand-over notice (table mode's: see _handover); none comes in advisory mode."""

    # -- failures -----------------------------------------------------------------------------

    def _clean(self, exc: BaseException) -> str:
        """A driver message fit for users: one line, password hidden."""
        return clean(exc, self._password)

    def _failure(self, operation: str, name: str, exc: psycopg.Error) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to
        check; StoreRefused when retrying cannot clear it (see `_refusal`)."""
        fix = self._refusal(exc)
        if fix is not None:
            return StoreRefused(f"{self.url}: {subject(operation, name)} refused: "
                                f"{self._clean(exc)}; {fix}")
        if isinstance(exc, errors.QueryCanceled):
            hint = (f"the statement ran past timeout={self._timeout:g} s: is the server "
                    "overloaded, or a long transaction holding the lease rows locked?")
        elif exc.sqlstate == "53300" or any(words in str(exc) for words in _TOO_MANY):
            hint = (f"the server has no connection left (too many connections: its "
                    f"max_connections, or the role's or database's connection limit, is "
                    f"reached); this store has {self._pool.opened} of its "
                    f"pool_size={self._pool.size} connections open{self._held_leases()}; "
                    "raise the server's max_connections, or lower pool_size here or in the "
                    "server's other clients")
        elif exc.sqlstate == "53200":
            hint = ("the server's lock table is full (out of shared memory)"
                    f"{self._held_leases()}: each held advisory lease takes one of its "
                    "entries, about max_locks_per_transaction x max_connections for the whole "
                    "server; raise max_locks_per_transaction, or hold fewer leases")
        elif isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            hint = ("check that PostgreSQL is running and reachable at this address, and the "
                    "user, password (PGPASSWORD or ~/.pgpass) and database")
        else:
            hint = "check the server's log for this error"
        return StoreUnavailable(f"{self.url}: {subject(operation, name)} failed: "
                                f"{self._clean(exc)}; {hint}")

    def _held_leases(self) -> str:
        return ""

    def _refusal(self, exc: psycopg.Error) -> str | None:
        """What to fix when `exc` is permanent; None when it is transient (see refusal)."""
        return refusal(exc, self.schema, self.table)

    def _no_answer(self, operation: str, name: str, kept: bool = False) -> StoreUnavailable:
        what = ("so it was cancelled (its connection, and the advisory leases it holds, live "
                "on)" if kept else "so its connection was closed")
        return StoreUnavailable(
            f"{self.url}: {subject(operation, name)} got no answer within timeout="
            f"{self._timeout:g} s, {what}; is the server, or a pooler or proxy on the way to "
            "it, frozen or overloaded, a long transaction holding the lease rows locked, or "
            "the network path silent?")

    # -- connections --------------------------------------------------------------------------

    def _start_afresh_in_child(self) -> None:
        """After fork(): the parent's connections, leases and waits stay the parent's. The child
        sends nothing on an inherited socket, not even the Terminate message that closing sends
        (the server would end the parent's session): each socket is replaced by /dev/null in
        the child only, then closed. The child opens its own connections on first use, and
        takes lease ids of its own (the parent's counter goes on with the same ones)."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for connection in list(self._pool.connections):
                with contextlib.suppress(psycopg.Error, OSError):
                    os.dup2(null, connection.pgconn.socket)
                connection.pgconn.finish()  # closes /dev/null; no "deleted while open" warning
        finally:
            os.close(null)
        self._mutex = threading.Lock()  # another thread of the parent may have held it
        self._pool.start_afresh(self._mutex)
        self._holding = {}
        self._id_prefix = secrets.token_hex(6)
        self._listener.start_afresh(self._id_prefix, self._mutex)

    def report_losses_to(self, listener: Callable[[list[str]], object]) -> None:
        """Call `listener(lease_ids)` at once whenever this store closes, or finds broken, a
        session that holds advisory leases: they are lost (the server frees their locks with the
        session), and their holders learn it before the session is closed rather than at their
        next renewal, up to ttl/3 later, when another process may hold the name already. The
        lease monitor of each Store on this backend listens.

        Example::

            backend.report_losses_to(lambda lease_ids: print("lost:", lease_ids))
        """
        with self._mutex:
            self._loss_listeners.append(listener)

    def _lose(self, session: _Session) -> None:
        """`session` is about to be closed, or was found broken: the advisory leases it holds
        go with it, and their holders are told now (see report_losses_to). Idempotent."""
        with self._mutex:
            if session.gone:
                return
            session.gone = True
            lost = list(session.leases)
            for lease_id in lost:
                self._holding.pop(lease_id, None)
            claims, session.claims = session.claims, []
            listeners = list(self._loss_listeners)
        for event in claims:
            event.set()
        if not lost:
            return
        log.log(logging.INFO if self._pool.closed else logging.WARNING,
                "tenure: %s: a connection holding %d advisory lease(s) is closed: they are "
                "lost, their holders are told now", self.url, len(lost))
        for listener in listeners:
            try:
                listener(lost)
            except Exception:  # a listener's bug must not keep the others from hearing it
                log.exception("tenure: %s: telling of lost leases failed", self.url)

    def _execute(self, operation: str, name: str, query: bytes | _Statement | _Script,
                       params: dict[str, Any], sent: list[_Session] | None = None,
                       lease_id: str = "", reading: bool = False) -> Any:
        """Run one statement on a pooled connection; create the table when it is missing,
        unless `reading` (a listing or a record's read: no rows then, and nothing created).
        A _Statement answers libpq's result, any other query the rows psycopg fetched.

        Each wait for the server is bounded by `timeout` (see _Connection): past it, the
        connection is closed (it is in an unknown state) and StoreUnavailable raised; in
        advisory mode a connection that holds leases is first tried to be kept, its statement
        cancelled (see _settle), and its leases' holders told at once when it is closed.

        How the statement is sent is _on_session's (advisory mode: never interrupted, see
        there; with `lease_id`, an advisory acquire). `sent` collects the sessions the
        statement was sent on (see _undo).

        A connection the server dropped while it sat idle (pg_terminate_backend, restart) may
        look fine until used: when the statement breaks its connection, it runs once more on
        a new one. Every statement is safe to repeat: renew, release and break by lease id
        or name, and acquire by its lease id (see _FREE)."""
        for attempt in (1, 2):
            session: _Session | None = None
            try:
                session = self._pool.take()
                if sent is not None:
                    sent.append(session)
                try:
                    return self._on_session(session, query, params, lease_id, reading)
                finally:  # closed there when no answer came (not IDLE), unless cancelled
                    self._pool.give_back(session)
            except _NoAnswer:
                kept = session is not None and not session.connection.closed
                raise self._no_answer(operation, name, kept) from None
            except psycopg.OperationalError as exc:
                if attempt == 2 or session is None or not session.connection.broken:
                    raise self._failure(operation, name, exc) from exc
                log.debug("tenure: %s: a dropped connection; trying again", self.url)
            except psycopg.Error as exc:
                raise self._failure(operation, name, exc) from exc
        raise AssertionError("unreachable")

    def _send_creating(self, session: _Session, query: bytes | _Statement | _Script,
                             params: dict[str, Any], reading: bool = False) -> Any:
        """_send; the tables created (or migrated, see _MIGRATE) first when missing. A read
        (`reading`) of a missing table or schema finds no rows and creates nothing: listing a
        database must not change it (`tenure locks` pointed at the wrong one)."""
        try:
            return self._send(session, query, params)
        except (errors.UndefinedTable, errors.InvalidSchemaName,
                errors.UndefinedColumn) as exc:  # missing, or of an earlier version
            if reading and not isinstance(exc, errors.UndefinedColumn):
                return []
            self._create_tables(session.cursor)
            return self._send(session, query, params)

    def _on_session(self, session: _Session, query: bytes | _Statement | _Script,
                          params: dict[str, Any], lease_id: str, reading: bool = False) -> Any:
        """Send `query` on `session` (taken from the pool for it)."""
        return self._send_creating(session, query, params, reading)

    def _send(self, session: _Session, query: bytes | _Statement | _Script,
                    params: dict[str, Any]) -> Any:
        return send(session, query, params, self._prepare)

    def _create_tables(self, cursor: Cursor) -> None:
        """CREATE .. IF NOT EXISTS in one implicit transaction, then re-key a table of an
        earlier version (see _MIGRATE). Two processes creating the same table at once can both
        pass the IF NOT EXISTS check, and the loser fails on a catalog unique index (pg_type,
        pg_namespace): it tries again and then finds the table."""
        for attempt in itertools.count():
            try:
                try:
                    cursor.execute(self._ddl)
                except errors.InvalidSchemaName:
                    cursor.execute(self._create_schema)
                    cursor.execute(self._ddl)
                cursor.execute(self._migrate)
                cursor.execute(self._upgrade)
                return
            except errors.WrongObjectType as exc:  # see _MIGRATE: not a table of ours
                raise StoreRefused(
                    f'{self.url}: the table "{self.schema}"."{self.table}" is not a lease '
                    "table of tenure: it lacks the columns or the primary key (name, slot) of "
                    "one, so the store leaves it untouched; name another table with table= (or "
                    "schema=), or drop it if it is a leftover") from exc
            except (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject,
                    errors.DuplicateSchema):
                if attempt >= 5:
                    raise
                _shim.sleep(0.01 * (attempt + 1))

    # -- forgetting idle names ----------------------------------------------------------------

    def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names free, with no waiter, for `idle` seconds: their rows go (a record
        stays, in its row, with the counter forgotten); how many, or with `dry_run` how many
        would. Range after range of the table's pages (see _table_sql._FORGET); a name being
        granted meanwhile is skipped, and one taken again afterwards restarts from the clock.

        Example::

            forgotten = backend.prune(idle=86400.0)
        """
        if self._pool.closed:
            raise closed_store(self.url, "prune", "")
        forgotten, page, pages = 0, 0, 1
        while page < pages:
            count, pages, done = self._forget("prune", idle, page, not dry_run)
            forgotten += count
            if done:
                page += _RANGE_PAGES
        return forgotten

    def _forget(self, operation: str, idle: float, page: int,
                      apply: bool) -> tuple[int, int, bool]:
        """One forgetting statement on the range of pages from `page`: (names forgotten, or
        counted; the table's size in pages; whether the range is done, i.e. it did not stop
        at _MOST_FORGOTTEN). No table: (0, 0, True)."""
        rows = self._execute(operation, "", self._forget_sql, {
            "idle": idle, "apply": apply, "regclass": self._regclass,
            "most": _MOST_FORGOTTEN if apply else None,
            "low": f"({page},0)", "high": f"({page + _RANGE_PAGES},0)"}, reading=True)
        if not rows:
            return 0, 0, True
        forgotten, found, pages = (int(value) for value in rows[0])
        return forgotten, pages, found < _MOST_FORGOTTEN or not apply

    def _sweep_soon(self) -> None:
        """Forget, in the background, the names idle for `retain` in the next _SWEEP_PAGES
        pages of the table, at most once per min(max(retain/4, 1 s), SWEEP_EVERY) for this
        store: called by releases and renewals, never waited for. The next sweep goes on from
        there, round the table; a store starts at a random page, so that several processes
        sweep different parts."""
        if not self.retain < math.inf:
            return
        now = _shim.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_period()
        _shim.start_soon(self._sweep)

    def _sweep_period(self) -> float:
        return min(max(self.retain / 4, 1.0), SWEEP_EVERY)

    def _sweep(self) -> None:
        page = self._sweep_page
        if page < 0:  # the first sweep of this store: anywhere, wrapped once the size is known
            page = random.randrange(1 << 12) * _RANGE_PAGES
        end = page + _SWEEP_PAGES
        try:
            while page < end:
                _, pages, done = self._forget("sweep", self.retain, page, True)
                if page >= pages:  # past the end: the next sweep starts over
                    if self._sweep_page < 0 < page:  # the first, from a random page too far:
                        self._sweep_page = random.randrange(max(pages // _RANGE_PAGES, 1))
                        self._sweep_page *= _RANGE_PAGES
                        self._next_sweep = 0.0  # at the next call, from a page in the table
                    else:
                        self._sweep_page = 0
                    break
                if done:
                    page += _RANGE_PAGES
            else:
                self._sweep_page = page
        except TenureError as exc:  # best effort: the next sweep tries again
            log.debug("tenure: %s: sweeping idle names failed: %s", self.url, exc)

    # -- records and waits ---------------------------------------------------------------------

    # -- records ------------------------------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        rows = self._execute("reading the record", name, self._read_record_sql, {
            "name": name.encode(), "slot": self._record_slot}, reading=True)
        return None if not rows or rows[0][0] is None else bytes(rows[0][0]).decode()

    def write_record(self, grant: Grant, record: str) -> bool:
        encoded = record_bytes(record)
        rows = self._execute("writing the record", grant.name, self._write_record_sql, {
            "record": encoded, "name": grant.name.encode(), "slot": grant.slot,
            "lease_id": grant.lease_id})
        return bool(rows)

    def records(self, prefix: str = "") -> dict[str, str]:
        encoded = prefix.encode()
        rows = self._execute("listing the records", prefix, self._records_sql, {
            "slot": self._record_slot, "prefix": encoded, "length": len(encoded)}, reading=True)
        return {bytes(name).decode(): bytes(record).decode() for name, record in rows}

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Wait up to `timeout` seconds for a NOTIFY of a release of `name` (a plain wait:
        `patience` is not needed; see wait_and_acquire for the acquires of tenure's core)."""
        if not self._notify:
            _shim.sleep(timeout)  # no notifications: the caller polls with backoff
            return
        if not self._listener.listening():
            # The listener is down (or starting): poll, and try it again within a second.
            _shim.sleep(min(timeout, _LISTEN_RETRY))
            return
        with self._listener.watching(name) as (event, released):
            if not released:
                _shim.wait_event(event, timeout)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait for a release of `name`, then take a free slot; the Grant taken, or None.

        It waits for the NOTIFY of a release (or `timeout`), then tries once; in table mode a
        lock's waiter is handed the lease instead (see _wait_taking there). The grant's `sent_at` is
        when the request that took it was sent. Interrupted, a wait frees what it may have
        taken.

        Example::

            grant = backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.05, 10.0)
        """
        if self._notify and self._listener.listening():
            until = _shim.monotonic() + max(timeout, patience)  # when the acquire gives up
            with self._listener.watching(name) as (event, released):
                if not released:
                    done, grant = self._wait_taking(name, holder, ttl, limit, event,
                                                          timeout, until)
                    if done:
                        return grant
        elif self._notify:  # the listener is down (or starting): poll, and try it again soon
            _shim.sleep(min(timeout, _LISTEN_RETRY))
        else:
            _shim.sleep(timeout)  # no notifications: poll with the core's backoff
        sent_at = _shim.monotonic()
        grant = self.try_acquire(name, holder, ttl, limit)
        return None if grant is None else grant._replace(sent_at=sent_at)

    def _wait_taking(self, name: str, holder: str, ttl: float, limit: int,
                           event: _shim.Event, timeout: float,
                           until: float) -> tuple[bool, Grant | None]:
        """Wait for `event` (a release notice of `name`) up to `timeout`: (False, None), the
        caller then tries. A mode that takes the lease while it waits answers (True, grant)."""
        _shim.wait_event(event, timeout)
        return False, None

    def close(self) -> None:
        self._listener.stop()
        for session in self._pool.close():  # advisory leases not released: they go with them
            self._pool.discard(session)
        self._listener.wake_all()
