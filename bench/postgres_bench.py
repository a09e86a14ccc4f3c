"""The postgresql:// part of the benchmark, on a PostgreSQL started with the test suite's launcher.

- Uncontended cycles/s (one lock name, acquire + release, connection reused): tenure sync with
  fencing (always on here) and async, next to raw floors on the same server with the same
  driver (psycopg 3, autocommit, prepared after 5 uses as psycopg does by default): a bare
  lease-row upsert + DELETE pair (the goal's floor), a bare `pg_try_advisory_lock` +
  `pg_advisory_unlock` pair, and a lease-row upsert + UPDATE pair that keeps the row (as a
  store whose fencing counter lives in the row must); and the peer, tooz's postgresql driver
  (advisory locks through psycopg2). With pg_stat_statements, the server's execution time of
  each statement.
- Contended hand-off: 8 OS processes loop acquire / hold 1 ms / release on one name; hand-offs
  per second and the release-to-acquire latency (p50, p99), tenure vs tooz, next to the
  measured round trip (`SELECT 1`).
- Renewal: round trips (driver calls) and statements (the server's pg_stat_statements) per
  renewal tick of tenure's background renewal, with 1, 100 and 1,000 held leases.

The server is the tests' PostgresServer (initdb, trust auth, fsync off, a free loopback port)
with synchronous_commit on for every session (tenure's own sessions ask for it anyway; the
floors and tooz get the same) and pg_stat_statements loaded, when the machine has it.

bench/run.py takes `start_postgres`, `uncontended_rows`, `handoffs`, `renewal_ticks` and (with
pg_stat_statements) `reset_statements` + `statement_costs`; alone, this prints tables::

    python bench/postgres_bench.py               # about a minute
    python bench/postgres_bench.py --rounds 3    # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from timing import Runner, timed_loop

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SECTION = "postgresql://"
LOCK_NAME = "bench"
GOAL_VS_ROW_FLOOR = 1.1  # row floor cycles/s ÷ tenure sync cycles/s at most this
ASYNC_WARMUP_CYCLES = 50
HANDOFF_PROCESSES = 8
HANDOFF_SECONDS = 4.0
HOLD_SECONDS = 0.001
RENEWAL_SIZES = (1, 100, 1000)


@dataclass
class Server:
    """A running PostgreSQL: its URL, whether pg_stat_statements counts statements, facts."""

    url: str
    statements: bool
    facts: list[tuple[str, str]] = field(default_factory=list)


@dataclass(eq=False)
class Row:
    """One uncontended row: run(n) times n cycles; `floor` is the row it is compared with.

    Example::

        Row("floor", "floor: bare pg_try_advisory_lock + pg_advisory_unlock", run)
    """

    kind: str  # "tenure", "floor" or "peer"
    label: str
    run: Runner
    floor: Row | None = None
    goal_limit: float | None = None  # the largest floor ÷ this that meets the goal
    rates: list[float] = field(default_factory=list)  # cycles/s per round (standalone runs)


def start_postgres(workdir: Path, stack: ExitStack) -> Server | str:
    """Start PostgreSQL with tests/servers.py; the running server, or why it is not running.

    Example::

        server = start_postgres(Path(tmp) / "postgres", stack)
    """
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    try:
        import psycopg
        import servers  # the test suite's launcher
    except Exception as exc:
        return f"cannot import psycopg or the test suite's launcher tests/servers.py ({exc!r})"

    class BenchServer(servers.PostgresServer):  # type: ignore[misc, name-defined]
        preload = True

        def command(self, port: int) -> list[str]:
            command = [("synchronous_commit=on" if part == "synchronous_commit=off" else part)
                       for part in super().command(port)]
            if self.preload:
                command += ["-c", "shared_preload_libraries=pg_stat_statements"]
            return command

    workdir.mkdir(parents=True, exist_ok=True)
    server = BenchServer(workdir)
    try:
        server.start()
    except servers.ServiceMissing:
        server.stop()
        server.preload = False  # no pg_stat_statements here: count driver calls only
        try:
            server.start()
        except servers.ServiceMissing as exc:
            return str(exc)
    stack.callback(server.cleanup)
    stack.callback(server.stop)
    with psycopg.connect(server.url, autocommit=True) as admin:
        version = admin.execute("SHOW server_version").fetchone()[0]
        if server.preload:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    facts = [("PostgreSQL", f"{version} (fsync off, synchronous_commit on, loopback TCP)"),
             ("psycopg", psycopg.__version__)]
    return Server(server.url, server.preload, facts)


def _psycopg(url: str) -> Any:
    """A psycopg connection like tenure's: autocommit, the same startup options."""
    import psycopg

    return psycopg.connect(url, autocommit=True,
                           options="-c statement_timeout=5000 -c synchronous_commit=on")


