"""Deprecated path, kept for one release: use `tenure.queues.PostgresQueue`, the one public
path (the implementation is private, in tenure.jobs.queues._postgres).

Example::

    from tenure.queues import PostgresQueue
"""

from typing import TYPE_CHECKING

from tenure._lazy import moved_module

if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.jobs.queues._postgres import MAX_QUEUE_NAME, POISON_SUFFIX, PostgresQueue

__getattr__ = moved_module(__name__, "tenure.queues", "tenure.jobs.queues._postgres")

# The old module's public names, so a star import still binds them (and warns once).
__all__ = ["MAX_QUEUE_NAME", "POISON_SUFFIX", "PostgresQueue"]
