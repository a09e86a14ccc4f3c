"""All-or-nothing multi-locks: `store.lock_all(names)` takes a lease on every name or on none,
and its leases are held, lost and released as one.

The names are taken one by one in ONE canonical order (sorted, as str), each waiting for its
turn like `lock.acquire()` (the store's own waiting path: woken by a release where the store can
be), while the earlier ones are held. Two callers whose sets overlap take the common names in
the same order, so neither can hold one the other needs while waiting for one it has: no
deadlock, without a global lock. When the timeout runs out first, the names taken so far are
given back and tenure.LockTimeout says which name was not free.

Example::

    async with store.lock_all(["invoice-1", "customer-7"], ttl=30, timeout=10) as leases:
        await charge(invoice_id=1, fence=leases["invoice-1"].token)
        await bill(customer_id=7, fence=leases["customer-7"].token)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from tenure._async import _shim
from tenure._async._lease import AsyncLease, leave_block
from tenure._async._lock import AsyncLock
from tenure._async.stores._protocol import AsyncReleaseAll, releases_all, takes_all
from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    LeaseLost,
    LeaseReleased,
    LockTimeout,
    StoreUnavailable,
)
from tenure._names import validate_name
from tenure._types import Grant, LostReason

log = logging.getLogger("tenure")

MAX_NAMES = 1000  # names in one set: each is a lease, renewed and released with the others


def canonical_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names of a set in the order every caller takes them (sorted), each checked.

    Example:
        >>> canonical_names(["invoice-9", "customer-7"])
        ('customer-7', 'invoice-9')
    """
    if isinstance(names, (str, bytes)):
        raise InvalidArgumentType(
            f"names must be a list of lock names, got the {type(names).__name__} {names!r}: "
            f"write lock_all([{names!r}]) for one name")
    try:
        listed = list(names)
    except TypeError:
        raise InvalidArgumentType(
            f"names must be a list of lock names, got {type(names).__name__}") from None
    if not listed:
        raise InvalidArgument("names is empty: lock_all needs at least one name")
    if len(listed) > MAX_NAMES:
        raise InvalidArgument(f"names has {len(listed):,} names: lock_all takes at most "
                              f"{MAX_NAMES:,}")
    checked = [validate_name(name) for name in listed]
    seen: set[str] = set()
    for name in checked:
        if name in seen:
            raise InvalidArgument(f"names lists {name!r} twice: name each lock once")
        seen.add(name)
    return tuple(sorted(checked))


