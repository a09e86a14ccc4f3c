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
from tenure._lazy import module_dir, module_getattr
from tenure._sync._group import Group
from tenure._sync._lease import Lease
from tenure._sync._lease_set import LeaseSet
from tenure._sync._lock import Lock, Semaphore
from tenure._sync._store import Store, connect
from tenure._types import LeaseInfo, LostReason, Member, MembershipChange

if TYPE_CHECKING:  # loaded on first use at run time (below); type checkers see them at once
    from tenure import claims as claims
    from tenure import idempotency as idempotency
    from tenure import outbox as outbox
    from tenure import queues as queues
    from tenure import stores as stores
    from tenure.jobs import Run, Worker
    from tenure.jobs.queues._source import QueueMessage

    Message = QueueMessage  # deprecated spelling

__version__ = "0.1.0"

# `import tenure` loads no jobs engine, OpenTelemetry, cron parser or SQLAlchemy: the job
# runner's names and the submodules (tenure.queues' sources and tenure.stores' server stores
# import their drivers only when used; claims, idempotency and outbox need tenure[sql]) load on
# first access. Old spellings warn for one release; the rules behind
# the names are in docs/contributing.md, "Public names".
__getattr__ = module_getattr(__name__, lazy={
    "QueueMessage": "tenure.jobs.queues._source:QueueMessage",
    "Run": "tenure.jobs:Run",
    "Worker": "tenure.jobs:Worker",
    "claims": "tenure.claims",
    "idempotency": "tenure.idempotency",
    "outbox": "tenure.outbox",
    "queues": "tenure.queues",
    "stores": "tenure.stores",
}, deprecated={"Message": "QueueMessage"})
__dir__ = module_dir(__name__)

__all__ = [
    "Group",
    "InvalidArgument",
    "InvalidArgumentType",
    "Lease",
    "LeaseInfo",
    "LeaseLost",
    "LeaseReleased",
    "LeaseSet",
    "Lock",
    "LockTimeout",
    "LostReason",
    "Member",
    "MembershipChange",
    "MissingExtra",
    "QueueMessage",
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
