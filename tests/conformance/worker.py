"""A real OS process that uses a tenure store, driven by the conformance tests.

    python worker.py URL API MODE NAME [options as JSON]

API is "sync" or "async". Modes:
- exit:     take NAME with try_acquire, print "HELD <token>", exit normally when stdin closes.
- serve:    hold NAME inside a with-block until SIGTERM, which the "app" handles by exiting.
- hold:     acquire NAME, print "HELD <token>", then block until killed or stdin closes.
- cycles:   print "READY", wait for a line on stdin (the start), then
            acquire/release NAME `count` times; inside the critical section append
            "enter|exit <pid> <token> <monotonic ns>" lines to `log` (one write per line,
            O_APPEND), and do a read-modify-write of the integer in `counter`.
- sem:      like cycles, on a semaphore of `limit` slots (no counter file).

time.monotonic is CLOCK_MONOTONIC, one clock for every process of the host, so intervals from
different processes can be compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

import tenure
import tenure.aio


def _record(log_fd: int, event: str, token: int) -> None:
    os.write(log_fd, f"{event} {os.getpid()} {token} {time.monotonic_ns()}\n".encode())


def _bump(counter: str) -> None:
    with open(counter, "r+") as handle:  # deliberately not atomic: exclusion must protect it
        value = int(handle.read() or 0)
        handle.seek(0)
        handle.write(str(value + 1))
        handle.truncate()


def _lock(store: Any, mode: str, name: str, options: dict[str, Any]) -> Any:
    ttl = options.get("ttl", 5.0)
    waits = {"min_wait": options.get("min_wait", 0.001), "max_wait": options.get("max_wait", 0.02)}
    if mode == "sem":
        return store.semaphore(name, options["limit"], ttl=ttl, **waits)
    return store.lock(name, ttl=ttl, **waits)


def cycles_sync(store: tenure.Store, mode: str, name: str, options: dict[str, Any]) -> None:
    """Take the lock `count` times, logging enter/exit inside the critical section."""
    lock = _lock(store, mode, name, options)
    log_fd = os.open(options["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        for _ in range(options["count"]):
            with lock.acquire(timeout=60) as lease:
                _record(log_fd, "enter", lease.token)
                if "counter" in options:
                    _bump(options["counter"])
                if options.get("hold_s"):
                    time.sleep(options["hold_s"])  # simulated work inside the critical section
                _record(log_fd, "exit", lease.token)
    finally:
        os.close(log_fd)


async def cycles_async(store: tenure.aio.AsyncStore, mode: str, name: str,
                       options: dict[str, Any]) -> None:
    """The async twin of cycles_sync."""
    lock = _lock(store, mode, name, options)
    log_fd = os.open(options["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        for _ in range(options["count"]):
            async with lock.acquire(timeout=60) as lease:
                _record(log_fd, "enter", lease.token)
                if "counter" in options:
                    _bump(options["counter"])
                if options.get("hold_s"):
                    await asyncio.sleep(options["hold_s"])  # simulated work
                _record(log_fd, "exit", lease.token)
    finally:
        os.close(log_fd)


def hold_sync(url: str, name: str, options: dict[str, Any]) -> None:
    store = tenure.connect(url)
    lease = store.lock(name, ttl=options.get("ttl", 5.0)).acquire(timeout=30)
    print("HELD", lease.token, flush=True)
    sys.stdin.read()
    lost = lease.lost
    print("LOST", lost, "RELEASED", lease.release(), flush=True)


async def hold_async(url: str, name: str, options: dict[str, Any]) -> None:
    async with tenure.aio.connect(url) as store:
        lease = await store.lock(name, ttl=options.get("ttl", 5.0)).acquire(timeout=30)
        print("HELD", lease.token, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        lost = lease.lost
        print("LOST", lost, "RELEASED", await lease.release(), flush=True)


def serve_sync(url: str, name: str, options: dict[str, Any]) -> None:
    """An app that handles SIGTERM by exiting: the with-block releases on the way out."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with tenure.connect(url) as store, store.lock(name, ttl=options["ttl"]).acquire(5) as lease:
        print("HELD", lease.token, flush=True)
        threading.Event().wait()


async def serve_async(url: str, name: str, options: dict[str, Any]) -> None:
    """The async app cancels its main task on SIGTERM; `async with` releases on the way out."""
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    async with tenure.aio.connect(url) as store, \
            store.lock(name, ttl=options["ttl"]).acquire(5) as lease:
        print("HELD", lease.token, flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()


def exit_sync(url: str, name: str, options: dict[str, Any]) -> None:
    """Take a lease with try_acquire and simply return: a clean interpreter exit."""
    lease = tenure.connect(url).lock(name, ttl=options["ttl"]).try_acquire()
    assert lease is not None
    print("HELD", lease.token, flush=True)
    sys.stdin.read()


async def exit_async(url: str, name: str, options: dict[str, Any]) -> None:
    """The async app's clean exit: leaving `async with store` releases what it holds."""
    async with tenure.aio.connect(url) as store:
        lease = await store.lock(name, ttl=options["ttl"]).try_acquire()
        assert lease is not None
        print("HELD", lease.token, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def _cycles_async_by_url(url: str, mode: str, name: str, options: dict[str, Any]) -> None:
    async with tenure.aio.connect(url) as store:
        await cycles_async(store, mode, name, options)


def main() -> None:
    url, api, mode, name = sys.argv[1:5]
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    if mode == "exit":
        if api == "sync":
            exit_sync(url, name, options)
        else:
            asyncio.run(exit_async(url, name, options))
    elif mode == "serve":
        if api == "sync":
            serve_sync(url, name, options)
        else:
            asyncio.run(serve_async(url, name, options))
    elif mode == "hold":
        if api == "sync":
            hold_sync(url, name, options)
        else:
            asyncio.run(hold_async(url, name, options))
    else:
        # Imported and ready: the contenders start together, so that they contend however
        # long each took to start (on a loaded machine one could finish before the next began).
        print("READY", flush=True)
        sys.stdin.readline()
        if api == "sync":
            with tenure.connect(url) as store:
                cycles_sync(store, mode, name, options)
        else:
            asyncio.run(_cycles_async_by_url(url, mode, name, options))


if __name__ == "__main__":
    main()