def round_trip_ms(url: str, count: int = 2000) -> float:
    """The median time of a bare `SELECT 1` through psycopg: one round trip, in ms.

    Example::

        round_trip_ms(server.url)  # ~0.08
    """
    with _psycopg(url) as connection:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            connection.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


# -- uncontended ---------------------------------------------------------------------------------


def row_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + DELETE, two autocommit statements on one reused connection.

    Example::

        run = row_floor(server.url, stack)
    """
    connection = _psycopg(url)
    stack.callback(connection.close)
    connection.execute("CREATE TABLE IF NOT EXISTS bench_floor (name bytea PRIMARY KEY, "
                       "holder bytea NOT NULL, expires_at timestamptz NOT NULL)")
    upsert = ("INSERT INTO bench_floor VALUES (%s, %s, now() + interval '30 seconds') "
              "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
              "expires_at = excluded.expires_at")
    delete = "DELETE FROM bench_floor WHERE name = %s AND holder = %s"
    arguments = (LOCK_NAME.encode(), b"me")

    def cycle() -> None:
        connection.execute(upsert, arguments)
        connection.execute(delete, arguments)

    return timed_loop(cycle)


def row_kept_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + UPDATE that frees the row instead of deleting it (what a store
    that keeps its fencing counter in the row must do), two autocommit statements.

    Example::

        run = row_kept_floor(server.url, stack)
    """
    connection = _psycopg(url)
    stack.callback(connection.close)
    connection.execute("CREATE TABLE IF NOT EXISTS bench_kept (name bytea PRIMARY KEY, "
                       "holder bytea NOT NULL, expires_at timestamptz NOT NULL)")
    upsert = ("INSERT INTO bench_kept VALUES (%s, %s, now() + interval '30 seconds') "
              "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
              "expires_at = excluded.expires_at WHERE bench_kept.expires_at <= now()")
    free = "UPDATE bench_kept SET expires_at = '-infinity' WHERE name = %s AND holder = %s"
    arguments = (LOCK_NAME.encode(), b"me")

    def cycle() -> None:
        connection.execute(upsert, arguments)
        connection.execute(free, arguments)

    return timed_loop(cycle)


def advisory_floor(url: str, stack: ExitStack) -> Runner:
    """A bare `SELECT pg_try_advisory_lock(key)` + `SELECT pg_advisory_unlock(key)`.

    Example::

        run = advisory_floor(server.url, stack)
    """
    connection = _psycopg(url)
    stack.callback(connection.close)
    key = (4242,)

    def cycle() -> None:
        if connection.execute("SELECT pg_try_advisory_lock(%s)", key).fetchone()[0] is not True:
            raise RuntimeError("pg_try_advisory_lock refused an uncontended lock")
        connection.execute("SELECT pg_advisory_unlock(%s)", key).fetchone()

    return timed_loop(cycle)


