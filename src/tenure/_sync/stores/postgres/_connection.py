# GENERATED from src/tenure/_async/stores/postgres/_connection.py by scripts/unasync.py: do not edit.
"""A connection to PostgreSQL whose every wait for the server is bounded on the client
(_Connection), a pooled session of one (_Session), and how a statement is run on it (send).

Example::

    session = _Session(_Connection.connect(**params, autocommit=True))
    rows = send(session, b"SELECT 1", {}, prepare=5)
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import psycopg
from psycopg import errors, generators
from psycopg.abc import PQGen
from psycopg.pq import ConnStatus, ExecStatus, TransactionStatus
from psycopg.pq.abc import PGresult

from tenure._sync import _shim
from tenure._sync.stores.postgres._statements import _encode, _Script, _Statement

log = logging.getLogger("tenure")

Connection = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]
RV = TypeVar("RV")

# psycopg's own default: how often its wait functions hand control back to a waiting exchange
# with the server when nothing happens (so the client-side bound is checked this often).
_WAIT_INTERVAL = 0.1


def _alive(connection: Connection) -> bool:
    """Whether an idle pooled connection still works, without a round trip: read what the
    server sent unasked (after pg_terminate_backend or a restart: an error, then end of file)."""
    if connection.closed:
        return False
    pgconn = connection.pgconn
    try:
        pgconn.consume_input()  # libpq's socket is non-blocking: never waits
    except psycopg.Error:
        return False
    return bool(pgconn.status == ConnStatus.OK
                and pgconn.transaction_status == TransactionStatus.IDLE)


class _NoAnswer(Exception):
    """The server did not answer within the store's client-side bound (see _Connection)."""


def _bounded(gen: PQGen[RV], seconds: float) -> PQGen[RV]:
    """`gen`, one exchange with the server (a psycopg generator), ending with _NoAnswer once
    it has waited `seconds` for it. psycopg's wait functions resume the generator at least every
    interval, with nothing ready when nothing came, so the bound is checked at least that often.

    Example:
        >>> def exchange():  # waits once to read (psycopg.waiting.Wait.R), then answers
        ...     yield 1
        ...     return "answer"
        >>> gen = _bounded(exchange(), 0.0)
        >>> next(gen)
        1
        >>> try:  # resumed with nothing ready (0), past the bound
        ...     gen.send(0)
        ... except _NoAnswer as exc:
        ...     print(exc)
        no answer from the server within 0 s
    """
    deadline = _shim.monotonic() + seconds
    try:
        wait = next(gen)
        while True:
            ready = yield wait
            if _shim.monotonic() >= deadline:
                raise _NoAnswer(f"no answer from the server within {seconds:g} s")
            wait = gen.send(ready)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]  # what gen returned: an RV


class _Connection(psycopg.Connection[tuple[Any, ...]]):
    """A psycopg connection whose every wait for the server ends after `bound` seconds with
    _NoAnswer (None: unbounded, for the listener's wait for notices).

    Every exchange on an open connection, a cursor's statements included, waits through
    `Connection.wait`, so this is the one place that bounds them all on the client. The server's
    statement_timeout, tcp_user_timeout and keepalives never fire when the path goes silent
    while the peer's kernel still acknowledges (a frozen pooler or proxy, a stalled server).
    Why a wrapped generator and not `wait(timeout=)`: psycopg added that parameter within 3.3,
    and tenure supports 3.2; the wrapper bounds every version's wait functions alike, with the
    same interval psycopg already wakes up at (no extra timer, no thread).
    """

    bound: float | None = None

    def wait(self, gen: PQGen[RV], interval: float = _WAIT_INTERVAL,
                   timeout: float | None = None) -> RV:
        if self.bound is not None:
            gen = _bounded(gen, self.bound)
        if timeout is None:  # psycopg 3.2's wait has no timeout parameter
            return super().wait(gen, interval)
        return super().wait(gen, interval, timeout)


class _Session:
    """A pooled connection, its reused cursor (a new cursor per statement costs about as much
    client time as the server spends on a lease statement) and its prepared statements; in
    advisory mode also the leases whose locks it holds, and who waits for it to release one."""

    __slots__ = ("claims", "connection", "cursor", "gone", "handed_to", "keys", "leases", "pid",
                 "prepared", "uses")

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.pid = connection.info.backend_pid  # from the handshake: no round trip
        self.cursor: Cursor = connection.cursor()
        self.prepared: set[bytes] = set()
        self.uses: dict[bytes, int] = {}
        self.leases: dict[str, tuple[str, int]] = {}  # lease id -> (name, lock key)
        self.keys: dict[str, set[int]] = {}  # name -> the lock keys its leases here hold
        self.claims: list[_shim.Event] = []  # releases waiting for this very session
        self.handed_to: _shim.Event | None = None  # the claim it was handed to, when busy
        self.gone = False  # closed: its locks went with it

    def hold(self, lease_id: str, name: str, key: int) -> None:
        self.leases[lease_id] = (name, key)
        self.keys.setdefault(name, set()).add(key)

    def unhold(self, lease_id: str) -> None:
        name, key = self.leases.pop(lease_id)
        keys = self.keys[name]
        keys.discard(key)
        if not keys:
            del self.keys[name]


def send(session: _Session, query: bytes | _Statement | _Script, params: dict[str, Any],
               prepare: int | None) -> Any:
    """Run `query` on `session`: a _Statement answers libpq's result, any other query the rows
    psycopg fetched. `prepare` is psycopg's prepare_threshold (see _run)."""
    if isinstance(query, _Script):
        script = psycopg.ClientCursor(session.connection)
        script.execute(query.text, params)
        return script.fetchall()
    if not isinstance(query, _Statement):
        cursor = session.cursor
        cursor.execute(query, params)
        return cursor.fetchall() if cursor.description else []
    values = [_encode(params[param]) for param in query.params]
    try:
        return _run(session, query, values, prepare)
    except errors.InvalidSqlStatementName:
        # Our prepared statements are gone (DISCARD ALL, DEALLOCATE): prepare again.
        session.prepared.clear()
        session.uses.clear()
        return _run(session, query, values, prepare)


def _run(session: _Session, statement: _Statement, values: list[bytes],
               prepare: int | None) -> PGresult:
    """One round trip through libpq: the named prepared statement once it is prepared on
    this connection (after `prepare_threshold` uses, like psycopg), else an unnamed one
    (what PgBouncer in transaction pooling mode needs: prepare_threshold=None)."""
    pgconn = session.connection.pgconn
    if statement.name not in session.prepared:
        uses = session.uses[statement.name] = session.uses.get(statement.name, 0) + 1
        if prepare is None or uses <= prepare:
            pgconn.send_query_params(statement.text, values, statement.types,
                                     statement.formats)
            return _result(session)
        pgconn.send_prepare(statement.name, statement.text, statement.types)
        _result(session)
        session.prepared.add(statement.name)
    pgconn.send_query_prepared(statement.name, values, statement.formats)
    return _result(session)


def _result(session: _Session) -> PGresult:
    connection = session.connection
    results: list[PGresult] = connection.wait(generators.execute(connection.pgconn))
    result = results[-1]
    if result.status == ExecStatus.FATAL_ERROR:
        raise errors.error_from_result(result, encoding=connection.info.encoding)
    return result


def close_quietly(connection: Connection) -> None:
    """Close `connection`; a failure to (it is broken already) is only logged."""
    try:
        connection.close()
    except (psycopg.Error, OSError):
        log.debug("tenure: closing a PostgreSQL connection failed", exc_info=True)
