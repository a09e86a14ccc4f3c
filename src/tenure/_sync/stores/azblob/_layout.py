# GENERATED from src/tenure/_async/stores/azblob/_layout.py by scripts/unasync.py: do not edit.
"""Where a name's blobs are and what they keep: the blob names of a name's lock, slots and
counter, the metadata that says whose they are, the record kept in a lock blob's pages, and a
listed blob read back as a lease.

Every name has its own virtual directory `tenure/<readable prefix>-<digest>/` (see
tenure._names.safe_key), so any name maps to a legal blob name and distinct names never share
one. Metadata is ASCII, so text in it is base64 (`encode`).

Example:
    >>> blob_name("jobs", 0, 1)[-5:], decode(encode("名前"))
    ('/lock', '名前')
"""

from __future__ import annotations

import base64
import binascii
import struct
from datetime import datetime, timezone

from tenure._sync.stores._protocol import MAX_RECORD_BYTES
from tenure._names import safe_key, safe_key_prefix
from tenure._types import LeaseInfo

ROOT = "tenure/"
# The metadata of a lock or slot blob: the name it is for, who holds it, with which token, since.
NAME, HOLDER, TOKEN, ACQUIRED = "tenure_name", "tenure_holder", "tenure_token", "tenure_at"
_UNKNOWN_HOLDER = "?"
# The blob that keeps a record moved out of a pruned lock blob (never leased, never pruned).
RECORD = "record"
# A record in the lock blob's pages: magic, length of the UTF-8 that follows; page-aligned.
_RECORD_HEADER = struct.Struct(">4sI")
_RECORD_MAGIC = b"TNR1"
_PAGE = 512
RECORD_BLOB_SIZE = -(-(_RECORD_HEADER.size + MAX_RECORD_BYTES) // _PAGE) * _PAGE


def encode(text: str) -> str:
    """A metadata-safe (ASCII) spelling of any text: URL-safe base64 of its UTF-8.

    Example:
        >>> decode(encode("名前/ロック"))
        '名前/ロック'
    """
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def decode(value: str | None) -> str | None:
    """The text that `encode` spelled, or None when `value` is missing or not ours.

    Example:
        >>> decode("not base64!") is None
        True
    """
    if value is None:
        return None
    try:
        return base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None


def directory(name: str) -> str:
    """The virtual directory of `name`'s blobs; no other name's blobs are under it.

    Example:
        >>> directory("invoices/2026")[:28]
        'tenure/invoices_2026-50c0ace'
    """
    return f"{ROOT}{safe_key(name)}/"


def listing_prefix(prefix: str) -> str:
    """The blob-name prefix under which the blobs of every name starting with `prefix` are
    (and some others: a listing still checks each name).

    Example:
        >>> listing_prefix("")
        'tenure/'
    """
    return ROOT + safe_key_prefix(prefix)


def blob_name(name: str, slot: int, limit: int) -> str:
    """The blob that holds slot `slot` of `name` (a lock when limit is 1).

    Example:
        >>> blob_name("jobs", 2, 3).endswith("/slot-2"), blob_name("jobs", 0, 1).endswith("/lock")
        (True, True)
    """
    return directory(name) + ("lock" if limit == 1 else f"slot-{slot}")


def record_blob_name(name: str) -> str:
    """The blob that keeps `name`'s record once its lock blob was pruned (see _pruning.py).

    Example:
        >>> record_blob_name("jobs").endswith("/record")
        True
    """
    return directory(name) + RECORD


def holder_metadata(name: str, holder: str, token: int) -> dict[str, str]:
    """The metadata that says who holds a blob of `name`, under which token, since when.

    Example:
        >>> sorted(holder_metadata("jobs", "me", 7))
        ['tenure_at', 'tenure_holder', 'tenure_name', 'tenure_token']
    """
    return {NAME: encode(name), HOLDER: encode(holder), TOKEN: str(token),
            ACQUIRED: datetime.now(timezone.utc).isoformat(timespec="seconds")}


def record_pages(record: bytes) -> bytes:
    """The pages that keep `record` (UTF-8) in a lock blob: header, record, zero padding.

    Example:
        >>> len(record_pages(b"{}")), parse_record(record_pages(b"{}"))
        (512, '{}')
    """
    data = _RECORD_HEADER.pack(_RECORD_MAGIC, len(record)) + record
    return data + bytes(-len(data) % _PAGE)


def parse_record(data: bytes) -> str | None:
    """The record kept in a lock blob's content, or None when it holds none.

    Example:
        >>> parse_record(b"") is None
        True
    """
    if len(data) < _RECORD_HEADER.size:
        return None
    magic, length = _RECORD_HEADER.unpack_from(data)
    end = _RECORD_HEADER.size + length
    if magic != _RECORD_MAGIC or len(data) < end:
        return None
    try:
        return data[_RECORD_HEADER.size:end].decode("utf-8")
    except UnicodeDecodeError:
        return None


def lease_info(blob: str, state: str | None, metadata: dict[str, str] | None,
               sequence_number: int | None) -> LeaseInfo | None:
    """A listed blob as a live lease; None for free blobs, counters and foreign blobs.

    Example:
        >>> lease_info("tenure/jobs-0/counter", "leased", {}, 7) is None
        True
    """
    kind = blob.rsplit("/", 1)[-1]
    metadata = metadata or {}
    if sequence_number is None and metadata.get(TOKEN, "").isdigit():
        sequence_number = int(metadata[TOKEN])  # a block blob: its counter is in metadata
    if state != "leased" or sequence_number is None or not (
            kind == "lock" or kind.startswith("slot-")):
        return None
    name = decode(metadata.get(NAME))
    if name is None:
        return None
    holder = decode(metadata.get(HOLDER)) if metadata.get(TOKEN) == str(sequence_number) else None
    slot = 0 if kind == "lock" else int(kind[len("slot-"):])
    return LeaseInfo(name, holder or _UNKNOWN_HOLDER, sequence_number, None, slot)