def tooz_peer(url: str, stack: ExitStack) -> Runner | str:
    """tooz's postgresql driver: `lock.acquire(blocking=False)` + `lock.release()`; or why not.

    tooz closes its connection on release and opens a new one on the next acquire.

    Example::

        run = tooz_peer(server.url, stack)
    """
    try:
        import psycopg2  # noqa: F401  # tooz's driver needs it
        from tooz import coordination
    except ImportError as exc:
        return f"tooz's postgresql driver cannot load ({exc}; pip install tooz psycopg2-binary)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # tooz deprecates the driver
        coordinator = coordination.get_coordinator(url, b"bench-peer")
    coordinator.start()
    stack.callback(coordinator.stop)
    lock = coordinator.get_lock(f"{LOCK_NAME}-tooz".encode())

    def cycle() -> None:
        if not lock.acquire(blocking=False):
            raise RuntimeError("tooz refused an uncontended lock")
        lock.release()

    return timed_loop(cycle)


def uncontended_rows(url: str, stack: ExitStack) -> tuple[list[Row], list[str]]:
    """The uncontended rows, each tenure row next to the floor it is compared with, and notes
    (e.g. why the peer is missing).

    Example::

        with ExitStack() as stack:
            rows, notes = uncontended_rows(server.url, stack)
    """
    import tenure

    store = tenure.connect(f"{url}?schema=bench")
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME)

    def try_release() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    def with_acquire() -> None:
        with lock.acquire():
            pass

    floor = Row("floor", "floor: bare lease-row upsert + DELETE (2 autocommit statements)",
                row_floor(url, stack))
    advisory = Row("floor", "floor: bare `pg_try_advisory_lock` + `pg_advisory_unlock`",
                   advisory_floor(url, stack))
    kept = Row("floor", "floor: bare lease-row upsert + UPDATE freeing it (row kept)",
               row_kept_floor(url, stack))
    rows = [
        Row("tenure", "tenure: `lock.try_acquire().release()`, fencing on",
            timed_loop(try_release), floor, GOAL_VS_ROW_FLOOR),
        floor,
        Row("tenure", "tenure: `with lock.acquire(): pass`, fencing on", timed_loop(with_acquire),
            floor, GOAL_VS_ROW_FLOOR),
        advisory,
        Row("tenure", "tenure async: `async with lock.acquire(): pass`", async_runner(url),
            floor),
        kept,
    ]
    notes = []
    peer = tooz_peer(url, stack)
    if isinstance(peer, str):
        notes.append(f"tooz not measured: {peer}")
    else:
        rows.append(Row("peer", "peer: tooz postgresql driver, `acquire(blocking=False)` + "
                                "`release()` (advisory lock; reconnects every cycle)",
                        peer, floor))
    return rows, notes


def async_runner(url: str) -> Runner:
    """`async with lock.acquire(): pass`, one asyncio.run per round (connect and warm-up
    inside, untimed).

    Example::

        seconds = async_runner(server.url)(1000)
    """
    import tenure.aio

    async def cycles(count: int) -> float:
        async with tenure.aio.connect(f"{url}?schema=bench") as store:
            lock = store.lock(LOCK_NAME + "-async")
            for _ in range(ASYNC_WARMUP_CYCLES):
                async with lock.acquire():
                    pass
            start = time.perf_counter()
            for _ in range(count):
                async with lock.acquire():
                    pass
            return time.perf_counter() - start

    return lambda count: asyncio.run(cycles(count))


STATEMENTS = {  # what pg_stat_statements' query text starts with -> label
    'INSERT INTO "bench"."tenure_leases"': "tenure acquire (lock: one upsert)",
    'UPDATE "bench"."tenure_leases" AS l SET lease_id': "tenure release (UPDATE, NOTIFY if wanted)",
    "INSERT INTO bench_floor": "floor upsert",
    "DELETE FROM bench_floor": "floor DELETE",
    "INSERT INTO bench_kept": "row-kept floor upsert",
    "UPDATE bench_kept": "row-kept floor UPDATE",
    "SELECT pg_try_advisory_lock": "floor pg_try_advisory_lock",
    "SELECT pg_advisory_unlock": "floor pg_advisory_unlock",
}


