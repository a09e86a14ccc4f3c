"""Locks and semaphores: acquiring (try, or wait with backoff and notifications) and handing the
lease to the monitor.

Example::

    lock = store.lock("invoice-processing", ttl=30)
    async with lock.acquire(timeout=10) as lease:
        await process_invoices(fence=lease.token)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tenure._async import _shim
from tenure._async._lease import AsyncLease
from tenure._async._shim import AsyncAcquiring
from tenure._async.stores._protocol import closed_store
from tenure._errors import InvalidArgument, LockTimeout, StoreUnavailable
from tenure._timing import Backoff, local_deadline, to_seconds

if TYPE_CHECKING:
    from tenure._async._store import AsyncStore

log = logging.getLogger("tenure")


@dataclass(frozen=True)
class AsyncLockSettings:
    """The validated options of a lock or semaphore (see `Store.lock`)."""

    ttl: float
    limit: int
    holder: str
    renew_every: float
    min_wait: float
    max_wait: float
    on_lost: Callable[[AsyncLease], object] | None


class AsyncLock:
    """A named lease-based lock in a store; make one with `store.lock(name, ttl=...)`.

    Example::

        lock = store.lock("reports", ttl=30)
        lease = await lock.try_acquire()       # Lease or None, never waits
        lease = await lock.acquire(timeout=5)  # waits up to 5 s, else tenure.LockTimeout
    """

    def __init__(self, store: AsyncStore, name: str, settings: AsyncLockSettings) -> None:
        self.name = name
        self.ttl = settings.ttl
        self.limit = settings.limit
        self.holder = settings.holder
        self.renew_every = settings.renew_every
        self.min_wait = settings.min_wait
        self.max_wait = settings.max_wait
        self.on_lost = settings.on_lost
        self.deadline_after = local_deadline(0.0, self.ttl)
        self._store = store
        self._backend = store.backend
        self._monitor = store._monitor

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl:g}s limit={self.limit}>"

    async def try_acquire(self) -> AsyncLease | None:
        """Take the lease if it is free now, else return None. Never waits.

        Example::

            lease = await lock.try_acquire()
            if lease is None:
                return  # another instance is on it
        """
        if self._store.closed:
            raise closed_store(self._store.url, "acquire", self.name)
        sent_at = _shim.monotonic()
        grant = await self._backend.try_acquire(self.name, self.holder, self.ttl, self.limit)
        if grant is None:
            return None
        lease = AsyncLease(self, grant, min(sent_at, grant.sent_at))
        self._monitor.watch(lease)
        return lease

    def acquire(self, timeout: float | None = None) -> AsyncAcquiring[AsyncLease]:
        """Wait up to `timeout` seconds (None: forever) for the lease; else tenure.LockTimeout.

        Waiting polls with exponential backoff and full jitter between `min_wait` and
        `max_wait`, and wakes early on the store's release notification where it has one.
        A transient store error (StoreUnavailable) is retried until the timeout, with one
        WARNING on the "tenure" logger when it is first met and one INFO if the store answers
        again; a permanent one (StoreRefused: credentials refused, store closed) is raised at
        once, whatever the timeout.

        Example::

            async with lock.acquire(timeout=10) as lease:
                ...
        """
        seconds = math.inf if timeout is None else to_seconds(timeout, "timeout")
        if seconds < 0:
            raise InvalidArgument(
                f"timeout={seconds:g} is negative; use 0 to try once, or None to wait forever"
            )
        return AsyncAcquiring(self._acquire_within(seconds))

    async def _acquire_within(self, timeout: float) -> AsyncLease:
        deadline = _shim.monotonic() + timeout
        backoff: Backoff | None = None  # made on the first miss: most acquisitions need none
        last_error: StoreUnavailable | None = None
        # One WARNING when this call first meets a store error, one INFO when the store first
        # answers after it: however long or often the store fails, never a line per retry.
        failing_since: float | None = None
        warned = False
        round_trip = 0.0  # how long the first try took
        while True:
            lease = None
            tried_at = _shim.monotonic()
            try:
                if backoff is None or math.isinf(deadline):
                    lease = await self.try_acquire()
                else:
                    # A later try ends at most one round trip past the timeout, even on a path
                    # gone silent; one cut short frees what it took (the stores' undo). Async
                    # only: a sync call cannot be cut, and ends within the store's timeout.
                    with _shim.bounded(deadline - tried_at + round_trip):
                        lease = await self.try_acquire()
            except StoreUnavailable as exc:
                if not exc.transient:  # a StoreRefused: no timeout makes it clear
                    raise
                lease, last_error = None, exc  # transient: keep trying until the timeout
                if failing_since is None and not warned:  # once per call, not per retry
                    failing_since, warned = tried_at, True
                    log.warning("tenure: %s %r on %s: store error, retrying %s: %s",
                                self._kind(), self.name, self._store.url,
                                self._until(timeout), exc)
            else:
                if failing_since is not None:  # once per call too, when it first answers again
                    log.info("tenure: %s %r: store %s reachable again after %.1f s",
                             self._kind(), self.name, self._store.url,
                             _shim.monotonic() - failing_since)
                    failing_since = None
            if lease is not None:
                return lease
            if backoff is None:
                backoff = Backoff(self.min_wait, self.max_wait)
                round_trip = _shim.monotonic() - tried_at
            remaining = deadline - _shim.monotonic()
            if remaining <= 0:
                if last_error is not None:
                    raise last_error
                raise LockTimeout(
                    f"{self._kind()} {self.name!r} was not acquired within {timeout:g} s: "
                    "another holder has it; wait longer, or use try_acquire() to skip the work"
                )
            await self._backend.wait_released(self.name, min(backoff.next_delay(), remaining),
                                              remaining)

    @staticmethod
    def _until(timeout: float) -> str:
        return "until it answers" if math.isinf(timeout) else f"for up to {timeout:g} s"

    def _kind(self) -> str:
        return "lock" if self.limit == 1 else f"semaphore (limit {self.limit})"


class AsyncSemaphore(AsyncLock):
    """Up to `limit` holders at once; each lease has its own slot and fencing token.

    Example::

        sem = store.semaphore("imports", limit=3, ttl=30)
        async with sem.acquire(timeout=60) as lease:
            print("slot", lease.slot)
    """
