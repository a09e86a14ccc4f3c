# GENERATED from src/tenure/_async/stores/mysql/_sql.py by scripts/unasync.py: do not edit.
"""The SQL text of the mysql:// store, and the statements of one table built from it.

Every statement is a template with `{table}` (the lease table, a checked identifier) and
pyformat parameters; Statements formats them once per store. See the package's docstring
for the table's layout and the round trips per operation.

Example:
    >>> statements = Statements("tenure_leases")
    >>> statements.text["read record"]
    'SELECT record FROM `tenure_leases` WHERE name_key = UNHEX(%s) AND slot = 0'
"""

from __future__ import annotations

import re
from typing import Any

# Server time: UTC_TIMESTAMP(6) is fixed for the duration of a statement and independent of the
# session's time zone (NOW(6) and UNIX_TIMESTAMP() are not, around DST changes). Expiry is a
# DATETIME(6) in UTC (cheap to compare); counters are seeded from the same clock in µs.
NOW = "UTC_TIMESTAMP(6)"
NOW_US = "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
FREED = "'1970-01-01'"  # expires_at of a released or broken lease
# Run when a connection opens, in one round trip with the PREPAREs (see _open; the driver's
# init_command would cost two, its query and a COMMIT): assignments of an UPDATE (and of ON
# DUPLICATE KEY UPDATE) go left to right, each seeing the ones before it, as ACQUIRE_LOCK
# needs. MariaDB's sql_mode SIMULTANEOUS_ASSIGNMENT would make them all see the old row; MySQL
# has no such mode.
# The session's time zone is UTC, so that SYSDATE(6) (the time it is evaluated, not the
# statement's start: see _getlock_sql.CLOCK_US) reads as UTC_TIMESTAMP(6) does.
SESSION = ("SET SESSION sql_mode = TRIM(BOTH ',' FROM REPLACE("
            "CONCAT(',', @@SESSION.sql_mode, ','), ',SIMULTANEOUS_ASSIGNMENT,', ',')), "
            "time_zone = '+00:00'")

SCHEMA = """
CREATE TABLE IF NOT EXISTS `{table}` (
    name_key   BINARY(16)      NOT NULL,  -- blake2b-128 of the UTF-8 name (too long to index)
    slot       INT             NOT NULL,
    name       VARBINARY(4096) NOT NULL,  -- UTF-8; binary: no collation folds case or pads
    holder     VARBINARY(1024) NOT NULL,
    lease_id   BIGINT          NOT NULL,  -- random per grant; 0 once released or broken
    token      BIGINT          NOT NULL,  -- the token of the lease on this row
    counter    BIGINT          NOT NULL,  -- slot 0 only: the last token granted for the name
    expires_at DATETIME(6)     NOT NULL,  -- UTC, by the server's clock
    sleepers   VARBINARY(1024) NOT NULL DEFAULT ',',  -- slot 0: <> ',' when waiters (see WAIT)
    record     BLOB,                      -- slot 0 only: the name's record (UTF-8)
    record_writes BIGINT       NOT NULL DEFAULT 0,  -- slot 0: counts writes (see WRITE_RECORD)
    PRIMARY KEY (name_key, slot),
    KEY tenure_expiry (expires_at, counter)  -- the live leases, and the idle names (see IDLE)
) ENGINE=InnoDB
"""
# Tables made before the index: it is added once per store, at its first listing, prune or
# sweep (not on the hot path; both servers build it online). A missing table is left missing
# (created with the index at first use). Answers (the table exists, it has the index).
# Parameters: table name twice.
HAS_INDEX = ("SELECT COUNT(*), (SELECT COUNT(DISTINCT INDEX_NAME) FROM "
             "information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s "
             "AND INDEX_NAME = 'tenure_expiry') FROM information_schema.TABLES "
             "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s")
ADD_INDEX = "ALTER TABLE `{table}` ADD INDEX tenure_expiry (expires_at, counter)"

