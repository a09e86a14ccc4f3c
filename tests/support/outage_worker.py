"""A worker process for the outage tests (tests/jobs/test_outages.py) and the outage benchmark
(bench/outage_recovery.py): one tenure Worker with a 1 s periodic job, a leader-mode job, an
election and an outbox relay, reporting what it does as JSON lines on stdout.

Each line carries `t`, this host's CLOCK_MONOTONIC (one clock for every process of the host),
and an `event`: `every` (the periodic job ran; `leading` says whether the election is held),
`leader` (the leader-mode job ran), `elected` / `unelected` (the election's callbacks),
`relayed` (the relay delivered message `id`), `ready` (the worker started).

Usage::

    python tests/support/outage_worker.py '{"url": "redis://127.0.0.1:6379/0", "api": "sync",
                                    "ttl": 3, "tag": "t1", "outbox_url": "sqlite:///o.db"}'

The worker runs until SIGTERM; an exception out of `run()` ends the process with status 1.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import timedelta
from typing import Any

_print = threading.Lock()


def say(event: str, **fields: Any) -> None:
    """One JSON line on stdout, flushed at once."""
    line = json.dumps({"event": event, "t": time.monotonic(), **fields})
    with _print:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def build(worker: Any, settings: dict[str, Any]) -> None:
    """Register the four runners on `worker`."""
    from tenure import outbox

    ttl, tag = float(settings["ttl"]), settings["tag"]
    election = worker.election(f"outage-election-{tag}", ttl=ttl,
                               on_elected=lambda: say("elected"),
                               on_lost=lambda: say("unelected"))

    @worker.every(timedelta(seconds=1), name=f"outage-every-{tag}", ttl=ttl)
    def every(run: Any) -> None:
        say("every", period=run.period_start.isoformat(), leading=election.is_leader)

    @worker.every(timedelta(seconds=1), name=f"outage-leader-{tag}", ttl=ttl, leader=True)
    def leader(run: Any) -> None:
        say("leader", period=run.period_start.isoformat())

    outbox_url = settings.get("outbox_url")
    if outbox_url:
        import sqlalchemy as sa

        engine = sa.create_engine(outbox_url)
        box = outbox.Outbox(table_name=settings["outbox_table"])
        relay = outbox.Relay(engine, handler=lambda message: say("relayed", id=message.id),
                             outbox=box, backoff=0.2, max_backoff=1.0)
        relay.register(worker, every=1.0, name=f"outage-relay-{tag}", ttl=ttl)


def main(settings: dict[str, Any]) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)  # the SDK logs every request at INFO
    options = settings.get("options", {})
    if settings["api"] == "async":
        import anyio

        import tenure.aio

        async def serve() -> None:
            worker = tenure.aio.AsyncWorker(tenure.aio.connect(settings["url"], **options), grace=1)
            build(worker, settings)
            say("ready")
            await worker.run()

        anyio.run(serve)
    else:
        import tenure

        worker = tenure.Worker(tenure.connect(settings["url"], **options), grace=1)
        build(worker, settings)
        say("ready")
        worker.run()
    say("exited")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
