"""The async concurrency shim: the only hand-written difference between tenure.aio and tenure.

Everything else under _async/ is turned into _sync/ by scripts/unasync.py; the functions here
have same-named, hand-written twins in _sync/_shim.py built on threads instead of tasks.

Example:
    >>> import asyncio
    >>> asyncio.run(offload(sum, [1, 2]))
    3
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

import anyio

from tenure import _io_threads

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("tenure")

monotonic = time.monotonic
Event = asyncio.Event
# Store calls are coroutines here: a driver's socket timeouts do not bound them, a cancel
# scope does (anyio.fail_after). The sync twin's is True: its calls block on sockets that
# time out, and no cancel scope can cut them. Stores ask this, not their driver's kind.
BLOCKING = False


async def sleep(seconds: float) -> None:
    """Sleep without blocking the event loop.

    Example:
        >>> asyncio.run(sleep(0))
    """
    await anyio.sleep(seconds)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds passed; True when it was set.

    Example:
        >>> asyncio.run(wait_event(asyncio.Event(), 0.0))
        False
    """
    with anyio.move_on_after(timeout):
        await event.wait()
    return event.is_set()


async def wait_readable(fd: int, timeout: float) -> bool:
    """Wait until `fd` (a pipe, a FIFO, a socket) has something to read, or `timeout` seconds
    passed (math.inf: no limit), on the event loop's reader: no thread; True when readable.

    Example:
        >>> import os
        >>> reader, writer = os.pipe()
        >>> os.write(writer, b"x"), asyncio.run(wait_readable(reader, 1.0))
        (1, True)
    """
    with anyio.move_on_after(timeout):
        await anyio.wait_readable(fd)
        return True
    return False


def release_at_exit(holder: Any) -> None:
    """Nothing to do in async code: no event loop runs at interpreter exit, so use
    `async with tenure.aio.connect(...)` (or `await store.close()`) to release on the way out.

    Example:
        >>> release_at_exit(None)
    """


class WouldBlock(Exception):
    """Raised by work that `offload` runs on the event loop's thread where it would have to
    wait (a lock held by another process, a commit that syncs to disk), before it changed
    anything: `offload` then runs it again in a worker thread.

    Example::

        if running_inline() and not idle_connections:
            raise WouldBlock  # opening a file: a worker thread's job
    """


_inline = threading.local()


def running_inline() -> bool:
    """True while `offload` runs work on the event loop's own thread: the work raises
    WouldBlock rather than wait.

    Example:
        >>> running_inline()
        False
    """
    return bool(getattr(_inline, "on", False))


async def offload(function: Callable[..., T], *args: Any) -> T:
    """Run blocking I/O (sqlite3) without blocking the event loop: in a worker thread, or,
    when the object whose method `function` is says `offload_inline_first = True`, first on
    the loop's own thread (a thread hop costs more than a SQLite statement), where the work
    raises WouldBlock before anything that could wait; then it runs again in a thread.

    Example:
        >>> asyncio.run(offload(len, "abc"))
        3
    """
    if getattr(getattr(function, "__self__", None), "offload_inline_first", False):
        _inline.on = True
        try:
            return function(*args)
        except WouldBlock:
            pass
        finally:
            _inline.on = False
    return await _io_threads.run(function, *args)


async def run_all(function: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R]:
    """`function(item)` for every item concurrently; results in order. After all finished,
    the first error (if any) is raised.

    Example:
        >>> async def double(x):
        ...     return 2 * x
        >>> asyncio.run(run_all(double, [1, 2]))
        [2, 4]
    """
    if len(items) == 1:
        return [await function(items[0])]
    results = await asyncio.gather(*(function(item) for item in items), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]  # no exception left in the list


