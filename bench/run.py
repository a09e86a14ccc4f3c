"""Measure tenure's uncontended lock cycles next to the raw store floors and `filelock`.

One process, one run: every benchmark below is warmed up and then measured in interleaved
rounds (round 1 of every case, then round 2, ...), so a noisy neighbour on this shared VM slows
compared cases alike and the ratios stay fair. Each round of a case runs a fixed number of
cycles, about `--seconds` worth; tables report medians over the rounds (`--repeats`, fewer if
the `--budget` runs out after 5).

Cases, all on one lock name reused for every cycle, in a fresh temporary directory:

- tenure, sync API: `lock.try_acquire().release()` and `with lock.acquire(): pass`, for
  memory://, file://, sqlite:// (synchronous=normal) and sqlite://...?synchronous=full;
- tenure, async API: `async with lock.acquire(): pass` under `asyncio.run` (file, sqlite);
- floors: a bare flock/unflock pair on an open fd; two bare autocommit SQLite writes on a
  WAL database with tenure's pragmas;
- peer: `with filelock.FileLock(path): pass`;
- azblob:// on Azurite (started with the test suite's launcher, tests/servers.py, in a fresh
  container): tenure's sync rows with fencing on (and off, when the store has `fencing=False`),
  an async row, and the bare azure-storage-blob SDK's floors on the same lock blob: lease
  acquire + release, and acquire + `set_sequence_number("increment")` + release (see
  bench/azblob_bench.py). When Azurite cannot start, the report says why and goes on.

Usage::

    python bench/run.py --output BENCHMARKS.md      # what `make bench` runs
    python bench/run.py --repeats 3 --seconds 0.1   # a quick look, nothing written
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import gc
import math
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import azblob_bench
import filelock
from timing import Runner, timed_loop

import tenure
import tenure.aio

LOCK_NAME = "bench"
GOAL_FILE_VS_FILELOCK = 10.0  # file store cycles/s at least this many times filelock's
GOAL_SQLITE_VS_FLOOR = 1.5  # SQLite floor cycles/s / tenure cycles/s at most this
GOAL_AZBLOB_VS_FLOOR = 1.1  # bare-SDK floor cycles/s / tenure cycles/s at most this
AZBLOB = "azblob:// (Azurite)"
AZBLOB_SCALE = 2.0  # azblob rounds are this many times --seconds (a cycle is ~10 ms)
MIN_ROUNDS = 5  # rounds run even when the time budget is exceeded
MIN_CYCLES = 20  # per round and case
ASYNC_WARMUP_CYCLES = 50  # per asyncio.run: starts the worker thread, opens the connection



@dataclass(eq=False)  # a case is equal only to itself
class Case:
    """One benchmark row: how to run n cycles, and what to compare the result with.

    Example::

        Case("file://", "floor", "floor: bare flock pair", timed_loop(cycle))
    """

    section: str
    kind: str  # "tenure", "floor" or "peer"
    label: str
    run: Runner
    floor: Case | None = None
    peer: Case | None = None
    goal: str = ""  # a goal on floor ÷ this: its wording in the goals table...
    goal_limit: float | None = None  # ...and the largest ratio that meets it
    also: list[Case] = field(default_factory=list)  # more floors, compared below the table
    scale: float = 1.0  # a round of this case lasts scale x --seconds
    fragile: bool = False  # an error drops its section from the report instead of the run
    cycles: list[int] = field(default_factory=list)  # per round
    seconds: list[float] = field(default_factory=list)  # per round

    @property
    def rates(self) -> list[float]:
        """Cycles per second of each round."""
        return [cycles / seconds for cycles, seconds in zip(self.cycles, self.seconds, strict=True)]

    @property
    def median(self) -> float:
        """Median cycles per second over the rounds."""
        return statistics.median(self.rates)


# -- what a cycle is ------------------------------------------------------------------------------


def tenure_cases(section: str, lock: tenure.Lock) -> list[Case]:
    """The two sync tenure rows of one store: try_acquire/release and `with acquire()`.

    Example::

        cases = tenure_cases("memory://", tenure.connect("memory://").lock("x"))
    """

    def try_release() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    def with_acquire() -> None:
        with lock.acquire():
            pass

    return [
        Case(section, "tenure", "tenure: `lock.try_acquire().release()`", timed_loop(try_release)),
        Case(section, "tenure", "tenure: `with lock.acquire(): pass`", timed_loop(with_acquire)),
    ]


def async_case(section: str, url: str, options: dict[str, Any] | None = None,
               warmup: int = ASYNC_WARMUP_CYCLES) -> Case:
    """The async row of a store: `async with lock.acquire(): pass`, one asyncio.run per round.

    The store is connected (with keyword `options`) and warmed up (`warmup` cycles) inside each
    asyncio.run; only the cycles are timed.

    Example::

        case = async_case("file://", "file:///tmp/locks")
    """

    async def cycles(count: int) -> float:
        async with tenure.aio.connect(url, **(options or {})) as store:
            lock = store.lock(LOCK_NAME)
            for _ in range(warmup):
                async with lock.acquire():
                    pass
            start = time.perf_counter()
            for _ in range(count):
                async with lock.acquire():
                    pass
            return time.perf_counter() - start

    def run(count: int) -> float:
        return asyncio.run(cycles(count))

    return Case(section, "tenure", "tenure async: `async with lock.acquire(): pass`", run)


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


@dataclass
class Extras:
    """What the report says besides the measured rows: facts, section notes, goals not measured.

    Example::

        extras = Extras(); extras.notes[AZBLOB] = "Not measured: node is missing."
    """

    facts: list[tuple[str, str]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)  # by section, shown below its table
    unmeasured: list[tuple[str, str, str]] = field(default_factory=list)  # goal, case, why


def azblob_cases(directory: Path, stack: ExitStack, extras: Extras) -> list[Case]:
    """The azblob rows on a fresh Azurite and container; none (and a note) when it cannot start.

    Rows: tenure sync `try_acquire().release()` and `with acquire()` with fencing on, next to
    the bare SDK's 3-request floor (acquire + increment + release) on the same lock blob; the
    same with fencing off next to the 2-request floor (acquire + release), when the store takes
    `fencing=False`; an async row next to the async SDK's 3-request floor.

    Example::

        cases = azblob_cases(Path(tmp), stack, extras)
    """
    fencing_on_goal = (f"azblob fencing on: SDK acquire + increment + release ÷ tenure "
                       f"<= {GOAL_AZBLOB_VS_FLOOR:g}")
    fencing_off_goal = (f"azblob fencing off: SDK acquire + release ÷ tenure "
                        f"<= {GOAL_AZBLOB_VS_FLOOR:g}")
    emulator = azblob_bench.start_azurite(directory / "azurite", stack)
    if isinstance(emulator, azblob_bench.Emulator):
        extras.facts += emulator.facts
        try:
            return _azblob_rows(emulator.connection_string, stack, extras,
                                fencing_on_goal, fencing_off_goal)
        except Exception as exc:  # the emulator started but does not serve tenure: say so
            why = f"setting up failed ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
    else:
        why = emulator.rstrip(".")
    extras.notes[AZBLOB] = f"**Not measured**: {why}."
    extras.unmeasured += [(fencing_on_goal, AZBLOB, why), (fencing_off_goal, AZBLOB, why)]
    return []


def _azblob_rows(secret: str, stack: ExitStack, extras: Extras, fencing_on_goal: str,
                 fencing_off_goal: str) -> list[Case]:
    """azblob_cases' rows, on a running emulator reached with the connection string `secret`."""
    container = azblob_bench.container_name()
    url = f"azblob:///{container}"

    store = tenure.connect(url, connection_string=secret)
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME)
    lock.try_acquire().release()  # type: ignore[union-attr]  # creates the container and blob
    blob = azblob_bench.lock_blob(secret, container)
    if blob is None:
        blob = "floor/lock"
        azblob_bench.create_blob(secret, container, blob)
        extras.notes[AZBLOB] = (f"The floors use an empty page blob of their own, `{blob}` "
                                "(tenure's lock blob was not found by listing the container).")
    else:
        extras.notes[AZBLOB] = f"The floors reuse tenure's lock blob `{blob}`."

    def floor(label: str, increment: bool) -> Case:
        run = azblob_bench.sdk_floor(secret, container, blob, increment=increment, stack=stack)
        return Case(AZBLOB, "floor", label, run)

    three = floor('floor: bare SDK `BlobLeaseClient` acquire + `set_sequence_number'
                  '("increment")` + release (3 requests)', increment=True)
    two = floor("floor: bare SDK `BlobLeaseClient` acquire + release (2 requests)",
                increment=False)
    on_try, on_with = tenure_cases(AZBLOB, lock)
    for row in (on_try, on_with):
        row.label += ", fencing on"
        row.floor, row.goal, row.also = three, fencing_on_goal, [two]
        row.goal_limit = GOAL_AZBLOB_VS_FLOOR
    cases = [on_try, three, on_with]

    try:
        unfenced = tenure.connect(url, connection_string=secret, fencing=False)
    except (TypeError, ValueError) as exc:  # InvalidArgument: the store has no such option
        why = f"the azblob store has no `fencing=False` option ({exc})"
        extras.unmeasured.append((fencing_off_goal, AZBLOB, why))
        extras.notes[AZBLOB] += f" Fencing off is **not measured**: {why}."
        cases.append(two)
    else:
        stack.callback(unfenced.close)
        off_try, off_with = tenure_cases(AZBLOB, unfenced.lock(LOCK_NAME + "-unfenced"))
        for row in (off_try, off_with):
            row.label += ", fencing off (`fencing=False`)"
            row.floor, row.goal, row.goal_limit = two, fencing_off_goal, GOAL_AZBLOB_VS_FLOOR
        cases += [off_try, two, off_with]

    counted = "\n".join(
        f"- {case.label}: {azblob_bench.requests_per_cycle(case.run):g}" for case in cases)
    extras.notes[AZBLOB] += (
        "\n\nHTTP requests per sync cycle, counted at the `requests` adapter over 10 untimed "
        f"cycles before the warm-up (background threads included):\n\n{counted}")

    async_floor = Case(AZBLOB, "floor", "floor: async SDK acquire + increment + release "
                       "(3 requests, aio)",
                       azblob_bench.async_sdk_floor(secret, container, blob, increment=True))
    async_row = async_case(AZBLOB, url, {"connection_string": secret},
                           warmup=azblob_bench.ASYNC_WARMUP_CYCLES)
    async_row.label += ", fencing on"
    async_row.floor = async_floor
    cases += [async_row, async_floor]
    for case in cases:
        case.scale, case.fragile = AZBLOB_SCALE, True
    return cases


