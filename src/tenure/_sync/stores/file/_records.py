# GENERATED from src/tenure/_async/stores/file/_records.py by scripts/unasync.py: do not edit.
"""The records API of the file:// store: `<key>.record` files next to the lock files, holding
the name and the record as JSON. A record is written to a temporary file, flushed to disk and
renamed into place (readers never see a torn record), and only by a holder whose lock file is
not replaced.

Example::

    written = backend.write_record(grant, '{"last_run": 1700000000}')
"""

from __future__ import annotations

import contextlib
import json
import os

from tenure._sync.stores._protocol import RecordKeeper, record_bytes
from tenure._sync.stores.file._directory import LockDirectory
from tenure._sync.stores.file._handles import OPEN_FLAGS
from tenure._sync.stores.file._paths import RECORD_SUFFIX, temporary_beside
from tenure._names import safe_key_prefix
from tenure._types import Grant


class FileRecords(LockDirectory, RecordKeeper):
    """Records kept as files next to the lock files, fenced by the lease's flock.

    Example::

        record = backend.read_record("nightly-report")
    """

    def read_record(self, name: str) -> str | None:
        self._refuse_if_closed("reading the record", name)
        try:
            stored = _read_record_file(self._paths.record(name))
        except OSError as exc:
            raise self._failure("reading the record", name, exc) from exc
        return stored[1] if stored is not None and stored[0] == name else None

    def write_record(self, grant: Grant, record: str) -> bool:
        self._refuse_if_closed("writing the record", grant.name)
        record_bytes(record)
        lock_file = self._held.get(grant.lease_id)
        path = self._paths.record(grant.name)
        temporary = temporary_beside(path)
        data = json.dumps({"name": grant.name, "record": record}).encode("ascii")
        try:
            if lock_file is None or lock_file.replaced:
                return False
            fd = self._open(temporary, OPEN_FLAGS | os.O_EXCL)
            try:
                os.write(fd, data)
                os.fsync(fd)  # renamed before its data is on disk, a crash could leave it empty
            finally:
                self._close(fd)
            # Checked again right before the rename: a break_lease since the first check (the
            # only way to lose a flock we hold) stops the write here, not after it.
            if lock_file.replaced or self._held.get(grant.lease_id) is not lock_file:
                os.unlink(temporary)
                return False
            os.replace(temporary, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise self._failure("writing the record", grant.name, exc) from exc
        return True

    def records(self, prefix: str = "") -> dict[str, str]:
        self._refuse_if_closed("listing the records", prefix)
        start = safe_key_prefix(prefix)
        found: dict[str, str] = {}
        try:
            for entry in os.scandir(self.directory):
                if entry.name.startswith(start) and entry.name.endswith(RECORD_SUFFIX):
                    stored = _read_record_file(entry.path)
                    if stored is not None and stored[0].startswith(prefix):
                        found[stored[0]] = stored[1]
        except FileNotFoundError:  # the directory, removed since connect(): nothing there
            return {}
        except OSError as exc:
            raise self._failure("listing the records", prefix, exc) from exc
        return dict(sorted(found.items()))


def _read_record_file(path: str) -> tuple[str, str] | None:
    """(name, record) kept in the record file at `path`; None when there is none."""
    try:
        with open(path, "rb") as handle:
            stored = json.loads(handle.read())
    except FileNotFoundError:
        return None
    except ValueError:  # not ours, or left empty by a crash of the host on an unsafe mount
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("name"), str) or (
            not isinstance(stored.get("record"), str)):
        return None
    return stored["name"], stored["record"]
