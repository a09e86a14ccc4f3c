"""One async face over a sync `tenure.Store` or an async `tenure.aio.AsyncStore`, for the job
runner, which is written once on anyio and drives either.

A sync store's calls go through a worker thread (a job acquires a lock once per period, so the
thread hop does not matter); its leases are still renewed by the store's own renewal thread.
`guard(lease)` turns a lost lease into a cancellation of the guarded block, from whichever
thread learns of the loss first.

Example::

    locks = LockPort(store)
    lease = await locks.try_acquire("job:rollup", ttl=30)
    if lease is not None:
        async with locks.guard(lease):
            ...
        await locks.release(lease)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Union

import anyio
import anyio.to_thread

from tenure._async._lease import AsyncLease
from tenure._async._store import AsyncStore
from tenure._async.stores._protocol import AsyncRecordKeeper
from tenure._errors import InvalidArgumentType, LeaseLost
from tenure._sync._lease import Lease
from tenure._sync._store import Store
from tenure._sync.stores._protocol import RecordKeeper
from tenure._timing import Backoff
from tenure._types import LeaseInfo
from tenure.jobs._outage import READ, WRITE, Outage, Retry, stamp

AnyLease = Union[Lease, AsyncLease]  # noqa: UP007 - a runtime alias on Python 3.10
AnyStore = Union[Store, AsyncStore]  # noqa: UP007


class LockPort:
    """Locks, leases and records of one store, all awaitable; see the module docstring.

    Example::

        locks = LockPort(tenure.connect("sqlite:////tmp/locks.db"))
        print(locks.holder)
    """

    def __init__(self, store: AnyStore) -> None:
        if not isinstance(store, (Store, AsyncStore)):
            raise InvalidArgumentType(
                "store must be a tenure.Store or tenure.aio.AsyncStore, e.g. "
                f"tenure.connect('sqlite:////var/lib/app/locks.db'); got {type(store).__name__}")
        backend = store.backend
        if not isinstance(backend, (AsyncRecordKeeper, RecordKeeper)):
            raise InvalidArgumentType(
                f"jobs need a store that keeps records; {type(store.backend).__name__} has no "
                "read_record/write_record/records (every built-in store has them)")
        self.store = store
        self.records_of: Any = backend  # the store's AsyncRecordKeeper or RecordKeeper
        self.is_async = isinstance(store, AsyncStore)
        self.holder = store.holder
        self.outage = Outage(f"store {store.url}")  # shared by every runner of this store
        self._on_loss: dict[int, list[Callable[[], None]]] = {}

    def __repr__(self) -> str:
        return f"<LockPort {self.store.url}>"

    async def _call(self, function: Callable[..., Any], *args: Any, kind: str = WRITE) -> Any:
        started = time.monotonic()
        try:
            if self.is_async:
                return await function(*args)
            return await anyio.to_thread.run_sync(function, *args)
        except Exception as exc:
            # The same exception, with its start time and kind of call (see Outage.failed).
            raise stamp(exc, started, kind)  # noqa: B904

    def _lock(self, name: str, ttl: float, max_wait: float) -> Any:
        # A new lock object per call (cheap: no I/O): queue scope keys are unbounded, so no cache
        return self.store.lock(name, ttl, max_wait=max_wait, on_lost=self._lost)

    async def try_acquire(self, name: str, ttl: float, max_wait: float = 1.0) -> AnyLease | None:
        """The lease of `name` if it is free now, else None."""
        lease: AnyLease | None = await self._call(self._lock(name, ttl, max_wait).try_acquire)
        return lease

    async def acquire(self, name: str, ttl: float, timeout: float, max_wait: float = 1.0,
                      retry: Retry | None = None) -> AnyLease | None:
        """Wait up to `timeout` seconds for the lease of `name`; None when it stayed busy.

        Waiting tries again with exponential backoff and full jitter up to `max_wait` seconds
        apart (so a waiting instance takes over within `max_wait` of the lease's end), and at
        once when the store says the lease may have been released. A store error is raised at
        once, not retried here: the runner's outage handling decides, and logs an outage once,
        not once per wait. Every busy answer tells `retry` the store answers.
        """
        lock = self._lock(name, ttl, max_wait)
        deadline = time.monotonic() + timeout
        backoff = Backoff(min(lock.min_wait, max_wait), max_wait)
        while True:
            lease: AnyLease | None = await self._call(lock.try_acquire)
            if lease is not None:
                return lease
            if retry is not None:
                retry.succeeded(READ)  # the store answered: busy (it wrote nothing)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            await self._call(self.store.backend.wait_released, name,
                             min(backoff.next_delay(), remaining))

    async def release(self, lease: AnyLease) -> None:
        """Give the lease back; a store error is left to expiry (logged by the core)."""
        self._on_loss.pop(id(lease), None)
        await self._call(lease.release)

    async def read_record(self, name: str) -> str | None:
        """The record kept next to `name` (see the store protocol), or None."""
        record: str | None = await self._call(self.records_of.read_record, name, kind=READ)
        return record

    async def write_record(self, lease: AnyLease, record: str) -> bool:
        """Write `name`'s record while `lease` is live; False when the lease is gone."""
        written: bool = await self._call(self.records_of.write_record, lease.grant, record)
        return written

    async def records(self, prefix: str) -> dict[str, str]:
        """Every record whose name starts with `prefix`."""
        found: dict[str, str] = await self._call(self.records_of.records, prefix,
                                                     kind=READ)
        return found

    async def leases(self, prefix: str) -> list[LeaseInfo]:
        """Live leases whose name starts with `prefix`."""
        found: list[LeaseInfo] = await self._call(self.store.leases, prefix, kind=READ)
        return found

    @asynccontextmanager
    async def guard(self, lease: AnyLease) -> AsyncIterator[None]:
        """Run the block while `lease` holds; cancel it at once when the lease is lost, then
        raise tenure.LeaseLost out of the block."""
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        with anyio.CancelScope() as scope:

            def cancel() -> None:
                if threading.get_ident() == loop_thread:
                    scope.cancel()
                else:
                    loop.call_soon_threadsafe(scope.cancel)

            watchers = self._on_loss.setdefault(id(lease), [])
            watchers.append(cancel)  # guards nest: a leader's lease guards each of its runs
            try:
                if lease.lost:
                    scope.cancel()
                yield
            finally:
                watchers.remove(cancel)
        if scope.cancelled_caught and lease.lost:
            lease.check()  # raises LeaseLost with the reason
        if lease.lost:
            raise LeaseLost(f"lease on {lease.name!r} was lost while the block ran")

    def _lost(self, lease: AnyLease) -> None:
        for cancel in list(self._on_loss.get(id(lease), ())):
            cancel()