def build_cases(directory: Path, stack: ExitStack, extras: Extras | None = None) -> list[Case]:
    """Every row of the report, with its floor and peer linked; stores close with `stack`.

    Example::

        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            cases = build_cases(Path(tmp), stack)
    """

    def store_cases(section: str, url: str) -> list[Case]:
        store = tenure.connect(url)
        stack.callback(store.close)
        return tenure_cases(section, store.lock(LOCK_NAME))

    cases = store_cases("memory://", "memory://")

    file_url = f"file://{directory / 'file-store'}"
    flock = Case("file://", "floor", "floor: bare `flock` pair (LOCK_EX + LOCK_NB, then LOCK_UN)",
                 flock_floor(directory / "raw.lock", stack))
    peer = Case("file://", "peer", "peer: `with filelock.FileLock(path): pass`",
                filelock_peer(directory / "peer.lock"))
    try_row, with_row = store_cases("file://", file_url)
    async_row = async_case("file://", file_url)
    for row in (try_row, with_row, async_row):
        row.floor, row.peer = flock, peer
    cases += [try_row, flock, with_row, peer, async_row]  # each comparison runs side by side

    for synchronous, query in (("NORMAL", ""), ("FULL", "?synchronous=full")):
        section = f"sqlite:// (synchronous={synchronous.lower()})"
        url = f"sqlite:///{directory / f'store-{synchronous.lower()}.db'}{query}"
        floor_db = directory / f"floor-{synchronous.lower()}.db"
        floor = Case(section, "floor", "floor: 2 autocommit writes (INSERT OR REPLACE, UPDATE)",
                     sqlite_floor(floor_db, synchronous, stack))
        try_row, with_row = store_cases(section, url)
        async_row = async_case(section, url)
        for row in (try_row, with_row, async_row):
            row.floor = floor
        for row in (try_row, with_row):
            row.goal = f"SQLite floor ÷ tenure <= {GOAL_SQLITE_VS_FLOOR:g}"
            row.goal_limit = GOAL_SQLITE_VS_FLOOR
        cases += [try_row, floor, with_row, async_row]
    return cases + azblob_cases(directory, stack, extras or Extras())


