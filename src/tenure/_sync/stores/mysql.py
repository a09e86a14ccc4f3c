# GENERATED from src/tenure/_async/stores/mysql.py by scripts/unasync.py: do not edit.
"""`mysql://user:password@host:3306/database` (or `mariadb://`): leases in a MySQL or MariaDB table.

One InnoDB row per (name, slot) in `tenure_leases` (option `table`), created on first use and
never deleted. Expiry is the SERVER's clock in microseconds since the epoch (UTC_TIMESTAMP(6),
which no session time zone affects), never this host's. The row of slot 0 also keeps the name's
fencing counter, so a lock is taken with ONE autocommit `INSERT ... ON DUPLICATE KEY UPDATE`
whose answer (affected rows and LAST_INSERT_ID, both in the OK packet) says whether it won and
with which token. A semaphore is one round trip too: a short transaction sent as one
multi-statement, serialized per name by the lock on that slot-0 row. Renewal of every lease a
process holds is one UPDATE; release and break are one UPDATE each. A waiter sleeps on the
server (SELECT SLEEP) with its next try sent right behind the sleep, and the release that frees
its name ends the sleep with KILL QUERY, so the server runs that try at once and the wait
returns the grant it took (see _WAIT, _sleep_then_try and wait_and_acquire); one waiter per
name and process sleeps so, the others poll with their backoff (see _MOST_ASLEEP).

Example::

    store = tenure.connect("mysql://app:secret@db.internal/locks")
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import anyio

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    record_bytes,
    subject,
)
from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreRefused,
    StoreUnavailable,
)
from tenure._names import name_digest
from tenure._timing import Backoff, fresh_for
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import redact

try:
    import pymysql  # type: ignore[import-untyped]
    from pymysql.constants import CLIENT, COMMAND, CR, ER  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("the mysql:// store needs a MySQL driver: install tenure[mysql] "
                       "(pip install 'tenure[mysql]')") from exc

log = logging.getLogger("tenure")

SCHEMES: tuple[str, ...] = ("mysql", "mariadb")
OPTIONS = ("table", "timeout", "pool_size", "unix_socket")
DEFAULT_TABLE = "tenure_leases"
DEFAULT_TIMEOUT = 5.0
DEFAULT_POOL_SIZE = 10
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

# The asyncio driver's calls are coroutines over streams with no read or write timeout, while
# the sync driver, PyMySQL, blocks on sockets that take read_timeout/write_timeout. This one
# flag tells the two apart where they differ (see _driver_options and _deadline).
_COROUTINES = inspect.iscoroutinefunction(pymysql.Connection.query)

# Server time: UTC_TIMESTAMP(6) is fixed for the duration of a statement and independent of the
# session's time zone (NOW(6) and UNIX_TIMESTAMP() are not, around DST changes). Expiry is a
# DATETIME(6) in UTC (cheap to compare); counters are seeded from the same clock in µs.
_NOW = "UTC_TIMESTAMP(6)"
_NOW_US = "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
_FREED = "'1970-01-01'"  # expires_at of a released or broken lease
# Run when a connection opens, in one round trip with the PREPAREs (see _open; the driver's
# init_command would cost two, its query and a COMMIT): assignments of an UPDATE (and of ON
# DUPLICATE KEY UPDATE) go left to right, each seeing the ones before it, as _ACQUIRE_LOCK
# needs. MariaDB's sql_mode SIMULTANEOUS_ASSIGNMENT would make them all see the old row; MySQL
# has no such mode.
_SESSION = ("SET SESSION sql_mode = TRIM(BOTH ',' FROM REPLACE("
            "CONCAT(',', @@SESSION.sql_mode, ','), ',SIMULTANEOUS_ASSIGNMENT,', ','))")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS `{table}` (
    name_key   BINARY(16)      NOT NULL,  -- blake2b-128 of the UTF-8 name (too long to index)
    slot       INT             NOT NULL,
    name       VARBINARY(4096) NOT NULL,  -- UTF-8; binary: no collation folds case or pads
    holder     VARBINARY(1024) NOT NULL,
    lease_id   BIGINT          NOT NULL,  -- random per grant; 0 once released or broken
    token      BIGINT          NOT NULL,  -- the token of the lease on this row
    counter    BIGINT          NOT NULL,  -- slot 0 only: the last token granted for the name
    expires_at DATETIME(6)     NOT NULL,  -- UTC, by the server's clock
    sleepers   VARBINARY(1024) NOT NULL DEFAULT ',',  -- slot 0: <> ',' when waiters (see _WAIT)
    record     BLOB,                      -- slot 0 only: the name's record (UTF-8)
    record_writes BIGINT       NOT NULL DEFAULT 0,  -- slot 0: counts writes (see _WRITE_RECORD)
    PRIMARY KEY (name_key, slot)
) ENGINE=InnoDB
"""

# A lock (limit 1): take slot 0 when it is free (or already ours: a retry of this same grant
# after a lost answer). The name's counter moves to max(counter + 1, server clock in µs), so
# tokens also stay ahead of grants that a crash of the server lost before they reached disk.
# LAST_INSERT_ID(x) puts the token into the OK packet; affected rows are 1 (inserted), 2 (taken
# over) or 0 (held by someone else). The assignments run left to right (the session turns off
# MariaDB's SIMULTANEOUS_ASSIGNMENT, see _SESSION): `lease_id` becomes ours only when the row
# is free, and every later one tests just that. The drivers speak the text protocol, where the
# server parses a statement's text on every call, which costs about as much as executing it: on
# MariaDB the statements of an uncontended cycle are prepared once per connection (see
# _PREPARED), elsewhere the statement is kept short. Parameters: key, name, holder, lease_id,
# ttl_us.
_EXPIRES = f"{_NOW} + INTERVAL %(ttl_us)s MICROSECOND"


def _acquire_lock(new: dict[str, str]) -> str:
    """The lock's upsert, with `new[column]` standing for the value the INSERT brings in the
    update branch: the parameter itself (the text), or VALUES(column) (prepared on MariaDB)."""
    ours = f"lease_id = {new['lease_id']}"
    return f"""
INSERT INTO `{{table}}` (name_key, slot, name, holder, lease_id, token, counter, expires_at)
VALUES (UNHEX(%(key)s), 0, %(name)s, %(holder)s, %(lease_id)s, {_NOW_US},
        LAST_INSERT_ID({_NOW_US}), {_EXPIRES})
ON DUPLICATE KEY UPDATE
    lease_id = IF(expires_at <= {_NOW}, {new['lease_id']}, lease_id),
    holder = IF({ours}, {new['holder']}, holder),
    counter = IF({ours}, LAST_INSERT_ID(GREATEST(counter + 1, {_NOW_US})), counter),
    token = IF({ours}, counter, token),
    expires_at = IF({ours}, {new['expires_at']}, expires_at)
"""


_ACQUIRE_LOCK = _acquire_lock(
    {"lease_id": "%(lease_id)s", "holder": "%(holder)s", "expires_at": _EXPIRES})
# The same for MariaDB, prepared (see _PREPARED): VALUES(column) reads the inserted row's value,
# so that each parameter is sent once. (MySQL 8.0.20+ deprecates VALUES() for a row alias that
# MariaDB lacks.)
_ACQUIRE_LOCK_MARIADB = _acquire_lock(
    {column: f"VALUES({column})" for column in ("lease_id", "holder", "expires_at")})

