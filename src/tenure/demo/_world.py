"""The demo's data: an invoice app's SQLite database (invoices with claim columns, idempotency
keys, the outbox), the payment provider's database (charges) and the mailer's (notifications,
deduplicated by an inbox). Every process of the demo opens the same files.

Example::

    world = World(Path("/tmp/demo"))
    world.create(invoices=500)
    print(world.paid(), world.provider.summary())
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tenure import claims
from tenure.idempotency import Charge, Idempotency, PaymentProvider
from tenure.outbox import Inbox, OutboxMessage

metadata = sa.MetaData()
invoices = sa.Table(
    "invoices", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("amount", sa.Integer, nullable=False),
    sa.Column("charge_id", sa.Integer, nullable=True),
    *claims.claim_columns(),
)
mailer_metadata = sa.MetaData()
notifications = sa.Table(
    "notifications", mailer_metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("invoice", sa.Integer, nullable=False, index=True),
)


def sqlite_engine(path: Path) -> sa.Engine:
    """An engine on a SQLite file shared by the demo's processes, with a busy timeout so
    writers queue instead of failing. (WAL is switched on once, by `World.create`: it stays.)"""
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _record: Any) -> None:
        connection.execute("PRAGMA synchronous=NORMAL")

    return engine


@dataclass(frozen=True)
class Counts:
    """Where the invoices and notifications stand."""

    invoices: int
    paid: int
    notified: int
    duplicate_notifications: int
    pending_messages: int


class World:
    """The three databases of one demo run, in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.app = sqlite_engine(directory / "app.db")
        self.provider = PaymentProvider(sqlite_engine(directory / "provider.db"))
        self.mailer = sqlite_engine(directory / "mailer.db")
        self.idempotency = Idempotency(self.app, stale_after=1.0)
        self.inbox = Inbox()

    def create(self, invoices_count: int, seed: int) -> None:
        """Create every table and `invoices_count` pending invoices."""
        from tenure import outbox

        for engine in (self.app, self.provider.engine, self.mailer):
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        metadata.create_all(self.app)
        self.idempotency.create_tables()
        outbox.create_tables(self.app)
        self.provider.create_tables()
        mailer_metadata.create_all(self.mailer)
        self.inbox.create_tables(self.mailer)
        amounts = random.Random(seed)
        with self.app.begin() as conn:
            conn.execute(sa.insert(invoices), [
                {"id": number, "amount": amounts.randrange(500, 50_000), "status": "pending"}
                for number in range(1, invoices_count + 1)])

    # -- the outside world ------------------------------------------------------------------------

    def charge(self, invoice: int, amount: int, key: str | None, latency: float) -> Charge:
        """A charge at the provider, `latency` seconds away (the network)."""
        time.sleep(latency)
        return self.provider.charge(amount, reference=f"invoice-{invoice}",
                                    idempotency_key=key)

    def notify(self, invoice: int, message_id: str | None) -> bool:
        """Send the 'invoice paid' mail; with a message id, the mailer's inbox drops repeats.
        False when it was a repeat."""
        with self.mailer.begin() as conn:
            if message_id is not None and not self.inbox.accept(conn, message_id,
                                                                consumer="mailer"):
                return False
            conn.execute(sa.insert(notifications).values(invoice=invoice))
        return True

    def deliver(self, message: OutboxMessage) -> None:
        """The outbox relay's handler."""
        self.notify(int(message.payload["invoice"]), message.id)

    # -- counting ---------------------------------------------------------------------------------

    def counts(self) -> Counts:
        """Where things stand now."""
        from tenure import outbox

        with self.app.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(invoices)).scalar_one()
            paid = conn.execute(sa.select(sa.func.count()).select_from(invoices)
                                .where(invoices.c.status == claims.DONE)).scalar_one()
        pending = outbox.summary(self.app).pending
        with self.mailer.connect() as conn:
            per_invoice = (sa.select(notifications.c.invoice, sa.func.count().label("n"))
                           .group_by(notifications.c.invoice).subquery())
            notified = conn.execute(sa.select(sa.func.count()).select_from(per_invoice)
                                    ).scalar_one()
            extra = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(per_invoice.c.n - 1), 0))
                                 ).scalar_one()
        return Counts(invoices=total, paid=paid, notified=notified,
                      duplicate_notifications=int(extra), pending_messages=pending)

    def dispose(self) -> None:
        """Close every engine."""
        for engine in (self.app, self.provider.engine, self.mailer):
            engine.dispose()
