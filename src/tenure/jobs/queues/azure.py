"""Deprecated path, kept for one release: use `tenure.queues.AzureQueue`, the one public path (the
implementation is private, in tenure.jobs.queues._azure).

Example::

    from tenure.queues import AzureQueue
"""

from tenure._lazy import moved_module

__getattr__ = moved_module(__name__, "tenure.queues", "tenure.jobs.queues._azure")
