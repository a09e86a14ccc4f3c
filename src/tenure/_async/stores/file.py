"""`file:///path/to/dir`: one file per lock name, held with an OS advisory lock (flock).

The kernel frees the lock the moment its holder's process dies, so a crashed holder's lock is
free at once, without waiting for a ttl; ttl is accepted for a uniform API and paces the
holder's periodic check. Each lock file keeps the name's fencing counter, the boot id it was
written under, the holder and the name; files are never deleted by release.

File names are a readable prefix of the lock name plus a 128-bit digest of it (see
tenure._names.safe_key), so no name can lead outside the directory. `break_lease` atomically
replaces the file with a fresh copy (rename): the old holder's descriptor now points to an
unlinked file, which its next check sees (st_nlink == 0). Semaphores keep one file per slot and
their counter in a `.sem` file; do not use one name both as a lock and as a semaphore.

Local file systems only: flock over NFS is not reliable. Linux and macOS (no Windows).

Example::

    store = tenure.connect("file:///var/lib/app/locks")
"""

from __future__ import annotations

import errno
import itertools
import os
import secrets
import struct
import threading
from collections.abc import Sequence
from pathlib import Path

from tenure._async import _shim
from tenure._errors import MissingExtra, StoreUnavailable
from tenure._hostclock import BOOT_ID, wall_us
from tenure._names import name_digest, safe_key
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_MAGIC = b"TNR1"
_HEADER = struct.Struct(">4sQ16sHH")  # magic, token, boot digest, holder length, name length
_BOOT = bytes.fromhex(name_digest(BOOT_ID))
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
_MAX_IDLE_DESCRIPTORS = 256


def _read_record(fd: int) -> tuple[int | None, bool, str, str]:
    """(token, written in this boot, holder, name) of a lock file; token None when empty."""
    data = os.pread(fd, 8192, 0)
    if len(data) < _HEADER.size or data[:4] != _MAGIC:
        return None, True, "", ""
    _, token, boot, holder_length, name_length = _HEADER.unpack_from(data)
    start = _HEADER.size
    holder = data[start:start + holder_length].decode("utf-8", "replace")
    name = data[start + holder_length:start + holder_length + name_length].decode(
        "utf-8", "replace")
    return token, boot == _BOOT, holder, name


def _record(token: int, holder: bytes, name: bytes, boot: bytes = _BOOT) -> bytes:
    return _HEADER.pack(_MAGIC, token, boot, len(holder), len(name)) + holder + name


