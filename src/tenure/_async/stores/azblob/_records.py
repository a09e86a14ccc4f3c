"""The records of an azblob store (the records API of tenure.jobs): a small record per name,
kept in the pages of the name's lock blob.

A record is written with one Put Page under the grant's lease, so only a live holder can write
it (the first record of a name also grows the blob from 0 to RECORD_BLOB_SIZE bytes). Metadata
is not used for records: it is limited to 8 KiB in all, base64 would cut that to 6 KiB, and the
holder's description rewrites it. Records need a lock: a semaphore of several slots has no blob
that one lease guards for the name.

When a name is pruned (see _pruning.py), the record in its lock blob moves to the name's
`record` blob (a block blob of the UTF-8, with the token of the lock blob it came from in its
metadata), which is never pruned: reading a name looks at the lock blob first (a record there
is always the newer one: the record blob only keeps what an earlier, pruned lock blob kept),
then at the record blob.

Example::

    records = Records(container, leases)
    written = await records.write(grant, '{"done": "2026-11-23"}')
"""

from __future__ import annotations

from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError

from tenure._async import _shim
from tenure._async.stores._failures import failure
from tenure._async.stores._protocol import record_bytes
from tenure._async.stores.azblob._container import Container
from tenure._async.stores.azblob._failures import code, container_missing, status
from tenure._async.stores.azblob._layout import (
    NAME,
    RECORD,
    RECORD_BLOB_SIZE,
    TOKEN,
    blob_name,
    decode,
    listing_prefix,
    parse_record,
    record_blob_name,
    record_pages,
)
from tenure._async.stores.azblob._leases import Leases
from tenure._errors import InvalidArgument
from tenure._types import Grant