class Scheduled:
    """A call that `call_later` will start after its delay, unless cancelled first.

    Example:
        >>> async def main():
        ...     scheduled = call_later(60, sleep, 0)
        ...     scheduled.cancel()
        ...     await call_later(60, sleep, 0).run_now()
        >>> asyncio.run(main())
    """

    __slots__ = ("_args", "_function", "_handle", "_task")

    def __init__(self, delay: float, function: Callable[..., Coroutine[Any, Any, Any]],
                 args: tuple[Any, ...]) -> None:
        self._function, self._args = function, args
        self._task: asyncio.Task[Any] | None = None
        self._handle = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._function(*self._args))

    def cancel(self) -> None:
        """Do not start the call (one already started finishes on its own)."""
        self._handle.cancel()

    async def run_now(self) -> None:
        """Start the call now if it has not started, and wait for it (its errors are its own)."""
        self._handle.cancel()
        self._start()
        assert self._task is not None
        with contextlib.suppress(Exception):
            await asyncio.shield(self._task)


def call_later(delay: float, function: Callable[..., Coroutine[Any, Any, Any]],
               *args: Any) -> Scheduled:
    """Start `function(*args)` as a task of the running loop after `delay` seconds.

    Example:
        >>> async def main():
        ...     call_later(0.0, sleep, 0).cancel()
        >>> asyncio.run(main())
    """
    return Scheduled(delay, function, args)


_started: set[asyncio.Task[Any]] = set()  # strong references: the loop keeps only weak ones


