# GENERATED from src/tenure/_async/stores/postgres.py by scripts/unasync.py: do not edit.
"""`postgresql://USER@HOST:PORT/DB`: leases in a table of a PostgreSQL database (psycopg 3).

One row per (name, slot) in the table `tenure_leases` of the schema `public` (or `?table=`,
`?schema=`), created on first use; slot 0's row also keeps the name's fencing counter. Expiry
is decided by the database server's clock (`now()`), never the client's. Acquire, renew (a
whole batch), release and break are each ONE autocommit statement, so a lock cycle costs two
round trips; release notifies waiters through LISTEN/NOTIFY in the same statement, or hands a
lock's lease to a waiter registered for it, which then holds it without another round trip. Nothing
depends on session state, so the store also works through PgBouncer in transaction pooling
mode (`?pgbouncer=true`: waiters then poll instead of listening). `?mode=advisory` keeps each
lease as a session advisory lock instead, held by one of the pool's connections (many leases
share one; freed when that connection ends), with the same fencing counter.

Example::

    store = tenure.connect("postgresql://app@db.internal/app?schema=locks")
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import itertools
import logging
import math
import os
import re
import secrets
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

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
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import redact

try:
    import psycopg
    from psycopg import errors, generators, sql
    from psycopg.abc import PQGen
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import ConnStatus, ExecStatus, TransactionStatus
    from psycopg.pq.abc import PGresult
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra(
        "the postgresql:// store needs psycopg 3: install tenure[postgres] "
        "(pip install 'tenure[postgres]')"
    ) from exc

log = logging.getLogger("tenure")

Connection = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]
RV = TypeVar("RV")

OPTIONS = ("schema", "table", "timeout", "pool_size", "notify", "pgbouncer",
           "prepare_threshold", "mode")
MODES = ("table", "advisory")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How often the sync listener thread looks at the store's closed flag between notifications.
_LISTEN_TICK = 1.0
# After the listener connection failed, waiters poll for this long before it is tried again.
_LISTEN_RETRY = 1.0
# Two acquirers of a semaphore may pick the same free slot; the loser tries again this often.
_SLOT_RETRIES = 4
# Hand-over: registrations per lock name at most; a registration lasts at most this share of
# the ttl (a lease handed over keeps at least 90 % of its ttl, less the usual margin).
_MOST_WAITERS = 32
_HANDOVER_SHARE = 0.1
# A registration with this much time left or less is withdrawn by the try after a wait rather
# than kept for a further wait (its last try starts then), and none is made for less.
_KEEP_AT_LEAST = 0.01
# A registered waiter tries every `timeout` (the core's backoff), doubling up to this (or the
# first `timeout` when longer): a release hands it the lease or wakes it, so the tries only
# find a lease that expired unreleased.
_REGISTERED_POLL = 1.0
# psycopg's own default: how often its wait functions hand control back to a waiting exchange
# with the server when nothing happens (so the client-side bound is checked this often).
_WAIT_INTERVAL = 0.1
# The undo of a cancelled acquire looks this often whether the request's backend is gone.
_UNDO_POLL = 0.01
# Advisory mode: a statement that got no answer within `timeout` on a session holding leases is
# cancelled, and the session kept when it is idle again within this many seconds (at most
# `timeout`); else it is closed, and its leases with it.
_SETTLE = 0.5

# -- the statements ---------------------------------------------------------------------------
# {t} is the lease table (schema-qualified, quoted). Slot 0's row of a name also keeps the
# name's fencing counter and whether someone waits for the name; that row is never deleted (a
# released slot is only marked free).

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
_ADVISORY_SHAPE = (*_COMMON_SHAPE, ("pid", "integer"), ("key", "bigint"))

# A missing counter starts at the server's clock in microseconds, so tokens keep growing even
# when the table was dropped or the database restored from an old backup.
_SEED = "(extract(epoch FROM now()) * 1000000)::bigint"
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
VALUES (%(name)s, 0, %(holder)s, %(lease_id)s, {seed}, {seed},
        now() + %(ttl)s * interval '1 second', false)
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
    SELECT %(name)s, 0, %(holder)s, %(lease_id)s, {seed}, {seed},
           now() + %(ttl)s * interval '1 second', false
    FROM free WHERE free.slot = 0
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

# Release frees the row when the lease id matches and no waiter is registered and, when
# someone waits for the name (slot 0's `wanted`), notifies listeners in the same statement
# (delivered at commit). Nothing answers when the lease is not ours, or waiters are registered:
# then _HAND_OVER runs (a lease that was itself handed over starts there: its name is busy).
_RELEASE = """
UPDATE {t} AS l SET lease_id = '', expires_at = '-infinity'
WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
  AND expires_at > now()
  AND l.q_ids IS NULL
RETURNING CASE
    WHEN l.wanted THEN pg_notify(%(channel)s, %(key)s)
    WHEN l.slot > 0 AND (SELECT z.wanted FROM {t} AS z WHERE z.digest = l.digest AND z.slot = 0)
        THEN pg_notify(%(channel)s, %(key)s)
END
"""

# Release with registrations: hand the lease over to the first one when it is valid (its slice
# not over, its store alive); an unusable first registration is dropped, and the lease freed.
# Notifies the waiter (see above), or the listeners when someone waits: `wanted`, or
# registrations left. A statement of its own: these expressions would cost an uncontended
# release about 8 % of its cycle.
_HAND_OVER = """
UPDATE {t} AS l SET
    lease_id = CASE WHEN {head} THEN l.q_ids[1] ELSE '' END,
    holder = CASE WHEN {head} THEN l.q_holders[1] ELSE l.holder END,
    token = CASE WHEN {head} THEN l.counter + 1 ELSE l.token END,
    counter = CASE WHEN {head} THEN l.counter + 1 ELSE l.counter END,
    expires_at = CASE WHEN {head} THEN now() + l.q_ttls[1] * interval '1 second'
                      ELSE '-infinity' END,
    {pop}
WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
  AND expires_at > now()
RETURNING CASE
    WHEN l.lease_id <> '' THEN pg_notify('{handover}' || left(l.lease_id, 12),
                                         %(key)s || ' ' || l.lease_id || ' ' || l.token)
    WHEN l.wanted OR l.q_ids IS NOT NULL THEN pg_notify(%(channel)s, %(key)s)
    WHEN l.slot > 0 AND (SELECT z.wanted FROM {t} AS z WHERE z.digest = l.digest AND z.slot = 0)
        THEN pg_notify(%(channel)s, %(key)s)