class Records:
    """The records of one store's container (see the module docstring).

    Example::

        record = await Records(container, leases).read("nightly")
    """

    def __init__(self, container: Container, leases: Leases) -> None:
        self._container = container
        self._leases = leases

    async def read(self, name: str) -> str | None:
        """The record of `name`, or None when it has none.

        Example::

            record = await records.read("nightly")
        """
        self._container.refuse_if_closed("reading the record", name)
        with self._container.bounded("reading the record", name):
            found = await self._read_blob(blob_name(name, 0, 1), name)
            if found is None:  # none in the lock blob: one kept when it was pruned, if any
                found = await self._read_blob(record_blob_name(name), name)
            return found

    async def _read_blob(self, key: str, name: str) -> str | None:
        """The record in the lock blob or the record blob `key`; None when it keeps none."""
        try:
            download = await self._container.blob(key).download_blob()
            data = await download.readall()
        except HttpResponseError as exc:
            if status(exc) == 404:  # no blob, or no container: never recorded
                return None
            raise self._container.failure("reading the record", name, exc) from None
        except AzureError as exc:
            raise self._container.failure("reading the record", name, exc) from None
        if key.endswith("/" + RECORD):
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return parse_record(data)

    async def write(self, grant: Grant, record: str) -> bool:
        """Keep `record` for `grant`'s name while its lease is live; False when it is not.

        Example::

            written = await records.write(grant, '{"done": "2026-11-23"}')
        """
        self._container.refuse_if_closed("writing the record", grant.name)
        pages = record_pages(record_bytes(record))
        if not grant.key.endswith("/lock"):
            raise InvalidArgument(
                f"write_record needs a lock's grant on azblob:// stores, and {grant.name!r} is "
                "held as a semaphore slot: a record is kept in the pages of the lock blob, "
                "under its lease; keep records under a lock (limit=1)"
            )
        if self._leases.released(grant.lease_id):
            return False
        with self._container.bounded("writing the record", grant.name):
            return await self._write(grant, pages)

    async def _write(self, grant: Grant, pages: bytes) -> bool:
        blob = self._container.blob(grant.key)
        try:
            try:
                await blob.upload_page(pages, offset=0, length=len(pages), lease=grant.lease_id)
            except HttpResponseError as exc:
                if status(exc) != 416:  # 416: the blob is still 0 bytes, never recorded
                    raise
                await blob.resize_blob(RECORD_BLOB_SIZE, lease=grant.lease_id)
                await blob.upload_page(pages, offset=0, length=len(pages), lease=grant.lease_id)
        except HttpResponseError as exc:
            if status(exc) in (404, 412):  # lease released, expired, broken or taken; blob gone
                return False
            if code(exc) == "InvalidBlobType":
                raise failure(
                    self._container.url, "writing the record", grant.name,
                    "delete it (tenure creates it again as a page blob)",
                    f"the blob {grant.key!r} is not a page blob, so it cannot keep a record",
                ) from None
            raise self._container.failure("writing the record", grant.name, exc) from None
        except AzureError as exc:
            raise self._container.failure("writing the record", grant.name, exc) from None
        return True

    async def listing(self, prefix: str = "") -> dict[str, str]:
        """The records of the names that start with `prefix`, by name.

        Example::

            recorded = await records.listing("nightly/")
        """
        self._container.refuse_if_closed("listing the records", prefix)
        return await self._list(prefix)

    async def _list(self, prefix: str) -> dict[str, str]:
        # (blob, name) of the lock blobs that were recorded and of the record blobs, by page
        recorded: list[tuple[str, str]] = []
        token: str | None = None
        while True:
            try:
                blobs, token = await self._container.page(
                    listing_prefix(prefix), token, metadata=True,
                    operation="listing the records of")
            except AzureError as exc:
                if container_missing(exc):
                    return {}
                raise self._container.failure("listing the records of", prefix, exc) from None
            for blob in blobs:
                name = decode((blob.metadata or {}).get(NAME))
                if name is None or not name.startswith(prefix):
                    continue
                if (blob.name.endswith("/lock") and blob.size) or blob.name.endswith(
                        "/" + RECORD):
                    recorded.append((blob.name, name))
            if token is None:
                break
        # Record blobs first, so that a record in the lock blob (always the newer) wins.
        recorded.sort(key=lambda listed: (listed[1], not listed[0].endswith("/" + RECORD)))
        found = await _shim.run_all(self._read_listed, recorded) if recorded else []
        records: dict[str, str] = {}
        for (_, name), record in zip(recorded, found, strict=True):
            if record is not None:
                records[name] = record
        return records

    async def _read_listed(self, listed: tuple[str, str]) -> str | None:
        return await self._read_blob(*listed)


async def keep_record(container: Container, directory: str, metadata: dict[str, str],
                      record: str, token: int) -> None:
    """Keep `record`, moved out of the lock blob of `directory` (whose `metadata` names the
    name) that gave tokens up to `token`, in the name's record blob, unless that keeps a record
    of a later lock blob (a larger token: another prune got there first). Compare-and-swap on
    the record blob's ETag; a 409/412 left after three tries is raised (the lock blob is then
    kept).

    Example::

        await keep_record(container, "tenure/jobs-0", metadata, '{"done": 1}', 1764612345000001)
    """
    blob = container.blob(f"{directory}/{RECORD}")
    kept = {NAME: metadata.get(NAME, ""), TOKEN: str(token)}
    data = record.encode("utf-8")
    for attempt in range(3):
        try:
            properties: Any = await blob.get_blob_properties()
        except HttpResponseError as exc:
            if status(exc) != 404:
                raise
            properties = None
        condition: dict[str, Any] = {"overwrite": False}  # If-None-Match: *
        if properties is not None:
            stored = (properties.metadata or {}).get(TOKEN, "")
            if stored.isdigit() and int(stored) > token:
                return
            condition = {"overwrite": True, "etag": properties.etag,
                         "match_condition": MatchConditions.IfNotModified}
        try:
            await blob.upload_blob(data, metadata=kept, **condition)
            return
        except HttpResponseError as exc:
            if status(exc) not in (409, 412) or attempt == 2:
                raise
