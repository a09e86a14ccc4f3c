# GENERATED from src/tenure/_async/stores/sqlite/_records.py by scripts/unasync.py: do not edit.
"""The records API of the sqlite:// store: a row of `tenure_records` per name, written by one
statement that takes effect only while the writer's lease row is live.

Example::

    written = backend.write_record(grant, '{"last_run": 1700000000}')
"""

from __future__ import annotations

import sqlite3

from tenure._sync import _shim
from tenure._sync.stores._protocol import RecordKeeper, record_bytes
from tenure._sync.stores.sqlite._connections import SQLiteConnections
from tenure._sync.stores.sqlite._sql import LIST_RECORDS, READ_RECORD, WRITE_RECORD, with_prefix
from tenure._hostclock import BOOT_ID, host_monotonic
from tenure._types import Grant


class SQLiteRecords(SQLiteConnections, RecordKeeper):
    """Records kept next to the leases, fenced by them.

    Example::

        record = backend.read_record("nightly-report")
    """

    def read_record(self, name: str) -> str | None:
        record: str | None = _shim.offload(self._read_record_now, name)
        return record

    def _read_record_now(self, name: str) -> str | None:
        try:
            rows = self._query(READ_RECORD, (name,))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("reading the record", name, exc) from exc
        return str(rows[0][0]) if rows else None

    def write_record(self, grant: Grant, record: str) -> bool:
        record_bytes(record)
        written: bool = _shim.offload(self._on_connection, "writing the record",
                                            grant.name, _write_record_in, grant, record)
        return written

    def records(self, prefix: str = "") -> dict[str, str]:
        found: dict[str, str] = _shim.offload(self._records_now, prefix)
        return found

    def _records_now(self, prefix: str) -> dict[str, str]:
        try:
            rows = self._query(*with_prefix(LIST_RECORDS, (), prefix))
        except (sqlite3.Error, OSError) as exc:
            raise self._failure("listing the records", prefix, exc) from exc
        return {name: record for name, record in rows}


def _write_record_in(db: sqlite3.Connection, grant: Grant, record: str) -> bool:
    cursor = db.execute(WRITE_RECORD, (grant.name, record, grant.name, grant.slot,
                                       grant.lease_id, BOOT_ID, host_monotonic()))
    return bool(cursor.rowcount == 1)
