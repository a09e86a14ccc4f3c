# GENERATED from src/tenure/_async/stores/mysql/_connections.py by scripts/unasync.py: do not edit.
"""The connections of a mysql:// store: a BoundedPool of at most `pool_size` for its lease
calls, opened on demand, each call run on one with retries of what is safe to repeat, and
driver failures turned into tenure's errors.

Example::

    connections = Connections(settings, Statements(settings.table))
    rows = connections.call("listing", "", list_in, prefix)  # list_in(connection, prefix)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from tenure._sync import _shim
from tenure._sync.stores._failures import failure
from tenure._sync.stores._pool import BoundedPool
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.mysql._driver import (
    CONFLICT_PAUSE,
    CONFLICTS,
    CONNECTION_LOST,
    CR,
    DRIVER_ERRORS,
    ER,
    pymysql,
    deadline,
    error_code,
    forsake,
)
from tenure._sync.stores.mysql._options import Settings
from tenure._sync.stores.mysql._sql import SESSION, Statements
from tenure._errors import StoreRefused, StoreUnavailable
from tenure._timing import Backoff


class _CallPool(BoundedPool[Any]):
    """The connections lease calls run on: opened and closed by `connections`."""

    def __init__(self, connections: Connections) -> None:
        settings = connections.settings
        super().__init__(settings.url, settings.pool_size, settings.timeout, threading.Lock())
        self.connections = connections

    def open_one(self) -> Any:
        with deadline(self.timeout):
            return self.connections.open()

    def close_one(self, connection: Any) -> None:
        self.connections.discard(connection)


class Connections:
    """The connections a store's lease statements run on: at most `pool_size` open at once
    (a call waits up to `timeout` for one while all are busy), idle ones reused. Waits open
    their own (see Sleepers), which are not counted here.

    The table is created when a statement finds it missing (then the call is retried), so a
    store costs no round trip for it, and needs no CREATE privilege once it exists. On
    MariaDB each new connection prepares the uncontended cycle's statements (`prepared`).

    Example::

        found = connections.call("acquire", name, acquire_in, parameters)
    """

    def __init__(self, settings: Settings, statements: Statements) -> None:
        self.settings = settings
        self.statements = statements
        self.pool = _CallPool(self)
        self.prepared = False  # the server is MariaDB: the statements are prepared
        self._table_missing = False

    @property
    def closed(self) -> bool:
        """close() was called: no new connection is opened."""
        return self.pool.closed

    @property
    def idle(self) -> list[Any]:
        """The connections idle in the pool, the next one to be reused last."""
        return self.pool.idle

    def discard_idle(self) -> None:
        """Close the idle connections (e.g. to open new ones with the server's new settings)."""
        self.pool.discard_idle()

    def open(self) -> Any:
        """A new connection, not counted in the pool (a wait's, or the pool's own through
        _CallPool); the table created first if it was found missing, and on MariaDB
        the cycle's statements prepared (see PREPARED). Run in one round trip with the
        PREPAREs: the session's settings (see SESSION; the driver's init_command would cost
        two, its query and a COMMIT)."""
        if self.closed:
            raise closed_store(self.settings.url)
        connection = pymysql.connect(**self.settings.connect_options)
        try:
            with connection.cursor() as cursor:
                if self._table_missing:
                    cursor.execute(self.statements.schema)
                    self._table_missing = False
                self.prepared = "mariadb" in connection.get_server_info().lower()
                if self.prepared:
                    cursor.execute(f"{SESSION}; {self.statements.prepare}",
                                         self.statements.prepare_texts)
                    while cursor.nextset():
                        pass
                else:
                    cursor.execute(SESSION)
        except BaseException:
            self.discard(connection)
            raise
        return connection

    def discard(self, connection: Any) -> None:
        """Close `connection` (best effort); one of the pool's is discarded through it."""
        with contextlib.suppress(Exception):
            connection.close()

    def call(self, operation: str, label: str, work: Callable[..., Any],
                   *args: Any, reading: bool = False) -> Any:
        """`work(connection, *args)` on an idle connection (or a new one), then give it back.
        A read (`reading`: a listing, a record's read) of a missing table answers no rows and
        leaves the table missing: `tenure locks` pointed at the wrong database must not
        change it (the statements MariaDB prepares on a new connection fail there too).

        A connection that saw any error is closed. When a pooled connection turns out dead (the
        server restarted, or killed it), the other idle ones are too, and the call runs once
        more on a new connection: every operation here is safe to repeat, acquire included
        (a retry with the same lease id takes back what the lost attempt took). A deadlock or
        lock wait timeout (see CONFLICTS) is retried after a jittered, growing pause for as
        long as the store's `timeout` lasts, which also bounds those attempts. Errors are
        tenure's (see `failure`), named by `operation` and `label` (a lock name, or what was
        listed).
        """
        timeout = self.settings.timeout
        give_up = _shim.monotonic() + timeout
        conflicts: Backoff | None = None
        retried = False  # the one retry of a dead pooled connection or a missing table
        while True:
            connection: Any = None
            reused = False
            bound = timeout if conflicts is None else max(0.01, give_up - _shim.monotonic())
            try:
                connection, reused = self.pool.take_one()
                with deadline(bound):
                    result = work(connection, *args)
            except BaseException as exc:
                if connection is not None:
                    self.pool.discard(connection)
                if not isinstance(exc, DRIVER_ERRORS):
                    raise  # cancelled, or a bug: the connection's state is unknown, closed
                code = error_code(exc)
                if code == ER.NO_SUCH_TABLE and reading:
                    return []
                if code == ER.NO_SUCH_TABLE:
                    self._table_missing = True  # first use, or dropped meanwhile
                lost = code in CONNECTION_LOST or isinstance(
                    exc, (OSError, EOFError, pymysql.InterfaceError))
                if lost:
                    self.pool.discard_idle()
                timed_out = isinstance(exc, TimeoutError) or isinstance(
                    exc.__context__, TimeoutError)
                if code in CONFLICTS:
                    conflicts = conflicts or Backoff(*CONFLICT_PAUSE)
                    pause = conflicts.next_delay()
                    if _shim.monotonic() + pause < give_up:
                        _shim.sleep(pause)
                        continue
                elif not retried and ((reused and lost and not timed_out)
                                      or code == ER.NO_SUCH_TABLE):
                    retried = True
                    continue
                raise self.failure(operation, label, exc) from None
            self.pool.give_back(connection)
            return result

    def failure(self, operation: str, label: str, exc: BaseException) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what happened, what to check;
        StoreRefused when retrying cannot clear it (see `refusal`)."""
        if isinstance(exc, StoreRefused):  # the store is closed: already says so
            return StoreRefused(str(exc))
        settings = self.settings
        code = error_code(exc)
        fix = self.refusal(code)
        if fix is not None:
            return failure(settings.url, operation, label, fix, exc, password=settings.password,
                           refused=True)
        if isinstance(exc, TimeoutError) or isinstance(exc.__context__, TimeoutError):
            hint = (f"no answer within timeout={settings.timeout:g} s; check that the server "
                    f"at {settings.where} is up and not overloaded")
        elif code == CR.CR_CONN_HOST_ERROR or isinstance(exc, OSError):
            hint = f"check that the server at {settings.where} is running and reachable"
        else:
            hint = f"check the server at {settings.where} and its error log"
        return failure(settings.url, operation, label, hint, exc, password=settings.password)

    def refusal(self, code: int | None) -> str | None:
        """What to fix when the server's error `code` is permanent; None when it is transient:
        a lost or refused connection, too many connections (1040), a lock wait or deadlock
        (1205, 1213), a read-only server during a failover (1290), a shutdown (1053)."""
        database, table = self.settings.database, self.settings.table
        if code in (ER.ACCESS_DENIED_ERROR, 1698, 1251):  # 1698: no password, 1251: plugin
            return "authentication refused: check the user name and password in the URL"
        if code == ER.DBACCESS_DENIED_ERROR:
            return (f"this user may not use database {database!r}: GRANT it, or fix the "
                    "URL's path")
        if code == ER.BAD_DB_ERROR:
            return (f"database {database!r} does not exist on the server; create it "
                    f"(CREATE DATABASE `{database}`) or fix the URL's path")
        if code in (ER.TABLEACCESS_DENIED_ERROR, ER.COLUMNACCESS_DENIED_ERROR,
                    ER.SPECIFIC_ACCESS_DENIED_ERROR, 1370):  # 1370: EXECUTE denied
            return (f"grant this user SELECT, INSERT, UPDATE and CREATE on table "
                    f"`{database}`.`{table}`")
        if code in (ER.BAD_FIELD_ERROR, ER.WRONG_VALUE_COUNT_ON_ROW, ER.TRUNCATED_WRONG_VALUE,
                    1265, 1366):  # data truncated, incorrect value
            return (f"table `{table}` exists but is not laid out as tenure's lease table; "
                    "choose another `table=` or drop it")
        if code in (1071, 1118):  # key or row too long: a limit of the server, not an outage
            return "the server cannot store this row as it is; retrying will not help"
        return None

    def start_afresh(self) -> None:
        """In a child after fork(): let go of the parent's idle connections without a byte on
        them (see `forsake`); the child opens its own on first use."""
        for connection in self.pool.start_afresh(threading.Lock()):
            forsake(connection)

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their calls end."""
        for connection in self.pool.close():
            self.discard(connection)
