"""The contract every store module implements. Keep stores small: waiting, timeouts, jitter,
renewal scheduling, deadlines and loss detection live once in the core, not here.

Example::

    grant = await backend.try_acquire("jobs", holder="web-1", ttl=30.0, limit=1)
    if grant is not None:
        [renewed] = await backend.renew([grant], ttl=30.0)
        await backend.release(grant)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from tenure._errors import InvalidArgument, InvalidArgumentType, StoreRefused
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

MAX_RECORD_BYTES = 8192
"""Largest record a store must keep (a job's state is a few hundred bytes of JSON)."""


def record_bytes(record: object) -> bytes:
    """Check a record for `write_record` before any I/O and return its UTF-8.

    Example:
        >>> record_bytes('{"period": "2026-01-01T00:05"}')[:10]
        b'{"period":'
    """
    if not isinstance(record, str):
        raise InvalidArgumentType(
            f"record must be a str, got {type(record).__name__}; serialize it first, "
            "e.g. with json.dumps"
        )
    try:
        encoded = record.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            "record contains a lone surrogate and cannot be stored; pass valid Unicode text"
        ) from None
    if len(encoded) > MAX_RECORD_BYTES:
        raise InvalidArgument(
            f"record is {len(encoded)} bytes of UTF-8; the limit is {MAX_RECORD_BYTES}, "
            "keep only what the next holder needs (e.g. the last completed period)"
        )
    return encoded


def subject(operation: str, name: str) -> str:
    """What a store call did, for its error messages: the operation and the lock name; a
    listing says which leases it listed.

    Example:
        >>> subject("acquire", "jobs"), subject("listing", ""), subject("listing", "job:")
        ("acquire of 'jobs'", 'listing of all leases', "listing of the leases named 'job:...'")
        >>> subject("prune", "")
        'prune of the idle names'
    """
    if operation == "listing":
        return f"listing of the leases named {name + '...'!r}" if name else "listing of all leases"
    if not name:  # a call on the whole store (names are never empty)
        return f"{operation} of the idle names" if operation == "prune" else operation
    return f"{operation} of {name!r}"


def closed_store(url: str, operation: str = "", name: str = "") -> StoreRefused:
    """The error of every call on a store object already closed: retrying cannot clear it.

    Example:
        >>> str(closed_store("sqlite:////tmp/x.db", "acquire", "jobs")).partition(";")[0]
        "sqlite:////tmp/x.db: acquire of 'jobs' refused: the store was closed"
    """
    what = f"{subject(operation, name)} refused: " if operation else ""
    return StoreRefused(f"{url}: {what}the store was closed; open a new one with "
                        "tenure.aio.connect(...)")


