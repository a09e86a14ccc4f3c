"""Deprecated path, kept for one release: use `tenure.queues.PostgresQueue`, the one public
path (the implementation is private, in tenure.jobs.queues._postgres).

Example::

    from tenure.queues import PostgresQueue
"""

from tenure._lazy import moved_module

__getattr__ = moved_module(__name__, "tenure.queues", "tenure.jobs.queues._postgres")
