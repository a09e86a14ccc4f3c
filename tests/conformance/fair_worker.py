"""A contender for the fairness test (test_fairness.py), in a real OS process.

    python fair_worker.py URL API NAME COUNT HOLD_S LOG

Connects, takes another name, waits for it in vain for a moment while holding it, and releases
it (connections made, tables created, scripts loaded, a store's waiting connection opened: none
of that is counted as waiting), prints "READY", waits for a line on stdin (the
start), then `COUNT` times: logs "wait <pid> 0 <ns>", acquires NAME with the library's
default waits, logs "enter <pid> <token> <ns>", holds for HOLD_S seconds, logs
"exit <pid> <token> <ns>" and releases; then asks again at once. Each line is one O_APPEND
write; the times are time.monotonic_ns (CLOCK_MONOTONIC, one clock for the host's processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time

import tenure
import tenure.aio

# A wait that times out, so that a store that waits on connections of its own (mysql://) has
# one open before the run: opening it takes milliseconds, during which no release can wake
# the waiter, and a releaser asking again meanwhile takes the lock a few times over.
WARM_UP_WAIT = 0.05


def _log(fd: int, event: str, token: int) -> None:
    os.write(fd, f"{event} {os.getpid()} {token} {time.monotonic_ns()}\n".encode())


def run_sync(url: str, name: str, count: int, hold: float, fd: int) -> None:
    with tenure.connect(url) as store:
        with store.lock(f"{name}-warm-up", ttl=10.0).acquire(timeout=60), \
                contextlib.suppress(tenure.LockTimeout), \
                store.lock(f"{name}-warm-up", ttl=10.0).acquire(timeout=WARM_UP_WAIT):
            pass
        lock = store.lock(name, ttl=10.0)
        _ready()
        for _ in range(count):
            _log(fd, "wait", 0)
            with lock.acquire(timeout=60) as lease:
                _log(fd, "enter", lease.token)
                time.sleep(hold)  # the work inside the critical section
                _log(fd, "exit", lease.token)


async def run_async(url: str, name: str, count: int, hold: float, fd: int) -> None:
    async with tenure.aio.connect(url) as store:
        async with store.lock(f"{name}-warm-up", ttl=10.0).acquire(timeout=60):
            with contextlib.suppress(tenure.LockTimeout):
                async with store.lock(f"{name}-warm-up", ttl=10.0).acquire(
                        timeout=WARM_UP_WAIT):
                    pass
        lock = store.lock(name, ttl=10.0)
        await asyncio.get_running_loop().run_in_executor(None, _ready)
        for _ in range(count):
            _log(fd, "wait", 0)
            async with lock.acquire(timeout=60) as lease:
                _log(fd, "enter", lease.token)
                await asyncio.sleep(hold)  # the work inside the critical section
                _log(fd, "exit", lease.token)


def _ready() -> None:
    print("READY", flush=True)
    sys.stdin.readline()


def main() -> None:
    url, api, name, count, hold, log = sys.argv[1:7]
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    if api == "sync":
        run_sync(url, name, int(count), float(hold), fd)
    else:
        asyncio.run(run_async(url, name, int(count), float(hold), fd))
    os.close(fd)


if __name__ == "__main__":
    main()
