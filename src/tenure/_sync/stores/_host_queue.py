# GENERATED from src/tenure/_async/stores/_host_queue.py by scripts/unasync.py: do not edit.
"""The host queue: first-come, first-served hand-off of a name between the processes of one
host, woken by the release, for the stores that live on one host (sqlite://, file://).

Without it, a waiter polls (backoff 10 ms to 1 s) and the releaser, asking again at once, takes
the name back before any waiter wakes: one process keeps it, the others starve. With it:

- A waiter joins the name's queue, a directory `<key>.queue` (under the store's directory, or
  beside the SQLite database file), with a ticket: a FIFO (mkfifo) named by the host's monotonic
  clock in nanoseconds, its pid and a counter, so that the names sort in arrival order. The
  waiter keeps the FIFO open for reading (the doorbell) and for writing (so that a ringer's
  close never leaves it readable at end-of-file: poll() would report it at once, forever).
  The FIFO is made under a temporary name and renamed into the queue once open: a ticket in
  the queue always has its reader.
- A release (and a break) rings the first live waiter whose doorbell is not already ringing:
  it opens its FIFO with O_WRONLY | O_NONBLOCK and writes one byte. The waiter, blocked in
  poll() on its FIFO (the async twin on the event loop's reader, no thread), wakes at once.
- A try takes the name only when fewer than `limit` live waiters are queued ahead of it (a try
  from outside the queue: when none is queued at all), so a process that releases and asks
  again goes behind the waiters already queued. Semaphores get FIFO order the same way.
- The waiters' map: a shared memory mapping of one 64 KiB file (`waiters.map` in the queue
  root) with a byte per bucket of names (CRC-32 of the name), set by a waiter once its ticket is
  in the queue and cleared by the last one out of it (who looks at the queue again right after
  clearing, and sets it back if someone joined meanwhile). A try or a release whose name's byte
  is clear knows that nobody waits WITHOUT A SYSTEM CALL: the uncontended acquire/release cycle
  costs what it cost before the queue. A set byte only means "look": the queue directory tells.
  Two names in one bucket (rare: 65,536 buckets) share the byte, so a waiter of one can lose
  its mark to the last waiter of the other leaving: that waiter then falls back to polling, as
  without a queue. Where the map cannot be made (a read-only directory), a try and a release
  look for the queue directory instead (one access() call each).
- Liveness: a waiter that was killed (SIGKILL included) has no reader left on its FIFO, so
  opening it for writing fails with ENXIO; whoever sees that (a ringer, a try, a waiter
  counting who is ahead) removes the dead ticket. A waiter whose acquire times out, is
  cancelled or fails leaves the queue (removes its ticket) on the way out, and the last one out
  removes the directory and clears the name's byte in the waiters' map; when the last one out
  took the name, its release does that after ringing (an rmdir is slow: see _leave).
- Fallback: a doorbell that is lost (a ringer killed between the release and the ring, a lease
  that expired or whose holder's process died without a release) is covered by a try every
  `timeout` (the core's backoff), doubling up to a second; a queue that cannot be made (a
  read-only directory, no FIFOs on this file system) leaves the waiter polling as before.
- fork(): tickets belong to the process that made them; a child closes its copies of their
  FIFOs (so that a dead parent's tickets are seen dead) and never removes the parent's. The
  waiters' map is shared by every process of the host anyway: a child keeps using it.

Why FIFOs: a pipe's reader end is the kernel's own liveness signal (no lock files, no pids that
may be reused, no clocks), a single byte wakes a poll() at once, and a process's FIFOs need no
cleanup when it dies beyond the unlink whoever finds them does.

Example::

    queue = HostQueue("/var/lib/app/locks")
    grant = queue.wait_and_acquire("job", "me", 30.0, 1, 0.05, 10.0, store._take)
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import mmap
import os
import struct
import sys
import threading
import time
import zlib
from typing import Protocol

from tenure._sync import _shim
from tenure._forks import in_child_after_fork
from tenure._names import safe_key
from tenure._types import Grant

try:
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
    termios = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_RING = os.O_WRONLY | os.O_NONBLOCK | _CLOEXEC
_yield_cpu = getattr(os, "sched_yield", lambda: None)  # Unix only
_POLL_CAP = 1.0  # the longest wait between a waiter's tries when no doorbell rings
_CACHED = 4096  # queue directories remembered per store: the names a process uses are few
_SUFFIX = ".queue"
_MAP_NAME = "waiters.map"
_BUCKETS = 65536  # bytes of the waiters' map: one per bucket of names
# Python 3.13+ maps without keeping a descriptor of its own; before, the map keeps one.
_MMAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}



class Take(Protocol):
    """The store's try: `queued` (a waiter whose turn it is) skips its check of the queue."""

    def __call__(self, name: str, holder: str, ttl: float, limit: int,
                       queued: bool) -> Grant | None: ...


