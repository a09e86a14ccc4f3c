"""Deprecated path, kept for one release: import `tenure.claims`, the one public path (the
implementation is private, in tenure.exactly_once._claims).

Example::

    from tenure import claims
"""

from typing import TYPE_CHECKING

from tenure._lazy import moved_module

# ruff: noqa: F403, F405 (the old names are those of the star import that types them)
if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.claims import *

__getattr__ = moved_module(__name__, "tenure.claims", "tenure.exactly_once._claims")

# The old module's public names, so a star import still binds them (and warns once).
__all__ = ["CLAIM_COLUMNS", "Claim", "ClaimStats", "DONE", "PENDING", "PROCESSING", "claim",
           "claim_columns", "complete", "migration_ddl", "pending_or_stale", "release",
           "reset_stats", "stats"]
