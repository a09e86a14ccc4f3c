# GENERATED from src/tenure/_async/stores/mysql/_getlock_sql.py by scripts/unasync.py: do not edit.
"""The statements of GET_LOCK mode (`mode=getlock`), as text, and the lock names of a name.

Each lease is a session lock (GET_LOCK) held by one of the store's connections: the server
frees it the moment that session ends. A table, `<table>_counters`, keeps per (name, slot) who
took the slot last, with which token, under which session and lock name (for leases(), break
and records), and in slot 0's row the name's fencing counter and record. Its rows are never
deleted.

Example:
    >>> len(lock_names("locks", "tenure_leases", "jobs", 3)), len(lock_names(
    ...     "locks", "tenure_leases", "x" * 1024, 1)[0]) <= 64
    (3, True)
"""

from __future__ import annotations

import hashlib
import re

from tenure._sync.stores.mysql._sql import NOW_US, WINDOW

# The server's clock in µs when evaluated (SYSDATE), not at the statement's start (UTC_TIMESTAMP,
# NOW): a grant's GET_LOCK may have waited seconds in its WHERE, meanwhile the name's counter
# may have been forgotten, and the token must still be above every earlier one. The session's
# time zone is UTC (_sql.SESSION). A server run with --sysdate-is-now reads the statement's
# start instead (see docs/stores/mysql.md).
CLOCK_US = "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', SYSDATE(6))"

SCHEMA = """
CREATE TABLE IF NOT EXISTS `{table}` (
    name_key  BINARY(16)      NOT NULL,  -- blake2b-128 of the UTF-8 name
    slot      INT             NOT NULL,
    name      VARBINARY(4096) NOT NULL,  -- UTF-8
    holder    VARBINARY(1024) NOT NULL,
    token     BIGINT          NOT NULL,  -- the token of the slot's last grant
    counter   BIGINT          NOT NULL,  -- slot 0 only: the last token granted for the name
    conn      BIGINT          NOT NULL,  -- the session (CONNECTION_ID) that took the slot; 0
                                         -- once it released it (see RELEASE)
    lock_name VARBINARY(64)   NOT NULL,  -- the slot's GET_LOCK name
    record    BLOB,                      -- slot 0 only: the name's record (UTF-8)
    record_writes BIGINT      NOT NULL DEFAULT 0,  -- slot 0: counts writes (see WRITE_RECORD)
    PRIMARY KEY (name_key, slot),
    KEY tenure_counter (counter),  -- the idle names (see CANDIDATES)
    KEY tenure_live (conn)  -- the slots not released (see LIST)
) ENGINE=InnoDB
"""
# As _sql.HAS_INDEX and ADD_INDEX, for this table's indexes.
HAS_INDEX = ("SELECT COUNT(*), (SELECT COUNT(DISTINCT INDEX_NAME) FROM "
             "information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND "
             "TABLE_NAME = %s AND INDEX_NAME IN ('tenure_counter', 'tenure_live')) "
             "FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s")
ADD_INDEX = ("ALTER TABLE `{table}` ADD INDEX tenure_counter (counter)",
             "ALTER TABLE `{table}` ADD INDEX tenure_live (conn)")

# A lock (limit 1): ONE autocommit statement, the lock and the token's bump together. The
# WHERE takes the lock without waiting; a session lock is re-entrant within its session, so a
# lock this session holds already (another lease of this store on the name) is skipped, not
# taken again: IF evaluates GET_LOCK only when IS_USED_LOCK says the lock is free. Taken, the
# upsert of slot 0's row moves the name's counter to max(counter + 1, the server clock in µs)
# (DESIGN.md, "Fencing tokens") and says who holds the slot on which session. Assignments run
# left to right (the session turns MariaDB's SIMULTANEOUS_ASSIGNMENT off, see _sql.SESSION).
# LAST_INSERT_ID(x) puts the token into the OK packet; affected rows 0: not taken. Parameters:
# key, name, holder (name and holder as hex of their UTF-8), the lock name three times.
# The clock is read after the WHERE took the lock (see CLOCK_US), once (the derived table,
# kept apart from the outer query by its LIMIT, is evaluated once): the insert branch is the
# grant of a name with no row, its token from that clock.
_UPSERT = f"""
INSERT INTO `{{table}}` (name_key, slot, name, holder, token, counter, conn, lock_name)
SELECT UNHEX(%s), 0, UNHEX(%s), UNHEX(%s), LAST_INSERT_ID(clock.us), clock.us,
       CONNECTION_ID(), %s FROM (SELECT {CLOCK_US} AS us FROM DUAL WHERE {{taken}} LIMIT 1) AS clock
ON DUPLICATE KEY UPDATE counter = LAST_INSERT_ID(GREATEST(counter + 1, VALUES(counter))),
    token = counter, holder = VALUES(holder), conn = VALUES(conn),
    lock_name = VALUES(lock_name)"""
