"""A waiter's hand-over, timed: one body for both APIs (a task for async, a thread for sync).

Example::

    lease, seconds = await acquired_after_release(
        api, waiter.lock("jobs", ttl=5, min_wait=10, max_wait=10),
        lambda: blocked(admin) >= 1, "the waiter to block", lambda: call(held.release()))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from waiting import eventually


async def acquired_after_release(api: str, lock: Any, waiting: Callable[[], object],
                                 what: str, release: Callable[[], Awaitable[object]], *,
                                 within: float = 5.0,
                                 before_release: Callable[[], object] = lambda: None,
                                 ) -> tuple[Any, float]:
    """Start `lock.acquire(timeout=30)` (in a task for the "async" `api`, in a thread for
    "sync"), wait until `waiting()` says it waits (`within` s at most; `what` names it), run
    `before_release()`, then await `release()`: the waiter's lease, and the seconds from the
    release's start to the waiter holding it.

    Example::

        lease, seconds = await acquired_after_release(api, lock, listening, "the waiter",
                                                      lambda: call(held.release()))
        assert seconds < 0.5
    """
    got: dict[str, Any] = {}
    if api == "async":
        async def wait() -> None:
            got["lease"] = await lock.acquire(timeout=30)
            got["at"] = time.monotonic()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await eventually(waiting, within, what)
            before_release()
            released_at = time.monotonic()
            await release()
    else:
        def wait_in_thread() -> None:
            got["lease"] = lock.acquire(timeout=30)
            got["at"] = time.monotonic()

        thread = threading.Thread(target=wait_in_thread)
        thread.start()
        await eventually(waiting, within, what)
        before_release()
        released_at = time.monotonic()
        await release()
        thread.join(timeout=30)
    return got["lease"], float(got["at"] - released_at)
