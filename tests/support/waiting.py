"""Waiting on a condition with a deadline: the tests' only way to wait (never sleep-and-hope);
and `call`, which lets one test body serve the sync and the async API."""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> float:
    """Poll `condition` until it is truthy; fail the test after `timeout` s. Returns elapsed s."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.005)
    return time.monotonic() - started


async def eventually(condition: Callable[[], object], timeout: float, what: str) -> float:
    """Wait (yielding to the event loop) until `condition` holds; fail after `timeout` s.
    A condition that returns an awaitable (an async check) is awaited each time."""
    started = time.monotonic()
    while not await call(condition()):
        if time.monotonic() - started > timeout:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(0.005)
    return time.monotonic() - started


async def call(value: Any) -> Any:
    """Await async results, pass sync ones through: one test body serves both APIs."""
    return await value if inspect.isawaitable(value) else value


def exit_status(pid: int, timeout: float) -> int:
    """A forked child's exit status; it is killed (and the test fails) past `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not exit within {timeout:g} s")