TRY_LOCK = _UPSERT.replace("{taken}", "IF(IS_USED_LOCK(%s) IS NULL, GET_LOCK(%s, 0), 0) = 1")

# A lock's waiter (see MySQLGetLockStore.wait_and_acquire), on a session that holds no
# lock: the same statement, whose GET_LOCK blocks up to the given seconds (fractions allowed).
# The server queues the waiters of a lock and grants it to one at the release; the upsert runs
# right then, in the same statement. Parameters: key, name, holder, the lock name twice, the
# seconds.
WAIT_LOCK = _UPSERT.replace("{taken}", "GET_LOCK(%s, %s) = 1")


def try_slots(count: int) -> str:
    """A semaphore (limit > 1): the first of `count` slot locks this session can take without
    waiting (skipping those it holds, as TRY_LOCK does; CASE stops at the first lock taken),
    then in one transaction the bump of the counter in slot 0's row (and slot 0 taken, the
    holder's columns there) and, for another slot, its row; the last SELECT answers (slot,
    token), NULL slot when none was free. Parameters: each lock name twice, then twice key,
    name, holder and the lock names (ELT picks the slot's).

    Example:
        >>> try_slots(2).count("GET_LOCK")
        2
    """
    whens = " ".join(f"WHEN IF(IS_USED_LOCK(%s) IS NULL, GET_LOCK(%s, 0), 0) = 1 THEN {slot}"
                     for slot in range(count))
    names = ", ".join(["%s"] * count)
    return f"""SET @tenure_slot = CASE {whens} END;
START TRANSACTION;
INSERT INTO `{{table}}` (name_key, slot, name, holder, token, counter, conn, lock_name)
SELECT UNHEX(%s), 0, UNHEX(%s), IF(@tenure_slot = 0, UNHEX(%s), ''),
       LAST_INSERT_ID({NOW_US}), {NOW_US}, IF(@tenure_slot = 0, CONNECTION_ID(), 0),
       ELT(1, {names}) FROM DUAL
WHERE @tenure_slot IS NOT NULL
ON DUPLICATE KEY UPDATE counter = LAST_INSERT_ID(GREATEST(counter + 1, {NOW_US})),
    token = IF(@tenure_slot = 0, counter, token),
    holder = IF(@tenure_slot = 0, VALUES(holder), holder),
    conn = IF(@tenure_slot = 0, VALUES(conn), conn);
INSERT INTO `{{table}}` (name_key, slot, name, holder, token, counter, conn, lock_name)
SELECT UNHEX(%s), @tenure_slot, UNHEX(%s), UNHEX(%s), LAST_INSERT_ID(), 0, CONNECTION_ID(),
       ELT(@tenure_slot + 1, {names}) FROM DUAL
WHERE @tenure_slot > 0
ON DUPLICATE KEY UPDATE holder = VALUES(holder), token = VALUES(token), conn = VALUES(conn),
    lock_name = VALUES(lock_name);
COMMIT;
SELECT @tenure_slot, LAST_INSERT_ID()"""


def unlock_strays(count: int) -> str:
    """After a failed acquire on a session that lives on: give back any of `count` slot locks
    this session holds (the caller passes only locks no lease of the session uses).

    Example:
        >>> unlock_strays(2).count("RELEASE_LOCK")
        2
    """
    return "SELECT " + ", ".join(
        ["IF(IS_USED_LOCK(%s) = CONNECTION_ID(), RELEASE_LOCK(%s), 0)"] * count)


# Release, on the lease's own session, in one round trip: the slot's row marked released
# (conn 0, so that listings skip it: see LIST), then RELEASE_LOCK, which frees a lock only
# when this session holds it (1), never another's (0), and says NULL when nobody does. The
# UPDATE commits (autocommit) before the lock is freed, so a waiter woken by the release never
# waits for this statement's row lock. Parameters: key, slot, token, lock name.
RELEASE = ("UPDATE `{table}` SET conn = 0 WHERE name_key = UNHEX(%s) AND slot = %s "
           "AND token = %s AND conn = CONNECTION_ID(); SELECT RELEASE_LOCK(%s)")
# The lock alone (a break by the session that holds it). Parameters: lock name.
RELEASE_LOCK = "SELECT RELEASE_LOCK(%s)"


def held(count: int) -> str:
    """The renewal check of `count` leases in one statement: the session holding each lock now
    (NULL: none), by position.

    Example:
        >>> held(2)
        'SELECT 0, IS_USED_LOCK(%s) UNION ALL SELECT 1, IS_USED_LOCK(%s)'
    """
    return " UNION ALL ".join(f"SELECT {index}, IS_USED_LOCK(%s)" for index in range(count))


# The slots of a name whose lock is held, and by which session (break).
HOLDERS = """SELECT lock_name, IS_USED_LOCK(lock_name) FROM `{table}`
WHERE name_key = UNHEX(%s) AND slot >= 0 AND IS_USED_LOCK(lock_name) IS NOT NULL"""

