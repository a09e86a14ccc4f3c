"""A FastAPI app that runs a singleton job in its lifespan: start it as many uvicorn processes
as you like, and each period of the job runs on exactly one of them.

    TENURE_STORE=sqlite:////tmp/locks.db uvicorn app:app --port 8000
    TENURE_STORE=sqlite:////tmp/locks.db uvicorn app:app --port 8001

Environment: TENURE_STORE (the shared store's URL, required) and HEARTBEAT_LOG (a file that
each run appends one JSON line to: period, instance, fencing token; and each instance one
"stopped" line once its worker stopped).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

import tenure
import tenure.aio

store = tenure.aio.connect(os.environ["TENURE_STORE"])
worker = tenure.aio.AsyncWorker(store, grace=10)


@worker.every(timedelta(seconds=1), name="example.heartbeat")
async def heartbeat(run: tenure.Run) -> None:
    """Once per second across all instances: record which instance ran which period."""
    path = os.environ.get("HEARTBEAT_LOG")
    if path:
        line = json.dumps({"period": run.period_start.isoformat(), "instance": run.instance,
                           "token": run.token})
        _append(path, line)


def _append(path: str, line: str) -> None:
    with open(path, "a") as log:  # one short append per line: lines never interleave
        log.write(line + "\n")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with worker:  # jobs run while the app serves; on shutdown they finish within grace
        yield
    await store.close()
    path = os.environ.get("HEARTBEAT_LOG")
    if path:
        _append(path, json.dumps({"stopped": worker.instance}))


app = FastAPI(lifespan=lifespan)


@app.get("/health")
async def health() -> JSONResponse:
    """The worker's health report: 200 when every job succeeded recently, else 503."""
    report: dict[str, Any] = await worker.health()
    return JSONResponse(report, status_code=200 if report["healthy"] else 503)
