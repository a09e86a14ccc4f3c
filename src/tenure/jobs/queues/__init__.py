"""The queue sources' implementation (the `MessageSource` protocol, the `QueueMessage` a handler
gets, the sources tenure ships). The one public path is `tenure.queues`; names read from here
still work for one release, with a DeprecationWarning.

Example::

    from tenure.queues import AzureQueue, PostgresQueue, QueueMessage
"""

from typing import TYPE_CHECKING

from tenure._lazy import module_getattr

if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.jobs.queues._source import MessageLost, MessageSource
    from tenure.jobs.queues._source import QueueMessage as Message
    from tenure.jobs.queues._source import QueueMessage as QueueMessage

__getattr__ = module_getattr(__name__, deprecated={
    name: f"tenure.queues:{name}" for name in ("MessageLost", "MessageSource", "QueueMessage")
} | {"Message": "tenure.queues:QueueMessage"})
del module_getattr, TYPE_CHECKING

# The old package's public names (all deprecated), so a star import still binds them (and
# warns once).
__all__ = ["Message", "MessageLost", "MessageSource"]
