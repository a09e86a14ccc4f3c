"""Forgetting idle names in a file:// directory: `prune(idle)`, the `retain` sweep and the
unlink at a release with `retain=0`, made safe against the acquires, breaks and other prunes
of every process of the host.

Deleting a lock file is the classic race: a process that opened the path before the unlink
locks the orphaned inode while another creates a new file at the path (two holders). So a file
is only ever unlinked by someone holding its flock, after marking it replaced, the mark every
try already reads after its flock (a try that locks a marked file lets it go and opens the path
again, as after a break_lease). Around that:

- Prunes and breaks take turns on the directory's guard (`prune.guard`): a prune holds it
  exclusively for one name at a time, a break shared for its whole work, so no break renames a
  fresh copy over a path between a prune's check that the path is still its file and its
  unlink, and no two prunes work on one name at once.
- While a prune holds a file's flock, the file's magic reads PRUNING: a try that finds the file
  locked and sees it tries again shortly (Locked.FORGETTING) instead of calling a free name
  busy. The magic is written before the prune's flock, and a grant writes its token after the
  magic, never over it, so no moment shows a file locked by a prune without it (but for a file
  created and first granted between the prune's two writes of it, for the microsecond between
  its flock and its second write); a prune that gives up writes the usual magic back.
- A semaphore's counter file (`.sem`) is marked and unlinked first, while the prune holds every
  slot's flock, so a counter increment can only start on a slot file made after the unlink, and
  meets a new counter file; one that waited on the old counter file sees its mark and opens the
  path again.

A name forgotten restarts its counter from the wall clock in microseconds (next_token): above
every earlier token unless the clock stepped back by more than the time since the last grant.
"Idle" is read from the token itself (a token is the wall clock in µs at its grant): now -
token >= idle; a file never granted goes by its modification time.

Example::

    forgotten = store._prune_now(idle=3600.0, dry_run=False)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Generator, Iterator

from tenure._async.stores._host_queue import AsyncHostQueue
from tenure._async.stores.file._directory import LockDirectory
from tenure._async.stores.file._handles import try_flock, unlock
from tenure._async.stores.file._layout import (
    COUNTER,
    FILE_SIZE,
    MAGIC,
    PRUNING,
    REPLACED,
    REPLACED_AT,
    parse,
)
from tenure._hostclock import wall_us

GUARD = "prune.guard"  # no key can be this: every key ends with a digest
_NO_CREATE = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
_TURN_PATIENCE = 10.0  # seconds a prune() waits for a break of the directory to end
SWEEP_BUDGET = 4096  # directory entries one sweep looks at: the next sweep goes on from there


class _Busy(Exception):
    """A file of the name is locked or was used within the idle time: keep the name."""


class Forgetting(LockDirectory):
    """The prune, the sweep and the forgetting at release of a file:// store (see the module).

    Example::

        class Store(Forgetting):
            async def prune(self, idle: float, dry_run: bool = False) -> int:
                return self._prune_now(idle, dry_run)
    """

    _queue: AsyncHostQueue  # the store's waiters' queues: a name with waiters stays

    def _guard_path(self) -> str:
        return str(self.directory / GUARD)

    def _prune_now(self, idle: float, dry_run: bool) -> int:
        """Forget every name of the directory free, with no waiter and not granted for `idle`
        seconds (its lock or slot files, its counter and break files; never its record);
        with `dry_run` only count them. The number of names."""
        try:
            entries = os.scandir(self.directory)
        except FileNotFoundError:  # removed since connect(): nothing is kept there
            return 0
        with entries:
            return self._forget_among(entries, idle, dry_run, patience=_TURN_PATIENCE)

    def _sweep(self, retain: float) -> None:
        """Forget the names idle for `retain` among the next SWEEP_BUDGET entries of the
        directory; best effort (a name whose turn is taken waits for a later sweep)."""
        if not self._sweep_mutex.acquire(blocking=False):
            return  # another thread of this store is sweeping
        entries = self._sweep_entries
        budget = None
        try:
            if entries is None:
                entries = self._sweep_entries = _entries(self.directory)
            budget = _Budget(entries, SWEEP_BUDGET)
            self._forget_among(budget, retain, False, patience=0.0)
        except OSError:
            budget = None  # the next sweep starts the directory over
        finally:
            if entries is not None and (budget is None or budget.exhausted):
                self._sweep_entries = None
                entries.close()
            self._sweep_mutex.release()

    def _forget_among(self, entries: Iterator[os.DirEntry[str]], idle: float, dry_run: bool,
                      patience: float) -> int:
        idle_us = int(idle * 1e6) if idle < 1e12 else 2**63
        forgotten = 0
        guard = self._open(self._guard_path())
        try:
            for entry in entries:
                files = self._files_of(entry)
                if files is None:
                    continue
                try:
                    if self._forget(files, idle_us, dry_run, guard, patience):
                        forgotten += 1
                except _Busy:
                    continue
        finally:
            self._close(guard)  # also ends a turn left held by an error
        return forgotten

    def _files_of(self, entry: os.DirEntry[str]) -> list[str] | None:
        """The lock files of the name that `entry` stands for, in the order they are forgotten
        (a semaphore's counter first, then its slots from 0); None for every other file, so
        that each name is looked at once (a semaphore through its counter file)."""
        if entry.name.endswith(".lock"):
            return [entry.path]
        if not entry.name.endswith(".sem"):
            return None
        stem = entry.path[:-len(".sem")]
        files = [entry.path]
        while os.path.exists(slot := f"{stem}.{len(files) - 1}.slot"):
            files.append(slot)
        return files

    def _forget(self, files: list[str], idle_us: int, dry_run: bool, guard: int,
                patience: float) -> bool:
        """Forget one name whose files are `files`; False when it was gone already, _Busy when
        it must stay."""
        opened: list[tuple[str, int]] = []
        try:
            for path in files:
                try:
                    opened.append((path, self._open(path, _NO_CREATE)))
                except FileNotFoundError:
                    if not opened:
                        return False  # forgotten meanwhile
                    raise _Busy from None  # a slot going away: another prune's
            now_us = wall_us()
            name = ""
            for _, fd in opened:
                head = os.pread(fd, FILE_SIZE, 0)
                _raise_if_young(head, fd, idle_us, now_us)
                name = name or parse(head)[4]
            if name and self._queue.blocks(name):
                raise _Busy
            if not self._take_turn(guard, patience):
                raise _Busy
            try:
                if dry_run:
                    return self._all_free(opened)
                self._forget_locked(opened, idle_us)
            finally:
                unlock(guard)
            return True
        finally:
            for _, fd in opened:
                self._close(fd)  # also unlocks them

    def _forget_locked(self, opened: list[tuple[str, int]], idle_us: int) -> None:
        """On the directory's turn: lock every file of the name, check again, mark and unlink."""
        for path, fd in opened:
            try:
                if os.stat(path).st_ino != os.fstat(fd).st_ino:
                    raise _Busy  # replaced by a break since we opened it
            except FileNotFoundError:
                raise _Busy from None  # forgotten at a release since we opened it
        for _, fd in opened:
            os.pwrite(fd, PRUNING, 0)  # before the flock: a try never sees it locked without it
        locked: list[int] = []
        try:
            for _, fd in opened:
                if not try_flock(fd):
                    raise _Busy
                locked.append(fd)
                os.pwrite(fd, PRUNING, 0)  # again: a file new since our write may lack it
            now_us = wall_us()
            for _, fd in opened:
                _raise_if_young(os.pread(fd, FILE_SIZE, 0), fd, idle_us, now_us)
        except BaseException:
            for _, fd in opened:
                os.pwrite(fd, MAGIC, 0)  # the usual magic back (a try may have written it too)
            raise
        for _, fd in opened:
            os.pwrite(fd, REPLACED, REPLACED_AT)
        for path, _ in opened:
            os.unlink(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._paths.break_guard_of(opened[0][0]))

    def _forget_at_release(self, path: str, fd: int) -> bool:
        """With retain=0: unlink the lock file we hold (flocked by us through `fd`) before we
        let go of it, when the directory's turn is free now; False when it stays."""
        guard = self._open(self._guard_path())
        try:
            if not try_flock(guard):
                return False  # a break or a prune at work: a later prune or sweep forgets it
            if os.pread(fd, 1, REPLACED_AT) == REPLACED:
                return False  # broken meanwhile: the path is another file now
            os.pwrite(fd, PRUNING, 0)
            os.pwrite(fd, REPLACED, REPLACED_AT)
            os.unlink(path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._paths.break_guard_of(path))
            return True
        finally:
            self._close(guard)

    def _all_free(self, opened: list[tuple[str, int]]) -> bool:
        """A dry run's check that nobody holds the name's files (a shared lock, dropped)."""
        for _, fd in opened:
            os.pwrite(fd, PRUNING, 0)
        try:
            for _, fd in opened:
                if not try_flock(fd, shared=True):
                    raise _Busy
                unlock(fd)
        finally:
            for _, fd in opened:
                os.pwrite(fd, MAGIC, 0)
        return True

    def _take_turn(self, guard: int, patience: float) -> bool:
        """The directory's guard, exclusively; polled (a break may hold it shared) for up to
        `patience` seconds."""
        deadline = time.monotonic() + patience
        pause = 0.0005
        while not try_flock(guard):
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)  # in a worker thread (prune) or not at all (a sweep: patience 0)
            pause = min(pause * 2, 0.05)
        return True


def _entries(directory: os.PathLike[str]) -> Generator[os.DirEntry[str], None, None]:
    """The directory's entries, read as they are needed; close() closes the directory."""
    with os.scandir(directory) as entries:
        yield from entries


class _Budget(Iterator[os.DirEntry[str]]):
    """At most `count` entries of `entries`; `exhausted` once `entries` has none left."""

    def __init__(self, entries: Iterator[os.DirEntry[str]], count: int) -> None:
        self._entries, self._left, self.exhausted = entries, count, False

    def __next__(self) -> os.DirEntry[str]:
        if self._left <= 0:
            raise StopIteration
        self._left -= 1
        try:
            return next(self._entries)
        except StopIteration:
            self.exhausted = True
            raise


def _raise_if_young(head: bytes, fd: int, idle_us: int, now_us: int) -> None:
    """_Busy when the file was granted (or, never granted, modified) within `idle_us`."""
    if head[:4] in (MAGIC, PRUNING) and len(head) >= COUNTER.size:
        granted_us: int = COUNTER.unpack_from(head)[1]
    else:
        granted_us = os.fstat(fd).st_mtime_ns // 1000
    if now_us - granted_us < idle_us:
        raise _Busy
