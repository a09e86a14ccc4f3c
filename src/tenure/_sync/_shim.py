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
import contextlib
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

monotonic = time.monotonic
Event = threading.Event
sleep = time.sleep


def wait_event(event: threading.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds passed; True when it was set.

    Example:
        >>> wait_event(threading.Event(), 0.0)
        False
    """
    return event.wait(timeout)


_holders: weakref.WeakSet[Any] = weakref.WeakSet()


def _release_everything() -> None:
    for holder in list(_holders):
        try:
            holder.release_all()
        except Exception:  # exiting anyway; the leases expire by themselves
            logging.getLogger("tenure").warning("tenure: could not release leases at exit")


atexit.register(_release_everything)


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


def run_all(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`function(item)` for every item, one after the other; results in order.

    Example:
        >>> run_all(len, ["a", "bc"])
        [1, 2]
    """
    return [function(item) for item in items]


_executor: ThreadPoolExecutor | None = None
_executor_mutex = threading.Lock()


class Pending:
    """A call started with `start_soon`; `pending.wait()` waits for it to end.

    Example:
        >>> start_soon(len, "abc").wait()
    """

    __slots__ = ("_future",)

    def __init__(self, future: Future[Any]) -> None:
        self._future = future

    def wait(self) -> None:
        """Wait for the call (its errors are its own business)."""
        with contextlib.suppress(Exception):
            self._future.result()


def start_soon(function: Callable[..., Any], *args: Any) -> Pending:
    """Run `function(*args)` in a small shared pool of background threads.

    Example:
        >>> type(start_soon(len, "abc")).__name__
        'Pending'
    """
    global _executor
    if _executor is None:
        with _executor_mutex:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tenure-bg")
    return Pending(_executor.submit(function, *args))


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


__all__ = [
    "Background",
    "Event",
    "Pending",
    "cancel",
    "is_our_kind",
    "close_cancel_scope",
    "monotonic",
    "offload",
    "open_cancel_scope",
    "release_at_exit",
    "run_all",
    "shielded",
    "sleep",
    "spawn",
    "start_soon",
    "wait_event",
]
