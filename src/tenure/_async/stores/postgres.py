"""`postgresql://USER@HOST:PORT/DB`: leases in a table of a PostgreSQL database (psycopg 3).

One row per (name, slot) in the table `tenure_leases` of the schema `public` (or `?table=`,
`?schema=`), created on first use; slot 0's row also keeps the name's fencing counter. Expiry
is decided by the database server's clock (`now()`), never the client's. Acquire, renew (a
whole batch), release and break are each ONE autocommit statement, so a lock cycle costs two
round trips; release notifies waiters through LISTEN/NOTIFY in the same statement. Nothing
depends on session state, so the store also works through PgBouncer in transaction pooling
mode (`?pgbouncer=true`: waiters then poll instead of listening).

Example::

    store = tenure.connect("postgresql://app@db.internal/app?schema=locks")
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import secrets
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tenure._async import _shim
from tenure._async.stores._protocol import AsyncBackend
from tenure._errors import InvalidArgument, InvalidArgumentType, MissingExtra, StoreUnavailable
from tenure._names import name_digest
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import redact

try:
    import psycopg
    from psycopg import errors, sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import ConnStatus, TransactionStatus
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra(
        "the postgresql:// store needs psycopg 3: install tenure[postgres]"
    ) from exc

log = logging.getLogger("tenure")

Connection = psycopg.AsyncConnection[tuple[Any, ...]]
Cursor = psycopg.AsyncCursor[tuple[Any, ...]]

OPTIONS = ("schema", "table", "timeout", "pool_size", "notify", "pgbouncer",
           "prepare_threshold")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How often the sync listener thread looks at the store's closed flag between notifications.
_LISTEN_TICK = 1.0
# After the listener connection failed, waiters poll for this long before it is tried again.
_LISTEN_RETRY = 1.0
# Two acquirers of a semaphore may pick the same free slot; the loser tries again this often.
_SLOT_RETRIES = 4

# -- the statements ---------------------------------------------------------------------------
# {t} is the lease table (schema-qualified, quoted). Slot 0's row of a name also keeps the
# name's fencing counter and whether someone waits for the name; that row is never deleted (a
# released slot is only marked free).

_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    name       bytea       NOT NULL,  -- the lock name in UTF-8 (text cannot hold NUL)
    slot       integer     NOT NULL,
    holder     bytea       NOT NULL,
    lease_id   text        NOT NULL,  -- '' once released or broken
    token      bigint      NOT NULL,  -- the token of the slot's last grant
    counter    bigint      NOT NULL,  -- slot 0: the name's fencing counter (else unused)
    expires_at timestamptz NOT NULL,  -- by the server's clock; '-infinity' once freed
    wanted     boolean     NOT NULL,  -- slot 0: someone found the name held since its last grant
    PRIMARY KEY (name, slot)
) WITH (fillfactor = 50)  -- room for HOT updates: a cycle rewrites no index entry
"""

# A missing counter starts at the server's clock in microseconds, so tokens keep growing even
# when the table was dropped or the database restored from an old backup.
_SEED = "(extract(epoch FROM now()) * 1000000)::bigint"
# The slot is free for this acquire: expired or released, or already granted to this very
# lease id (an acquire retried after its connection broke; the first try may have committed).
_FREE = "(l.expires_at <= now() OR l.lease_id = excluded.lease_id)"

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

