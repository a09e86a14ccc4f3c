# GENERATED from src/tenure/_async/stores/file/_handles.py by scripts/unasync.py: do not edit.
"""The OS side of the file:// store: flock on open lock files, read and written at fixed
offsets (through a shared memory mapping on Python 3.13+, with pread and pwrite before), and
the store's open files: kept open between tries (parked) up to a bound, closed first when the
process runs out of descriptors, and closed in a forked child (flock belongs to the open file
description, which a child shares with its parent).

Example::

    class Store(OpenFiles):
        def held(self, path: str) -> bool:
            locked = self._lock(path)
            return locked is not None
"""

from __future__ import annotations

import contextlib
import enum
import errno
import mmap
import os
import secrets
import sys
import threading
from collections.abc import Generator

from tenure._sync.stores.file._layout import (
    FILE_SIZE,
    HEAD_SIZE,
    PRUNING,
    REPLACED,
    REPLACED_AT,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

FLOCK_AVAILABLE = fcntl is not None  # not on Windows
OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
MAX_IDLE_FILES = 256


class Locked(enum.Enum):
    """What a try met other than a lock of its own or a holder: FORGETTING, a prune holding the
    file for the microseconds it takes to forget it (try again shortly, see _forgetting.py).
    """

    FORGETTING = "forgetting"
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


class _LockFile:
    """An open lock file: the one descriptor that holds its flock, through which its record is
    read and written at fixed offsets (pread, pwrite: see _MappedLockFile for the faster kind).

    Closing the descriptor also unlocks the file (flock belongs to the open file description,
    and no other descriptor shares it). It stays in `opened` (its store's set of open lock
    files) until closed, so that a forked child can close its copy (OpenFiles._start_afresh).
    """

    __slots__ = ("fd", "opened", "path", "written")

    def __init__(self, path: str, fd: int, opened: set[_LockFile]) -> None:
        self.path, self.fd, self.opened = path, fd, opened
        self.written: tuple[int, bytes] = (-1, b"")  # the token and record tail we last wrote
        opened.add(self)

    def read(self, size: int = FILE_SIZE) -> bytes:
        """The first `size` bytes of the file (fewer while it is new)."""
        return os.pread(self.fd, size, 0)

    def write(self, data: bytes, offset: int) -> None:
        os.pwrite(self.fd, data, offset)

    @property
    def replaced(self) -> bool:
        """break_lease marked this file as being replaced: its lock no longer counts."""
        return os.pread(self.fd, 1, REPLACED_AT) == REPLACED

    def mark_replaced(self) -> None:
        self.write(REPLACED, REPLACED_AT)

    def close(self) -> None:
        self.opened.discard(self)
        os.close(self.fd)


class _MappedLockFile(_LockFile):
    """A lock file read and written through a shared memory mapping: no system call per read
    or write, still one descriptor on Python 3.13+, whose mmap can leave the descriptor alone
    (trackfd=False). Before, mmap keeps a duplicate of it: two open files per held lease, half
    the leases a process can hold under its limit, so older Pythons use the plain _LockFile.
    """

    __slots__ = ("map",)

    def __init__(self, path: str, fd: int, opened: set[_LockFile]) -> None:
        try:
            if os.fstat(fd).st_size < FILE_SIZE:  # mapped past its end, a file faults
                os.ftruncate(fd, FILE_SIZE)  # idempotent when two openers race
            self.map = mmap.mmap(fd, FILE_SIZE, **_MMAP_OPTIONS)
        except BaseException:
            os.close(fd)
            raise
        super().__init__(path, fd, opened)

    def read(self, size: int = FILE_SIZE) -> bytes:
        return self.map[:size]

    def write(self, data: bytes, offset: int) -> None:
        self.map[offset:offset + len(data)] = data

    @property
    def replaced(self) -> bool:
        return self.map[REPLACED_AT] == REPLACED[0]

    def close(self) -> None:
        try:
            self.map.close()
        finally:
            super().close()


_MMAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}
_LOCK_FILE: type[_LockFile] = _MappedLockFile if _MMAP_OPTIONS else _LockFile


