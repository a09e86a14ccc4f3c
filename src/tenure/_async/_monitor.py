"""The lease monitor: one background loop per store renews every lease held through it, in
batches, and marks a lease lost on a definitive refusal or when its local deadline passes.

Example::

    monitor = AsyncLeaseMonitor(backend)
    monitor.watch(lease)     # renewed from now on
    monitor.forget(lease)    # on release
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict
from contextlib import suppress
from typing import TYPE_CHECKING

from tenure._async import _shim
from tenure._async.stores._protocol import AsyncBackend
from tenure._errors import TenureError
from tenure._types import LostReason

if TYPE_CHECKING:
    from tenure._async._lease import AsyncLease

log = logging.getLogger("tenure")

# With no lease due sooner, the loop still looks around this often; a lease whose renewal is due
# later than that needs no wake-up, which keeps acquire/release free of thread hand-offs.
_IDLE_WAKE = 1.0


class AsyncLeaseMonitor:
    """Renews the leases of one store; see the module docstring."""

    def __init__(self, backend: AsyncBackend) -> None:
        self._backend = backend
        self._leases: dict[str, AsyncLease] = {}
        self._mutex = threading.Lock()
        self._wakeup = _shim.Event()
        self._background: _shim.Background | None = None
        self._next_wake = -math.inf
        self._closed = False
        _shim.release_at_exit(self)  # sync: a clean interpreter exit frees the leases at once

    # watch/forget/held run on every acquire and release: plain dict operations, which are
    # atomic (GIL, or the dict's own lock in free-threaded builds); the mutex only guards
    # starting the background loop.

    def held(self) -> list[AsyncLease]:
        """Every lease being renewed now."""
        return list(self._leases.values())

    def watch(self, lease: AsyncLease) -> None:
        """Start renewing `lease`."""
        self._leases[lease.grant.lease_id] = lease
        background = self._background
        if background is None or not background.alive():
            with self._mutex:
                if not self._closed and (self._background is None
                                         or not self._background.alive()):
                    self._background = _shim.spawn(self._run, "tenure-renewal")
        if lease.renew_at < self._next_wake:  # renew_at always comes before the deadline
            self._wakeup.set()

    def forget(self, lease: AsyncLease) -> None:
        """Stop renewing `lease` (released or lost)."""
        self._leases.pop(lease.grant.lease_id, None)

    async def release_all(self) -> None:
        """Release every lease still held; one that cannot be released expires by itself."""
        for lease in self.held():
            with suppress(TenureError):
                await lease.release()

    def close(self) -> None:
        """Stop the loop. Held leases are the caller's to release first."""
        self._closed = True
        self._wakeup.set()
        if self._background is not None:
            self._background.stop()

    async def _run(self) -> None:
        while not self._closed:
            try:
                await self._tick()
            except Exception:  # a bug here must not stop every renewal of the process
                log.exception("tenure: renewal loop error; continuing")
                await _shim.sleep(0.1)

    async def _tick(self) -> None:
        """Mark overdue leases lost, renew those due, or sleep until the next one is due."""
        self._wakeup.clear()
        self._next_wake = -math.inf  # while we look, every watch() wakes us again
        now = _shim.monotonic()
        leases = self.held()
        for lease in leases:
            if now >= lease.deadline:
                lease.mark_lost(LostReason.DEADLINE)
        leases = [lease for lease in leases if not lease.lost and not lease.released]
        if any(lease.renew_at <= now for lease in leases):
            # Renew everything due within half its interval too: one batch, not many.
            await self._renew([
                lease for lease in leases
                if lease.renew_at <= now + lease._lock.renew_every / 2
            ])
            return
        wake = min((min(lease.renew_at, lease.deadline) for lease in leases),
                   default=now + _IDLE_WAKE)
        self._next_wake = wake
        await _shim.wait_event(self._wakeup, max(0.0, wake - now))

    async def _renew(self, batch: list[AsyncLease]) -> None:
        by_ttl: dict[float, list[AsyncLease]] = defaultdict(list)
        for lease in batch:
            by_ttl[lease._lock.ttl].append(lease)
        for ttl, group in by_ttl.items():
            sent_at = _shim.monotonic()
            try:
                results = await self._backend.renew([lease.grant for lease in group], ttl)
            except Exception as exc:  # a background renewal never crashes the process
                log.warning("tenure: renewal of %d lease(s) failed, retrying before the "
                            "deadline: %s", len(group), exc)
                now = _shim.monotonic()
                for lease in group:
                    lease.retry_soon(now)
                continue
            for lease, result in zip(group, results, strict=True):
                if isinstance(result, LostReason):
                    lease.mark_lost(result)
                elif not lease.released:
                    lease.renewed(sent_at)
