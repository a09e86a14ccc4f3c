"""The mysql:// section: tenure next to raw floors and tooz, on one MariaDB.

- Uncontended rows: tenure sync with fencing (always on here) and async; raw floors on the same
  server with the same driver (PyMySQL, autocommit): a bare lease-row upsert + DELETE pair (the
  goal's floor), a conditional UPDATE pair on a kept row, and a bare `GET_LOCK(name, 0)` +
  `RELEASE_LOCK(name)` pair; the peer, tooz's mysql driver (GET_LOCK).
- Hand-off contenders: tenure with its defaults, tenure with a short backoff, tooz, the bare
  `GET_LOCK` floor and the floor of a lease-row hand-off (a `GET_LOCK` doorbell, see
  libraries.py).
- Renewal counter: PyMySQL `Connection.query` calls (COM_QUERY packets), and the server's
  `Questions` status counter.

Example::

    section = mysql_cases.section(server, stack, extras)
"""

from __future__ import annotations

import statistics
import time
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
from libraries import pymysql_connection
from lineup import Entry, footprints, takers
from servers import Server
from timing import Runner, timed_loop

import tenure

TITLE = "mysql:// (MariaDB)"
GOAL_VS_ROW_FLOOR = 1.1  # row floor cycles/s ÷ tenure sync cycles/s at most this


def section(server: Server, stack: ExitStack, extras: Extras) -> ServerSection:
    """Every mysql case, hand-off contender and the renewal counter, on `server`.

    Example::

        section = section(server, stack, extras)
    """
    url = server.url
    rtt = round_trip(url)
    extras.facts.append(("MariaDB round trip (`SELECT 1` through PyMySQL, median of 2,000)",
                         f"{rtt * 1e3:.3f} ms"))
    store = tenure.connect(url)
    stack.callback(store.close)
    floor = Case(TITLE, "floor", "floor: bare lease-row upsert + DELETE (2 autocommit statements)",
                 row_floor(url, stack), short="row floor")
    kept = Case(TITLE, "floor", "floor: bare conditional UPDATE pair on a kept row (take if "
                "expired, free if ours)", kept_row_floor(url, stack), floor, short="kept-row floor")
    get_lock = Case(TITLE, "floor", "floor: bare `GET_LOCK(name, 0)` + `RELEASE_LOCK(name)`",
                    get_lock_floor(url, stack), floor, short="GET_LOCK floor")
    try_row, with_row = tenure_cases(TITLE, store.lock(LOCK_NAME), ", fencing on")
    aio_row = async_case(TITLE, url, name=LOCK_NAME + "-async")
    peer = optional_case(TITLE, "peer", "peer: tooz mysql driver, `acquire(blocking=False)` + "
                         "`release()` (GET_LOCK; reconnects every cycle)",
                         lambda: tooz_cycle(url, stack), extras, short="tooz")
    peers = [peer] if peer is not None else []
    for row in (try_row, with_row):
        row.goal, row.goal_limit = f"MySQL row floor ÷ tenure <= {GOAL_VS_ROW_FLOOR:g}", \
            GOAL_VS_ROW_FLOOR
        row.also, row.peers = [kept, get_lock], peers
        row.peer_goal, row.peer_limit = "MySQL: tenure ÷ tooz >= 1 (ahead of the peer)", 1.0
    for row in (try_row, with_row, aio_row, *peers):
        row.floor = floor
    kept_names = kept_names_case(TITLE, try_row, url, stack)
    cases = [try_row, floor, with_row, kept, get_lock, aio_row, kept_names, *peers,
             *multi_lock_cases(TITLE, store)]
    for case in cases:
        case.fragile = True
    contended = [
        Contender("tenure (defaults: sleeps on the server, woken in queue order by the release; "
                  "backoff 10 ms .. 1 s)", "tenure", url, goal=True,
                  fair=True),
        *(Contender(f"{entry.label}, defaults", "tenure", entry.url, fair=True,
                    versus_floor=True)
          for entry in lineup(url) if entry.url.endswith("?mode=getlock")),
        Contender("tenure (min_wait=1 ms, max_wait=20 ms)", "tenure", url,
                  {"min_wait": 0.001, "max_wait": 0.02}),
        Contender("tooz (`acquire(blocking=30)`: GET_LOCK waits on the server)", "tooz", url,
                  {"blocking": 30}),
        Contender("floor: bare blocking `GET_LOCK(name, 60)` + `RELEASE_LOCK` (the server's own "
                  "lock wait, PyMySQL; no expiry, no fencing)", "get-lock", url),
        Contender("floor of a lease-row hand-off: a bare lease row whose holder keeps a "
                  "`GET_LOCK` doorbell; the waiter's `GET_LOCK` + try in one round trip, the "
                  "release's row UPDATE + `RELEASE_LOCK` in one (PyMySQL, no expiry, no fencing; "
                  "not tenure's design)", "get-lock-bell", url),
    ]
    return ServerSection(
        TITLE, url, cases, contended, rtt=rtt,
        rtt_label="`SELECT 1` through PyMySQL, median of 2,000",
        counter=MySQLCounter(server.details["socket"]), takers=takers(lineup(url)),
        footprints=footprints(lineup(url)),
        renewal_options=lambda size: {"table": f"bench_renewal_{size}"},
        renewal_note="One store holds 1, 100 or 1,000 leases while tenure's lease monitor "
                     "renews them. Round trips are PyMySQL `Connection.query` calls (one "
                     "COM_QUERY each) during the store's `renew` calls; statements are the "
                     "server's `Questions` counter (the counter's own SHOW left out).")


