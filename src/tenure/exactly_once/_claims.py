"""Fenced claims on your own rows: one holder processes a row at a time, a crashed holder's row is
taken over after `stale_after`, and a paused old holder's late write is rejected.

A row carries four columns (`claim_columns()`): status ('pending', 'processing', 'done'), fence
(the fencing token of the lease that claimed it), claimed_by and claimed_at (epoch seconds by
the database's clock). `claim` moves a row to 'processing' stamped with your lease's token;
`complete` applies your final write only while the row still carries that token.

Example::

    invoices = sa.Table("invoices", metadata, sa.Column("id", sa.Integer, primary_key=True),
                        sa.Column("amount", sa.Integer), *claims.claim_columns())

    with lock.acquire() as lease:
        for row in claims.pending_or_stale(engine, invoices, stale_after=60):
            if claims.claim(engine, invoices, row.id, holder="web-1", token=lease.token,
                            stale_after=60):
                pay(row)
                with engine.begin() as conn:
                    if not claims.complete(conn, invoices, row.id, lease.token):
                        raise RuntimeError("overtaken by a newer holder")  # rolls back
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure.exactly_once._sql import (
    Bind,
    Connection,
    check_table,
    db_now,
    epoch_column,
    in_transaction,
    positive_seconds,
    sa,
    transaction,
)

log = logging.getLogger("tenure.claims")

PENDING = "pending"
PROCESSING = "processing"
DONE = "done"
CLAIM_COLUMNS = ("status", "fence", "claimed_by", "claimed_at")
_FIX = "add the columns with *claims.claim_columns() (or claims.migration_ddl() for an " \
       "existing table)"

_meter = metrics.get_meter("tenure")
_claimed = _meter.create_counter("tenure.claims.claimed", unit="{row}",
                                 description="Rows claimed (attribute stale: taken over)")
_completed = _meter.create_counter("tenure.claims.completed", unit="{row}",
                                   description="Final writes applied under a live claim")
_rejected = _meter.create_counter(
    "tenure.claims.rejected", unit="{write}",
    description="Late writes refused because a newer fencing token claimed the row")


@dataclass(frozen=True)
class ClaimStats:
    """This process's claim counters since start (or `reset_stats()`).

    Example:
        >>> ClaimStats(claimed=3, stale_takeovers=1, completed=2, rejected=1).rejected
        1
    """

    claimed: int = 0
    stale_takeovers: int = 0
    completed: int = 0
    rejected: int = 0


_stats_lock = threading.Lock()
_stats = ClaimStats()


def _count(**increments: int) -> None:
    global _stats
    with _stats_lock:
        values = {name: getattr(_stats, name) + increments.get(name, 0)
                  for name in ClaimStats.__dataclass_fields__}
        _stats = ClaimStats(**values)


def stats() -> ClaimStats:
    """Counters of this process: rows claimed, stale takeovers, completions, rejected writes.

    Example::

        print(claims.stats().rejected)   # stale late writes refused by fencing
    """
    return _stats


def reset_stats() -> None:
    """Zero this process's counters (tests, demos).

    Example::

        claims.reset_stats()
    """
    global _stats
    with _stats_lock:
        _stats = ClaimStats()


@dataclass(frozen=True)
class Claim:
    """The outcome of `claim`: truthy when won; `stale_takeover` when the row was taken from a
    holder whose claim was older than `stale_after`.

    Example:
        >>> bool(Claim(key=7, won=True, stale_takeover=False, token=12, holder="web-1"))
        True
    """

    key: Any
    won: bool
    stale_takeover: bool
    token: int
    holder: str

    def __bool__(self) -> bool:
        return self.won


def claim_columns(*, status_length: int = 16, holder_length: int = 255) -> list[sa.Column[Any]]:
    """The four columns `claim` needs, to splat into your Table definition.

    status (NOT NULL, default 'pending'), fence (BIGINT, the claiming lease's fencing token),
    claimed_by (the holder's id), claimed_at (epoch seconds by the database's clock).

    Example::

        invoices = sa.Table("invoices", metadata,
                            sa.Column("id", sa.Integer, primary_key=True),
                            *claims.claim_columns())
    """
    return [
        sa.Column("status", sa.String(status_length), nullable=False, server_default=PENDING,
                  default=PENDING, index=True),
        sa.Column("fence", sa.BigInteger, nullable=True),
        sa.Column("claimed_by", sa.String(holder_length), nullable=True),
        epoch_column("claimed_at"),
    ]


def migration_ddl(table_name: str, dialect: str = "postgresql") -> list[str]:
    """ALTER TABLE statements adding the claim columns to an existing table (then run them, or
    paste them into your migration tool).

    Example:
        >>> migration_ddl("invoices", "sqlite")[0]
        "ALTER TABLE invoices ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'pending'"
    """
    if not isinstance(table_name, str) or not table_name.replace("_", "").replace(".", "") \
            .isalnum():
        raise InvalidArgument(f"table_name={table_name!r} must be a plain SQL identifier "
                              "(letters, digits, _ and an optional schema.)")
    real = {"postgresql": "DOUBLE PRECISION", "sqlite": "REAL", "mysql": "DOUBLE",
            "mariadb": "DOUBLE"}
    if dialect not in real:
        raise InvalidArgument(f"dialect={dialect!r}: use one of {', '.join(real)}")
    index_name = table_name.replace(".", "_") + "_status"
    return [
        f"ALTER TABLE {table_name} ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'pending'",
        f"ALTER TABLE {table_name} ADD COLUMN fence BIGINT",
        f"ALTER TABLE {table_name} ADD COLUMN claimed_by VARCHAR(255)",
        f"ALTER TABLE {table_name} ADD COLUMN claimed_at {real[dialect]}",
        f"CREATE INDEX {index_name} ON {table_name} (status)",
    ]


def _key_column(table: sa.Table, key_column: str | None) -> sa.Column[Any]:
    if key_column is not None:
        if key_column not in table.c:
            raise InvalidArgument(f"key_column={key_column!r} is not a column of {table.name!r}")
        return table.c[key_column]
    primary = list(table.primary_key.columns)
    if len(primary) != 1:
        raise InvalidArgument(f"table {table.name!r} has no single-column primary key: pass "
                              "key_column='<the column that identifies a row>'")
    return primary[0]


def _check(table: object, token: object, holder: object | None = None) -> sa.Table:
    checked = check_table(table, CLAIM_COLUMNS, "table", _FIX)
    if not isinstance(token, int) or isinstance(token, bool):
        raise InvalidArgumentType(f"token must be an int (the lease's fencing token, "
                                  f"lease.token), got {type(token).__name__}")
    if token < 0:
        raise InvalidArgument(f"token={token} must be >= 0 (a lease's fencing token)")
    if holder is not None and (not isinstance(holder, str) or not 0 < len(holder) <= 255):
        raise InvalidArgument(f"holder={holder!r} must be a non-empty str of at most 255 "
                              "characters (e.g. the store's holder id)")
    return checked


def claim(conn: Bind, table: sa.Table, key: Any, *, holder: str, token: int,
          stale_after: float | Any, key_column: str | None = None) -> Claim:
    """Atomically move row `key` from 'pending' (or from 'processing' claimed more than
    `stale_after` ago by the database's clock) to 'processing', stamped with `holder` and your
    lease's fencing `token`. Never takes a row whose fence is newer than `token`.

    `conn`: an Engine (own transaction, committed at once) or your Connection/Session (your
    transaction: commit it before the long work, or others wait on the row).

    Example::

        won = claims.claim(engine, invoices, 42, holder=store.holder, token=lease.token,
                           stale_after=timedelta(minutes=5))
        if won:
            ...
    """
    checked = _check(table, token, holder)
    stale = positive_seconds(stale_after, "stale_after")
    column = _key_column(checked, key_column)

    def take(connection: Connection) -> tuple[bool, bool]:
        now = db_now(connection)
        c = checked.c
        unfenced = sa.or_(c.fence.is_(None), c.fence <= token)
        stamp = {"status": PROCESSING, "fence": token, "claimed_by": holder, "claimed_at": now}
        base = sa.update(checked).where(column == key, unfenced).values(**stamp)
        if connection.execute(base.where(c.status == PENDING)).rowcount == 1:
            return True, False
        stale_row = sa.and_(c.status == PROCESSING,
                            sa.or_(c.claimed_at.is_(None), c.claimed_at < now - stale))
        taken = connection.execute(base.where(stale_row)).rowcount == 1
        return taken, taken

    won, took_over = in_transaction(conn, take)
    if won:
        _count(claimed=1, stale_takeovers=int(took_over))
        _claimed.add(1, {"table": checked.name, "stale": took_over})
    return Claim(key=key, won=won, stale_takeover=took_over, token=token, holder=holder)


def complete(conn: Bind, table: sa.Table, key: Any, token: int,
             values: Mapping[str, Any] | None = None, *, status: str = DONE,
             key_column: str | None = None) -> bool:
    """Apply the final write (`values`, and status 'done') only if row `key` is still
    'processing' under `token`; False when a newer holder overtook it: the write is not applied,
    it is counted and logged at WARNING on logger "tenure.claims".

    Pass your Connection to make it atomic with your other writes, and roll back when False.

    Example::

        with engine.begin() as conn:
            conn.execute(sa.insert(payments).values(invoice=42, charge=charge_id))
            if not claims.complete(conn, invoices, 42, lease.token, {"paid": True}):
                raise StaleClaim(42)    # rolls the payment row back too
    """
    checked = _check(table, token)
    updates = dict(values or {})
    unknown = sorted(name for name in updates if name not in checked.c)
    if unknown:
        raise InvalidArgument(f"values has column(s) {', '.join(unknown)} not in table "
                              f"{checked.name!r}")
    updates.update(status=status)
    column = _key_column(checked, key_column)
    c = checked.c

    def write(connection: Connection) -> tuple[bool, Any]:
        statement = (sa.update(checked)
                     .where(column == key, c.status == PROCESSING, c.fence == token)
                     .values(**updates))
        if connection.execute(statement).rowcount == 1:
            return True, None
        return False, connection.execute(
            sa.select(c.status, c.fence, c.claimed_by).where(column == key)).first()

    written, current = in_transaction(conn, write)
    if written:
        _count(completed=1)
        _completed.add(1, {"table": checked.name})
        return True
    _count(rejected=1)
    _rejected.add(1, {"table": checked.name})
    now = "missing" if current is None else (
        f"status {current.status!r}, fence {current.fence}, claimed by {current.claimed_by!r}")
    log.warning("stale write rejected on %s key %r: token %d no longer holds the row (now %s)",
                checked.name, key, token, now)
    return False


def release(conn: Bind, table: sa.Table, key: Any, token: int, *,
            key_column: str | None = None) -> bool:
    """Give a claimed row back (status 'pending') so any holder may claim it at once, e.g. after
    a failure worth retrying; only while the row still carries `token`.

    Example::

        claims.release(engine, invoices, 42, lease.token)
    """
    checked = _check(table, token)
    with transaction(conn) as connection:
        column = _key_column(checked, key_column)
        c = checked.c
        statement = (sa.update(checked)
                     .where(column == key, c.status == PROCESSING, c.fence == token)
                     .values(status=PENDING, claimed_by=None, claimed_at=None))
        return connection.execute(statement).rowcount == 1


def pending_or_stale(conn: Bind, table: sa.Table, *, stale_after: float | Any,
                     limit: int = 100, where: Sequence[sa.ColumnElement[bool]] = (),
                     key_column: str | None = None) -> list[sa.Row[Any]]:
    """Rows worth claiming: 'pending', or 'processing' with a claim older than `stale_after`
    (by the database's clock), ordered by key, at most `limit`. `where` adds your own filters.

    A plain read: a row listed here may be claimed by someone else before you; `claim` decides.

    Example::

        for row in claims.pending_or_stale(engine, invoices, stale_after=60, limit=50):
            claims.claim(engine, invoices, row.id, holder=me, token=lease.token, stale_after=60)
    """
    checked = check_table(table, CLAIM_COLUMNS, "table", _FIX)
    stale = positive_seconds(stale_after, "stale_after")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1_000_000:
        raise InvalidArgument(f"limit={limit!r} must be an int from 1 to 1000000")
    with transaction(conn) as connection:
        column = _key_column(checked, key_column)
        c = checked.c
        now = db_now(connection)
        wanted = sa.or_(c.status == PENDING,
                        sa.and_(c.status == PROCESSING,
                                sa.or_(c.claimed_at.is_(None), c.claimed_at < now - stale)))
        query = sa.select(checked).where(wanted, *where).order_by(column).limit(limit)
        return list(connection.execute(query).all())

