"""The mysql:// part of the benchmark, on a MariaDB started with the test suite's launcher.

- Uncontended cycles/s (one lock name, acquire + release, connection reused): tenure sync with
  fencing (always on here) and async, next to two raw floors on the same server with the same
  driver (PyMySQL, autocommit): a bare lease-row upsert + delete pair, and a bare
  `GET_LOCK(name, 0)` + `RELEASE_LOCK(name)` pair; and the peer, tooz's mysql driver (GET_LOCK).
- Contended hand-off: 8 OS processes loop acquire / hold 1 ms / release on one name; hand-offs
  per second and the release-to-acquire latency (p50, p99), tenure vs tooz.
- Renewal: round trips (driver calls) and statements (the server's `Questions`) per renewal
  tick of tenure's background renewal, with 1, 100 and 1,000 held leases.

For bench/run.py: `start_mariadb` (the server), `build_cases(Case, url, stack)` (the
uncontended rows as run.Case objects, linked to their floors, the goal on the sync rows),
`handoffs(url)` and `renewal_ticks(url, socket)` (results), and `contended_table` /
`renewal_table` (their markdown). Alone, this prints every table::

    python bench/mysql_bench.py               # about a minute
    python bench/mysql_bench.py --rounds 3    # quicker
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
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from timing import Runner, timed_loop

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SECTION = "mysql:// (MariaDB)"
LOCK_NAME = "bench"
GOAL_VS_ROW_FLOOR = 1.1  # row floor cycles/s ÷ tenure sync cycles/s at most this
ASYNC_WARMUP_CYCLES = 50
HANDOFF_PROCESSES = 8
HANDOFF_SECONDS = 4.0
HOLD_SECONDS = 0.001
RENEWAL_SIZES = (1, 100, 1000)


@dataclass
class Server:
    """A running MariaDB: its URL, how to reach it as an admin, and facts for the report."""

    url: str
    socket: str
    facts: list[tuple[str, str]] = field(default_factory=list)


@dataclass(eq=False)
class Row:
    """One uncontended row: run(n) times n cycles; `floor` is the row it is compared with.

    Example::

        Row("floor", "floor: bare GET_LOCK + RELEASE_LOCK", run)
    """

    kind: str  # "tenure", "floor" or "peer"
    label: str
    run: Runner
    floor: Row | None = None
    goal_limit: float | None = None  # the largest floor ÷ this that meets the goal
    rates: list[float] = field(default_factory=list)  # cycles/s per round (standalone runs)


def start_mariadb(workdir: Path, stack: ExitStack) -> Server | str:
    """Start MariaDB with tests/servers.py; the running server, or why it is not running.

    Example::

        server = start_mariadb(Path(tmp) / "mariadb", stack)
    """
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    try:
        import pymysql
        import servers  # the test suite's launcher
    except Exception as exc:
        return f"cannot import PyMySQL or the test suite's launcher tests/servers.py ({exc!r})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.MariaDBServer(workdir)
    try:
        server.start()
    except servers.ServiceMissing as exc:
        return str(exc)
    stack.callback(server.cleanup)
    stack.callback(server.stop)
    connection = pymysql.connect(unix_socket=str(server.socket_path), user="root")
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        (version,) = cursor.fetchone()
    return Server(server.url, str(server.socket_path), [("MariaDB", str(version))])


def _pymysql(url: str) -> Any:
    """A PyMySQL connection like tenure's: autocommit, utf8mb4, TCP to the URL's host."""
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(host=parts.hostname, port=parts.port or 3306, user=parts.username,
                           password=parts.password or "", database=parts.path.lstrip("/"),
                           autocommit=True, charset="utf8mb4")


# -- uncontended ---------------------------------------------------------------------------------


def row_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + delete, two autocommit statements on one reused connection.

    Example::

        run = row_floor(server.url, stack)
    """
    connection = _pymysql(url)
    stack.callback(connection.close)
    cursor = connection.cursor()
    cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (name VARBINARY(255) PRIMARY KEY, "
                   "holder VARBINARY(255) NOT NULL, expires_at DATETIME(6) NOT NULL) "
                   "ENGINE=InnoDB")
    upsert = ("INSERT INTO bench_floor VALUES (%s, %s, NOW(6) + INTERVAL 30 SECOND) "
              "ON DUPLICATE KEY UPDATE holder = VALUES(holder), expires_at = VALUES(expires_at)")
    delete = "DELETE FROM bench_floor WHERE name = %s AND holder = %s"
    arguments = (LOCK_NAME, "me")

    def cycle() -> None:
        cursor.execute(upsert, arguments)
        cursor.execute(delete, arguments)

    return timed_loop(cycle)


