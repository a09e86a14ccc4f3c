"""tenure's async API (anyio on asyncio): the same shapes as `tenure`, awaited.

When a lease is lost while an `async with` body runs, the body is cancelled and
tenure.LeaseLost is raised out of the block.

Example::

    import tenure.aio

    async with tenure.aio.connect("sqlite:////var/lib/app/locks.db") as store:
        async with store.lock("invoice-processing", ttl=30).acquire(timeout=10) as lease:
            await process_invoices(fence=lease.token)
"""

import importlib
from typing import TYPE_CHECKING

from tenure._async._lease import AsyncLease
from tenure._async._lock import AsyncLock, AsyncSemaphore
from tenure._async._shim import AsyncAcquiring
from tenure._async._store import AsyncStore, connect
from tenure.jobs import AsyncWorker as Worker
from tenure.jobs import Run
from tenure.jobs.queues._source import Message

if TYPE_CHECKING:  # type checkers then see `tenure.aio.stores.X` after `import tenure.aio`
    from tenure.aio import stores as stores


def __getattr__(name: str) -> object:
    if name == "stores":  # loaded on first use, like tenure.stores
        return importlib.import_module("tenure.aio.stores")
    raise AttributeError(f"module 'tenure.aio' has no attribute {name!r}")


__all__ = ["AsyncAcquiring", "AsyncLease", "AsyncLock", "AsyncSemaphore", "AsyncStore", "Message",
           "Run", "Worker", "connect"]
