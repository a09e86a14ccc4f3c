"""The outbox table and what is written to it: a message is added in the same transaction as
the business change that causes it (no dual write), waits as `pending`, and ends `delivered` or
`dead` (a dead letter, which `redeliver` makes pending again). The relay (tenure.exactly_once.
_relay) delivers it; tenure.outbox is the public module.

Example::

    with engine.begin() as conn:                     # the business change and its message
        conn.execute(sa.update(invoices).where(invoices.c.id == 7).values(paid=True))
        add(conn, "invoice.paid", {"invoice": 7}, key="customer-3")
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._lazy import warn_renamed
from tenure.exactly_once._sql import (
    Bind,
    OwnTable,
    connection_only,
    db_now,
    epoch_column,
    positive_seconds,
    sa,
    transaction,
)

__all__ = ["DEAD", "DEFAULT", "DELIVERED", "MAX_ERROR_CHARS", "PENDING", "DeadLetter", "Outbox",
           "OutboxMessage", "OutboxSummary", "add", "checked_text", "create_tables", "summary"]

PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class OutboxMessage:
    """A message as the relay hands it to your handler. `id` is unique (a UUID): use it as the
    inbox's message id. `attempt` counts from 1.

    Example:
        >>> OutboxMessage(id="6f1c", seq=1, topic="invoice.paid", key="c-3",
        ...               payload={"invoice": 7}, attempt=1, created_at=0.0).topic
        'invoice.paid'
    """

    id: str
    seq: int
    topic: str
    key: str | None
    payload: Any
    attempt: int
    created_at: float


@dataclass(frozen=True)
class OutboxSummary:
    """Counts by state and the age in seconds of the oldest pending message (0 when none).

    Example:
        >>> OutboxSummary(pending=2, oldest_pending_age=1.5, delivered=10, dead=0).pending
        2
    """

    pending: int
    oldest_pending_age: float
    delivered: int
    dead: int


@dataclass(frozen=True)
class DeadLetter:
    """A message that failed `max_attempts` times, with its last error.

    Example:
        >>> DeadLetter(id="6f1c", topic="t", key=None, payload={}, attempts=8,
        ...            last_error="ConnectionError: refused").attempts
        8
    """

    id: str
    topic: str
    key: str | None
    payload: Any
    attempts: int
    last_error: str | None


def _decoded(payload: str) -> Any:
    """A stored payload; the raw text when it is not JSON (a row written by hand)."""
    try:
        return json.loads(payload)
    except ValueError:
        return payload


def checked_text(value: object, argument: str, maximum: int = 255) -> str:
    """`value`, a non-empty str of at most `maximum` characters (else InvalidArgument(Type)
    naming `argument`).

    Example:
        >>> checked_text("invoice.paid", "topic")
        'invoice.paid'
    """
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{argument} must be a str, got {type(value).__name__}")
    if not 0 < len(value) <= maximum:
        raise InvalidArgument(f"{argument} must be a non-empty str of at most {maximum} "
                              "characters")
    return value


class Outbox(OwnTable):
    """An outbox table (default `tenure_outbox`). The module-level `add`, `summary`, ... use a
    default `Outbox()`; make your own for another table name or schema.

    Example::

        orders_outbox = Outbox(table_name="orders_outbox")
        orders_outbox.create_tables(engine)
    """

    def __init__(self, *, table_name: str = "tenure_outbox", metadata: sa.MetaData | None = None,
                 schema: str | None = None) -> None:
        checked_text(table_name, "table_name", 63)
        self.table = sa.Table(
            table_name, metadata or sa.MetaData(),
            # INTEGER on SQLite: only an INTEGER PRIMARY KEY autoincrements there.
            sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"),
                      primary_key=True, autoincrement=True),
            sa.Column("id", sa.String(36), nullable=False, unique=True),
            sa.Column("topic", sa.String(255), nullable=False),
            sa.Column("key", sa.String(255), nullable=True),
            sa.Column("payload", sa.Text, nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("attempts", sa.Integer, nullable=False),
            sa.Column("last_error", sa.Text, nullable=True),
            sa.Column("claimed_by", sa.String(255), nullable=True),
            epoch_column("claim_expires"),
            epoch_column("available_at", nullable=False),
            epoch_column("created_at", nullable=False),
            epoch_column("delivered_at"),
            sa.Index(f"{table_name}_due", "status", "available_at"),
            sa.Index(f"{table_name}_key", "key", "status", "seq"),
            schema=schema,
        )

    def add(self, conn: Bind, topic: str, payload: Any, *, key: str | None = None) -> str:
        """Insert a message in YOUR transaction (`conn`: a Connection or ORM Session, never an
        Engine): it commits or rolls back with your business change. Messages of one `key` are
        delivered in the order added; messages without a key in no particular order. Returns
        the message id.

        Example::

            with engine.begin() as conn:
                conn.execute(sa.insert(orders).values(id=17, total=900))
                outbox.add(conn, "order.created", {"order": 17}, key="customer-3")
        """
        connection = connection_only(conn)
        checked_text(topic, "topic")
        if key is not None:
            checked_text(key, "key")
        try:
            text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentType(f"payload must be JSON-serializable: {exc}") from None
        message_id = str(uuid.uuid4())
        now = db_now(connection)
        connection.execute(sa.insert(self.table).values(
            id=message_id, topic=topic, key=key, payload=text, status=PENDING, attempts=0,
            available_at=now, created_at=now))
        return message_id

    def summary(self, bind: Bind) -> OutboxSummary:
        """Pending, delivered and dead counts, and the oldest pending message's age (s): a
        query of the table now.

        Example::

            assert outbox.summary(engine).pending == 0
        """
        t = self.table
        with transaction(bind, "bind") as conn:
            now = conn.execute(sa.select(db_now(conn))).scalar_one()
            rows = conn.execute(sa.select(t.c.status, sa.func.count(), sa.func.min(t.c.created_at))
                                .group_by(t.c.status)).all()
        counts = {row[0]: (int(row[1]), row[2]) for row in rows}
        pending, oldest = counts.get(PENDING, (0, None))
        return OutboxSummary(pending=pending,
                           oldest_pending_age=0.0 if oldest is None else max(0.0, now - oldest),
                           delivered=counts.get(DELIVERED, (0, None))[0],
                           dead=counts.get(DEAD, (0, None))[0])

    def stats(self, bind: Bind) -> OutboxSummary:
        """Deprecated spelling of `summary` (`stats` means a process's own counters).

        Example::

            outbox.summary(engine)   # instead of outbox.stats(engine)
        """
        warn_renamed("Outbox.stats()", "Outbox.summary()")
        return self.summary(bind)

    def dead_letters(self, bind: Bind, *, limit: int = 100) -> list[DeadLetter]:
        """Messages in the dead-letter state, oldest first.

        Example::

            for dead in outbox.dead_letters(engine):
                print(dead.id, dead.last_error)
        """
        t = self.table
        with transaction(bind, "bind") as conn:
            rows = conn.execute(sa.select(t).where(t.c.status == DEAD).order_by(t.c.seq)
                                .limit(limit)).all()
        return [DeadLetter(id=row.id, topic=row.topic, key=row.key,
                           payload=_decoded(row.payload), attempts=row.attempts,
                           last_error=row.last_error) for row in rows]

    def redeliver(self, bind: Bind, message_id: str) -> bool:
        """Put a dead-lettered message back to pending with a fresh attempt count.

        Example::

            outbox.redeliver(engine, dead.id)
        """
        t = self.table
        with transaction(bind, "bind") as conn:
            statement = (sa.update(t).where(t.c.id == message_id, t.c.status == DEAD)
                         .values(status=PENDING, attempts=0, available_at=db_now(conn)))
            return conn.execute(statement).rowcount == 1

    def purge(self, bind: Bind, *, older_than: float | timedelta = timedelta(days=7)) -> int:
        """Delete messages delivered more than `older_than` ago; returns how many.

        Example::

            outbox.purge(engine, older_than=timedelta(days=1))
        """
        age = positive_seconds(older_than, "older_than")
        t = self.table
        with transaction(bind, "bind") as conn:
            statement = sa.delete(t).where(t.c.status == DELIVERED,
                                           t.c.delivered_at < db_now(conn) - age)
            return conn.execute(statement).rowcount


DEFAULT = Outbox()


def add(conn: Bind, topic: str, payload: Any, *, key: str | None = None) -> str:
    """`Outbox.add` on the default outbox table `tenure_outbox`.

    Example::

        with engine.begin() as conn:
            outbox.add(conn, "invoice.paid", {"invoice": 7}, key="customer-3")
    """
    return DEFAULT.add(conn, topic, payload, key=key)


def create_tables(bind: Bind) -> None:
    """`Outbox.create_tables` for the default outbox table.

    Example::

        outbox.create_tables(engine)
    """
    DEFAULT.create_tables(bind)


def summary(bind: Bind) -> OutboxSummary:
    """`Outbox.summary` of the default outbox table.

    Example::

        print(outbox.summary(engine).pending)
    """
    return DEFAULT.summary(bind)

