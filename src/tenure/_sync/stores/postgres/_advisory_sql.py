# GENERATED from src/tenure/_async/stores/postgres/_advisory_sql.py by scripts/unasync.py: do not edit.
"""The statements of advisory mode (`mode=advisory`), as text, and the lock keys of a name.

Example:
    >>> "pg_try_advisory_lock" in _ADVISORY_ACQUIRE
    True
"""

from __future__ import annotations

import hashlib

from tenure._sync.stores.postgres._table_sql import (
    _CLOCK,
    _COMMON_SHAPE,
    _CUTOFF,
    _MAY_FORGET,
)

# Each lease is a session-level advisory lock, held by one of the pool's connections: a session
# holds the locks of many leases, so leases cost no connection of their own (at most
# `pool_size` in all). The server frees a lock the moment its session ends. A session lock is
# re-entrant within its session, so an acquire skips the keys its own session already holds
# (`mine`); and only that session can unlock it, so a release runs on the lease's own session
# (see _hold_session). The 64-bit key of (name, slot) is 8 bytes of a keyed blake2b (see
# _advisory_keys), XOR the slot's generation. A table keeps, per (name, slot), who holds it
# under which backend pid and key (for leases(), renewal checks and break) and the slot's
# generation (`counter`, bumped by each break), and in the row of slot -1 the name's fencing
# counter and whether someone waits.
#
# Why a generation: a break cannot take a lock from another session without ending that
# session, and with it every other lease it holds. So a break only marks the slot's lease
# broken and moves the slot to a new key; the broken holder's lock on the old key binds nobody
# any more (its store unlocks it at release).

# A table of an earlier version gains the columns added since (see _table_sql._UPGRADE); every
# table gets the index of live leases ({live}: the table's name + "_live"), which _ADVISORY_LIST
# reads instead of the whole table, where most rows are the counters and free slots of names
# used within `retain`. Each grant and release then updates an index entry (lease_id is in its
# predicate: no HOT update); measured, that costs the advisory cycle nothing beyond noise,
# which its pg_locks reads dominate (docs/stores/postgres.md, Limits).
_ADVISORY_UPGRADE = """
ALTER TABLE {t} ADD COLUMN IF NOT EXISTS used_at timestamptz;
CREATE INDEX IF NOT EXISTS {live} ON {t} (slot) WHERE lease_id <> ''
"""

