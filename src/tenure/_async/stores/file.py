"""`file:///path/to/dir`: one file per lock name, held with an OS advisory lock (flock).

The kernel frees the lock the moment its holder's process dies, so a crashed holder's lock is
free at once, without waiting for a ttl; ttl is accepted for a uniform API and paces the
holder's periodic check. Each lock file keeps the name's fencing counter, the boot id it was
written under, the holder and the name, at fixed offsets: through a shared memory mapping on
Python 3.13+ (no syscalls beyond the two flocks of a cycle), with pread and pwrite on the
descriptor before; files are never deleted by release.

File names are a readable prefix of the lock name plus a 128-bit digest of it (see
tenure._names.safe_key), so no name can lead outside the directory. `break_lease` marks the
held file as replaced and renames a fresh copy into its place: the old holder sees the mark at
its next check, and nobody can newly take the old file; the mark is never cleared. Breaks of a
name take turns on a `.break` file's flock. Semaphores keep one file per slot and their counter in
a `.sem` file; do not use one name both as a lock and as a semaphore.

Open files belong to the process that opened them: a forked child closes its copies of them
(flock belongs to the open file description, which a child shares with its parent) and opens
its own (tenure._forks).

Capacity: one open file per held lease, one per name a waiting acquire tries (kept open between
tries, at most 256 kept per store and closed first when the process runs out), and up to three
for the moment of a call in flight (a semaphore's counter update, a break, a listing). A process
out of descriptors (EMFILE, ENFILE) gets a StoreRefused naming its limit, the leases held and how
to raise it.

Records (`write_record`) are `<key>.record` files next to the lock file, holding the name and
the record as JSON. A record is written to a temporary file, flushed to disk and renamed into
place (readers never see a torn record), and only by a holder whose lock file is not replaced.

Local file systems only: flock over NFS is not reliable. Linux and macOS (no Windows).

Example::

    store = tenure.connect("file:///var/lib/app/locks")
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import mmap
import os
import secrets
import struct
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tenure import _forks
from tenure._async import _shim
from tenure._async.stores._failures import failure, refusal
from tenure._async.stores._options import only
from tenure._async.stores._protocol import (
    AsyncBackend,
    AsyncRecordKeeper,
    closed_store,
    record_bytes,
)
from tenure._errors import MissingExtra, StoreRefused, StoreUnavailable
from tenure._hostclock import BOOT_ID, wall_us
from tenure._names import name_digest, safe_key, safe_key_prefix
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import local_url, parse_store_url

try:
    import fcntl
    import resource
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
    resource = None  # type: ignore[assignment]

_MAGIC = b"TNR2"
# magic, token, boot digest, replaced flag, holder length, name length; then holder and name
_HEADER = struct.Struct(">4sQ16sBHH")
_COUNTER = struct.Struct(">4sQ16s")  # the header's prefix that acquiring needs
_REPLACED_AT = 28
_HEAD_SIZE = _REPLACED_AT + 1  # the counter and the replaced flag: what a lock attempt reads
_REPLACED = b"\x01"
_LENGTHS = struct.Struct(">HH")  # holder length, name length: right after the replaced flag
_BOOT = bytes.fromhex(name_digest(BOOT_ID))
_FILE_SIZE = 8192  # header + 256-char holder + 1,024-char name in UTF-8, with room to spare
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
_MAX_IDLE_FILES = 256
_RECORD_SUFFIX = ".record"
_BREAK_PATIENCE = 10.0  # seconds a break_lease waits for another break of the same name
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


SCHEMES: tuple[str, ...] = ("file",)


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store of a `file:///abs/dir` (or `file:relative/dir`) URL, as `tenure.aio.connect`
    builds it: it takes no options; the directory is created now.

    Example::

        backend = from_url("file:///var/lib/app/locks")
    """
    parsed = parse_store_url(url, SCHEMES)
    only({**parsed.options, **options}, store="file:// stores")
    return AsyncFileStore(parsed.location)


