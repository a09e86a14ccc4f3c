"""Message sources for queue-message jobs: the `MessageSource` protocol, the `Message` a handler
gets, and the sources tenure ships. The public face is `tenure.queues`.

Example::

    from tenure.queues import AzureQueue, PostgresQueue
"""

from tenure.jobs.queues._source import Message, MessageLost, MessageSource

__all__ = ["Message", "MessageLost", "MessageSource"]
