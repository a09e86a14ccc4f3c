"""The transactional outbox and inbox: a message is written in the same transaction as the
business change that causes it (no dual write), a relay delivers it afterwards, at least once, in
order per key, with retries and a dead-letter state; a consumer's inbox drops redeliveries
atomically with the consumer's own writes.

By concern: _outbox_table (the table, its message types and what writes to it), _relay (the
relay and its metrics), _inbox (the consumer's side). tenure.outbox is the public module.

Example::

    from tenure import outbox

    with engine.begin() as conn:                     # the business change and its message
        conn.execute(sa.update(invoices).where(invoices.c.id == 7).values(paid=True))
        outbox.add(conn, "invoice.paid", {"invoice": 7}, key="customer-3")

    relay = outbox.Relay(engine, handler=lambda message: publish(message.topic,
                                                                 message.payload))
    relay.register(worker)                            # a leader job on a tenure.Worker
"""

# The names of the three modules (each module's __all__), from one path.
from tenure.exactly_once._inbox import *  # noqa: F403
from tenure.exactly_once._outbox_table import *  # noqa: F403
from tenure.exactly_once._relay import *  # noqa: F403