# -- measuring ----------------------------------------------------------------------------------


def warm_up(case: Case, seconds: float) -> float:
    """Run doubling batches of `case` until one takes a tenth of `seconds`; its cycles/s.

    Example::

        rate = warm_up(case, 0.3)
    """
    cycles = 10
    while True:
        elapsed = case.run(cycles)
        if elapsed >= seconds / 10 or cycles >= 10_000_000:
            return cycles / elapsed
        cycles *= 2


def cycles_for(rate: float, seconds: float) -> int:
    """How many cycles take about `seconds` at `rate` cycles/s (at least MIN_CYCLES).

    Example:
        >>> cycles_for(1000.0, 0.3)
        300
    """
    return max(MIN_CYCLES, math.ceil(rate * seconds))


def measure(cases: list[Case], repeats: int, seconds: float, budget: float,
            extras: Extras | None = None) -> int:
    """Warm every case up, then run up to `repeats` interleaved rounds; the rounds run.

    Each round runs every case once, for about `seconds` (its cycle count follows the case's
    rate in the previous round, so a machine that slows down does not stretch the run).
    Rounds alternate between the listed order and its reverse (ABBA), so a slow drift of the
    machine does not favour the cases listed first; build_cases lists each row next to the
    floor or peer it is compared with. After MIN_ROUNDS, no round starts that would end past
    `budget` seconds. A full collection runs before each timed batch; gc stays enabled while
    timing. A round of a case lasts `seconds` x its `scale`.

    When a fragile case fails (its server died, say), every case of its section is removed
    from `cases`, and the error goes into `extras` (a note on the section, its goals as not
    measured); the others go on.

    Example::

        rounds = measure(cases, repeats=11, seconds=0.3, budget=100.0)
    """
    extras = extras or Extras()
    start = time.perf_counter()
    rates: dict[int, float] = {}
    for case in list(cases):
        if case in cases:
            _guarded(cases, case, extras, lambda case=case: rates.update(
                {id(case): warm_up(case, seconds * case.scale)}))
    for round_number in range(repeats):
        round_start = time.perf_counter()
        _progress(f"round {round_number + 1}/{repeats}")
        for case in list(cases if round_number % 2 == 0 else reversed(cases)):
            if case not in cases:
                continue  # its section failed earlier in this round
            cycles = cycles_for(rates[id(case)], seconds * case.scale)
            gc.collect()
            elapsed = _guarded(cases, case, extras, lambda case=case, n=cycles: case.run(n))
            if elapsed is None:
                continue
            case.cycles.append(cycles)
            case.seconds.append(elapsed)
            rates[id(case)] = cycles / elapsed
        now = time.perf_counter()
        done = round_number + 1
        if done >= MIN_ROUNDS and done < repeats and now + (now - round_start) > start + budget:
            _progress(f"stopping after {done} rounds: the {budget:g} s budget would be exceeded")
            return done
    return repeats


