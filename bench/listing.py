"""How long `store.leases()` and `tenure locks` take on a store full of dead names: `dead` names
nobody holds (a million by default) next to `live` held leases (10).

The dead names are written straight into the store's own layout, far quicker than taking and
releasing each: on SQLite, PostgreSQL and MySQL one name is taken and released through tenure,
then its row is copied server-side under a million other names (whatever columns the table
has); on Redis each dead name is its fencing counter key, written by a Lua loop. The store is
opened with `retain=inf`, so nothing is forgotten while it is measured. Run standalone (the
server stores need a running server of your own, not one in use):

    python bench/listing.py sqlite:////tmp/listing.db --dead 1000000

Example::

    result = measure_listing("sqlite:////tmp/listing.db", dead=100_000)
    print(result.api_seconds, result.cli_seconds)
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from state import mysql_connection, url_options

import tenure

TEMPLATE = "dead-template"
CHUNK = 100_000  # dead names per statement or script


@dataclass(frozen=True)
class Listing:
    """Medians of three: `store.leases()` in this process, and `tenure locks` as a command
    (a new process: interpreter start-up and imports included).

    Example::

        Listing("sqlite://", 1_000_000, 10, 10, 0.21, 0.55)
    """

    label: str
    dead: int
    live: int
    listed: int
    api_seconds: float
    cli_seconds: float
    error: str = ""


def _digits(count: int) -> str:
    """A derived table of the numbers 0 .. count - 1 (count a power of ten), for MySQL."""
    power = len(str(count)) - 1
    digits = "(SELECT 0 d UNION ALL " + " UNION ALL ".join(
        f"SELECT {d}" for d in range(1, 10)) + ")"
    tables = ", ".join(f"{digits} t{i}" for i in range(power))
    number = " + ".join(f"t{i}.d * {10 ** i}" for i in range(power))
    return f"(SELECT {number} AS n FROM {tables})"


def _fill_sqlite(url: str, dead: int) -> None:
    path = urlsplit(url).path
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(tenure_leases)")]
        chosen = ", ".join("?1 || n" if column == "name" else column for column in columns)
        for start in range(0, dead, CHUNK):
            db.execute(
                f"WITH RECURSIVE seq(n) AS (SELECT ?2 UNION ALL SELECT n + 1 FROM seq "
                f"WHERE n < ?3) INSERT INTO tenure_leases ({', '.join(columns)}) "
                f"SELECT {chosen} FROM tenure_leases, seq WHERE name = ?4",
                ("dead-", start, min(start + CHUNK, dead) - 1, TEMPLATE))


def _fill_postgres(url: str, dead: int) -> None:
    import psycopg

    query = url_options(url)
    default = "tenure_advisory" if query.get("mode") == "advisory" else "tenure_leases"
    schema, table = query.get("schema", "public"), query.get("table", default)
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        types = dict(connection.execute(  # type: ignore[arg-type]
            "SELECT column_name, data_type FROM information_schema.columns WHERE "
            "table_schema = %s AND table_name = %s AND is_generated = 'NEVER' "
            "ORDER BY ordinal_position", (schema, table)))  # generated columns compute themselves
        named = "'dead-' || n"
        if types.get("name") == "bytea":
            named = f"convert_to({named}, 'UTF8')"
        chosen = ", ".join(named if column == "name" else f'"{column}"' for column in types)
        listed = ", ".join(f'"{column}"' for column in types)
        for start in range(0, dead, CHUNK):
            connection.execute(
                f'INSERT INTO "{schema}"."{table}" ({listed}) SELECT {chosen} '
                # ::int: psycopg sends a small Python int as int2, and generate_series has
                # no int2 form (ambiguous between int4 and int8)
                f'FROM "{schema}"."{table}", generate_series(%s::int, %s::int) AS n '
                "WHERE name = %s",
                (start, min(start + CHUNK, dead) - 1, TEMPLATE))
        connection.execute(f'ANALYZE "{schema}"."{table}"')


def _fill_mysql(url: str, dead: int) -> None:
    query = url_options(url)
    table = query.get("table", "tenure_leases")
    if query.get("mode") == "getlock":
        table += "_counters"  # getlock mode's rows (see its docs)
    connection = mysql_connection(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT column_name FROM information_schema.columns WHERE "
                           "table_schema = DATABASE() AND table_name = %s "
                           "ORDER BY ordinal_position", (table,))
            columns = [row[0] for row in cursor.fetchall()]
            # The primary key is a digest of the name (blake2b-128 in the store); MD5 of the
            # dead name gives each copy a unique key of the same width.
            computed = {"name": "CONCAT('dead-', seq.n + %s)",
                        "name_key": "UNHEX(MD5(CONCAT('dead-', seq.n + %s)))"}
            chosen = ", ".join(computed.get(column, f"`{column}`") for column in columns)
            listed = ", ".join(f"`{column}`" for column in columns)
            for start in range(0, dead, CHUNK):
                cursor.execute(
                    f"INSERT INTO `{table}` ({listed}) SELECT {chosen} FROM `{table}`, "
                    f"{_digits(CHUNK)} seq WHERE name = %s AND seq.n < %s",
                    (*[start] * sum(column in computed for column in columns), TEMPLATE,
                     min(CHUNK, dead - start)))
            cursor.execute(f"ANALYZE TABLE `{table}`")
    finally:
        connection.close()


# KEYS: none. ARGV: key prefix, first number, last number. A counter key per dead name, in the
# store's layout (<prefix>{<tag>}:token).
_FILL_REDIS = """
for n = tonumber(ARGV[2]), tonumber(ARGV[3]) do
  redis.call('SET', ARGV[1] .. '{dead-' .. n .. '}:token', '1')
