"""Waiting on a condition with a deadline: the tests' only way to wait (never sleep-and-hope)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> float:
    """Poll `condition` until it is truthy; fail the test after `timeout` s. Returns elapsed s."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.005)
    return time.monotonic() - started
