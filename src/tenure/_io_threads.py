"""Worker threads for the async stores' blocking I/O (sqlite3, file locks): `run` hands a call
to an idle thread of this process's own and awaits its result.

Why not anyio.to_thread.run_sync (or loop.run_in_executor): a call through either costs about
220 µs here, a call to a thread of ours 80 µs, and the async SQLite store with
synchronous=full makes two per lock cycle (its commits sync to disk, so they never run on the
event loop). Each thread here waits on a queue of its own (no shared lock to contend for);
an idle thread is reused last-in, first-out, so the calls of one task keep one warm thread,
and ends after IDLE_SECONDS without a call. Beyond MAX_THREADS busy threads a call goes to
anyio's pool, whose limiter queues it.

Like anyio's default, a call is not abandoned when its task is cancelled: the cancellation
waits until the call returns (the stores' undo logic needs to know what it did), then lands.

After fork() a child has none of these threads (the parent's are not copied): it starts
afresh with new ones.

Example::

    answer = await run(sum, [1, 2])
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from tenure._forks import in_child_after_fork

T = TypeVar("T")

MAX_THREADS = 40  # anyio's default limit too
IDLE_SECONDS = 10.0  # a thread idle this long ends (anyio's workers do the same)

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...],
             contextvars.Context]


class _Thread:
    """One worker thread and its queue of calls; it puts itself back in the pool's idle list
    before it hands a result back, so the caller's next call finds it idle."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="tenure-io", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self.pool.retire(self):
                    return
                continue  # taken meanwhile: its call is on the way
            if job is None:
                return
            loop, future, function, arguments, context = job
            try:
                outcome: tuple[bool, Any] = (True, context.run(function, *arguments))
            except BaseException as exc:  # handed to the caller, as anyio does
                outcome = (False, exc)
            del job, function, arguments
            self.pool.idle.append(self)
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits it
                loop.call_soon_threadsafe(_settle, future, outcome)


class _Pool:
    def __init__(self) -> None:
        self.idle: collections.deque[_Thread] = collections.deque()  # thread-safe ends
        self.started = 0
        self.mutex = threading.Lock()
        in_child_after_fork(self, _Pool._start_afresh_in_child)

    def _start_afresh_in_child(self) -> None:
        self.idle, self.started, self.mutex = collections.deque(), 0, threading.Lock()

    def retire(self, thread: _Thread) -> bool:
        """Whether idle `thread` may end: False when a caller took it meanwhile."""
        try:
            self.idle.remove(thread)
        except ValueError:
            return False
        with self.mutex:
            self.started -= 1
        return True

    def take(self) -> _Thread | None:
        """An idle thread, a new one while fewer than MAX_THREADS run, else None."""
        try:
            return self.idle.pop()
        except IndexError:
            pass
        with self.mutex:
            if self.started >= MAX_THREADS:
                return None
            self.started += 1
        return _Thread(self)


_pool = _Pool()


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():  # pragma: no cover - shielded: nothing cancels it
        return
    succeeded, value = outcome
    if succeeded:
        future.set_result(value)
    else:
        future.set_exception(value)


async def run(function: Callable[..., T], *arguments: Any) -> T:
    """`function(*arguments)` in a worker thread, with this task's context variables; its
    result, or its exception raised here. A cancellation waits for the call to return.

    Example:
        >>> import asyncio
        >>> asyncio.run(run(sum, [1, 2]))
        3
    """
    thread = _pool.take()
    if thread is None:
        return await anyio.to_thread.run_sync(function, *arguments)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    thread.jobs.put((loop, future, function, arguments, contextvars.copy_context()))
    with anyio.CancelScope(shield=True):
        result = await future
    return result