# A semaphore (limit > 1): one transaction in one round trip. The upsert of slot 0 creates the
# name's row when missing (counter seeded from the server clock) and locks it until COMMIT, so
# grants of one name run one after another. The lowest free slot is 0 or next to an existing
# row; a slot this grant already holds (a retry after a lost answer) is taken again. Slot 0's
# lock does not hold off renewals, which lock only their own rows, and where the pick reads a
# snapshot (MySQL 8 may) it can miss a renewal that committed after it: so the slot's upsert
# takes the row only if it is STILL free (or ours) when it locks it, as PostgreSQL's ON
# CONFLICT ... WHERE does, and the grant counts only if it changed the row (@tenure_won).
# Lock order, everywhere in this store: a statement or transaction that locks two rows of a
# name locks slot 0 first (this one; renewals and breaks go up the primary key; a semaphore's
# release locks its slot and slot 0 in two autocommit statements, see _RELEASE_SLOT), so that
# none waits for another in a cycle (InnoDB error 1213). Parameters: key, name, holder,
# lease_id, ttl_us, limit.
_ACQUIRE_SLOT = f"""
START TRANSACTION;
INSERT INTO `{{table}}` (name_key, slot, name, holder, lease_id, token, counter, expires_at)
VALUES (UNHEX(%(key)s), 0, %(name)s, '', 0, 0, {_NOW_US}, {_FREED})
ON DUPLICATE KEY UPDATE counter = counter;
SET @tenure_now = {_NOW};
SET @tenure_slot = COALESCE(
    (SELECT slot FROM `{{table}}`
     WHERE name_key = UNHEX(%(key)s) AND lease_id = %(lease_id)s AND slot < %(limit)s LIMIT 1),
    (SELECT MIN(candidate.slot) FROM (
         SELECT 0 AS slot
         UNION SELECT slot FROM `{{table}}` WHERE name_key = UNHEX(%(key)s)
         UNION SELECT slot + 1 FROM `{{table}}` WHERE name_key = UNHEX(%(key)s)
     ) AS candidate
     WHERE candidate.slot < %(limit)s AND NOT EXISTS (
         SELECT 1 FROM `{{table}}` AS live
         WHERE live.name_key = UNHEX(%(key)s) AND live.slot = candidate.slot
           AND live.expires_at > @tenure_now)));
UPDATE `{{table}}` SET counter = LAST_INSERT_ID(GREATEST(counter + 1, {_NOW_US}))
WHERE name_key = UNHEX(%(key)s) AND slot = 0 AND @tenure_slot IS NOT NULL;
SET @tenure_token = IF(@tenure_slot IS NULL, NULL, LAST_INSERT_ID());
INSERT INTO `{{table}}` (name_key, slot, name, holder, lease_id, token, counter, expires_at)
SELECT UNHEX(%(key)s), @tenure_slot, %(name)s, %(holder)s, %(lease_id)s, @tenure_token, 0,
       @tenure_now + INTERVAL %(ttl_us)s MICROSECOND
FROM DUAL WHERE @tenure_slot IS NOT NULL
ON DUPLICATE KEY UPDATE
    lease_id = IF(expires_at <= @tenure_now OR lease_id = %(lease_id)s, %(lease_id)s, lease_id),
    holder = IF(lease_id = %(lease_id)s, %(holder)s, holder),
    token = IF(lease_id = %(lease_id)s, @tenure_token, token),
    expires_at = IF(lease_id = %(lease_id)s, @tenure_now + INTERVAL %(ttl_us)s MICROSECOND,
                    expires_at);
SET @tenure_won = ROW_COUNT() > 0;
COMMIT;
SELECT IF(@tenure_won, @tenure_slot, NULL), IF(@tenure_won, @tenure_token, NULL)
"""

# Parameters: ttl_us, then (key, slot, lease_id) per grant.
_RENEW = (f"UPDATE `{{table}}` SET expires_at = {_NOW} + INTERVAL %s MICROSECOND "
          f"WHERE expires_at > {_NOW} AND (name_key, slot, lease_id) IN ({{rows}})")
# Parameters: (key, slot) per grant.
_WHY_LOST = (f"SELECT name, slot, lease_id, expires_at > {_NOW} FROM `{{table}}` "
             "WHERE (name_key, slot) IN ({rows})")


def _flag_read(sleepers: str) -> str:
    """Slot 0's waiters' flag (`sleepers`: the column, maybe qualified; ',' when no waiter is
    known, see _WAIT) unchanged, its state put into the OK packet as LAST_INSERT_ID (1 when
    someone waits, else 0)."""
    return f"IF(LAST_INSERT_ID({sleepers} <> ','), {sleepers}, {sleepers})"


# Release also reads slot 0's waiters' flag (see _WAIT): it comes back as LAST_INSERT_ID in the
# OK packet, so only a release that someone waits for costs one more round trip (the KILL QUERY
# that wakes a waiter). A semaphore's other slots free their row and then, in a second
# autocommit statement of the same round trip, read slot 0's flag when the first one freed the
# row (ROW_COUNT; the flag is left as it is, so the row does not change): each statement locks
# one row, so a release never holds its slot while it waits for slot 0, which an acquire holds
# while it reads that slot (one UPDATE of both rows by a join did, and deadlocked with
# acquires). Parameters: key, lease_id (slot 0); key, slot, lease_id, key (other slots).
_RELEASE = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {_FREED}, "
            f"sleepers = {_flag_read('sleepers')} "
            "WHERE name_key = UNHEX(%(key)s) AND slot = 0 AND lease_id = %(lease_id)s "
            f"AND expires_at > {_NOW}")
_RELEASE_SLOT = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {_FREED} "
                 "WHERE name_key = UNHEX(%s) AND slot = %s AND lease_id = %s "
                 f"AND expires_at > {_NOW}; "
                 f"UPDATE `{{table}}` SET sleepers = {_flag_read('sleepers')} "
                 "WHERE name_key = UNHEX(%s) AND slot = 0 AND ROW_COUNT() > 0")

# The statements of an uncontended cycle, prepared on each new connection to MariaDB with
# PREPARE (text protocol) and run with `EXECUTE name USING <literals>`: the server parses only
# the short EXECUTE. MySQL 8 takes only user variables after USING, which would cost a
# SET + EXECUTE multi-statement per call (slower than parsing on MariaDB): MySQL gets the text.
# A PREPARE that finds the table missing fails like any statement (then the table is created
# and the connection opened again); one whose table is later dropped or altered is prepared
# again by the server itself.
_PREPARED = {"lock": ("tenure_lock", _ACQUIRE_LOCK_MARIADB),
             "release": ("tenure_release", _RELEASE)}
_PARAMETER = re.compile(r"%\((\w+)\)s")


def _binary(text: str) -> str:
    """`text` as a SQL literal of its UTF-8 bytes (hex): no escaping to get wrong, and cheaper
    for the client than the driver's escaping of a quoted string.

    Example:
        >>> _binary("jobs")
        "X'6a6f6273'"
    """
    return f"X'{text.encode().hex()}'"


def _placeholders(statement: str) -> tuple[str, list[str]]:
    """A statement with named pyformat parameters, with `?` placeholders for PREPARE, and the
    names of its parameters in order."""
    names: list[str] = []

    def mark(found: re.Match[str]) -> str:
        names.append(found.group(1))
        return "?"

    return _PARAMETER.sub(mark, statement), names


