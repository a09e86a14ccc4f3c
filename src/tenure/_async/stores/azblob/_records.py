"""The records of an azblob store (the records API of tenure.jobs): a small record per name,
kept in the pages of the name's lock blob.

A record is written with one Put Page under the grant's lease, so only a live holder can write
it (the first record of a name also grows the blob from 0 to RECORD_BLOB_SIZE bytes). Metadata
is not used for records: it is limited to 8 KiB in all, base64 would cut that to 6 KiB, and the
holder's description rewrites it. Records need a lock: a semaphore of several slots has no blob
that one lease guards for the name.

Example::

    records = Records(container, leases)
    written = await records.write(grant, '{"done": "2026-11-23"}')
"""

from __future__ import annotations

from azure.core.exceptions import AzureError, HttpResponseError

from tenure._async import _shim
from tenure._async.stores._failures import failure
from tenure._async.stores._protocol import record_bytes
from tenure._async.stores.azblob._container import Container
from tenure._async.stores.azblob._failures import code, container_missing, status
from tenure._async.stores.azblob._layout import (
    NAME,
    RECORD_BLOB_SIZE,
    blob_name,
    decode,
    listing_prefix,
    parse_record,
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
            return await self._read_blob(blob_name(name, 0, 1), name)

    async def _read_blob(self, key: str, name: str) -> str | None:
        try:
            download = await self._container.blob(key).download_blob()
            data = await download.readall()
        except HttpResponseError as exc:
            if status(exc) == 404:  # no blob, or no container: never recorded
                return None
            raise self._container.failure("reading the record", name, exc) from None
        except AzureError as exc:
            raise self._container.failure("reading the record", name, exc) from None
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
        with self._container.bounded("listing the records of", prefix):
            return await self._list(prefix)

    async def _list(self, prefix: str) -> dict[str, str]:
        recorded: list[tuple[str, str]] = []  # (blob, name) of lock blobs that were recorded
        try:
            async for blob in self._container.client.list_blobs(
                    name_starts_with=listing_prefix(prefix), include=["metadata"]):
                name = decode((blob.metadata or {}).get(NAME))
                if (blob.name.endswith("/lock") and blob.size and name is not None
                        and name.startswith(prefix)):
                    recorded.append((blob.name, name))
        except AzureError as exc:
            if container_missing(exc):
                return {}
            raise self._container.failure("listing the records of", prefix, exc) from None
        recorded.sort(key=lambda listed: listed[1])
        found = await _shim.run_all(self._read_listed, recorded) if recorded else []
        return {name: record for (_, name), record in zip(recorded, found, strict=True)
                if record is not None}

    async def _read_listed(self, listed: tuple[str, str]) -> str | None:
        return await self._read_blob(*listed)