# A lock (limit 1), ONE statement on ONE row (slot 0, counter and lease together): grant when
# free; else mark the name wanted (once). Answers (granted, token), or nothing.
_ACQUIRE_LOCK = """
INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
VALUES (%(name)s, 0, %(holder)s, %(lease_id)s, {seed}, {seed},
        now() + %(ttl)s * interval '1 second', false)
ON CONFLICT (name, slot) DO UPDATE SET
    holder = CASE WHEN {free} THEN excluded.holder ELSE l.holder END,
    lease_id = CASE WHEN {free} THEN excluded.lease_id ELSE l.lease_id END,
    token = CASE WHEN {free} THEN l.counter + 1 ELSE l.token END,
    counter = CASE WHEN {free} THEN l.counter + 1 ELSE l.counter END,
    expires_at = CASE WHEN {free} THEN excluded.expires_at ELSE l.expires_at END,
    wanted = NOT {free}
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
    LEFT JOIN {t} AS l ON l.name = %(name)s AND l.slot = s.slot
    WHERE l.slot IS NULL OR l.expires_at <= now() OR l.lease_id = %(lease_id)s
    ORDER BY coalesce(l.lease_id = %(lease_id)s, false) DESC, s.slot LIMIT 1
), zero AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, 0, %(holder)s, %(lease_id)s, {seed}, {seed},
           now() + %(ttl)s * interval '1 second', false
    FROM free WHERE free.slot = 0
    ON CONFLICT (name, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = l.counter + 1,
        counter = l.counter + 1, expires_at = excluded.expires_at, wanted = false
    WHERE {free}
    RETURNING l.slot, l.token
), counter AS (
    INSERT INTO {t} AS c (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, 0, '', '', 0, {seed}, '-infinity', false FROM free WHERE free.slot > 0
    ON CONFLICT (name, slot) DO UPDATE SET counter = c.counter + 1, wanted = false
    RETURNING c.counter
), other AS (
    INSERT INTO {t} AS l (name, slot, holder, lease_id, token, counter, expires_at, wanted)
    SELECT %(name)s, free.slot, %(holder)s, %(lease_id)s, counter.counter, 0,
           now() + %(ttl)s * interval '1 second', false
    FROM free, counter
    ON CONFLICT (name, slot) DO UPDATE SET
        holder = excluded.holder, lease_id = excluded.lease_id, token = excluded.token,
        expires_at = excluded.expires_at
    WHERE {free}
    RETURNING l.slot, l.token
), mark AS (
    UPDATE {t} SET wanted = true
    WHERE name = %(name)s AND slot = 0 AND NOT wanted AND NOT EXISTS (SELECT FROM free)
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
    WHERE l.name = w.name AND l.slot = w.slot AND l.lease_id = w.lease_id
      AND l.expires_at > now()
    RETURNING w.i
)
SELECT CASE WHEN r.i IS NOT NULL THEN ''
            WHEN l.lease_id IS NULL OR l.lease_id = '' THEN 'broken'
            WHEN l.lease_id <> w.lease_id THEN 'taken'
            ELSE 'expired' END
FROM batch AS w
LEFT JOIN renewed AS r ON r.i = w.i
LEFT JOIN {t} AS l ON l.name = w.name AND l.slot = w.slot
ORDER BY w.i
"""

# Release frees the row when the lease id matches and, when someone waits for the name (slot
# 0's `wanted`), notifies listeners in the same statement (delivered at commit).
_RELEASE = """
UPDATE {t} AS l SET lease_id = '', expires_at = '-infinity'
WHERE name = %(name)s AND slot = %(slot)s AND lease_id = %(lease_id)s AND expires_at > now()
RETURNING CASE
    WHEN l.wanted THEN pg_notify(%(channel)s, %(key)s)
    WHEN l.slot > 0 AND (SELECT z.wanted FROM {t} AS z WHERE z.name = l.name AND z.slot = 0)
        THEN pg_notify(%(channel)s, %(key)s)
END
"""

# Break frees every live slot of the name and always notifies.
_BREAK = """
WITH freed AS (
    UPDATE {t} SET lease_id = '', expires_at = '-infinity'
    WHERE name = %(name)s AND expires_at > now()
    RETURNING slot
)
SELECT pg_notify(%(channel)s, %(key)s) FROM freed
"""

_LIST = """
SELECT name, slot, holder, token, extract(epoch FROM expires_at - now())::float8 FROM {t}
WHERE expires_at > now() AND name >= %(prefix)s
  AND substring(name FROM 1 FOR %(length)s) = %(prefix)s
ORDER BY name, slot
"""


def _render(template: str, table: sql.Identifier) -> bytes:
    """The statement with the quoted table name in place, rendered once per store."""
    return sql.SQL(template.strip()).format(
        t=table, seed=sql.SQL(_SEED), free=sql.SQL(_FREE)).as_bytes(None)


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


