"""A PostgreSQL table as a message source (psycopg 3 async; tenure[postgres]).

Every queue lives in one table, `tenure_queue` in the schema `public` (or `schema=`), created on
first use: a row per message with its queue name, text, dequeue count, a visibility deadline by
the server's clock and a receipt that changes at every receive. `receive` takes visible rows
with FOR UPDATE SKIP LOCKED in one statement, so consumers never block one another; a settle
names the receipt, so a consumer whose visibility ran out cannot touch the message another
consumer received since. A poisoned message moves to the queue `<queue>-poison` of the same
table with its reason in the `reason` column (read them with `PostgresQueue("<queue>-poison")`
or `poisoned()`). A message released untried does not count as a delivery.

Example::

    from tenure.queues import PostgresQueue
    queue = PostgresQueue("invoices", "postgresql://app@db.internal/app", schema="jobs")
    await queue.send({"Invoice": {"Id": 42}})
"""

from __future__ import annotations

import json
import re
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreRefused,
    StoreUnavailable,
)
from tenure._urls import redact
from tenure.jobs.queues._source import MessageLost, QueueMessage

try:
    import psycopg
    from psycopg import sql
    from psycopg.pq import ConnStatus, TransactionStatus
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("PostgresQueue needs psycopg 3: install tenure[postgres] "
                       "(pip install 'tenure[postgres]')") from exc

Connection = psycopg.AsyncConnection[tuple[Any, ...]]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# What retrying cannot clear, by SQLSTATE class or code: invalid authorization (28), no such
# database (3D000), no such schema (3F000), permission denied (42501), no such table (42P01).
_REFUSED_STATES = ("28", "3D000", "3F000", "42501", "42P01")
# A failed connection has libpq's message and no SQLSTATE: the permanent ones by their words.
_REFUSED_WORDS = ("password authentication failed", "no pg_hba.conf entry",
                  "no password supplied", "authentication failed", "does not exist",
                  "permission denied")
POISON_SUFFIX = "-poison"
MAX_QUEUE_NAME = 200

_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    id            bigserial   PRIMARY KEY,
    queue         text        NOT NULL,
    body          text        NOT NULL,
    dequeue_count integer     NOT NULL DEFAULT 0,
    visible_at    timestamptz NOT NULL DEFAULT now(),
    receipt       uuid,
    inserted_at   timestamptz NOT NULL DEFAULT now(),
    reason        text
);
CREATE INDEX IF NOT EXISTS {index} ON {t} (queue, visible_at, id)
"""

_RECEIVE = """
WITH picked AS (
    SELECT id FROM {t} WHERE queue = %(queue)s AND visible_at <= now()
    ORDER BY visible_at, id LIMIT %(count)s FOR UPDATE SKIP LOCKED
)
UPDATE {t} AS m SET dequeue_count = m.dequeue_count + 1, receipt = gen_random_uuid(),
    visible_at = now() + %(seconds)s * interval '1 second'
FROM picked WHERE m.id = picked.id
RETURNING m.id, m.body, m.dequeue_count, m.receipt
"""

_EXTEND = """
UPDATE {t} SET visible_at = now() + %(seconds)s * interval '1 second'
WHERE id = %(id)s AND receipt = %(receipt)s
"""

_ABANDON = """
UPDATE {t} SET visible_at = now() + %(seconds)s * interval '1 second', receipt = NULL,
    dequeue_count = dequeue_count - %(uncount)s
WHERE id = %(id)s AND receipt = %(receipt)s
"""

_COMPLETE = "DELETE FROM {t} WHERE id = %(id)s AND receipt = %(receipt)s"

_DEAD_LETTER = """
UPDATE {t} SET queue = %(poison)s, reason = %(reason)s, receipt = NULL, visible_at = now()
WHERE id = %(id)s AND receipt = %(receipt)s
"""

_SEND = """
INSERT INTO {t} (queue, body, visible_at) VALUES (%(queue)s, %(body)s,
    now() + %(seconds)s * interval '1 second') RETURNING id
