"""The consumer's inbox: the message ids it processed, recorded in the consumer's own
transaction, so a redelivered message is dropped atomically with the consumer's writes.

Example::

    with engine.begin() as conn:
        if Inbox().accept(conn, message.id, consumer="mailer"):
            send_mail(conn, message.payload)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tenure._errors import InvalidArgumentType
from tenure.exactly_once._outbox_table import checked_text
from tenure.exactly_once._sql import (
    Bind,
    Connection,
    Engine,
    OwnTable,
    connection_only,
    db_now,
    epoch_column,
    insert_if_absent,
    positive_seconds,
    sa,
    transaction,
)

__all__ = ["Inbox"]


class Inbox(OwnTable):
    """A consumer's memory of the message ids it processed (default table `tenure_inbox`), so a
    redelivered message is dropped. `accept` runs in the consumer's own transaction: the id and
    the consumer's writes commit together, or neither does. Ids are kept at least `window`
    (`purge` deletes older ones; a duplicate arriving later than that is processed again).

    Example::

        inbox = Inbox()
        inbox.create_tables(engine)

        def handle(message: OutboxMessage) -> None:
            with engine.begin() as conn:
                if not inbox.accept(conn, message.id, consumer="mailer"):
                    return                               # a duplicate: already done
                conn.execute(sa.insert(emails).values(invoice=message.payload["invoice"]))
    """

    def __init__(self, *, table_name: str = "tenure_inbox",
                 window: float | timedelta = timedelta(days=7),
                 metadata: sa.MetaData | None = None, schema: str | None = None) -> None:
        checked_text(table_name, "table_name", 63)
        self.window = positive_seconds(window, "window")
        self.table = sa.Table(
            table_name, metadata or sa.MetaData(),
            sa.Column("consumer", sa.String(255), primary_key=True),
            sa.Column("message_id", sa.String(255), primary_key=True),
            epoch_column("received_at", nullable=False),
            sa.Index(f"{table_name}_received", "received_at"),
            schema=schema,
        )

    def accept(self, conn: Bind, message_id: str, *, consumer: str = "default") -> bool:
        """Record `message_id` for `consumer` in YOUR transaction; False when it was already
        recorded (a duplicate: skip the work). Of two concurrent deliveries of one id, exactly
        one gets True (the other waits for its commit, or gets False at once).

        Example::

            with engine.begin() as conn:
                if inbox.accept(conn, message.id, consumer="billing"):
                    apply(conn, message.payload)
        """
        connection = connection_only(conn)
        checked_text(message_id, "message_id")
        checked_text(consumer, "consumer")
        return insert_if_absent(connection, self.table, {
            "consumer": consumer, "message_id": message_id,
            "received_at": db_now(connection)})

    def process(self, engine: Engine, message_id: str, work: Callable[[Connection], Any], *,
                consumer: str = "default") -> bool:
        """Run `work(conn)` in a new transaction together with `accept`, unless `message_id`
        was processed already; True when the work ran (and committed).

        Example::

            inbox.process(engine, message.id, lambda conn: apply(conn, message.payload),
                          consumer="billing")
        """
        if not isinstance(engine, Engine):
            raise InvalidArgumentType(f"engine must be a SQLAlchemy Engine, got "
                                      f"{type(engine).__name__}")
        if not callable(work):
            raise InvalidArgumentType("work must be callable with a Connection")
        with engine.begin() as conn:
            if not self.accept(conn, message_id, consumer=consumer):
                return False
            work(conn)
        return True

    def purge(self, bind: Bind) -> int:
        """Forget ids received more than `window` ago; returns how many.

        Example::

            inbox.purge(engine)
        """
        t = self.table
        with transaction(bind, "bind") as conn:
            statement = sa.delete(t).where(t.c.received_at < db_now(conn) - self.window)
            return conn.execute(statement).rowcount