END
"""

# Break frees every live slot of the name and always notifies.
_BREAK = """
WITH freed AS (
    UPDATE {t} SET lease_id = '', expires_at = '-infinity'
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
UPDATE {t} AS l SET lease_id = '', expires_at = '-infinity'
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
_ADVISORY_WRITE_RECORD = """
UPDATE {t} AS z SET record = %(record)s
WHERE z.digest = sha256(%(name)s) AND z.slot = -1 AND EXISTS (
    SELECT FROM {t} AS l WHERE l.digest = sha256(%(name)s) AND l.slot = %(slot)s
      AND l.lease_id = %(lease_id)s AND {held})
RETURNING true
"""
_READ_RECORD = "SELECT record FROM {t} WHERE digest = sha256(%(name)s) AND slot = %(slot)s"
_RECORDS = """
SELECT name, record FROM {t}
WHERE slot = %(slot)s AND record IS NOT NULL
  AND substring(name FROM 1 FOR %(length)s) = %(prefix)s
ORDER BY name
"""

# -- advisory mode (`?mode=advisory`) ---------------------------------------------------------
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
    ON CONFLICT (digest, slot) DO UPDATE SET counter = c.counter + 1, wanted = false
    RETURNING c.counter
), lease AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, pid, key, wanted)
    SELECT %(name)s, got.slot, %(holder)s, %(lease_id)s, counter.counter, got.gen,
           pg_backend_pid(), got.key, false
    FROM got, counter
    ON CONFLICT (digest, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = excluded.token,
        pid = excluded.pid, key = excluded.key
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
# notify when someone waits. Answers whether the row was the lease's.
_ADVISORY_RELEASE = """
WITH freed AS (
    UPDATE {t} SET lease_id = ''
    WHERE digest = sha256(%(name)s) AND slot = %(slot)s AND lease_id = %(lease_id)s
      AND pid = pg_backend_pid()
    RETURNING slot
)
SELECT pg_advisory_unlock(%(lock)s), EXISTS (SELECT FROM freed),
       CASE WHEN EXISTS (SELECT FROM freed) AND (
                SELECT c.wanted FROM {t} AS c
                WHERE c.digest = sha256(%(name)s) AND c.slot = -1)
            THEN pg_notify(%(channel)s, %(key)s) END
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
    UPDATE {t} AS l SET lease_id = '', counter = l.counter + 1 FROM live
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


SCHEMES: tuple[str, ...] = ("postgresql", "postgres")


def from_url(url: str, **options: Any) -> Backend:
    """The store for a `postgresql://` (or `postgres://`) URL, as `tenure.connect` builds
    it: tenure's options from the URL's query or keywords, the rest of the query for libpq.

    Example::

        backend = from_url("postgresql://app@db.internal/app?mode=advisory", timeout=3)
    """
    return PostgresStore(url, **options)


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


def _render(template: str, table: sql.Identifier) -> bytes:
    """The statement with the quoted table name in place, rendered once per store."""
    position = "array_position(l.q_ids, %(lease_id)s)"
    withdraw = ",\n    ".join(
        f"{column} = CASE WHEN {position} IS NULL THEN l.{column} "
        f"WHEN cardinality(l.q_ids) = 1 THEN NULL "
        f"ELSE l.{column}[:{position} - 1] || l.{column}[{position} + 1:] END"
        for column in _QUEUE)
    return sql.SQL(template.strip()).format(
        t=table, seed=sql.SQL(_SEED), free=sql.SQL(_FREE), mine=sql.SQL(_MINE),
        held=sql.SQL(_HELD.format(row="l")), held_locks=sql.SQL(_HELD_LOCKS),
        pop=sql.SQL(",\n    ".join(
            f"{column} = CASE WHEN cardinality(l.q_ids) > 1 THEN l.{column}[2:] END"
            for column in _QUEUE)),
        head=sql.SQL("(l.q_ids IS NOT NULL AND l.q_until[1] > now() AND "
                     + _ALIVE.format(id="l.q_ids[1]") + ")"),
        withdraw=sql.SQL(withdraw), most=sql.SQL(str(_MOST_WAITERS)),
        handover=sql.SQL(_HANDOVER_CHANNEL)).as_bytes(None)


# Parameter types (OIDs) of the statements that libpq runs directly (see _Statement).
_BOOL, _BYTEA, _INT4, _TEXT, _FLOAT8 = 16, 17, 23, 25, 701


class _Statement(NamedTuple):
    """A statement of the hot path (acquire, release), run by libpq itself: psycopg's cursor
    (adapting each parameter, describing and loading each result) costs as much client time as
    the server spends on a lease statement. The parameters are bytes: bytea ones in binary,
    the others as text; the types are fixed here, so nothing is inferred."""

    name: bytes  # of the prepared statement on each connection
    text: bytes  # with $1.. placeholders
    params: tuple[str, ...]  # which parameter is $1, $2, ...
    types: tuple[int, ...]
    formats: tuple[int, ...]  # 1 (binary) for bytea, else 0 (text)


class _Script(NamedTuple):
    """Statements run in one round trip (a simple query, the parameters bound by psycopg on the
    client), each with its own snapshot; the rows of the first answer."""

    text: bytes


def _statement(name: str, template: str, table: sql.Identifier,
               params: Sequence[tuple[str, int]]) -> _Statement:
    text = _render(template, table)
    for number, (param, _) in enumerate(params, 1):
        text = text.replace(f"%({param})s".encode(), f"${number}".encode())
    return _Statement(f"tenure_{name}".encode(), text, tuple(param for param, _ in params),
                      tuple(oid for _, oid in params),
                      tuple(int(oid == _BYTEA) for _, oid in params))


def _encode(value: object) -> bytes:
    """A parameter in the format _Statement says: bytes as they are, the rest as text."""
    return value if isinstance(value, bytes) else str(value).encode()


# -- options ----------------------------------------------------------------------------------


def _as_bool(option: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidArgument(f"{option}={value!r} is not a boolean; use {option}=true or "
                          f"{option}=false")


def _as_number(option: str, value: object, low: float, high: float, hint: str) -> float:
    if isinstance(value, bool):
        raise InvalidArgumentType(f"{option} must be a number of {hint}, got a bool")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgument(f"{option}={value!r} is not a number; give {hint}, e.g. "
                              f"{option}=5") from None
    if not (math.isfinite(number) and low <= number <= high):
        raise InvalidArgument(f"{option}={value!r} is out of range; use {low:g} to {high:g} "
                              f"{hint}")
    return number


def _as_count(option: str, value: object, low: int, high: int) -> int:
    number = _as_number(option, value, low, high, "(a whole number)")
    if number != int(number):
        raise InvalidArgument(f"{option}={value!r} must be a whole number from {low} to {high}")
    return int(number)


def _as_identifier(option: str, value: object, longest: int) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{option} must be a str, got {type(value).__name__}")
    if not _IDENTIFIER.fullmatch(value) or len(value) > longest:
        raise InvalidArgument(
            f"{option}={value!r} is not a usable SQL identifier: use 1 to {longest} ASCII "
            f"letters, digits and underscores, not starting with a digit (e.g. {option}=locks)"
        )
    return value


# A connection refused because the server is full (53300, which a failed connection does not
# carry): "sorry, too many clients already", or only reserved slots left.
_TOO_MANY = ("too many clients", "too many connections", "remaining connection slots")

# A failed connection carries libpq's message, not the server's SQLSTATE: the permanent ones.
_CONNECTION_REFUSALS = (
    ("password authentication failed", "28P01"),
    ("no pg_hba.conf entry", "28000"),
    ("no password supplied", "28P01"),
    ("authentication failed", "28000"),
    ("does not exist", "3D000"),  # a database (a missing role says "role ... does not exist")
    ("permission denied", "42501"),
)


# A connection that libpq, or the server at startup, refuses for a setting of the URL (or of
# libpq's environment: PGSSLMODE, PGOPTIONS, a service file): no retry can change that. Matched
# on libpq's messages (a failed connection carries no SQLSTATE), each with what to fix; checked
# before _CONNECTION_REFUSALS ("root certificate file ... does not exist" names no database).
_LIBPQ_DOCS = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"
_MISCONFIGURATIONS = tuple((re.compile(pattern), fix) for pattern, fix in (
    (r"does not support SSL",
     "the server does not accept SSL connections: enable ssl on the server, or lower sslmode "
     "in the URL (sslmode=prefer or disable) if an unencrypted connection is acceptable"),
    (r"certificate|private key|SSL support is not compiled|sslnegotiation",
     "check the URL's SSL settings (sslmode, sslrootcert, sslcert, sslkey): each file must "
     "exist and be readable, and the server's certificate must match them and the host name"),
    (r"GSSAPI encryption required|channel binding|authentication method requirement",
     "the server cannot meet what the URL requires (gssencmode, channel_binding or "
     "require_auth): change that setting, or the server's pg_hba.conf"),
    (r"unrecognized configuration parameter|invalid value for parameter|"
     r"parameter \S+ cannot be|permission denied to set parameter",
     "the server refused a setting the connection asks for: fix or remove it in the URL's "
     "options parameter (or PGOPTIONS)"),
    (r"unsupported startup parameter",
     "the server or a pooler refuses startup parameters: behind PgBouncer in transaction "
     "pooling mode add pgbouncer=true to the URL"),
    (r'invalid (integer )?"?\w+"? value|invalid port number|could not parse network address|'
     r"invalid connection option|definition of service|service file|weak sslmode",
     f"fix this libpq parameter in the URL (or its PG* environment variable); see {_LIBPQ_DOCS}"),
))


def _misconfiguration(message: str) -> str | None:
    """What to fix when a failed connection's message says a setting is wrong; else None.

    Example:
        >>> _misconfiguration('connection is bad: invalid sslmode value: "bogus"')[:30]
        'fix this libpq parameter in th'
        >>> _misconfiguration("connection failed: Connection refused") is None
        True
    """
    for pattern, fix in _MISCONFIGURATIONS:
        if pattern.search(message):
            return fix
    return None


def _connection_sqlstate(message: str) -> str | None:
    """The SQLSTATE a failed connection's message stands for (None: none, or transient).

    Example:
        >>> _connection_sqlstate('connection failed: FATAL:  database "x" does not exist')
        '3D000'
    """
    if "role " in message and "does not exist" in message:
        return "28000"
    for words, state in _CONNECTION_REFUSALS:
        if words in message:
            return state
    return None


def _channel(schema: str, table: str) -> str:
    """The NOTIFY channel of one lease table: readable when it fits PostgreSQL's 63 bytes."""
    channel = f"tenure.{schema}.{table}"
    return channel if len(channel) <= 63 else f"tenure.{name_digest(channel)}"


def _alive(connection: Connection) -> bool:
    """Whether an idle pooled connection still works, without a round trip: read what the
    server sent unasked (after pg_terminate_backend or a restart: an error, then end of file)."""
    if connection.closed:
        return False
    pgconn = connection.pgconn
    try:
        pgconn.consume_input()  # libpq's socket is non-blocking: never waits
    except psycopg.Error:
        return False
    return bool(pgconn.status == ConnStatus.OK
                and pgconn.transaction_status == TransactionStatus.IDLE)


class _NoAnswer(Exception):
    """The server did not answer within the store's client-side bound (see _Connection)."""


def _bounded(gen: PQGen[RV], seconds: float) -> PQGen[RV]:
    """`gen`, one exchange with the server (a psycopg generator), ending with _NoAnswer once
    it has waited `seconds` for it. psycopg's wait functions resume the generator at least every
    interval, with nothing ready when nothing came, so the bound is checked at least that often.

    Example:
        >>> def exchange():  # waits once to read (psycopg.waiting.Wait.R), then answers
        ...     yield 1
        ...     return "answer"
        >>> gen = _bounded(exchange(), 0.0)
        >>> next(gen)
        1
        >>> try:  # resumed with nothing ready (0), past the bound
        ...     gen.send(0)
        ... except _NoAnswer as exc:
        ...     print(exc)
        no answer from the server within 0 s
    """
    deadline = _shim.monotonic() + seconds
    try:
        wait = next(gen)
        while True:
            ready = yield wait
            if _shim.monotonic() >= deadline:
                raise _NoAnswer(f"no answer from the server within {seconds:g} s")
            wait = gen.send(ready)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]  # what gen returned: an RV


