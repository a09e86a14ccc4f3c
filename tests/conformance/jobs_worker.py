"""One app instance running a tenure Worker, as a real OS process, for test_jobs.py.

    python jobs_worker.py URL API LOG [options as JSON]

API "sync" runs tenure.Worker (the job is a sync function, in a thread); "async" runs
tenure.aio.AsyncWorker (the job is a coroutine). The job, `tick`, appends JSON lines to LOG (one
write each, O_APPEND): {"event": "start"|"end"|"lost", "period": ISO, "pid", "token", "t"}, where
t is time.monotonic(), one clock for every process of the host. The process prints READY once
its worker runs, and exits 0 after SIGTERM once the worker stopped.

Options: interval (s), ttl, hold (seconds the job works), leader (bool), poll, grace.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

import anyio

import tenure
import tenure.aio
from tenure.jobs import AsyncWorker, Run, Worker


def main() -> None:
    url, api, log = sys.argv[1], sys.argv[2], sys.argv[3]
    options: dict[str, Any] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    hold = options.get("hold", 0.05)
    job_options = {"ttl": options.get("ttl", 2.0), "leader": options.get("leader", False),
                   "jitter": 0.0}
    if "poll" in options:
        job_options["poll"] = options["poll"]
    interval = timedelta(seconds=options.get("interval", 1.0))

    def write(event: str, run: Run) -> None:
        line = {"event": event, "period": run.period_start.isoformat(), "pid": os.getpid(),
                "token": run.token, "t": time.monotonic()}
        os.write(log_fd, (json.dumps(line) + "\n").encode())

    if api == "sync":
        store = tenure.connect(url)
        worker = Worker(store, grace=options.get("grace", 10.0))

        @worker.every(interval, name="tick", **job_options)
        def tick(run: Run) -> None:
            write("start", run)
            deadline = time.monotonic() + hold
            while time.monotonic() < deadline:
                try:
                    run.check()
                except tenure.LeaseLost:
                    write("lost", run)
                    raise
                time.sleep(0.01)
            write("end", run)

        print("READY", flush=True)
        worker.run()  # until SIGTERM
        store.close()
        return

    async def run_async() -> None:
        async with tenure.aio.connect(url) as store:
            worker = AsyncWorker(store, grace=options.get("grace", 10.0))

            @worker.every(interval, name="tick", **job_options)
            async def tick(run: Run) -> None:
                write("start", run)
                try:
                    await anyio.sleep(hold)
                except BaseException:
                    write("lost" if run.lease.lost else "cancelled", run)
                    raise
                write("end", run)

            async with anyio.create_task_group() as group:
                group.start_soon(worker.run)
                print("READY", flush=True)

    anyio.run(run_async)


if __name__ == "__main__":
    main()