def lineup(url: str) -> list[Entry]:
    """tenure (and `?mode=getlock` where the store has it) and tooz, for the takeover and
    memory runs.

    Example::

        entries = lineup("mysql://root@127.0.0.1:3307/tenure")
    """
    entries = [Entry("tenure (sleeps on the server, woken by the release; backoff 10 ms .. 1 s)",
                     "tenure", url, tenure=True)]
    try:
        tenure.connect(f"{url}?mode=getlock").close()
    except Exception:  # InvalidArgument: no such mode yet (issue 20)
        pass
    else:
        entries.append(Entry("tenure `?mode=getlock` (session GET_LOCK)", "tenure",
                             f"{url}?mode=getlock", tenure=True))
    return [
        *entries,
        Entry("tooz mysql driver (`blocking=30`: GET_LOCK waits on the server; no expiry: "
              "ends with its connection)", "tooz", url, {"blocking": 30}, expires=False,
              renewal="nothing to renew (a connection per lock)"),
        Entry("floor: bare blocking `GET_LOCK` + `RELEASE_LOCK` (PyMySQL; no expiry, no "
              "fencing)", "get-lock", url, expires=False, floor=True),
    ]


def round_trip(url: str, count: int = 2000) -> float:
    """The median time of a bare `SELECT 1` through PyMySQL: one round trip, in seconds."""
    connection = pymysql_connection(url)
    with connection, connection.cursor() as cursor:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def row_floor(url: str, stack: ExitStack) -> Runner:
    """A bare lease-row upsert + delete, two autocommit statements on one reused connection."""
    connection = pymysql_connection(url)
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
    """A bare conditional UPDATE pair on a row that stays: take it when expired, free it when
    still ours (what a store that keeps its counter in the lease row must do)."""
    connection = pymysql_connection(url)
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
    """A bare `SELECT GET_LOCK(name, 0)` + `SELECT RELEASE_LOCK(name)` on one connection."""
    connection = pymysql_connection(url)
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


def tooz_cycle(url: str, stack: ExitStack) -> Callable[[], object]:
    """tooz's mysql driver: `acquire(blocking=False)` + `release()` (it closes its connection
    on release and opens a new one on the next acquire)."""
    from tooz import coordination

    coordinator = coordination.get_coordinator(url, b"bench-peer")
    coordinator.start()
    stack.callback(coordinator.stop)
    lock = coordinator.get_lock(f"{LOCK_NAME}-tooz".encode())

    def cycle() -> None:
        if not lock.acquire(blocking=False):
            raise RuntimeError("tooz refused an uncontended lock")
        lock.release()

    return cycle


class MySQLCounter:
    """Renewal counting for MySQL: PyMySQL `Connection.query` calls (client side), the server's
    `Questions` counter without the counter's own SHOW (server side)."""

    columns = ("statements (server: Questions)",)

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.count = 0
        self.own = 0  # Questions each snapshot adds itself
        self.snapshots = 0
        self.original: Any = None

    def install(self) -> None:
        """Wrap `pymysql.connections.Connection.query` to count requests."""
        import pymysql

        self.original = query = pymysql.connections.Connection.query

        def counted(connection: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return query(connection, *args, **kwargs)

        pymysql.connections.Connection.query = counted
        first = self._questions()
        self.own = self._questions() - first

    def uninstall(self) -> None:
        """Undo install."""
        import pymysql

        pymysql.connections.Connection.query = self.original

    def sent(self) -> int:
        """Requests sent since install."""
        return self.count

    def snapshot(self) -> tuple[float, ...]:
        """(Questions, less what the snapshots themselves asked)."""
        self.snapshots += 1
        return (float(self._questions() - self.own * self.snapshots),)

    def _questions(self) -> int:
        import pymysql

        admin = pymysql.connect(unix_socket=self.socket, user="root")
        with admin, admin.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
            return int(cursor.fetchone()[1])
