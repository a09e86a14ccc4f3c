"""tenure: lease-based locks, semaphores and fencing tokens for apps that run as many instances.

The sync API. The async one, with the same shapes, is `tenure.aio`.

Example::

    import tenure

    with tenure.connect("sqlite:////var/lib/app/locks.db") as store:
        with store.lock("invoice-processing", ttl=30).acquire(timeout=10) as lease:
            process_invoices(fence=lease.token)

Singleton jobs (one instance runs each period; see tenure.jobs)::

    worker = tenure.Worker(tenure.connect("sqlite:////var/lib/app/locks.db"))

    @worker.every(timedelta(minutes=5))
    def process_invoices(run: tenure.Run) -> None:
        ...

    worker.run()
"""

import importlib
from typing import TYPE_CHECKING

from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    LeaseLost,
    LeaseReleased,
    LockTimeout,
    MissingExtra,
    StoreRefused,
    StoreUnavailable,
    TenureError,
)
from tenure._sync._lease import Lease
from tenure._sync._lock import Lock, Semaphore
from tenure._sync._store import Store, connect
from tenure._types import LeaseInfo, LostReason
from tenure.jobs import Run, Worker
from tenure.jobs.queues._source import Message

if TYPE_CHECKING:  # so type checkers see `tenure.queues.AzureQueue` after a bare `import tenure`
    from tenure import queues as queues
    from tenure import stores as stores

__version__ = "0.1.0"

# Submodules reachable as attributes after `import tenure`, loaded on first use (tenure.queues'
# sources and tenure.stores' server-backed stores import their drivers only when used).
_SUBMODULES = ("queues", "stores")


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        return importlib.import_module(f"tenure.{name}")
    raise AttributeError(f"module 'tenure' has no attribute {name!r}")


__all__ = [
    "InvalidArgument",
    "InvalidArgumentType",
    "Lease",
    "LeaseInfo",
    "LeaseLost",
    "LeaseReleased",
    "Lock",
    "LockTimeout",
    "LostReason",
    "Message",
    "MissingExtra",
    "Run",
    "Semaphore",
    "Store",
    "StoreRefused",
    "StoreUnavailable",
    "TenureError",
    "Worker",
    "__version__",
    "connect",
]
