"""The statements of table mode (`mode=table`, the default), as text: {t} is the lease table
(schema-qualified, quoted), the other fields are filled in once per store by _statements.render.

Example:
    >>> "ON CONFLICT" in _ACQUIRE_LOCK
    True
"""

from __future__ import annotations

# Registrations per lock name at most (see _ENQUEUE).
_MOST_WAITERS = 32

# {t} is the lease table (schema-qualified, quoted). Slot 0's row of a name also keeps the
# name's fencing counter and whether someone waits for the name. A released slot is marked
# free; the rows of a name free for `retain` are deleted (see _FORGET), at its release with
# retain=0 (_RELEASE_FORGET).

# A table of an earlier version gains the columns added since (run where the tables are
# created: a statement that meets the missing column fails, and the store upgrades the table).
_UPGRADE = "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS freed_at timestamptz"

_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    name       bytea       NOT NULL,  -- the lock name in UTF-8 (text cannot hold NUL)
    digest     bytea       NOT NULL GENERATED ALWAYS AS (sha256(name)) STORED,  -- the key
    slot       integer     NOT NULL,
    holder     bytea       NOT NULL,
    lease_id   text        NOT NULL,  -- '' once released or broken
    token      bigint      NOT NULL,  -- the token of the slot's last grant
    counter    bigint      NOT NULL,  -- slot 0: the name's fencing counter (else unused)
    expires_at timestamptz NOT NULL,  -- by the server's clock; '-infinity' once freed
    wanted     boolean     NOT NULL,  -- slot 0: someone found the name held since its last grant
    record     bytea,                 -- slot 0: the name's record (write_record), UTF-8
    -- slot 0 of a lock: waiters registered for a hand-over, in order (see _ENQUEUE)
    q_ids      text[],                -- their lease ids
    q_holders  bytea[],
    q_ttls     float8[],
    q_until    timestamptz[],         -- when each registration ends (server clock)
    freed_at   timestamptz,           -- when a release or break last freed the slot
    PRIMARY KEY (digest, slot)
) WITH (fillfactor = 50)  -- room for HOT updates: a cycle rewrites no index entry
"""

# Rows are keyed by a digest of the name (sha256, a column the server computes), never by the
# name itself: a btree entry holds at most about 2,700 bytes, and a name of 1,024 characters
# takes up to 4,096 in UTF-8. The name stays in a column of its own, unindexed, for listings.
#
# A table that an earlier version created is keyed by (name, slot): the first statement that
# meets it fails on the missing column, and the store re-keys it in place (_MIGRATE, in the
# create-tables path). The first of several processes doing so at once takes the table's lock
# and migrates; the others wait for it, then find the column and leave. Live leases keep their
# rows, counters and tokens. Only a table of tenure's earlier shape is altered: its columns
# ({shape}: name and type of each) all there and its primary key (name, slot); any other table
# (table= naming someone else's) is refused untouched, before it is even locked (42809).
_MIGRATE = """
DO $tenure$
BEGIN
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = {regclass}::regclass
               AND attname = 'digest' AND NOT attisdropped) THEN
        RETURN;
    END IF;
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = {regclass}::regclass
        AND attnum > 0 AND NOT attisdropped
        AND (attname::text, format_type(atttypid, NULL)) IN ({shape})) <> {columns}
       OR (SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
           FROM pg_index AS i JOIN pg_attribute AS a
             ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
           WHERE i.indrelid = {regclass}::regclass AND i.indisprimary)
          IS DISTINCT FROM ARRAY['name', 'slot'] THEN
        IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = {regclass}::regclass
                   AND attname = 'digest' AND NOT attisdropped) THEN
            RETURN;  -- another process migrated it since the first look (its primary key
        END IF;      -- is (digest, slot) now)
        RAISE EXCEPTION 'tenure: not a lease table of tenure' USING ERRCODE = 'wrong_object_type';
    END IF;
    LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = {regclass}::regclass
               AND attname = 'digest' AND NOT attisdropped) THEN
        RETURN;  -- another process migrated it while we waited for the lock
    END IF;
    ALTER TABLE {t} ADD COLUMN digest bytea NOT NULL GENERATED ALWAYS AS (sha256(name)) STORED;
    EXECUTE (SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', {regclass}, conname)
             FROM pg_constraint WHERE conrelid = {regclass}::regclass AND contype = 'p');
    ALTER TABLE {t} ADD PRIMARY KEY (digest, slot);
