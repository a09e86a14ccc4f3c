"""PostgreSQL advisory mode under multiplexing: how many leases the pool's sessions hold, and
the median cost of an acquire and of a release (and of one renewal batch of every held lease,
the median of several) while 0, 1,000 and 10,000 leases are held by the same store; then the
same store used by several threads at once, each holding leases and acquiring and releasing
others, so that the leases spread over the pool's connections (one thread alone always finds
the same idle connection, so it only ever uses one).

Every lease is a session advisory lock held by one of the store's `pool_size` connections, and
an entry of the server's shared lock table (about max_locks_per_transaction x max_connections
entries for the whole server): a level the server cannot hold is reported with its error, not
measured. The store works in a schema of its own, dropped at the end.

Run::

    .venv/bin/python bench/advisory_capacity.py postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/advisory_capacity.py URL --quick   # 0, 100, 1,000 leases, fewer cycles
    .venv/bin/python bench/advisory_capacity.py URL --threads 16

From bench/run.py: `measure(url, quick)` gives (label, value) rows, `markdown(levels)` the table.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg

import tenure

TITLE = "PostgreSQL advisory mode: leases per connection"
LEVELS = (0, 1_000, 10_000)
QUICK_LEVELS = (0, 100, 1_000)
CYCLES, QUICK_CYCLES = 300, 30
POOL_SIZE = 4
RENEWAL_SAMPLES = 5
THREADS = 8
HELD_PER_THREAD, QUICK_HELD_PER_THREAD = 250, 25


@dataclass
class Level:
    """What one level of held leases measured (`error`: why it could not be held)."""

    held: int
    connections: int = 0
    acquire_ms: float = float("nan")
    release_ms: float = float("nan")
    renewal_ms: float = float("nan")
    error: str = ""

    @property
    def per_connection(self) -> float:
        return self.held / self.connections if self.connections else float("nan")


@dataclass
class Concurrent:
    """What `threads` threads sharing one store measured: each holds `held_per_thread` leases
    and runs acquire/release cycles of names of its own meanwhile."""

    threads: int
    held_per_thread: int
    connections: int = 0
    leases_per_connection: list[int] = field(default_factory=list)  # by connection, most first
    acquire_ms: float = float("nan")
    release_ms: float = float("nan")
    cycles_per_s: float = float("nan")
    error: str = ""


def _backends(url: str, application_name: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                         (application_name,)).fetchone()
    return int(row[0]) if row else 0


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


@contextlib.contextmanager
def _advisory_store(url: str) -> Iterator[tuple[tenure.Store, str]]:
    """An advisory-mode store in a schema of its own, and its application_name (to count its
    connections); closed, and the schema dropped, on exit."""
    schema = "bench_advisory_" + uuid.uuid4().hex[:8]
    application_name = "tenure-bench-" + uuid.uuid4().hex[:8]
    joiner = "&" if "?" in url else "?"
    store = tenure.connect(f"{url}{joiner}schema={schema}&mode=advisory"
                           f"&application_name={application_name}",
                           pool_size=POOL_SIZE, notify=False)
    try:
        yield store, application_name
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _time_cycles(backend: Any, prefix: str, cycles: int) -> tuple[list[float], list[float]]:
    """The durations (s) of `cycles` acquires and of their releases, of names under `prefix`
    (10 names in turn)."""
    acquires, releases = [], []
    for cycle in range(cycles):
        started = time.perf_counter()
        grant = backend.try_acquire(f"{prefix}/{cycle % 10}", "bench", 60.0, 1)
        acquired = time.perf_counter()
        assert grant is not None and backend.release(grant)
        releases.append(time.perf_counter() - acquired)
        acquires.append(acquired - started)
    return acquires, releases


def _release_all(backend: Any, grants: list[tenure.Grant]) -> None:
    """Release `grants` until one fails (closing the store frees the rest with its sessions)."""
    for grant in grants:
        try:
            backend.release(grant)
        except tenure.TenureError:
            break


def measure_levels(url: str, quick: bool = False) -> list[Level]:
    """Hold each level's leases in one advisory store and time acquire/release cycles of
    another name next to them.

    Example::

        levels = measure_levels("postgresql://postgres@127.0.0.1:5432/postgres", quick=True)
    """
    with _advisory_store(url) as (store, application_name):
        return _measure_levels(url, quick, store, application_name)


def _measure_levels(url: str, quick: bool, store: tenure.Store,
                    application_name: str) -> list[Level]:
    backend = store.backend
    cycles = QUICK_CYCLES if quick else CYCLES
    held = []
    levels: list[Level] = []
    try:
        for target in QUICK_LEVELS if quick else LEVELS:
            level = Level(target)
            levels.append(level)
            try:
                while len(held) < target:
                    grant = backend.try_acquire(f"held/{len(held):06}", "bench", 600.0, 1)
                    assert grant is not None
                    held.append(grant)
            except tenure.TenureError as exc:
                level.held, level.error = len(held), str(exc).split("; ", 1)[-1][:200]
                break
            acquires, releases = _time_cycles(backend, "probe", cycles)
            level.acquire_ms, level.release_ms = _median_ms(acquires), _median_ms(releases)
            if held:
                samples = []
                for _ in range(RENEWAL_SAMPLES):
                    started = time.perf_counter()
                    answers = backend.renew(held, 600.0)
                    samples.append(time.perf_counter() - started)
                    assert answers == held, "a held lease was not renewed"
                level.renewal_ms = _median_ms(samples)
            level.connections = _backends(url, application_name)
    finally:
        _release_all(backend, held)
    return levels


def measure_concurrent(url: str, quick: bool = False, threads: int = THREADS) -> Concurrent:
    """`threads` threads share one advisory store: each takes its leases, then (all at once)
    runs acquire/release cycles of other names while holding them; how the held leases spread
    over the pool's connections, and the median acquire and release under that concurrency.

    Example::

        result = measure_concurrent("postgresql://postgres@127.0.0.1:5432/postgres", quick=True)
    """
    with _advisory_store(url) as (store, application_name):
        return _measure_concurrent(url, quick, threads, store, application_name)


def _measure_concurrent(url: str, quick: bool, threads: int, store: tenure.Store,
                        application_name: str) -> Concurrent:
    backend = store.backend
    per_thread = QUICK_HELD_PER_THREAD if quick else HELD_PER_THREAD
    cycles = QUICK_CYCLES if quick else CYCLES
    result = Concurrent(threads, per_thread)
    held: list[list[tenure.Grant]] = [[] for _ in range(threads)]
    acquires: list[float] = []
    releases: list[float] = []
    failures: list[BaseException] = []
    holding = threading.Barrier(threads + 1)  # every thread holds its leases
    finished = threading.Barrier(threads + 1)  # every thread ran its cycles, still holding

    def run(index: int) -> None:
        try:
            # Interleaved with the other threads: each acquire finds whichever connection is
            # idle, so the held leases spread over the pool.
            for i in range(per_thread):
                grant = backend.try_acquire(f"held/{index:03}/{i:05}", "bench", 600.0, 1)
                assert grant is not None
                held[index].append(grant)
            holding.wait()
            mine_acquire, mine_release = _time_cycles(backend, f"probe/{index:03}", cycles)
            acquires.extend(mine_acquire)
            releases.extend(mine_release)
        except BaseException as exc:
            failures.append(exc)
            holding.abort()
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):
                finished.wait()

    workers = [threading.Thread(target=run, args=(index,)) for index in range(threads)]
    try:
        for worker in workers:
            worker.start()
        try:
            holding.wait()
            started = time.perf_counter()
            finished.wait()
            elapsed = time.perf_counter() - started
        except threading.BrokenBarrierError:
            elapsed = float("nan")
            finished.abort()
        for worker in workers:
            worker.join()
        if failures:
            result.error = str(failures[0]).split("; ", 1)[-1][:200] or repr(failures[0])
            return result
        result.connections = _backends(url, application_name)
        spread = Counter(session.pid for session in backend._holding.values())
        result.leases_per_connection = sorted(spread.values(), reverse=True)
        result.acquire_ms, result.release_ms = _median_ms(acquires), _median_ms(releases)
        result.cycles_per_s = threads * cycles / elapsed
    finally:
        for grants in held:
            _release_all(backend, grants)
    return result


def concurrent_rows(result: Concurrent) -> list[tuple[str, str]]:
    """(label, value) rows of a concurrent run.

    Example::

        rows = concurrent_rows(measure_concurrent(url, quick=True))
    """
    prefix = (f"advisory, {result.threads} threads x {result.held_per_thread:,} leases held "
              "(one store)")
    if result.error:
        return [(prefix, f"failed: {result.error}")]
    spread = ", ".join(f"{count:,}" for count in result.leases_per_connection)
    return [(f"{prefix}: connections", f"{result.connections} (pool_size={POOL_SIZE})"),
            (f"{prefix}: leases held per connection", spread),
            (f"{prefix}: acquire median", f"{result.acquire_ms:.3f} ms"),
            (f"{prefix}: release median", f"{result.release_ms:.3f} ms"),
            (f"{prefix}: acquire/release cycles", f"{result.cycles_per_s:,.0f}/s")]


def measure(url: str, quick: bool = False) -> list[tuple[str, str]]:
    """(label, value) rows of every level, for bench/run.py.

    Example::

        rows = measure("postgresql://postgres@127.0.0.1:5432/postgres", quick=True)
    """
    rows: list[tuple[str, str]] = []
    for level in measure_levels(url, quick):
        prefix = f"advisory, {level.held:,} leases held"
        if level.error:
            rows.append((prefix, f"could not hold more: {level.error}"))
            continue
        rows += [(f"{prefix}: connections", f"{level.connections} (pool_size={POOL_SIZE})"),
                 (f"{prefix}: leases per connection", f"{level.per_connection:,.0f}"),
                 (f"{prefix}: acquire median", f"{level.acquire_ms:.3f} ms"),
                 (f"{prefix}: release median", f"{level.release_ms:.3f} ms"),
                 (f"{prefix}: renewal of all held (one batch, median of "
                  f"{RENEWAL_SAMPLES})", f"{level.renewal_ms:.1f} ms")]
    return rows + concurrent_rows(measure_concurrent(url, quick))


def markdown(levels: list[Level]) -> str:
    """The levels as a small markdown table.

    Example::

        print(markdown(measure_levels(url)))
    """
    lines = ["| leases held | connections | leases / connection | acquire median | "
             f"release median | renewal of all held (median of {RENEWAL_SAMPLES}) |",
             "|---:|---:|---:|---:|---:|---:|"]
    for level in levels:
        if level.error:
            lines.append(f"| {level.held:,} + | could not hold more: {level.error} | | | | |")
            continue
        renewal = f"{level.renewal_ms:.1f} ms" if level.held else "-"
        per = f"{level.per_connection:,.0f}" if level.held else "0"
        lines.append(f"| {level.held:,} | {level.connections} | {per} | "
                     f"{level.acquire_ms:.3f} ms | {level.release_ms:.3f} ms | {renewal} |")
    return "\n".join(lines)


def section(url: str, quick: bool = False) -> str:
    """The whole section for BENCHMARKS.md: the levels' table, then the concurrent run.

    Example::

        extras.note(TITLE, section("postgresql://postgres@127.0.0.1/postgres"))
    """
    concurrent = concurrent_rows(measure_concurrent(url, quick))
    return "\n".join([
        f"One store, `?mode=advisory&pool_size={POOL_SIZE}`, one thread; each lease is a session "
        "advisory lock held by one of the pool's connections:", "",
        markdown(measure_levels(url, quick)), "",
        *(f"- {label}: {value}" for label, value in concurrent)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL URL, e.g. postgresql://postgres@127.0.0.1/postgres")
    parser.add_argument("--quick", action="store_true", help="0, 100, 1,000 leases; fewer cycles")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help=f"threads sharing the store in the concurrent case ({THREADS})")
    args = parser.parse_args(argv)
    print(f"pool_size={POOL_SIZE}; {QUICK_CYCLES if args.quick else CYCLES} cycles per level")
    print(markdown(measure_levels(args.url, args.quick)))
    print()
    for label, value in concurrent_rows(measure_concurrent(args.url, args.quick, args.threads)):
        print(f"{label}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