def _guarded(cases: list[Case], case: Case, extras: Extras,
             step: Callable[[], Any]) -> Any:
    """`step()`; for a fragile case, an error drops its section and returns None instead."""
    if not case.fragile:
        return step()
    try:
        return step()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        why = f"the row \"{case.label}\" failed during the run ({reason})"
        extras.notes[case.section] = f"**Not measured**: {why}; the section's rows were dropped."
        dropped = [other for other in cases if other.section == case.section]
        extras.unmeasured += [(other.goal, _where(other), why) for other in dropped
                              if other.goal_limit is not None]
        _progress(f"{case.section} dropped: {reason}")
        cases[:] = [other for other in cases if other.section != case.section]
        return None


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# -- reporting ----------------------------------------------------------------------------------


def machine_facts(directory: Path) -> list[tuple[str, str]]:
    """Facts that explain the numbers: CPUs, load, versions, kernel, temp file system.

    Example::

        for name, value in machine_facts(Path(tempfile.gettempdir())):
            print(name, value)
    """
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        ("CPUs (nproc)", str(usable)),
        ("load average at start (1, 5, 15 min)", load_average()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("SQLite", sqlite3.sqlite_version),
        ("kernel / platform", platform.platform()),
        ("temp directory file system", _file_system(directory)),
        ("tenure", tenure.__version__),
        ("filelock", filelock.__version__),
    ]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: how busy the shared machine was.

    Example::

        load_average()  # '0.52, 0.40, 0.31'
    """
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def _file_system(path: Path) -> str:
    """The type and mount point of the file system holding `path`, from /proc/mounts."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best = ("", "unknown")
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3:
            mount_point, kind = fields[1], fields[2]
            inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best[0]):
                best = (mount_point, kind)
    return f"{best[1]} (mounted at {best[0] or '?'})"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def per_round(numerator: Case, denominator: Case) -> list[float]:
    """The cycles/s ratio of two cases in each round (they ran seconds apart in a round).

    Pairing by round cancels most of the noise both cases saw together.

    Example::

        per_round(case.floor, case)  # [1.31, 1.28, ...]
    """
    return [ours / theirs
            for ours, theirs in zip(numerator.rates, denominator.rates, strict=True)]