def _parse(data: bytes) -> tuple[int | None, bool, bool, str, str]:
    """(token, written in this boot, replaced, holder, name) of a record; token None if empty."""
    if len(data) < _HEADER.size or data[:4] != _MAGIC:
        return None, True, False, "", ""
    _, token, boot, replaced, holder_length, name_length = _HEADER.unpack_from(data)
    start = _HEADER.size
    holder = bytes(data[start:start + holder_length]).decode("utf-8", "replace")
    name = bytes(data[start + holder_length:start + holder_length + name_length]).decode(
        "utf-8", "replace")
    return token, boot == _BOOT, bool(replaced), holder, name


def _record(token: int, holder: bytes, name: bytes, boot: bytes = _BOOT) -> bytes:
    return _HEADER.pack(_MAGIC, token, boot, 0, len(holder), len(name)) + holder + name


class _LockFile:
    """An open lock file: the one descriptor that holds its flock, through which its record is
    read and written at fixed offsets (pread, pwrite: see _MappedLockFile for the faster kind).

    Closing the descriptor also unlocks the file (flock belongs to the open file description,
    and no other descriptor shares it). It stays in `opened` (its store's set of open lock
    files) until closed, so that a forked child can close its copy (AsyncFileStore._start_afresh).
    """

    __slots__ = ("fd", "opened", "path", "written")

    def __init__(self, path: str, fd: int, opened: set[_LockFile]) -> None:
        self.path, self.fd, self.opened = path, fd, opened
        self.written: tuple[int, bytes] = (-1, b"")  # the token and record tail we last wrote
        opened.add(self)

    def read(self, size: int = _FILE_SIZE) -> bytes:
        """The first `size` bytes of the file (fewer while it is new)."""
        return os.pread(self.fd, size, 0)

    def write(self, data: bytes, offset: int) -> None:
        os.pwrite(self.fd, data, offset)

    @property
    def replaced(self) -> bool:
        """break_lease marked this file as being replaced: its lock no longer counts."""
        return os.pread(self.fd, 1, _REPLACED_AT) == _REPLACED

    def mark_replaced(self) -> None:
        self.write(_REPLACED, _REPLACED_AT)

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
            if os.fstat(fd).st_size < _FILE_SIZE:  # mapped past its end, a file faults
                os.ftruncate(fd, _FILE_SIZE)  # idempotent when two openers race
            self.map = mmap.mmap(fd, _FILE_SIZE, **_MMAP_OPTIONS)
        except BaseException:
            os.close(fd)
            raise
        super().__init__(path, fd, opened)

    def read(self, size: int = _FILE_SIZE) -> bytes:
        return self.map[:size]

    def write(self, data: bytes, offset: int) -> None:
        self.map[offset:offset + len(data)] = data

    @property
    def replaced(self) -> bool:
        return self.map[_REPLACED_AT] == _REPLACED[0]

    def close(self) -> None:
        try:
            self.map.close()
        finally:
            super().close()


_MMAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}
_LOCK_FILE: type[_LockFile] = _MappedLockFile if _MMAP_OPTIONS else _LockFile


