"""The implementation of the data-side guards that keep work exactly-once when a lease is lost
without its holder noticing in time: fenced claims, idempotency keys, the transactional outbox
and inbox. SQLAlchemy 2 Core; install tenure[sql].

The public paths are tenure.claims, tenure.idempotency and tenure.outbox; the modules here are
private (tenure.exactly_once.claims, .idempotency, .outbox and .provider still import, with a
DeprecationWarning, for one release).

Example::

    from tenure import claims, idempotency, outbox
"""