def reset_statements(url: str) -> None:
    """Zero pg_stat_statements' counters (before the measured rounds)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_statements_reset()")


def statement_costs(url: str) -> list[tuple[str, int, float]]:
    """(label, calls, mean execution µs) of the uncontended rows' statements, from
    pg_stat_statements: the server's executor time only (no parse, commit or network).

    Example::

        for label, calls, micros in statement_costs(server.url):
            print(label, micros)
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute("SELECT query, calls, mean_exec_time FROM pg_stat_statements "
                             "ORDER BY calls DESC").fetchall()
    costs = []
    for prefix, label in STATEMENTS.items():
        found = [(calls, mean) for query, calls, mean in rows if query.startswith(prefix)]
        if found:
            calls, mean = max(found)
            costs.append((label, int(calls), float(mean) * 1000))
    return costs


# -- contended hand-off --------------------------------------------------------------------------


@dataclass
class Handoff:
    """One contended run: acquisitions, hand-offs (the holder changed) and their latency."""

    label: str
    seconds: float
    acquisitions: int
    handoffs: int
    p50_ms: float
    p99_ms: float

    @property
    def per_second(self) -> float:
        return self.handoffs / self.seconds


HANDOFF_CONFIGS = {
    "tenure (defaults: LISTEN/NOTIFY, backoff 10 ms .. 1 s)": ("tenure", "", {}),
    "tenure, `notify=false` (polling, min_wait=1 ms, max_wait=20 ms)":
        ("tenure", "&notify=false", {"min_wait": 0.001, "max_wait": 0.02}),
    "tooz (`acquire(blocking=True)`: pg_advisory_lock waits on the server)": ("tooz", "", {}),
}


def handoffs(url: str, processes: int = HANDOFF_PROCESSES,
             seconds: float = HANDOFF_SECONDS) -> list[Handoff]:
    """Each configuration of HANDOFF_CONFIGS: `processes` OS processes loop acquire / hold 1 ms
    / release on one name for `seconds`.

    A hand-off is an acquisition by another process than the last holder's; its latency runs
    from the last holder calling release() to the new holder's acquire returning
    (time.monotonic, one clock for every process of the host).

    Example::

        for result in handoffs(server.url, seconds=2.0):
            print(result.label, result.per_second, result.p50_ms)
    """
    results = []
    for number, (label, (kind, query, options)) in enumerate(HANDOFF_CONFIGS.items()):
        with tempfile.TemporaryDirectory(prefix="tenure-handoff-") as tmp:
            start = time.monotonic() + 3.0  # every process imported and connected by then
            end = start + seconds
            name = f"handoff-{number}"
            workers = [
                subprocess.Popen([sys.executable, __file__, "--worker", kind,
                                  f"{url}?schema=bench{query}", name, str(start), str(end),
                                  f"{tmp}/{index}.jsonl", json.dumps(options)])
                for index in range(processes)
            ]
            for worker in workers:
                if worker.wait(timeout=seconds + 60) != 0:
                    raise RuntimeError(f"a {kind} hand-off worker failed")
            events = sorted(tuple(json.loads(line)) for path in Path(tmp).glob("*.jsonl")
                            for line in path.read_text().splitlines())
        latencies = [(acquired - released_before) * 1000
                     for (_, previous, released_before), (acquired, pid, _)
                     in itertools.pairwise(events) if pid != previous]
        quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
        results.append(Handoff(label, seconds, len(events), len(latencies),
                               statistics.median(latencies) if latencies else 0.0,
                               quantiles[98]))
    return results


