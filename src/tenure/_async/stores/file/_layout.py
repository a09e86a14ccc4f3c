"""The layout of a lock file (and of a semaphore's `.sem` counter file): the name's fencing
counter, the boot id it was written under, a replaced flag, the holder and the name, at fixed
offsets, so that a lock attempt reads one short head and an acquire writes around the flag.

Example::

    token, same_boot, replaced, holder, name = parse(lock_file.read())
"""

from __future__ import annotations

import struct

from tenure._hostclock import BOOT_ID
from tenure._names import name_digest

MAGIC = b"TNR2"
# The magic while a prune is forgetting the file: the file is free or about to be, so a try
# that finds it locked tries again shortly rather than report the name busy (_forgetting.py).
PRUNING = b"TNRP"
# magic, token, boot digest, replaced flag, holder length, name length; then holder and name
HEADER = struct.Struct(">4sQ16sBHH")
COUNTER = struct.Struct(">4sQ16s")  # the header's prefix that acquiring needs
GRANT = struct.Struct(">Q16s")  # what a grant writes after the magic: token, boot digest
GRANT_AT = 4
REPLACED_AT = 28
HEAD_SIZE = REPLACED_AT + 1  # the counter and the replaced flag: what a lock attempt reads
REPLACED = b"\x01"
_LENGTHS = struct.Struct(">HH")  # holder length, name length: right after the replaced flag
BOOT = bytes.fromhex(name_digest(BOOT_ID))
FILE_SIZE = 8192  # header + 256-char holder + 1,024-char name in UTF-8, with room to spare


def parse(data: bytes) -> tuple[int | None, bool, bool, str, str]:
    """(token, written in this boot, replaced, holder, name) of a record; token None if empty.

    Example:
        >>> parse(record(7, b"me", b"job"))
        (7, True, False, 'me', 'job')
    """
    if len(data) < HEADER.size or data[:4] not in (MAGIC, PRUNING):
        return None, True, False, "", ""
    _, token, boot, replaced, holder_length, name_length = HEADER.unpack_from(data)
    start = HEADER.size
    holder = bytes(data[start:start + holder_length]).decode("utf-8", "replace")
    name = bytes(data[start + holder_length:start + holder_length + name_length]).decode(
        "utf-8", "replace")
    return token, boot == BOOT, bool(replaced), holder, name


def record(token: int, holder: bytes, name: bytes, boot: bytes = BOOT) -> bytes:
    """A whole record, not replaced, written in boot `boot` (this one unless given).

    Example:
        >>> len(record(7, b"", b"job")) == HEADER.size + 3
        True
    """
    return HEADER.pack(MAGIC, token, boot, 0, len(holder), len(name)) + holder + name


def tail(name: str, holder: str) -> bytes:
    """The record after the replaced flag: the lengths, the holder and the name.

    Example:
        >>> tail("job", "me")
        b'\\x00\\x02\\x00\\x03mejob'
    """
    holder_bytes, name_bytes = holder.encode("utf-8"), name.encode("utf-8")
    return _LENGTHS.pack(len(holder_bytes), len(name_bytes)) + holder_bytes + name_bytes