_ADVISORY_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    name     bytea   NOT NULL,  -- the lock name in UTF-8
    digest   bytea   NOT NULL GENERATED ALWAYS AS (sha256(name)) STORED,  -- the key
    slot     integer NOT NULL,  -- -1: the name's counter row
    holder   bytea   NOT NULL,
    lease_id text    NOT NULL,  -- '' once released or broken
    token    bigint  NOT NULL,
    counter  bigint  NOT NULL,  -- slot -1: the name's fencing counter; else the generation
    pid      integer NOT NULL,  -- the backend whose session holds the advisory lock
    key      bigint  NOT NULL,  -- the advisory lock's key
    wanted   boolean NOT NULL,  -- slot -1: someone found the name held since its last grant
    record   bytea,             -- slot -1: the name's record (write_record), UTF-8
    used_at  timestamptz,       -- slot >= 0: its last grant, release or break; -1: see _FORGET
    PRIMARY KEY (digest, slot)
)
"""

# Whether backend `pid` holds the session advisory lock `key` (a bigint key shows in pg_locks
# as classid = high 32 bits, objid = low 32 bits, objsubid = 1).
_HELD = """EXISTS (
    SELECT FROM pg_locks AS k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1 AND k.pid = {row}.pid
      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND k.classid = (({row}.key >> 32) & 4294967295)::oid
      AND k.objid = ({row}.key & 4294967295)::oid)"""

# The same for many rows: pg_locks read once (a view over the whole lock table: looked up per
# row, 10,000 leases would read it 10,000 times), as (pid, key), the key's bits put back
# together; rows test `(l.pid, l.key) IN (SELECT pid, key FROM held)`, a hashed lookup (a join
# would be planned as a nested loop: the planner takes pg_locks for one row).
_HELD_LOCKS = """held AS MATERIALIZED (
    SELECT k.pid, (k.classid::int8 << 32) | k.objid::int8 AS key FROM pg_locks AS k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)"""

# ONE statement: take the first free slot's advisory lock (the keys of slots 0..limit-1 in
# order, each XOR its generation, skipping the keys this session holds; the scan stops at the
# first lock taken), then bump the counter row and record the lease. The skip is a CASE, not
# an AND: the planner may order the terms of an AND as it likes, and a generic plan (prepared
# after psycopg's 5 runs) tried the lock first, which on the holding session locks the key a
# second time (session locks count re-entries) and one release left it held. The counter row
# is locked by the upsert until commit, so tokens follow grant order. A break that moved the
# slot to a new generation meanwhile: the lease is not recorded and the lock is given back at
# once (the last SELECT, a CASE for the same reason). Nothing free: mark the name wanted
# (once). A session lock outlives an aborted statement: a failed acquire is followed by
# _ADVISORY_UNLOCK_STRAYS on its session.
_ADVISORY_ACQUIRE = """
WITH got AS MATERIALIZED (
    SELECT s.slot, s.key, s.gen FROM (
        SELECT k.i - 1 AS slot, k.key # g.gen AS key, g.gen
        FROM unnest(%(keys)s::int8[]) WITH ORDINALITY AS k (key, i)
        CROSS JOIN LATERAL (
            SELECT coalesce(max(l.counter), 0) AS gen FROM {t} AS l
            WHERE l.digest = sha256(%(name)s) AND l.slot = k.i - 1) AS g
    ) AS s
    WHERE CASE WHEN s.key = ANY(%(mine)s::int8[]) THEN false
               ELSE pg_try_advisory_lock(s.key) END
    LIMIT 1
), counter AS (
    INSERT INTO {t} AS c (name, slot, holder, lease_id, token, counter, pid, key, wanted)
    SELECT %(name)s, -1, '', '', 0, {seed}, 0, 0, false FROM got
    ON CONFLICT (digest, slot) DO UPDATE SET counter = c.counter + 1, wanted = false,
        used_at = NULL
    RETURNING c.counter
), lease AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, pid, key, wanted,
                          used_at)
    SELECT %(name)s, got.slot, %(holder)s, %(lease_id)s, counter.counter, got.gen,
           pg_backend_pid(), got.key, false, clock_timestamp()
    FROM got, counter
    ON CONFLICT (digest, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = excluded.token,
        pid = excluded.pid, key = excluded.key, used_at = excluded.used_at
    WHERE l.counter = excluded.counter
    RETURNING l.slot, l.token, l.key
), mark AS (
    INSERT INTO {t} AS c (name, slot, holder, lease_id, token, counter, pid, key, wanted)
    SELECT %(name)s, -1, '', '', 0, {seed}, 0, 0, true WHERE NOT EXISTS (SELECT FROM got)
    ON CONFLICT (digest, slot) DO UPDATE SET wanted = true WHERE NOT c.wanted
)
SELECT slot, token, key FROM lease
UNION ALL
SELECT -1, 0, key FROM got
WHERE CASE WHEN EXISTS (SELECT FROM lease) THEN false ELSE pg_advisory_unlock(key) END
"""

# A lock's waiter waits on the server (see PostgresAdvisoryStore.wait_and_acquire): ONE
# round trip of two statements in one implicit transaction, on a session that holds no lease.
# The first bounds the wait (`lock_timeout`, for this transaction only) and the statement
# (`statement_timeout`: the wait plus `timeout`, the client's own bound; the session's
# statement_timeout, `timeout`, cancelled a wait longer than it with an error); the second
# blocks in `pg_advisory_lock` on slot 0's key at its current generation, and once granted
# bumps the counter and records the lease as _ADVISORY_ACQUIRE does. The server queues the
# waiters of a lock in arrival order and grants the lock to the first at the release (a
# `pg_try_advisory_lock` asked meanwhile, by a releaser asking again, fails while waiters are
# queued): a FIFO hand-off, the waiter woken by the release itself. A break that moved the slot
# to a new generation while it waited: the lease is not recorded and the lock given back (slot
# -1), as in _ADVISORY_ACQUIRE. Timed out (LockNotAvailable), cancelled or failed, the statement
# may still have taken the lock (a session lock outlives an aborted statement): the waiter then
# runs _ADVISORY_UNLOCK_ALL.
_ADVISORY_WAIT = """
SELECT set_config('lock_timeout', %(wait)s, true),
       set_config('statement_timeout', %(statement)s, true);
