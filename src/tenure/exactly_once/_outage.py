"""How a relay lives through a database outage: which errors clear by themselves (transient)
and which retrying cannot clear (permanent: authentication refused, a missing database or
table), and the log lines of an outage: one WARNING when it starts, one INFO when it ends, and
for a permanent error one ERROR per `error_every` seconds, never a line per retry.

Example::

    outage = Outage(log, "outbox relay", "postgresql+psycopg://app:***@db/app")
    try:
        deliver()
    except Exception as exc:
        outage.failed(exc)          # logs only when the outage starts (or an ERROR is due)
    else:
        outage.ended()              # one INFO if an outage was going on
"""

from __future__ import annotations

import logging
import threading
import time

from tenure._errors import StoreRefused, StoreUnavailable
from tenure._urls import redact
from tenure.exactly_once._sql import sa

__all__ = ["Outage", "describe", "is_transient"]

MAX_DESCRIBED = 500  # characters of an error in a log line or a job record

# SQLSTATE classes retrying cannot clear: invalid authorization (28), invalid catalog name (3D:
# no such database), syntax error or access rule violation (42: no such table, permission
# denied), feature not supported (0A).
_PERMANENT_SQLSTATE = ("28", "3D", "42", "0A")
# SQLSTATEs that clear by themselves, whatever exception class the driver maps them to: a
# connection exception (08), a serialization failure or deadlock (40), insufficient resources
# (53), operator intervention (57: shutting down, starting up, canceled), a system error (58),
# and 26000 (invalid SQL statement name): a prepared statement the server forgot, e.g. behind
# pgbouncer, where the next try prepares it again.
_TRANSIENT_SQLSTATE = ("08", "40", "53", "57", "58", "26000")
# Within 0A000 (feature not supported): a prepared statement whose table changed (ALTER TABLE)
# since psycopg prepared it; the server drops the plan, so the next try succeeds.
_REPLANNED = "cached plan must not change result type"
# MySQL/MariaDB: access denied (1044, 1045, 1142, 1143, 1227, 1698), unknown database (1049),
# unknown column (1054), syntax (1064), no such table (1146), not supported (1235).
_PERMANENT_MYSQL = frozenset({1044, 1045, 1049, 1054, 1064, 1142, 1143, 1146, 1227, 1235, 1698})
# Drivers that give a connection failure no code (psycopg at connect time, sqlite3) say it in
# words; only read when the driver gave no code (a code's words may say "does not exist" of
# something that comes back, like a prepared statement).
_PERMANENT_WORDS = ("password authentication failed", "authentication failed",
                    "no pg_hba.conf entry", "does not exist", "permission denied",
                    "no such table", "no such column", "access denied")


