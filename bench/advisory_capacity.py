"""PostgreSQL advisory mode under multiplexing: how many leases the pool's sessions hold, and
the median cost of an acquire and of a release (and of one renewal batch of every held lease)
while 0, 1,000 and 10,000 leases are held by the same store.

Every lease is a session advisory lock held by one of the store's `pool_size` connections, and
an entry of the server's shared lock table (about max_locks_per_transaction x max_connections
entries for the whole server): a level the server cannot hold is reported with its error, not
measured. The store works in a schema of its own, dropped at the end.

Run::

    .venv/bin/python bench/advisory_capacity.py postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/advisory_capacity.py URL --quick   # 0, 100, 1,000 leases, fewer cycles

From bench/run.py: `measure(url, quick)` gives (label, value) rows, `markdown(levels)` the table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

import psycopg

import tenure

LEVELS = (0, 1_000, 10_000)
QUICK_LEVELS = (0, 100, 1_000)
CYCLES, QUICK_CYCLES = 300, 30
POOL_SIZE = 4


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


def _backends(url: str, application_name: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                         (application_name,)).fetchone()
    return int(row[0]) if row else 0


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def measure_levels(url: str, quick: bool = False) -> list[Level]:
    """Hold each level's leases in one advisory store and time acquire/release cycles of
    another name next to them.

    Example::

        levels = measure_levels("postgresql://postgres@127.0.0.1:5432/postgres", quick=True)
    """
    schema = "bench_advisory_" + uuid.uuid4().hex[:8]
    application_name = "tenure-bench-" + uuid.uuid4().hex[:8]
    joiner = "&" if "?" in url else "?"
    store = tenure.connect(f"{url}{joiner}schema={schema}&mode=advisory"
                           f"&application_name={application_name}",
                           pool_size=POOL_SIZE, notify=False)
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
            acquires, releases = [], []
            for cycle in range(cycles):
                started = time.perf_counter()
                grant = backend.try_acquire(f"probe/{cycle % 10}", "bench", 60.0, 1)
                acquired = time.perf_counter()
                assert grant is not None and backend.release(grant)
                releases.append(time.perf_counter() - acquired)
                acquires.append(acquired - started)
            level.acquire_ms, level.release_ms = _median_ms(acquires), _median_ms(releases)
            if held:
                started = time.perf_counter()
                answers = backend.renew(held, 600.0)
                level.renewal_ms = (time.perf_counter() - started) * 1000.0
                assert answers == held, "a held lease was not renewed"
            level.connections = _backends(url, application_name)
    finally:
        for grant in held:
            try:
                backend.release(grant)
            except tenure.TenureError:
                break  # closing the store frees the rest with its sessions
        store.close()
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return levels


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
                 (f"{prefix}: renewal of all held (one batch)", f"{level.renewal_ms:.1f} ms")]
    return rows


def markdown(levels: list[Level]) -> str:
    """The levels as a small markdown table.

    Example::

        print(markdown(measure_levels(url)))
    """
    lines = ["| leases held | connections | leases / connection | acquire median | "
             "release median | renewal of all held |", "|---:|---:|---:|---:|---:|---:|"]
    for level in levels:
        if level.error:
            lines.append(f"| {level.held:,} + | could not hold more: {level.error} | | | | |")
            continue
        renewal = f"{level.renewal_ms:.1f} ms" if level.held else "-"
        per = f"{level.per_connection:,.0f}" if level.held else "0"
        lines.append(f"| {level.held:,} | {level.connections} | {per} | "
                     f"{level.acquire_ms:.3f} ms | {level.release_ms:.3f} ms | {renewal} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL URL, e.g. postgresql://postgres@127.0.0.1/postgres")
    parser.add_argument("--quick", action="store_true", help="0, 100, 1,000 leases; fewer cycles")
    args = parser.parse_args(argv)
    print(f"pool_size={POOL_SIZE}; {QUICK_CYCLES if args.quick else CYCLES} cycles per level")
    print(markdown(measure_levels(args.url, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
