"""One worker process of the queue workload:

    python -m tenure.chaos._queue_worker SETTINGS_JSON

It runs a `tenure.Worker` with one queue job on the run's queue (`queue_url`: PostgreSQL, or
`azqueue://` for Azure Queue Storage; the queue named after the phase), scope `key` (one lock per
message key; none with `key_lock` false, the positive control), 4 handlers at once, the run's
ttl for the key locks and a short visibility timeout, until the orchestrator sends SIGTERM once
the queue is drained (or the phase's end plus DRAIN, whichever comes first).

Each handling records `handle` (invoke, then ok or fail) with the message's number and id,
its key, the
delivery count and the key lock's fencing token; it reads the key's counter from the oracle,
works 10 to 80 ms, checks the message, and writes value + 1 with the token (fenced). A message
whose body says `fail` raises instead (it must end in the poison queue). The source's
`complete`, `dead_letter` and untried `abandon` are wrapped to record each settled message
(`complete`, `dead-letter`, `release`). Signals as in the jobs workload: SIGUSR1 pauses the
next handler right before its write, SIGURG holds it until it is told to stop, SIGUSR2 forgets
both.

Example (what the orchestrator runs)::

    subprocess.Popen([sys.executable, "-m", "tenure.chaos._queue_worker", json.dumps(settings)])
"""

from __future__ import annotations

import sys
import time
from typing import Any

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._producer import number_of, open_source
from tenure.chaos._runner_process import Phase, run_process
from tenure.chaos._worker import WorkloadChaos
from tenure.queues import QueueMessage

DRAIN = 30.0  # seconds past the phase's end a worker goes on, unless told to stop earlier
CONCURRENCY = 4


def queue_options(settings: dict[str, Any]) -> dict[str, Any]:
    """The queue job's options: fast polls and retries, the run's ttl, a short visibility."""
    return {"concurrency": CONCURRENCY, "lock_ttl": settings["ttl"],
            "visibility_timeout": settings["visibility"], "max_dequeue_count": 5,
            "retry_backoff": 0.1, "max_retry_backoff": 0.5, "min_poll": 0.01,
            "max_poll": 0.2, "lock_retry_delay": 0.01, "max_lock_retry_delay": 0.1,
            "max_lock_retries": 50, "release_delay": 0.1}


class RecordedSource:
    """The run's queue (any message source), recording each message it settles (`complete`,
    `dead-letter`, untried `release`) with its number `n`."""

    def __init__(self, source: Any, history: HistoryWriter) -> None:
        self.source = source
        self.history = history
        self.name: str = source.name
        self.max_batch: int = source.max_batch
        self.releases_count: bool = source.releases_count

    async def receive(self, max_messages: int, visibility_timeout: float) -> list[QueueMessage]:
        received: list[QueueMessage] = await self.source.receive(max_messages, visibility_timeout)
        return received

    async def extend(self, message: QueueMessage, seconds: float) -> None:
        await self.source.extend(message, seconds)

    async def abandon(self, message: QueueMessage, delay: float, *, failed: bool = True) -> None:
        call = self.source.abandon(message, delay, failed=failed)
        if failed:
            await call
        else:  # on Azure a copy, then a delete: a kill in between leaves the message twice
            await self._recorded("release", call, message)

    async def complete(self, message: QueueMessage) -> None:
        await self._recorded("complete", self.source.complete(message), message)

    async def dead_letter(self, message: QueueMessage, reason: str) -> None:
        await self._recorded("dead-letter", self.source.dead_letter(message, reason), message,
                             reason=reason[:200])

    async def close(self) -> None:
        await self.source.close()

    async def _recorded(self, f: str, call: Any, message: QueueMessage, **fields: Any) -> None:
        ident = {"n": number_of(message.text), "message": message.id}
        self.history.emit("invoke", f, **ident, **fields)
        try:
            await call
        except BaseException as exc:
            self.history.emit("fail", f, error=type(exc).__name__, **ident)
            raise
        self.history.emit("ok", f, **ident)


class QueueChaos(WorkloadChaos):
    """The handler and the requests the nemesis sends by signal."""

    def handle(self, message: QueueMessage) -> None:
        """Read the key's counter, work, check, write it + 1 with the key lock's token."""
        body = message.body
        lease = message.lease
        name = f"key-{body['key']}"
        fields: dict[str, Any] = {"name": name, "slot": 0, "n": body["n"],
                                  "message": message.id,
                                  "key": body["key"], "delivery": message.dequeue_count,
                                  "token": 0 if lease is None else lease.token}
        self.history.emit("invoke", "handle", **fields)
        try:
            if body.get("fail"):
                raise RuntimeError(f"message {body['n']} always fails (it must be poisoned)")
            with self.lock:
                value = self.oracle.read(name, 0, fields["token"])
            if self.hold_requested:
                self._hold(message, fields)
            time.sleep(self.random.uniform(0.01, 0.08))
            message.check()
            self.pause_if_requested(**fields)
            with self.lock:
                accepted = self.oracle.write(name, 0, fields["token"], value + 1)
        except BaseException as exc:
            self.history.emit("fail", "handle", error=type(exc).__name__,
                              **_deadline(lease), **fields)
            raise
        self.history.emit("ok", "handle", accepted=accepted, **_deadline(lease), **fields)

    def _hold(self, message: QueueMessage, fields: dict[str, Any]) -> None:
        self.requests.take("hold")
        self.history.emit("info", "hold", **fields)
        until = time.monotonic() + 2 * self.settings["ttl"] + 1.0
        while not message.stopped and time.monotonic() < until:
            time.sleep(0.005)  # the work, in slices: a sync handler checks for the loss
        self.history.emit("info", "hold-end", told=message.stopped, **fields)


def _deadline(lease: Any) -> dict[str, Any]:
    return {} if lease is None else {"deadline": lease.deadline}


def consume(phase: Phase, chaos: QueueChaos) -> tuple[tenure.Worker, float]:
    """The phase's Worker: `chaos.handle` on the run's queue (recorded), keyed when the run
    locks keys; it stops DRAIN seconds after the phase's end at the latest.

    Example::

        worker, stop_at = consume(phase, QueueChaos(settings, history, oracle))
    """
    settings = phase.settings
    url = settings["queue_url"]
    queue = open_source(url, phase.name) if url.startswith("azqueue:") else \
        open_source(url, phase.name, pool_size=4)
    source = RecordedSource(queue, phase.history)
    worker = tenure.Worker(phase.store, grace=settings["ttl"])
    worker.queue(source, name=phase.name, scope="key" if settings["key_lock"] else None,
                 **queue_options(settings))(chaos.handle)
    return worker, phase.until + DRAIN


def main(argv: list[str]) -> int:
    return run_process(argv, QueueChaos, consume)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
