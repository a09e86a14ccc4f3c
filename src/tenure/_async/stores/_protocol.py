"""The contract every store module implements. Keep stores small: waiting, timeouts, jitter,
renewal scheduling, deadlines and loss detection live once in the core, not here.

Example::

    grant = await backend.try_acquire("jobs", holder="web-1", ttl=30.0, limit=1)
    if grant is not None:
        [renewed] = await backend.renew([grant], ttl=30.0)
        await backend.release(grant)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tenure._types import Capabilities, Grant, LeaseInfo, LostReason


@runtime_checkable
class AsyncBackend(Protocol):
    """A lease store. Every method is safe to call concurrently from many holders.

    `limit` is the number of slots of the name (1 for a lock); the store picks a free slot in
    the same round trip as the grant, so a semaphore costs no more than a lock.
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

    async def wait_released(self, name: str, timeout: float) -> None:
        """Return when `name` may have been released, or after `timeout` seconds."""
        ...

    async def close(self) -> None:
        """Free connections and file descriptors. Idempotent."""
        ...
