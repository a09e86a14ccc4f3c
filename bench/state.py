"""What a store keeps of names nobody holds: its footprint after many distinct names, each
acquired and released once (the queue-job pattern: a lock per message key).

For one store URL: read the store's own footprint (Redis `DBSIZE` and `used_memory`; the lease
table's rows and size on SQLite, PostgreSQL and MySQL; files and allocated bytes under a
file:// directory; blobs in an azblob:// container), take and release `names` fresh names one
after the other through tenure, read it again. The per-name cost is the difference divided by
`names`. Run standalone (it needs a running server for the server stores):

    python bench/state.py sqlite:////tmp/state.db --names 10000

Example::

    result = measure_state("sqlite:////tmp/state.db", names=1000)
    print(result.after.items - result.before.items, result.bytes_per_name)
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import tenure


@dataclass(frozen=True)
class Footprint:
    """The store's own state: `items` (keys, rows, files or blobs) and `size` in bytes.

    Example::

        Footprint(items=10_000, size=5_300_000, unit="keys")
    """

    items: int
    size: int
    unit: str


@dataclass(frozen=True)
class StateResult:
    """Footprints before and after `names` names were each taken and released once.

    Example::

        StateResult("redis://...", 1000, Footprint(0, 0, "keys"), Footprint(1989, 5e5, "keys"),
                    2.1).items_per_name   # 1.989
    """

    url: str
    names: int
    before: Footprint
    after: Footprint
    seconds: float

    @property
    def items_per_name(self) -> float:
        return (self.after.items - self.before.items) / self.names

    @property
    def bytes_per_name(self) -> float:
        return (self.after.size - self.before.size) / self.names


def url_options(url: str) -> dict[str, str]:
    """The query options of a store URL, the last value of each.

    Example:
        >>> url_options("redis://h/0?prefix=a:&retain=2")
        {'prefix': 'a:', 'retain': '2'}
    """
    return {key: values[-1] for key, values in parse_qs(urlsplit(url).query).items()}


def _redis(url: str) -> Footprint:
    import redis

    client = redis.Redis.from_url(url.split("?")[0])
    try:
        used = client.info("memory")["used_memory"]
        return Footprint(int(client.dbsize()), int(used), "keys")
    finally:
        client.close()


def _sqlite(url: str) -> Footprint:
    path = Path(urlsplit(url).path)
    if not path.exists():
        return Footprint(0, 0, "rows")
    size = sum(each.stat().st_size for each in path.parent.glob(f"{path.name}*"))
    database = sqlite3.connect(path)
    try:
        rows = database.execute("SELECT count(*) FROM tenure_leases").fetchone()[0]
    except sqlite3.OperationalError:  # no table yet
        rows = 0
    finally:
        database.close()
    return Footprint(int(rows), size, "rows")


def _file(url: str) -> Footprint:
    directory = Path(urlsplit(url).path)
    files, size = 0, 0
    for root, _, names in os.walk(directory):
        for name in names:
            files += 1
            size += (Path(root) / name).stat().st_blocks * 512  # allocated, not apparent
    return Footprint(files, size, "files")


def _postgres(url: str) -> Footprint:
    import psycopg

    query = url_options(url)
    table = f"{query.get('schema', 'public')}.{query.get('table', 'tenure_leases')}"
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        exists = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if exists is None or exists[0] is None:
            return Footprint(0, 0, "rows")
        rows = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        size = connection.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()
    assert rows is not None and size is not None
    return Footprint(int(rows[0]), int(size[0]), "rows")


def mysql_connection(url: str) -> Any:
    """An autocommit PyMySQL connection to the database of a mysql:// store URL.

    Example::

        connection = mysql_connection("mysql://root@127.0.0.1:3306/test?table=t")
    """
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                           user=parts.username or "root", password=parts.password or "",
                           database=parts.path.lstrip("/"), autocommit=True)


def _mysql(url: str) -> Footprint:
    table = url_options(url).get("table", "tenure_leases")
    connection = mysql_connection(url)
    try:
        with connection.cursor() as cursor:
            # InnoDB's sizes in information_schema are statistics, refreshed now and then:
            # ANALYZE brings them up to date (else 10,000 new rows can read as no bytes). A
            # missing table answers it with an error row, not an exception.
            cursor.execute(f"ANALYZE TABLE `{table}`")
            cursor.fetchall()
            cursor.execute("SELECT data_length + index_length FROM information_schema.tables "
                           "WHERE table_schema = DATABASE() AND table_name = %s", (table,))
            found = cursor.fetchone()
            if found is None:
                return Footprint(0, 0, "rows")
            cursor.execute(f"SELECT count(*) FROM `{table}`")
            rows = cursor.fetchone()
    finally:
        connection.close()
    assert rows is not None
    return Footprint(int(rows[0]), int(found[0] or 0), "rows")


def _azblob(url: str) -> Footprint:
    from azure.storage.blob import ContainerClient

    container = ContainerClient.from_connection_string(
        os.environ["AZURE_STORAGE_CONNECTION_STRING"], urlsplit(url).path.strip("/"))
    if not container.exists():
        return Footprint(0, 0, "blobs")
    blobs = list(container.list_blobs())
    return Footprint(len(blobs), sum(blob.size or 0 for blob in blobs), "blobs")


READERS = {"redis": _redis, "rediss": _redis, "sqlite": _sqlite, "file": _file,
           "postgresql": _postgres, "postgres": _postgres, "mysql": _mysql, "mariadb": _mysql,
           "azblob": _azblob}


def footprint(url: str) -> Footprint:
    """The footprint of the store at `url` now.

    Example::

        footprint("file:///tmp/locks")   # Footprint(items=12, size=49152, unit="files")
    """
    return READERS[urlsplit(url).scheme](url)


def measure_state(url: str, names: int, ttl: float = 30.0, **connect: object) -> StateResult:
    """Take and release `names` fresh names one after the other through tenure, and read the
    store's footprint before and after (see the module's docstring).

    Example::

        measure_state("redis://127.0.0.1:6379/0", names=10_000).bytes_per_name
    """
    run = uuid.uuid4().hex[:8]
    store = tenure.connect(url, **connect)  # type: ignore[arg-type]
    try:
        store.lock(f"state-{run}-warm-up", ttl=ttl).try_acquire()  # tables, files, connections
        before = footprint(url)
        started = time.perf_counter()
        for number in range(names):
            lease = store.lock(f"invoice-{run}-{number}", ttl=ttl).try_acquire()
            assert lease is not None
            lease.release()
        seconds = time.perf_counter() - started
        after = footprint(url)
    finally:
        store.close()
    return StateResult(url, names, before, after, seconds)


@dataclass(frozen=True)
class Retention:
    """One store's run of the retention benchmark: `names` fresh names, each taken and released
    once, with the store's `retain` option set to `retain` seconds; footprints `before` the
    run, at its `end`, and `after` the store forgot them (`forgot_in` seconds after the end;
    None: not within the deadline). `pruned` is set for a store that forgets only by prune.

    Example::

        run = measure_retention("sqlite:////tmp/r.db", names=2_000, retain=2)
        run.back_within(0.01)   # True once the rows are gone again
    """

    label: str
    names: int
    retain: float
    before: Footprint
    end: Footprint
    after: Footprint
    forgot_in: float | None
    cycles_per_second: float
    pruned: bool = False
    error: str = ""
    kept: StateResult | None = None  # the same store with the default retain (an hour)

    def back_within(self, share: float) -> bool:
        """Whether the store's items returned to within `share` of their count before."""
        return abs(self.after.items - self.before.items) <= share * max(self.before.items, 1)


