"""The embedded stores' sections: memory://, file:// and sqlite://, in a temporary directory.

- memory://: tenure's two sync rows, no floor or peer (what the core costs on its own);
- file://: tenure sync and async next to a bare flock/unflock pair (the floor) and
  `filelock.FileLock` (the peer; goal: tenure >= 10x filelock);
- sqlite:// with synchronous=normal and =full: tenure sync and async next to two bare
  autocommit writes with tenure's pragmas (goal: floor ÷ tenure <= 1.5).

`sections` adds the multi-process benchmarks: the contended hand-off (file, sqlite), takeover
after a SIGKILL and after a clean release, and memory per 1,000 held leases, for tenure and, on
file://, filelock, portalocker's `Lock` and tooz's file driver (no peer library runs on
SQLite; memory:// is one process: clean releases between threads only).

Example::

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        cases = local_cases.cases(Path(tmp), stack, {"memory", "file", "sqlite"})
        more = local_cases.sections(Path(tmp), {"memory", "file", "sqlite"})
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import filelock
from cases import (
    LOCK_NAME,
    Case,
    Extras,
    ServerSection,
    async_case,
    kept_names_case,
    multi_lock_cases,
    optional_case,
    tenure_cases,
)
from handoff import Contender
from lineup import Entry, footprints, takers
from timing import Runner, timed_loop

import tenure

GOAL_FILE_VS_FILELOCK = 10.0  # file store cycles/s at least this many times filelock's
GOAL_SQLITE_VS_FLOOR = 1.5  # SQLite floor cycles/s / tenure cycles/s at most this


def cases(directory: Path, stack: ExitStack, stores: set[str],
          extras: Extras | None = None) -> list[Case]:
    """The rows of the embedded `stores` ("memory", "file", "sqlite"), each tenure row listed
    next to the floor or peer it is compared with; stores close with `stack`.

    Example::

        rows = cases(Path(tmp), stack, {"file"}, Extras())
    """

    def store_cases(section: str, url: str, suffix: str = "") -> list[Case]:
        store = tenure.connect(url)
        stack.callback(store.close)
        return tenure_cases(section, store.lock(LOCK_NAME), suffix)

    extras = extras if extras is not None else Extras()
    rows: list[Case] = []
    if "memory" in stores:
        rows += store_cases("memory://", "memory://")
    if "file" in stores:
        file_url = f"file://{directory / 'file-store'}"
        flock = Case("file://", "floor", "floor: bare `flock` pair (LOCK_EX + LOCK_NB, then "
                     "LOCK_UN)", flock_floor(directory / "raw.lock", stack), short="flock")
        peer = Case("file://", "peer", "peer: `with filelock.FileLock(path): pass`",
                    filelock_peer(directory / "peer.lock"), short="filelock")
        made = [optional_case("file://", "peer", "peer: portalocker `Lock` (`acquire()` with "
                              "`fail_when_locked=True` + `release()`)",
                              lambda: portalocker_cycle(directory / "portalocker.lock"), extras,
                              short="portalocker"),
                optional_case("file://", "peer", "peer: tooz file driver "
                              "(`acquire(blocking=False)` + `release()`)",
                              lambda: tooz_file_cycle(directory / "tooz", stack), extras,
                              short="tooz")]
        others = [case for case in made if case is not None]
        try_row, with_row = store_cases("file://", file_url)
        async_row = async_case("file://", file_url)
        for row in (try_row, with_row, async_row):
            row.floor, row.peers = flock, [peer]  # the goal's reference: filelock
        for row in (try_row, with_row):
            row.peer_goal = f"file store >= {GOAL_FILE_VS_FILELOCK:g}x filelock"
            row.peer_limit = GOAL_FILE_VS_FILELOCK
        for other in others:
            other.floor = flock
        kept = kept_names_case("file://", try_row, file_url, stack)
        # compared rows side by side
        rows += [try_row, flock, with_row, peer, async_row, kept, *others]
        multi = tenure.connect(file_url)
        stack.callback(multi.close)
        rows += multi_lock_cases("file://", multi)
    if "sqlite" in stores:
        for synchronous, query in (("NORMAL", ""), ("FULL", "?synchronous=full")):
            section = f"sqlite:// (synchronous={synchronous.lower()})"
            url = f"sqlite:///{directory / f'store-{synchronous.lower()}.db'}{query}"
            floor_db = directory / f"floor-{synchronous.lower()}.db"
            floor = Case(section, "floor", "floor: 2 autocommit writes (INSERT OR REPLACE, "
                         "UPDATE)", sqlite_floor(floor_db, synchronous, stack))
            try_row, with_row = store_cases(section, url)
            async_row = async_case(section, url)
            for row in (try_row, with_row, async_row):
                row.floor = floor
            for row in (try_row, with_row):
                row.goal = f"SQLite floor ÷ tenure <= {GOAL_SQLITE_VS_FLOOR:g}"
                row.goal_limit = GOAL_SQLITE_VS_FLOOR
            rows += [try_row, floor, with_row, async_row,
                     kept_names_case(section, try_row, url, stack)]
            if synchronous == "NORMAL":
                multi = tenure.connect(url)
                stack.callback(multi.close)
                rows += multi_lock_cases(section, multi)
    return rows


def flock_floor(path: Path, stack: ExitStack) -> Runner:
    """A bare `flock(LOCK_EX | LOCK_NB)` + `flock(LOCK_UN)` pair on an already-open fd.

    Example::

        with ExitStack() as stack:
            run = flock_floor(Path("/tmp/raw.lock"), stack)
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    stack.callback(os.close, fd)

    def cycle() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)

    return timed_loop(cycle)


