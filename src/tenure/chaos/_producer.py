"""The queue workload's producer and its look into the queue afterwards.

The producer is a thread of the orchestrator with its own event loop: it sends a message about
every 40 ms to the run's PostgreSQL queue until told to stop, with a key drawn among `keys`;
one in twenty says `fail` (its handler raises: it must end in the poison queue) and one in
forty is not JSON (poisoned at once). Each send is recorded (`enqueue`: ok with the message id,
or fail: then the message may or may not exist). Afterwards `drain` waits for the queue to
empty and `settle_events` records what is left and what was poisoned.

Example::

    producer = Producer(url, "chaos-1a2b", history, keys=6, seed=1)
    producer.start(); ...; producer.stop()
    drain(url, "chaos-1a2b", timeout=10.0)
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import anyio

from tenure.chaos._history import HistoryWriter

PACE = 0.04  # seconds between two sends


class Producer:
    """Sends keyed messages from a thread until `stop()`."""

    def __init__(self, url: str, queue: str, history: HistoryWriter, keys: int,
                 seed: int) -> None:
        self.url, self.queue, self.history, self.keys = url, queue, history, keys
        self.random = random.Random(f"{seed}-producer")
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=anyio.run, args=(self._produce,),
                                       name="chaos-producer", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30.0)

    async def _produce(self) -> None:
        from tenure.queues import PostgresQueue

        queue = PostgresQueue(self.queue, self.url, connect_timeout=2.0)
        number = 0
        try:
            while not self.stopping.is_set():
                number += 1
                key = f"k{self.random.randrange(self.keys)}"
                body: Any = {"n": number, "key": key}
                if number % 20 == 0:
                    body["fail"] = True
                if number % 40 == 5:
                    body = f"not json {number}"
                fields = {"n": number, "key": None if isinstance(body, str) else key,
                          "poison": isinstance(body, str) or bool(body.get("fail"))}
                try:
                    with anyio.fail_after(5.0):
                        message = await queue.send(body)
                except Exception as exc:  # the source is down: the message may exist or not
                    self.history.emit("fail", "enqueue", error=type(exc).__name__, **fields)
                    await anyio.sleep(0.2)
                    continue
                self.history.emit("ok", "enqueue", message=message, **fields)
                await anyio.sleep(PACE)
        finally:
            await queue.close()


def remaining(url: str, queue: str) -> int | None:
    """Messages left in `queue` (visible or not; poisoned ones are another queue), or None
    when the database cannot be asked."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as db:
            row = db.execute("SELECT count(*) FROM tenure_queue WHERE queue = %s",
                             (queue,)).fetchone()
    except psycopg.Error:
        return None
    return None if row is None else int(row[0])


def drain(url: str, queue: str, timeout: float) -> float | None:
    """Wait until `queue` is empty; the seconds it took, or None at the timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if remaining(url, queue) == 0:
            return time.monotonic() - started
        time.sleep(0.1)  # polling a condition with a deadline
    return None


def settle_events(url: str, queue: str, history: HistoryWriter) -> None:
    """Record what is left in the queue (`queue-final`) and each poisoned message
    (`poisoned`, with its reason)."""
    from tenure.queues import PostgresQueue

    async def poisoned() -> list[dict[str, Any]]:
        source = PostgresQueue(queue, url)
        try:
            found: list[dict[str, Any]] = await source.poisoned(max_messages=100_000)
            return found
        finally:
            await source.close()

    for entry in anyio.run(poisoned):
        history.emit("info", "poisoned", message=entry["id"], reason=entry["reason"],
                     delivery=entry["dequeue_count"])
    history.emit("info", "queue-final", remaining=remaining(url, queue))