def _worker(kind: str, url: str, name: str, start: float, end: float, out: str,
            options: dict[str, Any]) -> None:
    """One hand-off process: wait for `start`, loop until `end`, then write one JSON line per
    acquisition: [acquired_at, pid, release_called_at]."""
    records = []
    if kind == "tenure":
        import tenure

        store = tenure.connect(url)
        lock = store.lock(name, ttl=30, **options)
        lock.acquire(timeout=60).release()  # connects, creates the tables, starts the listener
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            lease = lock.acquire(timeout=60)
            acquired = time.monotonic()
            time.sleep(HOLD_SECONDS)
            releasing = time.monotonic()
            lease.release()
            records.append([acquired, os.getpid(), releasing])
        store.close()
    else:
        from tooz import coordination

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            coordinator = coordination.get_coordinator(url.partition("?")[0],
                                                       f"w{os.getpid()}".encode())
        coordinator.start()
        lock = coordinator.get_lock(name.encode())
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            lock.acquire(blocking=True)
            acquired = time.monotonic()
            time.sleep(HOLD_SECONDS)
            releasing = time.monotonic()
            lock.release()
            records.append([acquired, os.getpid(), releasing])
        coordinator.stop()
    Path(out).write_text("".join(json.dumps(record) + "\n" for record in records))


# -- renewal -------------------------------------------------------------------------------------


@dataclass
class RenewalTick:
    """What one renewal tick of tenure's background renewal cost with `leases` held."""

    leases: int
    ticks: int
    round_trips: float  # per tick: driver calls (Cursor.execute)
    statements: float | None  # per tick: statements the server ran (pg_stat_statements)


def renewal_ticks(url: str, count_statements: bool = True,
                  sizes: tuple[int, ...] = RENEWAL_SIZES, ttl: float = 1.5,
                  ticks: int = 3) -> list[RenewalTick]:
    """Hold `size` leases through one sync store (ttl 1.5 s: a tick every 0.5 s) and count,
    over `ticks` renewal ticks after the first, the driver's round trips and (with
    pg_stat_statements) the server's statements, divided by the ticks (the store's renew
    calls) in that window.

    Example::

        for tick in renewal_ticks(server.url, server.statements):
            print(tick.leases, tick.round_trips)
    """
    import psycopg

    import tenure

    round_trips = [0]
    original = psycopg.Cursor.execute

    def counting(cursor: Any, *args: Any, **kwargs: Any) -> Any:
        round_trips[0] += not getattr(cursor.connection, "bench_admin", False)
        return original(cursor, *args, **kwargs)

    def statements() -> int:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.bench_admin = True  # type: ignore[attr-defined]
            total = admin.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                                  "WHERE query NOT LIKE '%pg_stat_statements%'").fetchone()
        return int(total[0])

    results = []
    psycopg.Cursor.execute = counting  # type: ignore[method-assign]
    try:
        for size in sizes:
            store = tenure.connect(f"{url}?schema=bench_renewal_{size}")
            backend = store.backend
            calls = [0]
            renew = backend.renew

            def counted_renew(grants: Any, ttl: float, renew: Any = renew,
                              calls: list[int] = calls) -> Any:
                calls[0] += 1
                return renew(grants, ttl)

            backend.renew = counted_renew  # type: ignore[method-assign]
            leases = [store.lock(f"held/{index}", ttl=ttl).try_acquire() for index in range(size)]
            assert all(lease is not None for lease in leases)
            deadline = time.monotonic() + 10 * ttl
            while calls[0] < 1 and time.monotonic() < deadline:  # the first (aligning) tick
                time.sleep(0.01)
            time.sleep(ttl / 6)  # between ticks
            before = (calls[0], round_trips[0], statements() if count_statements else 0)
            time.sleep(ticks * ttl / 3)
            after_calls, after_trips = calls[0], round_trips[0]
            after_statements = statements() if count_statements else 0
            window = max(after_calls - before[0], 1)
            server = ((after_statements - before[2]) / window
                      if count_statements else None)
            for lease in leases:
                lease.release()
            store.close()
            results.append(RenewalTick(size, after_calls - before[0],
                                       (after_trips - before[1]) / window, server))
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]
    return results


# -- standalone run ------------------------------------------------------------------------------


