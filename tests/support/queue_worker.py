"""One app instance for the queue-message job tests: consumes a queue with a QueueConsumer and
appends each handler's start and end (CLOCK_MONOTONIC, shared by every process of the machine)
to its own log file, until SIGTERM.

    python queue_worker.py SOURCE QUEUE LOCK_STORE_URL LOG API

SOURCE is azure or postgres (addresses from the test fixtures' environment variables); API is
sync (tenure.connect and a sync handler in a thread) or async (tenure.aio and an async handler).
Prints READY once consuming.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import anyio

import tenure
import tenure.aio
from tenure.jobs._locks import LockPort
from tenure.jobs._queue import QueueConsumer
from tenure.queues import AzureQueue, Message, PostgresQueue

HANDLER_SECONDS = 0.002  # long enough for an overlap to show, short enough for 1,000 messages


def make_source(kind: str, queue: str) -> Any:
    if kind == "azure":
        return AzureQueue(queue,
                          connection_string=os.environ["TENURE_TEST_AZURE_QUEUE_CONNECTION_STRING"])
    return PostgresQueue(queue, os.environ["TENURE_TEST_POSTGRES_URL"])


async def main(kind: str, queue: str, store_url: str, log_path: str, api: str) -> None:
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - one line per write, kept open
    pid = os.getpid()

    def record(event: str, message: Message) -> None:
        log.write(f"{event} {message.scope_key} {message.body['n']} {pid} "
                  f"{time.monotonic_ns()}\n")

    async def handle_async(message: Message) -> None:
        record("start", message)
        await anyio.sleep(HANDLER_SECONDS)
        record("end", message)

    def handle_sync(message: Message) -> None:
        record("start", message)
        time.sleep(HANDLER_SECONDS)
        record("end", message)

    store: Any = tenure.connect(store_url) if api == "sync" else tenure.aio.connect(store_url)
    source = make_source(kind, queue)
    consumer = QueueConsumer(source, handle_sync if api == "sync" else handle_async,
                             locks=LockPort(store), name="tests.queue_worker", scope="Order:Key",
                             concurrency=8, min_poll=0.01, max_poll=0.2, lock_ttl=10,
                             lock_retry_delay=0.005, max_lock_retry_delay=0.05,
                             max_lock_retries=50, release_delay=0.05)
    stopping = anyio.Event()
    async with anyio.create_task_group() as tasks:
        async def stop_on_sigterm() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    stopping.set()
                    return

        tasks.start_soon(stop_on_sigterm)
        tasks.start_soon(consumer.run, stopping)
        print("READY", flush=True)
        await stopping.wait()
    await source.close()
    if api == "sync":
        await anyio.to_thread.run_sync(store.close)
    else:
        await store.close()
    log.close()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