@runtime_checkable
class AsyncBackend(Protocol):
    """A lease store. Every method is safe to call concurrently from many holders.

    `limit` is the number of slots of the name (1 for a lock); the store picks a free slot in
    the same round trip as the grant, so a semaphore costs no more than a lock.

    Rules every store keeps (DESIGN.md, "Timing rules"):

    - Every call has a client-side bound (the store's `timeout` option): a path that goes
      silent ends the call with StoreUnavailable, and the connection it used is dropped.
    - `renew` may be called again while an earlier `renew` of the same store is still
      waiting on a stalled connection: the core enforces deadlines on its own timer.
    - A `try_acquire` that is cancelled, or fails, after its request may have reached the store
      frees what that request may have taken, by the lease id it sent, best-effort and in the
      background (`_shim.start_soon`), so the caller's cancellation is never delayed.
    - After fork() a child uses none of the parent's connections or open files and releases
      nothing of the parent's (`tenure._forks.in_child_after_fork`); it starts afresh.
    """

    capabilities: Capabilities
    url: str
    """The store's URL with any secret redacted, for messages."""

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        """Grant a free slot of `name` with a new fencing token, or None when all are held."""
        ...

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        """Extend each grant to `ttl` from now, in one batch; a LostReason where it is gone.

        Raises StoreUnavailable for transient failures (the core retries until the deadline).
        """
        ...

    async def release(self, grant: Grant) -> bool:
        """Free the grant if it is still this holder's; False (and nothing freed) otherwise."""
        ...

    async def break_lease(self, name: str) -> int:
        """Free every slot of `name` whoever holds it; return how many live leases it freed."""
        ...

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        """Live leases whose name starts with `prefix`, sorted by name and slot."""
        ...

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Return when `name` may have been released, or after `timeout` seconds.

        `patience` (at least `timeout`; None: just `timeout`) is how much longer the caller's
        acquire goes on waiting, a wait after each failed try_acquire: a store that hands a
        release over to a registered waiter may keep the registration that long, so the
        waiter keeps its place in the queue across its waits.
        """
        ...

    async def close(self) -> None:
        """Free connections and file descriptors. Idempotent."""
        ...


class AsyncWaitAndAcquire(Protocol):
    """The optional `wait_and_acquire` of a store that can be woken by a release.

    `await backend.wait_and_acquire(name, holder, ttl, limit, timeout, patience)` waits up to
    `timeout` seconds for a release of `name` (`patience` as in `wait_released`), takes a free
    slot when woken or at the end, and returns the Grant it took (its `sent_at` no later than
    the request that took it was sent), or None when every slot was still held. It keeps
    nothing it took for a later call: the core uses the result directly (a store without the
    method gets the core's wait_released-then-try_acquire loop). Cancelled or failing after
    its request may have taken a slot, it frees that slot as try_acquire does.
    """

    async def __call__(self, name: str, holder: str, ttl: float, limit: int, timeout: float,
                       patience: float) -> Grant | None: ...


def waits_and_acquires(backend: object) -> AsyncWaitAndAcquire | None:
    """The store's `wait_and_acquire` (see AsyncWaitAndAcquire), or None when it has none.

    Example:
        >>> waits_and_acquires(object()) is None
        True
    """
    found: AsyncWaitAndAcquire | None = getattr(backend, "wait_and_acquire", None)
    return found


def waits_its_turn(backend: object) -> Callable[[str], float] | None:
    """The store's optional `waits_its_turn(name) -> seconds`, or None when it has none.

    A store that cannot wake its waiters (they poll) may ask an acquire of `name` to pause
    before its first try: this process was refused the name a moment ago, so others are
    likely polling for it, and a process that releases and asks again at once would take it
    back before any of them tries (one process keeping the name, the others starving). The
    core pauses that long (at most the acquire's timeout), then tries; 0 means try at once. A
    try_acquire() and an acquire with timeout 0 always try at once.

    Example:
        >>> waits_its_turn(object()) is None
        True
    """
    found: Callable[[str], float] | None = getattr(backend, "waits_its_turn", None)
    return found


class AsyncTryAcquireAll(Protocol):
    """The optional `try_acquire_all` of a store that can take several locks in one request.

    `await backend.try_acquire_all(names, holder, ttl)` takes a lock (slot 0, limit 1) on
    every one of `names` (distinct, in the order given) or on none: the Grants in that order,
    or None when one is held (nothing is then left taken). One request for the lot, where a
    lock_all would otherwise make one per name; the core falls back to the names one by one
    when it answers None. Cancelled or failing after its request may have taken them, it frees
    them as try_acquire does.
    """

    async def __call__(self, names: Sequence[str], holder: str,
                       ttl: float) -> list[Grant] | None: ...


def takes_all(backend: object) -> AsyncTryAcquireAll | None:
    """The store's `try_acquire_all` (see AsyncTryAcquireAll), or None when it has none.

    Example:
        >>> takes_all(object()) is None
        True
    """
    found: AsyncTryAcquireAll | None = getattr(backend, "try_acquire_all", None)
    return found


class AsyncReleaseAll(Protocol):
    """The optional `release_all` of a store that can free several leases in one request.

    `await backend.release_all(grants)` releases each grant as `release` would (never someone
    else's lease) in one request: a bool per grant, in their order, True where it freed a live
    lease. A lease set's release uses it; a failure raises as `release` does.
    """

    async def __call__(self, grants: Sequence[Grant]) -> list[bool]: ...


def releases_all(backend: object) -> AsyncReleaseAll | None:
    """The store's `release_all` (see AsyncReleaseAll), or None when it has none.

    Example:
        >>> releases_all(object()) is None
        True
    """
    found: AsyncReleaseAll | None = getattr(backend, "release_all", None)
    return found


class AsyncPrune(Protocol):
    """The optional `prune` of a store that can forget the names nobody holds.

    `await backend.prune(idle, dry_run)` deletes the state (lease rows or files, the fencing
    counter; not the records) of every name that has been free, with no waiter, for `idle`
    seconds, and returns how many names it forgot; with `dry_run` it only counts them. A grant
    racing it either comes first (the name is not idle) or finds the name forgotten and
    restarts its counter from the clock, above every earlier token.
    """

    async def __call__(self, idle: float, dry_run: bool) -> int: ...


def prunes(backend: object) -> AsyncPrune | None:
    """The store's `prune` (see AsyncPrune), or None when it has none.

    Example:
        >>> prunes(object()) is None
        True
    """
    found: AsyncPrune | None = getattr(backend, "prune", None)
    return found


def reports_losses(backend: object) -> Callable[[Callable[[list[str]], object]], None] | None:
    """The store's optional `report_losses_to(listener)`, or None when it has none.

    A store that can lose leases on its own (e.g. a closed connection that held them) calls
    `listener(lease_ids)` at once, so their holders learn before their next renewal; the lease
    monitor registers itself there.

    Example:
        >>> reports_losses(object()) is None
        True
    """
    found: Callable[[Callable[[list[str]], object]], None] | None = getattr(
        backend, "report_losses_to", None)
    return found


@runtime_checkable
class AsyncRecordKeeper(Protocol):
    """A store that also keeps a small record per name, fenced by the name's lease. Every
    built-in store is one; the job runner (tenure.jobs) needs one, locks alone do not.
    """

    async def read_record(self, name: str) -> str | None:
        """The record last written next to `name` by `write_record`, or None.

        Records outlive leases: they are kept across release, expiry and break, like the
        fencing counter. The job runner keeps each job's "last completed period" in one.
        """
        ...

    async def write_record(self, grant: Grant, record: str) -> bool:
        """Replace the record of `grant.name` with `record` (text, at most MAX_RECORD_BYTES of
        UTF-8) in one round trip, only while `grant` is still live; False, and nothing
        written, when the lease was released, expired, broken or taken over.
        """
        ...

    async def records(self, prefix: str = "") -> dict[str, str]:
        """Every record whose name starts with `prefix`, by name."""
        ...
