"""Deprecated path, kept for one release: use `tenure.queues.AzureQueue`, the one public path (the
implementation is private, in tenure.jobs.queues._azure).

Example::

    from tenure.queues import AzureQueue
"""

from typing import TYPE_CHECKING

from tenure._lazy import moved_module

if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.jobs.queues._azure import MAX_ENVELOPE, MAX_VISIBILITY, POISON_SUFFIX, AzureQueue

__getattr__ = moved_module(__name__, "tenure.queues", "tenure.jobs.queues._azure")

# The old module's public names, so a star import still binds them (and warns once).
__all__ = ["AzureQueue", "MAX_ENVELOPE", "MAX_VISIBILITY", "POISON_SUFFIX"]