# Waking waiters without notifications: a waiter sleeps on the server (SELECT SLEEP on a
# connection of the store's waiting pool) while the name stays taken (live slots >= limit), its
# statements tagged with a comment naming the table and the name's key. A release ends the
# longest such sleep with KILL QUERY, found by its tag in the server's process list, which
# shows a user its own connections and needs no privilege to KILL QUERY them: each release
# wakes one sleeper (waking all would have them all retry for the one free slot).
#
# A wait writes nothing per wait. Slot 0's row is the name's hottest (every acquire and release
# locks it), and a change to it costs a commit while its lock is held: waiters that wrote their
# ids there (an earlier design) made a crowd of waiters stall every hand-off. The row only keeps
# a flag, `sleepers` <> ',', set by the first waiter (the UPDATE below changes the row only
# when the flag is clear) and read by releases, which look for a sleeper only when it is set; a
# release that finds none clears it (_UNFLAG). A waiter sleeps
# only while the flag is set, so a flag cleared between its two statements costs it no more
# than its sleep. The waiter's next try goes out right behind these statements (see
# _sleep_then_try). Parameters: key, key, limit, limit, seconds, key.
_WAIT_TAG = "tenure-wait {table} {key}"
# Waits of one name that sleep on the server at once, per store: the others poll with their
# backoff. Each release wakes one sleeper, and a crowd of sleeping statements costs the server
# more than it gains: with 3 processes x 20 tasks on one name, all asleep, the hand-off
# throughput fell to a tenth of what 1 sleeper per process gives.
_MOST_ASLEEP = 1
# How long before the end of its caller's patience a sleep on the server ends, so that the try
# sent behind it is answered in time (a loopback round trip is about 0.1 ms), and how late
# that answer may come before the wait is cut off (and what the try took is undone).
_TRY_ALLOWANCE = 0.01
_WAIT = (f"UPDATE /* {_WAIT_TAG} */ `{{table}}` SET sleepers = ',w,' "
         "WHERE name_key = UNHEX(%s) AND slot = 0 AND sleepers = ','; "
         f"SELECT /* {_WAIT_TAG} */ SLEEP(IF(z.sleepers <> ',' AND ("
         "SELECT COUNT(*) FROM `{table}` AS l WHERE l.name_key = UNHEX(%s) AND l.slot < %s "
         f"AND l.expires_at > {_NOW}) >= %s, %s, 0)) "
         "FROM `{table}` AS z WHERE z.name_key = UNHEX(%s) AND z.slot = 0")
# The longest sleeping waiter of a name (the tag is split so that this statement, which other
# waits' releases also see in the process list, does not carry it). Parameters: key.
# Only this database's: a table of the same name in another database has sleepers of its own.
_SLEEPER = ("(SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND "
            "LOCATE(CONCAT('/* tenure', '-wait {table} ', %s, ' */'), INFO) > 0 "
            "ORDER BY TIME DESC LIMIT 1)")
# Sent in the same round trip as a release of a name that this store saw contended: wakes the
# longest sleeper of the name. KILL takes no subquery, hence the variable; KILL QUERY 0 when
# none sleeps fails with error 1094. Parameters: key.
_WAKE_NEXT = f"; SET @tenure_sleeper = {_SLEEPER}; KILL QUERY COALESCE(@tenure_sleeper, 0)"
# Clears the waiters' flag of a name, once a look at the process list found no sleeper. Not
# in one statement with that look: the UPDATE would hold slot 0's lock while the server reads
# its process list, which waits behind any KILL in progress (a second or more, measured), and
# every acquire and release of the name would wait too. A waiter that sets the flag between
# the look and the clear sleeps unwoken at worst until its backoff ends. Parameters: key.
_UNFLAG = ("UPDATE `{table}` SET sleepers = ',' WHERE name_key = UNHEX(%s) AND slot = 0 "
           "AND sleepers <> ','")
# Undoes an acquire whose answer never came in (see _forget): frees whichever slot it took, by
# its lease id, once the connection that sent it (its id in @tenure_alive) is gone, and says
# whether it still ran. Parameters: connection id, key, lease_id.
_FORGET = ("SET @tenure_alive = EXISTS(SELECT 1 FROM information_schema.PROCESSLIST "
           "WHERE ID = %s); "
           f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {_FREED} "
           f"WHERE name_key = UNHEX(%s) AND lease_id = %s AND expires_at > {_NOW} "
           "AND @tenure_alive = 0; "
           "SELECT @tenure_alive")
# Break reads slot 0's waiters' flag as release does (when slot 0 was held). Parameters: key.
_BREAK = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {_FREED}, "
          f"sleepers = IF(slot = 0, {_flag_read('sleepers')}, sleepers) "
          f"WHERE name_key = UNHEX(%s) AND expires_at > {_NOW}")
# Parameters: prefix length in bytes, prefix.
_LIST = (f"SELECT name, slot, holder, token, TIMESTAMPDIFF(MICROSECOND, {_NOW}, expires_at) "
         f"FROM `{{table}}` WHERE expires_at > {_NOW} AND LEFT(name, %s) = UNHEX(%s) "
         "ORDER BY name, slot")

# Records live in slot 0's row (never deleted). A write takes effect only while the writer's
# lease row is live; it also counts the write, so that rewriting the same record still changes
# the row (affected rows count changed rows). Parameters: slot, lease_id, record (hex: the
# asyncio driver cannot escape bytes), key.
_WRITE_RECORD = (f"UPDATE `{{table}}` AS z JOIN `{{table}}` AS l ON l.name_key = z.name_key "
                 f"AND l.slot = %s AND l.lease_id = %s AND l.expires_at > {_NOW} "
                 "SET z.record = UNHEX(%s), z.record_writes = z.record_writes + 1 "
                 "WHERE z.name_key = UNHEX(%s) AND z.slot = 0")
# Parameters: key.
_READ_RECORD = "SELECT record FROM `{table}` WHERE name_key = UNHEX(%s) AND slot = 0"
# Parameters: prefix length in bytes, prefix.
_RECORDS = ("SELECT name, record FROM `{table}` WHERE slot = 0 AND record IS NOT NULL "
            "AND LEFT(name, %s) = UNHEX(%s) ORDER BY name")

_CONNECTION_LOST = {CR.CR_SERVER_GONE_ERROR, CR.CR_SERVER_LOST, 1927, 4031}  # 1927: MariaDB
# killed; 4031: MySQL 8 disconnected an idle client
_DRIVER_ERRORS = (pymysql.Error, OSError, EOFError, TimeoutError)
# A deadlock (1213: InnoDB rolled the transaction back) or a lock wait timeout (1205): another
# client held a row this call needed. Retried within the call (see _call), after a jittered
# pause so that the two clients do not collide again in step.
_CONFLICTS = (ER.LOCK_DEADLOCK, ER.LOCK_WAIT_TIMEOUT)
_CONFLICT_PAUSE = (0.001, 0.05)  # the first pause's least, and the longest pause (seconds)


def _error_code(exc: BaseException) -> int | None:
    code = exc.args[0] if isinstance(exc, pymysql.Error) and exc.args else None
    return code if isinstance(code, int) else None


def _number_of(grant: Grant) -> int:
    """The lease id of a grant of this store as the integer stored in the table (-1, which no
    row holds, for an id this store did not make)."""
    return int(grant.lease_id) if grant.lease_id.isdecimal() else -1


def _driver_options(database: str, timeout: float) -> dict[str, Any]:
    """The connect() keywords in which the asyncio driver and PyMySQL differ: the database
    keyword (`db` vs `database`), and socket timeouts, which only PyMySQL has (async calls are
    bounded by a cancel scope instead, see `_deadline`)."""
    if _COROUTINES:
        return {"db": database}
    return {"database": database, "read_timeout": timeout, "write_timeout": timeout}


