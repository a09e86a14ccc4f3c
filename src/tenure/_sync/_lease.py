# GENERATED from src/tenure/_async/_lease.py by scripts/unasync.py: do not edit.
"""A held lease: its fencing token, its local deadline, and how its holder learns of a loss.

Example::

    lease = lock.try_acquire()
    if lease is not None:
        with lease:          # lease.check() raises once it is lost
            write(record, fence=lease.token)
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from tenure._sync import _shim
from tenure._sync.stores._protocol import Backend, closed_store
from tenure._errors import LeaseLost, LeaseReleased, StoreUnavailable
from tenure._timing import jittered, local_deadline
from tenure._types import Grant, LostReason

log = logging.getLogger("tenure")
# A loss may be reported by the renewal loop and by a store (a session it closed) at once, from
# two threads: one of them records it and runs on_lost.
_LOSS_RECORDED = threading.Lock()


def current_owner() -> object:
    """The running task, else the running thread: who takes a lease, and who would wait for
    it to come back if it asked for the same lock again."""
    # asyncio only when the program imported it: without it no task can be running, and
    # importing it here would add ~100 ms to the start of every sync program (the CLI's too).
    asyncio = sys.modules.get("asyncio")
    try:
        task = None if asyncio is None else asyncio.current_task()
    except RuntimeError:  # no event loop in this thread
        task = None
    # The Thread object, not its ident: Linux gives an ended thread's ident to the next one,
    # which would then pass for the holder of a lease it never took.
    return task if task is not None else threading.current_thread()


class LeaseKeeper(Protocol):
    """What a lease needs of the monitor that renews it (its store's LeaseMonitor),
    declared here so that the lease knows no lock, store or monitor class."""

    @property
    def closed(self) -> bool:
        """True once the store was closed: its leases are neither renewed nor released."""

    def forget(self, lease: Lease) -> None:
        """Stop renewing `lease` (released or lost)."""


@dataclass(frozen=True)
class LeaseTerms:
    """What every lease of one lock needs, given once by the lock: how long a lease lasts and
    when it is renewed, whom to tell of its loss, and where it is renewed and released.

    Example::

        terms = LeaseTerms(ttl=30.0, renew_every=10.0, on_lost=None,
                                backend=store.backend, keeper=monitor)
        lease = Lease(terms, grant, sent_at)
    """

    ttl: float
    renew_every: float
    on_lost: Callable[[Lease], object] | None
    backend: Backend  # takes the lease's release; its url names the store in messages
    keeper: LeaseKeeper  # renews the lease, and says when the store was closed
    # How long after its request was sent a lease is lost without a renewal: local_deadline(0,
    # ttl), worked out once per lock rather than on every acquire.
    deadline_after: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "deadline_after", local_deadline(0.0, self.ttl))


class Lease:
    """One holder's hold on a lock or on one semaphore slot, renewed by a background thread.

    A lease is `held` until it is released (`released`: by `release()` or on leaving its
    block) or lost (`lost`: expired, broken, taken over). From then on `check()` raises
    tenure.LeaseReleased or tenure.LeaseLost (LeaseReleased is a LeaseLost). `token` stays
    readable after the end: a write fenced by it is refused once a newer lease was granted.

    Example::

        with lock.acquire(timeout=10) as lease:
            print(lease.name, lease.token, lease.expires_in)
            lease.check()          # raises tenure.LeaseLost once the lease is lost
        assert lease.released and not lease.held
    """

    __slots__ = ("_cancel_scope", "_lost_reason", "_owner", "_released", "_terms", "deadline",
                 "grant", "renew_at")

    def __init__(self, terms: LeaseTerms, grant: Grant, sent_at: float) -> None:
        self._terms = terms
        self.grant = grant
        self.deadline = sent_at + terms.deadline_after  # = local_deadline(sent_at, terms.ttl)
        self.renew_at = sent_at + jittered(terms.renew_every)
        self._lost_reason: LostReason | None = None
        self._released = False
        self._cancel_scope: Any = None
        self._owner = current_owner()  # the task or thread that took it

    def __repr__(self) -> str:
        state = "released" if self._released else "lost" if self.lost else "held"
        return f"<Lease {self.name!r} slot={self.slot} token={self.token} {state}>"

    @property
    def name(self) -> str:
        """The lock's name."""
        return self.grant.name

    @property
    def holder(self) -> str:
        """Who holds it (host:pid:suffix unless `holder=` was given)."""
        return self.grant.holder

    @property
    def token(self) -> int:
        """The fencing token: larger than every token granted before for this name.

        Tokens start from the clock in microseconds (about 1.8e15, 51 bits): store them in a
        64-bit column (BIGINT, not INT), e.g. `UPDATE ... SET fence = :token WHERE fence <
        :token`. They stay below 2**53 (exact as JSON numbers) until the year 2255.

        Example::

            print(lease.token)  # e.g. 1795627217439991
        """
        return self.grant.token

    @property
    def slot(self) -> int:
        """The semaphore slot held, in range(limit); 0 for a lock."""
        return self.grant.slot

    @property
    def expires_in(self) -> float:
        """Seconds until the local deadline, by this process's monotonic clock (0 once lost
        or released: nothing is held any more)."""
        if self._released or self.lost:
            return 0.0
        return max(0.0, self.deadline - _shim.monotonic())

    @property
    def held(self) -> bool:
        """True while the lease is neither released nor lost: protected work may go on.

        Example::

            if lease.held:
                write(record, fence=lease.token)
        """
        return not self._released and not self.lost

    @property
    def lost(self) -> bool:
        """True once the lease is lost: refused on renewal, broken, or past its deadline.

        A released lease is not lost (`released` says so): `lost` stays False after a release
        of a lease that was held, and True after a release of one already lost."""
        if self._lost_reason is not None:
            return True
        return not self._released and _shim.monotonic() >= self.deadline

    @property
    def lost_reason(self) -> LostReason | None:
        """Why the lease was lost, or None while it is held (or was released)."""
        if self._lost_reason is None and self.lost:
            return LostReason.DEADLINE
        return self._lost_reason

    @property
    def released(self) -> bool:
        """True once `release()` ran (also on leaving the lease's `with` block)."""
        return self._released

    def check(self) -> None:
        """Raise unless the lease is still held; call it before each protected step.

        Raises tenure.LeaseLost (with the reason) once the lease is lost, and
        tenure.LeaseReleased, a LeaseLost, once it was released: after `release()` or its
        block, the lock may already be someone else's.

        Example::

            for invoice in batch:
                lease.check()
                charge(invoice, fence=lease.token)
        """
        if self.lost:
            raise LeaseLost(self._loss_message())
        if self._released:
            raise LeaseReleased(
                f"lease on {self.name!r} (token {self.token}) was released: this holder no "
                "longer has it and another may; acquire the lock again before more protected "
                "work"
            )

    def _loss_message(self) -> str:
        reason = self.lost_reason or LostReason.DEADLINE
        return (
            f"lease on {self.name!r} (token {self.token}) was lost: {reason.value}; stop the "
            "protected work, it may now run elsewhere, and acquire the lock again"
        )

    def release(self) -> bool:
        """Give the lease back. Idempotent; True only when this call freed a live lease.

        Releasing a lease that expired or was taken over frees nothing of anyone else's.

        Example::

            lease = lock.try_acquire()
            ...
            lease.release()
        """
        if not self._releasing():
            return False
        try:
            # Even a lease given up as lost goes back to the store: it may still hold it (past
            # its local deadline, a flock the kernel keeps), and the store frees only its own.
            return self._terms.backend.release(self.grant)
        except BaseException:
            self._released = False  # not freed: a later release() may try again; else it expires
            raise

    def _releasing(self) -> bool:
        """release()'s first half, also a lease set's (which frees its grants in one request):
        False when released already; else the lease is released from here on and no renewal
        races the release. On failure the caller sets `_released` back to False."""
        if self._released:
            return False
        terms = self._terms
        if terms.keeper.closed:  # its close() released it, or gave up: it expires by itself
            raise closed_store(terms.backend.url, "release", self.name)
        if self._lost_reason is None and self.lost:  # past its deadline: lost, and stays so
            self._lost_reason = LostReason.DEADLINE
        self._released = True
        terms.keeper.forget(self)
        return True

    # -- called by the monitor ----------------------------------------------------------------

    def disown(self) -> None:
        """In a forked child: this lease is the parent's. The child neither renews nor releases
        it, and `check()` raises there, since the child does not hold it."""
        self._released = True  # release() in the child then frees nothing of the parent's
        self._lost_reason = LostReason.INHERITED
        self._cancel_scope = None

    def renewed(self, sent_at: float) -> None:
        """The store confirmed a renewal whose request was sent at `sent_at`."""
        self.deadline = local_deadline(sent_at, self._terms.ttl)
        self.renew_at = sent_at + jittered(self._terms.renew_every)

    def retry_soon(self, now: float) -> None:
        """A renewal failed transiently: try again well before the deadline."""
        self.renew_at = now + min(1.0, self._terms.renew_every / 3)

    def mark_lost(self, reason: LostReason) -> None:
        """Record the loss, cancel an async body, and run `on_lost`."""
        with _LOSS_RECORDED:
            if self._released or self._lost_reason is not None:
                return
            self._lost_reason = reason
        self._terms.keeper.forget(self)
        log.warning("tenure: %s", self._loss_message())
        _shim.cancel(self._cancel_scope)
        on_lost = self._terms.on_lost
        if on_lost is not None:
            _shim.run_callback(on_lost, self, f"on_lost callback for {self.name!r}")

    # -- context manager ----------------------------------------------------------------------

    def __enter__(self) -> Lease:
        self._cancel_scope = _shim.open_cancel_scope()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        scope, self._cancel_scope = self._cancel_scope, None
        if leave_block(self, scope, (exc_type, exc, traceback), repr(self.name)):
            raise LeaseLost(self._loss_message())


class _Releasable(Protocol):
    @property
    def lost(self) -> bool: ...

    def release(self) -> bool: ...


def leave_block(held: _Releasable, cancel_scope: Any,
                      exc_info: tuple[type[BaseException] | None, BaseException | None,
                                      TracebackType | None], what: str) -> bool:
    """The end of the `with` block of a lease or a lease set (`held`): close the block's
    cancel scope, then release `held`, shielded (a store that cannot be reached is logged:
    the lease expires by itself). True when the block must raise LeaseLost: the loss
    cancelled it, or `held` was lost and the block ended without an error of its own.

    Example::

        if leave_block(lease, scope, (None, None, None), "'job'"):
            raise LeaseLost("...")
    """
    try:
        # Raises when the block is left in another task than it was entered in (anyio's
        # cancel scopes belong to one task): the lease is released all the same.
        cancelled_by_loss = _shim.close_cancel_scope(cancel_scope, *exc_info)
    finally:
        lost = held.lost
        with _shim.shielded():
            try:
                held.release()
            except StoreUnavailable as release_error:
                log.warning("tenure: release of %s failed, it expires by itself: %s", what,
                            release_error)
    return cancelled_by_loss or (lost and exc_info[0] is None)
