"""The sync concurrency shim: hand-written twin of _async/_shim.py built on threads.

Blocking calls run inline (no thread hop per call); only lease renewal runs in one background
thread per store. Losing a lease cannot interrupt a sync body, so the cancel-scope functions are
no-ops here: `lease.lost`, `lease.check()` and `on_lost` tell the holder instead.

Example:
    >>> offload(sum, [1, 2])
    3
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import heapq
import inspect
import itertools
import logging
import math
import os
import select
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

monotonic = time.monotonic
Event = threading.Event
# Store calls block their thread here, bounded by their sockets' timeouts: no cancel scope
# can cut them. The async twin's is False (coroutines, bounded by cancel scopes). Stores ask
# this, not their driver's kind.
BLOCKING = True
sleep = time.sleep


def wait_event(event: threading.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds passed; True when it was set.

    Example:
        >>> wait_event(threading.Event(), 0.0)
        False
    """
    return event.wait(timeout)


def wait_readable(fd: int, timeout: float) -> bool:
    """Wait until `fd` (a pipe, a FIFO, a socket) has something to read, or `timeout` seconds
    passed (math.inf: no limit); True when it is readable.

    Example:
        >>> reader, writer = os.pipe()
        >>> os.write(writer, b"x"), wait_readable(reader, 0.0)
        (1, True)
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if math.isinf(timeout) else max(0.0, timeout) * 1000))


_holders: weakref.WeakSet[Any] = weakref.WeakSet()


def _release_everything() -> None:
    for holder in list(_holders):
        try:
            holder.release_all()
        except Exception:  # exiting anyway; the leases expire by themselves
            logging.getLogger("tenure").warning("tenure: could not release leases at exit")


atexit.register(_release_everything)


def _start_afresh_in_child() -> None:
    """After fork(): none of the parent's threads run in the child, so their pools and timer
    start afresh, with fresh locks (another thread of the parent may have held one at the
    fork). The monitors drop the parent's leases themselves (tenure._forks), so the child's
    exit releases only what the child took."""
    global _pool, _pool_mutex, _calls, _timers, _timers_mutex, _timers_changed, _timer_thread
    _pool, _calls, _timer_thread = None, None, None
    _pool_mutex = threading.Lock()
    _timers = []
    _timers_mutex = threading.Lock()
    _timers_changed = threading.Condition(_timers_mutex)


def release_at_exit(holder: Any) -> None:
    """Have `holder.release_all()` run when the interpreter exits, while `holder` lives.

    A clean exit then frees the leases at once instead of leaving them to expire.

    Example:
        >>> release_at_exit(type("Monitor", (), {"release_all": lambda self: None})())
    """
    _holders.add(holder)


def offload(function: Callable[..., T], *args: Any) -> T:
    """Call `function` right here: sync callers already expect to block.

    Example:
        >>> offload(len, "abc")
        3
    """
    return function(*args)


class WouldBlock(Exception):
    """The async twin's signal to run work in a worker thread; never raised here, where
    work runs on its caller's thread and may wait (see running_inline).

    Example::

        if running_inline() and not idle_connections:
            raise WouldBlock
    """


def running_inline() -> bool:
    """Always False: sync work runs on its caller's thread, which expects to wait.

    Example:
        >>> running_inline()
        False
    """
    return False


_pool: ThreadPoolExecutor | None = None
_pool_mutex = threading.Lock()
_POOL_THREADS = 16


def run_all(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`function(item)` for every item, concurrently on a small shared thread pool (one request
    per lease must not add up: a store renewing 1,000 leases one after the other would miss its
    renewal interval); results in order. After all finished, the first error is raised.

    Example:
        >>> run_all(len, ["a", "bc"])
        [1, 2]
    """
    global _pool
    if len(items) <= 1:
        return [function(item) for item in items]
    if _pool is None:
        with _pool_mutex:
            if _pool is None:
                _pool = ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="tenure-io")
    futures = [_pool.submit(function, item) for item in items]
    concurrent.futures.wait(futures)
    return [future.result() for future in futures]