WITH got AS MATERIALIZED (
    SELECT 0 AS slot, s.key, s.gen FROM (
        SELECT %(key)s::int8 # g.gen AS key, g.gen FROM (
            SELECT coalesce(max(l.counter), 0) AS gen FROM {t} AS l
            WHERE l.digest = sha256(%(name)s) AND l.slot = 0) AS g
    ) AS s
    WHERE pg_advisory_lock(s.key) IS NOT NULL
), counter AS (
    INSERT INTO {t} AS c (name, slot, holder, lease_id, token, counter, pid, key, wanted)
    SELECT %(name)s, -1, '', '', 0, {seed}, 0, 0, false FROM got
    ON CONFLICT (digest, slot) DO UPDATE SET counter = c.counter + 1, wanted = false,
        used_at = NULL
    RETURNING c.counter
), lease AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, pid, key, wanted,
                          used_at)
    SELECT %(name)s, got.slot, %(holder)s, %(lease_id)s, counter.counter, got.gen,
           pg_backend_pid(), got.key, false, clock_timestamp()
    FROM got, counter
    ON CONFLICT (digest, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = excluded.token,
        pid = excluded.pid, key = excluded.key, used_at = excluded.used_at
    WHERE l.counter = excluded.counter
    RETURNING l.slot, l.token, l.key
)
SELECT slot, token, key FROM lease
UNION ALL
SELECT -1, 0, key FROM got
WHERE CASE WHEN EXISTS (SELECT FROM lease) THEN false ELSE pg_advisory_unlock(key) END
"""

# On a session that holds no lease (a waiter's, see _ADVISORY_WAIT): whatever lock it has.
_ADVISORY_UNLOCK_ALL = "SELECT pg_advisory_unlock_all()"

# After a failed acquire, on its session: give back any lock the statement took (the keys of
# the slots at their current generation that this session holds and no lease of it uses).
_ADVISORY_UNLOCK_STRAYS = """
SELECT pg_advisory_unlock(s.key) FROM (
    SELECT k.key # coalesce((SELECT max(l.counter) FROM {t} AS l
                             WHERE l.digest = sha256(%(name)s) AND l.slot = k.i - 1), 0) AS key
    FROM unnest(%(keys)s::int8[]) WITH ORDINALITY AS k (key, i)
) AS s, pg_locks AS h
WHERE s.key <> ALL(%(mine)s::int8[]) AND h.locktype = 'advisory' AND h.granted
  AND h.objsubid = 1 AND h.pid = pg_backend_pid()
  AND h.classid = ((s.key >> 32) & 4294967295)::oid AND h.objid = (s.key & 4294967295)::oid
"""

# On the lease's own session: free the row when it is still the lease's, unlock its key
# whatever the row says (a broken lease's lock binds nobody, but the session holds it), and
# notify when someone waits. Answers whether the row was the lease's. The row is freed BEFORE
# the unlock (the unlock is evaluated on the row of `f`, which aggregates every row of `freed`):
# unlocked first, a waiter queued on the server (_ADVISORY_WAIT) took the lock and rewrote the
# row before this UPDATE reached it, which then waited for the waiter's commit and found the
# row no longer the lease's: the release answered False, a round trip late.
_ADVISORY_RELEASE = """
WITH freed AS (
    UPDATE {t} SET lease_id = '', used_at = now()
    WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
      AND pid = pg_backend_pid()
    RETURNING slot
)
SELECT pg_advisory_unlock(%(lock)s), f.mine,
       CASE WHEN f.mine AND (
                SELECT c.wanted FROM {t} AS c
                WHERE c.digest = sha256(%(name)s) AND c.slot = -1)
            THEN pg_notify(%(channel)s, %(key)s) END