def sqlite_floor(path: Path, synchronous: str, stack: ExitStack) -> Runner:
    """Two bare autocommit write transactions per cycle, with tenure's connection settings.

    Same pragmas as tenure's SQLite store (busy_timeout 5 s, WAL, the given synchronous) and a
    cached connection in autocommit mode; "acquire" is an INSERT OR REPLACE of the row and
    "release" an UPDATE of it, on a WITHOUT ROWID table keyed by text.

    Example::

        with ExitStack() as stack:
            run = sqlite_floor(Path("/tmp/floor.db"), "NORMAL", stack)
    """
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    stack.callback(db.close)
    db.execute("PRAGMA busy_timeout = 5000")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID")
    token = iter(range(1, sys.maxsize))
    key = (LOCK_NAME,)

    def cycle() -> None:
        db.execute("INSERT OR REPLACE INTO t(k, v) VALUES (?, ?)", (LOCK_NAME, next(token)))
        db.execute("UPDATE t SET v = 0 WHERE k = ?", key)

    return timed_loop(cycle)


def filelock_peer(path: Path) -> Runner:
    """The peer library: `with filelock.FileLock(path): pass`, one FileLock object reused.

    Example::

        run = filelock_peer(Path("/tmp/peer.lock"))
    """
    peer = filelock.FileLock(str(path))

    def cycle() -> None:
        with peer:
            pass

    return timed_loop(cycle)


def sections(directory: Path, stores: set[str]) -> list[ServerSection]:
    """The multi-process benchmarks of the embedded `stores`: hand-off, takeover, memory.

    Example::

        more = sections(Path(tmp), {"file", "sqlite"})
    """
    found = []
    waits = "waiters queued FIFO, woken by the release; a try every 10 ms .. 1 s"
    peers = f"file://{directory / 'multi-peers'}"  # the file-lock peers' and floor's directory
    flock_floor = Entry(FLOCK_FLOOR, "flock", peers, expires=False, floor=True)
    if "memory" in stores:
        entries = [Entry("tenure (two threads of one process)", "tenure", "memory://",
                         tenure=True, kill=False)]
        found.append(ServerSection("memory://", "memory://", [], takers=takers(entries),
                                   footprints=footprints(entries)))
    if "file" in stores:
        url = f"file://{directory / 'multi-file-store'}"
        entries = [
            Entry(f"tenure (kernel `flock`; {waits})", "tenure", url,
                  tenure=True),
            *(Entry(label, library, peers, expires=False,
                    renewal="nothing to renew (no expiry)") for label, library in FILE_PEERS),
            flock_floor,
        ]
        # the contended peers lock files in the store's own directory
        contended = [Contender(entries[0].label, "tenure", url, fair=True),
                     *file_peers([entry for entry in entries[1:] if not entry.floor], url)]
        found.append(ServerSection("file://", url, [], contended, takers=takers(entries),
                                   footprints=footprints(entries)))
    if "sqlite" in stores:
        url = f"sqlite:///{directory / 'multi-store.db'}"
        entries = [Entry(f"tenure ({waits})", "tenure", url, tenure=True), flock_floor]
        file_locks = [Entry(label, library, "") for label, library in FILE_PEERS]
        found.append(ServerSection("sqlite:// (synchronous=normal)", url, [],
                                   [Contender(entries[0].label, "tenure", url, fair=True),
                                    *file_peers(file_locks, f"file://{directory}")],
                                   takers=takers(entries), footprints=footprints(entries)))
    return found


FLOCK_FLOOR = ("floor: a bare blocking `flock` (the kernel wakes the waiter at the unlock; no "
               "expiry, no fencing)")
FILE_PEERS = (("filelock `FileLock` (polls every 0.05 s)", "filelock"),
              ("portalocker `Lock` (polls every 0.25 s)", "portalocker-file"),
              ("tooz file driver (`fasteners` lock, polls)", "tooz"))


def file_peers(entries: list[Entry], url: str) -> list[Contender]:
    """The contended runs of the file-lock peers, their lock files in the directory of `url`
    (the file store's, or the SQLite database's) with the label "... on the same directory".

    Example::

        contenders = file_peers([Entry("filelock", "filelock", "")], "file:///tmp/locks")
    """
    return [Contender(f"{entry.label}, on the same directory", entry.library, url)
            for entry in entries]


def portalocker_cycle(path: Path) -> Callable[[], object]:
    """portalocker's file `Lock`: a non-blocking acquire + release, one Lock object reused.

    Example::

        cycle = portalocker_cycle(Path("/tmp/portalocker.lock"))
    """
    import portalocker

    peer = portalocker.Lock(str(path), timeout=0, fail_when_locked=True)

    def cycle() -> None:
        peer.acquire()
        peer.release()

    return cycle


def tooz_file_cycle(directory: Path, stack: ExitStack) -> Callable[[], object]:
    """tooz's file driver: `acquire(blocking=False)` + `release()`, one lock object reused.

    Example::

        with ExitStack() as stack:
            cycle = tooz_file_cycle(Path("/tmp/tooz"), stack)
    """
    from tooz import coordination

    coordinator = coordination.get_coordinator(f"file://{directory}", b"bench-peer")
    coordinator.start()
    stack.callback(coordinator.stop)
    lock = coordinator.get_lock(b"bench")

    def cycle() -> None:
        if not lock.acquire(blocking=False):
            raise RuntimeError("tooz refused an uncontended lock")
        lock.release()

    return cycle
