"""The postgresql:// section: tenure next to raw floors and tooz, on one PostgreSQL.

- Uncontended rows: tenure sync with fencing (always on here) and async, and `?mode=advisory`
  when the store has that mode; raw floors on the same server with the same driver (psycopg 3,
  autocommit, prepared after 5 uses as psycopg does by default): a bare lease-row upsert +
  DELETE pair (the goal's floor), a bare `pg_try_advisory_lock` + `pg_advisory_unlock` pair,
  and a lease-row upsert + UPDATE pair that keeps the row (as a store whose fencing counter
  lives in the row must); the peer, tooz's postgresql driver (advisory locks, psycopg2). With
  pg_stat_statements: the server's execution time of each statement (a table below).
- Hand-off contenders: tenure (LISTEN/NOTIFY), tenure polling (`notify=false`), tooz, the bare
  `pg_advisory_lock` floor and the floor of tenure's NOTIFY hand-over (see libraries.py).
- Renewal counter: psycopg `Cursor.execute` calls, and pg_stat_statements' calls.

Example::

    section = postgres_cases.section(server, stack, extras)
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

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
from libraries import psycopg_connection
from lineup import Entry, footprints, takers
from servers import Server
from timing import Runner, timed_loop

import tenure

TITLE = "postgresql://"
GOAL_VS_ROW_FLOOR = 1.1  # row floor cycles/s ÷ tenure sync cycles/s at most this
SCHEMA = "bench"
# What pg_stat_statements' query text starts with (its whitespace runs read as one space) ->
# label.
STATEMENTS = {
    f'INSERT INTO "{SCHEMA}"."tenure_leases"': "tenure acquire (lock: one upsert)",
    f'UPDATE "{SCHEMA}"."tenure_leases" AS l SET lease_id = CASE WHEN':
        "tenure release (UPDATE: frees, or hands over to a registered waiter; NOTIFY if wanted)",
    "INSERT INTO bench_floor": "floor upsert",
    "DELETE FROM bench_floor": "floor DELETE",
    "INSERT INTO bench_kept": "row-kept floor upsert",
    "UPDATE bench_kept": "row-kept floor UPDATE",
    "SELECT pg_try_advisory_lock": "floor pg_try_advisory_lock",
    "SELECT pg_advisory_unlock": "floor pg_advisory_unlock",
}


def section(server: Server, stack: ExitStack, extras: Extras) -> ServerSection:
    """Every postgresql case, hand-off contender and the renewal counter, on `server`.

    Example::

        section = section(server, stack, extras)
    """
    url = server.url
    rtt = round_trip(url)
    extras.facts.append(("PostgreSQL round trip (`SELECT 1` through psycopg, median of 2,000)",
                         f"{rtt * 1e3:.3f} ms"))
    store = tenure.connect(f"{url}?schema={SCHEMA}")
    stack.callback(store.close)
    floor = Case(TITLE, "floor", "floor: bare lease-row upsert + DELETE (2 autocommit statements)",
                 row_floor(url, stack), short="row floor")
    advisory = Case(TITLE, "floor", "floor: bare `pg_try_advisory_lock` + `pg_advisory_unlock`",
                    advisory_floor(url, stack), short="advisory floor")
    kept = Case(TITLE, "floor", "floor: bare lease-row upsert + UPDATE freeing it (row kept)",
                kept_floor(url, stack), short="row-kept floor")
    try_row, with_row = tenure_cases(TITLE, store.lock(LOCK_NAME), ", fencing on")
    aio_row = async_case(TITLE, f"{url}?schema={SCHEMA}", name=LOCK_NAME + "-async")
    peer = optional_case(TITLE, "peer", "peer: tooz postgresql driver, `acquire(blocking=False)` "
                         "+ `release()` (advisory lock; reconnects every cycle)",
                         lambda: tooz_cycle(url, stack), extras, short="tooz")
    peers = [peer] if peer is not None else []
    for row in (try_row, with_row):
        row.goal, row.goal_limit = f"PostgreSQL row floor ÷ tenure <= {GOAL_VS_ROW_FLOOR:g}", \
            GOAL_VS_ROW_FLOOR
        row.also, row.peers = [advisory, kept], peers
        row.peer_goal, row.peer_limit = "PostgreSQL: tenure ÷ tooz >= 1 (ahead of the peer)", 1.0
    for row in (try_row, with_row, aio_row, *peers):
        row.floor = row.floor or floor
    kept_names = kept_names_case(TITLE, try_row, f"{url}?schema={SCHEMA}", stack)
    cases = [try_row, floor, with_row, advisory, aio_row, kept, kept_names, *peers,
             *multi_lock_cases(TITLE, store)]
    cases += advisory_mode_cases(url, advisory, stack, extras)
    for case in cases:
        case.fragile = True
    contended = [
        Contender("tenure (defaults: LISTEN/NOTIFY, backoff 10 ms .. 1 s)", "tenure",
                  f"{url}?schema={SCHEMA}", goal=True, fair=True),
        *(Contender(f"{entry.label}, defaults", "tenure", entry.url, fair=True,
                    versus_floor=True)
          for entry in lineup(url) if entry.url.endswith("?mode=advisory")),
        Contender("tenure, `notify=false` (polling, min_wait=1 ms, max_wait=20 ms)", "tenure",
                  f"{url}?schema={SCHEMA}&notify=false", {"min_wait": 0.001, "max_wait": 0.02}),
        Contender("tooz (`acquire(blocking=True)`: pg_advisory_lock waits on the server)",
                  "tooz", url),
        Contender("floor: bare blocking `pg_advisory_lock` + `pg_advisory_unlock` (the "
                  "server's own lock wait, psycopg; no expiry, no fencing)",
                  "pg-advisory-lock", url),
        Contender("floor of the NOTIFY hand-off: a bare lease row that the release hands to the "
                  "first queued waiter, NOTIFYing it alone (tenure's design with nothing else; "
                  "psycopg, no expiry, no fencing)", "pg-notify-handover", url),
    ]
    statements = bool(server.details.get("statements"))
    return ServerSection(
        TITLE, url, cases, contended, rtt=rtt,
        rtt_label="`SELECT 1` through psycopg, median of 2,000",
        counter=PostgresCounter(url, statements), takers=takers(lineup(url)),
        footprints=footprints(lineup(url)),
        renewal_options=lambda size: {"schema": f"bench_renewal_{size}"},
        renewal_note="One store holds 1, 100 or 1,000 leases while tenure's lease monitor "
                     "renews them. Round trips are psycopg `Cursor.execute` calls during the "
                     "store's `renew` calls; statements are pg_stat_statements' calls"
                     + ("" if statements else " (not available on this server: n/a)") + ".",
        before=[lambda: reset_statements(url)] if statements else [],
        after=[lambda: statement_table(url)] if statements else [])


def lineup(url: str) -> list[Entry]:
    """tenure (lease table; and `?mode=advisory` where the store has it) and tooz, for the
    takeover and memory runs.

    Example::

        entries = lineup("postgresql://postgres@127.0.0.1:5433/postgres")
    """
    entries = [Entry("tenure (LISTEN/NOTIFY; backoff 10 ms .. 1 s)", "tenure",
                     f"{url}?schema={SCHEMA}", tenure=True)]
    try:
        tenure.connect(f"{url}?mode=advisory").close()
    except Exception:  # InvalidArgument: no such mode (the uncontended section says so)
        pass
    else:
        entries.append(Entry("tenure `?mode=advisory` (session advisory lock)", "tenure",
                             f"{url}?mode=advisory", tenure=True))
    entries.append(Entry("tooz postgresql driver (`blocking=True`: pg_advisory_lock waits on "
                         "the server; no expiry: ends with its connection)", "tooz", url,
                         expires=False, renewal="nothing to renew (a connection per lock)"))
    entries.append(Entry("floor: bare blocking `pg_advisory_lock` + `pg_advisory_unlock` "
                         "(psycopg; no expiry, no fencing)", "pg-advisory-lock", url,
                         expires=False, floor=True))
    return entries


def advisory_mode_cases(url: str, advisory: Case, stack: ExitStack,
                        extras: Extras) -> list[Case]:
    """tenure's `?mode=advisory` rows next to the advisory floor, when the store has the mode."""
    try:
        store = tenure.connect(f"{url}?mode=advisory")
    except Exception as exc:  # InvalidArgument: no such mode (yet)
        extras.note(TITLE, "tenure with `?mode=advisory` is not measured: the store does not "
                    f"take that option here ({type(exc).__name__}).")
        return []
    stack.callback(store.close)
    rows = tenure_cases(TITLE, store.lock(LOCK_NAME + "-advisory"), ", `?mode=advisory`")
    for row in rows:
        row.floor = advisory
    return rows