class AsyncFileStore(AsyncBackend, AsyncRecordKeeper):
    """Locks as files in one directory, held by the kernel.

    Example::

        backend = AsyncFileStore("/var/lib/app/locks")
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise MissingExtra("the file:// store needs flock (Linux or macOS); use sqlite://")
        given = os.fspath(directory)
        self.url = local_url("file", given)  # as given: `tenure run` compares it with its URL
        # Resolved once, so that a later chdir does not move the locks of a relative path.
        self.directory = Path(os.path.abspath(given))
        # What every error names: the URL, and the directory it means when it is relative.
        self._where = self.url if os.path.isabs(given) else (
            f"{self.url} (directory {self.directory})")
        self._closed = False
        self._paths: dict[tuple[str, int, int], str] = {}
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
        _forks.in_child_after_fork(self, AsyncFileStore._start_afresh)

    def _forget_open_files(self) -> None:
        self._opened: set[_LockFile] = set()  # every open lock file: idle, held or in use
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

    # -- paths and open files -----------------------------------------------------------------

    def _path(self, name: str, slot: int, limit: int) -> str:
        path = self._paths.get((name, slot, limit))
        if path is None:
            stem = str(self.directory / safe_key(name))
            path = f"{stem}.lock" if limit == 1 else f"{stem}.{slot}.slot"
            if len(self._paths) < 4096:
                self._paths[(name, slot, limit)] = path
        return path

    def _tail(self, name: str, holder: str) -> bytes:
        """The record after the replaced flag (lengths, holder, name), cached."""
        tail = self._tails.get((name, holder))
        if tail is None:
            holder_bytes, name_bytes = holder.encode("utf-8"), name.encode("utf-8")
            tail = _LENGTHS.pack(len(holder_bytes), len(name_bytes)) + holder_bytes + name_bytes
            if len(self._tails) < 4096:
                self._tails[(name, holder)] = tail
        return tail

    def _open_descriptor(self, path: str, flags: int = _OPEN_FLAGS) -> int:
        """os.open; out of descriptors, the files kept for reuse are closed and it tries again."""
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in _OUT_OF_FILES or not self._close_idle_files():
                raise
        return os.open(path, flags, 0o644)

    def _open(self, path: str, flags: int = _OPEN_FLAGS) -> int:
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
        if self._idle_count >= _MAX_IDLE_FILES:
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

    def _lock(self, path: str) -> tuple[_LockFile, bytes] | None:
        """The file now at `path`, exclusively flocked by us, and its first _HEAD_SIZE bytes
        read after locking it; None when someone holds it.

        Each open file has its own open file description, so two holders in one process
        exclude each other too (flock is per description, not per process).
        """
        lock_file = self._take(path)
        for attempt in range(3):
            try:
                locked = _try_flock(lock_file.fd)
                head = lock_file.read(_HEAD_SIZE)
            except BaseException:
                lock_file.close()  # also unlocks it
                raise
            replaced = head[_REPLACED_AT:] == _REPLACED
            if not locked:
                if not replaced:
                    self._park(lock_file)
                    return None
                # A parked file that break_lease has replaced since: its broken holder may
                # still hold it, while the file now at the path may be free.
                lock_file.close()
            elif not replaced:
                return lock_file, head
            else:
                # break_lease is replacing this file: let go and lock the file that replaces it
                fcntl.flock(lock_file.fd, fcntl.LOCK_UN)
                lock_file.close()
            if attempt < 2:
                lock_file = self._open_lock_file(path)
        # Still marked: a break_lease is midway (one killed midway is finished by calling it
        # again). Report the lock as held rather than spin.
        return None

    def _failure(self, operation: str, name: str, exc: OSError) -> StoreUnavailable:
        """One clear error for a file system failure: StoreRefused for what retrying cannot
        clear (see `_refusal` and `_out_of_files`), else StoreUnavailable (an I/O error, a full
        disk), which the core retries."""
        if exc.errno in _OUT_OF_FILES:
            return self._out_of_files(operation, name, exc)
        fix = self._refusal(exc)
        if fix is not None:
            return failure(self._where, operation, name, fix, exc.strerror or exc, refused=True)
        return failure(self._where, operation, name, "check that the directory exists, is "
                       "writable and is on a local file system", exc.strerror or exc)

    def _out_of_files(self, operation: str, name: str, exc: OSError) -> StoreRefused:
        """The process (EMFILE) or the system (ENFILE) has no descriptor left: what uses them,
        the limit and how to raise it.

        A StoreRefused although it may clear: the store has no outage, its host is configured
        for fewer open files than the application uses, and the descriptors are mostly this
        process's own leases, held for longer than a call waits. So `acquire(timeout)` says so
        at once instead of after its whole timeout as a LockTimeout, and a runner logs it at
        ERROR (not as an unreachable store), keeps retrying and recovers once files are freed.
        """
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        usage = (f"this store holds {len(self._held)} leases, one open file each, and keeps "
                 f"{self._idle_count} more open for reuse")
        if exc.errno == errno.ENFILE:
            return refusal(self._where, operation, name, f"{usage}; raise the system's limit "
                           "(sysctl fs.file-max on Linux, kern.maxfiles on macOS) or close files "
                           "in other processes", "the system's table of open files is full "
                           "(ENFILE)")
        suggested = max(65536, 4 * soft)
        if hard == resource.RLIM_INFINITY or hard > soft:
            allowed = suggested if hard == resource.RLIM_INFINITY else min(hard, suggested)
            in_process = (f", or resource.setrlimit(resource.RLIMIT_NOFILE, ({allowed}, hard)) "
                          "in it (up to the hard limit without privileges)")
        else:
            in_process = " (the hard limit too: as root, or in /etc/security/limits.conf)"
        return refusal(
            self._where, operation, name, f"raise the limit: `ulimit -n {suggested}` in the "
            f"shell that starts it or LimitNOFILE={suggested} in its systemd unit{in_process}; "
            "or hold fewer leases at once", f"too many open files in this process (EMFILE): "
            f"its limit is {_limit(soft)} (RLIMIT_NOFILE, hard limit {_limit(hard)}) and {usage}")

    def _refusal(self, exc: OSError) -> str | None:
        """What to fix when `exc` is permanent (None: transient). A busy lock is no error
        here: it is a lock held by another, reported as such."""
        where = str(self.directory)
        if isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES,
                                                              errno.EPERM):
            return (f"this user may not write in the lock directory {where!r}; fix its "
                    "permissions (or the mount), or point the URL elsewhere")
        if self.directory.exists() and not self.directory.is_dir():
            return (f"{where!r} is a file, not a directory; point the URL at a directory for "
                    "the lock files")
        if isinstance(exc, (NotADirectoryError, FileExistsError)) or not self.directory.is_dir():
            return (f"the lock directory {where!r} is missing or not a directory; recreate it "
                    "(connect() creates it) or fix the path in the URL")
        return None

    def _refuse_if_closed(self, operation: str, name: str) -> None:
        if self._closed:
            raise closed_store(self._where, operation, name)

    # -- the Backend protocol ----------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        self._refuse_if_closed("acquire", name)
        try:
            for slot in range(limit):
                path = self._path(name, slot, limit)
                locked = self._lock(path)
                if locked is None:
                    continue
                lock_file, head = locked
                magic, stored, boot = _COUNTER.unpack_from(head.ljust(_COUNTER.size, b"\0"))
                try:
                    if limit > 1:
                        token = self._bump_semaphore_counter(name)
                    elif magic == _MAGIC:
                        token = next_token(stored, boot == _BOOT, wall_us())
                    else:
                        token = wall_us()
                    tail = self._tail(name, holder)
                    # The record goes around the replaced flag, never over it: a break_lease
                    # may have marked the file since _lock looked, and its mark must stay.
                    lock_file.write(_COUNTER.pack(_MAGIC, token, _BOOT), 0)
                    # Every holder writes a greater counter: finding the counter we wrote last
                    # means nobody wrote since, and our tail is still in place.
                    if lock_file.written != (stored, tail):
                        lock_file.write(tail, _REPLACED_AT + 1)
                    lock_file.written = (token, tail)
                    replaced = lock_file.replaced
                except BaseException:  # the file is locked: let go of it, or nobody can take it
                    lock_file.close()  # also unlocks it
                    raise
                if replaced:
                    # Broken before we could hand it out: break_lease counted us as the holder
                    # it broke, and read our token (or reserved one above it) for its copy.
                    fcntl.flock(lock_file.fd, fcntl.LOCK_UN)
                    lock_file.close()
                    continue
                lease_id = f"{self._id_prefix}{next(self._ids)}"
                self._held[lease_id] = lock_file
                return Grant(name, slot, holder, lease_id, token, path)
            return None
        except OSError as exc:
            raise self._failure("acquire", name, exc) from exc

    def _bump_semaphore_counter(self, name: str) -> int:
        path = str(self.directory / f"{safe_key(name)}.sem")
        # The thread mutex orders this process's threads; flock orders processes. Both are held
        # only for one read and one write.
        with self._counter_mutex:
            fd = self._open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                stored, same_boot, _, _, _ = _parse(os.pread(fd, _HEADER.size, 0))
                token = next_token(stored, same_boot, wall_us())
                os.pwrite(fd, _record(token, b"", name.encode("utf-8")), 0)
                return token
            finally:
                self._close(fd)

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        results: list[Grant | LostReason] = []
        for grant in grants:
            lock_file = self._held.get(grant.lease_id)
            try:
                ours = lock_file is not None and not lock_file.replaced
            except OSError as exc:
                raise self._failure("renewal", grant.name, exc) from exc
            results.append(grant if ours else LostReason.BROKEN)
        return results

    async def release(self, grant: Grant) -> bool:
        self._refuse_if_closed("release", grant.name)
        lock_file = self._held.pop(grant.lease_id, None)
        if lock_file is None:
            return False
        try:
            still_ours = not lock_file.replaced
            fcntl.flock(lock_file.fd, fcntl.LOCK_UN)
        except OSError as exc:
            lock_file.close()
            raise self._failure("release", grant.name, exc) from exc
        if still_ours:
            self._park(lock_file)
        else:
            lock_file.close()
        return still_ours

    async def break_lease(self, name: str) -> int:
        self._refuse_if_closed("break", name)
        stem = safe_key(name)
        guard = await self._take_break_turn(name, str(self.directory / f"{stem}.break"))
        try:
            paths = [self.directory / f"{stem}.lock", *self.directory.glob(f"{stem}.*.slot")]
            return sum(self._break_file(str(path)) for path in paths)
        except OSError as exc:
            raise self._failure("break", name, exc) from exc
        finally:
            self._close(guard)  # our only descriptor of the guard: closing it unlocks it

    async def _take_break_turn(self, name: str, path: str) -> int:
        """An open descriptor of the name's break guard, exclusively flocked by us.

        Two breaks of one name must not overlap: the second would copy the file that the
        first is replacing, and rename its copy over the first one's, which a new holder may
        hold by then (two holders, one token). The kernel frees the guard of a killed break.
        """
        try:
            fd = self._open(path)
        except OSError as exc:
            raise self._failure("break", name, exc) from exc
        deadline = _shim.monotonic() + _BREAK_PATIENCE
        pause = 0.001
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    if _shim.monotonic() >= deadline:
                        raise failure(
                            self._where, "break", name, "check for a stopped process that is "
                            "breaking it", f"another break_lease of it has been running for "
                            f"over {_BREAK_PATIENCE:g} s") from None
                except OSError as exc:
                    raise self._failure("break", name, exc) from exc
                await _shim.sleep(pause)  # polled: a blocking flock would stall the event loop
                pause = min(pause * 2, 0.05)
        except BaseException:
            self._close(fd)
            raise

    def _break_file(self, path: str) -> int:
        """Replace a held lock file by a fresh copy; its holder sees the old one marked replaced.

        Runs on the name's break turn, so the file opened here stays at `path` until our rename.
        Order matters: mark the old file first (from then on nobody can newly lock it and keep
        it), read its counter, then rename the copy into place. At most one holder can be
        between reading the old counter and writing it + 1 (an acquire midway sees the mark
        after writing and lets go), so the copy reserves one token.
        """
        try:
            old = self._open_lock_file(path) if os.path.exists(path) else None
        except FileNotFoundError:
            old = None
        if old is None:
            return 0
        try:
            # Already marked: a break killed between marking and renaming; finish it.
            if not old.replaced and _probe_free(old.fd):
                return 0
            old.mark_replaced()
            stored, same_boot, _, _, name = _parse(old.read())
            temporary = f"{path}.{secrets.token_hex(6)}.tmp"
            fd = self._open(temporary, _OPEN_FLAGS | os.O_EXCL)
            try:
                os.ftruncate(fd, _FILE_SIZE)
                if stored is not None:
                    reserve = 1 if path.endswith(".lock") else 0
                    boot = _BOOT if same_boot else bytes(16)
                    os.pwrite(fd, _record(stored + reserve, b"", name.encode(), boot), 0)
            finally:
                self._close(fd)
            os.rename(temporary, path)
            return 1
        finally:
            old.close()

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._refuse_if_closed("listing", prefix)
        found: list[LeaseInfo] = []
        try:
            entries = sorted(os.scandir(self.directory), key=lambda entry: entry.name)
        except FileNotFoundError:  # removed since connect(): nothing is held there
            return []
        except OSError as exc:
            raise self._failure("listing", prefix, exc) from exc
        for entry in entries:
            if entry.name.endswith(".lock"):
                slot = 0
            elif entry.name.endswith(".slot"):
                slot = int(entry.name.rsplit(".", 2)[1])
            else:
                continue
            try:
                fd = self._open(entry.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                continue
            try:
                if _probe_free(fd):
                    continue
                token, _, replaced, holder, name = _parse(os.pread(fd, _FILE_SIZE, 0))
            finally:
                self._close(fd)
            if token is not None and not replaced and name.startswith(prefix):
                found.append(LeaseInfo(name, holder, token, None, slot))
        return sorted(found, key=lambda info: (info.name, info.slot))

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        await _shim.sleep(timeout)  # no portable release notification; the core polls

    def _record_path(self, name: str) -> str:
        return str(self.directory / f"{safe_key(name)}{_RECORD_SUFFIX}")

    async def read_record(self, name: str) -> str | None:
        self._refuse_if_closed("reading the record", name)
        try:
            stored = _read_record_file(self._record_path(name))
        except OSError as exc:
            raise self._failure("reading the record", name, exc) from exc
        return stored[1] if stored is not None and stored[0] == name else None

    async def write_record(self, grant: Grant, record: str) -> bool:
        self._refuse_if_closed("writing the record", grant.name)
        record_bytes(record)
        lock_file = self._held.get(grant.lease_id)
        path = self._record_path(grant.name)
        temporary = f"{path}.{secrets.token_hex(6)}.tmp"
        data = json.dumps({"name": grant.name, "record": record}).encode("ascii")
        try:
            if lock_file is None or lock_file.replaced:
                return False
            fd = self._open(temporary, _OPEN_FLAGS | os.O_EXCL)
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

    async def records(self, prefix: str = "") -> dict[str, str]:
        self._refuse_if_closed("listing the records", prefix)
        start = safe_key_prefix(prefix)
        found: dict[str, str] = {}
        try:
            for entry in os.scandir(self.directory):
                if entry.name.startswith(start) and entry.name.endswith(_RECORD_SUFFIX):
                    stored = _read_record_file(entry.path)
                    if stored is not None and stored[0].startswith(prefix):
                        found[stored[0]] = stored[1]
        except FileNotFoundError:  # the directory, removed since connect(): nothing there
            return {}
        except OSError as exc:
            raise self._failure("listing the records", prefix, exc) from exc
        return dict(sorted(found.items()))

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        self._idle_count = 0
        held, self._held = self._held, {}
        for lock_file in [*held.values()] + [f for files in idle.values() for f in files]:
            lock_file.close()


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


def _try_flock(fd: int) -> bool:
    """Lock the open file description of `fd` exclusively; False when someone else holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _probe_free(fd: int) -> bool:
    """True when nobody holds the file's lock (a shared lock can be taken and is dropped)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True
