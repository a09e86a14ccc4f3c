"""A listing (`leases()`, `records()`, `read_record()`) reads and never creates: pointed at a
database without tenure's tables, an application's own SQLite file, a schema that does not
exist or a lock directory removed since connect(), it finds nothing held there and leaves
the place as it was (`tenure locks --store ...` with the wrong URL must not change it)."""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pymysql
import pytest
from servers import MariaDBServer, PostgresServer

import tenure


def listed(store: tenure.Store) -> tuple[object, object, object]:
    """What the three reads find."""
    return store.leases(), store.backend.records(), store.backend.read_record("job")


def sqlite_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return sorted(row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"))


def test_sqlite_listing_leaves_an_applications_database_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    db.close()
    with tenure.connect(f"sqlite:///{path}") as store:
        assert listed(store) == ([], {}, None)
    assert sqlite_tables(path) == ["invoices"]
    with sqlite3.connect(path) as db:  # not switched to WAL either
        assert db.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
    db.close()


def test_sqlite_listing_creates_no_database_file(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    with tenure.connect(f"sqlite:///{path}") as store:
        assert listed(store) == ([], {}, None)
    assert not path.exists()


def test_sqlite_listing_still_reads_a_lease_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    with tenure.connect(url) as holder, holder.lock("job"), tenure.connect(url) as reader:
        assert [info.name for info in reader.leases()] == ["job"]


def test_file_listing_of_a_removed_directory_finds_nothing_and_creates_nothing(
        tmp_path: Path) -> None:
    directory = tmp_path / "locks"
    with tenure.connect(f"file://{directory}") as store:
        assert directory.is_dir()  # connect() creates the directory, as documented
        shutil.rmtree(directory)
        assert listed(store) == ([], {}, None)
    assert not directory.exists()


@pytest.fixture
def pg_schema(postgres_server: PostgresServer) -> Iterator[str]:
    name = "t" + uuid.uuid4().hex[:20]
    yield name
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def pg_relations(server: PostgresServer, schema: str) -> list[tuple[str, ...]]:
    with psycopg.connect(server.url, autocommit=True) as db:
        return db.execute("SELECT nspname FROM pg_namespace WHERE nspname = %s "
                          "UNION ALL SELECT tablename FROM pg_tables WHERE schemaname = %s",
                          (schema, schema)).fetchall()


@pytest.mark.parametrize("mode", ["table", "advisory"])
def test_postgres_listing_creates_no_schema_and_no_table(
        postgres_server: PostgresServer, pg_schema: str, mode: str) -> None:
    url = f"{postgres_server.url}?schema={pg_schema}&mode={mode}"
    with tenure.connect(url) as store:
        assert listed(store) == ([], {}, None)
    assert pg_relations(postgres_server, pg_schema) == []


@pytest.mark.parametrize("mode", ["table", "advisory"])
def test_postgres_listing_of_a_schema_without_the_table_creates_nothing(
        postgres_server: PostgresServer, pg_schema: str, mode: str) -> None:
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {pg_schema}")
    with tenure.connect(f"{postgres_server.url}?schema={pg_schema}&mode={mode}") as store:
        assert listed(store) == ([], {}, None)
    assert pg_relations(postgres_server, pg_schema) == [(pg_schema,)]


@pytest.fixture
def mysql_database(mariadb_server: MariaDBServer) -> Iterator[str]:
    """The URL of a database of this test's own, without tables; dropped afterwards."""
    name = "t" + uuid.uuid4().hex[:20]
    parts = urlsplit(mariadb_server.url)
    admin = pymysql.connect(host=parts.hostname, port=parts.port, user=parts.username,
                            autocommit=True)
    try:
        admin.cursor().execute(f"CREATE DATABASE {name}")
        yield urlunsplit(parts._replace(path=f"/{name}"))
        admin.cursor().execute(f"DROP DATABASE {name}")
    finally:
        admin.close()


def mysql_tables(url: str) -> list[str]:
    parts = urlsplit(url)
    db = pymysql.connect(host=parts.hostname, port=parts.port, user=parts.username,
                         database=parts.path.strip("/"))
    try:
        with db.cursor() as cursor:
            cursor.execute("SHOW TABLES")
            return [row[0] for row in cursor.fetchall()]
    finally:
        db.close()


def test_mysql_listing_creates_no_table(mysql_database: str) -> None:
    with tenure.connect(mysql_database) as store:
        assert listed(store) == ([], {}, None)
        assert mysql_tables(mysql_database) == []
        with store.lock("job"):  # a write still creates the table, then lists its lease
            assert [info.name for info in store.leases()] == ["job"]
    assert mysql_tables(mysql_database) == ["tenure_leases"]
