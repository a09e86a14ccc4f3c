"""How runner loops live through a store (or queue source) that fails: one shared `Outage` per
store says when it stopped answering, and each runner loop's `Retry` decides how long to back
off and what to log.

Logging, per store: ONE warning when an outage starts (naming the runner that met it first,
the store and the error) and ONE info line when it ends ("... reachable again after 3.2 s"),
not a line per retry. A permanent error (`StoreRefused`: `exc.transient` is False) and an
error tenure does not know (a custom queue source's driver error, or a bug: logged with its
traceback) are logged at ERROR by each runner once per its period (once per RETRY_CAP for
runners without one), and retried all the same: fixing the credentials recovers the worker
without a restart.

An outage remembers what kind of call failed: one that a write or lease call opened (a store
that turned read-only, a user without write rights) ends only when such a call succeeds, not
when a read answers (else it would end and open again on every retry).

Retries back off exponentially with full jitter from RETRY_FIRST to RETRY_CAP seconds: the cap
is the retry interval, so a runner resumes within RETRY_CAP of the store answering again.

Start-up: until one call to a store has succeeded, nothing has proved the worker's
configuration right, so a refusal then (`transient` False: a wrong password, a missing
database) is the user's setup: `Outage.refused_at_start` says so, and the worker stops and
raises it. An error tenure does not know never stops it: it may be a passing network error.
Errors in the user's own setup (`InvalidArgument`, `InvalidArgumentType`, `MissingExtra`)
stop the worker whenever they come.

Example::

    outage = Outage("store redis://cache:6379/0")
    retry = Retry(outage, "job 'app.rollup'", every=300)
    while not stopping.is_set():
        started = anyio.current_time()
        try:
            await do_one_round()
            retry.succeeded()
        except Exception as exc:
            retry.failed(exc, started)           # logs as needed; raises a setup error
            await sleep_unless_stopped(stopping, retry.delay())
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreUnavailable,  # noqa: F401 - the doctests' examples use it
    TenureError,
)
from tenure._timing import Backoff
from tenure._urls import redact

log = logging.getLogger("tenure.jobs")

RETRY_FIRST = 0.1  # seconds: the first retry after a failure
RETRY_CAP = 2.0  # seconds: the longest wait between retries (the "retry interval")
MAX_ERROR_TEXT = 500

SETUP_ERRORS = (InvalidArgument, InvalidArgumentType, MissingExtra)

READ = "read"  # a call that only reads (records, leases)
WRITE = "write"  # a call that writes or takes part in a lease (acquire, renew, record writes)


def is_setup_error(exc: BaseException) -> bool:
    """True for errors in the user's own setup, which stop a worker whenever they come.

    Example:
        >>> is_setup_error(InvalidArgument("ttl=0 must be above 0"))
        True
    """
    return isinstance(exc, SETUP_ERRORS)


def is_refusal(exc: BaseException) -> bool:
    """True for an error that says retrying will not clear it (`exc.transient` is False, e.g.
    StoreRefused): the only kind that stops a worker, and only before the store ever answered.

    Example:
        >>> from tenure._errors import StoreRefused
        >>> is_refusal(StoreRefused("bad password")), is_refusal(ValueError("?"))
        (True, False)
    """
    return getattr(exc, "transient", None) is False


def is_transient(exc: BaseException) -> bool:
    """True when `exc` is an outage tenure knows (a tenure error, or a connection or timeout
    error of a driver) and retrying may clear it; False for a refusal (see is_refusal) and for
    errors tenure does not know (retried as well, but logged at ERROR with a traceback).

    Example:
        >>> from tenure._errors import StoreRefused
        >>> is_transient(StoreUnavailable("timed out")), is_transient(StoreRefused("bad password"))
        (True, False)
    """
    if is_refusal(exc):
        return False
    return isinstance(exc, (TenureError, OSError, TimeoutError))


def describe(exc: BaseException) -> str:
    """`exc` as one line for logs and health reports, secrets redacted, length capped.

    Example:
        >>> describe(StoreUnavailable("redis://:pw@db:6379/0: connection refused"))
        'StoreUnavailable: redis://:***@db:6379/0: connection refused'
    """
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return redact(text)[:MAX_ERROR_TEXT]


def stamp(exc: BaseException, started: float, kind: str | None = None) -> BaseException:
    """Remember on `exc` when the call that raised it began (anyio/monotonic seconds), so a
    call that began before the store came back does not open a new outage, and what kind of
    call it was (READ or WRITE; see Outage.succeeded).

    Example::

        raise stamp(exc, started, READ)
    """
    with contextlib.suppress(AttributeError):  # an exception class with __slots__
        exc._tenure_call_started = started  # type: ignore[attr-defined]
        if kind is not None:
            exc._tenure_call_kind = kind  # type: ignore[attr-defined]
    return exc


class Outage:
    """One store's (or queue source's) reachability as this instance's runners see it; shared
    by every runner that uses it. See the module docstring.

    Example::

        outage = Outage("store redis://cache:6379/0")
        outage.report()   # {'reachable': True, 'since': None, 'error': None, 'permanent': False}
    """

    def __init__(self, what: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = redact(what)
        self._clock = clock
        # Runners on the event loop and a sync health server's thread share it.
        self._lock = threading.Lock()
        self.since: datetime | None = None  # wall clock, for reports
        self._since: float | None = None  # monotonic
        self._ended_at = -math.inf
        self._kind = WRITE  # the kind of call that keeps the open outage open
        self.error: str | None = None
        self.permanent = False  # the open outage saw a refusal (is_refusal)
        self.ever_succeeded = False

    def __repr__(self) -> str:
        state = "reachable" if self._since is None else f"unreachable since {self.since}"
        return f"<Outage {self.what}: {state}>"

    @property
    def down(self) -> bool:
        """True while an outage is open (a failure seen, no success since)."""
        return self._since is not None

    @property
    def kind(self) -> str:
        """READ when only reads failed in the open outage, else WRITE (see succeeded)."""
        return self._kind

    @property
    def refused_at_start(self) -> bool:
        """True when a refusal (is_refusal) came before any call to the store succeeded."""
        return self.permanent and not self.ever_succeeded

    def succeeded(self, runner: str, kind: str = WRITE) -> None:
        """A call of `kind` (READ or WRITE) by `runner` was answered: an open outage ends
        (logged once), unless a write or lease call failed in it and this was a read: a store
        that answers reads but refuses writes is still down for the runners."""
        with self._lock:
            self.ever_succeeded = True
            if self._since is None or (kind == READ and self._kind == WRITE):
                return
            now = self._clock()
            lasted = now - self._since
            log.info("tenure: %s reachable again after %.1f s (seen by %s)", self.what, lasted,
                     runner)
            self._since, self.since, self._ended_at = None, None, now
            self.error, self.permanent = None, False

    def failed(self, runner: str, exc: BaseException, started: float | None = None,
               kind: str | None = None) -> bool:
        """A call of `kind` (default: as stamped on `exc`, else WRITE) by `runner` that began
        at `started` (monotonic; default now) failed with `exc`. Returns True when this opened
        the outage, which logs it: a WARNING, or an ERROR for a refusal (none before the store
        ever answered: that stops the worker) or an error tenure does not know (with its
        traceback)."""
        kind = kind or str(getattr(exc, "_tenure_call_kind", WRITE))
        started = getattr(exc, "_tenure_call_started", started)
        refused = is_refusal(exc)
        with self._lock:
            if self._since is not None:
                self.error = describe(exc)
                self.permanent = self.permanent or refused
                if kind == WRITE:
                    self._kind = WRITE
                return False
            if started is not None and started < self._ended_at:
                # It began before the store came back: an echo of the outage that just ended.
                log.debug("tenure: %s: late failure from before %s came back: %s", runner,
                          self.what, describe(exc))
                return False
            self._since = self._clock()
            self.since = datetime.now(timezone.utc)
            self.error, self.permanent, self._kind = describe(exc), refused, kind
            # Refused before the store ever answered: the user's setup, which the worker raises
            # as it stops (see Retry.failed); no line here, the caller reports it.
            if refused and self.ever_succeeded:
                log.error("tenure: %s: %s refused: %s; retrying every %g s at most, fix the "
                          "cause and it recovers without a restart", runner, self.what,
                          self.error, RETRY_CAP, exc_info=_traceback(exc))
            elif not refused and not is_transient(exc):
                log.error("tenure: %s: unexpected error from %s (a bug, or an error tenure does "
                          "not know); retrying every %g s at most: %s", runner, self.what,
                          RETRY_CAP, self.error, exc_info=exc)
            elif not refused:
                log.warning("tenure: %s cannot reach %s; retrying every %g s at most until it "
                            "answers: %s", runner, self.what, RETRY_CAP, self.error)
            return True

    def report(self) -> dict[str, Any]:
        """The state for health reports (JSON-ready).

        Example::

            outage.report()["reachable"]
        """
        with self._lock:
            down = self._since is not None
            return {"reachable": not down,
                    "since": None if self.since is None else self.since.isoformat(),
                    "error": self.error if down else None,
                    "permanent": down and self.permanent}


def _traceback(exc: BaseException) -> BaseException | None:
    """`exc` for a log line's exc_info when its traceback helps (not a tenure error)."""
    return None if isinstance(exc, TenureError) else exc