class Scheduled:
    """A call that `call_later` will make after its delay, unless cancelled first.

    Example:
        >>> scheduled = call_later(60, len, "abc")
        >>> scheduled.cancel()
        >>> call_later(60, len, "abc").run_now()
    """

    __slots__ = ("_args", "_done", "_function", "_state")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._function, self._args = function, args
        self._state = "waiting"  # then "running" or "cancelled"; set under _timers_mutex
        self._done = threading.Event()

    def _claim(self) -> bool:
        with _timers_mutex:
            if self._state != "waiting":
                return False
            self._state = "running"
            return True

    def _run(self) -> None:
        try:
            self._function(*self._args)
        except Exception:  # its errors are its own business
            logging.getLogger("tenure").debug("tenure: background call failed", exc_info=True)
        finally:
            self._done.set()

    def cancel(self) -> None:
        """Do not make the call (one already running finishes on its own)."""
        with _timers_mutex:
            if self._state == "waiting":
                self._state = "cancelled"

    def run_now(self) -> None:
        """Make the call now if it has not started, and wait for it (its errors are its own)."""
        if self._claim():
            self._run()
        elif self._state == "running":
            self._done.wait()


# One daemon thread runs every delayed call of the process, in due order: a thread per call
# would be spawned on every acquire, and a pool would sit blocked in sleeps.
_timers: list[tuple[float, int, Scheduled]] = []
_timers_mutex = threading.Lock()
_timers_changed = threading.Condition(_timers_mutex)
_timer_ids = itertools.count()
_timer_thread: threading.Thread | None = None


def _run_timers() -> None:
    while True:
        with _timers_changed:
            while not _timers or _timers[0][0] > time.monotonic():
                _timers_changed.wait(None if not _timers else _timers[0][0] - time.monotonic())
            _, _, scheduled = heapq.heappop(_timers)
        if scheduled._claim():
            scheduled._run()


def call_later(delay: float, function: Callable[..., Any], *args: Any) -> Scheduled:
    """Call `function(*args)` on tenure's timer thread after `delay` seconds.

    Example:
        >>> call_later(0.0, len, "abc").cancel()
    """
    global _timer_thread
    scheduled = Scheduled(function, args)
    with _timers_changed:
        heapq.heappush(_timers, (time.monotonic() + delay, next(_timer_ids), scheduled))
        if _timer_thread is None:
            _timer_thread = threading.Thread(target=_run_timers, name="tenure-timers",
                                             daemon=True)
            _timer_thread.start()
        if _timers[0][2] is scheduled:  # due first: wake the thread; else it wakes in time
            _timers_changed.notify()
    return scheduled


_calls: ThreadPoolExecutor | None = None
_CALL_THREADS = 128  # started as needed; calls stuck on a silent path must not starve others


def start_soon(function: Callable[..., Any], *args: Any) -> None:
    """Call `function(*args)` on a thread of tenure's own pool, without waiting for it.

    The lease monitor renews this way, so a renewal stuck on a silent store path never holds
    up the thread that enforces deadlines. A pool apart from `run_all`'s, which the calls
    started here may use themselves.

    Example:
        >>> start_soon(len, "abc")
    """
    _call_pool().submit(_logged, function, args)


def _call_pool() -> ThreadPoolExecutor:
    global _calls
    if _calls is None:
        with _pool_mutex:
            if _calls is None:
                _calls = ThreadPoolExecutor(_CALL_THREADS, thread_name_prefix="tenure-call")
    return _calls


