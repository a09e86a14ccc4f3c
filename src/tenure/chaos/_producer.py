"""The queue workload's queue (PostgreSQL, or Azure Queue Storage), its producer, and the look
into the queue afterwards.

`--queue-url` is a `postgresql://` URL (the `tenure_queue` table, tenure.queues.PostgresQueue)
or `azqueue://`: Azure Queue Storage through the connection string in
AZURE_STORAGE_QUEUE_CONNECTION_STRING (tenure.queues.AzureQueue; Azurite's queue service in the
suite). Messages are known by their number `n` (in the body, or in the text of one that is not
JSON): Azure gives a message released untried a new id.

The producer is a thread of the orchestrator with its own event loop: it sends a message about
every 40 ms to the run's queue until told to stop, with a key drawn among `keys`;
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

import json
import os
import random
import re
import threading
import time
from typing import Any

import anyio

from tenure.chaos._history import HistoryWriter

PACE = 0.04  # seconds between two sends
AZURE_QUEUE = "azqueue://"
QUEUE_CONNECTION = "AZURE_STORAGE_QUEUE_CONNECTION_STRING"
_NOT_JSON = re.compile(r"not json (\d+)")


def is_azure(url: str) -> bool:
    """Whether `url` names Azure Queue Storage (`azqueue://`) rather than PostgreSQL."""
    return url.startswith(AZURE_QUEUE)


def open_source(url: str, queue: str, **postgres_options: Any) -> Any:
    """A message source on `queue`: an AzureQueue for `azqueue://`, else a PostgresQueue.

    Example::

        source = open_source("postgresql://app@db/app", "chaos-1a2b", pool_size=4)
    """
    from tenure.queues import AzureQueue, PostgresQueue

    if is_azure(url):
        return AzureQueue(queue, connection_string=os.environ[QUEUE_CONNECTION])
    return PostgresQueue(queue, url, **postgres_options)


def number_of(text: str) -> int | None:
    """The message's number `n`, from its JSON body or its not-JSON text.

    Example:
        >>> number_of('{"n": 7, "key": "k1"}'), number_of("not json 45"), number_of("x")
        (7, 45, None)
    """
    try:
        body = json.loads(text)
    except ValueError:
        found = _NOT_JSON.fullmatch(text)
        return int(found.group(1)) if found else None
    number = body.get("n") if isinstance(body, dict) else None
    return number if isinstance(number, int) else None


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
        queue = open_source(self.url, self.queue) if is_azure(self.url) else open_source(
            self.url, self.queue, connect_timeout=2.0)
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
                self.history.emit("ok", "enqueue", message=str(message), **fields)
                await anyio.sleep(PACE)
        finally:
            await queue.close()


def remaining(url: str, queue: str) -> int | None:
    """Messages left in `queue` (visible or not; poisoned ones are another queue), or None
    when the queue cannot be asked."""
    if is_azure(url):
        from azure.core.exceptions import AzureError
        from azure.storage.queue import QueueClient

        try:
            with QueueClient.from_connection_string(os.environ[QUEUE_CONNECTION],
                                                    queue) as client:
                count = client.get_queue_properties().approximate_message_count
        except AzureError:
            return None
        return None if count is None else int(count)
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
    (`poisoned`, with its number and reason)."""
    for entry in poisoned(url, queue):
        history.emit("info", "poisoned", **entry)
    history.emit("info", "queue-final", remaining=remaining(url, queue))


def poisoned(url: str, queue: str) -> list[dict[str, Any]]:
    """Every message of `queue`'s poison queue: its number `n`, `reason` and `delivery`."""
    if is_azure(url):
        return _azure_poisoned(queue)

    async def read() -> list[dict[str, Any]]:
        source = open_source(url, queue)
        try:
            found: list[dict[str, Any]] = await source.poisoned(max_messages=100_000)
            return found
        finally:
            await source.close()

    return [{"n": number_of(entry["text"]), "message": entry["id"], "reason": entry["reason"],
             "delivery": entry["dequeue_count"]} for entry in anyio.run(read)]


def _azure_poisoned(queue: str) -> list[dict[str, Any]]:
    """The poison envelopes, received (not peeked: a peek sees 32 at most) and left there."""
    from azure.core.exceptions import ResourceNotFoundError
    from azure.storage.queue import QueueClient

    found = []
    with QueueClient.from_connection_string(os.environ[QUEUE_CONNECTION],
                                            f"{queue}-poison") as client:
        try:
            for item in client.receive_messages(messages_per_page=32, visibility_timeout=600):
                envelope = json.loads(item.content)
                found.append({"n": number_of(str(envelope.get("text", ""))),
                              "message": str(envelope.get("id")),
                              "reason": envelope.get("reason"),
                              "delivery": envelope.get("dequeue_count")})
        except ResourceNotFoundError:  # nothing was ever poisoned
            return []
    return found