def _verdict(orig: BaseException) -> bool | None:
    """What the driver's error says: True transient, False permanent, None when it says
    neither (the exception's class decides). A SQLSTATE or MySQL error code, when present,
    decides alone; the words only when there is no code."""
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(sqlstate, str) and sqlstate:
        sqlstate = sqlstate.upper()
        if sqlstate == "0A000" and _REPLANNED in str(orig).lower():
            return True
        if sqlstate.startswith(_TRANSIENT_SQLSTATE):
            return True
        if sqlstate.startswith(_PERMANENT_SQLSTATE):
            return False
        return None
    code = orig.args[0] if orig.args else None
    if isinstance(code, int) and not isinstance(code, bool):
        return False if code in _PERMANENT_MYSQL else None
    text = str(orig).lower()
    return False if any(words in text for words in _PERMANENT_WORDS) else None


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` may clear by itself (a refused, reset or timed-out connection, a database
    starting up or shutting down, a deadlock); False for what retrying cannot clear
    (authentication refused, a missing database or table, a bug).

    Example:
        >>> is_transient(ConnectionResetError("reset by peer")), is_transient(KeyError("x"))
        (True, False)
    """
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        verdict = None if exc.orig is None else _verdict(exc.orig)
        if verdict is not None:
            return verdict
        return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError,
                                sa.exc.InternalError))
    if isinstance(exc, (sa.exc.DisconnectionError, sa.exc.TimeoutError)):
        return True
    if isinstance(exc, StoreUnavailable):
        return exc.transient
    return isinstance(exc, (OSError, TimeoutError))


def describe(exc: BaseException) -> str:
    """`exc` in one line for a log: the driver's error without SQLAlchemy's statement and
    parameters (they may hold payloads), secrets redacted (tenure._urls.redact), at most 500
    characters.

    Example:
        >>> describe(ConnectionRefusedError("postgresql://app:pw@db/app: connection refused"))
        'ConnectionRefusedError: postgresql://app:***@db/app: connection refused'
    """
    inner = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    text = " ".join(str(inner).split())
    return redact(f"{type(inner).__name__}: {text}")[:MAX_DESCRIBED]


class Outage:
    """The outage state of one runner, and its log lines. Thread-safe.

    `failed(exc)` logs a WARNING when a transient outage starts, an ERROR when a permanent
    error starts one or when the last ERROR is `error_every` seconds old; `ended()` logs one
    INFO when an outage was going on. Retries in between log at DEBUG.

    Example::

        outage = Outage(logging.getLogger("tenure.outbox"), "outbox relay", "mysql://db/app")
        outage.failed(OSError("connection refused"))    # WARNING
        outage.failed(OSError("connection refused"))    # DEBUG
        outage.ended()                                  # INFO: back after 0.1 s, 2 failed tries
    """

    def __init__(self, log: logging.Logger, what: str, where: str, *,
                 error_every: float = 60.0) -> None:
        self.log = log
        self.what = what
        self.where = where
        self.error_every = error_every
        self.since: float | None = None  # time.monotonic() when the outage started
        self.tries = 0
        self._last_error: float | None = None
        self._lock = threading.Lock()

    @property
    def ongoing(self) -> bool:
        """Whether the last try failed.

        Example::

            if relay.outage.ongoing: ...
        """
        return self.since is not None

    def failed(self, exc: BaseException, retry: str = "retrying") -> None:
        """Count a failed try and log what is due. `retry` says when the next try comes.

        Example::

            outage.failed(exc, retry="retrying every 0.1 to 2 s")
        """
        now = time.monotonic()
        transient = is_transient(exc)
        with self._lock:
            starting = self.since is None
            if starting:
                self.since = now
            self.tries += 1
            error_due = not transient and (
                self._last_error is None or now - self._last_error >= self.error_every)
            if error_due:
                self._last_error = now
        if error_due:
            # A bug (not a database error) gets its traceback once; the database's refusal is
            # said in its own words.
            bug = not isinstance(exc, (sa.exc.SQLAlchemyError, OSError))
            self.log.error(
                "%s: %s failed with an error retrying cannot clear: %s (check the credentials, "
                "the database and its tables); still %s, this line repeats every %g s while "
                "it lasts", self.what, self.where, describe(exc), retry, self.error_every,
                exc_info=exc if bug and starting else None)
        elif starting:
            self.log.warning("%s: %s is unavailable: %s; %s", self.what, self.where,
                             describe(exc), retry)
        else:
            self.log.debug("%s: %s still unavailable (try %d): %s", self.what, self.where,
                           self.tries, describe(exc))

    def error(self, exc: BaseException) -> StoreUnavailable:
        """The tenure error for a runner to raise after `failed(exc)` (e.g. from a job, so its
        period counts as failed): StoreUnavailable, or StoreRefused for what retrying cannot
        clear, saying what failed in one redacted line. It carries `_tenure_logged = True`:
        this outage logged it already, so a runner that honours the flag need not log it again.

        Example::

            outage.failed(exc)
            raise outage.error(exc) from None
        """
        if is_transient(exc):
            error: StoreUnavailable = StoreUnavailable(
                f"{self.what}: {self.where} is unavailable: {describe(exc)}")
        else:
            error = StoreRefused(f"{self.what}: {self.where} failed with an error retrying "
                                 f"cannot clear: {describe(exc)}")
        error._tenure_logged = True  # type: ignore[attr-defined]
        return error

    def ended(self) -> None:
        """Mark a try that worked: logs one INFO if an outage was going on.

        Example::

            outage.ended()
        """
        with self._lock:
            since, tries = self.since, self.tries
            if since is None:
                return
            self.since = None
            self.tries = 0
            self._last_error = None
        self.log.info("%s: %s answers again after %.1f s (%d failed tries)", self.what,
                      self.where, time.monotonic() - since, tries)