def kept_row_floor(url: str, stack: ExitStack) -> Runner:
    """A bare conditional UPDATE pair on a row that stays (what any store that keeps its
    counter in the lease row must do instead of INSERT + DELETE): take it when expired, free it
    when still ours.

    Example::

        run = kept_row_floor(server.url, stack)
    """
    connection = _pymysql(url)
    stack.callback(connection.close)
    cursor = connection.cursor()
    cursor.execute("INSERT IGNORE INTO bench_floor VALUES ('kept', '', NOW(6))")
    take = ("UPDATE bench_floor SET holder = %s, expires_at = NOW(6) + INTERVAL 30 SECOND "
            "WHERE name = 'kept' AND expires_at <= NOW(6)")
    free = ("UPDATE bench_floor SET expires_at = NOW(6) "
            "WHERE name = 'kept' AND holder = %s AND expires_at > NOW(6)")
    holder = ("me",)

    def cycle() -> None:
        if cursor.execute(take, holder) != 1 or cursor.execute(free, holder) != 1:
            raise RuntimeError("the kept row was not free")

    return timed_loop(cycle)


def get_lock_floor(url: str, stack: ExitStack) -> Runner:
    """A bare `SELECT GET_LOCK(name, 0)` + `SELECT RELEASE_LOCK(name)` on one connection.

    Example::

        run = get_lock_floor(server.url, stack)
    """
    connection = _pymysql(url)
    stack.callback(connection.close)
    cursor = connection.cursor()
    name = (f"{LOCK_NAME}-get-lock",)

    def cycle() -> None:
        cursor.execute("SELECT GET_LOCK(%s, 0)", name)
        if cursor.fetchone()[0] != 1:
            raise RuntimeError("GET_LOCK refused an uncontended lock")
        cursor.execute("SELECT RELEASE_LOCK(%s)", name)
        cursor.fetchone()

    return timed_loop(cycle)


def tooz_peer(url: str, stack: ExitStack) -> Runner | str:
    """tooz's mysql driver: `lock.acquire(blocking=False)` + `lock.release()`; or why not.

    tooz closes its connection on release and opens a new one on the next acquire.

    Example::

        run = tooz_peer(server.url, stack)
    """
    try:
        from tooz import coordination
    except ImportError as exc:
        return f"tooz is not installed ({exc})"
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

    store = tenure.connect(url)
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME)

    def try_release() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    def with_acquire() -> None:
        with lock.acquire():
            pass

    floor = Row("floor", "floor: bare lease-row upsert + DELETE (2 autocommit statements)",
                row_floor(url, stack))
    kept = Row("floor", "floor: bare conditional UPDATE pair on a kept row (take if expired, "
                        "free if ours)", kept_row_floor(url, stack), floor)
    get_lock = Row("floor", "floor: bare `GET_LOCK(name, 0)` + `RELEASE_LOCK(name)`",
                   get_lock_floor(url, stack), floor)
    rows = [
        Row("tenure", "tenure: `lock.try_acquire().release()`, fencing on",
            timed_loop(try_release), floor, GOAL_VS_ROW_FLOOR),
        floor,
        Row("tenure", "tenure: `with lock.acquire(): pass`, fencing on", timed_loop(with_acquire),
            floor, GOAL_VS_ROW_FLOOR),
        kept,
        get_lock,
        Row("tenure", "tenure async: `async with lock.acquire(): pass`", async_runner(url),
            floor),
    ]
    notes = []
    peer = tooz_peer(url, stack)
    if isinstance(peer, str):
        notes.append(f"tooz not measured: {peer}")
    else:
        rows.append(Row("peer", "peer: tooz mysql driver, `acquire(blocking=False)` + "
                                "`release()` (GET_LOCK; reconnects every cycle)", peer, floor))
    return rows, notes