END
$tenure$
"""
# The columns (name, type) a table of an earlier version has, whose shape _MIGRATE checks.
_COMMON_SHAPE = (("name", "bytea"), ("slot", "integer"), ("holder", "bytea"),
                 ("lease_id", "text"), ("token", "bigint"), ("counter", "bigint"),
                 ("wanted", "boolean"))
_TABLE_SHAPE = (*_COMMON_SHAPE, ("expires_at", "timestamp with time zone"))

# A missing counter starts at the server's clock in microseconds, so tokens keep growing even
# when the table was dropped, the database restored from an old backup, or the name's rows
# forgotten (retain, prune: see _FORGET). The clock is read when the row is written
# (clock_timestamp(), not the transaction's start, now()), under a shared transaction lock of
# the name that every forgetting statement tries to take exclusively (pg_try_, skipping the
# name when it cannot): an INSERT computes its VALUES before it looks for the conflicting row,
# so without the lock a grant whose statement stalled there could miss a row deleted meanwhile
# and restart below the tokens granted in between. With the lock, a forgetting either waits
# for no one and commits before the clock is read, or skips the name. A row that is kept
# counts on (counter + 1): it started at the clock and grows by one per grant, far slower
# than the clock's microseconds, so a restart from the clock is still above it.
_FORGET_CLASS = 0x74656E66  # "tenf": the class of the names' forgetting locks
_NAME_KEY = "('x' || encode(substring({digest} FROM 1 FOR 4), 'hex'))::bit(32)::int4"
_CLOCK = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
_SEED = (f"(CASE WHEN pg_advisory_xact_lock_shared({_FORGET_CLASS}, "
         f"{_NAME_KEY.format(digest='sha256(%(name)s)')})::text IS NOT NULL THEN {_CLOCK} END)")
# The exclusive try of a forgetting statement, for the name of the digest `{digest}`.
_MAY_FORGET = f"pg_try_advisory_xact_lock({_FORGET_CLASS}, {_NAME_KEY})"
# The slot is free for this acquire: expired or released, or already granted to this very
# lease id (an acquire retried after its connection broke; the first try may have committed).
_FREE = "(l.expires_at <= now() OR l.lease_id = excluded.lease_id)"
_MINE = "(l.expires_at <= now() OR l.lease_id = %(lease_id)s)"  # the same, in an UPDATE

# Why tokens grow in grant order, across slots and releases, under READ COMMITTED: every grant
# of a name updates the name's slot-0 row (its counter), and that row stays locked until the
# statement commits. A concurrent grant of the name blocks on the row until then, and
# INSERT .. ON CONFLICT DO UPDATE then locks and updates the latest committed version of the
# row (not the one in its snapshot): it reads our counter and adds 1. Grants of a name are thus
# serialized by its slot-0 row, and commit order is token order. The conflict's WHERE is judged
# on that latest version too, so a slot granted meanwhile is never granted twice.
#
# Release notifies only when `wanted` says that someone found the name held since its last
# grant (a failed acquire sets it, a grant clears it): an uncontended cycle sends no NOTIFY,
# whose commit takes a lock that every notifying transaction of the cluster queues on.

# The upsert of a lock's slot-0 row that grants the lease when the slot is free ({free}): the
# head of _ACQUIRE_LOCK and _ENQUEUE, which add what a held slot gets.
_GRANT_WHEN_FREE = """
INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
SELECT %(name)s, 0, %(holder)s, %(lease_id)s, s.seed, s.seed,
       now() + %(ttl)s * interval '1 second', false