def _deadline(seconds: float) -> contextlib.AbstractContextManager[Any]:
    """A bound on one async call (the asyncio driver has no socket timeouts); nothing for PyMySQL,
    whose sockets time out by themselves."""
    return anyio.fail_after(seconds) if _COROUTINES else contextlib.nullcontext()


def _forsake(connection: Any) -> None:
    """Let go of a connection inherited across fork() without sending anything on it (no
    COM_QUIT: the socket is the parent's too, and the server would end the parent's session)."""
    if _COROUTINES:
        # Closing the asyncio transport would take its socket out of the epoll instance that
        # the child shares with its parent, whose event loop would then never hear from that
        # connection again; so would its StreamWriter when collected. Kept for good (in the
        # child only: a few per store), it is never touched.
        _FORSAKEN.append(connection)
    else:
        connection._force_close()  # closes the child's copy of the socket only


_FORSAKEN: list[Any] = []


def _number(options: dict[str, Any], option: str, default: float, low: float, high: float,
            kind: type = float) -> Any:
    value = options.get(option, default)
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError
        number = kind(value)
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"{option}={value} is not a valid {'integer' if kind is int else 'number'}; "
            f"use {low:g} to {high:g} (default {default:g})"
        ) from None
    if not low <= number <= high:
        raise InvalidArgument(
            f"{option}={value} is out of range: it must be {low:g} to {high:g} "
            f"(default {default:g})"
        )
    return number


def _acquired(connection: Any, limit: int) -> tuple[int, int] | None:
    """The answer to an acquire (see _acquire_statement) whose first result has been read:
    (slot, token), or None when nothing was free."""
    result = connection._result
    while result.has_next:  # a semaphore's transaction: its SELECT comes last
        connection.next_result()
        result = connection._result
    if limit == 1:  # the upsert's OK packet: affected rows and the token as LAST_INSERT_ID
        return (0, int(result.insert_id)) if result.affected_rows else None
    slot, token = result.rows[0]
    return None if slot is None else (int(slot), int(token))


def _sleep_then_try(connection: Any, wait: str, then: str | None,
                          limit: int) -> tuple[bool, tuple[int, int] | None]:
    """Send the statements of a wait (see _WAIT) and, right behind them before any answer,
    an acquire (`then`, if any), and read both answers: (False, None) when a KILL QUERY meant for
    the wait reached the acquire instead (its outcome is unknown), else (True, the
    acquire's answer as `_acquired` gives it).

    When a release ends the sleep with KILL QUERY, the server runs the acquire at once,
    instead of after the wait's answer reached this process and a new query came back: a
    hand-off in about one round trip. Only the wait is killed (MariaDB aborts the whole
    multi-statement with error 1317); the acquire behind it is a query of its own.

    Neither driver sends a query before the answer to the previous one is read (no
    pipelining), so this writes both with their internals, which pymysql and PyMySQL share:
    `_execute_command`, `_read_query_result` and the packet sequence number `_next_seq_id`,
    which restarts at 1 for each query's answer.
    """
    connection._execute_command(COMMAND.COM_QUERY, wait)
    if then is not None:
        connection._execute_command(COMMAND.COM_QUERY, then)
    try:
        connection._read_query_result()
        while connection._result.has_next:
            connection._read_query_result()
    except pymysql.OperationalError as exc:
        if _error_code(exc) != ER.QUERY_INTERRUPTED:  # woken: the rest of the wait is skipped
            raise
    if then is None:  # a plain wait (wait_released)
        return True, None
    connection._next_seq_id = 1
    try:
        connection._read_query_result()
    except pymysql.OperationalError as exc:
        if _error_code(exc) != ER.QUERY_INTERRUPTED:
            raise
        return False, None  # a KILL QUERY meant for the sleep came just after it ended
    return True, _acquired(connection, limit)


def _woke(next_answer: Any) -> bool:
    """Read the answers to _WAKE_NEXT with `next_answer` (the connection's or the cursor's
    next-result call): True when its KILL QUERY ended a sleep."""
    next_answer()  # the SET that found the sleeper
    try:
        next_answer()
    except pymysql.OperationalError as exc:
        # 1094: no such thread (none slept: KILL QUERY 0, or it is gone); 1095: not ours
        if _error_code(exc) not in (ER.NO_SUCH_THREAD, ER.KILL_DENIED_ERROR):
            raise
        return False
    return True


class _Tried(NamedTuple):
    """What the try sent behind a sleep on the server found: `answered` False when a KILL
    QUERY meant for the sleep cut it off (its outcome is unknown: made again with `lease_id`,
    or undone, by `sent_on`, the connection it went out on)."""

    answered: bool
    grant: Grant | None
    lease_id: int
    sent_on: int


class _Attempt(NamedTuple):
    """What an acquire asks for (a wait sends it behind its sleep)."""

    holder: str
    ttl: float
    limit: int


def from_url(url: str, **options: Any) -> Backend:
    """The store for a `mysql://` (or `mariadb://`) URL, as `tenure.connect` builds it:
    options from the URL's query or as keywords (see MySQLStore).

    Example::

        backend = from_url("mysql://app:secret@db.internal/locks?table=app_leases", timeout=2)
    """
    return MySQLStore(url, **options)