FROM (SELECT count(*) > 0 AS mine FROM freed) AS f
"""

# The same with retain=0: the lease's row is deleted instead of freed, and the name's counter
# row with it when no other slot has a row and it keeps no record, unless a grant of the name
# is under way (_MAY_FORGET, see _table_sql._SEED): then the row is only freed (`freed`, which
# runs when `deleted` did not), and a later sweep forgets it. Both read the rows as the
# statement began, so `wanted` still reads the counter row.
_ADVISORY_RELEASE_FORGET = f"""
WITH deleted AS (
    DELETE FROM {{t}} AS l
    WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
      AND pid = pg_backend_pid()
      AND CASE WHEN l.lease_id = %(lease_id)s THEN {_MAY_FORGET.format(digest="l.digest")} END
    RETURNING slot
), counter AS (
    DELETE FROM {{t}} AS c
    WHERE c.digest = sha256(%(name)s) AND c.slot = -1 AND c.record IS NULL
      AND EXISTS (SELECT FROM deleted)
      AND NOT EXISTS (SELECT FROM {{t}} AS o WHERE o.digest = c.digest AND o.slot >= 0
                      AND o.slot <> %(slot)s)
), freed AS (
    UPDATE {{t}} SET lease_id = '', used_at = now()
    WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
      AND pid = pg_backend_pid() AND NOT EXISTS (SELECT FROM deleted)
    RETURNING slot
)
SELECT pg_advisory_unlock(%(lock)s), f.mine,
       CASE WHEN f.mine AND (
                SELECT c.wanted FROM {{t}} AS c
                WHERE c.digest = sha256(%(name)s) AND c.slot = -1)
            THEN pg_notify(%(channel)s, %(key)s) END
FROM (SELECT count(*) > 0 AS mine FROM (SELECT slot FROM deleted UNION ALL
                                        SELECT slot FROM freed) AS both_ways) AS f
"""

# After a release that failed or got no answer on a session that lives on (its statement
# cancelled, refused, or out of time: whether its unlock ran is unknown), on that session:
# unlock the lease's key if the session still holds it, reading pg_locks and rows only (no row
# lock to wait for, unlike the release's UPDATE), and notify when someone waits. The row keeps
# the lease id, harmlessly: without the lock no renewal, listing or break counts it, and the
# slot's next acquire overwrites it. Answers whether the row was still the lease's.
_ADVISORY_UNLOCK_AFTER = """
SELECT (SELECT bool_or(pg_advisory_unlock(%(lock)s)) FROM pg_locks AS h
        WHERE h.locktype = 'advisory' AND h.granted AND h.objsubid = 1
          AND h.pid = pg_backend_pid()
          AND h.classid = ((%(lock)s::int8 >> 32) & 4294967295)::oid
          AND h.objid = (%(lock)s::int8 & 4294967295)::oid),
       EXISTS (SELECT FROM {t} WHERE digest = sha256(%(name)s) AND slot = %(slot)s
               AND lease_id = %(lease_id)s AND pid = pg_backend_pid()),
       (SELECT pg_notify(%(channel)s, %(key)s) FROM {t} AS c
        WHERE c.digest = sha256(%(name)s) AND c.slot = -1 AND c.wanted)
"""

# Checked in ONE statement for the whole batch, from any connection: a lease lives while its
# row is still its own and its backend still holds the advisory lock.
_ADVISORY_RENEW = """
WITH {held_locks}
SELECT CASE WHEN l.lease_id IS NULL OR l.lease_id = '' THEN 'broken'
            WHEN l.lease_id <> w.lease_id THEN 'taken'
            WHEN (l.pid, l.key) NOT IN (SELECT h.pid, h.key FROM held AS h) THEN 'expired'
            ELSE '' END
FROM unnest(%(names)s::bytea[], %(slots)s::int4[], %(ids)s::text[])
    WITH ORDINALITY AS w (name, slot, lease_id, i)
LEFT JOIN {t} AS l ON l.digest = sha256(w.name) AND l.slot = w.slot
ORDER BY w.i
"""

# Break, ONE statement: mark the live leases broken and move their slots to a new generation
# (a new key: the broken holders' sessions keep the old one until they release), and wake the
# waiters. No session is ended: it holds other leases too.
_ADVISORY_BREAK = """
WITH live AS (
    SELECT slot, lease_id FROM {t} AS l
    WHERE digest = sha256(%(name)s) AND slot >= 0 AND lease_id <> '' AND {held}
), marked AS (
    UPDATE {t} AS l SET lease_id = '', counter = l.counter + 1, used_at = now() FROM live
    WHERE l.digest = sha256(%(name)s) AND l.slot = live.slot AND l.lease_id = live.lease_id
    RETURNING l.slot
)
SELECT pg_notify(%(channel)s, %(key)s) FROM marked
"""

_ADVISORY_LIST = """
WITH {held_locks}
SELECT name, slot, holder, token FROM {t} AS l
WHERE slot >= 0 AND lease_id <> '' AND substring(name FROM 1 FOR %(length)s) = %(prefix)s
  AND ((l.pid, l.key) IN (SELECT h.pid, h.key FROM held AS h)) IS TRUE  -- hashed, not a join