def build_cases(case: Callable[..., Any], url: str,
                stack: ExitStack) -> tuple[list[Any], list[str]]:
    """`uncontended_rows` as bench/run.py's Case objects, in the same order and linked to their
    floors, with the goal on the sync tenure rows; `case` is run.Case (passed in, so this
    module never imports run.py). Also returns the notes.

    Example::

        cases, notes = mysql_bench.build_cases(Case, server.url, stack)
    """
    rows, notes = uncontended_rows(url, stack)
    made: dict[int, Any] = {}
    for row in rows:
        made[id(row)] = case(SECTION, row.kind, row.label, row.run, fragile=True)
    for row in rows:
        if row.floor is not None:
            made[id(row)].floor = made[id(row.floor)]
        if row.goal_limit is not None:
            made[id(row)].goal = f"MySQL row floor ÷ tenure <= {row.goal_limit:g}"
            made[id(row)].goal_limit = row.goal_limit
    return [made[id(row)] for row in rows], notes


def async_runner(url: str) -> Runner:
    """`async with lock.acquire(): pass`, one asyncio.run per round (connect and warm-up
    inside, untimed).

    Example::

        seconds = async_runner(server.url)(1000)
    """
    import tenure.aio

    async def cycles(count: int) -> float:
        async with tenure.aio.connect(url) as store:
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
    "tenure (defaults: backoff 10 ms .. 1 s)": ("tenure", {}),
    "tenure (min_wait=1 ms, max_wait=20 ms)": ("tenure", {"min_wait": 0.001, "max_wait": 0.02}),
    "tooz (`acquire(blocking=30)`: GET_LOCK waits on the server)": ("tooz", {}),
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
    for number, (label, (kind, options)) in enumerate(HANDOFF_CONFIGS.items()):
        with tempfile.TemporaryDirectory(prefix="tenure-handoff-") as tmp:
            start = time.monotonic() + 3.0  # every process imported and connected by then
            end = start + seconds
            name = f"handoff-{number}"
            workers = [
                subprocess.Popen([sys.executable, __file__, "--worker", kind, url, name,
                                  str(start), str(end), f"{tmp}/{index}.jsonl",
                                  json.dumps(options)])
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

        coordinator = coordination.get_coordinator(url, f"w{os.getpid()}".encode())
        coordinator.start()
        lock = coordinator.get_lock(name.encode())
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            lock.acquire(blocking=30)
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
    round_trips: float  # per tick: driver calls (COM_QUERY packets)
    statements: float  # per tick: the server's Questions counter


def renewal_ticks(url: str, socket: str, sizes: tuple[int, ...] = RENEWAL_SIZES,
                  ttl: float = 1.5, ticks: int = 3) -> list[RenewalTick]:
    """Hold `size` leases through one sync store (ttl 1.5 s: a tick every 0.5 s) and count,
    over `ticks` renewal ticks after the first, the driver's round trips and the server's
    statements, divided by the ticks (the store's renew calls) in that window.

    Example::

        for tick in renewal_ticks(server.url, server.socket):
            print(tick.leases, tick.round_trips)
    """
    import pymysql

    import tenure

    round_trips = [0]
    original = pymysql.connections.Connection.query

    def counting(connection: Any, *args: Any, **kwargs: Any) -> Any:
        round_trips[0] += not getattr(connection, "admin", False)
        return original(connection, *args, **kwargs)

    def questions() -> int:
        admin = pymysql.connect(unix_socket=socket, user="root")
        admin.admin = True
        with admin, admin.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
            return int(cursor.fetchone()[1])

    results = []
    pymysql.connections.Connection.query = counting
    try:
        for size in sizes:
            store = tenure.connect(url + f"?table=bench_renewal_{size}")
            backend = store.backend
            calls = [0]
            renew = backend.renew

            def counted_renew(grants: Any, ttl: float, renew: Any = renew,
                              calls: list[int] = calls) -> Any:
                calls[0] += 1
                return renew(grants, ttl)

            backend.renew = counted_renew
            leases = [store.lock(f"held/{index}", ttl=ttl).try_acquire() for index in range(size)]
            assert all(lease is not None for lease in leases)
            deadline = time.monotonic() + 10 * ttl
            while calls[0] < 1 and time.monotonic() < deadline:  # the first (aligning) tick
                time.sleep(0.01)
            time.sleep(ttl / 6)  # between ticks
            baseline = questions() - questions()  # a SHOW's own cost (negative)
            before_calls, before_trips, before_questions = calls[0], round_trips[0], questions()
            time.sleep(ticks * ttl / 3)
            window_calls = calls[0] - before_calls
            window_trips = round_trips[0] - before_trips
            window_statements = questions() - before_questions + baseline
            for lease in leases:
                lease.release()
            store.close()
            results.append(RenewalTick(size, window_calls, window_trips / max(window_calls, 1),
                                       window_statements / max(window_calls, 1)))
    finally:
        pymysql.connections.Connection.query = original
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


def uncontended_table(rows: list[Row]) -> str:
    """Markdown: each row's median cycles/s over the rounds and its ratio to its floor."""
    lines = ["| case | cycles/s (median) | min-max | µs/cycle | floor ÷ this (median) | goal |",
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
    return "\n".join(lines)


def contended_table(results: list[Handoff]) -> str:
    """Markdown: the hand-off runs."""
    lines = [f"{HANDOFF_PROCESSES} processes, each looping acquire / hold "
             f"{HOLD_SECONDS * 1000:g} ms / release on one name for {HANDOFF_SECONDS:g} s. A "
             "hand-off is an acquisition by another process than the last holder; its latency "
             "runs from the last holder calling release() to the new holder's acquire "
             "returning.", "",
             "| case | acquisitions | hand-offs/s | release-to-acquire p50 | p99 |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {c.label} | {c.acquisitions} | {c.per_second:,.0f} | {c.p50_ms:.1f} ms "
              f"| {c.p99_ms:.1f} ms |" for c in results]
    return "\n".join(lines)


def renewal_table(results: list[RenewalTick]) -> str:
    """Markdown: round trips and statements per renewal tick."""
    lines = ["| leases held by one store | ticks measured | round trips per tick "
             "| statements per tick |", "|---:|---:|---:|---:|"]
    lines += [f"| {r.leases:,} | {r.ticks} | {r.round_trips:g} | {r.statements:g} |"
              for r in results]
    return "\n".join(lines)


def report(rows: list[Row], notes: list[str], contended: list[Handoff],
           renewals: list[RenewalTick], facts: list[tuple[str, str]]) -> str:
    """Markdown tables of a standalone run."""
    return "\n".join([
        f"## {SECTION}", "", *(f"- {name}: {value}" for name, value in facts), "",
        uncontended_table(rows), "", *notes, "", "### Contended hand-off", "",
        contended_table(contended), "", "### Renewal", "", renewal_table(renewals)])


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
        server = start_mariadb(Path(tmp) / "mariadb", stack)
        if isinstance(server, str):
            print(f"MariaDB not measured: {server}", file=sys.stderr)
            return 1
        rows, notes = uncontended_rows(server.url, stack)
        measure(rows, args.rounds, args.seconds)
        contended = handoffs(server.url)
        renewals = renewal_ticks(server.url, server.socket)
        print(report(rows, notes, contended, renewals, server.facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
