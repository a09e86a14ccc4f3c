"""The lease operations of an azblob store: acquire, renew, release, break and list.

A lease is an Azure blob lease of 15 to 60 s (the service's range) with a lease id proposed by
the client (uuid4), so an acquire retried after a lost response is idempotent; its fencing
token is the blob's sequence number, moved under the lease (see _tokens.py).

The holder's identity is written into the blob's metadata in the background DESCRIBE_AFTER s
after the grant, unless the lease was released by then (short holds cost no extra request, and
nothing is added to acquire itself); a listing shows it within a second, at once for this
store's own grants.

Example::

    leases = Leases(container, fencing=True)
    grant = await leases.try_acquire("jobs", "worker-1", 30.0, 1)
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from collections.abc import Sequence

from azure.core.exceptions import AzureError, HttpResponseError, ServiceRequestError
from azure.storage.blob.aio import BlobClient, BlobLeaseClient

from tenure._async import _shim
from tenure._async.stores._failures import failure
from tenure._async.stores.azblob._container import Container
from tenure._async.stores.azblob._failures import (
    code,
    container_missing,
    lost_reason,
    no_token,
    status,
)
from tenure._async.stores.azblob._layout import (
    blob_name,
    directory,
    holder_metadata,
    lease_info,
    listing_prefix,
)
from tenure._async.stores.azblob._tokens import create_blob, granted_token
from tenure._errors import StoreUnavailable
from tenure._types import Grant, LeaseInfo, LostReason

log = logging.getLogger("tenure")

# The holder's identity is written into the blob's metadata this long after the grant, unless
# the lease was released before: short holds never pay that request, and `leases()` still shows
# the holder within a second.
DESCRIBE_AFTER = 0.25
_REMEMBERED_RELEASES = 4096
# Creations of a missing blob then leases of it, at most, in one acquire (see _take)...
_TAKE_TRIES = 20
# ...each after a random pause of up to this many seconds times 2 ** (tries so far, at most
# 4) once the blob was deleted between its creation and its lease.
_RETAKE_JITTER = 0.002


class Leases:
    """The leases of one store's container (see the module docstring).

    Example::

        grant = await Leases(container, fencing=True).try_acquire("jobs", "me", 30.0, 1)
    """

    def __init__(self, container: Container, *, fencing: bool = True) -> None:
        self._container = container
        # fencing=False skips the sequence-number increment (one request of three per cycle):
        # every grant's token is then 0, and nothing downstream can refuse a stale holder.
        self._fencing = fencing
        self._describing: dict[str, _shim.Scheduled] = {}  # holder writes not yet made, by lease
        # Lease ids this store released. Azurite lets a released lease id write to the blob
        # until someone leases it again; write_record refuses those ids (see `released`).
        self._released: dict[str, None] = {}

    def start_afresh(self) -> None:
        """In a child after fork(): forget the parent's holder writes, under the parent's leases.

        Example::

            leases.start_afresh()  # called by the store's fork hook
        """
        self._describing = {}

    def cancel_descriptions(self) -> None:
        """Cancel the holder writes not yet made (the store is closing).

        Example::

            leases.cancel_descriptions()
        """
        for scheduled in list(self._describing.values()):
            scheduled.cancel()
        self._describing.clear()

    def released(self, lease_id: str) -> bool:
        """True when this store released the lease `lease_id` (among the last few thousand).

        Example::

            if leases.released(grant.lease_id): ...  # a write under it is refused
        """
        return lease_id in self._released

    # -- acquiring ----------------------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        """A free slot of `name` leased for `holder`, or None when every slot is held.

        Example::

            grant = await leases.try_acquire("jobs", "worker-1", 30.0, 1)
        """
        self._container.refuse_if_closed("acquire", name)
        # Whole seconds: rounding down keeps the service's lease at least as long as the holder's
        # local deadline (ttl x 0.99 - 1 s), which is below int(ttl) for every ttl >= 15.
        duration = int(ttl)
        slots = [0] if limit == 1 else random.sample(range(limit), limit)
        with self._container.bounded("acquire", name):
            for slot in slots:
                key = blob_name(name, slot, limit)
                blob = self._container.blob(key)
                lease_id = str(uuid.uuid4())
                try:
                    taken = await self._take(blob, lease_id, duration, name)
                    token, described = (
                        await granted_token(self._container, blob, lease_id, name, limit,
                                            holder)
                        if taken and self._fencing else (0, False))
                except BaseException as exc:  # the lease may be taken: undo, never wait for it
                    # (a ServiceRequestError sent nothing; without a token no undo can be sent)
                    if not isinstance(exc, ServiceRequestError) and not no_token(exc):
                        _shim.start_soon(self._undo, blob, lease_id)
                    if isinstance(exc, AzureError):
                        raise self._container.failure("acquire", name, exc) from None
                    raise
                if not taken:
                    continue
                if not described:
                    self._describing[lease_id] = _shim.call_later(
                        DESCRIBE_AFTER, self._describe, blob, lease_id, name, holder, token)
                return Grant(name, slot, holder, lease_id, token, key)
        return None

    async def _take(self, blob: BlobClient, lease_id: str, duration: int, name: str) -> bool:
        """Acquire the blob's lease with our proposed id; False when someone else holds it.

        A missing blob is created, then leased: two requests, between which a prune with
        idle 0 (or a release with retain=0) may delete it again, so this tries a few times,
        after a random pause from the second creation on: a pruner that lists and deletes
        in a loop otherwise kept the same phase as the tries and won 10 in a row (a
        conformance test under load, 2 runs in 6)."""
        for tries in range(_TAKE_TRIES):
            try:
                await BlobLeaseClient(blob, lease_id).acquire(duration)
                return True
            except HttpResponseError as exc:
                if status(exc) == 409:
                    return False  # LeaseAlreadyPresent: held by someone else
                if status(exc) != 404:
                    raise
                if code(exc) == "ContainerNotFound":
                    await self._container.ensure_container(name, exc)
                else:
                    if tries:  # created before, and deleted again before its lease
                        await _shim.sleep(random.uniform(0, _RETAKE_JITTER * 2 ** min(tries, 4)))
                    await create_blob(blob, name)
        raise failure(self._container.url, "acquire", name,
                      "a prune with idle 0 is running; try again",
                      f"its blob was deleted each time it was created ({_TAKE_TRIES} times)")

    async def _describe(self, blob: BlobClient, lease_id: str, name: str, holder: str,
                        token: int) -> None:
        """Write who holds the blob (for leases() and the CLI); a failure only hides that."""
        if lease_id not in self._describing:  # released meanwhile, or the parent's (fork)
            return
        metadata = holder_metadata(name, holder, token)
        # A failure (lost meanwhile, service away) only leaves leases() showing the holder as "?"
        with contextlib.suppress(AzureError, StoreUnavailable), self._container.bounded(
                "describing", name):
            await blob.set_blob_metadata(metadata, lease=lease_id)

    async def _undo(self, blob: BlobClient, lease_id: str, tries: int = 3) -> None:
        """Free what an acquire cut short (cancelled, failed) may have taken, by its lease id,
        in the background (`_shim.start_soon`). The service runs a request it received even
        when its client gave up, and one still on its way (a slow connection) can arrive after
        this release, sent on another connection: a release that finds the blob not leased
        is tried again later, `tries` times in all. Best effort: a lease left behind expires
        within its ttl."""
        try:
            with self._container.bounded("freeing an abandoned acquire", blob.blob_name):
                await BlobLeaseClient(blob, lease_id).release()
        except HttpResponseError as exc:
            if code(exc) == "LeaseNotPresentWithLeaseOperation" and tries > 1:
                _shim.call_later(self._container.timeout / 2, self._undo, blob, lease_id,
                                 tries - 1)
        except Exception as exc:  # unreachable, closed meanwhile: nobody to tell
            log.debug("tenure: %s: freeing an abandoned acquire failed: %r",
                      self._container.url, exc)

    # -- holding and letting go ---------------------------------------------------------------

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        """Each grant renewed, or why its lease is gone.

        Example::

            [renewed] = await leases.renew([grant], 30.0)
        """
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        with self._container.bounded("renewal", label):
            results: list[Grant | LostReason] = await _shim.run_all(self._renew_one, grants)
        return results

    async def _renew_one(self, grant: Grant) -> Grant | LostReason:
        try:
            await BlobLeaseClient(self._container.blob(grant.key), grant.lease_id).renew()
            return grant
        except HttpResponseError as exc:
            reason = lost_reason(exc)
            if reason is not None:
                return reason
            raise self._container.failure("renewal", grant.name, exc) from None
        except AzureError as exc:
            raise self._container.failure("renewal", grant.name, exc) from None

    async def release(self, grant: Grant) -> bool:
        """Free `grant`'s lease; False when it was no longer ours.

        Example::

            freed = await leases.release(grant)
        """
        self._container.refuse_if_closed("release", grant.name)
        scheduled = self._describing.pop(grant.lease_id, None)
        if scheduled is not None:
            scheduled.cancel()  # one already writing fails harmlessly once the lease is gone
        self._released[grant.lease_id] = None
        if len(self._released) > _REMEMBERED_RELEASES:
            # Forget the oldest; threads releasing at once may race here, and losing that race
            # only forgets one id fewer.
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del self._released[next(iter(self._released))]
        try:
            with self._container.bounded("release", grant.name):
                await BlobLeaseClient(self._container.blob(grant.key), grant.lease_id).release()
            return True
        except HttpResponseError as exc:
            if status(exc) in (404, 409, 412):
                return False  # gone already (expired, broken, taken): nothing of ours to free
            raise self._container.failure("release", grant.name, exc) from None
        except AzureError as exc:
            raise self._container.failure("release", grant.name, exc) from None

    async def break_lease(self, name: str) -> int:
        """Break every lease of `name` at once; how many were held.

        Example::

            broken = await leases.break_lease("jobs")
        """
        self._container.refuse_if_closed("break", name)
        with self._container.bounded("break", name):
            return await self._break(name)

    async def _break(self, name: str) -> int:
        broken = 0
        try:
            async for blob in self._container.client.list_blobs(
                    name_starts_with=directory(name)):
                if blob.lease.state != "leased":
                    continue
                try:
                    await BlobLeaseClient(self._container.blob(blob.name)).break_lease(0)
                    broken += 1
                except HttpResponseError as exc:
                    if status(exc) != 409:  # 409: its lease ended meanwhile
                        raise
        except AzureError as exc:
            if container_missing(exc):
                return 0
            raise self._container.failure("break", name, exc) from None
        return broken

    async def listing(self, prefix: str = "") -> list[LeaseInfo]:
        """The live leases of the names that start with `prefix`, by name and slot.

        Example::

            held = await leases.listing("jobs/")
        """
        self._container.refuse_if_closed("listing", prefix)
        for scheduled in list(self._describing.values()):
            await scheduled.run_now()  # this store's own grants show their holders at once
        found: list[LeaseInfo] = []
        token: str | None = None
        while True:  # page by page: only the live leases are kept, never every blob
            try:
                blobs, token = await self._container.page(listing_prefix(prefix), token,
                                                          metadata=True)
            except AzureError as exc:
                if container_missing(exc):
                    return []
                raise self._container.failure("listing", prefix, exc) from None
            for blob in blobs:
                info = lease_info(blob.name, blob.lease.state, blob.metadata,
                                  blob.page_blob_sequence_number)
                if info is not None and info.name.startswith(prefix):
                    found.append(info)
            if token is None:
                return sorted(found, key=lambda info: (info.name, info.slot))