class MySQLStore(Backend, RecordKeeper):
    """Leases in a table of a MySQL 8 or MariaDB 10.5+ database. Needs tenure[mysql].

    URL: `mysql://[user[:password]@]host[:port]/database` or `mariadb://...`; the database must
    exist. Options, in the URL's query or as keywords (keywords win): `table` (default
    "tenure_leases"), `timeout` (seconds for connecting and for every call, default 5),
    `pool_size` (idle connections kept, default 10), `unix_socket` (a socket path, used
    instead of host and port).

    Example::

        backend = MySQLStore("mysql://app:secret@db/locks?table=app_leases", timeout=2)
        store = tenure.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0, notifies_release=True,
                                batched_renewal=True)

    def __init__(self, url: str, **options: Any) -> None:
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        self.url = redact(url)
        parts = urlsplit(url)
        if parts.scheme.lower() not in SCHEMES:
            raise InvalidArgument(f"url {self.url!r} is not a mysql:// or mariadb:// URL")
        given = {**dict(parse_qsl(parts.query, keep_blank_values=True)), **options}
        unknown = sorted(set(given) - set(OPTIONS))
        if unknown:
            raise InvalidArgument(f"unknown option(s) {', '.join(unknown)} for {self.url}; "
                                  f"accepted: {', '.join(OPTIONS)}")
        self.table = str(given.get("table", DEFAULT_TABLE))
        if not _IDENTIFIER.fullmatch(self.table):
            raise InvalidArgument(
                f"table={self.table!r} is not a valid table name; use 1 to 64 ASCII letters, "
                "digits and underscores, not starting with a digit (default 'tenure_leases')"
            )
        self.timeout: float = _number(given, "timeout", DEFAULT_TIMEOUT, 0.1, 600.0)
        self.pool_size: int = _number(given, "pool_size", DEFAULT_POOL_SIZE, 0, 1000, int)
        unix_socket = given.get("unix_socket") or None
        if unix_socket is not None and not isinstance(unix_socket, str):
            raise InvalidArgumentType(
                f"unix_socket must be a str path, got {type(unix_socket).__name__}")
        try:
            port = parts.port or 3306
        except ValueError:
            raise InvalidArgument(f"url {self.url!r} has an invalid port") from None
        self.database = unquote(parts.path.lstrip("/"))
        if not self.database or "/" in self.database:
            raise InvalidArgument(
                f"url {self.url!r} must name a database, as in mysql://user@host/database")
        self._password = unquote(parts.password or "")
        self._connect_options: dict[str, Any] = {
            "host": parts.hostname or "localhost", "port": port,
            "user": unquote(parts.username or "") or None, "password": self._password,
            "unix_socket": unix_socket, "charset": "utf8mb4", "autocommit": True,
            # Several statements per round trip (semaphores). FOUND_ROWS stays off: affected
            # rows must count changed rows, which is how an upsert tells a win from a miss.
            "client_flag": CLIENT.MULTI_STATEMENTS,
            "connect_timeout": self.timeout,
            **_driver_options(self.database, self.timeout),
        }
        self._sql = {
            "lock": _ACQUIRE_LOCK.format(table=self.table),
            "slot": _ACQUIRE_SLOT.format(table=self.table),
            "release": _RELEASE.format(table=self.table),
            "release slot": _RELEASE_SLOT.format(table=self.table),
            "sleeper": f"SELECT {_SLEEPER}".format(table=self.table),
            "unflag": _UNFLAG.format(table=self.table),
            "wake next": _WAKE_NEXT.format(table=self.table),
            "forget": _FORGET.format(table=self.table),
            "break": _BREAK.format(table=self.table),
            "list": _LIST.format(table=self.table),
            "write record": _WRITE_RECORD.format(table=self.table),
            "read record": _READ_RECORD.format(table=self.table),
            "records": _RECORDS.format(table=self.table),
        }
        # On MariaDB (see _PREPARED): the PREPAREs (one multi-statement) and their texts, and
        # per statement the start of its EXECUTE and the order of its parameters.
        self._prepare = "; ".join(f"PREPARE {handle} FROM %s" for handle, _ in _PREPARED.values())
        self._prepare_texts: list[str] = []
        self._executes: dict[str, tuple[str, list[str]]] = {}
        for statement, (handle, template) in _PREPARED.items():
            text, names = _placeholders(template.format(table=self.table))
            self._prepare_texts.append(text)
            self._executes[statement] = (f"EXECUTE {handle} USING ", names)
        self._prepared = False  # the server is MariaDB: the statements above are used
        self._idle: list[Any] = []
        # Connections that sleep for waiters (see _WAIT): kept apart, so that a KILL QUERY that
        # comes after its sleep ended can only cut another sleep short, never a lease statement.
        self._sleepers: list[Any] = []
        # Sleeper connections in use by a wait right now: close() ends them (see close).
        self._sleeping: set[Any] = set()
        self._asleep: dict[str, set[object]] = {}  # key -> the waits sleeping on the server
        self._undoing: set[tuple[str, str, int, int]] = set()  # undos running (see _undo_later)
        self._contended: set[str] = set()  # keys whose releases here wake the next sleeper
        # The table is created when a statement finds it missing (then the call is retried),
        # so a store costs no round trip for it, and needs no CREATE privilege once it exists.
        self._table_missing = False
        self._closed = False
        self._closing = False  # close() began: waits end, and what they take is freed
        _forks.in_child_after_fork(self, MySQLStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a child after fork(): the parent's connections and what they took stay the
        parent's. They are let go without a byte on them (see `_forsake`); the child opens
        its own on first use."""
        inherited = [*self._idle, *self._sleepers]
        self._idle, self._sleepers = [], []
        for connection in inherited:
            _forsake(connection)
        self._contended, self._asleep, self._undoing, self._sleeping = set(), {}, set(), set()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} table={self.table}>"

    # -- connections -------------------------------------------------------------------------

    def _open(self) -> Any:
        """A new connection; the table created first if it was found missing, and on MariaDB
        the cycle's statements prepared (see _PREPARED)."""
        if self._closed:
            raise closed_store(self.url)
        connection = pymysql.connect(**self._connect_options)
        try:
            with connection.cursor() as cursor:
                if self._table_missing:
                    cursor.execute(_SCHEMA.format(table=self.table))
                    self._table_missing = False
                self._prepared = "mariadb" in connection.get_server_info().lower()
                if self._prepared:
                    cursor.execute(f"{_SESSION}; {self._prepare}", self._prepare_texts)
                    while cursor.nextset():
                        pass
                else:
                    cursor.execute(_SESSION)
        except BaseException:
            self._discard(connection)
            raise
        return connection

    def _discard(self, connection: Any) -> None:
        with contextlib.suppress(Exception):
            connection.close()

    def _discard_idle(self) -> None:
        idle, self._idle = self._idle, []  # a swap: other threads may be taking from it
        for connection in idle:
            self._discard(connection)

    def _give_back(self, connection: Any) -> None:
        if self._closed or len(self._idle) >= self.pool_size:
            self._discard(connection)
        else:
            self._idle.append(connection)

    def _call(self, operation: str, label: str, work: Any, *args: Any) -> Any:
        """`work(connection, *args)` on an idle connection (or a new one), then give it back.

        A connection that saw any error is closed. When a pooled connection turns out dead (the
        server restarted, or killed it), the other idle ones are too, and the call runs once
        more on a new connection: every operation here is safe to repeat, acquire included
        (a retry with the same lease id takes back what the lost attempt took). A deadlock or
        lock wait timeout (see _CONFLICTS) is retried after a jittered, growing pause for as
        long as the call's `timeout` lasts, which also bounds those attempts.
        """
        give_up = _shim.monotonic() + self.timeout
        conflicts: Backoff | None = None
        retried = False  # the one retry of a dead pooled connection or a missing table
        while True:
            try:
                connection, reused = self._idle.pop(), True
            except IndexError:  # none idle (also when another thread took the last one)
                connection, reused = None, False
            bound = self.timeout if conflicts is None else max(0.01, give_up - _shim.monotonic())
            try:
                with _deadline(bound):
                    if connection is None:
                        connection = self._open()
                    result = work(connection, *args)
            except BaseException as exc:
                if connection is not None:
                    self._discard(connection)
                if not isinstance(exc, _DRIVER_ERRORS):
                    raise  # cancelled, or a bug: the connection's state is unknown, closed
                code = _error_code(exc)
                if code == ER.NO_SUCH_TABLE:
                    self._table_missing = True  # first use, or dropped meanwhile
                lost = code in _CONNECTION_LOST or isinstance(
                    exc, (OSError, EOFError, pymysql.InterfaceError))
                if lost:
                    self._discard_idle()
                timed_out = isinstance(exc, TimeoutError) or isinstance(
                    exc.__context__, TimeoutError)
                if code in _CONFLICTS:
                    conflicts = conflicts or Backoff(*_CONFLICT_PAUSE)
                    pause = conflicts.next_delay()
                    if _shim.monotonic() + pause < give_up:
                        _shim.sleep(pause)
                        continue
                elif not retried and ((reused and lost and not timed_out)
                                      or code == ER.NO_SUCH_TABLE):
                    retried = True
                    continue
                raise self._failure(operation, label, exc) from None
            self._give_back(connection)
            return result

    def _failure(self, operation: str, label: str, exc: BaseException) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what happened, what to check;
        StoreRefused when retrying cannot clear it (see `_refusal`)."""
        if isinstance(exc, StoreRefused):  # the store is closed: already says so
            return StoreRefused(str(exc))
        code = _error_code(exc)
        where = (self._connect_options["unix_socket"] or
                 f"{self._connect_options['host']}:{self._connect_options['port']}")
        detail = f"{type(exc).__name__}: {exc}"
        # A password of a few characters would mangle the address and numbers it occurs in
        # (drivers never echo one; the URL itself is redacted by its structure).
        if len(self._password) >= 4:
            detail = detail.replace(self._password, "***")
        fix = self._refusal(code)
        if fix is not None:
            return StoreRefused(
                f"{self.url}: {subject(operation, label)} refused ({detail}); {fix}")
        if isinstance(exc, TimeoutError) or isinstance(exc.__context__, TimeoutError):
            hint = (f"no answer within timeout={self.timeout:g} s; check that the server at "
                    f"{where} is up and not overloaded")
        elif code == CR.CR_CONN_HOST_ERROR or isinstance(exc, OSError):
            hint = f"check that the server at {where} is running and reachable"
        else:
            hint = f"check the server at {where} and its error log"
        return StoreUnavailable(
            f"{self.url}: {subject(operation, label)} failed ({detail}); {hint}")

    def _refusal(self, code: int | None) -> str | None:
        """What to fix when the server's error `code` is permanent; None when it is transient:
        a lost or refused connection, too many connections (1040), a lock wait or deadlock
        (1205, 1213), a read-only server during a failover (1290), a shutdown (1053)."""
        if code in (ER.ACCESS_DENIED_ERROR, 1698, 1251):  # 1698: no password, 1251: plugin
            return "authentication refused: check the user name and password in the URL"
        if code == ER.DBACCESS_DENIED_ERROR:
            return (f"this user may not use database {self.database!r}: GRANT it, or fix the "
                    "URL's path")
        if code == ER.BAD_DB_ERROR:
            return (f"database {self.database!r} does not exist on the server; create it "
                    f"(CREATE DATABASE `{self.database}`) or fix the URL's path")
        if code in (ER.TABLEACCESS_DENIED_ERROR, ER.COLUMNACCESS_DENIED_ERROR,
                    ER.SPECIFIC_ACCESS_DENIED_ERROR, 1370):  # 1370: EXECUTE denied
            return (f"grant this user SELECT, INSERT, UPDATE and CREATE on table "
                    f"`{self.database}`.`{self.table}`")
        if code in (ER.BAD_FIELD_ERROR, ER.WRONG_VALUE_COUNT_ON_ROW, ER.TRUNCATED_WRONG_VALUE,
                    1265, 1366):  # data truncated, incorrect value
            return (f"table `{self.table}` exists but is not laid out as tenure's lease table; "
                    "choose another `table=` or drop it")
        if code in (1071, 1118):  # key or row too long: a limit of the server, not an outage
            return "the server cannot store this row as it is; retrying will not help"
        return None

    # -- operations --------------------------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        return self._try(name, name_digest(name), _Attempt(holder, ttl, limit))

    def _try(self, name: str, key: str, attempt: _Attempt,
                   lease_id: int | None = None) -> Grant | None:
        """One acquire (a new lease id unless given: a retry of a try whose outcome is unknown
        takes back what that try took); a try cut short is undone in the background."""
        parameters = self._parameters(key, name, attempt, lease_id)
        sent_at = _shim.monotonic()
        try:
            found: tuple[int, int] | None = self._call(
                "acquire", name, self._acquire_in, parameters)
        except BaseException:
            if "sent_on" in parameters:  # the server may run it, or ran it: undo in background
                self._undo_later(name, key, parameters["lease_id"], parameters["sent_on"])
            raise
        if found is None:
            self._note_contended(key)
            return None
        slot, token = found
        return Grant(name, slot, attempt.holder, str(parameters["lease_id"]), token, name,
                     sent_at)

    @staticmethod
    def _parameters(key: str, name: str, attempt: _Attempt,
                    lease_id: int | None = None) -> dict[str, Any]:
        """The parameters of an acquire statement, with a new lease id unless given: random 62
        bits, never 0 (a freed row's). An integer compares faster than text, and a stale
        holder's id matches a later grant of the same row with odds of 2**-62."""
        return {"key": key, "name": name, "holder": attempt.holder,
                "lease_id": lease_id or secrets.randbits(62) + 1,
                "ttl_us": round(attempt.ttl * 1_000_000), "limit": attempt.limit}

    def _cycle_statement(self, statement: str, literals: dict[str, str]) -> str:
        """The text of a statement of the uncontended cycle ("lock" or "release") with its
        parameters given as SQL literals: `EXECUTE ... USING` them on MariaDB (see _PREPARED),
        else the statement itself. Sent with `connection.query`, which skips the driver's
        cursor and escaping: about a tenth of a cycle's time on this path."""
        if self._prepared:
            execute, names = self._executes[statement]
            return execute + ", ".join([literals[name] for name in names])
        return self._sql[statement] % literals

    def _acquire_statement(self, parameters: dict[str, Any]) -> str:
        """The text of an acquire, a lock's or a semaphore's, with its parameters as SQL
        literals."""
        literals = {"key": f"'{parameters['key']}'", "name": _binary(parameters["name"]),
                    "holder": _binary(parameters["holder"]),
                    "lease_id": str(parameters["lease_id"]),
                    "ttl_us": str(parameters["ttl_us"]), "limit": str(parameters["limit"])}
        if parameters["limit"] > 1:
            return self._sql["slot"] % literals
        return self._cycle_statement("lock", literals)

    def _acquire_in(self, connection: Any,
                          parameters: dict[str, Any]) -> tuple[int, int] | None:
        statement = self._acquire_statement(parameters)
        parameters["sent_on"] = connection.thread_id()  # from here on, undone if cut short
        connection.query(statement)
        found = _acquired(connection, parameters["limit"])
        if self._closing:  # close() began meanwhile: nobody could release this grant later
            if found is not None:
                self._release_in(connection, parameters["key"], found[0],
                                       parameters["lease_id"])
            del parameters["sent_on"]  # answered, and freed: nothing to undo
            raise closed_store(self.url, "acquire", parameters["name"])
        return found

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        results: list[Grant | LostReason] = self._call(
            "renewal", label, self._renew_in, grants, round(ttl * 1_000_000))
        return results

    def _renew_in(self, connection: Any, grants: Sequence[Grant],
                        ttl_us: int) -> list[Grant | LostReason]:
        with connection.cursor() as cursor:
            arguments: list[Any] = [ttl_us]
            for grant in grants:
                arguments += (name_digest(grant.name), grant.slot, _number_of(grant))
            rows = ", ".join(["(UNHEX(%s), %s, %s)"] * len(grants))
            renewed = cursor.execute(_RENEW.format(table=self.table, rows=rows), arguments)
            if renewed == len(grants):
                return list(grants)
            # Some were not renewed (or renewed to the same µs, which counts as no change):
            # one more query tells which, and why.
            arguments = []
            for grant in grants:
                arguments += (name_digest(grant.name), grant.slot)
            rows = ", ".join(["(UNHEX(%s), %s)"] * len(grants))
            cursor.execute(_WHY_LOST.format(table=self.table, rows=rows), arguments)
            found = {(bytes(name).decode(), slot): (lease_id, live)
                     for name, slot, lease_id, live in cursor.fetchall()}
        results: list[Grant | LostReason] = []
        for grant in grants:
            lease_id, live = found.get((grant.name, grant.slot), (0, 0))
            if lease_id == _number_of(grant):
                results.append(grant if live else LostReason.EXPIRED)
            else:
                results.append(LostReason.BROKEN if lease_id == 0 else LostReason.TAKEN)
        return results

    def release(self, grant: Grant) -> bool:
        key = name_digest(grant.name)
        contended = key in self._contended
        released, flagged, woken = self._call(
            "release", grant.name, self._release_in, key, grant.slot, _number_of(grant),
            contended)
        if flagged:  # someone waits for the name, here or elsewhere
            self._note_contended(key)
            if not woken:  # the KILL was not sent with the release, or nobody slept
                self._wake(grant.name, key)
        elif contended:
            self._contended.discard(key)
        return bool(released)

    def _release_in(self, connection: Any, key: str, slot: int, lease_id: int,
                          wake: bool = False) -> tuple[int, bool, bool]:
        """Release (slot >= 0) or break (slot -1): (rows changed, whether slot 0's waiters'
        flag was set, whether a sleeper was woken). With `wake`, the KILL QUERY that wakes
        the longest sleeper goes in the same round trip (see _WAKE_NEXT)."""
        then = self._sql["wake next"] % (f"'{key}'",) if wake else ""
        if slot == 0:
            changed = connection.query(self._cycle_statement(
                "release", {"key": f"'{key}'", "lease_id": str(lease_id)}) + then)
            flagged = bool(connection.insert_id())
            return changed, flagged, wake and _woke(connection.next_result)
        with connection.cursor() as cursor:  # (its close would read the KILL's answer)
            if slot < 0:
                changed = cursor.execute(self._sql["break"], (key,))
            else:
                changed = cursor.execute(self._sql["release slot"] + then,
                                               (key, slot, lease_id, key))
                cursor.nextset()  # the read of slot 0's flag: its LAST_INSERT_ID
            return changed, bool(cursor.lastrowid), wake and _woke(cursor.nextset)

    def _note_contended(self, key: str) -> None:
        """Someone waits for this name: its releases here send the wake-up along (_WAKE_NEXT)."""
        if len(self._contended) > 10_000:  # names never released here
            self._contended.clear()
        self._contended.add(key)

    def break_lease(self, name: str) -> int:
        key = name_digest(name)
        broken, flagged, _ = self._call("break", name, self._release_in, key, -1, 0)
        if flagged:
            self._wake(name, key)
        return int(broken)

    # -- waking waiters ----------------------------------------------------------------------

    def _wake(self, name: str, key: str) -> bool:
        """End the sleep of this name's longest sleeping waiter (see _WAIT), or clear the
        name's waiters' flag when none waits; True when one was woken. Best effort: a waiter
        not woken wakes at the end of its backoff, so errors are only logged."""
        try:
            woken: bool = self._call("wake", name, self._wake_in, key)
        except StoreUnavailable as exc:
            log.debug("tenure: %s: waking the waiters of %r failed: %s", self.url, name, exc)
            return False
        return woken

    def _wake_in(self, connection: Any, key: str) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(self._sql["sleeper"], (key,))
            [(sleeper,)] = cursor.fetchall()
            if sleeper is None:
                cursor.execute(self._sql["unflag"], (key,))
                return False
            try:
                cursor.execute(f"KILL QUERY {int(sleeper)}")
            except pymysql.OperationalError as exc:
                # Gone meanwhile (1094: it woke by itself), or another user's (1095)
                if _error_code(exc) not in (ER.NO_SUCH_THREAD, ER.KILL_DENIED_ERROR):
                    raise
                return False
            return True

    def _execute(self, connection: Any, statement: str, arguments: tuple[Any, ...]) -> int:
        with connection.cursor() as cursor:
            changed: int = cursor.execute(self._sql[statement], arguments)
        return changed

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        rows: list[tuple[Any, ...]] = self._call("listing", prefix, self._list_in, prefix)
        now = datetime.now(timezone.utc)
        return [
            LeaseInfo(bytes(name).decode(), bytes(holder).decode(), int(token),
                      now + timedelta(microseconds=int(remaining)), int(slot))
            for name, slot, holder, token, remaining in rows
        ]

    def _list_in(self, connection: Any, prefix: str) -> list[tuple[Any, ...]]:
        encoded = prefix.encode()
        with connection.cursor() as cursor:
            cursor.execute(self._sql["list"], (len(encoded), encoded.hex()))
            return list(cursor.fetchall())

    # -- records -----------------------------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        rows: list[tuple[Any, ...]] = self._call(
            "reading the record", name, self._query, "read record", (name_digest(name),))
        return None if not rows or rows[0][0] is None else bytes(rows[0][0]).decode()

    def write_record(self, grant: Grant, record: str) -> bool:
        encoded = record_bytes(record)
        written: int = self._call(
            "writing the record", grant.name, self._execute, "write record",
            (grant.slot, _number_of(grant), encoded.hex(), name_digest(grant.name)))
        return written == 1

    def records(self, prefix: str = "") -> dict[str, str]:
        encoded = prefix.encode()
        rows: list[tuple[Any, ...]] = self._call(
            "listing the records", prefix, self._query, "records", (len(encoded), encoded.hex()))
        return {bytes(name).decode(): bytes(record).decode() for name, record in rows}

    def _query(self, connection: Any, statement: str,
                     arguments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute(self._sql[statement], arguments)
            return list(cursor.fetchall())

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Sleep on the server until a release of `name` wakes this waiter, or `timeout`
        passed (polling instead when enough waiters of the name sleep there, see
        _MOST_ASLEEP). Takes nothing: the caller tries afterwards."""
        self._wait(name, name_digest(name), None, timeout, patience)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Sleep on the server until a release of `name` wakes this waiter (or `timeout`
        passed), with the try sent right behind the sleep: the server runs it at the wake-up,
        and this returns the grant it took (its `sent_at` from before the sleep), or None.
        When enough waiters of the name sleep there already (see _MOST_ASLEEP), polls: sleeps
        `timeout` here, then tries.

        Example::

            grant = backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.5, 10.0)
        """
        key = name_digest(name)
        attempt = _Attempt(holder, ttl, limit)
        outcome = self._wait(name, key, attempt, timeout, patience)
        if isinstance(outcome, _Tried):
            if outcome.answered:
                return outcome.grant
            # A KILL QUERY meant for the sleep cut the try behind it off: its outcome is
            # unknown, so it is made again with its lease id (which takes back what it took).
            try:
                return self._try(name, key, attempt, outcome.lease_id)
            except BaseException:
                self._undo_later(name, key, outcome.lease_id, outcome.sent_on)
                raise
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        return self._try(name, key, attempt)

    def _wait(self, name: str, key: str, attempt: _Attempt | None, timeout: float,
                    patience: float | None) -> _Tried | None:
        """The wait of wait_released (`attempt` None) and wait_and_acquire: on the server when
        few enough waits of the name sleep there, else here; what the try sent behind a sleep
        on the server found, if one was sent."""
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        # A sleep stays well inside the driver's read timeout, and short enough that a lease
        # the try behind it takes has most of its ttl left: its deadline counts from before
        # the sleep. The try behind the sleep gets its answer back before the caller's
        # acquire gives up.
        seconds = min(timeout, self.timeout * 0.8,
                      (timeout if patience is None else patience) - _TRY_ALLOWANCE)
        if attempt is not None:
            seconds = min(seconds, fresh_for(attempt.ttl) / 2)
        asleep = self._asleep.setdefault(key, set())
        if seconds < 0.001 or len(asleep) >= _MOST_ASLEEP:
            _shim.sleep(timeout)  # enough asleep: poll
            return None
        marker = object()
        asleep.add(marker)
        try:
            return self._sleep_on_server(name, key, attempt, seconds, timeout, patience)
        finally:
            asleep.discard(marker)
            if not asleep:
                self._asleep.pop(key, None)

    def _sleep_on_server(self, name: str, key: str, attempt: _Attempt | None,
                               seconds: float, timeout: float,
                               patience: float | None) -> _Tried | None:
        """The sleep on the server, with `attempt`'s try sent behind it when given."""
        started = _shim.monotonic()
        try:
            connection = self._sleepers.pop()
        except IndexError:
            connection = None
        parameters = None if attempt is None else self._parameters(key, name, attempt)
        sent_at: float | None = None
        # Bounded by the caller's patience too: a wait that would outlast its acquire's
        # timeout is cut there (what the try behind it took is undone, see _forget).
        bound = min(self.timeout,
                    (timeout if patience is None else patience) + _TRY_ALLOWANCE)
        limit = 1 if attempt is None else attempt.limit
        try:
            with _deadline(bound):
                if connection is None:
                    connection = self._open()
                self._sleeping.add(connection)
                if self._closing:  # after the add: close() ends it, or this sees the flag
                    raise closed_store(self.url, "acquire", name)
                wait = _WAIT.format(table=self.table, key=key) % (
                    f"'{key}'", f"'{key}'", limit, limit, f"{seconds:.3f}", f"'{key}'")
                then = None if parameters is None else self._acquire_statement(parameters)
                sent_at = _shim.monotonic()
                answered, found = _sleep_then_try(connection, wait, then, limit)
        except BaseException as exc:
            if connection is not None:
                self._discard(connection)
                if sent_at is not None and parameters is not None:
                    # the try behind the wait may still run, or it ran
                    self._undo_later(name, key, parameters["lease_id"], connection.thread_id())
                self._sleeping.discard(connection)
            if self._closing:  # ended by close() (KILL CONNECTION), or refused above
                raise closed_store(self.url, "acquire", name) from None
            if not isinstance(exc, _DRIVER_ERRORS):
                raise
            log.debug("tenure: %s: waiting on the server failed: %s", self.url, exc)
            if _error_code(exc) not in _CONFLICTS:  # a conflict: the try behind lost a lock
                _shim.sleep(max(0.0, timeout - (_shim.monotonic() - started)))
            return None
        assert sent_at is not None
        if parameters is None:
            tried = None
        else:
            assert attempt is not None
            lease_id = parameters["lease_id"]
            grant = None if found is None else Grant(
                name, found[0], attempt.holder, str(lease_id), found[1], name, sent_at)
            tried = _Tried(answered, grant, lease_id, connection.thread_id())
        if self._closing:  # close() began during the wait: free what its try took, here
            self._let_go(connection, name, key, tried)
            raise closed_store(self.url, "acquire", name)
        self._sleeping.discard(connection)
        # An acquire cut short may leave a transaction open (a semaphore's): closing the
        # connection rolls it back.
        if not answered or self._closed or len(self._sleepers) >= self.pool_size:
            self._discard(connection)
        else:
            self._sleepers.append(connection)
        return tried

    def _let_go(self, connection: Any, name: str, key: str, tried: _Tried | None) -> None:
        """A wait that ended after close() began: free the grant its try took, on the wait's
        own connection (close() refuses new ones); undo a try whose outcome is unknown, or
        whose release failed (close() ended the connection: it runs the undo). The
        connection is closed either way."""
        undo = tried is not None and not tried.answered
        try:
            if tried is not None and tried.grant is not None:
                try:
                    with _deadline(self.timeout):
                        self._release_in(connection, key, tried.grant.slot, tried.lease_id)
                except _DRIVER_ERRORS:
                    undo = True
        finally:
            self._discard(connection)
            if undo:
                assert tried is not None
                self._undo_later(name, key, tried.lease_id, tried.sent_on)
            self._sleeping.discard(connection)  # last: close() then sees the undo

    def _end_waits(self) -> None:
        """End the connections of waits sleeping on the server (KILL CONNECTION: the try
        sent behind a sleep then never runs, or its undo frees what it took), and wait, up
        to the store's timeout, until those waits let go of them. A wait that already woke
        frees what its try took itself (see _let_go)."""
        give_up, pause = _shim.monotonic() + self.timeout, 0.005
        killed: set[int] = set()
        while self._sleeping and _shim.monotonic() < give_up:
            ids = {connection.thread_id() for connection in list(self._sleeping)} - killed
            if ids:
                with contextlib.suppress(StoreUnavailable):
                    self._call("closing", "waits", self._kill_in, sorted(ids))
                killed |= ids
            _shim.sleep(pause)  # the waits run meanwhile, in their threads or tasks
            pause = min(pause * 2, 0.05)

    def _kill_in(self, connection: Any, ids: list[int]) -> None:
        with connection.cursor() as cursor:
            for thread_id in ids:
                try:
                    cursor.execute(f"KILL CONNECTION {int(thread_id)}")
                except pymysql.OperationalError as exc:
                    if _error_code(exc) != ER.NO_SUCH_THREAD:  # gone meanwhile
                        raise

    def _undo_later(self, name: str, key: str, lease_id: int, thread_id: int) -> None:
        """Run `_forget` in the background (the caller's cancellation is never delayed); close
        runs the undos not done yet, so that a process that closes its store and exits right
        after an acquire was cut off leaves no lease behind."""
        undo = (name, key, lease_id, thread_id)
        self._undoing.add(undo)
        _shim.start_soon(self._forget, *undo)

    def _forget(self, name: str, key: str, lease_id: int, thread_id: int) -> None:
        """Undo an acquire whose answer never came in (cancelled, timed out, cut off; a try
        sent behind a wait, or try_acquire's own), run in the background by `_shim.start_soon`.
        Best effort: a lease left behind expires after its ttl.

        The order matters. The server runs a query it received even after the client closed
        the connection, and a query still on its way (a slow path) arrives after the client
        gave up: an undo that overtook it would leave the lease it takes behind. So nothing is
        freed while the acquire's connection (`thread_id`) is still on the server's process
        list (see _FORGET): once it is gone, nothing it sent can take a lease any more. While
        it is there, KILL CONNECTION ends it, which also drops whatever still arrives on it;
        KILL returns before the killed thread has ended (a statement past its last check for
        the kill still completes), so the undo asks again until the thread is gone. The
        common case, a connection that ended when this side closed it, costs one round trip
        (on a new connection, when the acquire's was the only one)."""
        try:
            self._call("freeing an abandoned try", name, self._forget_in, key, lease_id,
                             thread_id)
        except StoreUnavailable as exc:
            log.debug("tenure: %s: %s", self.url, exc)
        finally:
            self._undoing.discard((name, key, lease_id, thread_id))

    def _forget_in(self, connection: Any, key: str, lease_id: int, thread_id: int) -> None:
        with connection.cursor() as cursor:
            pause, give_up = 0.001, _shim.monotonic() + self.timeout
            while True:
                # Frees the lease only once that connection is gone, and says if it was.
                cursor.execute(self._sql["forget"], (int(thread_id), key, lease_id))
                cursor.nextset()
                cursor.nextset()
                [(alive,)] = cursor.fetchall()
                if not alive or _shim.monotonic() > give_up:
                    return
                try:
                    cursor.execute(f"KILL CONNECTION {int(thread_id)}")
                except pymysql.OperationalError as exc:
                    if _error_code(exc) != ER.NO_SUCH_THREAD:  # gone meanwhile: forget now
                        raise
                _shim.sleep(pause)
                pause = min(pause * 2, 0.05)

    def close(self) -> None:
        """End the waits sleeping on the server now (their callers get the closed-store
        error, and what their tries took is freed), finish the undos still running, then
        close every connection."""
        self._closing = True
        self._end_waits()
        for undo in list(self._undoing):  # started in the background, not done yet
            self._forget(*undo)
        self._closed = True
        self._discard_idle()
        sleepers, self._sleepers = self._sleepers, []
        for connection in sleepers:
            self._discard(connection)
