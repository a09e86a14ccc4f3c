"""How runner loops live through a store (or queue source) that fails: one shared `Outage` per
store says when it stopped answering, and each runner loop's `Retry` decides how long to back
off and what to log.

Logging, per store: ONE warning when an outage starts (naming the runner that met it first,
the store and the error) and ONE info line when it ends ("... reachable again after 3.2 s"),
not a line per retry. A permanent error (`StoreRefused`, `exc.transient` False, or an error
tenure does not know) is logged at ERROR by each runner once per its period (once per
RETRY_CAP for runners without one), and retried all the same: fixing the credentials recovers
the worker without a restart.

Retries back off exponentially with full jitter from RETRY_FIRST to RETRY_CAP seconds: the cap
is the retry interval, so a runner resumes within RETRY_CAP of the store answering again.

Start-up: until one call to a store has succeeded, nothing has proved the worker's
configuration right, so a permanent error then is the user's setup (a wrong password, a missing
database): `Outage.refused_at_start` says so, and the worker stops and raises it. Errors in the
user's own setup (`InvalidArgument`, `InvalidArgumentType`, `MissingExtra`) stop the worker
whenever they come.

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
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreUnavailable,
    TenureError,
)
from tenure._timing import Backoff
from tenure._urls import redact

log = logging.getLogger("tenure.jobs")

RETRY_FIRST = 0.1  # seconds: the first retry after a failure
RETRY_CAP = 2.0  # seconds: the longest wait between retries (the "retry interval")
MAX_ERROR_TEXT = 500

SETUP_ERRORS = (InvalidArgument, InvalidArgumentType, MissingExtra)


def is_setup_error(exc: BaseException) -> bool:
    """True for errors in the user's own setup, which stop a worker whenever they come.

    Example:
        >>> is_setup_error(InvalidArgument("ttl=0 must be above 0"))
        True
    """
    return isinstance(exc, SETUP_ERRORS)


def is_transient(exc: BaseException) -> bool:
    """True when retrying may clear `exc`: a StoreUnavailable that says so, another tenure
    error, or a connection or timeout error of a driver; False for a StoreRefused and for
    errors tenure does not know (treated as permanent: logged at ERROR, still retried).

    Example:
        >>> from tenure._errors import StoreRefused
        >>> is_transient(StoreUnavailable("timed out")), is_transient(StoreRefused("bad password"))
        (True, False)
    """
    if isinstance(exc, StoreUnavailable):
        return bool(exc.transient)
    return isinstance(exc, (TenureError, OSError, TimeoutError))


def describe(exc: BaseException) -> str:
    """`exc` as one line for logs and health reports, secrets redacted, length capped.

    Example:
        >>> describe(StoreUnavailable("redis://:pw@db:6379/0: connection refused"))
        'StoreUnavailable: redis://:***@db:6379/0: connection refused'
    """
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return redact(text)[:MAX_ERROR_TEXT]


def stamp(exc: BaseException, started: float) -> BaseException:
    """Remember on `exc` when the call that raised it began (anyio/monotonic seconds), so a
    call that began before the store came back does not open a new outage.

    Example::

        raise stamp(exc, started)
    """
    with contextlib.suppress(AttributeError):  # an exception class with __slots__
        exc._tenure_call_started = started  # type: ignore[attr-defined]
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
        self.since: datetime | None = None  # wall clock, for reports
        self._since: float | None = None  # monotonic
        self._ended_at = -math.inf
        self.error: str | None = None
        self.permanent = False
        self.ever_succeeded = False

    def __repr__(self) -> str:
        state = "reachable" if self._since is None else f"unreachable since {self.since}"
        return f"<Outage {self.what}: {state}>"

    @property
    def down(self) -> bool:
        """True while an outage is open (a failure seen, no success since)."""
        return self._since is not None

    @property
    def refused_at_start(self) -> bool:
        """True when a permanent error came before any call to the store succeeded."""
        return self.permanent and not self.ever_succeeded

    def succeeded(self, runner: str) -> None:
        """A call to the store by `runner` was answered: an open outage ends (logged once)."""
        self.ever_succeeded = True
        if self._since is None:
            return
        now = self._clock()
        lasted = now - self._since
        log.info("tenure: %s reachable again after %.1f s (seen by %s)", self.what, lasted,
                 runner)
        self._since, self.since, self._ended_at = None, None, now
        self.error, self.permanent = None, False

    def failed(self, runner: str, exc: BaseException, started: float | None = None) -> bool:
        """A call by `runner` that began at `started` (monotonic; default now) failed with
        `exc`. Returns True when this opened the outage, which logs it: a WARNING, or an ERROR for
        a permanent error (none before the store ever answered: that stops the worker)."""
        self.error = describe(exc)
        permanent = not is_transient(exc)
        if permanent:
            self.permanent = True
        if self._since is not None:
            return False
        started = getattr(exc, "_tenure_call_started", started)
        if started is not None and started < self._ended_at:
            # It began before the store came back: an echo of the outage that just ended.
            log.debug("tenure: %s: late failure from before %s came back: %s", runner,
                      self.what, self.error)
            return False
        self._since = self._clock()
        self.since = datetime.now(timezone.utc)
        # Refused before the store ever answered: the user's setup, which the worker raises as
        # it stops (see Retry.failed); no line here, the caller reports it.
        if permanent and self.ever_succeeded:
            log.error("tenure: %s: %s refused: %s; retrying every %g s at most, fix the cause "
                      "and it recovers without a restart", runner, self.what, self.error,
                      RETRY_CAP, exc_info=not isinstance(exc, TenureError))
        elif not permanent:
            log.warning("tenure: %s cannot reach %s; retrying every %g s at most until it "
                        "answers: %s", runner, self.what, RETRY_CAP, self.error)
        return True

    def report(self) -> dict[str, Any]:
        """The state for health reports (JSON-ready).

        Example::

            outage.report()["reachable"]
        """
        return {"reachable": self._since is None,
                "since": None if self.since is None else self.since.isoformat(),
                "error": self.error if self._since is not None else None,
                "permanent": self._since is not None and self.permanent}


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

    def succeeded(self) -> None:
        """The runner's call to the store was answered: back to the shortest backoff."""
        if self.failures:
            self._backoff = Backoff(RETRY_FIRST, RETRY_CAP)
            self.failures = 0
        self.outage.succeeded(self.runner)

    def failed(self, exc: BaseException, started: float | None = None) -> None:
        """Record a failed call (see Outage.failed) and log what is due. Raises `exc` again when
        it stops the worker: an error in the user's setup, or a permanent error before any call
        to the store succeeded (see the module docstring)."""
        if is_setup_error(exc):
            raise exc
        self.failures += 1
        opened = self.outage.failed(self.runner, exc, started)
        if self.outage.refused_at_start:
            raise exc
        if not is_transient(exc):
            now = self._clock()
            if opened:  # the outage's own line was this error
                self._error_logged = now
            elif now - self._error_logged >= self.every:
                self._error_logged = now
                log.error("tenure: %s: %s refused: %s; retrying every %g s, fix the cause and "
                          "it recovers without a restart", self.runner, self.outage.what,
                          describe(exc), RETRY_CAP, exc_info=not isinstance(exc, TenureError))
        elif self.failures > 1:
            log.debug("tenure: %s: %s still failing: %s", self.runner, self.outage.what,
                      describe(exc))

    def delay(self) -> float:
        """Seconds to wait before the next try: RETRY_FIRST doubling to RETRY_CAP, jittered."""
        return self._backoff.next_delay()
