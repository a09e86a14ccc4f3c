"""tenure._io_threads: the async stores' worker threads (what anyio.to_thread.run_sync did for
them, at a third of the cost per call): results and exceptions come back, context variables
go along, a cancelled caller waits for its call to return, concurrent calls run concurrently,
and a forked child starts with threads of its own."""

from __future__ import annotations

import contextvars
import os
import signal
import threading
import time

import anyio
import pytest

from tenure import _io_threads

pytestmark = pytest.mark.anyio

REQUEST = contextvars.ContextVar("REQUEST", default="none")


async def test_a_call_returns_its_result_from_another_thread() -> None:
    assert await _io_threads.run(threading.get_ident) != threading.get_ident()
    assert await _io_threads.run(sum, [1, 2]) == 3


async def test_a_call_raises_its_exception_in_the_caller() -> None:
    def fail() -> None:
        raise KeyError("the store's error")

    with pytest.raises(KeyError, match="the store's error"):
        await _io_threads.run(fail)
    assert await _io_threads.run(sum, [2, 2]) == 4, "the thread survived the exception"


async def test_a_call_sees_the_callers_context_variables() -> None:
    REQUEST.set("invoice-7")
    assert await _io_threads.run(REQUEST.get) == "invoice-7"


async def test_a_cancelled_caller_waits_until_its_call_returned() -> None:
    started, finish, finished = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        finish.wait(30)
        finished.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_io_threads.run, work)
        await anyio.to_thread.run_sync(started.wait, 30)
        tasks.cancel_scope.cancel()
        threading.Timer(0.2, finish.set).start()
    assert finished.is_set(), "the task group ended while its call was still running"


async def test_concurrent_calls_run_in_threads_of_their_own() -> None:
    barrier = threading.Barrier(3, timeout=30)  # passes only when all three run at once
    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(_io_threads.run, barrier.wait)


def test_a_forked_child_runs_calls_in_threads_of_its_own() -> None:
    anyio.run(_io_threads.run, sum, [1])  # the parent has a thread now
    pid = os.fork()
    if pid == 0:  # the parent's threads are not in the child: new ones serve it
        code = 0 if anyio.run(_io_threads.run, sum, [1, 1]) == 2 else 1
        os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)  # polling a child's exit: there is no waitpid with a timeout
    if done == (0, 0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child's call never returned: it went to a thread of its parent")
    assert os.waitstatus_to_exitcode(done[1]) == 0