def round_trip(url: str, count: int = 2000) -> float:
    """The median time of a bare `SELECT 1` through psycopg: one round trip, in seconds."""
    with psycopg_connection(url) as connection:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            connection.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _two_statements(url: str, stack: ExitStack, setup: str, first: str, second: str,
                    arguments: tuple[Any, ...]) -> Runner:
    connection = psycopg_connection(url)
    stack.callback(connection.close)
    if setup:
        connection.execute(setup)

    def cycle() -> None:
        connection.execute(first, arguments)
        connection.execute(second, arguments)

    return timed_loop(cycle)


def row_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + DELETE, two autocommit statements on one reused connection."""
    return _two_statements(
        url, stack, "CREATE TABLE IF NOT EXISTS bench_floor (name bytea PRIMARY KEY, "
        "holder bytea NOT NULL, expires_at timestamptz NOT NULL)",
        "INSERT INTO bench_floor VALUES (%s, %s, now() + interval '30 seconds') "
        "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
        "expires_at = excluded.expires_at",
        "DELETE FROM bench_floor WHERE name = %s AND holder = %s", (LOCK_NAME.encode(), b"me"))


def kept_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + UPDATE that frees the row instead of deleting it."""
    return _two_statements(
        url, stack, "CREATE TABLE IF NOT EXISTS bench_kept (name bytea PRIMARY KEY, "
        "holder bytea NOT NULL, expires_at timestamptz NOT NULL)",
        "INSERT INTO bench_kept VALUES (%s, %s, now() + interval '30 seconds') "
        "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
        "expires_at = excluded.expires_at WHERE bench_kept.expires_at <= now()",
        "UPDATE bench_kept SET expires_at = '-infinity' WHERE name = %s AND holder = %s",
        (LOCK_NAME.encode(), b"me"))


