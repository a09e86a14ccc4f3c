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

from typing import TYPE_CHECKING

from tenure._lazy import module_getattr
from tenure.exactly_once._outbox import (
    DEAD,
    DEFAULT,
    DELIVERED,
    PENDING,
    DeadLetter,
    Inbox,
    Outbox,
    OutboxMessage,
    OutboxSummary,
    Relay,
    RelayStats,
    add,
    create_tables,
    summary,
)

if TYPE_CHECKING:  # the old spellings, typed as their new names (RelayCounts: as it was)
    from tenure.exactly_once._outbox import RelayCounts as RelayCounts

    Message = OutboxMessage
    OutboxStats = OutboxSummary
    create_table = create_tables
    stats = summary

# Old spellings, for one release (the rules are in docs/contributing.md, "Public names").
__getattr__ = module_getattr(__name__, deprecated={
    "Message": "OutboxMessage", "OutboxStats": "OutboxSummary",
    "create_table": "create_tables", "stats": "summary",
}, retired={"RelayCounts": ("tenure.exactly_once._outbox:RelayCounts",
                            "tenure.outbox.RelayStats, the snapshot relay.stats() returns")})

__all__ = [
    "DEAD",
    "DEFAULT",
    "DELIVERED",
    "DeadLetter",
    "Inbox",
    "Outbox",
    "OutboxMessage",
    "OutboxSummary",
    "PENDING",
    "Relay",
    "RelayStats",
    "add",
    "create_tables",
    "summary",
]