def floor_ratio(case: Case) -> float | None:
    """Median over rounds of floor cycles/s ÷ this row's (1.0 = as fast as the floor).

    Example::

        floor_ratio(case)  # 1.31
    """
    return None if case.floor is None else statistics.median(per_round(case.floor, case))


def peer_ratio(case: Case) -> float | None:
    """Median over rounds of this row's cycles/s ÷ filelock's (10.0 = ten times as many).

    Example::

        peer_ratio(case)  # 14.2
    """
    return None if case.peer is None else statistics.median(per_round(case, case.peer))


_KIND_ORDER = ("tenure", "floor", "peer")


def section_table(cases: list[Case]) -> str:
    """A markdown table of one section's rows (all cases sharing `cases[0].section`).

    Example::

        print(section_table([case for case in cases if case.section == "file://"]))
    """
    header = (
        "| case | cycles/s (median) | µs/cycle (median) | spread, cycles/s (min-max) "
        "| floor ÷ this | this ÷ filelock |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    rows = [
        f"| {case.label} | {case.median:,.0f} | {1e6 / case.median:,.1f} "
        f"| {min(case.rates):,.0f} - {max(case.rates):,.0f} "
        f"| {_ratio(floor_ratio(case))} | {_ratio(peer_ratio(case))} |"
        for case in sorted(cases, key=lambda case: _KIND_ORDER.index(case.kind))
    ]
    also = [
        f"- {case.label.removeprefix('tenure: ')} vs {other.label.removeprefix('floor: ')}: "
        f"floor ÷ this {_ratio(statistics.median(per_round(other, case)))} "
        f"(per-round range {_range(per_round(other, case))})"
        for case in cases for other in case.also if other.rates
    ]
    return "\n".join([header, *rows, *(["", *also] if also else [])])