def _logged(function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        function(*args)
    except Exception:
        logging.getLogger("tenure").exception("tenure: background call failed")


def run_callback(function: Callable[[T], object], argument: T, what: str) -> None:
    """Run a user's callback (`on_lost`) on a thread of tenure's call pool, so that a slow
    one cannot hold up the loss signals of other leases; its errors are logged.

    Example:
        >>> run_callback(len, "lost", "a demo callback")
    """
    start_soon(_callback, function, argument, what)


def _callback(function: Callable[[T], object], argument: T, what: str) -> None:
    try:
        function(argument)
    except Exception:
        logging.getLogger("tenure").exception("tenure: %s raised", what)


class Background(Protocol):
    """A running background loop that can be stopped."""

    def stop(self) -> None: ...

    def alive(self) -> bool: ...


class _Thread:
    # A plain flag rather than Thread.is_alive(): alive() runs on every acquire.
    running = True

    def stop(self) -> None:
        """The loop watches its owner's closed flag; nothing to interrupt here."""

    def alive(self) -> bool:
        """False once the thread's function returned."""
        return self.running


def spawn(loop_function: Callable[[], None], name: str) -> Background:
    """Start `loop_function` in a daemon thread (it never keeps the process alive).

    Example:
        >>> spawn(lambda: None, "demo").stop()
    """
    handle = _Thread()

    def run() -> None:
        try:
            loop_function()
        finally:
            handle.running = False

    threading.Thread(target=run, name=name, daemon=True).start()
    return handle


def open_cancel_scope() -> Any:
    """Sync bodies cannot be cancelled safely: there is no scope to open.

    Example:
        >>> open_cancel_scope()
    """
    return None


def close_cancel_scope(
    scope: Any,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    traceback: TracebackType | None,
) -> bool:
    """Nothing was opened, so nothing is swallowed.

    Example:
        >>> close_cancel_scope(None, None, None, None)
        False
    """
    return False


def cancel(scope: Any) -> None:
    """No-op: sync bodies learn of a loss through `lease.lost`, `check()` and `on_lost`.

    Example:
        >>> cancel(None)
    """


_NO_SHIELD: AbstractContextManager[None] = nullcontext()


def bounded(seconds: float) -> AbstractContextManager[None]:
    """A blocking call cannot be cut short from its own thread: each store call ends within
    the store's own client-side bound instead.

    Example:
        >>> with bounded(0.01):
        ...     pass
    """
    return _NO_SHIELD


def shielded() -> AbstractContextManager[None]:
    """Threads are not cancelled, so cleanup needs no shield.

    Example:
        >>> with shielded():
        ...     pass
    """
    return _NO_SHIELD


def is_our_kind(function: Callable[..., Any]) -> bool:
    """True for a plain function: tenure takes sync store objects only.

    Example:
        >>> is_our_kind(len)
        True
    """
    return not inspect.iscoroutinefunction(function)


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork()
    os.register_at_fork(after_in_child=_start_afresh_in_child)

__all__ = [
    "BLOCKING",
    "Background",
    "bounded",
    "Event",
    "Scheduled",
    "call_later",
    "cancel",
    "is_our_kind",
    "close_cancel_scope",
    "monotonic",
    "offload",
    "open_cancel_scope",
    "release_at_exit",
    "run_all",
    "run_callback",
    "running_inline",
    "shielded",
    "sleep",
    "spawn",
    "start_soon",
    "wait_event",
    "wait_readable",
    "WouldBlock",
]


def run_first(function: Callable[[T], R], items: Sequence[T],
              enough: Callable[[dict[int, R]], bool], timeout: float,
              late: Callable[[T, Any], object]) -> dict[int, R]:
    """`function(item)` for every item concurrently on `run_all`'s pool; the results so far,
    by index, as soon as `enough(results)` holds, every call answered, or `timeout` seconds
    passed (a quorum of Redis masters answers without waiting for a silent one).

    The calls still running go on in their threads, and `late(item, result or error)` gets
    each one's outcome there when it ends. When a call failed in time, `late` gets the
    outcomes already in too (nothing a call took is left unaccounted for), then the error is
    raised.

    Example:
        >>> run_first(len, ["a", "bc"], lambda answers: len(answers) == 2, 1.0, print)
        {0: 1, 1: 2}
    """
    pool = _call_pool()  # not run_all's few threads: a silent master's calls hold theirs
    answers: dict[int, R] = {}
    errors: dict[int, Exception] = {}
    state = {"waiting": True}
    changed = threading.Condition()

    def run(index: int) -> None:
        outcome: Any
        try:
            outcome = function(items[index])
        except Exception as exc:
            outcome = exc
        with changed:
            if state["waiting"]:
                if isinstance(outcome, Exception):
                    errors[index] = outcome
                else:
                    answers[index] = outcome
                changed.notify()
                return
        _logged(late, (items[index], outcome))

    for index in range(len(items)):
        pool.submit(run, index)
    deadline = time.monotonic() + timeout
    with changed:
        try:
            while not (errors or len(answers) == len(items) or enough(answers)):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                changed.wait(left)
        except BaseException:  # Ctrl-C: the answers in go to `late`, as the later ones do
            state["waiting"] = False
            for index, outcome in answers.items():
                pool.submit(_logged, late, (items[index], outcome))
            raise
        state["waiting"] = False
        found, failed = dict(answers), dict(errors)
    if failed:
        for index, outcome in found.items():
            pool.submit(_logged, late, (items[index], outcome))
        raise failed[min(failed)]
    return found