FROM (SELECT {seed} AS seed) AS s  -- read once: a new row's token is its counter
ON CONFLICT (digest, slot) DO UPDATE SET
    holder = CASE WHEN {free} THEN excluded.holder ELSE l.holder END,
    lease_id = CASE WHEN {free} THEN excluded.lease_id ELSE l.lease_id END,
    token = CASE WHEN {free} THEN l.counter + 1 ELSE l.token END,
    counter = CASE WHEN {free} THEN l.counter + 1 ELSE l.counter END,
    expires_at = CASE WHEN {free} THEN excluded.expires_at ELSE l.expires_at END,
"""

# A lock (limit 1), ONE statement on ONE row (slot 0, counter and lease together): grant when
# free; else mark the name wanted (once). Answers (granted, token), or nothing.
_ACQUIRE_LOCK = _GRANT_WHEN_FREE + """    wanted = NOT {free}
WHERE {free} OR NOT l.wanted
RETURNING l.lease_id = %(lease_id)s, l.token
"""

# Locks on several names (store.lock_all), ONE statement: when its snapshot finds every name's
# slot 0 free (no row, or expired, released, or this very request's), upsert them all, in the
# names' order (two such statements lock their rows in one order: no deadlock). A name taken
# meanwhile fails its conflict WHERE (judged on the latest version, as for _ACQUIRE_LOCK) and
# is not answered: the store then frees the others. A name held in the snapshot: nothing is
# written, nothing answers (the names one by one then mark it wanted). Answers (lease id,
# token) per name granted.
_ACQUIRE_ALL = """
WITH w AS (  -- the names in hex: an array literal of them needs no escaping
    SELECT decode(w.hex, 'hex') AS name, w.lease_id
    FROM unnest(%(names)s::text[], %(lease_ids)s::text[]) AS w(hex, lease_id)
), held AS (  -- a lookup of each name's row by the primary key
    SELECT FROM w WHERE EXISTS (
        SELECT FROM {t} AS l WHERE l.digest = sha256(w.name) AND l.slot = 0
        AND l.expires_at > now() AND l.lease_id <> w.lease_id)
)
INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
SELECT w.name, 0, %(holder)s, w.lease_id, w.seed, w.seed,
       now() + %(ttl)s * interval '1 second', false
FROM (SELECT w.name, w.lease_id, {seed_of_w} AS seed FROM w  -- read once per name
      WHERE NOT EXISTS (SELECT FROM held) ORDER BY w.name) AS w
ON CONFLICT (digest, slot) DO UPDATE SET
    holder = excluded.holder, lease_id = excluded.lease_id, token = l.counter + 1,
    counter = l.counter + 1, expires_at = excluded.expires_at, wanted = false