class _Connection(psycopg.Connection[tuple[Any, ...]]):
    """A psycopg connection whose every wait for the server ends after `bound` seconds with
    _NoAnswer (None: unbounded, for the listener's wait for notices).

    Every exchange on an open connection, a cursor's statements included, waits through
    `Connection.wait`, so this is the one place that bounds them all on the client. The server's
    statement_timeout, tcp_user_timeout and keepalives never fire when the path goes silent
    while the peer's kernel still acknowledges (a frozen pooler or proxy, a stalled server).
    Why a wrapped generator and not `wait(timeout=)`: psycopg added that parameter within 3.3,
    and tenure supports 3.2; the wrapper bounds every version's wait functions alike, with the
    same interval psycopg already wakes up at (no extra timer, no thread).
    """

    bound: float | None = None

    def wait(self, gen: PQGen[RV], interval: float = _WAIT_INTERVAL,
                   timeout: float | None = None) -> RV:
        if self.bound is not None:
            gen = _bounded(gen, self.bound)
        if timeout is None:  # psycopg 3.2's wait has no timeout parameter
            return super().wait(gen, interval)
        return super().wait(gen, interval, timeout)


class _Turn(enum.Enum):
    """Where a registered wait stands (see _ENQUEUE); moved by the wait and by the listener."""

    WAITING = "waiting"  # queued; nothing handed over yet
    HANDED = "handed"  # a release handed the lease over: `token` is set, the waiter takes it
    OVER = "over"  # taken, withdrawn, or interrupted: a later notice about it is ignored


class _Registration:
    """A waiter's registration for a hand-over (see _ENQUEUE), for the length of one
    wait_and_acquire call."""

    __slots__ = ("ends", "event", "holder", "lease_id", "name", "sent", "sent_at", "token",
                 "ttl", "turn")

    def __init__(self, name: str, lease_id: str, holder: str, ttl: float, sent_at: float,
                 event: _shim.Event, ends: float) -> None:
        self.name, self.lease_id, self.holder, self.ttl = name, lease_id, holder, ttl
        self.sent_at = sent_at  # when the registering statement was sent (monotonic)
        self.event = event  # set when the lease is handed over (or the name released)
        self.ends = ends  # the registration is good until then (monotonic; the server's later)
        self.token: int | None = None  # set once the lease is ours
        self.turn = _Turn.WAITING
        self.sent: list[_Session] = []  # the sessions its statements went out on (see _undo)

    def grant(self) -> Grant:
        assert self.token is not None
        return Grant(self.name, 0, self.holder, self.lease_id, self.token, self.name,
                     self.sent_at)


class _Session:
    """A pooled connection, its reused cursor (a new cursor per statement costs about as much
    client time as the server spends on a lease statement) and its prepared statements; in
    advisory mode also the leases whose locks it holds, and who waits for it to release one."""

    __slots__ = ("claims", "connection", "cursor", "gone", "handed_to", "keys", "leases", "pid",
                 "prepared", "uses")

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.pid = connection.info.backend_pid  # from the handshake: no round trip
        self.cursor: Cursor = connection.cursor()
        self.prepared: set[bytes] = set()
        self.uses: dict[bytes, int] = {}
        self.leases: dict[str, tuple[str, int]] = {}  # lease id -> (name, lock key)
        self.keys: dict[str, set[int]] = {}  # name -> the lock keys its leases here hold
        self.claims: list[_shim.Event] = []  # releases waiting for this very session
        self.handed_to: _shim.Event | None = None  # the claim it was handed to, when busy
        self.gone = False  # closed: its locks went with it

    def hold(self, lease_id: str, name: str, key: int) -> None:
        self.leases[lease_id] = (name, key)
        self.keys.setdefault(name, set()).add(key)

    def unhold(self, lease_id: str) -> None:
        name, key = self.leases.pop(lease_id)
        keys = self.keys[name]
        keys.discard(key)
        if not keys:
            del self.keys[name]