# A lock (limit 1): take slot 0 when it is free (or already ours: a retry of this same grant
# after a lost answer). The name's counter moves to max(counter + 1, server clock in µs), so
# tokens also stay ahead of grants that a crash of the server lost before they reached disk.
# LAST_INSERT_ID(x) puts the token into the OK packet; affected rows are 1 (inserted), 2 (taken
# over) or 0 (held by someone else). The assignments run left to right (the session turns off
# MariaDB's SIMULTANEOUS_ASSIGNMENT, see SESSION): `lease_id` becomes ours only when the row
# is free, and every later one tests just that. The drivers speak the text protocol, where the
# server parses a statement's text on every call, which costs about as much as executing it: on
# MariaDB the statements of an uncontended cycle are prepared once per connection (see
# PREPARED), elsewhere the statement is kept short. Parameters: key, name, holder, lease_id,
# ttl_us.
EXPIRES = f"{NOW} + INTERVAL %(ttl_us)s MICROSECOND"


def _acquire_lock(new: dict[str, str]) -> str:
    """The lock's upsert, with `new[column]` standing for the value the INSERT brings in the
    update branch: the parameter itself (the text), or VALUES(column) (prepared on MariaDB)."""
    ours = f"lease_id = {new['lease_id']}"
    return f"""
INSERT INTO `{{table}}` (name_key, slot, name, holder, lease_id, token, counter, expires_at)
VALUES (UNHEX(%(key)s), 0, %(name)s, %(holder)s, %(lease_id)s, {NOW_US},
        LAST_INSERT_ID({NOW_US}), {EXPIRES})
ON DUPLICATE KEY UPDATE
    lease_id = IF(expires_at <= {NOW}, {new['lease_id']}, lease_id),
    holder = IF({ours}, {new['holder']}, holder),
    counter = IF({ours}, LAST_INSERT_ID(GREATEST(counter + 1, {NOW_US})), counter),
    token = IF({ours}, counter, token),
    expires_at = IF({ours}, {new['expires_at']}, expires_at)
"""


ACQUIRE_LOCK = _acquire_lock(
    {"lease_id": "%(lease_id)s", "holder": "%(holder)s", "expires_at": EXPIRES})