class AsyncFileStore:
    """Locks as files in one directory, held by the kernel.

    Example::

        backend = AsyncFileStore("/var/lib/app/locks")
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0, batched_renewal=True,
                                expiry="kernel")

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise MissingExtra("the file:// store needs flock (Linux or macOS); use sqlite://")
        self.directory = Path(directory)
        self.url = f"file://{self.directory}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"{self.url}: cannot create the lock directory: {exc.strerror}; "
                "check the path and its permissions"
            ) from exc
        self._paths: dict[tuple[str, int, int], tuple[str, bytes]] = {}
        self._idle: dict[str, list[int]] = {}
        self._idle_count = 0
        self._held: dict[str, tuple[int, str]] = {}
        self._counter_mutex = threading.Lock()
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)

    # -- paths and descriptors ----------------------------------------------------------------

    def _path(self, name: str, slot: int, limit: int) -> tuple[str, bytes]:
        cached = self._paths.get((name, slot, limit))
        if cached is None:
            stem = str(self.directory / safe_key(name))
            path = f"{stem}.lock" if limit == 1 else f"{stem}.{slot}.slot"
            cached = self._paths[(name, slot, limit)] = (path, name.encode("utf-8"))
        return cached

    def _take_descriptor(self, path: str) -> int:
        idle = self._idle.get(path)
        if idle:
            try:
                fd = idle.pop()
                self._idle_count -= 1
                return fd
            except IndexError:  # another thread took the last one
                pass
        return os.open(path, _OPEN_FLAGS, 0o644)

    def _park_descriptor(self, path: str, fd: int) -> None:
        if self._idle_count >= _MAX_IDLE_DESCRIPTORS:
            os.close(fd)
        else:
            self._idle.setdefault(path, []).append(fd)
            self._idle_count += 1

    def _lock_file(self, path: str) -> int | None:
        """An exclusively flocked descriptor of the file now at `path`, or None if held."""
        fd = self._take_descriptor(path)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._park_descriptor(path, fd)
                return None
            if os.fstat(fd).st_nlink:
                return fd
            # break_lease replaced the file after we opened it: lock the new one instead
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            fd = os.open(path, _OPEN_FLAGS, 0o644)

    def _failure(self, operation: str, name: str, exc: OSError) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self.url}: {operation} of {name!r} failed: {exc.strerror or exc}; check that the "
            "directory exists, is writable and is on a local file system"
        )

    # -- the Backend protocol ----------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        try:
            for slot in range(limit):
                path, name_bytes = self._path(name, slot, limit)
                fd = self._lock_file(path)
                if fd is None:
                    continue
                if limit == 1:
                    stored, same_boot, _, _ = _read_record(fd)
                    token = next_token(stored, same_boot, wall_us())
                else:
                    token = self._bump_semaphore_counter(name)
                os.pwrite(fd, _record(token, holder.encode("utf-8"), name_bytes), 0)
                lease_id = f"{self._id_prefix}{next(self._ids)}"
                self._held[lease_id] = (fd, path)
                return Grant(name, slot, holder, lease_id, token, path)
            return None
        except OSError as exc:
            raise self._failure("acquire", name, exc) from exc

    def _bump_semaphore_counter(self, name: str) -> int:
        path = str(self.directory / f"{safe_key(name)}.sem")
        # The thread mutex orders this process's threads; flock orders processes. Both are held
        # only for one read and one write.
        with self._counter_mutex:
            fd = os.open(path, _OPEN_FLAGS, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                stored, same_boot, _, _ = _read_record(fd)
                token = next_token(stored, same_boot, wall_us())
                os.pwrite(fd, _record(token, b"", name.encode("utf-8")), 0)
                return token
            finally:
                os.close(fd)

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        results: list[Grant | LostReason] = []
        for grant in grants:
            held = self._held.get(grant.lease_id)
            if held is None:
                results.append(LostReason.BROKEN)
                continue
            try:
                linked = os.fstat(held[0]).st_nlink
            except OSError as exc:
                raise self._failure("check", grant.name, exc) from exc
            results.append(grant if linked else LostReason.BROKEN)
        return results

    async def release(self, grant: Grant) -> bool:
        held = self._held.pop(grant.lease_id, None)
        if held is None:
            return False
        fd, path = held
        try:
            still_ours = os.fstat(fd).st_nlink > 0
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as exc:
            os.close(fd)
            raise self._failure("release", grant.name, exc) from exc
        if still_ours:
            self._park_descriptor(path, fd)
        else:
            os.close(fd)
        return still_ours

    async def break_lease(self, name: str) -> int:
        stem = safe_key(name)
        paths = [self.directory / f"{stem}.lock", *self.directory.glob(f"{stem}.*.slot")]
        try:
            return sum(self._break_file(str(path)) for path in paths)
        except OSError as exc:
            raise self._failure("break", name, exc) from exc

    def _break_file(self, path: str) -> int:
        """Replace a held lock file by a copy; the holder's descriptor then shows st_nlink 0."""
        try:
            old = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return 0
        try:
            if _probe_free(old):
                return 0
            temporary = f"{path}.{secrets.token_hex(6)}.tmp"
            new = os.open(temporary, _OPEN_FLAGS | os.O_EXCL, 0o644)
            try:
                fcntl.flock(new, fcntl.LOCK_EX)  # acquirers wait until the counter is copied
                os.rename(temporary, path)
                # Read after the rename: at most one holder of the old file is still between
                # reading the counter and writing it + 1, so reserve one token for it.
                stored, same_boot, _, name = _read_record(old)
                if stored is not None:
                    reserve = 1 if path.endswith(".lock") else 0
                    boot = _BOOT if same_boot else bytes(16)
                    os.pwrite(new, _record(stored + reserve, b"", name.encode(), boot), 0)
                fcntl.flock(new, fcntl.LOCK_UN)
            finally:
                os.close(new)
            return 1
        finally:
            os.close(old)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        found: list[LeaseInfo] = []
        try:
            entries = sorted(os.scandir(self.directory), key=lambda entry: entry.name)
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
                fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                continue
            try:
                if _probe_free(fd):
                    continue
                token, _, holder, name = _read_record(fd)
            finally:
                os.close(fd)
            if token is not None and name.startswith(prefix):
                found.append(LeaseInfo(name, holder, token, None, slot))
        return sorted(found, key=lambda info: (info.name, info.slot))

    async def wait_released(self, name: str, timeout: float) -> None:
        await _shim.sleep(timeout)  # no portable release notification; the core polls

    async def close(self) -> None:
        idle, self._idle = self._idle, {}
        self._idle_count = 0
        for descriptors in idle.values():
            for fd in descriptors:
                os.close(fd)
        held, self._held = self._held, {}
        for fd, _ in held.values():
            os.close(fd)


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
