"""What a new user of the job runner met in the first hour: health during a store outage, the
sync election's leader(), misspelt job options and the log line of a failed release."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

import tenure
import tenure.aio
from tenure.jobs import AsyncWorker, Run

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def wait_for(condition: Any, timeout: float) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


async def test_health_keeps_this_instance_s_last_run_while_the_records_cannot_be_read() -> None:
    """While the store is down, health() answered null for the last period, outcome and holder
    (read as "never ran") although this instance had just run the job."""
    store = tenure.aio.connect("memory://")
    worker = AsyncWorker(store)

    @worker.every(timedelta(seconds=30), name="good", jitter=0)
    async def good(run: Run) -> None:
        pass

    async with worker:
        await wait_for(lambda: worker._runners["good"].state.last_outcome == "ok", 10)
        before = (await worker.health())["jobs"]["good"]

        async def failing_records(prefix: str) -> dict[str, str]:
            await anyio.sleep(0)
            raise tenure.StoreUnavailable("memory://: injected: reads fail")

        worker._locks.records = failing_records  # type: ignore[method-assign]
        during = (await worker.health())["jobs"]["good"]
    assert before["last_period"] is not None and not before["record_unreadable"]
    kept = ("last_period", "last_outcome", "last_holder", "last_success")
    assert {key: during[key] for key in kept} == {key: before[key] for key in kept}
    assert during["record_unreadable"] is True
