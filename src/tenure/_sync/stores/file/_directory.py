# GENERATED from src/tenure/_async/stores/file/_directory.py by scripts/unasync.py: do not edit.
"""The directory of a file:// store: made (or found) when the store is built, where each name's
files are, and what every error there names.

Example::

    class Store(LockDirectory):
        def path_of(self, name: str) -> str:
            return self._paths.lock(name, 0, 1)
"""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path

from tenure import _forks
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.file import _layout
from tenure._sync.stores.file._failures import file_failure
from tenure._sync.stores.file._handles import FLOCK_AVAILABLE, OpenFiles
from tenure._sync.stores.file._paths import LockPaths
from tenure._errors import MissingExtra, StoreUnavailable
from tenure._urls import local_url

_CACHED_TAILS = 4096


class LockDirectory(OpenFiles):
    """A directory of lock files and its open files: what the lease operations and the records
    of a file:// store share.

    Example::

        directory = LockDirectory("/var/lib/app/locks")  # created when missing
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not FLOCK_AVAILABLE:  # pragma: no cover - Windows
            raise MissingExtra("the file:// store needs flock (Linux or macOS); use sqlite://")
        given = os.fspath(directory)
        self.url = local_url("file", given)  # as given: `tenure run` compares it with its URL
        # Resolved once, so that a later chdir does not move the locks of a relative path.
        self.directory = Path(os.path.abspath(given))
        # What every error names: the URL, and the directory it means when it is relative.
        self._where = self.url if os.path.isabs(given) else (
            f"{self.url} (directory {self.directory})")
        self._closed = False
        self._paths = LockPaths(self.directory)
        self._tails: dict[tuple[str, str], bytes] = {}
        self._ids = itertools.count()
        self._forget_open_files()
        try:
            if self.directory.exists() and not self.directory.is_dir():
                # mkdir would say "File exists", which reads as if all were well
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                         str(self.directory))
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._failure("creating the lock directory", str(self.directory), exc) from exc
        _forks.in_child_after_fork(self, LockDirectory._start_afresh)

    def _tail(self, name: str, holder: str) -> bytes:
        """The record after the replaced flag (lengths, holder, name), cached."""
        tail = self._tails.get((name, holder))
        if tail is None:
            tail = _layout.tail(name, holder)
            if len(self._tails) < _CACHED_TAILS:
                self._tails[(name, holder)] = tail
        return tail

    def _failure(self, operation: str, name: str, exc: OSError) -> StoreUnavailable:
        """One clear error for a file system failure (see file_failure)."""
        return file_failure(self._where, self.directory, operation, name, exc,
                            held=len(self._held), idle=self._idle_count)

    def _refuse_if_closed(self, operation: str, name: str) -> None:
        if self._closed:
            raise closed_store(self._where, operation, name)
