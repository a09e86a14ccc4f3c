# GENERATED from src/tenure/_async/_monitor.py by scripts/unasync.py: do not edit.
"""The lease monitor: one background loop per store renews every lease held through it, in
batches, and marks a lease lost on a definitive refusal or when its local deadline passes.

The loop never waits on the store: each renewal batch runs as a call of its own
(`_shim.start_soon`) and hands its answer back, so a renewal stuck on a silent path cannot
delay the loss signal. The loop wakes at the earliest deadline whatever the store does.

Example::

    monitor = LeaseMonitor(backend)
    monitor.watch(lease)     # renewed from now on
    monitor.forget(lease)    # on release
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from itertools import chain
from typing import TYPE_CHECKING, NamedTuple

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._protocol import Backend, closed_store, reports_losses
from tenure._errors import TenureError
from tenure._types import LostReason

if TYPE_CHECKING:
    from tenure._sync._lease import Lease

log = logging.getLogger("tenure")

# With no lease due sooner, the loop still looks around this often; a lease whose renewal is due
# later than that needs no wake-up, which keeps acquire/release free of thread hand-offs.
_IDLE_WAKE = 1.0
# How long close() waits for acquire requests under way to end (each is bounded by the store's
# timeout; a waiter blocked on the server ends its block within about half of it).
CLOSE_GRACE = 3.0


class _Answer(NamedTuple):
    """What one renewal batch brought back, for the loop to apply."""

    leases: list[Lease]
    sent_at: float
    answered_at: float
    results: list[object] | None  # None: the batch failed transiently (or was cancelled)
    error: Exception | None = None  # why it failed, when it did


class LeaseMonitor:
    """Renews the leases of one store; see the module docstring."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._leases: dict[str, Lease] = {}
        self._renewing: set[str] = set()  # lease ids whose renewal awaits the store
        self._answers: deque[_Answer] = deque()
        self._mutex = threading.Lock()
        self._wakeup = _shim.Event()
        self._background: _shim.Background | None = None
        self._next_wake = -math.inf
        self._closed = False
        self._closing = False  # set by release_all(), under the mutex: watch() refuses then
        self._acquiring = 0  # acquire requests under way (see acquiring())
        self._acquires_done = _shim.Event()  # set when the last of them ends during a close
        # One WARNING when renewals start failing and one INFO when they succeed again, not a
        # line per retry: an outage of a few seconds retries many times per held lease.
        self._failing_since: float | None = None
        _shim.release_at_exit(self)  # sync: a clean interpreter exit frees the leases at once
        # A store that learns outside a renewal that leases are gone (PostgreSQL advisory mode:
        # it had to close the session holding them) says so at once, not at the next renewal.
        report_losses_to = reports_losses(backend)
        if report_losses_to is not None:
            report_losses_to(self.lost)
        _forks.in_child_after_fork(self, LeaseMonitor._start_afresh_in_child)

    # forget/held run on every release and renewal: plain dict operations, which are atomic
    # (GIL, or the dict's own lock in free-threaded builds); watch takes the mutex (uncontended:
    # well under a microsecond) so that no lease is added after close() took the list to release.

    @property
    def closed(self) -> bool:
        """True once `close()` ran: the store was closed, and no lease is renewed any more.

        Example::

            monitor.close()
            assert monitor.closed
        """
        return self._closed

    def held(self) -> list[Lease]:
        """Every lease being renewed now."""
        return list(self._leases.values())

    def watch(self, lease: Lease) -> bool:
        """Start renewing `lease`; False (and nothing watched) once the store is closing: its
        close() has taken the list of leases to release, and would leave this one held."""
        with self._mutex:
            if self._closing:
                return False
            self._leases[lease.grant.lease_id] = lease
        background = self._background
        if background is None or not background.alive():
            with self._mutex:
                if not self._closed and (self._background is None
                                         or not self._background.alive()):
                    # A new loop gets a new event: an async store used again under another
                    # event loop (asyncio.run twice) would wait on one bound to the first.
                    self._wakeup = _shim.Event()
                    self._background = _shim.spawn(self._run, "tenure-renewal")
        if lease.renew_at < self._next_wake:  # renew_at always comes before the deadline
            self._wakeup.set()
        return True

    def lost(self, lease_ids: Iterable[str]) -> None:
        """The store says these leases are gone, outside a renewal: each is lost now.

        Example::

            monitor.lost([lease.grant.lease_id])  # lease.lost is True from now on
        """
        for lease_id in lease_ids:
            lease = self._leases.get(lease_id)
            if lease is not None:
                lease.mark_lost(LostReason.EXPIRED)

    def forget(self, lease: Lease) -> None:
        """Stop renewing `lease` (released or lost)."""
        self._leases.pop(lease.grant.lease_id, None)

    @contextmanager
    def acquiring(self, url: str, name: str) -> Iterator[None]:
        """Around an acquire request: refused once the store is closing, and counted, so that
        close() waits for the requests under way (a lease one of them takes is given back,
        not left to expire) before it closes the connections.

        Example::

            with monitor.acquiring(backend.url, "jobs"):
                grant = backend.try_acquire("jobs", holder, 30.0, 1)
        """
        with self._mutex:
            if self._closing or self._closed:
                raise closed_store(url, "acquire", name)
            self._acquiring += 1
        try:
            yield
        finally:
            with self._mutex:
                self._acquiring -= 1
                last = self._closing and self._acquiring == 0
            if last:
                self._acquires_done.set()

    def release_all(self) -> None:
        """Release every lease still held, and watch no new one from now on (the store is
        closing: a waiter woken by these releases must not take a lease nobody would renew or
        release); then wait, at most CLOSE_GRACE seconds, for the acquire requests under way.
        A lease that cannot be released expires by itself."""
        with self._mutex:
            self._closing = True
            leases = list(self._leases.values())
            under_way = self._acquiring > 0
        for lease in leases:
            with suppress(TenureError):
                lease.release()
        if under_way:
            _shim.wait_event(self._acquires_done, CLOSE_GRACE)

    def close(self) -> None:
        """Stop the loop. Held leases are the caller's to release first."""
        self._closed = True
        self._wakeup.set()
        if self._background is not None:
            self._background.stop()

    def _start_afresh_in_child(self) -> None:
        """After fork(): the child holds none of the parent's leases (they stay the parent's,
        renewed by the parent), and no loop runs here until the child takes a lease itself."""
        for lease in self._leases.values():
            lease.disown()
        self._leases = {}
        self._renewing = set()
        self._answers = deque()
        self._mutex = threading.Lock()
        self._wakeup = _shim.Event()
        self._background = None
        self._next_wake = -math.inf
        self._failing_since = None

    def _run(self) -> None:
        while not self._closed:
            try:
                self._tick()
            except Exception:  # a bug here must not stop every renewal of the process
                log.exception("tenure: renewal loop error; continuing")
                _shim.sleep(0.1)

    def _tick(self) -> None:
        """Apply renewal answers, mark overdue leases lost, start the renewals due, and sleep
        until the next renewal or deadline (or an answer) is due."""
        self._wakeup.clear()
        self._next_wake = math.inf  # while we look, every watch() wakes us again
        while self._answers:
            self._apply(self._answers.popleft())
        now = _shim.monotonic()
        leases = self.held()
        for lease in leases:
            if now >= lease.deadline:
                lease.mark_lost(LostReason.DEADLINE)
        leases = [lease for lease in leases if not lease.lost and not lease.released]
        idle = [lease for lease in leases if lease.grant.lease_id not in self._renewing]
        if any(lease.renew_at <= now for lease in idle):
            # Renew everything due within half its interval too: one batch, not many.
            batch = [lease for lease in idle
                     if lease.renew_at <= now + lease._terms.renew_every / 2]
            self._start_renewal(batch)
            idle = [lease for lease in idle if lease.grant.lease_id not in self._renewing]
        # Deadlines of every lease, renewals of those not already being renewed.
        wake = min(chain((lease.deadline for lease in leases),
                         (lease.renew_at for lease in idle)), default=now + _IDLE_WAKE)
        self._next_wake = wake
        if not self._answers:
            _shim.wait_event(self._wakeup, max(0.0, wake - _shim.monotonic()))

    def _start_renewal(self, batch: list[Lease]) -> None:
        by_ttl: dict[float, list[Lease]] = defaultdict(list)
        for lease in batch:
            by_ttl[lease._terms.ttl].append(lease)
        for ttl, group in by_ttl.items():
            _shim.start_soon(self._renew, group, ttl)
            self._renewing.update(lease.grant.lease_id for lease in group)

    def _renew(self, group: list[Lease], ttl: float) -> None:
        """One renewal batch, run apart from the loop; its answer goes back to the loop."""
        sent_at = _shim.monotonic()
        results: list[object] | None = None
        error: Exception | None = None
        try:
            results = list(self._backend.renew([lease.grant for lease in group], ttl))
        except Exception as exc:  # a background renewal never crashes the process
            error = exc
        finally:  # also when cancelled: the loop must not wait for this batch forever
            self._answers.append(_Answer(group, sent_at, _shim.monotonic(), results, error))
            self._wakeup.set()

    def _log_outage(self, answer: _Answer) -> None:
        if answer.error is not None:
            if self._failing_since is None:
                self._failing_since = answer.sent_at
                log.warning("tenure: renewal of %d lease(s) failed, retrying before their "
                            "deadlines (said once until a renewal succeeds): %s",
                            len(answer.leases), answer.error)
            else:
                log.debug("tenure: renewal failed again: %s", answer.error)
        elif answer.results is not None and self._failing_since is not None:
            log.info("tenure: renewals succeed again after %.1f s",
                     answer.answered_at - self._failing_since)
            self._failing_since = None

    def _apply(self, answer: _Answer) -> None:
        """On the loop only, so that each lease is renewed by one batch at a time and its
        state changes in one place."""
        self._renewing.difference_update(lease.grant.lease_id for lease in answer.leases)
        self._log_outage(answer)
        if answer.results is None:
            for lease in answer.leases:
                lease.retry_soon(answer.answered_at)
            return
        for lease, result in zip(answer.leases, answer.results, strict=True):
            if lease.released:
                continue
            if isinstance(result, LostReason):
                lease.mark_lost(result)
            elif lease.lost:
                # Confirmed after the deadline (or applied after it): the holder may already
                # have been told it was lost, and a lost lease stays lost.
                lease.mark_lost(LostReason.DEADLINE)
            else:
                lease.renewed(answer.sent_at)