def measure(rows: list[Row], rounds: int, seconds: float) -> None:
    """Warm every row up, then `rounds` interleaved rounds (ABBA order) of about `seconds`."""
    rates = {}
    for row in rows:
        cycles = 10
        while (elapsed := row.run(cycles)) < seconds / 10:
            cycles *= 2
        rates[id(row)] = cycles / elapsed
    for number in range(rounds):
        for row in rows if number % 2 == 0 else list(reversed(rows)):
            cycles = max(20, int(rates[id(row)] * seconds))
            elapsed = row.run(cycles)
            rates[id(row)] = cycles / elapsed
            row.rates.append(rates[id(row)])


def report(rows: list[Row], notes: list[str], contended: list[Handoff],
           renewals: list[RenewalTick], facts: list[tuple[str, str]],
           costs: list[tuple[str, int, float]] | None = None) -> str:
    """Markdown tables of a standalone run."""
    lines = [f"## {SECTION}", "", *(f"- {name}: {value}" for name, value in facts), "",
             "| case | cycles/s (median) | min-max | µs/cycle | floor ÷ this (median) | goal |",
             "|---|---:|---:|---:|---:|:---:|"]
    for row in rows:
        median = statistics.median(row.rates)
        ratio = goal = ""
        if row.floor is not None:
            ratios = [f / r for f, r in zip(row.floor.rates, row.rates, strict=True)]
            value = statistics.median(ratios)
            ratio = f"{value:.2f}x"
            if row.goal_limit is not None:
                goal = (f"<= {row.goal_limit:g}x: "
                        f"{'met' if value <= row.goal_limit else '**not met**'}")
        lines.append(f"| {row.label} | {median:,.0f} | {min(row.rates):,.0f}-"
                     f"{max(row.rates):,.0f} | {1e6 / median:,.0f} | {ratio} | {goal} |")
    if costs:
        lines += ["", "Server execution time per statement (pg_stat_statements, mean over the "
                  "uncontended rounds; executor only, no parse, commit or network):", "",
                  "| statement | calls | µs |", "|---|---:|---:|"]
        lines += [f"| {label} | {calls:,} | {micros:.1f} |" for label, calls, micros in costs]
    lines += ["", *notes, "", f"Contended: {HANDOFF_PROCESSES} processes, acquire / hold "
              f"{HOLD_SECONDS * 1000:g} ms / release on one name for {HANDOFF_SECONDS:g} s.", "",
              "| case | acquisitions | hand-offs/s | release-to-acquire p50 | p99 |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {c.label} | {c.acquisitions} | {c.per_second:,.0f} | {c.p50_ms:.2f} ms "
              f"| {c.p99_ms:.2f} ms |" for c in contended]
    lines += ["", "Renewal: tenure's background renewal with N leases held by one store.", "",
              "| leases held | ticks measured | round trips per tick | statements per tick |",
              "|---:|---:|---:|---:|"]
    lines += [f"| {r.leases:,} | {r.ticks} | {r.round_trips:g} | "
              f"{'n/a' if r.statements is None else f'{r.statements:g}'} |" for r in renewals]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, url, name, start, end, out, options = args.worker
        _worker(kind, url, name, float(start), float(end), out, json.loads(options))
        return 0
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as tmp, ExitStack() as stack:
        server = start_postgres(Path(tmp) / "postgres", stack)
        if isinstance(server, str):
            print(f"PostgreSQL not measured: {server}", file=sys.stderr)
            return 1
        rows, notes = uncontended_rows(server.url, stack)
        if server.statements:
            reset_statements(server.url)
        measure(rows, args.rounds, args.seconds)
        costs = statement_costs(server.url) if server.statements else []
        rtt = round_trip_ms(server.url)
        contended = handoffs(server.url)
        renewals = renewal_ticks(server.url, server.statements)
        facts = [*server.facts, ("round trip (`SELECT 1` through psycopg, median)",
                                 f"{rtt:.3f} ms")]
        print(report(rows, notes, contended, renewals, facts, costs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
