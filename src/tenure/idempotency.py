"""Idempotency keys for calls to the outside world, in atomic phases with recovery points
(Stripe's design), and a reference payment provider that honours an Idempotency-Key
(SQLAlchemy 2 Core; install tenure[sql]). See docs/exactly_once.md.

Example::

    from tenure.idempotency import Idempotency, PaymentProvider

    idem = Idempotency(engine)
    idem.create_tables()
    with idem.begin("pay-invoice-7", request={"amount": 500}) as step:
        if step.finished:
            print("replayed:", step.response)
        else:
            charge = step.call("charged", lambda: provider.charge(
                500, reference="7", idempotency_key=step.key).as_dict())
            step.finish({"charge": charge["id"]})
"""

from tenure.exactly_once._idempotency import (
    DEFAULT_RETENTION,
    FINISHED,
    RUNNING,
    STARTED,
    Idempotency,
    IdempotencyError,
    IdempotencyStats,
    KeyInProgress,
    KeyLockLost,
    RequestMismatch,
    Step,
    fingerprint,
)
from tenure.exactly_once._provider import (
    Charge,
    PaymentProvider,
    ProviderError,
    ProviderSummary,
    ProviderTimeout,
)

__all__ = [
    "Charge",
    "DEFAULT_RETENTION",
    "FINISHED",
    "Idempotency",
    "IdempotencyError",
    "IdempotencyStats",
    "KeyInProgress",
    "KeyLockLost",
    "PaymentProvider",
    "ProviderError",
    "ProviderSummary",
    "ProviderTimeout",
    "RUNNING",
    "RequestMismatch",
    "STARTED",
    "Step",
    "fingerprint",
]
