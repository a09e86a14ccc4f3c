"""tenure's async API (anyio on asyncio): the same shapes as `tenure`, awaited.

When a lease is lost while an `async with` body runs, the body is cancelled and
tenure.LeaseLost is raised out of the block.

Example::

    import tenure.aio

    async with tenure.aio.connect("sqlite:////var/lib/app/locks.db") as store:
        async with store.lock("invoice-processing", ttl=30).acquire(timeout=10) as lease:
            await process_invoices(fence=lease.token)
"""

from typing import TYPE_CHECKING

from tenure._async._group import AsyncGroup
from tenure._async._lease import AsyncLease
from tenure._async._lease_set import AsyncLeaseSet
from tenure._async._lock import AsyncLock, AsyncSemaphore
from tenure._async._shim import AsyncAcquiring
from tenure._async._store import AsyncStore, connect
from tenure._lazy import module_dir, module_getattr

if TYPE_CHECKING:  # loaded on first use at run time (below); type checkers see them at once
    from tenure.aio import stores as stores
    from tenure.jobs import AsyncWorker, Run
    from tenure.jobs.queues._source import QueueMessage

    Message = QueueMessage  # deprecated spellings
    Worker = AsyncWorker

# Like `tenure`: the job runner's names and tenure.aio.stores load on first access. A class with
# a sync twin of the same role is spelled with the Async prefix (AsyncWorker next to
# tenure.Worker); one class serving both (Run, QueueMessage) keeps one name. Old spellings warn
# for one release; the rules are in docs/contributing.md, "Public names".
__getattr__ = module_getattr(__name__, lazy={
    "AsyncWorker": "tenure.jobs:AsyncWorker",
    "QueueMessage": "tenure.jobs.queues._source:QueueMessage",
    "Run": "tenure.jobs:Run",
    "stores": "tenure.aio.stores",
}, deprecated={"Message": "QueueMessage", "Worker": "AsyncWorker"})
__dir__ = module_dir(__name__)

__all__ = ["AsyncAcquiring", "AsyncGroup", "AsyncLease", "AsyncLeaseSet", "AsyncLock",
           "AsyncSemaphore", "AsyncStore", "AsyncWorker", "QueueMessage", "Run", "connect"]
