"""The exactly-once helpers' clock (db_now) on MySQL/MariaDB does not depend on the session's
time zone: in the hour a DST change repeats (Europe/Paris, 2026-10-25, 02:00-03:00 local twice)
it reads the true time, and a claim taken in the first 02:30 is stale in the second.

The server's clock is pinned with SET timestamp (NOW(), UTC_TIMESTAMP() and UNIX_TIMESTAMP()
follow it); the suite's MariaDB gets the Europe/Paris zone from the host's tzdata
(mariadb-tzinfo-to-sql)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from exactly_once_support import mariadb_database
from exactly_once_tables import create_all
from servers import MariaDBServer, find_binary, service_missing

from tenure import claims
from tenure.exactly_once._sql import db_now

ZONEINFO = Path("/usr/share/zoneinfo/Europe/Paris")
FALL_BACK = datetime(2026, 10, 25, 1, 0, tzinfo=timezone.utc).timestamp()  # 03:00 CEST -> 02:00
FIRST_0230 = FALL_BACK - 1800 + 0.25    # 02:30:00.25 CEST (00:30 UTC)
SECOND_0230 = FALL_BACK + 1800 + 0.25   # 02:30:00.25 CET (01:30 UTC), an hour later


@pytest.fixture(scope="module")
def paris_server(mariadb_server: MariaDBServer) -> MariaDBServer:
    """The suite's MariaDB with the Europe/Paris time zone loaded (once)."""
    import pymysql

    connection = pymysql.connect(unix_socket=str(mariadb_server.socket_path), user="root")
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM mysql.time_zone_name WHERE Name = 'Europe/Paris'")
        row = cursor.fetchone()
        if row is not None and row[0]:
            return mariadb_server
    to_sql = find_binary("mariadb-tzinfo-to-sql", "/usr/bin/mariadb-tzinfo-to-sql") or \
        find_binary("mysql_tzinfo_to_sql", "/usr/bin/mysql_tzinfo_to_sql")
    client = find_binary("mariadb", "/usr/bin/mariadb") or find_binary("mysql", "/usr/bin/mysql")
    if to_sql is None or client is None or not ZONEINFO.exists():
        service_missing("loading a time zone into MariaDB needs mariadb-tzinfo-to-sql, the "
                        "mariadb client and tzdata (apt-get install mariadb-client tzdata)")
    assert to_sql is not None and client is not None
    sql = subprocess.run([to_sql, str(ZONEINFO), "Europe/Paris"], capture_output=True,
                         check=True).stdout
    subprocess.run([client, f"--socket={mariadb_server.socket_path}", "-uroot", "mysql"],
                   input=sql, capture_output=True, check=True)
    return mariadb_server


@pytest.fixture
def paris(paris_server: MariaDBServer) -> Iterator[sa.Connection]:
    """A connection to a fresh database whose session runs in Europe/Paris."""
    for url in mariadb_database(paris_server.url):
        engine = sa.create_engine(url)
        create_all(engine, rows=1)
        with engine.connect() as conn:
            conn.execute(sa.text("SET time_zone = 'Europe/Paris'"))
            yield conn
        engine.dispose()


def at(conn: sa.Connection, epoch: float) -> None:
    conn.execute(sa.text(f"SET timestamp = {epoch!r}"))


def local_time(conn: sa.Connection) -> str:
    return str(conn.execute(sa.text("SELECT NOW(6)")).scalar_one())


def test_db_now_reads_the_true_time_in_the_repeated_hour(paris: sa.Connection) -> None:
    for epoch in (FIRST_0230 - 3600, FIRST_0230, SECOND_0230, SECOND_0230 + 3600):
        at(paris, epoch)
        assert paris.execute(sa.select(db_now(paris))).scalar_one() == pytest.approx(
            epoch, abs=1e-6)
    # The hazard is real here: both 02:30 read the same local time, and the expression the
    # helpers used before (UNIX_TIMESTAMP(NOW(6))) reads the second one an hour early.
    at(paris, FIRST_0230)
    first = local_time(paris)
    at(paris, SECOND_0230)
    assert local_time(paris) == first == "2026-10-25 02:30:00.250000"
    old = paris.execute(sa.text("SELECT UNIX_TIMESTAMP(NOW(6))")).scalar_one()
    assert float(old) == pytest.approx(SECOND_0230 - 3600, abs=1e-6)


def test_a_claim_from_the_first_0230_is_stale_in_the_second(paris: sa.Connection) -> None:
    invoices = sa.Table("invoices", sa.MetaData(), autoload_with=paris)
    at(paris, FIRST_0230)
    assert claims.claim(paris, invoices, 0, holder="old", token=1, stale_after=1800)
    at(paris, SECOND_0230)  # an hour later by the clock, the same 02:30 on the wall
    taken = claims.claim(paris, invoices, 0, holder="new", token=2, stale_after=1800)
    assert taken and taken.stale_takeover
    assert not claims.complete(paris, invoices, 0, 1, {"paid_by": "old"})
    assert claims.complete(paris, invoices, 0, 2, {"paid_by": "new"})
