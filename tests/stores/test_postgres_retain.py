"""postgresql://'s `retain` option, in both modes: the rows of names nobody holds are deleted by
the store itself, at the release with retain=0, by a sweep once they have been idle `retain`
seconds, never with retain=inf; tokens keep growing across forgetting, also when two processes
take and release one name with retain=0 at once; a table of the previous version (no freed_at
or used_at column) keeps working; the URL and the errors say the option like the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from servers import PostgresServer
from waiting import wait_until

import tenure
from tenure._async.stores.postgres._advisory_sql import _ADVISORY_DDL
from tenure._async.stores.postgres._table_sql import _DDL

MODES = {"table": "tenure_leases", "advisory": "tenure_advisory"}


def url(server: PostgresServer, schema: str, mode: str, **options: object) -> str:
    query = "".join(f"&{key}={value}" for key, value in options.items())
    return f"{server.url}?schema={schema}&mode={mode}{query}"


def names(server: PostgresServer, schema: str, mode: str) -> list[str]:
    """The names that have a row in the store's table (any slot), sorted."""
    with psycopg.connect(server.url, autocommit=True) as db:
        found = db.execute("SELECT to_regclass(%s)", (f"{schema}.{MODES[mode]}",)).fetchone()
        if found is None or found[0] is None:
            return []
        return [bytes(name).decode() for (name,) in db.execute(
            f"SELECT DISTINCT name FROM {schema}.{MODES[mode]} ORDER BY 1")]


@pytest.mark.parametrize("mode", MODES)
def test_retain_0_forgets_a_name_at_its_release_and_its_next_token_is_larger(
        postgres_server: PostgresServer, schema: str, mode: str) -> None:
    store = tenure.connect(url(postgres_server, schema, mode, retain=0))
    try:
        assert store.url.endswith("retain=0")
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=30).acquire() as lease:
                assert names(postgres_server, schema, mode) == ["invoice-7"]
                tokens.append(lease.token)
            assert names(postgres_server, schema, mode) == []
        assert tokens == sorted(set(tokens)), tokens
        with store.lock("with-record", ttl=30).acquire() as lease:
            assert store.backend.write_record(lease.grant, "done") is True
        assert names(postgres_server, schema, mode) == ["with-record"], "its record stays"
        assert store.backend.read_record("with-record") == "done"
    finally:
        store.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_sweep_forgets_the_names_idle_longer_than_retain(
        postgres_server: PostgresServer, schema: str, mode: str) -> None:
    store = tenure.connect(url(postgres_server, schema, mode), retain=1)
    try:
        for number in range(50):
            store.lock(f"invoice-{number}", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("held", ttl=30).try_acquire()
        assert len(names(postgres_server, schema, mode)) == 51

        def swept() -> bool:
            store.lock("ticker", ttl=30).try_acquire().release()  # type: ignore[union-attr]
            return names(postgres_server, schema, mode) == ["held", "ticker"]

        # retain is 1 s, and a store sweeps at most once a second, from a release or renewal.
        wait_until(swept, 30, "a sweep to forget the 50 idle names")
        assert held is not None and held.release()
    finally:
        store.close()


@pytest.mark.parametrize("mode", MODES)
def test_retain_inf_keeps_every_name_and_the_url_says_retain(
        postgres_server: PostgresServer, schema: str, mode: str) -> None:
    store = tenure.connect(url(postgres_server, schema, mode, retain="inf"))
    try:
        assert store.url.endswith("&retain=inf")
        store.lock("kept", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        assert store.prune(3600) == 0
        assert names(postgres_server, schema, mode) == ["kept"]
        assert store.prune(0, dry_run=True) == 1
        assert names(postgres_server, schema, mode) == ["kept"]
        assert store.prune(0) == 1
        assert names(postgres_server, schema, mode) == []
    finally:
        store.close()
    default = tenure.connect(url(postgres_server, schema, mode))
    assert "retain" not in default.url  # 3600: the default
    default.close()
    keyword = tenure.connect(url(postgres_server, schema, mode), retain=60)
    assert keyword.url.endswith("&retain=60")
    keyword.close()


@pytest.mark.parametrize(("retain", "message"), [
    ("-1", "retain='-1' is out of range: give seconds from 0"),
    ("soon", "retain='soon' is not a number"),
])
def test_a_bad_retain_is_refused_at_the_call(retain: str, message: str) -> None:
    # Port 1: nothing listens there, so an attempt to connect would fail otherwise.
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"postgresql://app@127.0.0.1:1/app?retain={retain}")
    with pytest.raises(tenure.InvalidArgumentType, match="retain must be a number of seconds"):
        tenure.connect("postgresql://app@127.0.0.1:1/app?mode=advisory", retain=[1])


# A process that takes and releases one name over and over, appending "+token" once it holds it
# and "-token" before it releases it to a shared file (O_APPEND: one write per line).
TAKER = r"""
import os, sys, tenure
store = tenure.connect(sys.argv[1])
log = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND)
taken = 0
while taken < int(sys.argv[3]):
    lease = store.lock("invoice", ttl=30).try_acquire()
    if lease is None:
        continue
    os.write(log, f"+{lease.token}\n".encode())
    taken += 1
    os.write(log, f"-{lease.token}\n".encode())
    assert lease.release()
store.close()
"""


@pytest.mark.parametrize("mode", MODES)
def test_two_processes_forgetting_one_name_at_each_release_never_overlap_nor_go_back(
        postgres_server: PostgresServer, schema: str, mode: str, tmp_path: Path) -> None:
    """retain=0: every release deletes the name's rows while the other process's acquire may be
    inserting them again; the grants never overlap and their tokens only grow."""
    log = tmp_path / "log"
    log.touch()
    store_url = url(postgres_server, schema, mode, retain=0)
    tenure.connect(store_url).close()
    takers = [subprocess.Popen([sys.executable, "-c", TAKER, store_url, str(log), "150"])
              for _ in range(2)]
    for taker in takers:
        assert taker.wait(120) == 0
    lines = log.read_text().split()
    assert len(lines) == 600
    tokens = [int(line[1:]) for line in lines[::2]]
    for taken, released in zip(lines[::2], lines[1::2], strict=True):
        assert taken[0] == "+" and released == "-" + taken[1:], "two held it at once"
    assert tokens == sorted(set(tokens)), "a token went back"
    assert names(postgres_server, schema, mode) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_table_of_the_previous_version_gains_its_column_and_keeps_its_leases(
        postgres_server: PostgresServer, schema: str, mode: str) -> None:
    """The table as the version before `retain` made it (no freed_at / used_at): the store adds
    the column where it creates tables, and the lease held in it lives on."""
    table = f"{schema}.{MODES[mode]}"
    column = "freed_at" if mode == "table" else "used_at"
    ddl = _DDL if mode == "table" else _ADVISORY_DDL
    old = "\n".join(line for line in ddl.splitlines() if column not in line)
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(old.replace("{t}", table).replace("IF NOT EXISTS ", ""))
    store = tenure.connect(url(postgres_server, schema, mode))
    other = tenure.connect(url(postgres_server, schema, mode))
    try:
        held = store.lock("held", ttl=30).try_acquire()
        assert held is not None
        assert other.lock("held", ttl=30).try_acquire() is None
        assert [info.name for info in other.leases()] == ["held"]
        token = held.token
        assert held.release()
        assert other.prune(0) == 1
        again: Any = other.lock("held", ttl=30).try_acquire()
        assert again is not None and again.token > token
        assert again.release()
    finally:
        store.close()
        other.close()
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass "
                          "AND attname = %s", (table, column)).fetchone() == (1,)
