"""Timing one benchmark case: a Runner times n cycles of a one-cycle function."""

from __future__ import annotations

import time
from collections.abc import Callable

Runner = Callable[[int], float]  # runs n cycles, returns the seconds they took


def timed_loop(cycle: Callable[[], object]) -> Runner:
    """Turn a one-cycle function into a Runner that times n calls of it.

    Example::

        run = timed_loop(lambda: None)
        seconds = run(1000)
    """

    def run(cycles: int) -> float:
        steps = range(cycles)
        start = time.perf_counter()
        for _ in steps:
            cycle()
        return time.perf_counter() - start

    return run
