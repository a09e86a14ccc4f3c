"""The fencing tokens of an azblob store: a blob's sequence number, moved under the lease.

A lock's token is its blob's sequence number, incremented under the lease right after
acquiring: atomic on the server, and nobody can move it without the lease. A blob created
afresh starts its sequence number at the wall clock in microseconds, so tokens never go
backwards even when the blob was deleted. A semaphore's token comes from incrementing its
shared counter blob (tokens grow across slots), then is copied into the slot blob's sequence
number under the lease. A lock blob that is not a page blob keeps its counter in its metadata.

Example::

    token, described = await granted_token(container, blob, lease_id, "jobs", 1, "worker-1")
"""

from __future__ import annotations

from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob.aio import BlobClient

from tenure._async.stores.azblob._container import Container
from tenure._async.stores.azblob._failures import status
from tenure._async.stores.azblob._layout import NAME, TOKEN, directory, encode, holder_metadata
from tenure._errors import StoreUnavailable
from tenure._hostclock import wall_us


async def create_blob(blob: BlobClient, name: str) -> None:
    """An empty page blob for `name` whose sequence number starts at the wall clock (never
    from 0); nothing when it exists.

    Example::

        await create_blob(container.blob(blob_name("jobs", 0, 1)), "jobs")
    """
    try:
        await blob.create_page_blob(0, metadata={NAME: encode(name)},
                                    sequence_number=wall_us(),
                                    match_condition=MatchConditions.IfMissing)
    except HttpResponseError as exc:
        if status(exc) not in (409, 412):  # 409/412: it exists (and may be leased)
            raise


async def granted_token(container: Container, blob: BlobClient, lease_id: str, name: str,
                        limit: int, holder: str) -> tuple[int, bool]:
    """(token, whether the holder was written with it) for a grant held under `lease_id`.

    Example::

        token, described = await granted_token(container, blob, lease_id, "jobs", 1, "me")
    """
    if limit == 1:
        try:
            answer = await blob.set_sequence_number("increment", lease=lease_id)
        except HttpResponseError as exc:
            if status(exc) != 400:
                raise
            return await _metadata_token(blob, lease_id, name, holder, exc), True
        return _sequence_number(answer), False
    counter = container.blob(directory(name) + "counter")
    for attempt in range(2):
        try:
            answer = await counter.set_sequence_number("increment")
            break
        except HttpResponseError as exc:
            if status(exc) != 404 or attempt:
                raise
            await create_blob(counter, name)
    token = _sequence_number(answer)
    await blob.set_sequence_number("update", str(token), lease=lease_id)
    return token, False


async def _metadata_token(blob: BlobClient, lease_id: str, name: str, holder: str,
                          refusal: HttpResponseError) -> int:
    """The fallback counter of a lock blob that is not a page blob (a block blob someone
    put at the lock's name): kept in its metadata, written under the lease AND only if the
    blob is unchanged since read (If-Match), keeping the blob's other metadata."""
    properties = await blob.get_blob_properties(lease=lease_id)
    if str(properties.blob_type).lower().endswith("pageblob"):
        raise refusal  # a page blob refused the increment for another reason
    metadata = dict(properties.metadata or {})
    stored = metadata.get(TOKEN, "")
    token = int(stored) + 1 if stored.isdigit() else wall_us()
    metadata.update(holder_metadata(name, holder, token))
    await blob.set_blob_metadata(metadata, lease=lease_id, etag=properties.etag,
                                 match_condition=MatchConditions.IfNotModified)
    return token


def _sequence_number(answer: dict[str, Any]) -> int:
    value = answer.get("blob_sequence_number")
    if not isinstance(value, int):
        raise StoreUnavailable(f"the blob service answered without a sequence number: {value!r}")
    return value
