"""What a new user of the job runner met in the first hour: health during a store outage, the
sync election's leader(), misspelt job options and the log line of a failed release."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from waiting import wait_until

import tenure
import tenure.aio
import tenure.queues
from tenure.jobs import AsyncElection, AsyncWorker, Run, Worker

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


def test_the_sync_worker_s_election_tells_its_leader_without_await(tmp_path: Path) -> None:
    """tenure.Worker's election.leader() returned a coroutine ("never awaited")."""
    worker = Worker(tenure.connect(f"sqlite:///{tmp_path}/locks.db"))
    election = worker.election("primary", ttl=5)
    assert election.leader() is None
    with worker:
        wait_until(lambda: election.is_leader, 10, "the only instance leads")
        assert election.leader() == worker.instance


async def test_the_async_worker_s_election_tells_its_leader_awaited() -> None:
    worker = AsyncWorker(tenure.aio.connect("memory://"))
    election = worker.election("primary", ttl=5)
    assert isinstance(election, AsyncElection)
    async with worker:
        await wait_for(lambda: election.is_leader, 10)
        assert await election.leader() == worker.instance


def test_a_misspelt_job_or_queue_option_gets_a_suggestion() -> None:
    worker = Worker(tenure.connect("memory://"))
    with pytest.raises(tenure.InvalidArgument, match=r"retires \(did you mean 'retries'\?\)"):
        worker.every(5, retires=1)
    source = tenure.queues.AzureQueue("invoices", connection_string=(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;"))
    with pytest.raises(tenure.InvalidArgument,
                       match=r"'max_dequeue' \(did you mean 'max_dequeue_count'\?\)"):
        worker.queue(source, max_dequeue=3)(lambda message: None)


async def test_a_failed_release_is_logged_in_plain_words(
        caplog: pytest.LogCaptureFixture) -> None:
    """The line read "releasing job 'app.slow''s lease failed"."""
    worker = AsyncWorker(tenure.aio.connect("memory://"))

    @worker.every(timedelta(seconds=30), name="app.slow", jitter=0)
    async def slow(run: Run) -> None:
        pass

    async def failing_release(lease: Any) -> None:
        await anyio.sleep(0)
        raise tenure.StoreUnavailable("memory://: injected: releases fail")

    worker._locks.release = failing_release  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="tenure.jobs"):
        async with worker:
            await wait_for(lambda: "failed; released once" in caplog.text, 10)
    assert "releasing the lease of job 'app.slow' failed" in caplog.text
    assert "''s" not in caplog.text


def test_an_async_job_with_the_wrong_signature_is_shown_the_async_line_to_write() -> None:
    from tenure.jobs._signatures import check_callable

    async def no_arguments() -> None: ...

    with pytest.raises(tenure.InvalidArgumentType,
                       match=r"write it as: async def tick\(run: tenure.Run\) -> None"):
        check_callable(no_arguments, "a job", 1, "def tick(run: tenure.Run) -> None")