def _where(case: Case) -> str:
    return f"{case.section} {case.label.removeprefix('tenure: ')}"


def _range(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}"


def goals(cases: list[Case], unmeasured: list[tuple[str, str, str]] | None = None,
          ) -> tuple[str, bool]:
    """The goals section in markdown, and whether every goal is met.

    File store: each sync file:// row at least 10x filelock's cycles/s. SQLite store: each
    sync sqlite:// row at most 1.5x slower than its floor; azblob: each sync row at most 1.1x
    slower than its bare-SDK floor (the row's `goal_limit`). Async rows are informational.
    `unmeasured` goals (goal, case, why) are listed as not measured.

    Example::

        text, all_met = goals(cases)
    """
    lines = [
        "| goal | case | cycles/s: tenure, reference (medians) | ratio (median) "
        "| per-round range | met? |",
        "|---|---|---:|---:|---:|:---:|",
    ]
    all_met = True
    sync_rows = [case for case in cases if case.kind == "tenure" and "async" not in case.label]
    for case in sync_rows:
        if case.peer is not None:
            value, goal = peer_ratio(case), f"file store >= {GOAL_FILE_VS_FILELOCK:g}x filelock"
            met = value is not None and value >= GOAL_FILE_VS_FILELOCK
            spread = _range(per_round(case, case.peer))
            reference = case.peer
        elif case.floor is not None and case.goal_limit is not None:
            value, goal = floor_ratio(case), case.goal
            met = value is not None and value <= case.goal_limit
            spread = _range(per_round(case.floor, case))
            reference = case.floor
        else:
            continue
        all_met = all_met and met
        where = _where(case)
        which = "filelock" if reference.kind == "peer" else "floor"
        numbers = f"{case.median:,.0f}, {which} {reference.median:,.0f}"
        lines.append(f"| {goal} | {where} | {numbers} | {_ratio(value)} | {spread} "
                     f"| {'met' if met else '**not met**'} |")
    for goal, where, why in unmeasured or []:
        lines.append(f"| {goal} | {where} | | | | not measured: {why} |")
    verdict = "All goals met." if all_met else "**Not all goals are met** (see the table)."
    if unmeasured:
        verdict += f" {len(unmeasured)} goal(s) could not be measured in this run."
    return "\n".join([*lines, "", verdict]), all_met