# The live leases: a slot row not released (found by tenure_live, so that the rows of names
# nobody holds are not read) whose lock the session that took it still holds (a session that
# ended without releasing left its conn behind).
LIST = """SELECT name, slot, holder, token FROM `{table}`
WHERE conn > 0 AND slot >= 0 AND IS_USED_LOCK(lock_name) = conn AND LEFT(name, %s) = UNHEX(%s)
ORDER BY name, slot"""

READ_RECORD = "SELECT record FROM `{table}` WHERE name_key = UNHEX(%s) AND slot = 0"

RECORDS = """SELECT name, record FROM `{table}`
WHERE slot = 0 AND record IS NOT NULL AND LEFT(name, %s) = UNHEX(%s) ORDER BY name"""

# Written only while the grant (its slot row, still of its token) holds its lock on the session
# that took it; record_writes makes a write of the same text count as a change.
WRITE_RECORD = """UPDATE `{table}` AS z JOIN `{table}` AS s
    ON s.name_key = z.name_key AND s.slot = %s
SET z.record = UNHEX(%s), z.record_writes = z.record_writes + 1
WHERE z.name_key = UNHEX(%s) AND z.slot = 0 AND s.token = %s
  AND IS_USED_LOCK(s.lock_name) = s.conn"""

# Forgetting idle names (retain, prune; see _sql.CANDIDATES for the lease table's): a name is
# idle for `idle` seconds when no session holds the lock of any of its rows and it was not
# granted since (slot 0's counter, its last token, is at least the server clock in µs at the
# grant; other slots' rows have counter 0, out of the index range). No row says when a lock was
# freed, so a name released a moment ago but granted before the window is idle. Parameters:
# idle_us, the position of the batch before (counter twice, key), batch size.
CANDIDATES = (f"SELECT HEX(name_key), counter FROM `{{table}}` WHERE slot = 0 "
              f"AND counter BETWEEN 1 AND {NOW_US} - %s "
              "AND (counter > %s OR (counter = %s AND name_key > UNHEX(%s))) "
              "ORDER BY counter, name_key LIMIT %s")
FIRST = (0, "")  # a position before every candidate
IDLE = ("SELECT name_key, MAX(slot = 0 AND record IS NOT NULL) AS kept FROM `{table}` "
        "WHERE name_key IN ({keys}) GROUP BY name_key HAVING MIN(slot) = 0 "
        "AND MAX(IS_USED_LOCK(lock_name) IS NOT NULL) = 0 "
        "AND MAX(IF(slot = 0, counter, 0)) BETWEEN 1 AND @tenure_cut")
# As _sql.DECIDE, DROP_NAMES and DROP_KEPT: lock the names' rows, decide, then delete. A grant
# that took a name's lock after the decision waits for the COMMIT at its upsert, finds no row
# (or counter 0) and takes its token from the clock read after its GET_LOCK (CLOCK_US).
# Parameters: idle_us twice.
DECIDE = f"""START TRANSACTION;
{WINDOW};
SELECT COUNT(*) INTO @tenure_locked FROM `{{table}}` WHERE name_key IN ({{keys}}) FOR UPDATE;
SELECT HEX(name_key), kept FROM ({IDLE}) AS idle"""
DROP_NAMES = ("DELETE FROM `{table}` WHERE name_key IN ({keys}) "
              "AND (slot > 0 OR record IS NULL)")
DROP_KEPT = "UPDATE `{table}` SET counter = 0 WHERE slot = 0 AND name_key IN ({keys})"
# Parameters: idle_us twice.
COUNT_NAMES = f"{WINDOW};\nSELECT COUNT(*) FROM ({IDLE}) AS idle"


def forget(table: str, keys: list[str], template: str = DECIDE) -> str:
    """The start of the transaction that forgets the idle names among `keys` (hex digests) of
    `table` (see DECIDE); with `template` COUNT_NAMES, their count; with DROP_NAMES or
    DROP_KEPT, those statements for `keys`.

    Example:
        >>> forget("t_counters", ["00"]).count("UNHEX('00')")
        2
    """
    listed = ", ".join(f"UNHEX('{key}')" for key in keys)
    return template.format(table=table, keys=listed)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_READABLE = 20


def lock_names(database: str, table: str, name: str, limit: int) -> list[str]:
    """The GET_LOCK names of slots 0..limit-1 of `name`: at most 64 characters (the server's
    limit), a readable prefix of the name and 128 bits of blake2b of (database, table, name,
    slot). User locks are server-wide, so the database and table are in the hash: two lock
    tables never share a lock; distinct (name, slot) never do either.

    Example:
        >>> lock_names("locks", "tenure_leases", "jobs/2026", 1)[0][:13]
        'tenure:jobs_2'
    """
    readable = _UNSAFE.sub("_", name)[:_READABLE]
    prefix = f"{database}\0{table}\0".encode()
    encoded = name.encode()
    return [f"tenure:{readable}:" + hashlib.blake2b(
        prefix + encoded, digest_size=16, salt=slot.to_bytes(16, "big")).hexdigest()
        for slot in range(limit)]