WHERE {free}
RETURNING l.lease_id, l.token
"""

# A semaphore (limit > 1), also ONE statement: pick the lowest free or expired slot among
# 0..limit-1 in the statement's snapshot, then either take slot 0 (counter and lease in one
# row, as for a lock) or bump the counter on slot 0's row (creating it as a free row when
# missing) and take the other slot; the counter row is always locked first. Two acquirers may
# pick the same slot at once: the loser's conflict WHERE fails, nothing is granted (its counter
# bump leaves a gap, harmless) and the last SELECT says -1, so the store tries again while
# another slot may be free. No free slot: slot 0's row is marked wanted, and nothing answers.
_ACQUIRE_SLOT = """
WITH free AS (
    SELECT s.slot FROM generate_series(0, %(limit)s - 1) AS s (slot)
    LEFT JOIN {t} AS l ON l.digest = sha256(%(name)s) AND l.slot = s.slot
    WHERE l.slot IS NULL OR l.expires_at <= now() OR l.lease_id = %(lease_id)s
    ORDER BY coalesce(l.lease_id = %(lease_id)s, false) DESC, s.slot LIMIT 1
), zero AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, 0, %(holder)s, %(lease_id)s, s.seed, s.seed,
           now() + %(ttl)s * interval '1 second', false
    FROM free, (SELECT {seed} AS seed) AS s WHERE free.slot = 0
    ON CONFLICT (digest, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = l.counter + 1,
        counter = l.counter + 1, expires_at = excluded.expires_at, wanted = false
    WHERE {free}
    RETURNING l.slot, l.token
), counter AS (
    INSERT INTO {t} AS c (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, 0, '', '', 0, {seed}, '-infinity', false FROM free WHERE free.slot > 0
    ON CONFLICT (digest, slot) DO UPDATE SET counter = c.counter + 1, wanted = false
    RETURNING c.counter
), other AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, free.slot, %(holder)s, %(lease_id)s, counter.counter, 0,
           now() + %(ttl)s * interval '1 second', false
    FROM free, counter
    ON CONFLICT (digest, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = excluded.token,
        expires_at = excluded.expires_at
    WHERE {free}
    RETURNING l.slot, l.token
), mark AS (
    UPDATE {t} SET wanted = true
    WHERE digest = sha256(%(name)s) AND slot = 0 AND NOT wanted
      AND NOT EXISTS (SELECT FROM free)
)
SELECT slot, token FROM zero
UNION ALL SELECT slot, token FROM other
UNION ALL SELECT -1, 0 FROM free
    WHERE NOT EXISTS (SELECT FROM zero) AND NOT EXISTS (SELECT FROM other)
"""

# ONE statement for the whole batch; a lost lease's reason comes from the row as the statement
# found it (its snapshot): gone or freed -> broken, another lease id -> taken, else expired.
_RENEW = """
WITH batch AS (
    SELECT * FROM unnest(%(names)s::bytea[], %(slots)s::int4[], %(ids)s::text[])
        WITH ORDINALITY AS w (name, slot, lease_id, i)
), renewed AS (
    UPDATE {t} AS l SET expires_at = now() + %(ttl)s * interval '1 second'
    FROM batch AS w
    WHERE l.digest = sha256(w.name) AND l.slot = w.slot AND l.lease_id = w.lease_id
      AND l.expires_at > now()
    RETURNING w.i
)
SELECT CASE WHEN r.i IS NOT NULL THEN ''
            WHEN l.lease_id IS NULL OR l.lease_id = '' THEN 'broken'
            WHEN l.lease_id <> w.lease_id THEN 'taken'
            ELSE 'expired' END
FROM batch AS w
LEFT JOIN renewed AS r ON r.i = w.i
LEFT JOIN {t} AS l ON l.digest = sha256(w.name) AND l.slot = w.slot
ORDER BY w.i
"""

# -- hand-over ---------------------------------------------------------------------------------
# A waiter for a lock registers in slot 0's row (wait_and_acquire: _ENQUEUE) for as long as its
# acquire waits, at most _HANDOVER_SHARE of the ttl: one place in the queue across its tries.
# The release grants the lease to the first registration still valid (its time not over, its
# listener's session alive) in the same statement: lease id, holder, token = counter + 1 and
# expiry from the registration, under the same row lock as every grant. The NOTIFY carries the
# grant ("key lease_id token") on the waiter's store's own channel (_HANDOVER_CHANNEL + the
# first 12 characters of the lease id, its store's prefix), so only that listener wakes and
# the waiter takes the lease without a further round trip. The waiter's try after a wait that
# was not handed the lease is an acquire by the registration's lease id (_ACQUIRE_QUEUED): a
# lease handed over meanwhile is "already ours", and a registration whose time is up leaves.
# A wait interrupted while registered withdraws the registration and frees what it was handed
# (_WITHDRAW, then _HAND_OVER by its lease id), in the background.

_HANDOVER_CHANNEL = "tenure.w."
_QUEUE = ("q_ids", "q_holders", "q_ttls", "q_until")
# A waiter's store is alive while its listener's session holds the advisory lock (this class
# id, the first 32 bits of its lease id prefix): a release skips registrations whose lock it
# can take, so a waiter that died does not receive the lease (and hold it until it expires).
_ALIVE_CLASS = 0x74656E75  # "tenu"
_ALIVE = f"NOT pg_try_advisory_xact_lock({_ALIVE_CLASS}, ('x' || left({{id}}, 8))::bit(32)::int4)"

# A registration, ONE statement like _ACQUIRE_LOCK: grant when free; else append the waiter to
# the queue (at most {most} registrations); nothing answers when the queue is full.
_ENQUEUE = _GRANT_WHEN_FREE + """    wanted = l.wanted AND NOT {free},
    q_ids = CASE WHEN {free} THEN l.q_ids ELSE l.q_ids || excluded.lease_id END,
    q_holders = CASE WHEN {free} THEN l.q_holders ELSE l.q_holders || excluded.holder END,
    q_ttls = CASE WHEN {free} THEN l.q_ttls ELSE l.q_ttls || %(ttl)s END,
    q_until = CASE WHEN {free} THEN l.q_until
                   ELSE l.q_until || (now() + %(wait)s * interval '1 second') END
WHERE {free} OR coalesce(cardinality(l.q_ids), 0) < {most}
RETURNING l.lease_id = %(lease_id)s, l.token
"""

# try_acquire with the lease id of a registration whose wait ended: _ACQUIRE_LOCK's grant (free,
# or already ours: handed over), which also withdraws the registration. Not granted, the
# registration keeps its place for the caller's next wait unless `leave` (its time is up), and
# nothing is written: a waiter's look at the name does not contend for its row.
_ACQUIRE_QUEUED = """
UPDATE {t} AS l SET
    holder = CASE WHEN {mine} THEN %(holder)s ELSE l.holder END,
    lease_id = CASE WHEN {mine} THEN %(lease_id)s ELSE l.lease_id END,
    token = CASE WHEN {mine} THEN l.counter + 1 ELSE l.token END,
    counter = CASE WHEN {mine} THEN l.counter + 1 ELSE l.counter END,
    expires_at = CASE WHEN {mine} THEN now() + %(ttl)s * interval '1 second'
                      ELSE l.expires_at END,
    wanted = NOT {mine},
    {withdraw}
WHERE l.digest = sha256(%(name)s) AND l.slot = 0 AND ({mine} OR %(leave)s)
RETURNING l.lease_id = %(lease_id)s, l.token
"""

# The undo of an interrupted registered wait, before _HAND_OVER by its lease id: leave the queue.
_WITHDRAW = """
UPDATE {t} AS l SET
    {withdraw}
WHERE l.digest = sha256(%(name)s) AND l.slot = 0
  AND array_position(l.q_ids, %(lease_id)s) IS NOT NULL
"""

# What a release writes into a row it frees or hands over, and whom it notifies (the name's key
# in %(key)s): shared by the release of one lease and of a set.
_HANDING_OVER = """    lease_id = CASE WHEN {head} THEN l.q_ids[1] ELSE '' END,
    holder = CASE WHEN {head} THEN l.q_holders[1] ELSE l.holder END,
    token = CASE WHEN {head} THEN l.counter + 1 ELSE l.token END,
    counter = CASE WHEN {head} THEN l.counter + 1 ELSE l.counter END,
    expires_at = CASE WHEN {head} THEN now() + l.q_ttls[1] * interval '1 second'
                      ELSE '-infinity' END,
    freed_at = now(),
    {pop}
"""
_NOTIFY_HANDED = """CASE
    WHEN l.lease_id <> '' THEN pg_notify('{handover}' || left(l.lease_id, 12),
                                         %(key)s || ' ' || l.lease_id || ' ' || l.token)
    WHEN l.wanted OR l.q_ids IS NOT NULL THEN pg_notify(%(channel)s, %(key)s)
    WHEN l.slot > 0 AND (SELECT z.wanted FROM {t} AS z WHERE z.digest = l.digest AND z.slot = 0)
        THEN pg_notify(%(channel)s, %(key)s)
END
"""

# Release: when the lease id matches, hand the lease over to the first registration when it is
# valid (its slice not over, its store alive), else free the row (an unusable first
# registration is dropped). Notifies the waiter on its store's hand-over channel, or the
# listeners when someone waits: `wanted`, registrations left, or (a semaphore's slot) slot 0's
# `wanted` (delivered at commit). Nothing answers when the lease is not ours. Without
# registrations it costs the server ~3 µs more than a plain UPDATE (pg_stat_statements here:
# 26 vs 23 µs), the same cycles per second; the plain one, which refused when waiters were
# registered, cost a single waiter's hand-off a second round trip.
_HAND_OVER = ("""
UPDATE {t} AS l SET
""" + _HANDING_OVER
              + """WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
  AND expires_at > now()
RETURNING """ + _NOTIFY_HANDED)

# The release of several leases (a lease set's), ONE statement: _HAND_OVER on each row whose
# lease id still matches, each handed to its first valid registration or freed, each waiter
# notified as _HAND_OVER does. The rows are locked in the names' order, as _ACQUIRE_ALL locks
# them (an UPDATE .. FROM alone locks them in the plan's order: it could deadlock with a
# lock_all). Answers the position (from 1) of each lease freed.
_HAND_OVER_ALL = """
WITH g AS (  -- the names in hex, as in _ACQUIRE_ALL
    SELECT decode(g.hex, 'hex') AS name, g.slot, g.lease_id, g.key, g.n
    FROM unnest(%(names)s::text[], %(slots)s::int4[], %(lease_ids)s::text[], %(keys)s::text[])
        WITH ORDINALITY AS g(hex, slot, lease_id, key, n)
), mine AS (
    SELECT l.digest, l.slot, g.key, g.n
    FROM g JOIN {t} AS l ON l.digest = sha256(g.name) AND l.slot = g.slot
    WHERE l.lease_id = g.lease_id AND l.expires_at > now()
    ORDER BY g.name, g.slot
    FOR UPDATE OF l
)
UPDATE {t} AS l SET
""" + _HANDING_OVER + """FROM mine
WHERE l.digest = mine.digest AND l.slot = mine.slot
RETURNING mine.n, """ + _NOTIFY_HANDED.replace("%(key)s", "mine.key")

# Release with retain=0: the lease's row goes, when no waiter is registered, no record is kept
# in it and no grant of the name is under way (_MAY_FORGET); else nothing answers, and
# _HAND_OVER frees the row as a release does (a later sweep forgets it). Notifies as
# _HAND_OVER does when it frees the row.
_RELEASE_FORGET = f"""
DELETE FROM {{t}} AS l
WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
  AND expires_at > now() AND l.q_ids IS NULL AND l.record IS NULL
  AND CASE WHEN l.lease_id = %(lease_id)s THEN {_MAY_FORGET.format(digest="l.digest")} END
RETURNING CASE
    WHEN l.wanted THEN pg_notify(%(channel)s, %(key)s)
    WHEN l.slot > 0 AND (SELECT z.wanted FROM {{t}} AS z WHERE z.digest = l.digest AND z.slot = 0)
        THEN pg_notify(%(channel)s, %(key)s)
END
"""

# A row free for %(idle)s seconds (released, broken or expired then) with no registered waiter.
_CUTOFF = "(now() - %(idle)s::float8 * interval '1 second')"
_IDLE_ROW = (f"({{r}}.expires_at <= {_CUTOFF} AND coalesce({{r}}.freed_at, '-infinity') <= "
             f"{_CUTOFF} AND NOT coalesce(now() < ANY({{r}}.q_until), false))")

# Forget the names every row of which is idle (_IDLE_ROW): delete their rows, except slot 0's
# when it keeps a record, which is reset instead to a row that holds nothing, with its counter
# raised to the clock (as a new row would start), and is not counted again (_FORGOTTEN). Only
# the names whose forgetting lock it gets (_MAY_FORGET): a name being granted is skipped.
# With %(apply)s false (a dry run) it only counts them. It looks at the rows of a range of the
# table's pages (a TID range scan: a bounded read without an index, which would cost every
# cycle its HOT update) and forgets at most %(most)s names (each holds a lock until the commit,
# in the server's shared lock table): a sweep or a prune runs it range after range, again on a
# range while it finds that many. A row granted meanwhile is looked at again by the DELETE as
# the grant left it (READ COMMITTED) and stays. Answers how many names it forgot, how many it
# found idle, and the table's size in pages.
_FORGOTTEN = "(l.freed_at IS NULL AND l.lease_id = '' AND l.token = 0)"
_FORGET = f"""
WITH candidate AS (
    SELECT DISTINCT l.digest FROM {{t}} AS l
    WHERE l.ctid >= %(low)s::tid AND l.ctid < %(high)s::tid AND {_IDLE_ROW.format(r="l")}
      AND (l.record IS NULL OR NOT {_FORGOTTEN})
), quiet AS MATERIALIZED (
    SELECT c.digest FROM candidate AS c
    WHERE NOT EXISTS (SELECT FROM {{t}} AS o
                      WHERE o.digest = c.digest AND NOT {_IDLE_ROW.format(r="o")})
), idle AS MATERIALIZED (
    SELECT q.digest FROM quiet AS q
    WHERE CASE WHEN %(apply)s THEN {_MAY_FORGET.format(digest="q.digest")} ELSE true END
    LIMIT %(most)s
), gone AS (
    DELETE FROM {{t}} AS l USING idle
    WHERE %(apply)s AND l.digest = idle.digest AND l.record IS NULL AND {_IDLE_ROW.format(r="l")}
    RETURNING l.digest
), kept AS (
    UPDATE {{t}} AS l SET holder = '', lease_id = '', token = 0, wanted = false,
        counter = greatest(l.counter, {_CLOCK}), expires_at = '-infinity', freed_at = NULL,
        q_ids = NULL, q_holders = NULL, q_ttls = NULL, q_until = NULL
    FROM idle
    WHERE %(apply)s AND l.digest = idle.digest AND l.record IS NOT NULL AND NOT {_FORGOTTEN}
      AND {_IDLE_ROW.format(r="l")}
    RETURNING l.digest
)
SELECT (SELECT count(*) FROM idle WHERE NOT %(apply)s
            OR idle.digest IN (SELECT digest FROM gone UNION SELECT digest FROM kept)),
       (SELECT count(*) FROM idle),
       pg_relation_size(%(regclass)s::regclass) / current_setting('block_size')::int8
"""

# Break frees every live slot of the name and always notifies.
_BREAK = """
WITH freed AS (
    UPDATE {t} SET lease_id = '', expires_at = '-infinity', freed_at = now()
    WHERE digest = sha256(%(name)s) AND expires_at > now()
    RETURNING slot
)
SELECT pg_notify(%(channel)s, %(key)s) FROM freed
"""

# The undo of an acquire whose answer was never read (see _undo): which of the backends that
# ran its requests are still there; and, for a semaphore, free every slot its lease id holds
# (for a lock, _HAND_OVER frees slot 0 as a release does).
_RUNNING = "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%(pids)s::int4[])"
_UNDO_SLOTS = """
UPDATE {t} AS l SET lease_id = '', expires_at = '-infinity', freed_at = now()
WHERE digest = sha256(%(name)s) AND lease_id = %(lease_id)s AND expires_at > now()
RETURNING CASE WHEN (SELECT z.wanted FROM {t} AS z WHERE z.digest = l.digest AND z.slot = 0)
    THEN pg_notify(%(channel)s, %(key)s) END
"""

_LIST = """
SELECT name, slot, holder, token, extract(epoch FROM expires_at - now())::float8 FROM {t}
WHERE expires_at > now()
  AND substring(name FROM 1 FOR %(length)s) = %(prefix)s
ORDER BY name, slot
"""


# Records (write_record) live in the row that keeps the name's counter (slot 0; slot -1 in
# advisory mode), never deleted. A write takes effect only while the writer's lease is live:
# judged on the locked row itself for a lock, so a takeover that commits first wins.
_WRITE_RECORD = """
UPDATE {t} AS z SET record = %(record)s
WHERE z.digest = sha256(%(name)s) AND z.slot = 0 AND CASE
    WHEN %(slot)s = 0 THEN z.lease_id = %(lease_id)s AND z.expires_at > now()
    ELSE EXISTS (SELECT FROM {t} AS l WHERE l.digest = sha256(%(name)s) AND l.slot = %(slot)s
                 AND l.lease_id = %(lease_id)s AND l.expires_at > now()) END
RETURNING true
"""
_READ_RECORD = "SELECT record FROM {t} WHERE digest = sha256(%(name)s) AND slot = %(slot)s"
_RECORDS = """
SELECT name, record FROM {t}
WHERE slot = %(slot)s AND record IS NOT NULL
  AND substring(name FROM 1 FOR %(length)s) = %(prefix)s
ORDER BY name
"""