end
return 1
"""


def _fill_redis(url: str, dead: int) -> None:
    import redis

    prefix = url_options(url).get("prefix", "tenure:")
    client = redis.Redis.from_url(url.split("?")[0])
    try:
        for start in range(0, dead, CHUNK):
            client.eval(_FILL_REDIS, 0, prefix, start, min(start + CHUNK, dead) - 1)
    finally:
        client.close()


FILLERS = {"sqlite": _fill_sqlite, "postgresql": _fill_postgres, "postgres": _fill_postgres,
           "mysql": _fill_mysql, "mariadb": _fill_mysql, "redis": _fill_redis}


def _with_retain_inf(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}retain=inf"


def measure_listing(url: str, dead: int = 1_000_000, live: int = 10, label: str = "",
                    **connect: object) -> Listing:
    """Fill the store at `url` with `dead` dead names, hold `live` leases, and time listing.

    Example::

        measure_listing("redis://127.0.0.1:6399/0?prefix=listing:", dead=1_000_000).cli_seconds
    """
    kept = _with_retain_inf(url)
    store = tenure.connect(kept, **connect)  # type: ignore[arg-type]
    run = uuid.uuid4().hex[:6]
    try:
        template = store.lock(TEMPLATE, ttl=60).try_acquire()
        assert template is not None
        template.release()
        FILLERS[urlsplit(url).scheme](url, dead)
        held = [store.lock(f"live-{run}-{number}", ttl=600).try_acquire()
                for number in range(live)]
        assert all(lease is not None for lease in held)
        api, cli, listed = [], [], 0
        environment = {key: value for key, value in os.environ.items()
                       if key != "PYTHONDONTWRITEBYTECODE"}  # users' imports are compiled once
        command = [str(Path(sys.executable).with_name("tenure")), "locks", "--store", kept]
        subprocess.run(command, capture_output=True, env=environment, check=False)  # .pyc files
        for _ in range(3):
            started = time.perf_counter()
            listed = len(store.leases())
            api.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = subprocess.run(command, capture_output=True, text=True, env=environment,
                                    check=False)
            cli.append(time.perf_counter() - started)
            if answer.returncode != 0:
                raise RuntimeError(f"tenure locks exited {answer.returncode}: "
                                   f"{answer.stderr.strip()[-300:]}")
        for lease in held:
            lease.release()  # type: ignore[union-attr]
        store.prune(0)
    finally:
        store.close()
    return Listing(label or url, dead, live, listed, statistics.median(api),
                   statistics.median(cli))


def listing_markdown(listings: list[Listing]) -> str:
    """The listing table of BENCHMARKS.md's state section.

    Example::

        print(listing_markdown([measure_listing("sqlite:////tmp/l.db", dead=100_000)]))
    """
    lines = ["| store | dead names | live leases | listed | `store.leases()` | `tenure locks` "
             "(a new process) |", "|---|---:|---:|---:|---:|---:|"]
    for listing in listings:
        if listing.error:
            lines.append(f"| {listing.label} | {listing.dead:,} | {listing.live} | | "
                         f"**Not measured**: {listing.error} | |")
            continue
        lines.append(f"| {listing.label} | {listing.dead:,} | {listing.live} | {listing.listed} "
                     f"| {listing.api_seconds * 1e3:,.0f} ms "
                     f"| {listing.cli_seconds * 1e3:,.0f} ms |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="a store URL tenure.connect() takes (an empty store)")
    parser.add_argument("--dead", type=int, default=1_000_000, help="dead names (1000000)")
    parser.add_argument("--live", type=int, default=10, help="held leases (10)")
    args = parser.parse_args(argv)
    if urlsplit(args.url).scheme not in FILLERS:
        parser.error(f"url: no filler for {urlsplit(args.url).scheme}://; use one of "
                     f"{', '.join(sorted(FILLERS))}")
    print(listing_markdown([measure_listing(args.url, args.dead, args.live)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