# The same for MariaDB, prepared (see PREPARED): VALUES(column) reads the inserted row's value,
# so that each parameter is sent once. (MySQL 8.0.20+ deprecates VALUES() for a row alias that
# MariaDB lacks.)
ACQUIRE_LOCK_MARIADB = _acquire_lock(
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
# release locks its slot and slot 0 in two autocommit statements, see RELEASE_SLOT), so that
# none waits for another in a cycle (InnoDB error 1213). Parameters: key, name, holder,
# lease_id, ttl_us, limit.
ACQUIRE_SLOT = f"""
START TRANSACTION;
INSERT INTO `{{table}}` (name_key, slot, name, holder, lease_id, token, counter, expires_at)
VALUES (UNHEX(%(key)s), 0, %(name)s, '', 0, 0, {NOW_US}, {FREED})
ON DUPLICATE KEY UPDATE counter = counter;
SET @tenure_now = {NOW};
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
UPDATE `{{table}}` SET counter = LAST_INSERT_ID(GREATEST(counter + 1, {NOW_US}))
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
RENEW = (f"UPDATE `{{table}}` SET expires_at = {NOW} + INTERVAL %s MICROSECOND "
          f"WHERE expires_at > {NOW} AND (name_key, slot, lease_id) IN ({{rows}})")
# Parameters: (key, slot) per grant.
WHY_LOST = (f"SELECT name, slot, lease_id, expires_at > {NOW} FROM `{{table}}` "
             "WHERE (name_key, slot) IN ({rows})")


def flag_read(sleepers: str) -> str:
    """Slot 0's waiters' flag (`sleepers`: the column, maybe qualified; ',' when no waiter is
    known, see WAIT) unchanged, its state put into the OK packet as LAST_INSERT_ID (1 when
    someone waits, else 0)."""
    return f"IF(LAST_INSERT_ID({sleepers} <> ','), {sleepers}, {sleepers})"


# Release also reads slot 0's waiters' flag (see WAIT): it comes back as LAST_INSERT_ID in the
# OK packet, so only a release that someone waits for costs one more round trip (the KILL QUERY
# that wakes a waiter). A semaphore's other slots free their row and then, in a second
# autocommit statement of the same round trip, read slot 0's flag when the first one freed the
# row (ROW_COUNT; the flag is left as it is, so the row does not change): each statement locks
# one row, so a release never holds its slot while it waits for slot 0, which an acquire holds
# while it reads that slot (one UPDATE of both rows by a join did, and deadlocked with
# acquires). Parameters: key, lease_id (slot 0); key, slot, lease_id, key (other slots).
RELEASE = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {FREED}, "
            f"sleepers = {flag_read('sleepers')} "
            "WHERE name_key = UNHEX(%(key)s) AND slot = 0 AND lease_id = %(lease_id)s "
            f"AND expires_at > {NOW}")
RELEASE_SLOT = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {FREED} "
                 "WHERE name_key = UNHEX(%s) AND slot = %s AND lease_id = %s "
                 f"AND expires_at > {NOW}; "
                 f"UPDATE `{{table}}` SET sleepers = {flag_read('sleepers')} "
                 "WHERE name_key = UNHEX(%s) AND slot = 0 AND ROW_COUNT() > 0")

# The statements of an uncontended cycle, prepared on each new connection to MariaDB with
# PREPARE (text protocol) and run with `EXECUTE name USING <literals>`: the server parses only
# the short EXECUTE. MySQL 8 takes only user variables after USING, which would cost a
# SET + EXECUTE multi-statement per call (slower than parsing on MariaDB): MySQL gets the text.
# A PREPARE that finds the table missing fails like any statement (then the table is created
# and the connection opened again); one whose table is later dropped or altered is prepared
# again by the server itself.
PREPARED = {"lock": ("tenure_lock", ACQUIRE_LOCK_MARIADB),
             "release": ("tenure_release", RELEASE)}
_PARAMETER = re.compile(r"%\((\w+)\)s")


def binary(text: str) -> str:
    """`text` as a SQL literal of its UTF-8 bytes (hex): no escaping to get wrong, and cheaper
    for the client than the driver's escaping of a quoted string.

    Example:
        >>> binary("jobs")
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
# first such sleep in the name's queue with KILL QUERY, found by its tag in the server's
# process list, which shows a user its own connections and needs no privilege to KILL QUERY
# them: each release wakes one sleeper (waking all would have them all retry for the one free
# slot).
#
# A wait writes nothing per wait. Slot 0's row is the name's hottest (every acquire and release
# locks it), and a change to it costs a commit while its lock is held: waiters that wrote their
# ids there (an earlier design) made a crowd of waiters stall every hand-off. The row only keeps
# a flag, `sleepers` <> ',', set by the first waiter (the UPDATE below changes the row only
# when the flag is clear) and read by releases, which look for a sleeper only when it is set; a
# release that finds none clears it (UNFLAG). A waiter sleeps
# only while the flag is set, so a flag cleared between its two statements costs it no more
# than its sleep. The waiter's next try goes out right behind these statements (see
# sleep_then_try). A waiter whose name is free sleeps `free` seconds (0, or what is left of
# the head start of a waiter its own store woke, see HeadStart). Parameters: key, key, limit,
# limit, seconds, free, key.
WAIT_TAG = "tenure-wait {table} {key} {since}"
WAIT = (f"UPDATE /* {WAIT_TAG} */ `{{table}}` SET sleepers = ',w,' "
         "WHERE name_key = UNHEX(%s) AND slot = 0 AND sleepers = ','; "
         f"SELECT /* {WAIT_TAG} */ SLEEP(IF(z.sleepers <> ',' AND ("
         "SELECT COUNT(*) FROM `{table}` AS l WHERE l.name_key = UNHEX(%s) AND l.slot < %s "
         f"AND l.expires_at > {NOW}) >= %s, %s, %s)) "
         "FROM `{table}` AS z WHERE z.name_key = UNHEX(%s) AND z.slot = 0")
# The first waiter in the queue of a name: the sleeper whose tag carries the smallest place
# (see queued_at; the tag is split so that this statement, which other waits' releases also
# see in the process list, does not carry it). Parameters: key. Only this database's: a table
# of the same name in another database has sleepers of its own. Not by the process list's
# TIME: in whole seconds on MySQL (MariaDB adds TIME_MS), and reset by every sleep, so that a
# waiter whose sleep ended (by itself, or woken to find the name taken again) went behind all
# the others: ordered by TIME, 8 processes got 25 to 415 acquisitions each (min/max 0.06).
SLEEPER = ("(SELECT ID FROM information_schema.PROCESSLIST JOIN (SELECT CONCAT('/* tenure', "
            "'-wait {table} ', %s, ' ') AS tag) AS t WHERE DB = DATABASE() AND "
            "LOCATE(t.tag, INFO) > 0 "
            "ORDER BY SUBSTRING(INFO, LOCATE(t.tag, INFO) + CHAR_LENGTH(t.tag), 20) LIMIT 1)")
# Sent in the same round trip as a release of a name that this store saw contended: wakes the
# first sleeper in the name's queue (SLEEPER). KILL takes no subquery, hence the variable;
# KILL QUERY 0 when none sleeps fails with error 1094. Parameters: key.
WAKE_NEXT = f"; SET @tenure_sleeper = {SLEEPER}; KILL QUERY COALESCE(@tenure_sleeper, 0)"
# Clears the waiters' flag of a name, once a look at the process list found no sleeper. Not
# in one statement with that look: the UPDATE would hold slot 0's lock while the server reads
# its process list, which waits behind any KILL in progress (a second or more, measured), and
# every acquire and release of the name would wait too. A waiter that sets the flag between
# the look and the clear sleeps unwoken at worst until its backoff ends. Parameters: key.
UNFLAG = ("UPDATE `{table}` SET sleepers = ',' WHERE name_key = UNHEX(%s) AND slot = 0 "
           "AND sleepers <> ','")
# Undoes an acquire whose answer never came in (see _forget): frees whichever slot it took, by
# its lease id, once the connection that sent it (its id in @tenure_alive) is gone, and says
# whether it still ran. Parameters: connection id, key, lease_id.
FORGET = ("SET @tenure_alive = EXISTS(SELECT 1 FROM information_schema.PROCESSLIST "
           "WHERE ID = %s); "
           f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {FREED} "
           f"WHERE name_key = UNHEX(%s) AND lease_id = %s AND expires_at > {NOW} "
           "AND @tenure_alive = 0; "
           "SELECT @tenure_alive")
# Break reads slot 0's waiters' flag as release does (when slot 0 was held). Parameters: key.
BREAK = (f"UPDATE `{{table}}` SET lease_id = 0, expires_at = {FREED}, "
          f"sleepers = IF(slot = 0, {flag_read('sleepers')}, sleepers) "
          f"WHERE name_key = UNHEX(%s) AND expires_at > {NOW}")
# Parameters: prefix length in bytes, prefix.
LIST = (f"SELECT name, slot, holder, token, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires_at) "
         f"FROM `{{table}}` WHERE expires_at > {NOW} AND LEFT(name, %s) = UNHEX(%s) "
         "ORDER BY name, slot")

# Forgetting idle names (retain, prune). A name is idle for `idle` seconds when every row of it
# is free since then (released: expires_at is FREED; expired: expires_at that long ago) and it
# was not granted since (slot 0's counter, the name's last token, is at least the server clock
# in µs at its grant, so a counter older than the window is a grant older than it). A free name
# has no waiter worth keeping: a waiter takes a free name at its next try. Its next grant
# restarts the counter from the server clock in µs (the upserts' insert branch), above every
# token of the name unless that clock stepped back by more than the window. Records stay: a
# name with one keeps slot 0's row, its counter set to 0 (forgotten all the same, and out of
# CANDIDATES' range: counters are >= 1). Other slots' rows keep counter 0, so the index range
# below holds slot 0's rows of the idle names and expired rows only, whatever `retain` keeps.
# Batches follow the index's order, each from the position (expires_at, counter, key) of
# the last candidate before it. Parameters: idle_us twice, the position's (expires_at twice,
# counter twice, key), batch size.
CANDIDATES = (f"SELECT HEX(name_key), expires_at, counter FROM `{{table}}` WHERE slot = 0 "
              f"AND counter BETWEEN 1 AND {NOW_US} - %s "
              f"AND (expires_at = {FREED} OR (expires_at > {FREED} "
              f"AND expires_at <= {NOW} - INTERVAL %s MICROSECOND)) "
              # past the last candidate of the batch before (the index's order)
              "AND (expires_at > %s OR (expires_at = %s AND (counter > %s "
              "OR (counter = %s AND name_key > UNHEX(%s))))) "
              "ORDER BY expires_at, counter, name_key LIMIT %s")
FIRST = ("1000-01-01 00:00:00", 0, "")  # a position before every candidate
# The idle names among `keys`, decided on every row of each (a semaphore with a slot held is
# not idle); `kept` when the name has a record. In a derived table, which the server
# materializes, so that a DELETE or UPDATE of the same table may use it.
IDLE = ("SELECT name_key, MAX(slot = 0 AND record IS NOT NULL) AS kept FROM `{table}` "
        "WHERE name_key IN ({keys}) GROUP BY name_key HAVING MIN(slot) = 0 "
        "AND MAX(expires_at) <= @tenure_before "
        "AND MAX(IF(slot = 0, counter, 0)) BETWEEN 1 AND @tenure_cut")
WINDOW = (f"SET @tenure_before = {NOW} - INTERVAL %s MICROSECOND, "
           f"@tenure_cut = {NOW_US} - %s")
# One transaction in two round trips: lock the rows of `keys` (primary key order, slot 0 of
# each name first, as everywhere in this store) and answer which names are idle, decided while
# no grant can change them (DECIDE); then delete those, by their keys (slot 0 of a name with a
# record stays, its counter forgotten), and COMMIT (DROP_NAMES, DROP_KEPT). A grant of one of
# them waits for the COMMIT, then finds no row (or counter 0) and starts from the clock. The
# keys are literals: a DELETE whose IN reads a subquery is a scan of the whole table on
# MariaDB 10.11 (no semi-join for single-table DELETE), 2.7 s a batch at 1,000,000 rows.
# Parameters: idle_us twice.
DECIDE = f"""START TRANSACTION;
{WINDOW};
SELECT COUNT(*) INTO @tenure_locked FROM `{{table}}` WHERE name_key IN ({{keys}}) FOR UPDATE;
SELECT HEX(name_key), kept FROM ({IDLE}) AS idle"""
DROP_NAMES = ("DELETE FROM `{table}` WHERE name_key IN ({keys}) "
              "AND (slot > 0 OR record IS NULL)")
DROP_KEPT = ("UPDATE `{table}` SET counter = 0, sleepers = ',' "
             "WHERE slot = 0 AND name_key IN ({keys})")
# A dry run counts the idle names of each batch, without locks. Parameters: idle_us twice.
COUNT_NAMES = f"{WINDOW};\nSELECT COUNT(*) FROM ({IDLE}) AS idle"


def _listed(keys: list[str]) -> str:
    return ", ".join(f"UNHEX('{key}')" for key in keys)


def drop(*statements: str) -> str:
    """The given statements (empty ones left out), then COMMIT, as one multi-statement.

    Example:
        >>> drop("", "DELETE FROM t")
        'DELETE FROM t; COMMIT'
    """
    return "; ".join([*filter(None, statements), "COMMIT"])


# Records live in slot 0's row (never deleted). A write takes effect only while the writer's
# lease row is live; it also counts the write, so that rewriting the same record still changes
# the row (affected rows count changed rows). Parameters: slot, lease_id, record (hex: the
# asyncio driver cannot escape bytes), key.
WRITE_RECORD = (f"UPDATE `{{table}}` AS z JOIN `{{table}}` AS l ON l.name_key = z.name_key "
                 f"AND l.slot = %s AND l.lease_id = %s AND l.expires_at > {NOW} "
                 "SET z.record = UNHEX(%s), z.record_writes = z.record_writes + 1 "
                 "WHERE z.name_key = UNHEX(%s) AND z.slot = 0")
# Parameters: key.
READ_RECORD = "SELECT record FROM `{table}` WHERE name_key = UNHEX(%s) AND slot = 0"
# Parameters: prefix length in bytes, prefix.
RECORDS = ("SELECT name, record FROM `{table}` WHERE slot = 0 AND record IS NOT NULL "
            "AND LEFT(name, %s) = UNHEX(%s) ORDER BY name")


class Statements:
    """The statements of one table, formatted once, and the texts built per call from them.

    On MariaDB the uncontended cycle's statements are prepared per connection (see PREPARED):
    `prepare` and `prepare_texts` are what a new connection runs, and `cycle` writes their
    EXECUTE.

    Example:
        >>> Statements("app_leases").cycle("release", {"key": "'00'", "lease_id": "7"}, True)
        "EXECUTE tenure_release USING '00', 7"
    """

    def __init__(self, table: str) -> None:
        self.table = table
        self.text = {
            "lock": ACQUIRE_LOCK.format(table=table),
            "slot": ACQUIRE_SLOT.format(table=table),
            "release": RELEASE.format(table=table),
            "release slot": RELEASE_SLOT.format(table=table),
            "sleeper": f"SELECT {SLEEPER}".format(table=table),
            "unflag": UNFLAG.format(table=table),
            "wake next": WAKE_NEXT.format(table=table),
            "forget": FORGET.format(table=table),
            "break": BREAK.format(table=table),
            "list": LIST.format(table=table),
            "write record": WRITE_RECORD.format(table=table),
            "read record": READ_RECORD.format(table=table),
            "records": RECORDS.format(table=table),
            "candidates": CANDIDATES.format(table=table),
            "add index": ADD_INDEX.format(table=table),
        }
        self.schema = SCHEMA.format(table=table)
        # The PREPAREs (one multi-statement) and their texts, and per statement the start of
        # its EXECUTE and the order of its parameters.
        self.prepare = "; ".join(f"PREPARE {handle} FROM %s" for handle, _ in PREPARED.values())
        self.prepare_texts: list[str] = []
        self._executes: dict[str, tuple[str, list[str]]] = {}
        for statement, (handle, template) in PREPARED.items():
            text, names = _placeholders(template.format(table=table))
            self.prepare_texts.append(text)
            self._executes[statement] = (f"EXECUTE {handle} USING ", names)

    def cycle(self, statement: str, literals: dict[str, str], prepared: bool) -> str:
        """The text of a statement of the uncontended cycle ("lock" or "release") with its
        parameters given as SQL literals: `EXECUTE ... USING` them when the connection's
        statements are `prepared` (MariaDB, see PREPARED), else the statement itself. Sent
        with `connection.query`, which skips the driver's cursor and escaping: about a tenth
        of a cycle's time on this path."""
        if prepared:
            execute, names = self._executes[statement]
            return execute + ", ".join([literals[name] for name in names])
        return self.text[statement] % literals

    def acquire(self, parameters: dict[str, Any], prepared: bool) -> str:
        """The text of an acquire, a lock's or a semaphore's, with its parameters (key, name,
        holder, lease_id, ttl_us, limit) as SQL literals."""
        literals = {"key": f"'{parameters['key']}'", "name": binary(parameters["name"]),
                    "holder": binary(parameters["holder"]),
                    "lease_id": str(parameters["lease_id"]),
                    "ttl_us": str(parameters["ttl_us"]), "limit": str(parameters["limit"])}
        if parameters["limit"] > 1:
            return self.text["slot"] % literals
        return self.cycle("lock", literals, prepared)

    def wait(self, key: str, limit: int, seconds: float, since: str, free: float = 0.0) -> str:
        """The statements of a wait (see WAIT): sleep up to `seconds` while the name of `key`
        has `limit` live slots (else `free` seconds), in the queue's place `since` (see
        queued_at)."""
        return WAIT.format(table=self.table, key=key, since=since) % (
            f"'{key}'", f"'{key}'", limit, limit, f"{seconds:.3f}", f"{free:.4f}", f"'{key}'")

    def forget(self, keys: list[str]) -> str:
        """The start of the transaction that forgets the idle names among `keys` (hex
        digests): it locks their rows and answers the idle ones (see DECIDE)."""
        return DECIDE.format(table=self.table, keys=_listed(keys))

    def drop(self, idle: list[str], kept: list[str]) -> str:
        """The end of a forgetting transaction: delete the `idle` names (keeping slot 0 of
        the `kept` ones, their counter reset) and COMMIT (see DECIDE)."""
        return drop(DROP_NAMES.format(table=self.table, keys=_listed(idle)) if idle else "",
                    DROP_KEPT.format(table=self.table, keys=_listed(kept)) if kept else "")

    def count_idle(self, keys: list[str]) -> str:
        """The count of the idle names among `keys` (see COUNT_NAMES)."""
        return COUNT_NAMES.format(table=self.table, keys=_listed(keys))

    def renew(self, count: int) -> str:
        """The renewal of `count` leases in one statement (see RENEW)."""
        return RENEW.format(table=self.table, rows=", ".join(["(UNHEX(%s), %s, %s)"] * count))

    def why_lost(self, count: int) -> str:
        """The look at `count` rows that says why leases were not renewed (see WHY_LOST)."""
        return WHY_LOST.format(table=self.table, rows=", ".join(["(UNHEX(%s), %s)"] * count))