class AsyncPostgresStore(AsyncBackend):
    """Leases in a PostgreSQL table, reached with psycopg 3 through a small connection pool.

    `url` is a libpq URL (`postgresql://` or `postgres://`); its query parameters go to libpq
    (sslmode, application_name, ...) except tenure's own options, which may also be given as
    keywords (the keyword wins): schema ("public"), table ("tenure_leases"), timeout (5 s),
    pool_size (10), notify (True), pgbouncer (False), prepare_threshold (psycopg's 5, or None).

    Example::

        backend = AsyncPostgresStore("postgresql://app@db/app", schema="locks", timeout=3)
        store = tenure.aio.connect(backend)
    """

    def __init__(self, url: str, **options: Any) -> None:
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        self.url = redact(url)
        self._password = urlsplit(url).password or ""
        dsn, settings = self._split(url, options)
        self.schema = _as_identifier("schema", settings.get("schema", "public"), 63)
        self.table = _as_identifier("table", settings.get("table", "tenure_leases"), 63)
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
        threshold = settings.get("prepare_threshold", None if self._pgbouncer else 5)
        if threshold is not None and str(threshold).lower() in ("none", "off", ""):
            threshold = None
        self._prepare = None if threshold is None else _as_count("prepare_threshold",
                                                                  threshold, 0, 1_000_000)
        self._params = self._libpq_params(dsn)
        self.capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0,
                                         notifies_release=self._notify, batched_renewal=True)

        table = sql.Identifier(self.schema, self.table)
        self._ddl = _render(_DDL, table)
        self._create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(self.schema)).as_bytes(None)
        self._acquire_lock_sql = _render(_ACQUIRE_LOCK, table)
        self._acquire_slot_sql = _render(_ACQUIRE_SLOT, table)
        self._renew_sql = _render(_RENEW, table)
        self._release_sql = _render(_RELEASE, table)
        self._break_sql = _render(_BREAK, table)
        self._list_sql = _render(_LIST, table)
        self.channel = _channel(self.schema, self.table)

        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._mutex = threading.Lock()  # never held across I/O: serves threads and tasks alike
        self._closed = False
        # The pool: idle connections (last in, first out), how many exist, who waits for one.
        self._idle: list[Cursor] = []
        self._opened = 0
        self._room: list[_shim.Event] = []
        # The listener: one connection of its own, read by a background task or thread.
        self._listener: Connection | None = None
        self._listen_task: _shim.Background | None = None
        self._listen_starting = False
        self._listen_retry_at = -math.inf
        self._waiters: dict[str, list[_shim.Event]] = {}
        self._missed: dict[str, float] = {}  # key -> when a try_acquire that found it held began
        self._released: dict[str, float] = {}  # key -> when its last release notice arrived

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
        return base + ("?" + urlencode(libpq) if libpq else ""), settings

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
        if self._password:
            message = message.replace(self._password, "***")
        return redact(message)

    def _failure(self, operation: str, name: str, exc: psycopg.Error) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to check."""
        if isinstance(exc, errors.InsufficientPrivilege):
            hint = (f"grant this user USAGE and CREATE on schema {self.schema!r} (or create "
                    f"the table as the docs show) and SELECT, INSERT, UPDATE on {self.table!r}")
        elif isinstance(exc, errors.QueryCanceled):
            hint = (f"the statement ran past timeout={self._timeout:g} s: is the server "
                    "overloaded, or a long transaction holding the lease rows locked?")
        elif isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            hint = ("check that PostgreSQL is running and reachable at this address, and the "
                    "user, password (PGPASSWORD or ~/.pgpass) and database")
        else:
            hint = "check the server's log for this error"
        return StoreUnavailable(f"{self.url}: {operation} of {name!r} failed: "
                                f"{self._clean(exc)}; {hint}")

    # -- connections --------------------------------------------------------------------------

    async def _connect(self) -> Cursor:
        connection: Connection = await psycopg.AsyncConnection.connect(
            **self._params, autocommit=True, prepare_threshold=self._prepare)
        return connection.cursor()

    # The pool keeps one cursor per connection and reuses it: a new cursor per statement costs
    # about as much client time as the server spends on a lease statement.

    async def _take(self) -> Cursor:
        """An idle connection's cursor (checked without a round trip), or a new connection's;
        waits up to `timeout` while `pool_size` connections are busy."""
        deadline = -math.inf
        while True:
            room: _shim.Event | None = None
            with self._mutex:
                if self._closed:
                    raise StoreUnavailable(f"{self.url}: the store is closed; connect again")
                cursor = self._idle.pop() if self._idle else None
                opening = cursor is None and self._opened < self._pool_size
                if opening:
                    self._opened += 1
                elif cursor is None:
                    room = _shim.Event()
                    self._room.append(room)
            if cursor is not None:
                if _alive(cursor.connection):
                    return cursor
                await self._discard(cursor)  # dropped by the server: open another
            elif opening:
                try:
                    return await self._connect()
                except BaseException:
                    self._forget_one()
                    raise
            elif room is not None:
                if deadline == -math.inf:
                    deadline = _shim.monotonic() + self._timeout
                left = deadline - _shim.monotonic()
                if left <= 0 or not await _shim.wait_event(room, left):
                    raise StoreUnavailable(
                        f"{self.url}: all {self._pool_size} connections stayed busy for "
                        f"{self._timeout:g} s; raise pool_size or lower the concurrency")

    async def _give_back(self, cursor: Cursor) -> None:
        connection = cursor.connection
        if connection.closed or connection.pgconn.transaction_status != TransactionStatus.IDLE:
            await self._discard(cursor)  # broken, or interrupted mid-statement
            return
        with self._mutex:
            keep = not self._closed
            if keep:
                self._idle.append(cursor)
                room, self._room = self._room, []
        if not keep:
            await self._discard(cursor)
            return
        for event in room:
            event.set()

    async def _discard(self, cursor: Cursor) -> None:
        self._forget_one()
        try:
            await cursor.connection.close()
        except (psycopg.Error, OSError):
            log.debug("tenure: closing a broken PostgreSQL connection failed", exc_info=True)

    def _forget_one(self) -> None:
        with self._mutex:
            self._opened -= 1
            room, self._room = self._room, []
        for event in room:
            event.set()

    async def _execute(self, operation: str, name: str, query: bytes,
                       params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement on a pooled connection; create the table when it is missing.

        A connection the server dropped while it sat idle (pg_terminate_backend, restart) may
        look fine until used: when the statement breaks its connection, it runs once more on
        a new one. Every statement is safe to repeat: renew, release and break by lease id
        or name, and acquire by its lease id (see _FREE)."""
        for attempt in (1, 2):
            cursor: Cursor | None = None
            try:
                cursor = await self._take()
                try:
                    try:
                        await cursor.execute(query, params)
                    except (errors.UndefinedTable, errors.InvalidSchemaName):
                        await self._create_tables(cursor)
                        await cursor.execute(query, params)
                    return await cursor.fetchall() if cursor.description else []
                finally:
                    await self._give_back(cursor)
            except psycopg.OperationalError as exc:
                if attempt == 2 or cursor is None or not cursor.connection.broken:
                    raise self._failure(operation, name, exc) from exc
                log.debug("tenure: %s: a dropped connection; trying again", self.url)
            except psycopg.Error as exc:
                raise self._failure(operation, name, exc) from exc
        raise AssertionError("unreachable")

    async def _create_tables(self, cursor: Cursor) -> None:
        """CREATE .. IF NOT EXISTS in one implicit transaction. Two processes creating the same
        table at once can both pass the IF NOT EXISTS check, and the loser fails on a catalog
        unique index (pg_type, pg_namespace): it tries again and then finds the table."""
        for attempt in itertools.count():
            try:
                try:
                    await cursor.execute(self._ddl)
                except errors.InvalidSchemaName:
                    await cursor.execute(self._create_schema)
                    await cursor.execute(self._ddl)
                return
            except (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject,
                    errors.DuplicateSchema):
                if attempt >= 5:
                    raise
                await _shim.sleep(0.01 * (attempt + 1))

    # -- leases -------------------------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "limit": limit, "holder": holder.encode(),
                  "lease_id": lease_id, "ttl": ttl}
        started = _shim.monotonic()
        if limit == 1:
            rows = await self._execute("acquire", name, self._acquire_lock_sql, params)
            if rows and rows[0][0]:  # (granted, token); (False, _) when it only marked wanted
                return Grant(name, 0, holder, lease_id, rows[0][1], name)
        else:
            for _ in range(_SLOT_RETRIES):
                rows = await self._execute("acquire", name, self._acquire_slot_sql, params)
                if not rows:
                    break  # no slot was free
                slot, token = rows[0]
                if slot >= 0:
                    return Grant(name, slot, holder, lease_id, token, name)
                # Another acquirer took the slot we picked at the same moment; another may
                # still be free.
        if self._listen_task is not None:  # see wait_released
            self._note_missed(name_digest(name), started)
        return None

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        if not grants:
            return []
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        rows = await self._execute("renewal", label, self._renew_sql, {
            "names": [grant.name.encode() for grant in grants],
            "slots": [grant.slot for grant in grants],
            "ids": [grant.lease_id for grant in grants],
            "ttl": ttl,
        })
        return [grant if not row[0] else LostReason(row[0])
                for grant, row in zip(grants, rows, strict=True)]

    async def release(self, grant: Grant) -> bool:
        rows = await self._execute("release", grant.name, self._release_sql, {
            "name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
            "channel": self.channel, "key": name_digest(grant.name)})
        return bool(rows)

    async def break_lease(self, name: str) -> int:
        rows = await self._execute("break", name, self._break_sql, {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        encoded = prefix.encode()
        rows = await self._execute("listing", prefix, self._list_sql,
                                   {"prefix": encoded, "length": len(encoded)})
        now = datetime.now(timezone.utc)
        return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token,
                          now + timedelta(seconds=left), slot)
                for name, slot, holder, token, left in rows]

    # -- hand-off by LISTEN/NOTIFY ------------------------------------------------------------

    async def wait_released(self, name: str, timeout: float) -> None:
        if not self._notify:
            await _shim.sleep(timeout)  # no notifications: the core polls with backoff
            return
        if not await self._listening():
            # The listener is down (or starting): poll, and try it again within a second.
            await _shim.sleep(min(timeout, _LISTEN_RETRY))
            return
        key = name_digest(name)
        event = _shim.Event()
        with self._mutex:
            self._waiters.setdefault(key, []).append(event)
            missed = self._missed.pop(key, None)
            # A release noticed after our failed try began would otherwise be lost on us.
            released = missed is not None and self._released.get(key, -math.inf) >= missed
        try:
            if not released:
                await _shim.wait_event(event, timeout)
        finally:
            with self._mutex:
                waiting = self._waiters.get(key, [])
                if event in waiting:
                    waiting.remove(event)
                if not waiting:
                    self._waiters.pop(key, None)
                    self._released.pop(key, None)

    def _note_missed(self, key: str, started: float) -> None:
        with self._mutex:
            if len(self._missed) > 10_000:  # try_acquire callers that never wait
                self._missed.clear()
                self._released.clear()
            self._missed[key] = started

    def _wake(self, key: str) -> None:
        with self._mutex:
            if key in self._missed or key in self._waiters:
                self._released[key] = _shim.monotonic()
            events = self._waiters.get(key, [])
        for event in events:
            event.set()

    def _wake_all(self) -> None:
        """The listener stopped: everyone polls now rather than at the end of its backoff."""
        with self._mutex:
            events = [event for waiting in self._waiters.values() for event in waiting]
        for event in events:
            event.set()

    async def _listening(self) -> bool:
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
            connection = await psycopg.AsyncConnection.connect(
                **self._params, autocommit=True, prepare_threshold=None)
            try:
                await connection.execute(
                    sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            except BaseException:
                await connection.close()
                raise
        except BaseException as exc:
            self._listen_starting = False
            if not isinstance(exc, psycopg.Error):
                raise
            self._listen_retry_at = _shim.monotonic() + _LISTEN_RETRY
            log.info("tenure: %s: cannot listen for releases (waiters poll): %s", self.url,
                     self._clean(exc))
            return False
        stale, self._listener = self._listener, connection

        async def run() -> None:
            await self._listen(connection)

        self._listen_task = _shim.spawn(run, "tenure-postgres-listener")
        self._listen_starting = False
        if stale is not None:  # the listener of an event loop that is gone
            await self._close_quietly(stale)
        return True

    async def _listen(self, connection: Connection) -> None:
        try:
            while not self._closed:
                async for notice in connection.notifies(timeout=_LISTEN_TICK):
                    self._wake(notice.payload)
        except (psycopg.Error, OSError) as exc:
            if not self._closed:
                self._listen_retry_at = _shim.monotonic() + _LISTEN_RETRY
                log.info("tenure: %s: release listener stopped (waiters poll): %s", self.url,
                         self._clean(exc))
        finally:
            if self._listener is connection:
                self._listen_task = None
                self._listener = None
            self._wake_all()
            await self._close_quietly(connection)

    @staticmethod
    async def _close_quietly(connection: Connection) -> None:
        try:
            await connection.close()
        except (psycopg.Error, OSError):
            log.debug("tenure: closing the PostgreSQL listener failed", exc_info=True)

    async def close(self) -> None:
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
            room, self._room = self._room, []
        for event in room:
            event.set()
        task, self._listen_task = self._listen_task, None
        if task is not None:
            task.stop()  # async: cancels the task; sync: the thread sees _closed within a tick
        for cursor in idle:
            await self._discard(cursor)
        self._wake_all()
