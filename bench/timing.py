"""Timing one benchmark case: a Runner times n cycles of a one-cycle function."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

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


async def timed_async_cycles(cycle: Callable[[], Awaitable[object]], count: int,
                             warmup: int) -> float:
    """Await `cycle()` `warmup` times (untimed: connections open, caches fill), then `count`
    times: the seconds those `count` took.

    Example::

        seconds = asyncio.run(timed_async_cycles(lambda: asyncio.sleep(0), 1000, warmup=50))
    """
    for _ in range(warmup):
        await cycle()
    start = time.perf_counter()
    for _ in range(count):
        await cycle()
    return time.perf_counter() - start