def advisory_floor(url: str, stack: ExitStack) -> Runner:
    """A bare `SELECT pg_try_advisory_lock(key)` + `SELECT pg_advisory_unlock(key)`."""
    connection = psycopg_connection(url)
    stack.callback(connection.close)
    key = (4242,)

    def cycle() -> None:
        if connection.execute("SELECT pg_try_advisory_lock(%s)", key).fetchone()[0] is not True:
            raise RuntimeError("pg_try_advisory_lock refused an uncontended lock")
        connection.execute("SELECT pg_advisory_unlock(%s)", key).fetchone()

    return timed_loop(cycle)


def tooz_cycle(url: str, stack: ExitStack) -> Callable[[], object]:
    """tooz's postgresql driver: `acquire(blocking=False)` + `release()` (it closes its
    connection on release and opens a new one on the next acquire)."""
    import psycopg2  # noqa: F401  # tooz's driver needs it
    from tooz import coordination

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

    return cycle


def reset_statements(url: str) -> None:
    """Zero pg_stat_statements' counters (before the measured rounds)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_statements_reset()")


def statement_table(url: str) -> str:
    """Markdown: calls and mean execution µs of the uncontended rows' statements, from
    pg_stat_statements (the server's executor time only: no parse, commit or network)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute("SELECT query, calls, mean_exec_time FROM pg_stat_statements "
                             "ORDER BY calls DESC").fetchall()
    lines = ["Server execution time per statement (pg_stat_statements, mean over the "
             "uncontended rounds; executor only, no parse, commit or network):", "",
             "| statement | calls | µs |", "|---|---:|---:|"]
    for prefix, label in STATEMENTS.items():
        found = [(calls, mean) for query, calls, mean in rows
                 if " ".join(query.split()).startswith(prefix)]
        if found:
            calls, mean = max(found)
            lines.append(f"| {label} | {int(calls):,} | {float(mean) * 1000:.1f} |")
    return "\n".join(lines)


class PostgresCounter:
    """Renewal counting for PostgreSQL: psycopg `Cursor.execute`/`executemany` calls (client
    side), pg_stat_statements' calls without its own queries (server side, when loaded)."""

    def __init__(self, url: str, statements: bool) -> None:
        self.url, self.statements = url, statements
        self.columns = ("statements (server)",) if statements else ()
        self.count = 0
        self.originals: dict[str, Any] = {}

    def install(self) -> None:
        """Wrap psycopg's `Cursor.execute` and `Cursor.executemany` to count requests."""
        import psycopg

        for name in ("execute", "executemany"):
            self.originals[name] = original = getattr(psycopg.Cursor, name)

            def counted(cursor: Any, *args: Any, _original: Any = original,
                        **kwargs: Any) -> Any:
                self.count += 1
                return _original(cursor, *args, **kwargs)

            setattr(psycopg.Cursor, name, counted)

    def uninstall(self) -> None:
        """Undo install."""
        import psycopg

        for name, original in self.originals.items():
            setattr(psycopg.Cursor, name, original)

    def sent(self) -> int:
        """Requests sent since install."""
        return self.count

    def snapshot(self) -> tuple[float, ...]:
        """(statements run) since the last reset, pg_stat_statements' own queries left out."""
        if not self.statements:
            return ()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as admin:
            total = admin.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                                  "WHERE query NOT LIKE '%pg_stat_statements%'").fetchone()
        return (float(total[0]),) if total else (0.0,)
