"""The transactional outbox (a message commits with your business change), its relay (at least
once, in order per key, retries with exponential backoff, dead letters) and the consumer's inbox
(duplicates dropped atomically with the consumer's writes). SQLAlchemy 2 Core; install
tenure[sql]. See docs/exactly_once.md.

Example::

    from tenure import outbox

    with engine.begin() as conn:
        conn.execute(sa.update(invoices).where(invoices.c.id == 7).values(paid=True))
        outbox.add(conn, "invoice.paid", {"invoice": 7}, key="customer-3")

    relay = outbox.Relay(engine, handler=lambda message: notify(message.payload))
    relay.register(worker)          # a leader job on a tenure.Worker
"""

from tenure.exactly_once.outbox import (
    DEAD,
    DEFAULT,
    DELIVERED,
    PENDING,
    DeadLetter,
    Inbox,
    Message,
    Outbox,
    OutboxStats,
    Relay,
    RelayCounts,
    add,
    create_table,
    stats,
)

__all__ = [
    "DEAD",
    "DEFAULT",
    "DELIVERED",
    "DeadLetter",
    "Inbox",
    "Message",
    "Outbox",
    "OutboxStats",
    "PENDING",
    "Relay",
    "RelayCounts",
    "add",
    "create_table",
    "stats",
]