METHOD = """\
- **A cycle** is one uncontended acquire plus one release of the same lock name, by the same
  holder, on a store connected once before timing (the lock object and connections are reused;
  tenure's renewal thread/task runs as usual, ttl 30 s). `try_acquire().release()` skips the
  waiting machinery; `with lock.acquire(): pass` is the everyday form. Every tenure cycle also
  issues a fencing token (except the azblob rows with `fencing=False`, whose grants carry
  token 0).
- **Floors** are what the store cannot go below from Python:
  - file: `fcntl.flock(fd, LOCK_EX | LOCK_NB)` then `fcntl.flock(fd, LOCK_UN)` on an fd opened
    once (tenure's file store also keeps its lock files open and mmaps the counter).
  - SQLite: two autocommit write transactions on a cached `sqlite3` connection
    (`isolation_level=None`) with tenure's pragmas (`busy_timeout = 5000`,
    `journal_mode = WAL`, `synchronous = NORMAL`, resp. `FULL`), on
    `t(k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID`: `INSERT OR REPLACE INTO t(k, v)
    VALUES (?, ?)` standing for acquire and `UPDATE t SET v = 0 WHERE k = ?` for release.
    tenure's store also uses exactly one autocommit statement each (an upsert with a
    `max(token)` subquery and `RETURNING`, and a guarded UPDATE), so the floor is the same
    number of commits.
  - azblob: the bare azure-storage-blob SDK, no tenure code, on the same Azurite, container
    and lock blob as tenure's fencing-on rows, through its own `ContainerClient
    .from_connection_string(...)` (SDK defaults, one client and connection pool reused). Per
    cycle a new `BlobLeaseClient(blob)` (the SDK proposes a uuid4 lease id, as tenure does),
    `acquire(lease_duration={lease})` then `release()`: the 2-request floor for fencing off;
    with `blob.set_sequence_number("increment", lease=lease.id)` in between: the 3-request
    floor, the same three requests tenure's fencing token needs. The async floor does the
    3 requests with `azure.storage.blob.aio` (aiohttp).
- **Peer**: `filelock.FileLock(path)` (one object reused, `with lock: pass`) in the same
  temporary directory.
- **Async rows** run `async with lock.acquire(): pass` with `tenure.aio.connect(url)` under
  `asyncio.run`, one `asyncio.run` per round; connecting and {warmup} warm-up cycles happen
  inside it, before the timer starts ({az_warmup} for azblob rows and the async SDK floor,
  whose cycles take milliseconds).
- **azblob:// runs on Azurite {azurite}**, the Azure Storage emulator, started for this run by
  the test suite's own launcher (tests/servers.py: in-memory persistence, telemetry off, a free
  loopback port) and stopped at the end; a fresh container per run, created by tenure's first
  acquire (`tenure.connect("azblob:///CONTAINER", connection_string=...)`, the sync API;
  `tenure.aio.connect` for the async row). **The absolute figures are emulator figures, not
  Azure's**: every request is an HTTP round trip over loopback to a Node.js process that
  shares these CPUs with the benchmark; against Azure each request costs a network round trip
  and service time instead, so the cycles/s here do not carry over, while the request count
  behind each ratio does. azblob rounds last {az_scale:g}x as long as the others (fewer, slower
  cycles). The goal is floor ÷ tenure <= {az_goal:g}x: fencing on against the 3-request floor,
  fencing off (`fencing=False`) against the 2-request floor; the fencing-on rows' ratio to the
  2-request floor is shown below the azblob table, and so are the HTTP requests each sync
  cycle sent (counted by wrapping `requests.adapters.HTTPAdapter.send` during 10 untimed
  cycles): besides the lease requests and the increment, tenure's azblob store writes the
  holder's identity into the blob's metadata after each grant (in the background, for
  `store.leases()` and `tenure locks`) and waits for that write before the release.
- **Repetitions**: each case is first warmed up (doubling batches until one takes a tenth of
  the round length), then timed in {repeats} rounds. A round of a case is a fixed number of
  cycles chosen before it starts: about {seconds:g} s at the case's rate in the previous round
  (at least {min_cycles}). Every round runs every case once, each tenure row
  next to the floor or peer it is compared with, in the listed order on even rounds and in
  reverse on odd ones (ABBA), so noise on this shared VM hits compared cases alike.
  `gc.collect()` runs before each timed batch; gc stays enabled while timing.
- **Columns**: cycles/s median and min-max over the rounds; µs/cycle = 1e6 / median cycles/s.
  Ratios are computed per round (the two cases ran seconds apart) and the median over rounds
  is shown, which cancels most of the machine's shared noise. "floor ÷ this" is floor cycles/s
  divided by the row's (1.00x = as fast as the floor; the SQLite goal is <= {sqlite_goal:g}x,
  the azblob goal <= {az_goal:g}x).
  "this ÷ filelock" is the row's cycles/s divided by filelock's (the file goal is
  >= {file_goal:g}x). The goals' "per-round range" is the min-max of those per-round ratios.
- **Noise**: other jobs share these 2 CPUs and the disk (see the load averages above);
  `synchronous=full` rows wait for fsync, so disk traffic from other processes shows most
  there, and Azurite competes with the benchmark for the CPUs. Read the medians and ratios,
  not single rounds.
- **memory://** has no floor or peer: its rows show what tenure's core (Lease object, renewal
  bookkeeping, fencing token) costs per cycle on its own.
"""