def start_soon(function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
    """Run `function(*args)` as a task of its own, without waiting for it.

    The lease monitor renews this way, so a renewal stuck on a silent store path never holds
    up the loop that enforces deadlines.

    Example:
        >>> async def main():
        ...     start_soon(sleep, 0)
        >>> asyncio.run(main())
    """
    task = asyncio.get_running_loop().create_task(function(*args))
    _started.add(task)
    task.add_done_callback(_finished)


def _finished(task: asyncio.Task[Any]) -> None:
    _started.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("tenure: background call failed", exc_info=task.exception())


def run_callback(function: Callable[[T], object], argument: T, what: str) -> None:
    """Run a user's callback (`on_lost`) now, in the event loop; its errors are logged.

    Example:
        >>> run_callback(print, "lost", "a demo callback")
        lost
    """
    try:
        function(argument)
    except Exception:
        log.exception("tenure: %s raised", what)


class Background(Protocol):
    """A running background loop that can be stopped."""

    def stop(self) -> None: ...

    def alive(self) -> bool: ...


class _Task:
    def __init__(self, task: asyncio.Task[None]) -> None:
        self._task = task

    def stop(self) -> None:
        self._task.cancel()

    def alive(self) -> bool:
        """False once the task ended or its event loop is not the one running now."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return not self._task.done() and self._task.get_loop() is running


def spawn(loop_function: Callable[[], Coroutine[Any, Any, None]], name: str) -> Background:
    """Start `loop_function` as a background task on the running event loop.

    The renewal loop outlives the call that started it (a lease taken with try_acquire is
    renewed until released), so it cannot live in a caller's task group.

    Example:
        >>> async def main():
        ...     spawn(lambda: sleep(0), "demo").stop()
        >>> asyncio.run(main())
    """
    return _Task(asyncio.get_running_loop().create_task(loop_function(), name=name))


def open_cancel_scope() -> anyio.CancelScope:
    """Enter a cancel scope around an `async with lease:` body, so losing the lease cancels it.

    Example:
        >>> async def main():
        ...     scope = open_cancel_scope()
        ...     return close_cancel_scope(scope, None, None, None)
        >>> asyncio.run(main())
        False
    """
    scope = anyio.CancelScope()
    scope.__enter__()
    return scope


def close_cancel_scope(
    scope: anyio.CancelScope | None,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    traceback: TracebackType | None,
) -> bool:
    """Leave the body's cancel scope; True when it swallowed the cancellation it caused.

    Example:
        >>> close_cancel_scope(None, None, None, None)
        False
    """
    if scope is None:
        return False
    return bool(scope.__exit__(exc_type, exc, traceback))


def cancel(scope: anyio.CancelScope | None) -> None:
    """Cancel the body running in `scope`, if any.

    Example:
        >>> cancel(None)
    """
    if scope is not None:
        scope.cancel()


def bounded(seconds: float) -> anyio.CancelScope:
    """A scope that cuts what runs in it short after `seconds`, and goes on after the block.

    Example:
        >>> async def main():
        ...     with bounded(0.01):
        ...         await sleep(1)
        >>> asyncio.run(main())
    """
    return anyio.move_on_after(seconds)


def shielded() -> anyio.CancelScope:
    """A scope in which cleanup (release) runs even while the caller is being cancelled.

    Example:
        >>> async def main():
        ...     with shielded():
        ...         await sleep(0)
        >>> asyncio.run(main())
    """
    return anyio.CancelScope(shield=True)


class AsyncAcquiring(Generic[T]):
    """What `lock.acquire()` returns in async code: await it, or use it in `async with`.

    Example::

        lease = await lock.acquire(timeout=10)
        async with lock.acquire(timeout=10) as lease:
            ...
    """

    __slots__ = ("_acquired", "_coroutine")

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._acquired: Any = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._coroutine.__await__()

    async def __aenter__(self) -> T:
        self._acquired = await self._coroutine
        entered: T = await self._acquired.__aenter__()
        return entered

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._acquired.__aexit__(exc_type, exc, traceback)
        return result


def is_our_kind(function: Callable[..., Any]) -> bool:
    """True for a coroutine function: tenure.aio takes async store objects only.

    Example:
        >>> is_our_kind(sleep)
        True
    """
    return inspect.iscoroutinefunction(function)


__all__ = [
    "BLOCKING",
    "AsyncAcquiring",
    "bounded",
    "Awaitable",
    "Background",
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


async def run_first(function: Callable[[T], Awaitable[R]], items: Sequence[T],
                    enough: Callable[[dict[int, R]], bool], timeout: float,
                    late: Callable[[T, R | Exception], Awaitable[object]]) -> dict[int, R]:
    """`function(item)` for every item concurrently; the results so far, by index, as soon as
    `enough(results)` holds, every call answered, or `timeout` seconds passed (a quorum of
    Redis masters answers without waiting for a silent one).

    The calls still running go on as tasks of their own, and `late(item, result or error)`
    gets each one's outcome when it ends; when the caller is cancelled (or a call failed)
    while it waits, `late` gets the outcomes it already had too, so that nothing a call took
    is left unaccounted for. A call's error is raised after that.

    Example:
        >>> async def double(x):
        ...     return 2 * x
        >>> async def ignore(item, result):
        ...     pass
        >>> asyncio.run(run_first(double, [1, 2], lambda answers: 0 in answers, 1.0, ignore))
        {0: 2, 1: 4}
    """
    answers: dict[int, R] = {}
    errors: dict[int, Exception] = {}
    waiting = True
    changed = asyncio.Event()

    async def run(index: int) -> None:
        outcome: Any
        try:
            outcome = await function(items[index])
        except Exception as exc:
            outcome = exc
        if waiting:
            if isinstance(outcome, Exception):
                errors[index] = outcome
            else:
                answers[index] = outcome
            changed.set()
        else:
            await _late(late, items[index], outcome)

    for index in range(len(items)):
        start_soon(run, index)
    try:
        with anyio.move_on_after(timeout):
            while not (errors or len(answers) == len(items) or enough(answers)):
                changed.clear()
                await changed.wait()
        if errors:
            raise errors[min(errors)]
    except BaseException:
        waiting = False
        for index, outcome in answers.items():
            start_soon(_late, late, items[index], outcome)
        raise
    waiting = False
    return answers


async def _late(late: Callable[[T, Any], Awaitable[object]], item: T, outcome: Any) -> None:
    try:
        await late(item, outcome)
    except Exception:
        log.debug("tenure: a late answer's handler failed", exc_info=True)
