"""The data-side guards that keep work exactly-once when a lease is lost without its holder
noticing in time: fenced claims (tenure.claims), idempotency keys (tenure.idempotency) and the
transactional outbox and inbox (tenure.outbox). SQLAlchemy 2 Core; install tenure[sql].

Import the public modules, not this package's internals.

Example::

    from tenure import claims, idempotency, outbox
"""