class PostgresStore(Backend, RecordKeeper):
    """Leases in a PostgreSQL table, reached with psycopg 3 through a small connection pool.

    `url` is a libpq URL (`postgresql://` or `postgres://`); its query parameters go to libpq
    (sslmode, application_name, ...) except tenure's own options, which may also be given as
    keywords (the keyword wins): schema ("public"), table ("tenure_leases"; "tenure_advisory"
    in advisory mode), timeout (5 s), pool_size (10), notify (True), pgbouncer (False),
    prepare_threshold (psycopg's 5, or None), mode ("table", or "advisory": each lease is a
    session advisory lock held by one of the pool's connections, freed when that one ends).

    Example::

        backend = PostgresStore("postgresql://app@db/app", schema="locks", timeout=3)
        store = tenure.connect(backend)
    """

    def __init__(self, url: str, **options: Any) -> None:
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        self.url = redact(url)
        self._password = urlsplit(url).password or ""
        dsn, settings = self._split(url, options)
        self.mode = settings.get("mode", "table")
        if self.mode not in MODES:
            raise InvalidArgument(f"mode={self.mode!r} is not a PostgreSQL store mode; use "
                                  "mode=table (leases in a table, the default) or "
                                  "mode=advisory (session advisory locks)")
        self._advisory = self.mode == "advisory"
        self.schema = _as_identifier("schema", settings.get("schema", "public"), 63)
        self.table = _as_identifier("table", settings.get(
            "table", "tenure_advisory" if self._advisory else "tenure_leases"), 63)
        self._timeout = _as_number("timeout", settings.get("timeout", 5.0), 0.1, 3600.0,
                                   "seconds")
        self._pool_size = _as_count("pool_size", settings.get("pool_size", 10), 1, 1000)
        self._pgbouncer = _as_bool("pgbouncer", settings.get("pgbouncer", False))
        notify = settings.get("notify")
        self._notify = not self._pgbouncer if notify is None else _as_bool("notify", notify)
        if self._notify and self._pgbouncer:
            raise InvalidArgument(
                "notify=true needs a direct connection (LISTEN is session state), but "
                "pgbouncer=true says this URL is a transaction-pooling PgBouncer; drop notify "
                "(waiters then poll) or listen on a direct URL in another store")
        if self._advisory and self._pgbouncer:
            raise InvalidArgument(
                "mode=advisory needs a direct connection (an advisory lock is session state), "
                "but pgbouncer=true says this URL is a transaction-pooling PgBouncer; use "
                "mode=table (the default) through PgBouncer")
        threshold = settings.get("prepare_threshold", None if self._pgbouncer else 5)
        if threshold is not None and str(threshold).lower() in ("none", "off", ""):
            threshold = None
        self._prepare = None if threshold is None else _as_count("prepare_threshold",
                                                                  threshold, 0, 1_000_000)
        self._params = self._libpq_params(dsn)
        self.capabilities = Capabilities(
            min_ttl=0.1, max_ttl=7 * 86400.0, notifies_release=self._notify,
            batched_renewal=True, expiry="session" if self._advisory else "store clock")

        table = sql.Identifier(self.schema, self.table)
        self._ddl = _render(_ADVISORY_DDL if self._advisory else _DDL, table)
        shape = _ADVISORY_SHAPE if self._advisory else _TABLE_SHAPE
        self._migrate = sql.SQL(_MIGRATE.strip()).format(
            t=table, regclass=sql.Literal(f'"{self.schema}"."{self.table}"'),
            shape=sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(column),
                                                                   sql.Literal(kind))
                                     for column, kind in shape),
            columns=sql.Literal(len(shape))).as_bytes(None)
        self._create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(self.schema)).as_bytes(None)
        lease = [("name", _BYTEA), ("holder", _BYTEA), ("lease_id", _TEXT), ("ttl", _FLOAT8)]
        self._acquire_lock_sql = _statement("acquire_lock", _ACQUIRE_LOCK, table, lease)
        self._acquire_slot_sql = _statement("acquire_slot", _ACQUIRE_SLOT, table,
                                            [*lease, ("limit", _INT4)])
        self._renew_sql = _render(_RENEW, table)
        self._enqueue_sql = _statement("enqueue", _ENQUEUE, table, [
            *lease, ("wait", _FLOAT8)])
        self._acquire_queued_sql = _statement("acquire_queued", _ACQUIRE_QUEUED, table,
                                              [*lease, ("leave", _BOOL)])
        self._withdraw_sql = _render(_WITHDRAW, table)
        release = [("name", _BYTEA), ("slot", _INT4), ("lease_id", _TEXT), ("channel", _TEXT),
                   ("key", _TEXT)]
        self._release_sql = _statement("release", _RELEASE, table, release)
        self._hand_over_sql = _statement("hand_over", _HAND_OVER, table, release)
        self._break_sql = _render(_BREAK, table)
        self._list_sql = _render(_LIST, table)
        self._write_record_sql = _render(
            _ADVISORY_WRITE_RECORD if self._advisory else _WRITE_RECORD, table)
        self._read_record_sql = _render(_READ_RECORD, table)
        self._records_sql = _render(_RECORDS, table)
        self._running = _RUNNING.encode()
        # The undo of an acquire (by limit; 0: of a registered wait, see _WITHDRAW).
        self._undo_sql = {0: self._withdraw_sql + b";\n" + _render(_HAND_OVER, table),
                          1: _render(_HAND_OVER, table), 2: _render(_UNDO_SLOTS, table)}
        self._record_slot = -1 if self._advisory else 0  # the row that keeps the record
        # Advisory mode: its statements, the key of its lock keys, and the pooled session that
        # holds each lease's lock (by lease id) until release.
        self._advisory_sql = {
            name: _render(template, table) for name, template in (
                ("acquire", _ADVISORY_ACQUIRE), ("strays", _ADVISORY_UNLOCK_STRAYS),
                ("release", _ADVISORY_RELEASE), ("unlock after", _ADVISORY_UNLOCK_AFTER),
                ("renew", _ADVISORY_RENEW),
                ("break", _ADVISORY_BREAK), ("list", _ADVISORY_LIST))}
        self._namespace = hashlib.blake2b(f"{self.schema}.{self.table}".encode(),
                                          digest_size=32).digest()
        self._holding: dict[str, _Session] = {}  # lease id -> the session holding its lock
        # Who is told at once when this store closes, or finds broken, a session holding
        # advisory leases (see report_losses_to): the lease monitor of each Store on it.
        self._loss_listeners: list[Callable[[list[str]], object]] = []
        self.channel = _channel(self.schema, self.table)

        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._mutex = threading.Lock()  # never held across I/O: serves threads and tasks alike
        self._closed = False
        # The pool: idle connections (last in, first out), how many exist, who waits for one.
        self._idle: list[_Session] = []
        self._opened = 0
        self._room: list[_shim.Event] = []
        # The listener: one connection of its own, read by a background task or thread.
        self._listener: Connection | None = None
        self._listen_task: _shim.Background | None = None
        self._listen_starting = False
        self._listen_retry_at = -math.inf
        self._listen_failing = False  # logged once per outage: see _listener_failed
        self._waiters: dict[str, list[_shim.Event]] = {}
        self._missed: dict[str, float] = {}  # key -> when a try_acquire that found it held began
        self._released: dict[str, float] = {}  # key -> when its last release notice arrived
        # Hand-over (see _ENQUEUE): the registrations of the waits under way, by lease id (for
        # the listener's notices) and by name (one registered wait per name and store).
        self._handover_channel = _HANDOVER_CHANNEL + self._id_prefix
        self._listener_alive = False  # its session holds the lock that says so (see _ALIVE)
        self._registered: dict[str, _Registration] = {}
        self._registering: set[str] = set()
        # Every connection this store opened and has not dropped, for the child of a fork.
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        _forks.in_child_after_fork(self, PostgresStore._start_afresh_in_child)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- configuration ------------------------------------------------------------------------

    def _split(self, url: str, keywords: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Take tenure's options out of the URL's query; the rest of the URL goes to libpq."""
        base, _, query = url.partition("?")
        scheme = urlsplit(base).scheme.lower()
        if scheme not in ("postgresql", "postgres"):
            raise InvalidArgument(f"url {self.url!r} is not a PostgreSQL URL; use "
                                  "postgresql://USER@HOST:PORT/DBNAME")
        unknown = sorted(set(keywords) - set(OPTIONS))
        if unknown:
            raise InvalidArgument(
                f"unknown option(s) {', '.join(unknown)} for a postgresql:// store; accepted: "
                f"{', '.join(OPTIONS)} (libpq parameters such as sslmode go in the URL's query)")
        settings: dict[str, Any] = {}
        libpq: list[tuple[str, str]] = []
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key in OPTIONS:
                settings[key] = value
            else:
                libpq.append((key, value))
        settings.update(keywords)
        # quote, not quote_plus: libpq does not read '+' as a space (options=-c%20x=1).
        return base + ("?" + urlencode(libpq, quote_via=quote) if libpq else ""), settings

    def _libpq_params(self, dsn: str) -> dict[str, Any]:
        """libpq's parameters (parsed locally, no I/O) with tenure's defaults where unset."""
        try:
            params: dict[str, Any] = dict(conninfo_to_dict(dsn))
        except psycopg.Error as exc:
            unknown = re.search(r'invalid URI query parameter: "(.*)"', str(exc))
            if unknown:
                raise InvalidArgument(
                    f"unknown URL option {unknown.group(1)!r} in {self.url!r}: tenure's are "
                    f"{', '.join(OPTIONS)}; the others must be libpq parameters (sslmode, "
                    "application_name, target_session_attrs, ...)") from None
            raise InvalidArgument(
                f"url {self.url!r} is not a valid libpq URL: {self._clean(exc)}; see "
                "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING"
            ) from None
        self._password = str(params.get("password") or self._password)
        milliseconds = max(1, round(self._timeout * 1000))
        params.setdefault("connect_timeout", max(1, math.ceil(self._timeout)))
        # A dead peer or a cut network fails a call within about `timeout`, not the kernel's
        # 15 minutes; the listener's idle connection is probed by keepalives.
        params.setdefault("tcp_user_timeout", milliseconds)
        params.setdefault("keepalives", 1)
        params.setdefault("keepalives_idle", max(1, math.ceil(self._timeout)))
        params.setdefault("keepalives_interval", 1)
        params.setdefault("keepalives_count", 3)
        if not self._pgbouncer:
            # Startup parameters, not SETs, so no session state is needed (PgBouncer refuses
            # them: pgbouncer=true leaves them out). The server cancels a statement after
            # `timeout`; and a grant is in the WAL before acquire returns even where the
            # server's default is synchronous_commit=off, which would lose the last grants in
            # a crash and so hand a lease to a second holder. The user's own options win.
            params["options"] = (f"-c statement_timeout={milliseconds} "
                                 "-c synchronous_commit=on "
                                 + str(params.get("options", ""))).strip()
        return params

    def _clean(self, exc: BaseException) -> str:
        """A driver message fit for users: one line, password hidden."""
        message = " ".join(str(exc).split()) or type(exc).__name__
        # A password of a few characters would mangle the address and numbers it occurs in
        # (libpq never echoes one; the URL itself is redacted by its structure).
        if len(self._password) >= 4:
            message = message.replace(self._password, "***")
        return redact(message)

    def _failure(self, operation: str, name: str, exc: psycopg.Error) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to
        check; StoreRefused when retrying cannot clear it (see `_refusal`)."""
        fix = self._refusal(exc)
        if fix is not None:
            return StoreRefused(f"{self.url}: {subject(operation, name)} refused: "
                                f"{self._clean(exc)}; {fix}")
        if isinstance(exc, errors.QueryCanceled):
            hint = (f"the statement ran past timeout={self._timeout:g} s: is the server "
                    "overloaded, or a long transaction holding the lease rows locked?")
        elif exc.sqlstate == "53300" or any(words in str(exc) for words in _TOO_MANY):
            hint = (f"the server has no connection left (too many connections: its "
                    f"max_connections, or the role's or database's connection limit, is "
                    f"reached); this store has {self._opened} of its "
                    f"pool_size={self._pool_size} connections open{self._held_leases()}; "
                    "raise the server's max_connections, or lower pool_size here or in the "
                    "server's other clients")
        elif exc.sqlstate == "53200":
            hint = ("the server's lock table is full (out of shared memory)"
                    f"{self._held_leases()}: each held advisory lease takes one of its "
                    "entries, about max_locks_per_transaction x max_connections for the whole "
                    "server; raise max_locks_per_transaction, or hold fewer leases")
        elif isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            hint = ("check that PostgreSQL is running and reachable at this address, and the "
                    "user, password (PGPASSWORD or ~/.pgpass) and database")
        else:
            hint = "check the server's log for this error"
        return StoreUnavailable(f"{self.url}: {subject(operation, name)} failed: "
                                f"{self._clean(exc)}; {hint}")

    def _held_leases(self) -> str:
        if not self._advisory:
            return ""
        return f", holding {len(self._holding)} advisory lease(s)"

    def _refusal(self, exc: psycopg.Error) -> str | None:
        """What to fix when `exc` is permanent, by SQLSTATE (or, for a failed connection,
        which has none, by libpq's message); None when it is transient: a connection refused
        or reset, a server starting up or shutting down (57P01, 57P03), a read-only server
        during a failover (25006), too many connections (53300), a deadlock or a lock wait
        (40P01, 55P03), a cancelled statement (57014)."""
        if exc.sqlstate is None:
            misconfigured = _misconfiguration(str(exc))
            if misconfigured is not None:
                return misconfigured
        state = exc.sqlstate or _connection_sqlstate(str(exc))
        if state is None:
            return None
        if state.startswith("28"):  # invalid authorization specification
            return ("authentication refused: check the user and password in the URL (or "
                    "PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf")
        if state == "3D000":
            return ("the database does not exist: create it (CREATE DATABASE) or fix the "
                    "database name in the URL")
        if state == "42501":
            return (f"grant this user USAGE and CREATE on schema {self.schema!r} (or create "
                    f"the table as the docs show) and SELECT, INSERT, UPDATE on {self.table!r}")
        if state == "3F000":
            return (f"schema {self.schema!r} does not exist and this user may not create it: "
                    "create it, or set the schema option to one that exists")
        if state in ("42P10", "42703"):  # no key matching ON CONFLICT, an undefined column
            # (a missing column made the store create or re-key the table first: still there)
            return (f'the table "{self.schema}"."{self.table}" does not have the keys and '
                    "columns this version of tenure uses: was it changed by another version "
                    "of tenure? Versions that key the table differently cannot share it: see "
                    "the upgrade notes in docs/stores/postgres.md (upgrade every process at "
                    "once, or give the new version a table of its own with table=)")
        if state.startswith("54"):  # program limit exceeded, e.g. an index row too big
            return "the server cannot take this request as it is; retrying will not help"
        if state == "0A000" and "cached plan" in str(exc):
            return None  # a prepared statement outlived an ALTER TABLE: the retry re-plans it
        if state in ("08004", "0A000"):  # connection rejected, feature not supported
            return "the server does not accept this client or request; see its log"
        return None

    def _no_answer(self, operation: str, name: str, kept: bool = False) -> StoreUnavailable:
        what = ("so it was cancelled (its connection, and the advisory leases it holds, live "
                "on)" if kept else "so its connection was closed")
        return StoreUnavailable(
            f"{self.url}: {subject(operation, name)} got no answer within timeout="
            f"{self._timeout:g} s, {what}; is the server, or a pooler or proxy on the way to "
            "it, frozen or overloaded, a long transaction holding the lease rows locked, or "
            "the network path silent?")

    # -- connections --------------------------------------------------------------------------

    def _connect(self, prepare_threshold: int | None) -> _Connection:
        """A new connection whose waits for the server are bounded by `timeout`. Connecting is
        bounded by psycopg itself (libpq's connect_timeout, at least 2 s)."""
        connection = _Connection.connect(
            **self._params, autocommit=True, prepare_threshold=prepare_threshold)
        connection.bound = self._timeout
        with self._mutex:
            self._connections.add(connection)
        return connection

    def _start_afresh_in_child(self) -> None:
        """After fork(): the parent's connections, leases and waits stay the parent's. The child
        sends nothing on an inherited socket, not even the Terminate message that closing sends
        (the server would end the parent's session): each socket is replaced by /dev/null in
        the child only, then closed. The child opens its own connections on first use, and
        takes lease ids of its own (the parent's counter goes on with the same ones)."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for connection in list(self._connections):
                with contextlib.suppress(psycopg.Error, OSError):
                    os.dup2(null, connection.pgconn.socket)
                connection.pgconn.finish()  # closes /dev/null; no "deleted while open" warning
        finally:
            os.close(null)
        self._connections = weakref.WeakSet()
        self._mutex = threading.Lock()  # another thread of the parent may have held it
        self._idle, self._opened, self._room, self._holding = [], 0, [], {}
        self._listener, self._listen_task, self._listen_starting = None, None, False
        self._listen_retry_at, self._listener_alive = -math.inf, False
        self._listen_failing = False
        self._waiters, self._missed, self._released = {}, {}, {}
        self._registered, self._registering = {}, set()  # the parent's waits
        self._id_prefix = secrets.token_hex(6)
        self._handover_channel = _HANDOVER_CHANNEL + self._id_prefix

    def _take(self) -> _Session:
        """An idle connection (checked without a round trip), or a new one; waits up to
        `timeout` while `pool_size` connections are busy."""
        deadline = -math.inf
        while True:
            room: _shim.Event | None = None
            with self._mutex:
                if self._closed:
                    raise closed_store(self.url)
                session = self._idle.pop() if self._idle else None
                opening = session is None and self._opened < self._pool_size
                if opening:
                    self._opened += 1
                elif session is None:
                    room = _shim.Event()
                    self._room.append(room)
            if session is not None:
                if _alive(session.connection):
                    return session
                self._discard(session)  # dropped by the server: open another
            elif opening:
                try:
                    return _Session(self._connect(self._prepare))
                except BaseException:
                    self._forget_one()
                    raise
            elif room is not None:
                if deadline == -math.inf:
                    deadline = _shim.monotonic() + self._timeout
                left = deadline - _shim.monotonic()
                if left <= 0 or not _shim.wait_event(room, left):
                    raise StoreUnavailable(
                        f"{self.url}: all {self._pool_size} connections stayed busy for "
                        f"{self._timeout:g} s; raise pool_size or lower the concurrency")

    def _give_back(self, session: _Session) -> None:
        connection = session.connection
        # Broken, or no answer came: closed, unless its statement can be cancelled and the
        # leases it holds (advisory mode) kept.
        if (connection.closed or connection.pgconn.transaction_status != TransactionStatus.IDLE
                ) and (connection.closed or not session.leases
                       or not self._settle(session)):
            self._discard(session)
            return
        room: list[_shim.Event] = []
        with self._mutex:
            keep = not self._closed
            if keep and session.claims:  # a release waits for this very session: its turn
                session.handed_to = session.claims.pop(0)
                room = [session.handed_to]
            elif keep:
                self._idle.append(session)
                room, self._room = self._room, []
        if not keep:
            self._discard(session)
            return
        for event in room:
            event.set()

    def _discard(self, session: _Session) -> None:
        self._forget_one()
        self._lose(session)
        try:
            session.connection.close()
        except (psycopg.Error, OSError):
            log.debug("tenure: closing a broken PostgreSQL connection failed", exc_info=True)

    def report_losses_to(self, listener: Callable[[list[str]], object]) -> None:
        """Call `listener(lease_ids)` at once whenever this store closes, or finds broken, a
        session that holds advisory leases: they are lost (the server frees their locks with the
        session), and their holders learn it before the session is closed rather than at their
        next renewal, up to ttl/3 later, when another process may hold the name already. The
        lease monitor of each Store on this backend listens.

        Example::

            backend.report_losses_to(lambda lease_ids: print("lost:", lease_ids))
        """
        with self._mutex:
            self._loss_listeners.append(listener)

    def _lose(self, session: _Session) -> None:
        """`session` is about to be closed, or was found broken: the advisory leases it holds
        go with it, and their holders are told now (see report_losses_to). Idempotent."""
        with self._mutex:
            if session.gone:
                return
            session.gone = True
            lost = list(session.leases)
            for lease_id in lost:
                self._holding.pop(lease_id, None)
            claims, session.claims = session.claims, []
            listeners = list(self._loss_listeners)
        for event in claims:
            event.set()
        if not lost:
            return
        log.log(logging.INFO if self._closed else logging.WARNING,
                "tenure: %s: a connection holding %d advisory lease(s) is closed: they are "
                "lost, their holders are told now", self.url, len(lost))
        for listener in listeners:
            try:
                listener(lost)
            except Exception:  # a listener's bug must not keep the others from hearing it
                log.exception("tenure: %s: telling of lost leases failed", self.url)

    def _settle(self, session: _Session) -> bool:
        """A statement on `session`, which holds advisory leases, got no answer within
        `timeout`: cancel it on the server and read the rest of its answer (an error, or
        late rows: dropped), within _SETTLE seconds, so that the session, and every lease on
        it, lives on. False: it is not idle again in time (a silent path, a stalled server);
        the caller closes it, the last resort."""
        connection = session.connection
        if connection.closed or connection.broken or not isinstance(connection, _Connection):
            return False
        until = _shim.monotonic() + min(_SETTLE, self._timeout)
        bound = connection.bound
        try:
            with _shim.shielded():
                connection.cancel_safe(timeout=max(0.001, until - _shim.monotonic()))
                connection.bound = max(0.001, until - _shim.monotonic())
                connection.wait(generators.execute(connection.pgconn))
        except (psycopg.Error, _NoAnswer, OSError) as exc:
            log.debug("tenure: %s: a statement with no answer could not be cancelled: %s",
                      self.url, self._clean(exc))
            return False
        finally:
            connection.bound = bound
        settled = connection.pgconn.transaction_status == TransactionStatus.IDLE
        if settled:
            log.info("tenure: %s: a statement with no answer within timeout=%g s was cancelled;"
                     " its connection and the %d advisory lease(s) it holds live on",
                     self.url, self._timeout, len(session.leases))
        return settled

    def _take_holding(self, session: _Session, name: str) -> bool:
        """The session that holds a lease's lock, for this caller alone (a release must unlock
        on the session that locked): from the pool when idle, else handed over by the call
        using it (see _give_back). False when the session is gone, and its locks with it."""
        deadline = _shim.monotonic() + self._timeout
        while True:
            claim: _shim.Event | None = None
            with self._mutex:
                if session.gone or self._closed:
                    return False
                if session in self._idle:
                    self._idle.remove(session)
                else:
                    claim = _shim.Event()
                    session.claims.append(claim)
            if claim is None:
                if _alive(session.connection):
                    return True
                self._discard(session)
                return False
            try:
                _shim.wait_event(claim, max(0.0, deadline - _shim.monotonic()))
            except BaseException:  # cancelled: no claim may outlive its wait
                with self._mutex:
                    handed = session.handed_to is claim
                    if handed:
                        session.handed_to = None
                    elif claim in session.claims:
                        session.claims.remove(claim)
                if handed:  # handed over meanwhile: the next claim's turn, or the pool's
                    with _shim.shielded():
                        self._give_back(session)
                raise
            with self._mutex:
                if session.handed_to is claim:
                    session.handed_to = None
                    return True
                if claim in session.claims:
                    session.claims.remove(claim)
            if _shim.monotonic() >= deadline and not session.gone:
                raise StoreUnavailable(
                    f"{self.url}: release of {name!r}: the connection that holds its lock "
                    f"stayed busy for timeout={self._timeout:g} s; is the server overloaded?")

    def _forget_one(self) -> None:
        with self._mutex:
            self._opened -= 1
            room, self._room = self._room, []
        for event in room:
            event.set()

    def _execute(self, operation: str, name: str, query: bytes | _Statement | _Script,
                       params: dict[str, Any], sent: list[_Session] | None = None,
                       lease_id: str = "") -> Any:
        """Run one statement on a pooled connection; create the table when it is missing.
        A _Statement answers libpq's result, any other query the rows psycopg fetched.

        Each wait for the server is bounded by `timeout` (see _Connection): past it, the
        connection is closed (it is in an unknown state) and StoreUnavailable raised; in
        advisory mode a connection that holds leases is first tried to be kept, its statement
        cancelled (see _settle), and its leases' holders told at once when it is closed.

        Advisory mode: a statement is not interrupted by a cancellation (it runs to its answer,
        within `timeout`), because a connection interrupted mid-statement is closed, and its
        session's locks, those of other leases too, would go with it. With `lease_id`, the
        statement is an advisory acquire (see _send_acquire). `sent` collects the sessions the
        statement was sent on (see _undo).

        A connection the server dropped while it sat idle (pg_terminate_backend, restart) may
        look fine until used: when the statement breaks its connection, it runs once more on
        a new one. Every statement is safe to repeat: renew, release and break by lease id
        or name, and acquire by its lease id (see _FREE)."""
        for attempt in (1, 2):
            session: _Session | None = None
            try:
                session = self._take()
                if sent is not None:
                    sent.append(session)
                try:
                    if lease_id:
                        with _shim.shielded():
                            return self._send_acquire(session, query, params, lease_id)
                    if self._advisory:
                        with _shim.shielded():
                            return self._send_creating(session, query, params)
                    return self._send_creating(session, query, params)
                finally:  # closed there when no answer came (not IDLE), unless cancelled
                    self._give_back(session)
            except _NoAnswer:
                kept = session is not None and not session.connection.closed
                raise self._no_answer(operation, name, kept) from None
            except psycopg.OperationalError as exc:
                if attempt == 2 or session is None or not session.connection.broken:
                    raise self._failure(operation, name, exc) from exc
                log.debug("tenure: %s: a dropped connection; trying again", self.url)
            except psycopg.Error as exc:
                raise self._failure(operation, name, exc) from exc
        raise AssertionError("unreachable")

    def _send_creating(self, session: _Session, query: bytes | _Statement | _Script,
                             params: dict[str, Any]) -> Any:
        """_send; the tables created (or migrated, see _MIGRATE) first when missing."""
        try:
            return self._send(session, query, params)
        except (errors.UndefinedTable, errors.InvalidSchemaName,
                errors.UndefinedColumn):  # missing, or of an earlier version
            self._create_tables(session.cursor)
            return self._send(session, query, params)

    def _send_acquire(self, session: _Session, query: bytes | _Statement | _Script,
                            params: dict[str, Any], lease_id: str) -> Any:
        """An advisory acquire on `session`: it skips the keys this session holds for the name
        (a session lock is re-entrant), and a grant is recorded as held by this session. A
        statement that failed, or was interrupted (psycopg then cancels it on the server and
        waits until the connection is idle: it may have run to its end), may have taken a lock,
        which outlives the statement: given back before the session serves anyone else. One
        that got no answer within `timeout` is cancelled first when the session holds leases
        (see _settle); else the session is closed, and the lock with it."""
        name = params["name"].decode()
        params["mine"] = list(session.keys.get(name, ()))
        try:
            rows = self._send_creating(session, query, params)
        except BaseException as exc:
            connection = session.connection
            if (isinstance(exc, _NoAnswer) and session.leases
                    and not self._settle(session)):
                self._lose(session)  # its holders are told before the server frees them
                self._close_quietly(connection)
            if (not connection.closed
                    and connection.pgconn.transaction_status == TransactionStatus.IDLE):
                try:
                    with _shim.shielded():
                        self._send(session, self._advisory_sql["strays"], params)
                except BaseException:  # (the first exception is the one raised)
                    # A stray lock would keep its name until the store closes: end the session,
                    # even though the leases it holds go with it.
                    self._lose(session)
                    self._close_quietly(connection)
            raise
        if rows and rows[0][0] >= 0:
            with self._mutex:
                session.hold(lease_id, name, rows[0][2])
                self._holding[lease_id] = session
        return rows

    def _send(self, session: _Session, query: bytes | _Statement | _Script,
                    params: dict[str, Any]) -> Any:
        if isinstance(query, _Script):
            script = psycopg.ClientCursor(session.connection)
            script.execute(query.text, params)
            return script.fetchall()
        if not isinstance(query, _Statement):
            cursor = session.cursor
            cursor.execute(query, params)
            return cursor.fetchall() if cursor.description else []
        values = [_encode(params[param]) for param in query.params]
        try:
            return self._run(session, query, values)
        except errors.InvalidSqlStatementName:
            # Our prepared statements are gone (DISCARD ALL, DEALLOCATE): prepare again.
            session.prepared.clear()
            session.uses.clear()
            return self._run(session, query, values)

    def _run(self, session: _Session, statement: _Statement,
                   values: list[bytes]) -> PGresult:
        """One round trip through libpq: the named prepared statement once it is prepared on
        this connection (after `prepare_threshold` uses, like psycopg), else an unnamed one
        (what PgBouncer in transaction pooling mode needs: prepare_threshold=None)."""
        pgconn = session.connection.pgconn
        if statement.name not in session.prepared:
            uses = session.uses[statement.name] = session.uses.get(statement.name, 0) + 1
            if self._prepare is None or uses <= self._prepare:
                pgconn.send_query_params(statement.text, values, statement.types,
                                         statement.formats)
                return self._result(session)
            pgconn.send_prepare(statement.name, statement.text, statement.types)
            self._result(session)
            session.prepared.add(statement.name)
        pgconn.send_query_prepared(statement.name, values, statement.formats)
        return self._result(session)

    @staticmethod
    def _result(session: _Session) -> PGresult:
        connection = session.connection
        results: list[PGresult] = connection.wait(generators.execute(connection.pgconn))
        result = results[-1]
        if result.status == ExecStatus.FATAL_ERROR:
            raise errors.error_from_result(result, encoding=connection.info.encoding)
        return result

    def _create_tables(self, cursor: Cursor) -> None:
        """CREATE .. IF NOT EXISTS in one implicit transaction, then re-key a table of an
        earlier version (see _MIGRATE). Two processes creating the same table at once can both
        pass the IF NOT EXISTS check, and the loser fails on a catalog unique index (pg_type,
        pg_namespace): it tries again and then finds the table."""
        for attempt in itertools.count():
            try:
                try:
                    cursor.execute(self._ddl)
                except errors.InvalidSchemaName:
                    cursor.execute(self._create_schema)
                    cursor.execute(self._ddl)
                cursor.execute(self._migrate)
                return
            except errors.WrongObjectType as exc:  # see _MIGRATE: not a table of ours
                raise StoreRefused(
                    f'{self.url}: the table "{self.schema}"."{self.table}" is not a lease '
                    "table of tenure: it lacks the columns or the primary key (name, slot) of "
                    "one, so the store leaves it untouched; name another table with table= (or "
                    "schema=), or drop it if it is a leftover") from exc
            except (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject,
                    errors.DuplicateSchema):
                if attempt >= 5:
                    raise
                _shim.sleep(0.01 * (attempt + 1))

    # -- leases -------------------------------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "limit": limit, "holder": holder.encode(),
                  "lease_id": lease_id, "ttl": ttl}
        started = _shim.monotonic()
        if self._advisory:
            params["keys"] = _advisory_keys(self._namespace, name, limit)
            for _ in range(_SLOT_RETRIES):
                rows = self._execute("acquire", name, self._advisory_sql["acquire"],
                                           params, lease_id=lease_id)
                if not rows:
                    break  # no slot was free
                slot, token, _key = rows[0]
                if slot >= 0:
                    return self._keep_unless_cancelled(
                        Grant(name, slot, holder, lease_id, token, name))
                # A break moved the slot to a new key meanwhile: it may be free now.
        else:
            sent: list[_Session] = []
            try:
                if limit == 1:
                    result = self._execute("acquire", name, self._acquire_lock_sql,
                                                 params, sent=sent)
                    # (granted, token); (false, _) when it only marked the name wanted
                    if result.ntuples and result.get_value(0, 0) == b"t":
                        return Grant(name, 0, holder, lease_id, int(result.get_value(0, 1)),
                                     name)
                else:
                    for _ in range(_SLOT_RETRIES):
                        result = self._execute("acquire", name, self._acquire_slot_sql,
                                                     params, sent=sent)
                        if not result.ntuples:
                            break  # no slot was free
                        slot = int(result.get_value(0, 0))
                        if slot >= 0:
                            return Grant(name, slot, holder, lease_id,
                                         int(result.get_value(0, 1)), name)
                        # Another acquirer took the slot we picked at the same moment;
                        # another may still be free.
            except BaseException:  # cancelled, or failed: the server may have granted it
                self._undo_later(name, lease_id, limit, sent)
                raise
        if self._notify:  # see wait_and_acquire
            self._note_missed(name, started)
        return None

    def _undo_later(self, name: str, lease_id: str, limit: int,
                    sent: list[_Session]) -> None:
        """An acquire by `lease_id` was cancelled, or failed, after `sent` got its request: free
        in the background what it may have taken, so that the caller's cancellation or error
        is not delayed by a round trip (a stalled path would hold it for `timeout`). `limit`
        0: a registered wait (see _WITHDRAW)."""
        if sent:
            pids = [session.pid for session in sent if session.connection.closed]
            _shim.start_soon(self._undo, name, lease_id, limit, pids)

    def _undo(self, name: str, lease_id: str, limit: int, pids: list[int]) -> None:
        """Free whatever the requests of an interrupted acquire took, by their lease id,
        best-effort (else it expires by itself).

        The release must not overtake those requests on the server, and closing a request's
        connection does not stop it: the server runs what it has received, and what is still
        on its way, before it reads the end of the connection (a running statement does not
        watch its socket). A request whose connection stayed open was answered (the answer was
        read, then dropped): it is over. For those whose connection was closed unanswered,
        the release runs, on another connection, right behind a look at whether the backends
        that served them (`pids`) are still there, in one round trip: each statement of it
        has its own snapshot, so when the look finds them gone, no request of this acquire can
        still run and the release saw what they took. Else it looks and releases again until
        they are gone (up to `timeout`). Through PgBouncer the pids are not the server's: the
        release runs once, and frees what the requests took by then."""
        release = _Script(self._undo_sql[min(limit, 2)])
        params = {"name": name.encode(), "slot": 0, "lease_id": lease_id, "pids": pids,
                  "channel": self.channel, "key": name_digest(name)}
        try:
            if self._pgbouncer or not pids:
                self._execute("undo", name, release, params)
                return
            until = _shim.monotonic() + self._timeout
            script = _Script(self._running + b";\n" + release.text)
            while (self._execute("undo", name, script, params)
                   and _shim.monotonic() < until):
                _shim.sleep(_UNDO_POLL)
        except StoreUnavailable as exc:
            log.debug("tenure: %s: could not free what an interrupted acquire of %r took "
                      "(it expires by itself): %s", self.url, name, exc)

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        if not grants:
            return []
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        query = self._advisory_sql["renew"] if self._advisory else self._renew_sql
        rows = self._execute("renewal", label, query, {
            "names": [grant.name.encode() for grant in grants],
            "slots": [grant.slot for grant in grants],
            "ids": [grant.lease_id for grant in grants],
            "ttl": ttl,
        })
        return [grant if not row[0] else LostReason(row[0])
                for grant, row in zip(grants, rows, strict=True)]

    def release(self, grant: Grant) -> bool:
        if self._closed:  # an advisory lease's pinned connection is gone with the store
            raise closed_store(self.url, "release", grant.name)
        if self._advisory:
            return self._release_advisory(grant)
        params = {"name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
                  "channel": self.channel, "key": name_digest(grant.name)}
        if grant.sent_at == math.inf:  # not handed over: most likely nobody waits
            result = self._execute("release", grant.name, self._release_sql, params)
            if result.ntuples:
                return True
        result = self._execute("release", grant.name, self._hand_over_sql, params)
        return bool(result.ntuples)

    def break_lease(self, name: str) -> int:
        if self._advisory:
            return self._break_advisory(name)
        rows = self._execute("break", name, self._break_sql, {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        encoded = prefix.encode()
        if self._advisory:
            rows = self._execute("listing", prefix, self._advisory_sql["list"],
                                       {"prefix": encoded, "length": len(encoded)})
            return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token, None, slot)
                    for name, slot, holder, token in rows]
        rows = self._execute("listing", prefix, self._list_sql,
                                   {"prefix": encoded, "length": len(encoded)})
        now = datetime.now(timezone.utc)
        return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token,
                          now + timedelta(seconds=left), slot)
                for name, slot, holder, token, left in rows]

    # -- records ------------------------------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        rows = self._execute("reading the record", name, self._read_record_sql, {
            "name": name.encode(), "slot": self._record_slot})
        return None if not rows or rows[0][0] is None else bytes(rows[0][0]).decode()

    def write_record(self, grant: Grant, record: str) -> bool:
        encoded = record_bytes(record)
        rows = self._execute("writing the record", grant.name, self._write_record_sql, {
            "record": encoded, "name": grant.name.encode(), "slot": grant.slot,
            "lease_id": grant.lease_id})
        return bool(rows)

    def records(self, prefix: str = "") -> dict[str, str]:
        encoded = prefix.encode()
        rows = self._execute("listing the records", prefix, self._records_sql, {
            "slot": self._record_slot, "prefix": encoded, "length": len(encoded)})
        return {bytes(name).decode(): bytes(record).decode() for name, record in rows}

    # -- advisory mode --------------------------------------------------------------------------

    def _keep_unless_cancelled(self, grant: Grant) -> Grant:
        """`grant`, taken by a statement that a cancellation could not interrupt (see
        _execute); a cancellation that came meanwhile lands here, and the lease is released
        rather than left held by a session with nobody to release it."""
        try:
            _shim.sleep(0)
        except BaseException:
            with _shim.shielded(), contextlib.suppress(StoreUnavailable):
                self._release_advisory(grant)
            raise
        return grant

    def _release_advisory(self, grant: Grant) -> bool:
        """Unlock on the session that holds the lease's lock (waiting for its turn when that
        session runs another statement), which stays in the pool. Its session gone (closed,
        dropped): False, its locks went with it."""
        with self._mutex:
            session = self._holding.get(grant.lease_id)
        if session is None:
            return False  # released before, lost with its session, or not of this store
        if not self._take_holding(session, grant.name):
            return False
        params = {"name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
                  "lock": session.leases[grant.lease_id][1], "channel": self.channel,
                  "key": name_digest(grant.name)}
        try:
            with _shim.shielded():  # interrupted, the session would close: all its leases
                try:
                    rows = self._send(session, self._advisory_sql["release"], params)
                except (_NoAnswer, psycopg.Error) as exc:
                    rows = self._unlock_after(session, grant, params, exc)
            with self._mutex:
                if grant.lease_id in session.leases:
                    session.unhold(grant.lease_id)
                self._holding.pop(grant.lease_id, None)
            return bool(rows and rows[0][1])
        finally:
            self._give_back(session)

    def _unlock_after(self, session: _Session, grant: Grant, params: dict[str, Any],
                            exc: _NoAnswer | psycopg.Error) -> Any:
        """The release statement of `grant` failed, or got no answer, so whether its unlock
        ran is unknown. A broken connection: the session ended, and its locks with it (no
        rows: False). Else, once the session is idle again (a statement with no answer is
        cancelled first, see _settle), the lock is given back for sure (_ADVISORY_UNLOCK_AFTER,
        whose rows answer for the release). When that cannot be done, the session is closed,
        the last resort (its other leases are lost, their holders told at once), and the
        failure raised."""
        connection = session.connection
        if connection.broken or connection.closed:
            return []
        if isinstance(exc, _NoAnswer):
            settled = self._settle(session)
        else:
            settled = connection.pgconn.transaction_status == TransactionStatus.IDLE
        if settled:
            try:
                rows = self._send(session, self._advisory_sql["unlock after"], params)
            except (_NoAnswer, psycopg.Error) as again:
                log.debug("tenure: %s: release of %r: unlocking after a failure failed too: %s",
                          self.url, grant.name, self._clean(again))
            else:
                log.debug("tenure: %s: release of %r failed (%s); its lock was given back",
                          self.url, grant.name, self._clean(exc))
                return rows
        self._lose(session)  # its other leases: their holders are told before the close
        self._close_quietly(connection)
        if isinstance(exc, _NoAnswer):
            raise self._no_answer("release", grant.name) from None
        raise self._failure("release", grant.name, exc) from exc

    def _break_advisory(self, name: str) -> int:
        """Mark the live leases of `name` broken and move their slots to new lock keys (see
        _ADVISORY_BREAK): their holders' sessions, which hold other leases too, live on."""
        rows = self._execute("break", name, self._advisory_sql["break"], {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)

    # -- hand-off by LISTEN/NOTIFY ------------------------------------------------------------

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Wait up to `timeout` seconds for a NOTIFY of a release of `name` (a plain wait:
        `patience` is not needed; see wait_and_acquire for the acquires of tenure's core)."""
        if not self._notify:
            _shim.sleep(timeout)  # no notifications: the caller polls with backoff
            return
        if not self._listening():
            # The listener is down (or starting): poll, and try it again within a second.
            _shim.sleep(min(timeout, _LISTEN_RETRY))
            return
        with self._watching(name) as (event, released):
            if not released:
                _shim.wait_event(event, timeout)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait for a release of `name`, then take a free slot; the Grant taken, or None.

        A lock's waiter in table mode registers for a hand-over (see _ENQUEUE) for `patience`
        seconds, at most _HANDOVER_SHARE of the ttl, and goes on waiting, with a try every
        `timeout` (doubling up to a second), until it is handed the lease (no further round
        trip) or its registration ends: one place in the queue across its tries. Others wait
        for the NOTIFY of a release (or `timeout`), then try once. The grant's `sent_at` is
        when the request that took it was sent. Interrupted, a wait frees what it may have
        taken.

        Example::

            grant = backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.05, 10.0)
        """
        if self._notify and self._listening():
            until = _shim.monotonic() + max(timeout, patience)  # when the acquire gives up
            with self._watching(name) as (event, released):
                if not released:
                    if limit == 1 and not self._advisory and self._listener_alive:
                        registration = self._register(name, holder, ttl, event, until)
                        if registration is not None:
                            return self._wait_registered(registration, timeout)
                    _shim.wait_event(event, timeout)
        elif self._notify:  # the listener is down (or starting): poll, and try it again soon
            _shim.sleep(min(timeout, _LISTEN_RETRY))
        else:
            _shim.sleep(timeout)  # no notifications: poll with the core's backoff
        sent_at = _shim.monotonic()
        grant = self.try_acquire(name, holder, ttl, limit)
        return None if grant is None else grant._replace(sent_at=sent_at)

    @contextlib.contextmanager
    def _watching(self, name: str) -> Iterator[tuple[_shim.Event, bool]]:
        """An event set by the next release notice of `name`, for the length of a wait, and
        whether a notice came after the last failed try of it began (so that it is not lost
        on us: a try right away, then)."""
        key = name_digest(name)
        event = _shim.Event()
        with self._mutex:
            self._waiters.setdefault(key, []).append(event)
            missed = self._missed.pop(key, None)
            released = missed is not None and self._released.get(key, -math.inf) >= missed
        try:
            yield event, released
        finally:
            with self._mutex:
                waiting = self._waiters.get(key, [])
                if event in waiting:
                    waiting.remove(event)
                if not waiting:
                    self._waiters.pop(key, None)
                    self._released.pop(key, None)

    def _register(self, name: str, holder: str, ttl: float, event: _shim.Event,
                        until: float) -> _Registration | None:
        """Register for a hand-over of lock `name` until `until` at most (see _ENQUEUE),
        unless another wait of this store is registered for it. The statement grants the
        lease at once when it is free by now (the registration then has its token). None:
        wait without one."""
        sent_at = _shim.monotonic()
        wait = min(until - sent_at, _HANDOVER_SHARE * ttl)
        if wait < _KEEP_AT_LEAST:
            return None  # not worth a statement: the acquire is about to give up
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        registration = _Registration(name, lease_id, holder, ttl, sent_at, event, sent_at + wait)
        with self._mutex:
            if name in self._registering:
                return None
            self._registering.add(name)
            self._registered[lease_id] = registration  # its hand-over may beat our answer
        try:
            result = self._execute("waiting", name, self._enqueue_sql, {
                "name": name.encode(), "holder": holder.encode(), "lease_id": lease_id,
                "ttl": ttl, "wait": wait}, sent=registration.sent)
        except BaseException as exc:
            self._end(registration)
            self._undo_later(name, lease_id, 0, registration.sent)  # and what it took
            if isinstance(exc, StoreUnavailable):  # wait without it
                log.debug("tenure: %s: waiting without a hand-over: %s", self.url, exc)
                return None
            raise
        if not result.ntuples:  # the queue is full: wait without it
            self._end(registration)
            return None
        if result.get_value(0, 0) == b"t":  # free by now: granted
            with self._mutex:
                registration.token = int(result.get_value(0, 1))
                registration.turn = _Turn.HANDED
        return registration

    def _wait_registered(self, registration: _Registration,
                               timeout: float) -> Grant | None:
        """Wait while registered: the lease handed over (see _handed), or taken by a try
        after each `timeout` (doubling) or a release notice (_ACQUIRE_QUEUED, by the
        registration's lease id: a hand-over that came first is "already ours"); the last try
        withdraws the registration. Interrupted: the registration is withdrawn and what it
        was handed freed, in the background."""
        name, lease_id = registration.name, registration.lease_id
        try:
            while True:
                # The last try starts a little before the registration (and the acquire's
                # patience) ends, so that it withdraws the registration within the acquire.
                left = registration.ends - _KEEP_AT_LEAST - _shim.monotonic()
                if registration.token is None:
                    _shim.wait_event(registration.event, max(0.0, min(timeout, left)))
                with self._mutex:
                    if registration.token is not None:
                        registration.turn = _Turn.OVER
                        return registration.grant()
                    registration.event.clear()
                started = _shim.monotonic()
                leave = registration.ends - started <= _KEEP_AT_LEAST
                result = self._execute("acquire", name, self._acquire_queued_sql, {
                    "name": name.encode(), "holder": registration.holder.encode(),
                    "lease_id": lease_id, "ttl": registration.ttl, "leave": leave},
                    sent=registration.sent)
                if result.ntuples and result.get_value(0, 0) == b"t":
                    return Grant(name, 0, registration.holder, lease_id,
                                 int(result.get_value(0, 1)), name, started)
                if leave:
                    self._note_missed(name, started)
                    return None
                timeout = max(timeout, min(2 * timeout, _REGISTERED_POLL))
        except BaseException:
            self._undo_later(name, lease_id, 0, registration.sent)
            raise
        finally:
            self._end(registration)

    def _end(self, registration: _Registration) -> None:
        """The registered wait is over: a later notice about it is ignored (what it was
        handed and nobody took, its undo frees)."""
        with self._mutex:
            registration.turn = _Turn.OVER
            self._registered.pop(registration.lease_id, None)
            self._registering.discard(registration.name)

    def _note_missed(self, name: str, started: float) -> None:
        with self._mutex:
            if len(self._missed) > 10_000:  # try_acquire callers that never wait
                self._missed.clear()
                self._released.clear()
            self._missed[name_digest(name)] = started

    def _wake(self, key: str) -> None:
        with self._mutex:
            if key in self._missed or key in self._waiters:
                self._released[key] = _shim.monotonic()
            events = self._waiters.get(key, [])
        for event in events:
            event.set()

    def _handed(self, payload: str) -> None:
        """A release handed a lease to one of our registrations ("key lease_id token")."""
        _, lease_id, token = payload.split(" ")
        with self._mutex:
            registration = self._registered.get(lease_id)
            if registration is None or registration.turn is not _Turn.WAITING:
                return  # over: taken by its try ("already ours"), or freed by its undo
            registration.token = int(token)
            registration.turn = _Turn.HANDED
        registration.event.set()

    def _wake_all(self) -> None:
        """The listener stopped: everyone polls now rather than at the end of its backoff."""
        with self._mutex:
            events = [event for waiting in self._waiters.values() for event in waiting]
        for event in events:
            event.set()

    def _listening(self) -> bool:
        """True while the listener runs; starts it on first use (and again after a failure,
        at most once per _LISTEN_RETRY seconds)."""
        task = self._listen_task
        if task is not None and task.alive():
            return True
        with self._mutex:
            if (self._closed or self._listen_starting
                    or _shim.monotonic() < self._listen_retry_at):
                return False
            self._listen_starting = True
        try:
            connection = self._connect(None)
            try:
                cursor = connection.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)",
                    (_ALIVE_CLASS, int.from_bytes(bytes.fromhex(self._id_prefix[:8]), "big",
                                                  signed=True)))
                row = cursor.fetchone()
                alive = bool(row and row[0])  # False: another session has our key (rare)
                connection.execute(sql.SQL("LISTEN {}; LISTEN {}").format(
                    sql.Identifier(self.channel), sql.Identifier(self._handover_channel)))
            except BaseException:
                connection.close()
                raise
            # From now on it only waits for notices: idle time, not a call. (A silent path
            # there costs the waiters their wake-ups: they poll with their backoff.)
            connection.bound = None
        except BaseException as exc:
            self._listen_starting = False
            if not isinstance(exc, (psycopg.Error, _NoAnswer)):
                raise
            self._listener_failed("cannot listen for releases", exc)
            return False
        stale, self._listener = self._listener, connection
        self._listener_alive = alive
        if self._listen_failing:
            self._listen_failing = False
            log.info("tenure: %s: listening for releases again (waiters are woken by them)",
                     self.url)

        def run() -> None:
            self._listen(connection)

        self._listen_task = _shim.spawn(run, "tenure-postgres-listener")
        self._listen_starting = False
        if stale is not None:  # the listener of an event loop that is gone
            self._close_quietly(stale)
        return True

    def _listen(self, connection: Connection) -> None:
        try:
            while not self._closed:
                for notice in connection.notifies(timeout=_LISTEN_TICK):
                    if notice.channel == self._handover_channel:
                        self._handed(notice.payload)
                    else:
                        self._wake(notice.payload)
        except (psycopg.Error, OSError) as exc:
            if not self._closed:
                self._listener_failed("the release listener stopped", exc)
        finally:
            if self._listener is connection:
                self._listen_task = None
                self._listener = None
                self._listener_alive = False
            self._wake_all()
            self._close_quietly(connection)

    def _listener_failed(self, what: str, exc: BaseException) -> None:
        """The listener could not start, or stopped: waiters poll, and the next wait tries it
        again after _LISTEN_RETRY. Logged once per outage (a WARNING when it begins, an INFO
        when it listens again, DEBUG for each try in between), not at every try."""
        self._listen_retry_at = _shim.monotonic() + _LISTEN_RETRY
        if self._listen_failing:
            log.debug("tenure: %s: %s, again (waiters poll): %s", self.url, what,
                      self._clean(exc))
            return
        self._listen_failing = True
        log.warning("tenure: %s: %s: %s; waiters poll (each at least once a second) until it "
                    "listens again", self.url, what, self._clean(exc))

    @staticmethod
    def _close_quietly(connection: Connection) -> None:
        try:
            connection.close()
        except (psycopg.Error, OSError):
            log.debug("tenure: closing a PostgreSQL connection failed", exc_info=True)

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
            room, self._room = self._room, []
        for event in room:
            event.set()
        task, self._listen_task = self._listen_task, None
        if task is not None:
            task.stop()  # async: cancels the task; sync: the thread sees _closed within a tick
        for session in idle:  # advisory leases not released: their locks go with the sessions
            self._discard(session)
        self._wake_all()
