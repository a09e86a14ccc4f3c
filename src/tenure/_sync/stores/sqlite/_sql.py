# GENERATED from src/tenure/_async/stores/sqlite/_sql.py by scripts/unasync.py: do not edit.
"""The SQL text of the sqlite:// store: its two tables and every statement it runs.

Example::

    db.execute(RELEASE, (name, slot, lease_id, BOOT_ID, host_monotonic()))
"""

from __future__ import annotations

SCHEMA = ["""
CREATE TABLE IF NOT EXISTS tenure_leases (
    name       TEXT    NOT NULL,
    slot       INTEGER NOT NULL,
    holder     TEXT    NOT NULL,
    lease_id   TEXT    NOT NULL,  -- '' once released or broken
    token      INTEGER NOT NULL,  -- last token granted on this row; the name's counter is max()
    boot       TEXT    NOT NULL,  -- host boot id when expires_at was written
    expires_at REAL    NOT NULL,  -- host monotonic clock, seconds
    PRIMARY KEY (name, slot)
) WITHOUT ROWID
""", """
CREATE TABLE IF NOT EXISTS tenure_records (
    name   TEXT NOT NULL PRIMARY KEY,
    record TEXT NOT NULL  -- kept across releases, expiries and breaks, like the counter
) WITHOUT ROWID
"""]

# Whether a database has tenure's lease table, read without creating anything.
HAS_LEASE_TABLE = ("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                   "AND name = 'tenure_leases'")
# What a read-only connection runs to prove that the database is tenure's.
PROBE_LEASE_TABLE = "SELECT 1 FROM tenure_leases LIMIT 0"

# A lock (limit 1) in one statement: take slot 0 when it is free, bumping the name's counter.
# Parameters: name, holder, lease_id, seed (wall clock µs), boot, expires_at, now.
ACQUIRE_LOCK = """
INSERT INTO tenure_leases (name, slot, holder, lease_id, token, boot, expires_at)
VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (name, slot) DO UPDATE SET
    holder = excluded.holder,
    lease_id = excluded.lease_id,
    token = max((SELECT max(token) FROM tenure_leases WHERE name = ?1) + 1, excluded.token),
    boot = excluded.boot,
    expires_at = excluded.expires_at
WHERE tenure_leases.expires_at <= ?7 OR tenure_leases.boot != excluded.boot
RETURNING token
"""
# A semaphore's slot, in a write transaction: read the name's rows, then write the free slot's.
SLOTS = "SELECT slot, token, boot, expires_at FROM tenure_leases WHERE name = ?"
TAKE_SLOT = "INSERT OR REPLACE INTO tenure_leases VALUES (?, ?, ?, ?, ?, ?, ?)"
# Who has a slot now, to say why a renewal found the lease gone.
LEASE_ID = "SELECT lease_id FROM tenure_leases WHERE name = ? AND slot = ?"

# Parameters: name, slot, lease_id, boot, now (+ expires_at first for renewal).
_OURS = "name = ? AND slot = ? AND lease_id = ? AND boot = ? AND expires_at > ?"
RENEW = f"UPDATE tenure_leases SET expires_at = ? WHERE {_OURS}"
# A freed row keeps when it was freed in expires_at (the host's monotonic clock, as for expiry),
# which is how long it has been idle. Parameters: now, then _OURS's.
RELEASE = f"UPDATE tenure_leases SET lease_id = '', expires_at = ? WHERE {_OURS}"
# With retain=0 the row goes at once. Parameters: _OURS's.
RELEASE_AND_FORGET = f"DELETE FROM tenure_leases WHERE {_OURS}"
# Parameters: now, name, boot, now.
BREAK = ("UPDATE tenure_leases SET lease_id = '', expires_at = ? "
         "WHERE name = ? AND boot = ? AND expires_at > ?")
# Forget the names every row of which has been free since `idle_since` (host monotonic): freed or
# expired then, in this boot; a row of an earlier boot counts as idle once this boot's uptime
# is past the window (?3). Their next grant restarts the counter from the wall clock in
# microseconds (next_token), above every token granted before the window. Records stay.
# A sweep goes through the names FORGET_CHUNK at a time, in the primary key's order: the chunk
# is the names in (?4, ?5] (CHUNK_END finds ?5: the FORGET_CHUNK-th distinct name after ?4).
# Parameters: boot, idle_since, uptime past the window (0/1), after, last.
FORGET_CHUNK = 1000
CHUNK_END = """
SELECT max(name) FROM (SELECT DISTINCT name FROM tenure_leases WHERE name > ?1
                       ORDER BY name LIMIT ?2)
"""
_IDLE_NAMES = """
SELECT name FROM tenure_leases WHERE name > ?4 AND name <= ?5 GROUP BY name
HAVING min(CASE WHEN boot = ?1 THEN expires_at <= ?2 ELSE ?3 END) = 1
"""
FORGET = f"DELETE FROM tenure_leases WHERE name IN ({_IDLE_NAMES}) RETURNING name"
COUNT_IDLE = f"SELECT count(*) FROM ({_IDLE_NAMES})"
# One statement that writes only while the writer's lease row is live (_OURS), so a holder
# that lost its lease cannot overwrite its successor's record. Parameters: name, record, _OURS's.
WRITE_RECORD = f"""
INSERT INTO tenure_records (name, record)
SELECT ?, ? WHERE EXISTS (SELECT 1 FROM tenure_leases WHERE {_OURS})
ON CONFLICT (name) DO UPDATE SET record = excluded.record
"""
READ_RECORD = "SELECT record FROM tenure_records WHERE name = ?"
# Listings select the names with a prefix as the range [prefix, _after(prefix)) of the primary
# key, not with substr(): SQLite's substr() and length() of TEXT stop at the first NUL, while
# comparisons (BINARY collation: memcmp of the UTF-8) see every byte and use the index.
LIST_RECORDS = ("SELECT name, record FROM tenure_records WHERE name >= ? {below} "
                "ORDER BY name")
LIST = ("SELECT name, slot, holder, token, expires_at FROM tenure_leases "
        "WHERE boot = ? AND expires_at > ? AND name >= ? {below} ORDER BY name, slot")
_LAST_CHAR = 0x10FFFF


def _after(prefix: str) -> str | None:
    """The least string greater than every string that starts with `prefix` (None: no such
    string, every name from `prefix` on starts with it). UTF-8 orders as code points do."""
    stem = prefix.rstrip(chr(_LAST_CHAR))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are not characters of a valid name
        following = 0xE000
    return stem[:-1] + chr(following)


def with_prefix(statement: str, parameters: tuple[object, ...],
                prefix: str) -> tuple[str, tuple[object, ...]]:
    """`statement` (ending its WHERE with `name >= ? {below}`) limited to names that start
    with `prefix`, and its parameters.

    Example:
        >>> with_prefix(LIST_RECORDS, (), "job")[1]
        ('job', 'joc')
    """
    upper = _after(prefix)
    if upper is None:
        return statement.format(below=""), (*parameters, prefix)
    return statement.format(below="AND name < ?"), (*parameters, prefix, upper)
