"""The queue sources' implementation (the `MessageSource` protocol, the `QueueMessage` a handler
gets, the sources tenure ships). The one public path is `tenure.queues`; names read from here
still work for one release, with a DeprecationWarning.

Example::

    from tenure.queues import AzureQueue, PostgresQueue, QueueMessage
"""

from tenure._lazy import module_getattr

__getattr__ = module_getattr(__name__, deprecated={
    name: f"tenure.queues:{name}" for name in ("MessageLost", "MessageSource", "QueueMessage")
} | {"Message": "tenure.queues:QueueMessage"})
del module_getattr

__all__: list[str] = []