def with_option(url: str, option: str) -> str:
    """`url` with one more query option.

    Example:
        >>> with_option("redis://h:6379/0?prefix=x:", "retain=2")
        'redis://h:6379/0?prefix=x:&retain=2'
    """
    return f"{url}{'&' if '?' in url else '?'}{option}"


def measure_retention(url: str, names: int, retain: float, label: str = "",
                      deadline: float = 120.0, **connect: object) -> Retention:
    """Take and release `names` fresh names with `retain` set, then wait (a release of the
    store's one held name every 0.25 s, which is what triggers a sweep on the SQL stores)
    until the footprint is back where it was, for at most `retain + deadline` seconds; a
    store that cannot forget by itself (azblob) is pruned once `retain` has passed.

    Example::

        measure_retention("redis://127.0.0.1:6379/0", names=100_000, retain=2).forgot_in
    """
    run = uuid.uuid4().hex[:8]
    store = tenure.connect(with_option(url, f"retain={retain:g}"), **connect)  # type: ignore[arg-type]
    ticker = store.lock(f"state-{run}-ticker", ttl=60)
    pruned = False
    try:
        held = ticker.try_acquire()  # tables, files, connections; held through the run
        assert held is not None
        # What the wait below leaves as it goes (the ticker's release, a prune's guard file),
        # made once before the footprint is read, so that "before" and "after" compare alike.
        held.release()
        held = ticker.try_acquire()
        assert held is not None
        store.prune(retain, dry_run=True)
        before = footprint(url)
        started = time.perf_counter()
        for number in range(names):
            lease = store.lock(f"invoice-{run}-{number}", ttl=60).try_acquire()
            assert lease is not None
            lease.release()
        ended = time.perf_counter()
        end = footprint(url)
        after, forgot_in = end, None
        while time.perf_counter() - ended < retain + deadline:
            held.release()
            held = ticker.try_acquire()
            assert held is not None
            if time.perf_counter() - ended > retain and not pruned and _prunes_only(url):
                store.prune(retain)
                pruned = True
            after = footprint(url)
            if Retention(label, names, retain, before, end, after, 0, 0).back_within(0.01):
                forgot_in = time.perf_counter() - ended
                break
            time.sleep(0.25)
        held.release()
    finally:
        store.close()
    return Retention(label or url, names, retain, before, end, after, forgot_in,
                     names / (ended - started), pruned)