def render(cases: list[Case], facts: list[tuple[str, str]], repeats: int, seconds: float,
           started: datetime, elapsed: float, extras: Extras | None = None) -> str:
    """The whole BENCHMARKS.md.

    Example::

        Path("BENCHMARKS.md").write_text(render(cases, facts, 7, 0.5, started, 61.0))
    """
    extras = extras or Extras()
    sections = list(dict.fromkeys([*(case.section for case in cases), *extras.notes]))
    goals_text, _ = goals(cases, extras.unmeasured)
    azurite = dict(facts).get("Azurite", "").split(" ", 1)[0] or "(not started in this run)"
    parts = [
        "# Benchmarks",
        "",
        "Uncontended lock cycles per second of tenure's stores, next to the raw store floor "
        "and the `filelock` package, all measured in one run of one process. The azblob:// "
        "figures come from the Azurite emulator on loopback, not from Azure (see Method).",
        "",
        "- Command: `make bench` (runs `.venv/bin/python bench/run.py --output BENCHMARKS.md`)",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC; the run took {elapsed:.0f} s",
        *(f"- {name}: {value}" for name, value in facts),
        "",
        "## Goals",
        "",
        goals_text,
        "",
    ]
    for section in sections:
        rows = [case for case in cases if case.section == section]
        parts += [f"## {section}", ""]
        if rows:
            parts += [section_table(rows), ""]
        if section in extras.notes:
            parts += [extras.notes[section], ""]
    parts += [
        "## Method",
        "",
        METHOD.format(warmup=ASYNC_WARMUP_CYCLES, seconds=seconds, repeats=repeats,
                      min_cycles=MIN_CYCLES, az_warmup=azblob_bench.ASYNC_WARMUP_CYCLES,
                      lease=azblob_bench.LEASE_SECONDS, az_scale=AZBLOB_SCALE,
                      azurite=azurite, az_goal=GOAL_AZBLOB_VS_FLOOR,
                      sqlite_goal=GOAL_SQLITE_VS_FLOOR, file_goal=GOAL_FILE_VS_FILELOCK),
    ]
    return "\n".join(parts)


# -- entry point --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options.

    Example::

        parse_args(["--output", "BENCHMARKS.md", "--repeats", "7"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    parser.add_argument("--repeats", type=int, default=11, help="rounds per case (default 11)")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="approximate length of one round of one case (default 0.3)")
    parser.add_argument("--budget", type=float, default=120.0,
                        help=f"seconds of measuring after which no new round starts, once "
                             f"{MIN_ROUNDS} rounds ran (default 120)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.seconds <= 0 or args.budget <= 0:
        parser.error("--repeats must be at least 1, --seconds and --budget positive")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, print the report, and write it to `--output` if given.

    Example::

        main(["--repeats", "3", "--seconds", "0.1"])
    """
    args = parse_args(argv)
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        facts = machine_facts(directory)
        extras = Extras()
        cases = build_cases(directory, stack, extras)
        _progress(f"{len(cases)} cases, {args.repeats} rounds of ~{args.seconds:g} s each")
        rounds = measure(cases, args.repeats, args.seconds, args.budget, extras)
    facts += extras.facts
    facts.append(("load average at end (1, 5, 15 min)", load_average()))
    report = render(cases, facts, rounds, args.seconds, started,
                    time.perf_counter() - clock, extras)
    print(report)
    if args.output is not None:
        args.output.write_text(report)
        _progress(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