def try_flock(fd: int, shared: bool = False) -> bool:
    """Lock the open file description of `fd` exclusively (or `shared`); False when someone
    else holds it (exclusively, for a shared lock).

    Example::

        if try_flock(fd): ...  # ours until unlocked or closed
    """
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def probe_free(fd: int) -> bool:
    """True when nobody holds the file's lock (a shared lock can be taken and is dropped).

    Example::

        if probe_free(fd): ...  # nobody holds it: not listed, not broken
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    unlock(fd)
    return True


def lock_exclusive(fd: int) -> None:
    """Lock the open file description of `fd` exclusively, waiting for it as long as it takes.

    Example::

        lock_exclusive(fd)  # a counter file: held for one read and one write
    """
    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    """Let go of the flock of `fd`'s open file description; the file stays open.

    Example::

        unlock(lock_file.fd)
    """
    fcntl.flock(fd, fcntl.LOCK_UN)


class OpenFiles:
    """The open files of a store: lock files (idle, held or in use) and the others (counters,
    break guards, probes), all closed by a forked child.

    Example::

        class Store(OpenFiles):
            def __init__(self) -> None:
                self._forget_open_files()
    """

    def _forget_open_files(self) -> None:
        self._opened: set[_LockFile] = set()  # every open lock file: idle, held or in use
        # A sweep's place in the directory (_forgetting.py); a forked child drops its copy
        self._sweep_entries: Generator[os.DirEntry[str], None, None] | None = None
        self._sweep_mutex = threading.Lock()
        self._fds: set[int] = set()  # the other open files: counters, break guards, probes
        self._idle: dict[str, list[_LockFile]] = {}
        self._idle_count = 0
        self._held: dict[str, _LockFile] = {}
        self._counter_mutex = threading.Lock()  # a parent's thread may have held it at the fork
        self._id_prefix = secrets.token_hex(6)

    def _start_afresh(self) -> None:
        """In a forked child: close the child's copies of the parent's open files, then forget them.

        A child shares its parent's open file descriptions, and flock belongs to the
        description: with them it could take (or free) a lock its parent holds. Closing a copy
        (descriptor and mapping) unlocks nothing while the parent keeps its own, so the
        parent's leases stay held, and the child opens files of its own when it needs them.
        """
        for lock_file in list(self._opened):
            with contextlib.suppress(OSError, BufferError):
                lock_file.close()
        for fd in list(self._fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._forget_open_files()

    def _open_descriptor(self, path: str, flags: int = OPEN_FLAGS) -> int:
        """os.open; out of descriptors, the files kept for reuse are closed and it tries again."""
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in OUT_OF_FILES or not self._close_idle_files():
                raise
        return os.open(path, flags, 0o644)

    def _open(self, path: str, flags: int = OPEN_FLAGS) -> int:
        fd = self._open_descriptor(path, flags)
        self._fds.add(fd)
        return fd

    def _open_lock_file(self, path: str) -> _LockFile:
        return _LOCK_FILE(path, self._open_descriptor(path), self._opened)

    def _close(self, fd: int) -> None:
        self._fds.discard(fd)
        os.close(fd)

    def _take(self, path: str) -> _LockFile:
        idle = self._idle.get(path)
        if idle:
            try:
                lock_file = idle.pop()
                self._idle_count -= 1
                return lock_file
            except IndexError:  # another thread took the last one
                pass
        return self._open_lock_file(path)

    def _park(self, lock_file: _LockFile) -> None:
        if self._idle_count >= MAX_IDLE_FILES:
            lock_file.close()
        else:
            self._idle.setdefault(lock_file.path, []).append(lock_file)
            self._idle_count += 1

    def _close_idle_files(self) -> bool:
        """Close every open file kept for reuse; False when there was none."""
        closed = False
        for files in list(self._idle.values()):
            while True:
                try:
                    lock_file = files.pop()
                except IndexError:
                    break
                self._idle_count -= 1
                lock_file.close()
                closed = True
        return closed

    def _lock(self, path: str) -> tuple[_LockFile, bytes] | Locked | None:
        """The file now at `path`, exclusively flocked by us, and its first HEAD_SIZE bytes
        read after locking it; None when someone holds it; Locked.FORGETTING when the one
        holding it is a prune (which frees it in microseconds), or when prunes forgot each
        file opened at the path before it was locked: try again.

        Each open file has its own open file description, so two holders in one process
        exclude each other too (flock is per description, not per process).
        """
        lock_file = self._take(path)
        forgotten = False
        for attempt in range(3):
            try:
                locked = try_flock(lock_file.fd)
                head = lock_file.read(HEAD_SIZE)
            except BaseException:
                lock_file.close()  # also unlocks it
                raise
            replaced = head[REPLACED_AT:] == REPLACED
            if not locked:
                if head[:4] == PRUNING:
                    lock_file.close()  # soon unlinked, or left in place: open it again then
                    return Locked.FORGETTING
                if not replaced:
                    self._park(lock_file)
                    return None
                # A parked file that break_lease has replaced since: its broken holder may
                # still hold it, while the file now at the path may be free.
                lock_file.close()
            elif not replaced:
                return lock_file, head
            else:
                # break_lease is replacing this file, or a prune forgot it (unlinked): let go
                # and lock the file now at the path
                forgotten = head[:4] == PRUNING
                unlock(lock_file.fd)
                lock_file.close()
            if attempt < 2:
                lock_file = self._open_lock_file(path)
        if forgotten:
            # Prunes forgot each file we opened before we locked it (one that prunes without
            # pause, on a loaded machine): the name is free, so try again, not report it held.
            return Locked.FORGETTING
        # Still marked: a break_lease is midway (one killed midway is finished by calling it
        # again). Report the lock as held rather than spin.
        return None

    def _close_all(self) -> None:
        """Close the files kept for reuse and those of the leases held (which frees them)."""
        idle, self._idle = self._idle, {}
        self._idle_count = 0
        held, self._held = self._held, {}
        for lock_file in [*held.values()] + [f for files in idle.values() for f in files]:
            lock_file.close()