def _prunes_only(url: str) -> bool:
    """Whether the store at `url` forgets idle names only when pruned (no expiry of its own)."""
    return urlsplit(url).scheme == "azblob"


def retention_markdown(runs: list[Retention]) -> str:
    """The "state" table of BENCHMARKS.md: per store, the footprint before, at the end of and
    after a run of fresh names, with the per-name cost while kept and once forgotten.

    Example::

        print(retention_markdown([measure_retention("sqlite:////tmp/r.db", 2_000, 2)]))
    """
    lines = ["| store | kept per name (default retain) | names | retain | cycles/s | before | "
             "end of run (per name) | forgotten after | after (per name) | back within 1% |",
             "|---|---|---:|---:|---:|---|---|---:|---|---|"]
    for run in runs:
        if run.error:
            lines.append(f"| {run.label} | | {run.names:,} | {run.retain:g} s | | "
                         f"**Not measured**: {run.error} | | | | |")
            continue
        unit = run.before.unit
        forgot = "not within the deadline" if run.forgot_in is None else (
            f"{run.forgot_in:.1f} s" + (" (pruned)" if run.pruned else ""))
        kept = "" if run.kept is None else (
            f"{run.kept.items_per_name:.2f} {unit}, {run.kept.bytes_per_name:,.0f} B "
            f"({run.kept.names:,} names)")
        lines.append(
            f"| {run.label} | {kept} | {run.names:,} | {run.retain:g} s | "
            f"{run.cycles_per_second:,.0f} | "
            f"{_shown(run.before)} | {_shown(run.end)} ({_per_name(run, run.end)}) | "
            f"{forgot} | {_shown(run.after)} ({_per_name(run, run.after)}) | "
            f"{'yes' if run.back_within(0.01) else '**no**'} |")
    return "\n".join(lines)


def _shown(footprint: Footprint) -> str:
    return f"{footprint.items:,} {footprint.unit}, {footprint.size / 1e6:,.2f} MB"


def _per_name(run: Retention, footprint: Footprint) -> str:
    items = (footprint.items - run.before.items) / run.names
    size = (footprint.size - run.before.size) / run.names
    return f"{items:.3f} {footprint.unit}, {size:,.0f} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="a store URL tenure.connect() takes")
    parser.add_argument("--names", type=int, default=10_000, help="distinct names (10000)")
    args = parser.parse_args(argv)
    if urlsplit(args.url).scheme not in READERS:
        parser.error(f"url: no footprint reader for {urlsplit(args.url).scheme}://; "
                     f"use one of {', '.join(sorted(READERS))}")
    result = measure_state(args.url, args.names)
    unit = result.before.unit
    print(f"{args.names:,} names taken and released once in {result.seconds:.1f} s: "
          f"{result.before.items:,} -> {result.after.items:,} {unit}, "
          f"{result.before.size:,} -> {result.after.size:,} bytes; per name "
          f"{result.items_per_name:.2f} {unit}, {result.bytes_per_name:,.0f} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