class Retry:
    """One runner loop's side of an outage: its backoff and its ERROR lines for permanent
    errors (once per `every` seconds: its period, default RETRY_CAP).

    Example::

        retry = Retry(outage, "election 'primary'")
        retry.failed(exc)
        await sleep_unless_stopped(stopping, retry.delay())
    """

    def __init__(self, outage: Outage, runner: str, *, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.outage = outage
        self.runner = runner
        self.every = RETRY_CAP if every is None else max(every, RETRY_CAP)
        self._clock = clock
        self._backoff = Backoff(RETRY_FIRST, RETRY_CAP)
        self._error_logged = -math.inf
        self.failures = 0

    def succeeded(self, kind: str = WRITE) -> None:
        """The runner's call of `kind` (READ or WRITE) was answered: back to the shortest
        backoff once the outage is over (see Outage.succeeded)."""
        self.outage.succeeded(self.runner, kind)
        if self.failures and (kind == WRITE or not self.outage.down):
            self._backoff = Backoff(RETRY_FIRST, RETRY_CAP)
            self.failures = 0

    def failed(self, exc: BaseException, started: float | None = None) -> None:
        """Record a failed call (see Outage.failed) and log what is due. Raises `exc` again when
        it stops the worker: an error in the user's setup, or a permanent error before any call
        to the store succeeded (see the module docstring)."""
        if is_setup_error(exc):
            raise exc
        self.failures += 1
        opened = self.outage.failed(self.runner, exc, started)
        if is_refusal(exc) and self.outage.refused_at_start:
            raise exc
        if not is_transient(exc):
            now = self._clock()
            if opened:  # the outage's own line was this error
                self._error_logged = now
            elif now - self._error_logged >= self.every:
                self._error_logged = now
                what = "refused" if is_refusal(exc) else "failed with an unexpected error"
                log.error("tenure: %s: %s %s: %s; retrying every %g s, fix the cause and it "
                          "recovers without a restart", self.runner, self.outage.what, what,
                          describe(exc), RETRY_CAP, exc_info=_traceback(exc))
        elif self.failures > 1:
            log.debug("tenure: %s: %s still failing: %s", self.runner, self.outage.what,
                      describe(exc))

    def delay(self) -> float:
        """Seconds to wait before the next try: RETRY_FIRST doubling to RETRY_CAP, jittered."""
        return self._backoff.next_delay()
