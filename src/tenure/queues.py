"""Queue sources for `worker.queue(...)`: Azure Queue Storage and a PostgreSQL table queue, and
the `QueueMessage` a handler receives. Each source's driver loads only when that source is used.

Example::

    import tenure.queues

    @worker.queue(tenure.queues.AzureQueue("invoices", connection_string=conn), scope="Invoice:Id")
    async def handle(msg: tenure.queues.QueueMessage) -> None:
        print(msg.scope_key, msg.body)

`AzureQueue` needs tenure[azure] (azure-storage-queue); `PostgresQueue` needs tenure[postgres].
"""

from typing import TYPE_CHECKING

from tenure._lazy import module_getattr
from tenure.jobs.queues._source import MessageLost, MessageSource, QueueMessage

if TYPE_CHECKING:
    from tenure.jobs.queues._azure import AzureQueue
    from tenure.jobs.queues._postgres import PostgresQueue

    Message = QueueMessage  # deprecated spelling

__getattr__ = module_getattr(__name__, lazy={
    "AzureQueue": "tenure.jobs.queues._azure:AzureQueue",
    "PostgresQueue": "tenure.jobs.queues._postgres:PostgresQueue",
}, deprecated={"Message": "QueueMessage"})

__all__ = ["AzureQueue", "MessageLost", "MessageSource", "PostgresQueue", "QueueMessage"]
