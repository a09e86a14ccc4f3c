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


def _query(url: str) -> dict[str, str]:
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

    query = _query(url)
    table = f"{query.get('schema', 'public')}.{query.get('table', 'tenure_leases')}"
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        exists = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if exists is None or exists[0] is None:
            return Footprint(0, 0, "rows")
        rows = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        size = connection.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()
    assert rows is not None and size is not None
    return Footprint(int(rows[0]), int(size[0]), "rows")


def _mysql(url: str) -> Footprint:
    import pymysql

    parts = urlsplit(url)
    table = _query(url).get("table", "tenure_leases")
    connection = pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                                 user=parts.username or "root", password=parts.password or "",
                                 database=parts.path.lstrip("/"), autocommit=True)
    try:
        with connection.cursor() as cursor:
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


def measure_state(url: str, names: int, ttl: float = 30.0) -> StateResult:
    """Take and release `names` fresh names one after the other through tenure, and read the
    store's footprint before and after (see the module's docstring).

    Example::

        measure_state("redis://127.0.0.1:6379/0", names=10_000).bytes_per_name
    """
    run = uuid.uuid4().hex[:8]
    store = tenure.connect(url)
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
