"""AsyncFileStore: the lease operations of the file:// store. A lease is an exclusive flock on
its name's lock file, which the kernel frees when its holder's process dies; the file keeps the
name's fencing counter. Waiters queue for a name on this host and a release wakes the first
(tenure._async.stores._host_queue). `break_lease` marks the held file as replaced and renames
a fresh copy into its place; breaks of a name take turns on its `.break` file's flock.

Example::

    backend = AsyncFileStore("/var/lib/app/locks")
    grant = await backend.try_acquire("job", "worker-1", 30.0, 1)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from tenure._async import _shim
from tenure._async.stores._failures import failure
from tenure._async.stores._host_queue import AsyncHostQueue
from tenure._async.stores._options import DEFAULT_RETAIN, retain_seconds
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.file._forgetting import Forgetting
from tenure._async.stores.file._handles import (
    OPEN_FLAGS,
    READ_FLAGS,
    Locked,
    lock_exclusive,
    probe_free,
    try_flock,
    unlock,
)
from tenure._async.stores.file._layout import (
    BOOT,
    COUNTER,
    FILE_SIZE,
    GRANT,
    GRANT_AT,
    HEAD_SIZE,
    HEADER,
    MAGIC,
    PRUNING,
    REPLACED,
    REPLACED_AT,
    parse,
    record,
)
from tenure._async.stores.file._paths import slot_of, temporary_beside
from tenure._async.stores.file._records import FileRecords
from tenure._hostclock import host_monotonic, wall_us
from tenure._names import safe_key_prefix
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

_BREAK_PATIENCE = 10.0  # seconds a break_lease waits for another break of the same name
# Seconds a try waits for prunes holding the name's files (each holds them for microseconds;
# only a prune stopped or killed midway makes a try wait that long, then report it busy)
_PRUNE_PATIENCE = 1.0
SWEEP_EVERY = 60.0  # seconds: the longest gap between two sweeps of idle names by one store


class AsyncFileStore(Forgetting, FileRecords, AsyncBackend):
    """Locks as files in one directory, held by the kernel. `retain` (seconds, default 3600;
    0 to inf) is how long the files of a name nobody holds are kept: see _forgetting.py.

    Example::

        backend = AsyncFileStore("/var/lib/app/locks", retain=600)
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, directory: str | os.PathLike[str],
                 retain: float | str = DEFAULT_RETAIN) -> None:
        self._retain = retain_seconds(retain)  # before the directory is made
        super().__init__(directory)
        if self._retain != DEFAULT_RETAIN:  # the URL reads back as the same store
            self.url += f"?retain={self._retain:g}"
        self._next_sweep = 0.0  # host monotonic time of the next sweep after a release
        self._queue = AsyncHostQueue(str(self.directory))

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        return await self._take_patiently(name, holder, ttl, limit, False)

    async def _take_queued(self, name: str, holder: str, ttl: float, limit: int,
                    queued: bool) -> Grant | None:
        return await self._take_patiently(name, holder, ttl, limit, queued)

    async def _take_patiently(self, name: str, holder: str, ttl: float, limit: int,
                              queued: bool) -> Grant | None:
        """A try that, when a prune holds a free slot's file for the moment of forgetting it,
        tries again (for up to _PRUNE_PATIENCE) rather than report the name busy."""
        taken = self._take_now(name, holder, ttl, limit, queued)
        if taken is not Locked.FORGETTING:
            return taken
        deadline = _shim.monotonic() + _PRUNE_PATIENCE
        pause = 0.0001
        while True:
            await _shim.sleep(pause)
            taken = self._take_now(name, holder, ttl, limit, queued)
            if taken is not Locked.FORGETTING:
                return taken
            if _shim.monotonic() >= deadline:
                return None
            pause = min(pause * 2, 0.01)

    def _take_now(self, name: str, holder: str, ttl: float, limit: int,
                  queued: bool) -> Grant | Locked | None:
        """A try; one from outside the name's queue (not `queued`) leaves the name to the
        waiters queued for it (see _host_queue). Locked.FORGETTING: no slot was free, and a
        prune held one (free) for the moment of forgetting it."""
        self._refuse_if_closed("acquire", name)
        if not queued and self._queue.blocks(name):
            return None
        met_prune = False
        try:
            for slot in range(limit):
                path = self._paths.lock(name, slot, limit)
                locked = self._lock(path)
                if locked is None:
                    continue
                if locked is Locked.FORGETTING:
                    met_prune = True
                    continue
                lock_file, head = locked
                magic, stored, _ = COUNTER.unpack_from(head.ljust(COUNTER.size, b"\0"))
                try:
                    if limit > 1:
                        token = self._bump_semaphore_counter(name)
                    elif magic in (MAGIC, PRUNING):  # PRUNING: a prune gave up on it
                        token = next_token(stored, wall_us())
                    else:
                        token = wall_us()
                    tail = self._tail(name, holder)
                    # The record goes around the replaced flag, never over it: a break_lease
                    # may have marked the file since _lock looked, and its mark must stay.
                    if magic in (MAGIC, PRUNING):
                        # The magic stays: a prune's, written before its flock, must be there
                        # while it holds the file (see _forgetting.py)
                        lock_file.write(GRANT.pack(token, BOOT), GRANT_AT)
                    else:
                        lock_file.write(COUNTER.pack(MAGIC, token, BOOT), 0)
                    # Every holder writes a greater counter: finding the counter we wrote last
                    # means nobody wrote since, and our tail is still in place.
                    if lock_file.written != (stored, tail):
                        lock_file.write(tail, REPLACED_AT + 1)
                    lock_file.written = (token, tail)
                    replaced = lock_file.replaced
                except BaseException:  # the file is locked: let go of it, or nobody can take it
                    lock_file.close()  # also unlocks it
                    raise
                if replaced:
                    # Broken before we could hand it out: break_lease counted us as the holder
                    # it broke, and read our token (or reserved one above it) for its copy.
                    unlock(lock_file.fd)
                    lock_file.close()
                    continue
                lease_id = f"{self._id_prefix}{next(self._ids)}"
                self._held[lease_id] = lock_file
                return Grant(name, slot, holder, lease_id, token, path)
            return Locked.FORGETTING if met_prune else None
        except OSError as exc:
            raise self._failure("acquire", name, exc) from exc

    def _bump_semaphore_counter(self, name: str) -> int:
        path = self._paths.counter(name)
        # The thread mutex orders this process's threads; flock orders processes. Both are held
        # only for one read and one write.
        with self._counter_mutex:
            while True:
                fd = self._open(path)
                try:
                    lock_exclusive(fd)
                    stored, _, replaced, _, _ = parse(os.pread(fd, HEADER.size, 0))
                    if replaced:  # a prune forgot this counter file: count on the new one
                        continue
                    token = next_token(stored, wall_us())
                    os.pwrite(fd, record(token, b"", name.encode("utf-8")), 0)
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
        forgotten = False
        try:
            head = lock_file.read(HEAD_SIZE)  # one read: the magic and the replaced flag
            still_ours = head[REPLACED_AT:] != REPLACED
            if head[:4] == PRUNING and still_ours:
                # A grant keeps the magic it finds: this one is from a prune that found the
                # name held (it writes the usual one back itself) or was killed midway
                lock_file.write(MAGIC, 0)
            if still_ours and self._retain == 0 and grant.slot == 0 and (
                    lock_file.path.endswith(".lock")) and not self._queue.blocks(grant.name):
                forgotten = self._forget_at_release(lock_file.path, lock_file.fd)
            unlock(lock_file.fd)
        except OSError as exc:
            lock_file.close()
            raise self._failure("release", grant.name, exc) from exc
        if still_ours and not forgotten:
            self._park(lock_file)
        else:
            lock_file.close()
        self._queue.ring(grant.name)
        self._sweep_now_and_then()
        return still_ours

    def _sweep_now_and_then(self) -> None:
        """Forget some names idle for `retain`, at most once per SWEEP_EVERY (every retain / 4
        when shorter, at least a second apart); best effort, bounded (see Forgetting._sweep)."""
        if self._retain == math.inf:
            return
        now = host_monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(max(self._retain / 4, 1.0), SWEEP_EVERY)
        self._sweep(self._retain)

    async def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names nobody has held, with no waiter, for `idle` seconds (their lock,
        slot, counter and break files; records stay), or with `dry_run` only count them; the
        number of names.

        Example::

            forgotten = await backend.prune(idle=3600.0)
        """
        self._refuse_if_closed("prune", "")
        try:
            count: int = await _shim.offload(self._prune_now, idle, dry_run)
        except OSError as exc:
            raise self._failure("prune", "", exc) from exc
        return count

    async def break_lease(self, name: str) -> int:
        self._refuse_if_closed("break", name)
        deadline = _shim.monotonic() + _BREAK_PATIENCE
        # Prunes first, then the name's other breaks: a prune unlinks break files on its turn
        shared = await self._take_break_turn(name, self._guard_path(), deadline, True)
        try:
            guard = await self._take_break_turn(name, self._paths.break_guard(name), deadline,
                                                False)
            try:
                broken = sum(self._break_file(str(path))
                             for path in self._paths.lock_files(name))
            except OSError as exc:
                raise self._failure("break", name, exc) from exc
            finally:
                self._close(guard)  # our only descriptor of the guard: closing it unlocks it
        finally:
            self._close(shared)
        if broken:
            self._queue.ring(name)
        return broken

    async def _take_break_turn(self, name: str, path: str, deadline: float,
                               shared: bool) -> int:
        """An open descriptor of the name's break guard, exclusively flocked by us (or of the
        directory's prune guard, `shared` with the other breaks).

        Two breaks of one name must not overlap: the second would copy the file that the
        first is replacing, and rename its copy over the first one's, which a new holder may
        hold by then (two holders, one token). Nor may a prune run meanwhile (it would unlink
        the fresh copy: see _forgetting.py). The kernel frees the guard of a killed break.
        """
        try:
            fd = self._open(path)
        except OSError as exc:
            raise self._failure("break", name, exc) from exc
        pause = 0.001
        try:
            while True:
                try:
                    if try_flock(fd, shared):
                        return fd
                except OSError as exc:
                    raise self._failure("break", name, exc) from exc
                if _shim.monotonic() >= deadline:
                    raise failure(
                        self._where, "break", name, "check for a stopped process that is "
                        "breaking or pruning it", f"another break_lease of it (or a prune) has "
                        f"been running for over {_BREAK_PATIENCE:g} s")
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
            if not old.replaced and probe_free(old.fd):
                return 0
            old.mark_replaced()
            stored, same_boot, _, _, name = parse(old.read())
            temporary = temporary_beside(path)
            fd = self._open(temporary, OPEN_FLAGS | os.O_EXCL)
            try:
                os.ftruncate(fd, FILE_SIZE)
                if stored is not None:
                    reserve = 1 if path.endswith(".lock") else 0
                    boot = BOOT if same_boot else bytes(16)
                    os.pwrite(fd, record(stored + reserve, b"", name.encode(), boot), 0)
            finally:
                self._close(fd)
            os.rename(temporary, path)
            return 1
        finally:
            old.close()

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._refuse_if_closed("listing", prefix)
        found: list[LeaseInfo] = []
        start = safe_key_prefix(prefix)  # the files of other names are not opened
        try:
            entries = os.scandir(self.directory)
        except FileNotFoundError:  # removed since connect(): nothing is held there
            return []
        except OSError as exc:
            raise self._failure("listing", prefix, exc) from exc
        try:
            with entries:
                for entry in entries:
                    slot = slot_of(entry.name)
                    if slot is not None and entry.name.startswith(start):
                        info = self._listed(entry.path, slot, prefix)
                        if info is not None:
                            found.append(info)
        except OSError as exc:
            raise self._failure("listing", prefix, exc) from exc
        return sorted(found, key=lambda info: (info.name, info.slot))

    def _listed(self, path: str, slot: int, prefix: str) -> LeaseInfo | None:
        """The lease held on the lock file at `path`, when its name starts with `prefix`."""
        try:
            fd = self._open(path, READ_FLAGS)
        except FileNotFoundError:
            return None
        try:
            if probe_free(fd):
                return None
            token, _, replaced, holder, name = parse(os.pread(fd, FILE_SIZE, 0))
        finally:
            self._close(fd)
        if token is not None and not replaced and name.startswith(prefix):
            return LeaseInfo(name, holder, token, None, slot)
        return None

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        await _shim.sleep(timeout)  # the core's acquires wait in wait_and_acquire

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait in the name's queue on this host, woken by the release, and take a slot when
        it is this waiter's turn (see tenure._async.stores._host_queue); the Grant taken, or
        None when the acquire's patience ran out first.

        Example::

            grant = await backend.wait_and_acquire("job", "worker-1", 30.0, 1, 0.05, 10.0)
        """
        self._refuse_if_closed("acquire", name)
        return await self._queue.wait_and_acquire(name, holder, ttl, limit, timeout, patience,
                                                  self._take_queued)

    async def close(self) -> None:
        self._closed = True
        self._close_all()
