"""Queue sources for `worker.queue(...)`: Azure Queue Storage and a PostgreSQL table queue, and
the `Message` a handler receives. Each source's driver loads only when that source is used.

Example::

    import tenure.queues

    @worker.queue(tenure.queues.AzureQueue("invoices", connection_string=conn), scope="Invoice:Id")
    async def handle(msg: tenure.queues.Message) -> None:
        print(msg.scope_key, msg.body)

`AzureQueue` needs tenure[azure] (azure-storage-queue); `PostgresQueue` needs tenure[postgres].
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tenure.jobs.queues._source import Message, MessageLost, MessageSource

if TYPE_CHECKING:
    from tenure.jobs.queues.azure import AzureQueue
    from tenure.jobs.queues.postgres import PostgresQueue

_LAZY = {"AzureQueue": "azure", "PostgresQueue": "postgres"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"tenure.jobs.queues.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AzureQueue", "Message", "MessageLost", "MessageSource", "PostgresQueue"]
