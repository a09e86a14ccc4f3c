"""Deprecated path, kept for one release: import `tenure.idempotency`, the one public path (the
implementation is private, in tenure.exactly_once._idempotency).

Example::

    from tenure import idempotency
"""

from typing import TYPE_CHECKING

from tenure._lazy import moved_module

# ruff: noqa: F403, F405 (the old names are those of the star import that types them)
if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.idempotency import *

__getattr__ = moved_module(__name__, "tenure.idempotency", "tenure.exactly_once._idempotency")

# The old module's public names, so a star import still binds them (and warns once).
__all__ = ["DEFAULT_RETENTION", "FINISHED", "Idempotency", "IdempotencyError",
           "IdempotencyStats", "KeyInProgress", "KeyLockLost", "RUNNING", "RequestMismatch",
           "STARTED", "Step", "fingerprint"]
