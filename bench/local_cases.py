"""The embedded stores' sections: memory://, file:// and sqlite://, in a temporary directory.

- memory://: tenure's two sync rows, no floor or peer (what the core costs on its own);
- file://: tenure sync and async next to a bare flock/unflock pair (the floor) and
  `filelock.FileLock` (the peer; goal: tenure >= 10x filelock);
- sqlite:// with synchronous=normal and =full: tenure sync and async next to two bare
  autocommit writes with tenure's pragmas (goal: floor ÷ tenure <= 1.5).

Example::

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        cases = local_cases.cases(Path(tmp), stack, {"memory", "file", "sqlite"})
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path

import filelock
from cases import LOCK_NAME, Case, async_case, tenure_cases
from timing import Runner, timed_loop

import tenure

GOAL_FILE_VS_FILELOCK = 10.0  # file store cycles/s at least this many times filelock's
GOAL_SQLITE_VS_FLOOR = 1.5  # SQLite floor cycles/s / tenure cycles/s at most this


def cases(directory: Path, stack: ExitStack, stores: set[str]) -> list[Case]:
    """The rows of the embedded `stores` ("memory", "file", "sqlite"), each tenure row listed
    next to the floor or peer it is compared with; stores close with `stack`.

    Example::

        rows = cases(Path(tmp), stack, {"file"})
    """

    def store_cases(section: str, url: str, suffix: str = "") -> list[Case]:
        store = tenure.connect(url)
        stack.callback(store.close)
        return tenure_cases(section, store.lock(LOCK_NAME), suffix)

    rows: list[Case] = []
    if "memory" in stores:
        rows += store_cases("memory://", "memory://")
    if "file" in stores:
        file_url = f"file://{directory / 'file-store'}"
        flock = Case("file://", "floor", "floor: bare `flock` pair (LOCK_EX + LOCK_NB, then "
                     "LOCK_UN)", flock_floor(directory / "raw.lock", stack), short="flock")
        peer = Case("file://", "peer", "peer: `with filelock.FileLock(path): pass`",
                    filelock_peer(directory / "peer.lock"), short="filelock")
        try_row, with_row = store_cases("file://", file_url)
        async_row = async_case("file://", file_url)
        for row in (try_row, with_row, async_row):
            row.floor, row.peers = flock, [peer]
        for row in (try_row, with_row):
            row.peer_goal = f"file store >= {GOAL_FILE_VS_FILELOCK:g}x filelock"
            row.peer_limit = GOAL_FILE_VS_FILELOCK
        rows += [try_row, flock, with_row, peer, async_row]  # compared rows side by side
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
            rows += [try_row, floor, with_row, async_row]
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