class AsyncLeaseSet:
    """The leases of one `store.lock_all(names)`, one per name, held and lost as one.

    `leases[name]` is the lease on `name` (its own `token`); iterating gives the leases in the
    canonical order (sorted names); `tokens` maps each name to its token. The set is `held`
    while every lease is; losing one loses the set: the others are marked lost at once (the
    store frees them at the release, or they expire), `check()` raises, `on_lost(leases)` runs
    once, and leaving the block raises tenure.LeaseLost (in tenure.aio the body is cancelled
    at once).
    `release()` (and leaving the block) gives every lease back.

    Example::

        async with store.lock_all(["invoice-1", "customer-7"], ttl=30) as leases:
            leases.check()
            print(leases.tokens)  # {'customer-7': 1795..., 'invoice-1': 1795...}
    """

    __slots__ = ("_by_name", "_cancel_scope", "_leases", "_lost_lease", "_mutex", "_on_lost")

    def __init__(self, on_lost: Callable[[AsyncLeaseSet], object] | None) -> None:
        self._on_lost = on_lost
        self._leases: tuple[AsyncLease, ...] = ()
        self._by_name: dict[str, AsyncLease] = {}
        self._lost_lease: AsyncLease | None = None  # the first one lost
        self._cancel_scope: Any = None
        self._mutex = threading.Lock()  # a loss may be reported from the renewal thread

    def __repr__(self) -> str:
        state = "released" if self.released else "lost" if self.lost else "held"
        return f"<LeaseSet {list(self._by_name)!r} {state}>"

    def __getitem__(self, name: str) -> AsyncLease:
        return self._by_name[name]

    def __iter__(self) -> Iterator[AsyncLease]:
        return iter(self._leases)

    def __len__(self) -> int:
        return len(self._leases)

    @property
    def names(self) -> tuple[str, ...]:
        """The names, in the order they were taken (sorted)."""
        return tuple(self._by_name)

    @property
    def tokens(self) -> dict[str, int]:
        """Each name's fencing token.

        Example::

            write(order, fence=leases.tokens["invoice-1"])
        """
        return {lease.name: lease.token for lease in self._leases}

    @property
    def held(self) -> bool:
        """True while every lease is held: the protected work may go on."""
        return bool(self._leases) and all(lease.held for lease in self._leases)

    @property
    def lost(self) -> bool:
        """True once any lease of the set is lost (and so the set)."""
        return self._lost_lease is not None or any(lease.lost for lease in self._leases)

    @property
    def released(self) -> bool:
        """True once `release()` ran (also on leaving the set's `with` block)."""
        return bool(self._leases) and all(lease.released for lease in self._leases)

    def check(self) -> None:
        """Raise tenure.LeaseLost once any lease of the set is lost, tenure.LeaseReleased once
        the set was released; call it before each protected step.

        Example::

            for line in order.lines:
                leases.check()
                ship(line, fence=leases.tokens["order-7"])
        """
        first = self._first_lost()
        if first is not None:
            raise LeaseLost(f"lock_all of {list(self._by_name)!r}: {first._loss_message()}")
        if self.released:
            raise LeaseReleased(f"the leases of lock_all of {list(self._by_name)!r} were "
                                "released: acquire them again before more protected work")

    def _first_lost(self) -> AsyncLease | None:
        if self._lost_lease is not None:
            return self._lost_lease
        return next((lease for lease in self._leases if lease.lost), None)

    async def release(self) -> bool:
        """Give every lease back, in the reverse order. True only when each one freed a live
        lease. Idempotent; a lease the store could not be reached for expires by itself (the
        others are released all the same, and the first error is raised).

        Example::

            leases = await store.lock_all(["a", "b"], ttl=30)
            ...
            await leases.release()
        """
        release_all = releases_all(self._leases[0]._terms.backend) if self._leases else None
        if release_all is not None:
            return await self._release_in_one_request(release_all)
        freed = True
        failure: StoreUnavailable | None = None
        for lease in reversed(self._leases):
            try:
                freed = await lease.release() and freed
            except StoreUnavailable as exc:
                freed, failure = False, failure or exc
        if failure is not None:
            raise failure
        return freed

    async def _release_in_one_request(self, release_all: AsyncReleaseAll) -> bool:
        """release() on a store that frees several grants in one request (release_all)."""
        leases = [lease for lease in reversed(self._leases) if lease._releasing()]
        if not leases:
            return False
        try:
            freed = await release_all([lease.grant for lease in leases])
        except BaseException:
            for lease in leases:  # not freed: a later release() may try again
                lease._released = False
            raise
        return len(leases) == len(self._leases) and all(freed)

    # -- called by lock_all and by the leases' monitor ------------------------------------------

    def _adopt(self, leases: Sequence[AsyncLease]) -> None:
        self._leases = tuple(leases)
        self._by_name = {lease.name: lease for lease in leases}

    def _member_lost(self, lease: AsyncLease) -> None:
        """One lease was lost: so is the set (the others are marked lost too). Before the set
        is whole (lock_all still taking the others) acquire_all sees it and starts again."""
        with self._mutex:
            if self._lost_lease is not None or lease not in self._leases:
                return
            self._lost_lease = lease
        for other in self._leases:
            if other is not lease:
                other.mark_lost(LostReason.WITH_ITS_SET)
        _shim.cancel(self._cancel_scope)
        if self._on_lost is not None:
            _shim.run_callback(self._on_lost, self, f"on_lost callback for {self.names!r}")

    # -- context manager ------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncLeaseSet:
        self._cancel_scope = _shim.open_cancel_scope()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        scope, self._cancel_scope = self._cancel_scope, None
        if await leave_block(self, scope, (exc_type, exc, traceback),
                             f"lock_all {list(self.names)!r}"):
            first = self._first_lost()
            raise LeaseLost(f"lock_all of {list(self._by_name)!r}: " + (
                first._loss_message() if first is not None else "a lease was lost"))


async def acquire_all(locks: Sequence[AsyncLock], timeout: float,
                      leases: AsyncLeaseSet) -> AsyncLeaseSet:
    """Take `locks` (one per name, in the canonical order) one by one within `timeout`
    seconds, into `leases`; on the way out without all of them, give back those taken.

    Example::

        leases = await acquire_all(locks, 10.0, AsyncLeaseSet(None))
    """
    deadline = _shim.monotonic() + timeout
    names = [lock.name for lock in locks]
    whole = await _all_in_one_request(locks)
    if whole is not None:
        leases._adopt(whole)
        return leases
    while True:
        taken: list[AsyncLease] = []
        lock = locks[0]
        try:
            for lock in locks:
                # A try first: most names are free, and a try costs less than an acquire's
                # bookkeeping; a name that is not free waits its turn (acquire's first try
                # comes after the store's wait when it has one).
                lease = await lock.try_acquire()
                if lease is None:
                    lease = await lock.acquire(timeout=max(0.0, deadline - _shim.monotonic()))
                taken.append(lease)
        except BaseException as exc:
            await _give_back(taken)
            if isinstance(exc, LockTimeout):
                raise LockTimeout(
                    f"lock_all of {names!r} was not acquired within {timeout:g} s, so it holds "
                    f"none of them: {lock.name!r} was not free ({lock._who_has_it()})") from None
            raise
        if all(lease.held for lease in taken):
            leases._adopt(taken)
            return leases
        # One was lost while a later one was awaited (a long wait, a stalled path): the set
        # was never whole. Give them back and start again, within the same timeout.
        await _give_back(taken)
        if _shim.monotonic() >= deadline:
            lost = next(lease for lease in taken if not lease.held)
            why = lost.lost_reason.value if lost.lost_reason is not None else "released"
            raise LockTimeout(f"lock_all of {names!r} was not acquired within {timeout:g} s, "
                              f"so it holds none of them: {lost.name!r} was lost ({why}) "
                              "before the others were taken")


async def _all_in_one_request(locks: Sequence[AsyncLock]) -> list[AsyncLease] | None:
    """The leases of `locks` taken in one request, on a store that can (try_acquire_all);
    None when it cannot, or when a name was not free (then none was taken)."""
    first = locks[0]
    take_all = takes_all(first._backend)
    if take_all is None:
        return None
    with first._monitor.acquiring(first._backend.url, first.name):
        sent_at = _shim.monotonic()
        try:
            grants = await take_all([lock.name for lock in locks], first.holder, first.ttl)
        except StoreUnavailable as exc:
            if not exc.transient:
                raise
            return None  # the names one by one retry it until the timeout
        if grants is None:
            return None
        leases: list[AsyncLease] = []
        try:
            for lock, grant in zip(locks, grants, strict=True):
                lease = await lock._lease_of(grant, sent_at)
                if lease is None:  # past its deadline already (this process was stopped)
                    break
                leases.append(lease)
            else:
                return leases
        except BaseException:
            await _give_back_grants(locks, grants[len(leases):])
            await _give_back(leases)
            raise
    # _lease_of gave that one back; the others too, and the names one by one from here on.
    await _give_back_grants(locks, grants[len(leases) + 1:])
    await _give_back(leases)
    return None


async def _give_back_grants(locks: Sequence[AsyncLock], grants: Sequence[Grant]) -> None:
    backend = locks[0]._backend
    with _shim.shielded():
        for grant in grants:
            try:
                await backend.release(grant)
            except StoreUnavailable as exc:
                log.warning("tenure: lock_all: giving back %r failed, it expires by itself: "
                            "%s", grant.name, exc)


async def _give_back(taken: list[AsyncLease]) -> None:
    with _shim.shielded():
        for lease in reversed(taken):
            try:
                await lease.release()
            except StoreUnavailable as exc:
                log.warning("tenure: lock_all: giving back %r failed, it expires by itself: "
                            "%s", lease.name, exc)
