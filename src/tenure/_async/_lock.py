"""Locks and semaphores: acquiring (try, or wait with backoff and notifications) and handing the
lease to the monitor; `async with lock:` as the short form of `async with lock.acquire():`.

Example::

    lock = store.lock("invoice-processing", ttl=30, timeout=10)
    async with lock as lease:
        await process_invoices(fence=lease.token)
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType

from tenure._async import _shim
from tenure._async._lease import AsyncLease, AsyncLeaseTerms, current_owner
from tenure._async._monitor import AsyncLeaseMonitor
from tenure._async._shim import AsyncAcquiring
from tenure._async.stores._protocol import (
    AsyncBackend,
    closed_store,
    waits_and_acquires,
    waits_its_turn,
)
from tenure._errors import InvalidArgument, LockTimeout, StoreUnavailable, TenureError
from tenure._timing import Backoff, to_seconds
from tenure._types import Grant, LeaseInfo

log = logging.getLogger("tenure")

# The leases held through `async with lock:` blocks, as (owner, store, name, lease), the store
# being named by its lease monitor (one per store): a nested block of the same owner (thread or
# task) on the same name would wait for its own lease. A task or thread started inside a block
# gets a copy of the context, with its parent's entries: they are not its own (the parent may
# release while it waits), so entries carry their owner.
_entered: contextvars.ContextVar[
    tuple[tuple[object, AsyncLeaseMonitor, str, AsyncLease], ...]] = (
    contextvars.ContextVar("tenure_entered_locks", default=()))


def _in(owner: object) -> str:
    """'this thread' or 'this task', for messages about who holds a lease."""
    return "this thread" if isinstance(owner, threading.Thread) else "this task"


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
    timeout: float  # of `async with lock:` and `acquire()`; math.inf: wait forever


class AsyncLock:
    """A named lease-based lock in a store; make one with `store.lock(name, ttl=...)`.

    `async with lock as lease:` waits up to the lock's `timeout` (given to `store.lock`;
    forever by default) like `acquire()`, binds the Lease (its fencing token is
    `lease.token`), and releases on the way out. One Lock object may be shared by threads and
    tasks: each block takes its own lease. A block nested in another block of the same name and
    store, in the same thread or task, would wait for itself: it raises InvalidArgument (a
    semaphore's blocks nest up to its `limit`).

    Locks are not reentrant: a thread or task that holds the lease (every slot, for a
    semaphore) and asks again gets no second lease. `try_acquire()` returns None;
    `acquire()` with no timeout raises InvalidArgument at once (it would wait for itself
    forever); `acquire(timeout=...)` waits for another thread or task to release, and its
    LockTimeout says that this process holds the lease.

    Example::

        lock = store.lock("reports", ttl=30, timeout=10)
        async with lock as lease:              # waits up to 10 s, else tenure.LockTimeout
            await write_report(fence=lease.token)
        lease = await lock.try_acquire()       # Lease or None, never waits
        lease = await lock.acquire(timeout=5)  # waits up to 5 s, else tenure.LockTimeout
        print(await lock.locked())             # held by anyone? (asks the store)
    """

    def __init__(self, name: str, settings: AsyncLockSettings, backend: AsyncBackend,
                 monitor: AsyncLeaseMonitor) -> None:
        self.name = name
        self.ttl = settings.ttl
        self.limit = settings.limit
        self.holder = settings.holder
        self.renew_every = settings.renew_every
        self.min_wait = settings.min_wait
        self.max_wait = settings.max_wait
        self.on_lost = settings.on_lost
        self.timeout: float | None = None if math.isinf(settings.timeout) else settings.timeout
        self._default_timeout = settings.timeout
        self._backend = backend  # the store's: it takes and lists the leases
        self._wait_and_acquire = waits_and_acquires(backend)
        self._waits_its_turn = waits_its_turn(backend)  # stores whose waiters poll
        self._monitor = monitor  # the store's: it renews the leases, and knows if it was closed
        self._lease_terms = AsyncLeaseTerms(self.ttl, self.renew_every, self.on_lost, backend,
                                            monitor)
        self.deadline_after = self._lease_terms.deadline_after
        self._entered_leases: list[AsyncLease] = []  # by `async with` on this object, in order
        # When a grant last came after its deadline and was given back: an acquire that
        # times out says so rather than blame another holder.
        self._given_back_late_at = -math.inf

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl:g}s limit={self.limit}>"

    def _terms(self) -> AsyncLeaseTerms:
        """The terms of a lease taken now: `on_lost`, `renew_every` and `ttl` are public
        attributes, and one set after the lock was made applies to the leases taken after it."""
        terms = self._lease_terms
        if (terms.on_lost is not self.on_lost or terms.renew_every != self.renew_every
                or terms.ttl != self.ttl):
            terms = self._lease_terms = AsyncLeaseTerms(self.ttl, self.renew_every, self.on_lost,
                                                        self._backend, self._monitor)
        return terms

    async def __aenter__(self) -> AsyncLease:
        owner = current_owner()
        own = sum(1 for who, store, name, lease in _entered.get()
                  if who == owner and store is self._monitor and name == self.name
                  and lease.held)
        if own >= self.limit:  # it could only wait for itself, until its timeout
            held = ("is already held by an enclosing `async with` block (or @store.locked "
                    "call)" if self.limit == 1 else
                    f"has all {self.limit} slots held by enclosing `async with` blocks")
            raise InvalidArgument(
                f"{self._kind()} {self.name!r} {held} of this thread or task (same store, same "
                "name): a nested block would wait for its own lease. Drop the inner block, or "
                "give the inner work a lock name of its own"
            )
        lease = await self.acquire()
        entered: AsyncLease = await lease.__aenter__()
        _entered.set((*_entered.get(), (owner, self._monitor, self.name, lease)))
        self._entered_leases.append(lease)
        return entered

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        held, owner = _entered.get(), current_owner()
        mine = [index for index, (who, store, name, _) in enumerate(held)
                if who == owner and store is self._monitor and name == self.name]
        open_here = self._entered_leases.copy()  # one look: other threads change the list
        if mine:
            lease = held[mine[-1]][3]
            _entered.set(held[:mine[-1]] + held[mine[-1] + 1:])
        elif len(open_here) == 1:
            # Left in another thread or task than the one that entered it (an async fixture
            # torn down in another task, a context manager handed on): the one block of this
            # object is the one being left, and its lease is released, not renewed for ever.
            lease = open_here[0]
        else:
            # Several blocks of this object are open in other threads or tasks: which one is
            # left cannot be told, and releasing another's lease would make two holders.
            raise RuntimeError(
                f"{self._kind()} {self.name!r}: `async with` left in a thread or task that did "
                f"not enter it, while {len(open_here)} blocks of this object are open; "
                "nothing was released. Leave a block where it was entered")
        # Removed in place (append and remove are atomic): a copy filtered and put back would
        # drop a block entered meanwhile in another thread, or bring back one just left.
        with contextlib.suppress(ValueError):  # entered through another Lock of the same name
            self._entered_leases.remove(lease)
        await lease.__aexit__(exc_type, exc, traceback)

    async def leases(self) -> list[LeaseInfo]:
        """The live leases of this name in the store, whoever holds them, by slot.

        Read from the store (one listing request): a lease may be taken or freed right after.

        Example::

            for info in await lock.leases():
                print(info.holder, info.token, info.expires_at)
        """
        if self._monitor.closed:
            raise closed_store(self._backend.url, "listing", self.name)
        return [info for info in await self._backend.leases(self.name) if info.name == self.name]

    async def locked(self) -> bool:
        """True when the store has no free slot: the lock is held, by anyone (this process
        too), or all `limit` slots of a semaphore are. Like threading.Lock.locked() and
        asyncio.Semaphore.locked(); `len(await sem.leases())` counts the slots held.

        Read from the store: the answer may be stale at once; to act on a free lock, use
        `try_acquire()` instead.

        Example::

            if await lock.locked():
                print("someone is on it")
        """
        return len(await self.leases()) >= self.limit

    async def try_acquire(self) -> AsyncLease | None:
        """Take the lease if it is free now, else return None. Never waits.

        Example::

            lease = await lock.try_acquire()
            if lease is None:
                return  # another instance is on it
        """
        with self._monitor.acquiring(self._backend.url, self.name):
            sent_at = _shim.monotonic()
            grant = await self._backend.try_acquire(self.name, self.holder, self.ttl,
                                                    self.limit)
            if grant is None:
                return None
            # The store says when the request that took it was sent (after connecting, or
            # creating its table); one that cannot (math.inf) gets the call's start.
            return await self._lease_of(
                grant, grant.sent_at if grant.sent_at <= _shim.monotonic() else sent_at)

    def acquire(self, timeout: float | timedelta | None = None) -> AsyncAcquiring[AsyncLease]:
        """Wait up to `timeout` seconds for the lease; else tenure.LockTimeout.

        None (the default) means the lock's `timeout` (given to `store.lock`; forever unless
        given there); `math.inf` waits forever whatever the lock's timeout.

        Not reentrant: when the store answers busy and this thread or task holds the lease
        already (every slot, for a semaphore) through this store, a wait with no timeout
        raises InvalidArgument at once, since only its own release could end it; a wait with
        a timeout goes on (another thread or task may release) and its LockTimeout says this
        process holds the lease.

        Waiting polls with exponential backoff and full jitter between `min_wait` and
        `max_wait`, and wakes early on the store's release notification where it has one.
        A transient store error (StoreUnavailable) is retried until the timeout, with one
        WARNING on the "tenure" logger before the first retry (none when the timeout leaves
        no time for one: the error is raised) and one INFO if the store answers again; a
        permanent one (StoreRefused: credentials refused, store closed) is raised at once,
        whatever the timeout.

        Example::

            async with lock.acquire(timeout=10) as lease:
                ...
        """
        # allow_none: None is handled above, but the type error names it among the accepted.
        seconds = self._default_timeout if timeout is None else to_seconds(
            timeout, "timeout", allow_none=True)
        if seconds < 0:
            raise InvalidArgument(
                f"timeout={seconds:g} is negative; use 0 to try once, a number of seconds to "
                "wait, None for the lock's timeout, or math.inf to wait forever"
            )
        return AsyncAcquiring(self._acquire_within(seconds))

    async def _acquire_within(self, timeout: float) -> AsyncLease:
        called_at = _shim.monotonic()
        deadline = called_at + timeout
        backoff: Backoff | None = None  # made on the first miss: most acquisitions need none
        last_error: StoreUnavailable | None = None
        # One WARNING before this call first retries after a store error, one INFO when the
        # store first answers after it: however long or often it fails, never a line per retry.
        failing_since: float | None = None
        warned = False
        round_trip = 0.0  # how long the first try took
        wait: float | None = None  # before the next try; None: try at once (the first try)
        if timeout > 0 and self._waits_its_turn is not None:
            # The store's waiters poll, and this process was just refused the name: behind
            # them, or it takes the name back before any of them tries again.
            await _shim.sleep(min(self._waits_its_turn(self.name), timeout))
        looked_for_itself = not math.isinf(timeout)  # only an endless wait is refused
        while True:
            lease = None
            tried_at = _shim.monotonic()
            try:
                if wait is None:
                    lease = await self.try_acquire()
                elif math.isinf(deadline):
                    lease = await self._wait_then_try(wait, math.inf)
                else:
                    # A later try ends at most one round trip past the timeout, even on a path
                    # gone silent; one cut short frees what it took (the stores' undo). Async
                    # only: a sync call cannot be cut, and ends within the store's timeout.
                    patience = max(0.0, deadline - tried_at)
                    with _shim.bounded(patience + round_trip):
                        lease = await self._wait_then_try(min(wait, patience), patience)
            except StoreUnavailable as exc:
                if not exc.transient:  # a StoreRefused: no timeout makes it clear
                    raise
                lease, last_error = None, exc  # transient: keep trying until the timeout
                if failing_since is None and not warned:  # warned of below, before a retry
                    failing_since = tried_at
            else:
                if failing_since is not None:  # once per call too, when it first answers again
                    log.info("tenure: %s %r: store %s reachable again after %.1f s",
                             self._kind(), self.name, self._backend.url,
                             _shim.monotonic() - failing_since)
                    failing_since = None
                if lease is None and not looked_for_itself:  # busy: on the first answer only
                    looked_for_itself = True
                    self._refuse_a_wait_for_itself()
            if lease is not None:
                return lease
            if backoff is None:
                backoff = Backoff(self.min_wait, self.max_wait)
                round_trip = _shim.monotonic() - tried_at
            remaining = deadline - _shim.monotonic()
            if remaining <= 0:
                if last_error is not None:
                    raise last_error
                why = (self._answered_too_late() if self._given_back_late_at >= called_at
                       else self._who_has_it())
                raise LockTimeout(f"{self._kind()} {self.name!r} was not acquired within "
                                  f"{timeout:g} s: {why}")
            if failing_since is not None and not warned:  # once per call, not per retry
                warned = True
                log.warning("tenure: %s %r on %s: store error, retrying %s: %s",
                            self._kind(), self.name, self._backend.url, self._until(timeout),
                            last_error)
            wait = min(backoff.next_delay(), remaining)

    async def _wait_then_try(self, wait: float, patience: float) -> AsyncLease | None:
        """Wait up to `wait` seconds for a release of the name, then try once: the one waiting
        path of every acquire. A store that can be woken by the release (wait_and_acquire)
        takes the lease in the wake-up and returns it; others wait, then try_acquire."""
        if self._wait_and_acquire is None:
            await self._backend.wait_released(self.name, wait, patience)
            return await self.try_acquire()
        with self._monitor.acquiring(self._backend.url, self.name):
            started = _shim.monotonic()
            grant = await self._wait_and_acquire(self.name, self.holder, self.ttl, self.limit,
                                                 wait, patience)
            if grant is None:
                return None
            # The store says when the request that took it was sent; one that cannot (or a
            # sent_at not yet come, e.g. math.inf) gets the wait's start: never a later one.
            sent_at = grant.sent_at if grant.sent_at <= _shim.monotonic() else started
            return await self._lease_of(grant, sent_at)

    async def _lease_of(self, grant: Grant, sent_at: float) -> AsyncLease | None:
        """The lease of a grant the store just gave, renewed from now on. None, the grant given
        back, when its deadline passed before the answer came (this process was stopped, or the
        path stalled): the store may have let it expire and granted it again. StoreRefused,
        the grant given back, when the store was closed meanwhile."""
        lease = AsyncLease(self._terms(), grant, sent_at)
        if lease.deadline <= _shim.monotonic():
            self._given_back_late_at = _shim.monotonic()
            await self._give_back(grant)
            return None
        if not self._monitor.watch(lease):  # closing: close() waits for this give-back
            await self._give_back(grant)
            raise closed_store(self._backend.url, "acquire", self.name)
        return lease

    async def _give_back(self, grant: Grant) -> None:
        """Release a grant never handed out, best-effort (else it expires by itself), shielded
        from a cancellation already pending (the caller's timeout, a cancelled task)."""
        with _shim.shielded(), contextlib.suppress(TenureError):
            await self._backend.release(grant)

    def _held_here(self) -> list[AsyncLease]:
        """The leases of this name held through this store object now, oldest first."""
        return sorted((lease for lease in self._monitor.held()
                       if lease.name == self.name and lease.held),
                      key=lambda lease: lease.token)

    def _refuse_a_wait_for_itself(self) -> None:
        """Raise InvalidArgument when this thread or task holds every slot: an endless wait
        could only end by its own release, which it cannot make while it waits."""
        owner = current_owner()
        own = [lease for lease in self._held_here() if lease._owner == owner]
        if len(own) < self.limit:
            return
        tokens = ", ".join(str(lease.token) for lease in own)
        held = (f"{_in(owner)} holds it already (lease token {tokens}, taken through this "
                "store)" if self.limit == 1 else
                f"{_in(owner)} holds all {self.limit} slots already (tokens {tokens}, taken "
                "through this store)")
        raise InvalidArgument(
            f"{self._kind()} {self.name!r}: {held}, so acquire() with no timeout would wait "
            "for its own lease forever: tenure locks are not reentrant. Use the lease you "
            "hold, release it first, or give acquire() a timeout if another thread or task "
            "will release it"
        )

    def _answered_too_late(self) -> str:
        return (f"the store granted it, but its answer came after the lease's deadline (ttl="
                f"{self.ttl:g} s less its safety margin), so the grant was given back; the "
                "store is too slow for this ttl: use a longer ttl, or check its latency")

    def _who_has_it(self) -> str:
        """Why a timed-out acquire found no free slot, naming this process's own leases."""
        here = self._held_here()
        if not here:
            return "another holder has it; wait longer, or use try_acquire() to skip the work"
        owner = current_owner()
        where = ", ".join(
            f"token {lease.token} taken in "
            f"{_in(owner) if lease._owner == owner else 'another thread or task'}"
            for lease in here[:3]) + (", ..." if len(here) > 3 else "")
        if len(here) < self.limit:
            return (f"this process holds {len(here)} of its {self.limit} slots through this "
                    f"store ({where}) and other holders the rest; wait longer, or use "
                    "try_acquire() to skip the work")
        held = ("this process holds it" if self.limit == 1 else
                f"this process holds all {self.limit} slots")
        return (f"{held} through this store ({where}); tenure locks are not reentrant: use "
                "the lease held, or release it before acquiring again")

    @staticmethod
    def _until(timeout: float) -> str:
        return "until it answers" if math.isinf(timeout) else f"for up to {timeout:g} s"

    def _kind(self) -> str:
        return "lock" if self.limit == 1 else f"semaphore (limit {self.limit})"


class AsyncSemaphore(AsyncLock):
    """Up to `limit` holders at once; each lease has its own slot and fencing token.

    `async with sem as lease:` takes one slot, as for a lock (blocks of one thread or task
    nest up to `limit`; one more would wait for its own leases and raises InvalidArgument);
    `await sem.locked()` is True when all `limit` slots are held, and
    `len(await sem.leases())` counts them.

    Example::

        sem = store.semaphore("imports", limit=3, ttl=30, timeout=60)
        async with sem as lease:
            print("slot", lease.slot)
    """
