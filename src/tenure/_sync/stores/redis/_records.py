# GENERATED from src/tenure/_async/stores/redis/_records.py by scripts/unasync.py: do not edit.
"""The records of a Redis store: a small record per name, next to its lease, written in one
script only while the writer's lease is live (the records API of tenure.jobs), with the
versioned reads and undoable writes the quorum store counts answers with.

Example::

    records = Records(store)
    written = records.write(grant, '{"done": "2026-11-23"}')
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tenure._sync.stores._protocol import record_bytes
from tenure._sync.stores.redis._scripts import SCRIPTS, evalsha, glob_escape, packed
from tenure._names import safe_key_prefix
from tenure._types import Grant

if TYPE_CHECKING:
    from tenure._sync.stores.redis._single import RedisStore

from redis.exceptions import RedisError

Version = tuple[int, int]  # the writer's token, then its write count under that lease


class Records:
    """The records of one store (see the module docstring).

    Example::

        version, record = Records(store).read("nightly") or ((0, 0), "")
    """

    def __init__(self, store: RedisStore) -> None:
        self._store = store

    def _key(self, name: str) -> bytes:
        return f"{self._store._keys(name).base}record".encode()

    def read(self, name: str) -> tuple[Version, str] | None:
        """The record of `name` with its version, or None.

        Example::

            version, record = records.read("nightly")
        """
        try:
            value = self._store._connections.call(packed(b"GET", self._key(name)))
        except (RedisError, OSError) as exc:
            raise self._store._connections.failure("reading the record", name, exc) from exc
        parsed = _record_entry(value)
        return None if parsed is None else parsed[1:]

    def write(self, grant: Grant, record: str, version: Version) -> bool:
        """Replace the record of `grant.name`, in one script, only while `grant` is live.

        Example::

            written = records.write(grant, "2026-11-23", (grant.token, 0))
        """
        record_bytes(record)
        value = json.dumps([grant.name, *version, record], ensure_ascii=False)
        command = evalsha(SCRIPTS.write_record, [grant.key.encode(), self._key(grant.name)],
                          self._store._value(grant), value.encode())
        try:
            return bool(self._store._connections.eval(SCRIPTS.write_record, command))
        except (RedisError, OSError) as exc:
            raise self._store._connections.failure("writing the record", grant.name,
                                                   exc) from exc

    def swap(self, grant: Grant, record: str, version: Version) -> bytes | None:
        """`write`, returning what `undo` needs to take the write back (None: not written,
        the lease is gone).

        Example::

            undo = records.swap(grant, "2026-11-23", (42, 0))
        """
        record_bytes(record)
        value = json.dumps([grant.name, *version, record], ensure_ascii=False).encode()
        command = evalsha(SCRIPTS.swap_record, [grant.key.encode(), self._key(grant.name)],
                          self._store._value(grant), value)
        try:
            previous = self._store._connections.eval(SCRIPTS.swap_record, command)
        except (RedisError, OSError) as exc:
            raise self._store._connections.failure("writing the record", grant.name,
                                                   exc) from exc
        return None if previous is None else value + b"\n" + previous

    def undo(self, name: str, undo: bytes) -> None:
        """Put back the record a `swap` replaced, unless written since.

        Example::

            records.undo("nightly", undo)
        """
        written, _, previous = undo.partition(b"\n")
        command = evalsha(SCRIPTS.undo_record, [self._key(name)], written, previous)
        try:
            self._store._connections.eval(SCRIPTS.undo_record, command)
        except (RedisError, OSError) as exc:
            raise self._store._connections.failure("undoing a record write", name,
                                                   exc) from exc

    def all(self, prefix: str = "") -> dict[str, tuple[Version, str]]:
        """Every record whose name starts with `prefix`, with its version, by name.

        Example::

            found = records.all("jobs/")
        """
        store = self._store
        pattern = f"{glob_escape(store.prefix)}{{{safe_key_prefix(prefix)}*}}:record"
        found: dict[str, tuple[Version, str]] = {}
        try:
            for chunk in store._scan(pattern):
                for value in store._connections.call(packed(b"MGET", *chunk)):
                    entry = _record_entry(value)
                    if entry is not None and entry[0].startswith(prefix):
                        found[entry[0]] = entry[1:]
        except (RedisError, OSError) as exc:
            raise store._connections.failure("listing the records", prefix, exc) from exc
        return found


def _record_entry(value: bytes | None) -> tuple[str, Version, str] | None:
    """Name, version and record of a record key's value; None when absent or not tenure's."""
    if value is None:
        return None
    try:
        name, token, seq, record = json.loads(value)
    except (ValueError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(record, str):
        return None
    return name, (int(token), int(seq)), record
