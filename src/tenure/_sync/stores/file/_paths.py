# GENERATED from src/tenure/_async/stores/file/_paths.py by scripts/unasync.py: do not edit.
"""Where the files of a lock name are in the store's directory: a readable prefix of the name
plus a 128-bit digest of it (see tenure._names.safe_key), so no name can lead outside the
directory. A lock's file is `<key>.lock`, a semaphore's slots `<key>.<slot>.slot` with its
counter in `<key>.sem`, breaks of a name take turns on `<key>.break`, and its record is
`<key>.record`.

Example::

    paths = LockPaths(Path("/var/lib/app/locks"))
    paths.lock("job", 0, 1)  # '/var/lib/app/locks/job.<digest>.lock'
"""

from __future__ import annotations

import secrets
from pathlib import Path

from tenure._names import safe_key

RECORD_SUFFIX = ".record"
_CACHED = 4096  # paths (and tails) kept per store: the names a process uses are few


class LockPaths:
    """The paths of each name's files in one directory; lock paths are cached.

    Example::

        LockPaths(Path("/tmp/locks")).counter("pool")  # '/tmp/locks/pool.<digest>.sem'
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._locks: dict[tuple[str, int, int], str] = {}

    def lock(self, name: str, slot: int, limit: int) -> str:
        """The lock file of `name`'s slot `slot` (limit 1: the lock's one file)."""
        path = self._locks.get((name, slot, limit))
        if path is None:
            stem = str(self.directory / safe_key(name))
            path = f"{stem}.lock" if limit == 1 else f"{stem}.{slot}.slot"
            if len(self._locks) < _CACHED:
                self._locks[(name, slot, limit)] = path
        return path

    def lock_files(self, name: str) -> list[Path]:
        """Every lock file `name` may have: the lock's, and the slots found of a semaphore."""
        stem = safe_key(name)
        return [self.directory / f"{stem}.lock", *self.directory.glob(f"{stem}.*.slot")]

    def counter(self, name: str) -> str:
        """The file that keeps a semaphore's fencing counter."""
        return str(self.directory / f"{safe_key(name)}.sem")

    def break_guard(self, name: str) -> str:
        """The file whose flock breaks of `name` take turns on."""
        return str(self.directory / f"{safe_key(name)}.break")

    def break_guard_of(self, lock_file: str) -> str:
        """The break guard of the name whose lock or counter file is at `lock_file`."""
        return f"{lock_file.rsplit('.', 1)[0]}.break"

    def record(self, name: str) -> str:
        """The file of `name`'s record."""
        return str(self.directory / f"{safe_key(name)}{RECORD_SUFFIX}")


def slot_of(file_name: str) -> int | None:
    """The slot a lock file's name stands for; None when it is no lock file.

    Example:
        >>> slot_of("job.0123.lock"), slot_of("pool.0123.2.slot"), slot_of("job.0123.record")
        (0, 2, None)
    """
    if file_name.endswith(".lock"):
        return 0
    if file_name.endswith(".slot"):
        return int(file_name.rsplit(".", 2)[1])
    return None


def temporary_beside(path: str) -> str:
    """A new name for a file that is then renamed to `path` (same directory: rename is atomic).

    Example::

        temporary_beside("/tmp/locks/job.lock")  # '/tmp/locks/job.lock.3f2a9c01b7e4.tmp'
    """
    return f"{path}.{secrets.token_hex(6)}.tmp"
