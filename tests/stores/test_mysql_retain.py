"""mysql://'s `retain` option and prune, in both modes (the lease table; `mode=getlock`'s
counters table): the rows of names nobody holds are deleted by the store itself, at the
release with retain=0, by a later release's sweep once idle `retain` seconds, never with
retain=inf; a table made before the index gets it; a listing reads the live leases through
the index, not the dead names; the URL and the errors say the option like the others. The
conformance suite (tests/conformance/test_pruning.py) runs prune's guarantees."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from servers import MariaDBServer
from waiting import wait_until

import tenure

MODES = {"table": "", "getlock": "&mode=getlock"}


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def table() -> str:
    return "r" + uuid.uuid4().hex[:20]


def sql(server: MariaDBServer, statement: str) -> list[tuple[Any, ...]]:
    connection = pymysql.connect(unix_socket=str(server.socket_path), user="root",
                                 database="tenure", autocommit=True, read_timeout=30)
    with connection, connection.cursor() as cursor:
        cursor.execute(statement)
        return list(cursor.fetchall())


@pytest.fixture
def rows(mariadb_server: MariaDBServer, table: str, mode: str) -> Iterator[Any]:
    """The names (and slots) with a row in the store's table, sorted."""
    stored = table if mode == "table" else f"{table}_counters"

    def read() -> list[tuple[str, int]]:
        try:
            found = sql(mariadb_server, f"SELECT name, slot FROM `{stored}` ORDER BY name, slot")
        except pymysql.err.ProgrammingError:  # no table yet
            return []
        return [(bytes(name).decode(), int(slot)) for name, slot in found]

    yield read
    sql(mariadb_server, f"DROP TABLE IF EXISTS `{table}`, `{table}_counters`")


def url_of(server: MariaDBServer, table: str, mode: str, query: str = "") -> str:
    return f"{server.url}?table={table}{MODES[mode]}{query}"


def test_retain_0_forgets_a_name_at_its_release_and_its_next_token_is_larger(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    store = tenure.connect(url_of(mariadb_server, table, mode, "&retain=0"))
    try:
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=30).acquire() as lease:
                assert [name for name, _ in rows()] == ["invoice-7"]
                tokens.append(lease.token)
            assert rows() == []
        assert tokens == sorted(set(tokens)), tokens
        first, second = (store.semaphore("pool", 2, ttl=30).try_acquire() for _ in range(2))
        assert first is not None and second is not None
        first.release()
        assert {name for name, _ in rows()} == {"pool"}, "kept while the other slot is held"
        second.release()
        assert rows() == []
        third = store.semaphore("pool", 2, ttl=30).try_acquire()
        assert third is not None and third.token > second.token
        third.release()
    finally:
        store.close()


def test_a_release_sweeps_the_names_idle_longer_than_retain(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    store = tenure.connect(url_of(mariadb_server, table, mode), retain=1)
    try:
        for number in range(50):
            store.lock(f"invoice-{number}", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("held", ttl=30).try_acquire()
        assert len(rows()) == 51

        def swept() -> bool:
            store.lock("ticker", ttl=30).try_acquire().release()  # type: ignore[union-attr]
            return [name for name, _ in rows()] == ["held", "ticker"]

        # At least a second: retain is 1 s; then a release within the sweep interval (1 s).
        wait_until(swept, 30, "a release to sweep the 50 idle names")
        assert held is not None and held.release()
    finally:
        store.close()


def test_retain_inf_keeps_every_name_and_the_url_says_retain(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    url = url_of(mariadb_server, table, mode)
    store = tenure.connect(f"{url}&retain=inf")
    try:
        assert store.url.endswith("&retain=inf")
        store.lock("kept", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        assert store.prune(3600) == 0
        assert rows() == [("kept", 0)]
        assert store.prune(0, dry_run=True) == 1
        assert store.prune(0) == 1
        assert rows() == []
    finally:
        store.close()
    store = tenure.connect(url, retain=60)
    assert store.url == f"{url}&retain=60", "a keyword shows in the URL too"
    store.close()
    assert tenure.connect(url).url == url  # 3600: the default


def test_a_prune_goes_through_more_names_than_a_batch(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    store = tenure.connect(url_of(mariadb_server, table, mode, "&retain=inf"))
    try:
        for number in range(1_200):  # more than 2 batches of SWEEP_BATCH (500)
            store.lock(f"job-{number}", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("job-held", ttl=30).try_acquire()
        assert store.prune(0, dry_run=True) == 1_200
        assert store.prune(0) == 1_200
        assert rows() == [("job-held", 0)]
        assert held is not None and held.release()
    finally:
        store.close()


@pytest.mark.parametrize(("retain", "message"), [
    ("-1", "retain='-1' is out of range: give seconds from 0"),
    ("soon", "retain='soon' is not a number"),
])
def test_a_bad_retain_is_refused_before_any_connection(retain: str, message: str) -> None:
    # Port 9 (discard): nothing listens, so any I/O would fail otherwise.
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"mysql://127.0.0.1:9/tenure?retain={retain}")


def test_a_prune_of_a_store_never_used_makes_no_table(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    store = tenure.connect(url_of(mariadb_server, table, mode))
    try:
        assert store.prune(0) == 0
        assert store.prune(0, dry_run=True) == 0
        assert store.leases() == []
    finally:
        store.close()
    assert sql(mariadb_server, f"SHOW TABLES LIKE '{table}%'") == []


def test_a_table_made_before_the_index_gets_it_and_lists_through_it(
        mariadb_server: MariaDBServer, table: str, mode: str, rows: Any) -> None:
    stored, added = (table, {"tenure_expiry"}) if mode == "table" else (
        f"{table}_counters", {"tenure_counter", "tenure_live"})
    url = url_of(mariadb_server, table, mode)
    store = tenure.connect(url)
    store.lock("made", ttl=30).try_acquire().release()  # type: ignore[union-attr]
    store.close()
    for index in added:  # as before `retain` (and getlock's listing index)
        sql(mariadb_server, f"ALTER TABLE `{stored}` DROP INDEX {index}")

    def indexes() -> set[str]:
        return {str(row[2]) for row in sql(mariadb_server, f"SHOW INDEX FROM `{stored}`")}

    assert not added & indexes()
    store = tenure.connect(url)
    try:
        held = store.lock("held", ttl=30).try_acquire()
        assert not added & indexes(), "the hot path does not look at the indexes"
        assert [info.name for info in store.leases()] == ["held"]
        assert added <= indexes()
        assert store.prune(0) == 1  # "made"
        assert held is not None and held.release()
    finally:
        store.close()
