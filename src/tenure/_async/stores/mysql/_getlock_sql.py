"""The statements of GET_LOCK mode (`mode=getlock`), as text, and the lock names of a name.

Each lease is a session lock (GET_LOCK) held by one of the store's connections: the server
frees it the moment that session ends. A table, `<table>_counters`, keeps per name the fencing
counter and the record (slot -1), and per (name, slot) who holds the slot under which session
and lock name (for leases(), break and records). Its rows are never deleted.

Example:
    >>> len(lock_names("locks", "tenure_leases", "jobs", 3)), len(lock_names(
    ...     "locks", "tenure_leases", "x" * 1024, 1)[0]) <= 64
    (3, True)
"""

from __future__ import annotations

import hashlib
import re

from tenure._async.stores.mysql._sql import NOW_US

SCHEMA = """
CREATE TABLE IF NOT EXISTS `{table}` (
    name_key  BINARY(16)      NOT NULL,  -- blake2b-128 of the UTF-8 name
    slot      INT             NOT NULL,  -- -1: the name's counter and record
    name      VARBINARY(4096) NOT NULL,  -- UTF-8
    holder    VARBINARY(1024) NOT NULL,
    token     BIGINT          NOT NULL,  -- slot -1: the last token granted; else the slot's
    conn      BIGINT          NOT NULL,  -- the session (CONNECTION_ID) that took the slot
    lock_name VARBINARY(64)   NOT NULL,  -- the slot's GET_LOCK name
    record    BLOB,                      -- slot -1: the name's record (UTF-8)
    record_writes BIGINT      NOT NULL DEFAULT 0,  -- slot -1: counts writes (see WRITE_RECORD)
    PRIMARY KEY (name_key, slot)
) ENGINE=InnoDB
"""


def try_locks(count: int) -> str:
    """The first statement of an acquire: the first of `count` slot locks this session can
    take without waiting, its slot in @tenure_slot (NULL: none). A session lock is re-entrant
    within its session, so a lock this session holds (another lease of this store on the same
    name) is skipped, not taken again: IF evaluates GET_LOCK only when IS_USED_LOCK says free.
    CASE stops at the first lock taken. Parameters: the lock names, each twice.

    Example:
        >>> try_locks(2).count("GET_LOCK")
        2
    """
    whens = " ".join(f"WHEN IF(IS_USED_LOCK(%s) IS NULL, GET_LOCK(%s, 0), 0) = 1 THEN {slot}"
                     for slot in range(count))
    return f"SET @tenure_slot = CASE {whens} END"


# The first statement of a lock's wait on the server (see AsyncMySQLGetLockStore.
# wait_and_acquire), on a session that holds no lock: GET_LOCK blocks up to the given seconds
# (fractions allowed); the server queues the waiters of a lock and grants it at the release.
# Parameters: the lock name, the seconds.
WAIT_LOCK = "SET @tenure_slot = IF(GET_LOCK(%s, %s) = 1, 0, NULL)"

# After the lock, in the SAME round trip (multi-statement; the lock and the token never part:
# a grant's token is bumped before the client hears of the grant): the name's counter becomes
# max(counter + 1, the server clock in µs) (see DESIGN.md, "Fencing tokens"), the slot's row
# says who holds it on which session, and the last SELECT answers (slot, token). Autocommit
# statements: when one fails, the server runs none of the rest, and the lock taken stays with
# the session (the store gives it back, see UNLOCK_STRAYS). Nothing taken: no row is written.
# Parameters: key, name, key, name, holder (name and holder as hex of their UTF-8), and the
# lock names (ELT picks the slot's).
def grant(count: int) -> str:
    """The statements behind try_locks/WAIT_LOCK (see above) for `count` slot locks.

    Example:
        >>> grant(1).count("INSERT INTO")
        2
    """
    names = ", ".join(["%s"] * count)
    return f"""
INSERT INTO `{{table}}` (name_key, slot, name, holder, token, conn, lock_name)
SELECT UNHEX(%s), -1, UNHEX(%s), '', LAST_INSERT_ID({NOW_US}), 0, '' FROM DUAL
WHERE @tenure_slot IS NOT NULL
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {NOW_US}));
INSERT INTO `{{table}}` (name_key, slot, name, holder, token, conn, lock_name)
SELECT UNHEX(%s), @tenure_slot, UNHEX(%s), UNHEX(%s), LAST_INSERT_ID(), CONNECTION_ID(),
       ELT(@tenure_slot + 1, {names}) FROM DUAL
WHERE @tenure_slot IS NOT NULL
ON DUPLICATE KEY UPDATE holder = VALUES(holder), token = VALUES(token), conn = VALUES(conn),
    lock_name = VALUES(lock_name);
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


# Release, on the lease's own session: RELEASE_LOCK frees a lock only when this session holds
# it (1), never another's (0), and says NULL when nobody does.
RELEASE = "SELECT RELEASE_LOCK(%s)"


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

# The live leases: a slot row whose lock the session that took it still holds.
LIST = """SELECT name, slot, holder, token FROM `{table}`
WHERE slot >= 0 AND LEFT(name, %s) = UNHEX(%s) AND IS_USED_LOCK(lock_name) = conn
ORDER BY name, slot"""

READ_RECORD = "SELECT record FROM `{table}` WHERE name_key = UNHEX(%s) AND slot = -1"

RECORDS = """SELECT name, record FROM `{table}`
WHERE slot = -1 AND record IS NOT NULL AND LEFT(name, %s) = UNHEX(%s) ORDER BY name"""

# Written only while the grant (its slot row, still of its token) holds its lock on the session
# that took it; record_writes makes a write of the same text count as a change.
WRITE_RECORD = """UPDATE `{table}` AS z JOIN `{table}` AS s
    ON s.name_key = z.name_key AND s.slot = %s
SET z.record = UNHEX(%s), z.record_writes = z.record_writes + 1
WHERE z.name_key = UNHEX(%s) AND z.slot = -1 AND s.token = %s
  AND IS_USED_LOCK(s.lock_name) = s.conn"""

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