class _Ticket:
    """A waiter's place in a name's queue: its FIFO's path and the two ends it keeps open."""

    __slots__ = ("bucket", "directory", "entry", "path", "reader", "writer")

    def __init__(self, directory: str, bucket: int, entry: str, reader: int,
                 writer: int) -> None:
        self.directory, self.bucket, self.entry = directory, bucket, entry
        self.path = os.path.join(directory, entry)
        self.reader, self.writer = reader, writer


class HostQueue:
    """The waiters' queues of one store's names, kept in `root` (see the module docstring).

    Example::

        queue = HostQueue("/var/lib/app/locks")
        if not queue.blocks("job"):
            ...  # nobody is queued: a try may take it
    """

    def __init__(self, root: str, make_root: bool = False) -> None:
        self.root = root
        self._make_root = make_root  # beside a database file: made on first use
        self._places: dict[str, tuple[str, int]] = {}  # name: (queue directory, map bucket)
        self._map: mmap.mmap | None = None
        self._map_tried = False
        self._tickets: set[_Ticket] = set()
        self._mutex = threading.Lock()
        self._count = itertools.count()
        in_child_after_fork(self, HostQueue._start_afresh_in_child)

    def _start_afresh_in_child(self) -> None:
        # The parent's tickets stay the parent's: close our copies of their FIFOs only.
        self._mutex = threading.Lock()
        for ticket in self._tickets:
            for fd in (ticket.reader, ticket.writer):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._tickets = set()

    def directory(self, name: str) -> str:
        """The queue directory of `name` (it exists only while someone waits)."""
        return self._place(name)[0]

    def _place(self, name: str) -> tuple[str, int]:
        found = self._places.get(name)
        if found is None:
            found = (os.path.join(self.root, safe_key(name) + _SUFFIX),
                     zlib.crc32(name.encode("utf-8", "surrogatepass")) % _BUCKETS)
            if len(self._places) < _CACHED:
                self._places[name] = found
        return found

    def _waiters_map(self) -> mmap.mmap | None:
        """The waiters' map (see the module docstring), made on first use (with the root
        beside a database file: SQLite keeps its -wal and -shm files there too); None where it
        cannot be made (then the queue directories are looked for)."""
        if self._map is not None or self._map_tried:
            return self._map
        try:
            if self._make_root:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.root)
            fd = os.open(os.path.join(self.root, _MAP_NAME),
                         os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o666)
        except FileNotFoundError:  # a store's own directory, removed: the store says so
            return None
        except OSError:
            self._map_tried = True
            return None
        try:
            if os.fstat(fd).st_size < _BUCKETS:  # mapped past its end, a file faults
                os.ftruncate(fd, _BUCKETS)  # the same size whoever does it first
            self._map = mmap.mmap(fd, _BUCKETS, **_MMAP_OPTIONS)
        except (OSError, ValueError):
            self._map_tried = True
        finally:
            os.close(fd)
        return self._map

    def _nobody_waits(self, directory: str, bucket: int) -> bool:
        """True when nobody waits for the name: its byte in the waiters' map is clear (no
        system call), or its queue directory does not exist."""
        waiters = self._map if self._map is not None else self._waiters_map()
        if waiters is not None:
            return not waiters[bucket]
        return not os.access(directory, os.F_OK)

    def _cleared(self, directory: str, bucket: int) -> None:
        """The queue directory was just removed: clear the name's byte, and set it back when
        another waiter made the directory again meanwhile."""
        waiters = self._waiters_map()
        if waiters is not None:
            waiters[bucket] = 0
            if os.access(directory, os.F_OK):
                waiters[bucket] = 1

    def blocks(self, name: str) -> bool:
        """True when a live waiter is queued for `name`: a try from outside the queue must
        leave the name to it. One failed system call when nobody waits.

        Example::

            if queue.blocks("job"):
                return None  # behind the waiters
        """
        place = self._places.get(name) or self._place(name)
        waiters = self._map
        if waiters is not None and not waiters[place[1]]:  # the uncontended path: no call
            return False
        directory, bucket = place
        if self._nobody_waits(directory, bucket):
            return False
        try:
            entries = os.listdir(directory)
        except OSError:  # gone meanwhile (or not ours to read: then we cannot be fair)
            return False
        if entries and _live_ahead(directory, entries, None, 1) > 0:
            return True
        self._remove_directory(directory, bucket)  # only dead waiters were left: no queue now
        return False

    def ring(self, name: str) -> None:
        """Wake the first live waiter of `name` whose doorbell is not ringing already (call it
        after a release or a break). Dead tickets met on the way are removed.

        Example::

            queue.ring("job")
        """
        place = self._places.get(name) or self._place(name)
        waiters = self._map
        if waiters is not None and not waiters[place[1]]:  # the uncontended path: no call
            return
        directory, bucket = place
        if self._nobody_waits(directory, bucket):
            return
        try:
            entries = os.listdir(directory)
        except OSError:
            return
        if not entries:  # the last waiter left with the name (see _leave): nobody to ring
            self._remove_directory(directory, bucket)
            return
        for entry in sorted(entries):
            path = os.path.join(directory, entry)
            try:
                fd = os.open(path, _RING)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # its waiter is gone (killed): not a waiter
                    _remove(path)
                continue  # left already (ENOENT), or not ours to ring (EACCES)
            try:
                if _pending(fd):  # rung by an earlier release, not woken yet: the next one
                    continue
                os.write(fd, b"\1")
                # Linux wakes the waiter on this CPU (wake-affine) and lets it wait for the
                # releaser's time slice: a releaser asking again at once (joining the queue)
                # kept it off the CPU for 0.3 ms, half of every contended hand-off here.
                # Yielding lets it run now (a no-op when nothing else is runnable here).
                _yield_cpu()
                return
            except BlockingIOError:  # full: it is ringing anyway
                return
            except OSError:  # EPIPE: it left meanwhile; the next one
                continue
            finally:
                os.close(fd)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float, take: Take) -> Grant | None:
        """The store's wait_and_acquire (see tenure._sync.stores._protocol): join the queue of
        `name`, try when fewer than `limit` live waiters are ahead, and wait for the doorbell
        (or a try every `timeout`, doubling up to a second) until the acquire's `patience`
        ends; leave the queue on the way out, whatever happens. The Grant taken, or None.

        Example::

            grant = queue.wait_and_acquire("job", "me", 30.0, 1, 0.05, 10.0, store._take)
        """
        until = _shim.monotonic() + max(timeout, patience)
        try:
            ticket = self._join(name)
        except OSError:  # no queue here: poll with the core's backoff, as without one
            _shim.sleep(timeout)
            return _sent(take, name, holder, ttl, limit, False)
        grant = None
        rung = False
        try:
            poll = timeout
            while True:
                # A ring picked this ticket: the first live one not rung yet, so its turn
                # (the listdir() of _turn would only delay the hand-off).
                if rung or self._turn(ticket, limit):
                    grant = _sent(take, name, holder, ttl, limit, True)
                    if grant is not None:
                        return grant
                left = until - _shim.monotonic()
                if left <= 0:
                    return None
                rung = _shim.wait_readable(ticket.reader, min(poll, left))
                if rung:
                    _drain(ticket.reader)
                else:  # no release rang: a try now and then finds a lease that expired
                    poll = max(poll, min(2 * poll, _POLL_CAP))
        finally:
            self._leave(ticket, with_the_name=grant is not None)

    def _join(self, name: str) -> _Ticket:
        """A new ticket at the end of the queue of `name`."""
        directory, bucket = self._place(name)
        entry = f"{time.monotonic_ns():020d}.{os.getpid()}.{next(self._count)}"
        temporary = os.path.join(self.root, f"{os.path.basename(directory)}.{entry}.tmp")
        try:
            os.mkfifo(temporary, 0o666)  # the umask applies
        except FileNotFoundError:  # the root (beside a database file) is made on first use
            if not self._make_root:  # a store's own directory, removed: the store says so
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.root)
            os.mkfifo(temporary, 0o666)
        reader = writer = -1
        try:
            reader = os.open(temporary, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
            writer = os.open(temporary, os.O_WRONLY | os.O_NONBLOCK | _CLOEXEC)
            ticket = _Ticket(directory, bucket, entry, reader, writer)
            for attempt in range(3):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(directory)
                try:
                    os.rename(temporary, ticket.path)
                    break
                except FileNotFoundError:  # the last waiter out removed the directory: again
                    if attempt == 2:
                        raise
        except BaseException:
            for fd in (reader, writer):
                if fd >= 0:
                    os.close(fd)
            _remove(temporary)
            raise
        with self._mutex:
            self._tickets.add(ticket)
        waiters = self._waiters_map()
        if waiters is not None:  # after the ticket is in: see _cleared
            waiters[bucket] = 1
        return ticket

    def _turn(self, ticket: _Ticket, limit: int) -> bool:
        """Whether fewer than `limit` live waiters are ahead of `ticket`."""
        try:
            entries = os.listdir(ticket.directory)
        except OSError:
            return True  # cannot tell: try, as without a queue
        ahead = [entry for entry in entries if entry < ticket.entry]
        return not ahead or _live_ahead(ticket.directory, ahead, ticket.entry, limit) < limit

    def _leave(self, ticket: _Ticket, with_the_name: bool) -> None:
        """Leave the queue: remove the ticket, close its FIFO, and remove the directory when it
        was the last one (a try then finds no queue at once).

        A waiter that leaves `with_the_name` (it took the lease) leaves the directory to its
        release's ring(), which removes it when nobody else queued meanwhile: an rmdir costs
        about 0.2 ms on ext4 here, as much as the rest of the hand-off, and would delay the
        lease on its way to the caller. Until then the directory only makes a try look (one
        listdir()), and any try that finds it empty removes it (blocks())."""
        with self._mutex:
            self._tickets.discard(ticket)
        _remove(ticket.path)
        for fd in (ticket.reader, ticket.writer):
            with contextlib.suppress(OSError):
                os.close(fd)
        if not with_the_name:
            self._remove_directory(ticket.directory, ticket.bucket)

    def _remove_directory(self, directory: str, bucket: int) -> None:
        """Remove the queue directory when it is empty, and clear the name's byte."""
        with contextlib.suppress(OSError):  # not empty: others wait
            os.rmdir(directory)
            self._cleared(directory, bucket)


def _sent(take: Take, name: str, holder: str, ttl: float, limit: int,
                queued: bool) -> Grant | None:
    """`take`, with the grant's sent_at set to when its request was sent."""
    sent_at = _shim.monotonic()
    grant = take(name, holder, ttl, limit, queued)
    return None if grant is None else grant._replace(sent_at=sent_at)


def _live_ahead(directory: str, entries: list[str], mine: str | None, enough: int) -> int:
    """How many of the queue's `entries` before `mine` (all when None) have a live waiter,
    counting up to `enough`; dead ones are removed on the way."""
    live = 0
    for entry in sorted(entries):
        if mine is not None and entry >= mine:
            break
        path = os.path.join(directory, entry)
        try:
            os.close(os.open(path, _RING))
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # killed while queued
                _remove(path)
                continue
            if exc.errno == errno.ENOENT:  # left meanwhile
                continue
            # Any other answer (EACCES: another user's): count it as live, to be safe.
        live += 1
        if live >= enough:
            break
    return live


def _pending(fd: int) -> bool:
    """Whether the FIFO of `fd` holds an unread byte (a doorbell rung, not yet answered)."""
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        unread: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    except OSError:
        return False
    return unread > 0


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        os.read(fd, 64)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