"""

_POISONED = """
SELECT id, body, dequeue_count, reason FROM {t} WHERE queue = %(poison)s ORDER BY id LIMIT %(n)s
"""


class PostgresQueue:
    """A queue in a PostgreSQL table; see the module docstring.

    `conninfo` is a `postgresql://` URL or a libpq key=value string; `pool_size` connections
    at most are opened (autocommit, one statement per call).

    Example::

        queue = PostgresQueue("invoices", "postgresql://app@db/app", pool_size=4)
    """

    max_batch = 100
    releases_count = False

    def __init__(self, queue_name: str, conninfo: str, *, schema: str = "public",
                 table: str = "tenure_queue", pool_size: int = 4,
                 connect_timeout: float = 10.0) -> None:
        for argument, value in (("queue_name", queue_name), ("conninfo", conninfo),
                                ("schema", schema), ("table", table)):
            if not isinstance(value, str):
                raise InvalidArgumentType(f"{argument} must be a str, got {type(value).__name__}")
        if not 1 <= len(queue_name) <= MAX_QUEUE_NAME:
            raise InvalidArgument(
                f"queue_name must have 1 to {MAX_QUEUE_NAME} characters, got {len(queue_name)}")
        for argument, value in (("schema", schema), ("table", table)):
            if not _IDENTIFIER.fullmatch(value):
                raise InvalidArgument(
                    f"{argument}={value!r} must be a plain SQL identifier: letters, digits and "
                    "underscores, not starting with a digit, at most 63 characters")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or \
                not 1 <= pool_size <= 100:
            raise InvalidArgument(f"pool_size={pool_size!r} must be an int from 1 to 100")
        if not isinstance(connect_timeout, (int, float)) or not 0 < connect_timeout <= 300:
            raise InvalidArgument(f"connect_timeout={connect_timeout!r} must be in (0, 300] s")
        self.queue_name = queue_name
        self.poison_queue_name = queue_name + POISON_SUFFIX
        self.name = f"postgres-queue:{queue_name}"
        self._conninfo = conninfo
        self._where = redact(conninfo)
        self._connect_timeout = connect_timeout
        table_name = sql.Identifier(schema, table)
        self._schema = schema
        self._sql = {key: sql.SQL(text).format(t=table_name,
                                               index=sql.Identifier(f"{table}_visible"))
                     for key, text in (("ddl", _DDL), ("receive", _RECEIVE),
                                       ("extend", _EXTEND), ("abandon", _ABANDON),
                                       ("complete", _COMPLETE), ("dead_letter", _DEAD_LETTER),
                                       ("send", _SEND), ("poisoned", _POISONED))}
        self._idle: list[Connection] = []
        self._slots = anyio.Semaphore(pool_size)
        self._ready = False

    def __repr__(self) -> str:
        return f"<PostgresQueue {self.queue_name} at {self._where}>"

    # -- the MessageSource protocol --------------------------------------------------------------

    async def receive(self, max_messages: int, visibility_timeout: float) -> list[QueueMessage]:
        """Up to `max_messages` visible messages, invisible for `visibility_timeout` s."""
        rows = await self._run("receive messages", "receive", {
            "queue": self.queue_name, "count": max(1, min(int(max_messages), self.max_batch)),
            "seconds": float(visibility_timeout)})
        return [QueueMessage(str(row[0]), row[1], row[2], row[3]) for row in rows or ()]

    async def extend(self, message: QueueMessage, seconds: float) -> None:
        """Keep `message` invisible `seconds` more; MessageLost once another consumer has it."""
        await self._settle("extend visibility", "extend", message, {"seconds": float(seconds)})

    async def complete(self, message: QueueMessage) -> None:
        """Delete `message`."""
        await self._settle("delete message", "complete", message, {})

    async def abandon(self, message: QueueMessage, delay: float, *, failed: bool = True) -> None:
        """Visible again after `delay` s; `failed=False` takes this delivery off the count."""
        await self._settle("abandon message", "abandon", message,
                           {"seconds": float(delay), "uncount": 0 if failed else 1})

    async def dead_letter(self, message: QueueMessage, reason: str) -> None:
        """Move `message` to the queue `<queue>-poison` with `reason`."""
        await self._settle("poison message", "dead_letter", message,
                           {"poison": self.poison_queue_name, "reason": reason})

    async def close(self) -> None:
        """Close the idle pooled connections; a later call opens new ones."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()

    # -- for producers and operators -------------------------------------------------------------

    async def send(self, body: Any, *, delay: float = 0) -> str:
        """Add `body` (JSON-encoded unless it is a str), visible after `delay` s; its id.

        Example::

            await queue.send({"Invoice": {"Id": 42}})
        """
        text = body if isinstance(body, str) else json.dumps(body)
        rows = await self._run("send message", "send", {
            "queue": self.queue_name, "body": text, "seconds": float(delay)})
        assert rows
        return str(rows[0][0])

    async def poisoned(self, max_messages: int = 100) -> list[dict[str, Any]]:
        """Up to `max_messages` poisoned messages, oldest first: id, text, dequeue_count, reason.

        Example::

            for entry in await queue.poisoned():
                print(entry["reason"], entry["text"])
        """
        rows = await self._run("read poison messages", "poisoned",
                               {"poison": self.poison_queue_name, "n": max_messages})
        return [{"id": str(row[0]), "text": row[1], "dequeue_count": row[2], "reason": row[3]}
                for row in rows or ()]

    # -- helpers ----------------------------------------------------------------------------------

    async def _settle(self, operation: str, statement: str, message: QueueMessage,
                      params: dict[str, Any]) -> None:
        changed = await self._run(operation, statement, {
            "id": int(message.id), "receipt": message.receipt, **params}, rowcount=True)
        if not changed:
            raise MessageLost(f"message {message.id!r} of queue {self.queue_name!r} was "
                              f"received by another consumer or deleted ({operation})")

    async def _run(self, operation: str, statement: str, params: dict[str, Any],
                   rowcount: bool = False) -> Any:
        """One autocommit statement on a pooled connection; rows, or the row count."""
        async with self._connection(operation) as connection:
            try:
                cursor = await connection.execute(self._sql[statement], params)
                if rowcount:
                    return cursor.rowcount
                return await cursor.fetchall() if cursor.description else None
            except psycopg.Error as exc:
                await connection.close()
                raise self._unavailable(operation, exc) from None

    @asynccontextmanager
    async def _connection(self, operation: str) -> AsyncIterator[Connection]:
        async with self._slots:
            connection = self._idle.pop() if self._idle else None
            while connection is not None and not _alive(connection):
                # Killed while idle (a server restart, pg_terminate_backend): using it would
                # fail this call for nothing.
                with anyio.CancelScope(shield=True):
                    await connection.close()
                connection = self._idle.pop() if self._idle else None
            if connection is None or connection.closed:
                try:
                    connection = await psycopg.AsyncConnection.connect(
                        self._conninfo, autocommit=True,
                        connect_timeout=max(1, round(self._connect_timeout)))
                except psycopg.Error as exc:
                    raise self._unavailable(operation, exc) from None
            try:
                if not self._ready:
                    await self._create(connection)
                yield connection
            except BaseException:
                if not connection.closed:  # e.g. cancelled mid-statement: not fit for reuse
                    with anyio.CancelScope(shield=True):
                        await connection.close()
                raise
            if not connection.closed:
                self._idle.append(connection)

    async def _create(self, connection: Connection) -> None:
        for attempt in range(3):
            try:
                await connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(self._schema)))
                await connection.execute(self._sql["ddl"])
                break
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject,
                    psycopg.errors.DuplicateTable, psycopg.errors.DuplicateSchema) as exc:
                if attempt == 2:  # another consumer created it at the same moment: look again
                    raise self._unavailable("create the queue table", exc) from None
            except psycopg.Error as exc:
                await connection.close()
                raise self._unavailable("create the queue table", exc) from None
        self._ready = True

    def _unavailable(self, operation: str, exc: psycopg.Error) -> StoreUnavailable:
        """StoreRefused when retrying cannot clear `exc` (a wrong password, a missing database,
        no permission), else StoreUnavailable."""
        detail = f"{type(exc).__name__}: {' '.join(redact(str(exc)).split())[:300]}"
        if _refused(exc):
            return StoreRefused(
                f"{self._where}: {operation} on queue {self.queue_name!r} refused ({detail}); "
                "check the user, password and database in the connection string and that the "
                "user may create and use the queue table")
        return StoreUnavailable(
            f"{self._where}: {operation} on queue {self.queue_name!r} failed ({detail}); check "
            "that the database is reachable and the user may use the queue table")


def _refused(exc: psycopg.Error) -> bool:
    """Whether retrying cannot clear `exc` (see _REFUSED_STATES and _REFUSED_WORDS)."""
    state = exc.sqlstate
    if state is not None:
        return state.startswith(_REFUSED_STATES)
    text = str(exc)
    return isinstance(exc, psycopg.OperationalError) and any(
        words in text for words in _REFUSED_WORDS)


def _alive(connection: Connection) -> bool:
    """Whether an idle pooled connection still works, without a round trip: an idle
    connection's server sends nothing unasked (this source never LISTENs), so anything to read
    is its goodbye (a restart or pg_terminate_backend: an error, then the end of the stream)."""
    if connection.closed:
        return False
    pgconn = connection.pgconn
    if pgconn.status != ConnStatus.OK or pgconn.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable
