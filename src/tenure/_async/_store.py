"""The store facade: `connect(url)` and the Store that makes locks and semaphores and lists and
breaks leases. Validation of every argument happens here, before any I/O.

Example::

    async with tenure.aio.connect("sqlite:////var/lib/app/locks.db") as store:
        async with store.lock("invoices", ttl=30).acquire(timeout=10) as lease:
            ...
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import secrets
import socket
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar, cast

from tenure import _forks
from tenure._async import _shim
from tenure._async._group import AsyncGroup
from tenure._async._lease import AsyncLease
from tenure._async._lease_set import AsyncLeaseSet, acquire_all, canonical_names
from tenure._async._lock import AsyncLock, AsyncLockSettings, AsyncSemaphore
from tenure._async._monitor import AsyncLeaseMonitor
from tenure._async._shim import AsyncAcquiring
from tenure._async.stores._protocol import AsyncBackend, closed_store, prunes
from tenure._errors import InvalidArgument, InvalidArgumentType, StoreRefused
from tenure._name_templates import NameTemplate
from tenure._names import validate_name
from tenure._timing import check_range, to_seconds
from tenure._types import LeaseInfo

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TTL = 30.0
MAX_LIMIT = 10_000
MAX_HOLDER_LENGTH = 256


def default_holder() -> str:
    """host:pid:random, unique per Store.

    Example::

        default_holder()  # 'web-7f9c:4121:3fa2c1'
    """
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class AsyncStore:
    """Locks, semaphores and leases of one store; get one with `tenure.aio.connect(url)`.

    Example::

        store = tenure.aio.connect("file:///var/lib/app/locks")
        lock = store.lock("nightly-report", ttl=60)
        print(await store.leases())
        await store.close()
    """

    def __init__(self, backend: AsyncBackend, *, holder: str | None = None) -> None:
        if not isinstance(backend, AsyncBackend) or not _shim.is_our_kind(backend.try_acquire):
            raise InvalidArgumentType(
                f"expected a store URL or one of this API's store objects (tenure.stores.* for "
                f"tenure, tenure.aio.stores.* for tenure.aio), got {type(backend).__name__}"
            )
        self.backend = backend
        self.holder = default_holder() if holder is None else _check_holder(holder)
        self._monitor = AsyncLeaseMonitor(backend)  # closed with the store
        if holder is None:  # host:pid:random names the process that holds
            _forks.in_child_after_fork(self, AsyncStore._new_holder)

    def _new_holder(self) -> None:
        self.holder = default_holder()

    def __repr__(self) -> str:
        return f"<Store {self.url}>"

    @property
    def url(self) -> str:
        """The store's URL with secrets redacted."""
        return self.backend.url

    @property
    def closed(self) -> bool:
        """True once `close()` ran: every later call raises tenure.StoreRefused at once.

        Example::

            await store.close()
            assert store.closed
        """
        return self._monitor.closed

    def lock(
        self,
        name: str,
        ttl: float | timedelta = DEFAULT_TTL,
        *,
        holder: str | None = None,
        renew_every: float | timedelta | None = None,
        min_wait: float | timedelta = 0.01,
        max_wait: float | timedelta = 1.0,
        on_lost: Callable[[AsyncLease], object] | None = None,
        timeout: float | timedelta | None = None,
    ) -> AsyncLock:
        """A lock named `name` whose leases last `ttl` seconds unless renewed.

        `renew_every` defaults to ttl/3; `min_wait`/`max_wait` bound the backoff of
        `acquire(timeout)`; `on_lost(lease)` runs in the background when a lease is lost.
        `timeout` is how long `async with lock:` (and `acquire()` without one) waits before
        raising tenure.LockTimeout: None (the default) waits forever, 0 tries once.

        Example::

            lock = store.lock("invoice-processing", ttl=30)
            async with store.lock("invoice-processing", ttl=30, timeout=10) as lease:
                await process_invoices(fence=lease.token)
        """
        settings = self._settings(ttl, 1, holder, renew_every, min_wait, max_wait, on_lost,
                                  timeout)
        return AsyncLock(validate_name(name), settings, self.backend, self._monitor)

    def semaphore(
        self,
        name: str,
        limit: int,
        ttl: float | timedelta = DEFAULT_TTL,
        *,
        holder: str | None = None,
        renew_every: float | timedelta | None = None,
        min_wait: float | timedelta = 0.01,
        max_wait: float | timedelta = 1.0,
        on_lost: Callable[[AsyncLease], object] | None = None,
        timeout: float | timedelta | None = None,
    ) -> AsyncSemaphore:
        """A semaphore: at most `limit` leases of `name` at once, each with its own slot.

        The options are those of `lock()`; `async with sem:` takes one slot.

        Example::

            sem = store.semaphore("imports", limit=3, ttl=30)
            async with store.semaphore("imports", limit=3, ttl=30, timeout=60) as lease:
                print("slot", lease.slot)
        """
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidArgumentType(f"limit must be an int, got {type(limit).__name__}")
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit={limit} is out of range: it must be 1 to {MAX_LIMIT}")
        settings = self._settings(ttl, limit, holder, renew_every, min_wait, max_wait, on_lost,
                                  timeout)
        return AsyncSemaphore(validate_name(name), settings, self.backend, self._monitor)

    def lock_all(
        self,
        names: Iterable[str],
        ttl: float | timedelta = DEFAULT_TTL,
        *,
        holder: str | None = None,
        renew_every: float | timedelta | None = None,
        min_wait: float | timedelta = 0.01,
        max_wait: float | timedelta = 1.0,
        on_lost: Callable[[AsyncLeaseSet], object] | None = None,
        timeout: float | timedelta | None = None,
    ) -> AsyncAcquiring[AsyncLeaseSet]:
        """Take a lease on every one of `names`, or on none: the leases, one per name (each
        with its own fencing token), as one AsyncLeaseSet, held, lost and released together.

        The names are taken in one canonical order (sorted), each waiting its turn like
        `lock.acquire()`, so callers whose sets overlap cannot deadlock; when `timeout` runs
        out first (None, the default: wait forever; 0: try each once), those taken are given
        back and tenure.LockTimeout names the one that was not free. Losing any lease loses
        the set: `check()` raises, `on_lost(leases)` runs once, and leaving the block raises
        tenure.LeaseLost (in tenure.aio the body is cancelled at once). The other options are
        those of `lock()`.

        Example::

            async with store.lock_all(["invoice-1", "customer-7"], ttl=30, timeout=10) as leases:
                await charge(1, fence=leases["invoice-1"].token)
                await bill(7, fence=leases["customer-7"].token)
        """
        ordered = canonical_names(names)
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgumentType(
                f"on_lost must be a function taking the lease set, got {type(on_lost).__name__}"
            )
        leases = AsyncLeaseSet(on_lost)
        settings = self._settings(ttl, 1, holder, renew_every, min_wait, max_wait,
                                  leases._member_lost, timeout)
        locks = [AsyncLock(name, settings, self.backend, self._monitor) for name in ordered]
        return AsyncAcquiring(acquire_all(locks, settings.timeout, leases))

    def group(self, name: str, ttl: float | timedelta = DEFAULT_TTL) -> AsyncGroup:
        """Membership of the group `name`: instances `join()` with a member id and metadata
        (each member a lease of `ttl` seconds, renewed in the background, gone on release or
        expiry), and anyone lists the live `members()` or `watch()`es them come and go.

        Example::

            group = store.group("invoice-workers", ttl=15)
            async with group.join("instance-7", metadata={"zone": "a"}) as member:
                print([m.id for m in await group.members()])
        """
        if name == "":
            raise InvalidArgument("name must not be empty; give the group a name such as "
                                  "'invoice-workers'")
        return AsyncGroup(self, validate_name(name), self._ttl(ttl))

    def locked(
        self,
        name: str,
        ttl: float | timedelta = DEFAULT_TTL,
        *,
        timeout: float | timedelta | None = None,
        holder: str | None = None,
        renew_every: float | timedelta | None = None,
        min_wait: float | timedelta = 0.01,
        max_wait: float | timedelta = 1.0,
        on_lost: Callable[[AsyncLease], object] | None = None,
    ) -> Callable[[F], F]:
        """Decorate a function so that each call runs holding the lock `name`.

        `name` is a `str.format` template filled from the call's arguments, defaults
        applied: `"invoice-{invoice_id}"`, `"{user.id}"`. A placeholder that names no
        parameter fails at decoration. Each call waits up to `timeout` (None: forever) like
        `async with store.lock(name, ttl, timeout=timeout):`, else raises tenure.LockTimeout.
        The other options are those of `lock()`. Decorate coroutine functions with a store of
        tenure.aio, plain functions with one of tenure; the wrapper keeps the function's name
        and docstring. For the fencing token, use `async with store.lock(...) as lease:`.

        Example::

            @store.locked("invoice-{invoice_id}", ttl=30, timeout=10)
            async def charge(invoice_id: int, amount: int) -> None:
                ...

            await charge(42, amount=100)  # holds the lock "invoice-42" while it runs
        """
        settings = self._settings(ttl, 1, holder, renew_every, min_wait, max_wait, on_lost,
                                  timeout)
        validate_name(name)  # its placeholders are checked against the function's parameters

        def decorate(function: F) -> F:
            _check_decorated(function)
            template = NameTemplate(name, function)

            @functools.wraps(function)
            async def locked_call(*args: Any, **kwargs: Any) -> Any:
                async with AsyncLock(template.name_for(args, kwargs), settings, self.backend,
                                     self._monitor):
                    return await function(*args, **kwargs)

            return cast(F, locked_call)

        return decorate

    def _ttl(self, ttl: float | timedelta) -> float:
        """`ttl` in seconds, within the range this store accepts."""
        capabilities = self.backend.capabilities
        return check_range(to_seconds(ttl, "ttl"), "ttl", capabilities.min_ttl,
                           capabilities.max_ttl, capabilities.ttl_hint)

    def _settings(
        self,
        ttl: float | timedelta,
        limit: int,
        holder: str | None,
        renew_every: float | timedelta | None,
        min_wait: float | timedelta,
        max_wait: float | timedelta,
        on_lost: Callable[[AsyncLease], object] | None,
        timeout: float | timedelta | None,
    ) -> AsyncLockSettings:
        seconds = self._ttl(ttl)
        every = seconds / 3 if renew_every is None else check_range(
            to_seconds(renew_every, "renew_every"), "renew_every", seconds / 100, seconds / 2,
            " (a fraction of ttl: renewals must land well before the lease runs out)")
        shortest = check_range(to_seconds(min_wait, "min_wait"), "min_wait", 0.001, 60.0)
        longest = to_seconds(max_wait, "max_wait")
        if math.isfinite(longest) and 0.001 <= longest < shortest:  # else: the range below
            raise InvalidArgument(f"max_wait={longest:g} is below min_wait={shortest:g}: raise "
                                  "max_wait or lower min_wait (they bound the wait between tries)")
        longest = check_range(longest, "max_wait", shortest, 3600.0)
        if on_lost is not None and not callable(on_lost):
            raise InvalidArgumentType(
                f"on_lost must be a function taking the lease, got {type(on_lost).__name__}"
            )
        patience = to_seconds(timeout, "timeout", allow_none=True)
        if patience < 0:
            raise InvalidArgument(
                f"timeout={patience:g} is negative; use 0 to try once, a number of seconds to "
                "wait, or None (the default) or math.inf to wait forever"
            )
        return AsyncLockSettings(
            ttl=seconds,
            limit=limit,
            holder=self.holder if holder is None else _check_holder(holder),
            renew_every=every,
            min_wait=shortest,
            max_wait=longest,
            on_lost=on_lost,
            timeout=patience,
        )

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        """Live leases whose name starts with `prefix`, sorted by name and slot.

        Example::

            for info in await store.leases("jobs/"):
                print(info.name, info.holder, info.token, info.expires_at)
        """
        if not isinstance(prefix, str):
            raise InvalidArgumentType(f"prefix must be a str, got {type(prefix).__name__}")
        if self.closed:
            raise closed_store(self.url, "listing", prefix)
        return await self.backend.leases(prefix)

    async def break_lease(self, name: str) -> int:
        """Free `name` now, whoever holds it; returns how many live leases were freed.

        The old holder learns at its next renewal or check (lost). For operators, not for
        normal flow.

        Example::

            await store.break_lease("stuck-job")
        """
        name = validate_name(name)
        if self.closed:
            raise closed_store(self.url, "break", name)
        return await self.backend.break_lease(name)

    async def prune(self, idle: float | timedelta, *, dry_run: bool = False) -> int:
        """Forget the names nobody has held for `idle` seconds (their lease state and fencing
        counter; job records stay) and return how many; with `dry_run`, only count them.

        Stores forget such names by themselves after their `retain` option (default an hour);
        prune is for a store kept with `retain=inf`, or to forget sooner. A name taken again
        afterwards gets a fencing token from the store's clock, larger than every earlier one
        unless that clock stepped back by more than `idle`.

        Example::

            forgotten = await store.prune(idle=timedelta(days=1))
        """
        seconds = to_seconds(idle, "idle")
        if not 0 <= seconds < math.inf:
            raise InvalidArgument(f"idle={idle!r} is out of range: give the seconds (or a "
                                  "timedelta) a name must have been free to be forgotten, 0 "
                                  "or more")
        if not isinstance(dry_run, bool):
            raise InvalidArgumentType(f"dry_run must be True or False, got "
                                      f"{type(dry_run).__name__}")
        if self.closed:
            raise closed_store(self.url, "prune")
        prune = prunes(self.backend)
        if prune is None:
            raise StoreRefused(f"{self.url}: prune is not available on this store: its backend "
                               "has no prune(idle, dry_run) method (every built-in store has "
                               "one); its names stay")
        return await prune(seconds, dry_run)

    async def close(self) -> None:
        """Release every lease still held through this store and free its connections.

        Afterwards every call of the store, its locks and leases raises tenure.StoreRefused
        ("the store was closed").

        Example::

            await store.close()
        """
        await self._monitor.release_all()
        self._monitor.close()  # from now on `closed` is True and no lease is renewed
        await self.backend.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _check_decorated(function: object) -> None:
    """Refuse, at decoration, what `store.locked()` cannot hold a lock around."""
    if not callable(function):
        raise InvalidArgumentType(
            f"store.locked(...) decorates a function, got {type(function).__name__}; write "
            "@store.locked('name') above a def"
        )
    label = getattr(function, "__qualname__", None) or repr(function)
    if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
        raise InvalidArgumentType(
            f"{label} is a generator function: the lock would be released before its body "
            "runs; take the lock inside it with an `async with store.lock(...)` block instead"
        )
    if not _shim.is_our_kind(function):
        if inspect.iscoroutinefunction(function):
            raise InvalidArgumentType(
                f"{label} is a coroutine function, but this store is a sync one (from "
                "tenure.connect): decorate it with the locked() of a store from tenure.aio, "
                "or make it a plain def"
            )
        raise InvalidArgumentType(
            f"{label} is a plain function, but this store is an async one (from tenure.aio): "
            "decorate it with the locked() of a store from tenure.connect, or make it a "
            "coroutine function"
        )


def _check_holder(holder: object) -> str:
    if not isinstance(holder, str):
        raise InvalidArgumentType(f"holder must be a str, got {type(holder).__name__}")
    if not 0 < len(holder) <= MAX_HOLDER_LENGTH:
        raise InvalidArgument(
            f"holder must be 1 to {MAX_HOLDER_LENGTH} characters, got {len(holder)}; "
            "omit it to use host:pid:random"
        )
    return holder


# connect() lives in _connect.py and needs AsyncStore, so it is imported here, last: every
# `from tenure._async._store import connect` keeps working.
from tenure._async._connect import connect as connect  # noqa: E402
