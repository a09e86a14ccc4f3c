"""What the exactly-once helpers share: the SQLAlchemy import, the database's clock as a SQL
expression, "run in the caller's transaction or a new one", and insert-if-absent.

Times are stored as float seconds since the Unix epoch, read from the database's clock
(`db_now`), never from the application's: every process then compares against one clock (the
database server's; for SQLite, the host's), so a staleness bound does not depend on the
application hosts' clocks agreeing. Dialects without a known clock expression fall back to this
process's `time.time()` as a bound parameter.

Example::

    with transaction(engine) as conn:
        conn.execute(update(table).values(claimed_at=db_now(conn)))
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from tenure._errors import InvalidArgument, InvalidArgumentType, MissingExtra
from tenure._lazy import warn_renamed
from tenure._timing import to_seconds

try:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise MissingExtra("tenure.claims, tenure.idempotency and tenure.outbox need SQLAlchemy 2: "
                       "install tenure[sql] (pip install 'tenure[sql]')") from exc

__all__ = ["Bind", "Connection", "Engine", "OwnTable", "db_now", "epoch_column",
           "in_transaction", "insert_if_absent", "is_conflict", "positive_seconds", "sa",
           "transaction"]

T = TypeVar("T")
Bind = Any  # Engine | Connection | sqlalchemy.orm.Session (kept loose: the ORM is optional)

# Julian day of 1970-01-01 and seconds per day: SQLite's clock with sub-second precision on
# every 3.x (unixepoch('subsec') needs 3.42).
_SQLITE_NOW = "(julianday('now') - 2440587.5) * 86400.0"
# MySQL/MariaDB: from UTC_TIMESTAMP(6), independent of the session's time zone, as the MySQL
# lease store does. UNIX_TIMESTAMP(NOW(6)) converts the local time back to UTC, and in the hour
# a DST change repeats it picks the first: an hour early (measured on MariaDB 10.11 with
# time_zone 'Europe/Paris'). Dividing by 1e6 (a DOUBLE) keeps the microseconds.
_MYSQL_NOW = ("(TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
              " / 1e6)")


def db_now(conn: Connection) -> sa.ColumnElement[float]:
    """The database's current time in epoch seconds, as a SQL expression for `conn`'s dialect.

    PostgreSQL uses clock_timestamp() (not now(), which is frozen at the transaction's start);
    MySQL/MariaDB UTC_TIMESTAMP(6) (not UNIX_TIMESTAMP(NOW(6)), which depends on the session's
    time zone and is an hour off in the hour a DST change repeats).

    Example::

        conn.execute(sa.select(db_now(conn))).scalar_one()   # 1767225600.123
    """
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return sa.literal_column(_SQLITE_NOW, sa.Float(53))
    if dialect == "postgresql":
        return sa.literal_column("extract(epoch from clock_timestamp())::double precision",
                                 sa.Float(53))
    if dialect in ("mysql", "mariadb"):
        return sa.literal_column(_MYSQL_NOW, sa.Float(53))
    return sa.literal(time.time(), sa.Float(53))


def epoch_column(name: str, *, nullable: bool = True) -> sa.Column[float]:
    """A column holding epoch seconds from `db_now` (DOUBLE PRECISION / REAL).

    Example::

        sa.Table("t", metadata, epoch_column("claimed_at"))
    """
    return sa.Column(name, sa.Float(53), nullable=nullable)


@contextmanager
def transaction(bind: Bind, argument: str = "conn") -> Iterator[Connection]:
    """A Connection to work on: an Engine gets a new transaction committed at the end; a
    Connection (or an ORM Session) is used as is, in the caller's transaction.

    Example::

        with transaction(engine) as conn:
            conn.execute(...)
    """
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            yield conn
    elif isinstance(bind, Connection):
        yield bind
    elif callable(getattr(bind, "connection", None)) and hasattr(bind, "commit"):
        yield bind.connection()  # an ORM Session: its current transaction's connection
    else:
        raise InvalidArgumentType(
            f"{argument} must be a SQLAlchemy Engine, Connection or Session, got "
            f"{type(bind).__name__}")


# A transaction the database rolled back to break a deadlock or a serialization conflict:
# SQLSTATE 40001/40P01 (PostgreSQL), MySQL/MariaDB error 1213. Our own transaction (an Engine's)
# is run again; a caller's is theirs to retry.
_CONFLICT_SQLSTATES = ("40001", "40P01")
_MYSQL_DEADLOCK = 1213
CONFLICT_TRIES = 5


def is_conflict(exc: BaseException) -> bool:
    """Whether `exc` is a deadlock or serialization failure that rolled its transaction back.

    Example:
        >>> is_conflict(ValueError("x"))
        False
    """
    orig = getattr(exc, "orig", None) if isinstance(exc, sa.exc.DBAPIError) else None
    if orig is None:
        return False
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(sqlstate, str) and sqlstate:
        return sqlstate.upper() in _CONFLICT_SQLSTATES
    return bool(orig.args) and orig.args[0] == _MYSQL_DEADLOCK


def in_transaction(bind: Bind, work: Callable[[Connection], T], argument: str = "conn") -> T:
    """`work(connection)` in `transaction(bind)`; on an Engine, run again (up to CONFLICT_TRIES
    times, after a short random pause) when the database broke a deadlock by rolling it back,
    as InnoDB does between racing claims of one row.

    Example::

        won = in_transaction(engine, lambda conn: conn.execute(update).rowcount == 1)
    """
    for attempt in range(1, CONFLICT_TRIES + 1):
        try:
            with transaction(bind, argument) as connection:
                return work(connection)
        except sa.exc.DBAPIError as exc:
            if not (isinstance(bind, Engine) and is_conflict(exc)) or attempt == CONFLICT_TRIES:
                raise
        time.sleep(random.uniform(0.001, 0.01 * attempt))  # the racers go at different times
    raise AssertionError("unreachable")


def connection_only(bind: Bind, argument: str = "conn") -> Connection:
    """The Connection of the caller's transaction (a Connection, or an ORM Session's); an Engine
    is refused: the write must join the caller's own transaction.

    Example::

        with engine.begin() as conn:
            connection_only(conn)
    """
    if isinstance(bind, Connection):
        return bind
    if isinstance(bind, Engine):
        raise InvalidArgumentType(
            f"{argument} must be the Connection (or ORM Session) of your own transaction, not an "
            "Engine: use `with engine.begin() as conn:` and pass conn, so the message commits "
            "or rolls back with your change")
    if callable(getattr(bind, "connection", None)) and hasattr(bind, "commit"):
        connection: Connection = bind.connection()
        return connection
    raise InvalidArgumentType(f"{argument} must be a SQLAlchemy Connection or Session, got "
                              f"{type(bind).__name__}")


def insert_if_absent(conn: Connection, table: sa.Table, values: Mapping[str, Any]) -> bool:
    """Insert a row unless one with the same primary key exists; True when inserted.

    Atomic on PostgreSQL and SQLite (INSERT ... ON CONFLICT DO NOTHING): of two concurrent
    inserts of one key exactly one returns True. Other dialects: a savepoint and the
    IntegrityError.

    Example::

        inserted = insert_if_absent(conn, inbox_table, {"consumer": "c", "message_id": "m1"})
    """
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement: Any = postgresql.insert(table).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        statement = sqlite.insert(table).values(**values).on_conflict_do_nothing()
    if dialect in ("postgresql", "sqlite"):
        # RETURNING, not rowcount: some drivers report -1 for an INSERT (psycopg under
        # SQLAlchemy 2.1); a conflict returns no row.
        first = next(iter(table.primary_key.columns))
        return conn.execute(statement.returning(first)).first() is not None
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(table).values(**values))
    except sa.exc.IntegrityError:
        return False
    return True


def positive_seconds(value: object, argument: str, *, maximum: float = 10 * 365 * 86400.0,
                     allow_zero: bool = False) -> float:
    """Seconds (int, float or timedelta) > 0 (or >= 0), checked before any I/O.

    Example:
        >>> positive_seconds(30, "stale_after")
        30.0
    """
    seconds = to_seconds(value, argument)
    low_ok = seconds >= 0 if allow_zero else seconds > 0
    if not low_ok or seconds > maximum or seconds != seconds:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(f"{argument}={value!r} must be {bound} and at most {maximum:g} s "
                              "(a number of seconds or a timedelta)")
    return seconds


def check_table(table: object, columns: tuple[str, ...], argument: str, fix: str) -> sa.Table:
    """`table` must be a sqlalchemy Table with `columns`; the error names what is missing.

    Example::

        check_table(invoices, ("status", "fence"), "table", "add claim_columns()")
    """
    if not isinstance(table, sa.Table):
        raise InvalidArgumentType(f"{argument} must be a sqlalchemy.Table, got "
                                  f"{type(table).__name__}")
    missing = [name for name in columns if name not in table.c]
    if missing:
        raise InvalidArgument(f"{argument} {table.name!r} lacks column(s) {', '.join(missing)}: "
                              f"{fix}")
    return table


class OwnTable:
    """A class whose rows live in one table of its own, `table`, which `create_tables` creates
    when it is missing (or your migrations do).

    Example::

        class Inbox(OwnTable):
            def __init__(self) -> None:
                self.table = sa.Table("tenure_inbox", sa.MetaData(), ...)

        Inbox().create_tables(engine)
    """

    table: sa.Table

    def create_tables(self, bind: Bind) -> None:
        """Create the table if missing (or use your migrations).

        Example::

            outbox.create_tables(engine)
        """
        with transaction(bind, "bind") as conn:
            self.table.create(conn, checkfirst=True)

    def create_table(self, bind: Bind) -> None:
        """Deprecated spelling of `create_tables`.

        Example::

            outbox.create_tables(engine)   # instead of outbox.create_table(engine)
        """
        kind = type(self).__name__
        warn_renamed(f"{kind}.create_table()", f"{kind}.create_tables()")
        self.create_tables(bind)