ORDER BY name, slot
"""

# A row idle for %(idle)s seconds: a slot neither held (released, broken, or its session gone:
# `held` is pg_locks, read once) nor granted, released or broken since; the counter row (-1)
# by itself (its slots decide).
_ADVISORY_IDLE_ROW = (f"(({{r}}.slot < 0 OR {{r}}.lease_id = '' OR ({{r}}.pid, {{r}}.key) NOT IN "
                      f"(SELECT h.pid, h.key FROM held AS h)) AND coalesce({{r}}.used_at, "
                      f"'-infinity') <= {_CUTOFF})")

# Forget the idle names, as _table_sql._FORGET does: a name's rows go when every one of them is
# idle; the counter row is kept instead when it keeps a record, its counter raised to the clock
# (as a new row would start) and marked forgotten (used_at '-infinity', cleared by a grant),
# so that it is not counted again. A slot's generation
# goes with its row (its key restarts at generation 0): a broken holder that still holds the
# key of an earlier generation 0 keeps the name from being taken until it releases, and its
# renewal finds the row gone (broken), so no two hold it.
_ADVISORY_FORGET = f"""
WITH {{held_locks}}, candidate AS (
    SELECT DISTINCT l.digest FROM {{t}} AS l
    WHERE l.ctid >= %(low)s::tid AND l.ctid < %(high)s::tid
      AND {_ADVISORY_IDLE_ROW.format(r="l")}
      AND (l.slot >= 0 OR l.record IS NULL OR l.used_at IS DISTINCT FROM '-infinity')
), quiet AS MATERIALIZED (
    SELECT c.digest FROM candidate AS c
    WHERE NOT EXISTS (SELECT FROM {{t}} AS o
                      WHERE o.digest = c.digest AND NOT {_ADVISORY_IDLE_ROW.format(r="o")})
), idle AS MATERIALIZED (
    SELECT q.digest FROM quiet AS q
    WHERE CASE WHEN %(apply)s THEN {_MAY_FORGET.format(digest="q.digest")} ELSE true END
    LIMIT %(most)s
), gone AS (
    DELETE FROM {{t}} AS l USING idle
    WHERE %(apply)s AND l.digest = idle.digest AND l.record IS NULL
      AND {_ADVISORY_IDLE_ROW.format(r="l")}
    RETURNING l.digest
), kept AS (
    UPDATE {{t}} AS l SET counter = greatest(l.counter, {_CLOCK}), wanted = false,
        used_at = '-infinity'
    FROM idle
    WHERE %(apply)s AND l.digest = idle.digest AND l.slot = -1 AND l.record IS NOT NULL
      AND l.used_at IS DISTINCT FROM '-infinity'
    RETURNING l.digest
)
SELECT (SELECT count(*) FROM idle WHERE NOT %(apply)s
            OR idle.digest IN (SELECT digest FROM gone UNION SELECT digest FROM kept)),
       (SELECT count(*) FROM idle),
       pg_relation_size(%(regclass)s::regclass) / current_setting('block_size')::int8
"""

_ADVISORY_SHAPE = (*_COMMON_SHAPE, ("pid", "integer"), ("key", "bigint"))

_ADVISORY_WRITE_RECORD = """
UPDATE {t} AS z SET record = %(record)s
WHERE z.digest = sha256(%(name)s) AND z.slot = -1 AND EXISTS (
    SELECT FROM {t} AS l WHERE l.digest = sha256(%(name)s) AND l.slot = %(slot)s
      AND l.lease_id = %(lease_id)s AND {held})
RETURNING true
"""


def _advisory_keys(namespace: bytes, name: str, limit: int) -> list[int]:
    """The advisory lock keys of slots 0..limit-1 of `name`: 8 bytes of blake2b as a signed
    int64, keyed by the schema-qualified table (two lock tables never share a key) and salted
    by the slot (distinct for every (name, slot), whatever bytes the name holds).

    Example:
        >>> len(_advisory_keys(b"public.tenure_advisory", "jobs", 3))
        3
    """
    encoded = name.encode()
    return [int.from_bytes(hashlib.blake2b(encoded, digest_size=8, key=namespace,
                                           salt=slot.to_bytes(16, "big")).digest(),
                           "big", signed=True)
            for slot in range(limit)]
