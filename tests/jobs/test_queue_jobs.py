"""Queue-message jobs (QueueConsumer) on real queues: Azurite's queue service and the suite's
PostgreSQL server, every consumer test run on both sources. Locks live in a SQLite store file.

1,000 messages over 50 keys consumed by 3 OS processes (queue_worker.py) never overlap per key
and are each handled once; poison (not JSON, no scope property, too many deliveries, failing
handler with its reason), retry, busy scope lock, visibility extension and loss, scope lock
loss, stop and cancellation paths; argument checks.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from waiting import eventually, wait_until

import tenure.aio
from tenure.jobs._locks import LockPort
from tenure.jobs._queue import QueueConsumer, scope_key
from tenure.queues import AzureQueue, MessageLost, PostgresQueue, QueueMessage

pytestmark = pytest.mark.anyio

QUEUE_WORKER = Path(__file__).resolve().parents[1] / "support" / "queue_worker.py"
FAST = {"min_poll": 0.01, "max_poll": 0.1, "lock_retry_delay": 0.01,
        "max_lock_retry_delay": 0.05, "retry_backoff": 0.05, "max_retry_backoff": 0.1,
        "release_delay": 0.05}


class QueueUnderTest:
    """A fresh queue of one source kind, with what the tests need to look into it."""

    def __init__(self, kind: str, address: str) -> None:
        self.kind = kind
        self.address = address
        self.name = "t" + uuid.uuid4().hex[:20]
        self._opened: list[Any] = []

    def source(self) -> Any:
        """A new source object on this queue (each consumer gets its own)."""
        if self.kind == "azure":
            opened: Any = AzureQueue(self.name, connection_string=self.address)
        else:
            opened = PostgresQueue(self.name, self.address)
        self._opened.append(opened)
        return opened

    async def remaining(self) -> int:
        """Messages left in the queue, visible or not (poisoned ones excluded)."""
        if self.kind == "azure":
            from azure.storage.queue.aio import QueueClient

            async with QueueClient.from_connection_string(self.address, self.name) as client:
                properties = await client.get_queue_properties()
                return int(properties.approximate_message_count)
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.address) as db:
            cursor = await db.execute("SELECT count(*) FROM tenure_queue WHERE queue = %s",
                                      (self.name,))
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

    async def poisoned(self) -> list[dict[str, Any]]:
        poisoned: list[dict[str, Any]] = await self._opened[0].poisoned()
        return poisoned

    async def close(self) -> None:
        for opened in self._opened:
            await opened.close()


@pytest.fixture(params=["azure", "postgres"])
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[QueueUnderTest]:
    if request.param == "azure":
        address = request.getfixturevalue("azurite_queue").connection_string
    else:
        address = request.getfixturevalue("postgres_server").url
    made = QueueUnderTest(request.param, address)
    made.source()  # the one that reads poison
    yield made
    await made.close()


@pytest.fixture
async def locks(tmp_path: Path) -> AsyncIterator[LockPort]:
    store = tenure.aio.connect(f"sqlite:///{tmp_path}/locks.db")
    yield LockPort(store)
    await store.close()


@pytest.fixture
async def other_locks(tmp_path: Path) -> AsyncIterator[LockPort]:
    """The same lock store seen by another instance (another holder)."""
    store = tenure.aio.connect(f"sqlite:///{tmp_path}/locks.db")
    yield LockPort(store)
    await store.close()


@asynccontextmanager
async def consuming(*consumers: QueueConsumer) -> AsyncIterator[anyio.Event]:
    """Run the consumers; on leaving, stop them and wait (at most 30 s) for them to finish."""
    stopping = anyio.Event()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            for consumer in consumers:
                tasks.start_soon(consumer.run, stopping)
            try:
                yield stopping
            finally:
                stopping.set()


async def until(condition: Callable[[], Awaitable[object]], timeout: float, what: str) -> None:
    """Wait for an awaited condition, checking every 50 ms; fail after `timeout` s."""
    with anyio.move_on_after(timeout):
        while not await condition():
            await anyio.sleep(0.05)
        return
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def consumer(queue: QueueUnderTest, handler: Callable[[QueueMessage], Any], locks: LockPort,
             **options: Any) -> QueueConsumer:
    settings = {"scope": "Order:Key", **FAST, **options}
    return QueueConsumer(queue.source(), handler, locks=locks, name="tests.queue", **settings)


# -- many processes ------------------------------------------------------------------------------


async def test_1000_messages_over_50_keys_in_3_processes_never_overlap_per_key(
        queue: QueueUnderTest, tmp_path: Path,
        processes: list[subprocess.Popen[str]]) -> None:
    # Azure's instances run the sync API (a sync handler in threads), PostgreSQL's the async one.
    api = os.environ.get("QAPI") or ("sync" if queue.kind == "azure" else "async")
    source = queue.source()
    sent = anyio.Semaphore(16)

    async def send(n: int) -> None:
        async with sent:
            await source.send({"Order": {"Key": f"k{n % 50}"}, "n": n})

    async with anyio.create_task_group() as tasks:
        for n in range(1000):
            tasks.start_soon(send, n)
    logs = [tmp_path / f"instance{i}.log" for i in range(3)]
    for log in logs:
        processes.append(subprocess.Popen(
            [sys.executable, str(QUEUE_WORKER), queue.kind, queue.name,
             f"sqlite:///{tmp_path}/locks.db", str(log), api], stdout=subprocess.PIPE,
            text=True))
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "READY", "an instance failed to start"

    def events() -> list[list[str]]:
        return [line.split() for log in logs if log.exists()
                for line in log.read_text().splitlines() if line.endswith(tuple("0123456789"))]

    await eventually(lambda: sum(event[0] == "end" for event in events()) >= 1000, timeout=50,
                     what="1,000 handled messages")
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(timeout=30) == 0

    handled: dict[int, int] = defaultdict(int)
    runs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    started: dict[tuple[str, str], int] = {}
    for event, key, n, pid, at in events():
        if event == "start":
            started[(n, pid)] = int(at)
        else:
            handled[int(n)] += 1
            runs[key].append((started.pop((n, pid)), int(at)))
    assert not started, f"handlers that started and never ended: {started}"
    assert sorted(handled) == list(range(1000))
    assert {n: count for n, count in handled.items() if count != 1} == {}
    assert len(runs) == 50
    for key, spans in runs.items():
        spans.sort()
        overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
        assert overlaps == [], f"handlers of {key} overlapped: {overlaps[:3]}"
    assert await queue.remaining() == 0
    assert await queue.poisoned() == []


# -- poison, retry, busy ---------------------------------------------------------------------------


async def test_poison_reasons(queue: QueueUnderTest, locks: LockPort) -> None:
    source = queue.source()
    # Delivered 3 times without being settled (as by consumers that died with it):
    await source.send({"Order": {"Key": "k5"}, "n": 5})
    for _ in range(3):
        [crashed] = await source.receive(1, visibility_timeout=30)
        await source.abandon(crashed, 0)
    await source.send("{not json")
    await source.send({"order": {"Key": "k1"}, "n": 1})  # case matters
    await source.send({"Order": {"Key": None}, "n": 2})
    await source.send({"Order": {"Key": "k3"}, "n": 3, "fail": True})
    await source.send({"Order": {"Key": "k4"}, "n": 4})
    calls: list[tuple[int, int]] = []

    async def handle(message: QueueMessage) -> None:
        calls.append((message.body["n"], message.dequeue_count))
        if message.body.get("fail"):
            raise ValueError("invoice 3 is broken")

    async with consuming(consumer(queue, handle, locks, max_dequeue_count=3)):
        await until(lambda: _count(queue.poisoned(), 5), timeout=20, what="5 poisoned messages")
        await eventually(lambda: (4, 1) in calls, timeout=10, what="message 4 handled")
    reasons = {entry["text"]: entry["reason"] for entry in await queue.poisoned()}
    assert reasons["{not json"].startswith("body is not JSON (")
    assert reasons[json.dumps({"order": {"Key": "k1"}, "n": 1})] == (
        "body has no property 'Order' (scope 'Order:Key'; names are case-sensitive)")
    assert "'Order:Key' is null" in reasons[json.dumps({"Order": {"Key": None}, "n": 2})]
    assert reasons[json.dumps({"Order": {"Key": "k3"}, "n": 3, "fail": True})] == (
        "handler failed on delivery 3 of max_dequeue_count=3: ValueError: invoice 3 is broken")
    assert reasons[json.dumps({"Order": {"Key": "k5"}, "n": 5})].startswith(
        "received 4 times, more than max_dequeue_count=3 without completing")
    assert sorted(calls) == [(3, 1), (3, 2), (3, 3), (4, 1)]
    assert await queue.remaining() == 0


async def _count(entries: Awaitable[list[Any]], expected: int) -> bool:
    return len(await entries) >= expected


async def test_a_failed_message_is_retried_after_a_backoff_sync_handler(queue: QueueUnderTest,
                                                           locks: LockPort) -> None:
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    calls: list[int] = []

    def handle(message: QueueMessage) -> None:  # sync, in a thread
        calls.append(message.dequeue_count)
        if message.body["n"] == 2 or message.dequeue_count == 1:
            raise RuntimeError(f"delivery {message.dequeue_count} fails")

    await source.send({"Order": {"Key": "k2"}, "n": 2})
    async with consuming(consumer(queue, handle, locks, max_dequeue_count=2)):
        await until(lambda: _is(queue.remaining(), 0), timeout=10, what="the messages settled")
    assert sorted(calls) == [1, 1, 2, 2]
    [poisoned] = await queue.poisoned()
    assert poisoned["reason"] == (
        "handler failed on delivery 2 of max_dequeue_count=2: RuntimeError: delivery 2 fails")


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


async def _settle(message: QueueMessage) -> None:
    raise AssertionError("never awaited, so never runs")


async def test_a_sync_handler_that_returns_a_coroutine_fails_the_message(
        queue: QueueUnderTest, locks: LockPort) -> None:
    """Its body never runs: completing the message would lose it (before: completed)."""
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    returned: list[Any] = []

    def handle(message: QueueMessage) -> Any:  # sync, but returns the coroutine of an async def
        returned.append(_settle(message))
        return returned[-1]

    async with consuming(consumer(queue, handle, locks, max_dequeue_count=1)):
        await until(lambda: _count(queue.poisoned(), 1), timeout=10, what="the message failed")
    [poisoned] = await queue.poisoned()
    assert poisoned["reason"].startswith(
        "handler failed on delivery 1 of max_dequeue_count=1: TypeError: the queue handler "
        "returned a coroutine, which nothing awaits: its body did not run")
    assert returned and returned[0].cr_frame is None, "the coroutine must be closed"


async def test_a_busy_scope_is_retried_then_released_without_counting_a_delivery(
        queue: QueueUnderTest, locks: LockPort, other_locks: LockPort,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tenure.jobs.queue")
    busy = consumer(queue, lambda message: None, locks, max_lock_retries=1)
    held = await other_locks.try_acquire(busy.lock_name("k1"), ttl=30)
    assert held is not None
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    await source.send({"Order": {"Key": "k2"}, "n": 2})
    calls: list[tuple[int, int]] = []

    async def handle(message: QueueMessage) -> None:
        calls.append((message.body["n"], message.dequeue_count))

    def releases() -> int:
        return sum("stayed busy" in record.getMessage() for record in caplog.records)

    async with consuming(consumer(queue, handle, locks, max_lock_retries=1)):
        await eventually(lambda: releases() >= 2, timeout=10, what="two busy releases")
        assert calls == [(2, 1)]  # another key was not held up
        await other_locks.release(held)
        await eventually(lambda: len(calls) == 2, timeout=10, what="k1 handled once free")
    assert calls[1] == (1, 1)  # the busy rounds did not count as deliveries
    assert await queue.remaining() == 0


async def test_a_stale_delivery_cannot_release_or_poison_a_copy_of_its_message(
        queue: QueueUnderTest) -> None:
    # A consumer paused past its visibility: another consumer received the message since. Its
    # untried release (Azure: copy, then delete) and its dead-letter (copy to poison, then
    # delete) must fail before any copy is made, or the message would exist twice.
    source, other = queue.source(), queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    [stale] = await source.receive(1, visibility_timeout=1)
    again: list[QueueMessage] = []

    async def received_again() -> bool:
        again.extend(await other.receive(1, visibility_timeout=30))
        return bool(again)

    await until(received_again, timeout=15, what="the message visible and received again")
    with pytest.raises(MessageLost):
        await source.abandon(stale, 0, failed=False)
    with pytest.raises(MessageLost):
        await source.dead_letter(stale, "poisoned by a stale delivery")
    await other.complete(again[0])
    assert await queue.remaining() == 0, "a copy of the message was left behind"
    assert await queue.poisoned() == []


# -- visibility -----------------------------------------------------------------------------------


async def test_visibility_is_extended_while_a_long_handler_runs(queue: QueueUnderTest,
                                                                 locks: LockPort) -> None:
    source = queue.source()
    await source.send({"n": 1})
    calls: list[int] = []

    async def handle(message: QueueMessage) -> None:
        calls.append(message.dequeue_count)
        await anyio.sleep(2.5)  # the work: 2.5 visibility timeouts long

    # No scope lock: only the visibility keeps the second consumer off the message.
    first, second = (consumer(queue, handle, locks, scope=None, visibility_timeout=1)
                     for _ in range(2))
    async with consuming(first, second):
        await until(lambda: _is(queue.remaining(), 0), timeout=15, what="the message deleted")
    assert calls == [1]


async def test_a_handler_is_cancelled_when_its_visibility_is_lost(queue: QueueUnderTest,
                                                                  locks: LockPort) -> None:
    source, intruder = queue.source(), queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    events: list[str] = []

    async def handle(message: QueueMessage) -> None:
        events.append("started")
        await intruder.complete(message)  # as if it had expired and been taken and deleted
        try:
            await anyio.sleep_forever()
        finally:
            events.append("cancelled")

    async with consuming(consumer(queue, handle, locks, visibility_timeout=1)):
        await eventually(lambda: "cancelled" in events, timeout=10, what="the handler cancelled")
    assert events == ["started", "cancelled"]
    assert await queue.poisoned() == []


# -- the scope lock -------------------------------------------------------------------------------


@pytest.mark.parametrize("handler_kind", ["async", "sync"])
async def test_a_handler_is_stopped_when_its_scope_lock_is_lost(
        queue: QueueUnderTest, locks: LockPort, other_locks: LockPort, handler_kind: str) -> None:
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    events: list[str] = []

    async def handle_async(message: QueueMessage) -> None:
        events.append("started")
        if events.count("started") > 1:
            return
        try:
            await anyio.sleep_forever()
        finally:
            events.append("stopped")

    def handle_sync(message: QueueMessage) -> None:
        events.append("started")
        if events.count("started") > 1:
            return
        try:
            wait_until(lambda: message.stopped, timeout=20, what="the handler told to stop")
            message.check()  # raises LeaseLost, which is not counted as the handler's failure
        finally:
            events.append("stopped")

    job = consumer(queue, handle_async if handler_kind == "async" else handle_sync, locks,
                   lock_ttl=1.5)
    async with consuming(job):
        await eventually(lambda: events, timeout=10, what="the handler started")
        assert await other_locks.store.break_lease(job.lock_name("k1")) == 1
        await eventually(lambda: "stopped" in events, timeout=10, what="the handler stopped")
        # Released untried: delivered again, and completed this time.
        await until(lambda: _is(queue.remaining(), 0), timeout=15, what="the message deleted")
    assert events == ["started", "stopped", "started"]
    assert await queue.poisoned() == []


# -- stopping -------------------------------------------------------------------------------------


async def test_stopping_lets_a_running_handler_finish(queue: QueueUnderTest,
                                                      locks: LockPort) -> None:
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    running, finish = anyio.Event(), anyio.Event()
    finished: list[int] = []

    async def handle(message: QueueMessage) -> None:
        running.set()
        await finish.wait()
        finished.append(message.body["n"])

    job = consumer(queue, handle, locks)
    stopping = anyio.Event()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(job.run, stopping)
            await running.wait()
            stopping.set()
            finish.set()
    assert finished == [1]
    assert await queue.remaining() == 0


async def test_a_cancelled_consumer_releases_its_messages_at_once(queue: QueueUnderTest,
                                                                  locks: LockPort) -> None:
    source = queue.source()
    await source.send({"Order": {"Key": "k1"}, "n": 1})
    running = anyio.Event()

    async def handle(message: QueueMessage) -> None:
        running.set()
        await anyio.sleep_forever()

    job = consumer(queue, handle, locks)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(job.run, anyio.Event())
            await running.wait()
            tasks.cancel_scope.cancel()
    assert await locks.leases("queue:") == []
    [back] = await source.receive(1, visibility_timeout=30)  # visible again at once
    assert json.loads(back.text)["n"] == 1
    assert back.dequeue_count == 1  # the cancelled delivery did not count


async def test_worker_queue_decorator_runs_a_consumer(queue: QueueUnderTest,
                                                      tmp_path: Path) -> None:
    from tenure.jobs import AsyncWorker

    source = queue.source()
    for n in range(10):
        await source.send({"Order": {"Key": f"k{n % 3}"}, "n": n})
    store = tenure.aio.connect(f"sqlite:///{tmp_path}/worker.db")
    worker = AsyncWorker(store, grace=5)
    handled: list[int] = []

    @worker.queue(queue.source(), scope="Order:Key", concurrency=4, name="tests.orders", **FAST)
    async def handle(message: QueueMessage) -> None:
        handled.append(message.body["n"])

    try:
        with anyio.fail_after(30):
            async with worker:
                await eventually(lambda: len(handled) == 10, timeout=20, what="10 messages")
    finally:
        await store.close()
    assert sorted(handled) == list(range(10))
    assert await queue.remaining() == 0


# -- arguments ------------------------------------------------------------------------------------


@pytest.fixture
def offline_source() -> AzureQueue:
    return AzureQueue("invoices", connection_string=(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;"))


async def test_options_are_checked_at_construction(offline_source: AzureQueue,
                                                   locks: LockPort) -> None:
    def make(**options: Any) -> QueueConsumer:
        return QueueConsumer(offline_source, lambda message: None, locks=locks, name="j",
                             **options)

    cases = {
        "unknown queue option 'max_dequeue'": {"max_dequeue": 3},
        "max_dequeue_count=0 is out of range": {"max_dequeue_count": 0},
        "visibility_timeout=0.5 is out of range": {"visibility_timeout": 0.5},
        "max_poll=0.05 must not be below min_poll=0.1": {"max_poll": 0.05},
        "concurrency=0 is out of range": {"concurrency": 0},
        "scope='Invoice::Id' must be JSON property names": {"scope": "Invoice::Id"},
        "lock_ttl=0.01 is out of range": {"lock_ttl": 0.01},
    }
    for message, options in cases.items():
        with pytest.raises(tenure.InvalidArgument, match=message.replace("(", r"\(")):
            make(**options)
    with pytest.raises(tenure.InvalidArgumentType, match="max_lock_retries must be an int"):
        make(max_lock_retries=1.5)
    with pytest.raises(tenure.InvalidArgumentType, match="source must be a message source"):
        QueueConsumer("invoices", lambda message: None, locks=locks, name="j")  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgument, match="not a valid Azure queue name"):
        AzureQueue("Invoices", connection_string="x")
    with pytest.raises(tenure.InvalidArgument, match="schema='a-b' must be a plain SQL"):
        PostgresQueue("invoices", "postgresql://db/app", schema="a-b")


def test_scope_keys() -> None:
    assert scope_key({"Invoice": {"Id": "A-1"}}, ("Invoice", "Id")) == ("A-1", None)
    assert scope_key({"Invoice": {"Id": 7}}, ("Invoice", "Id")) == ("7", None)
    assert scope_key({"Lines": [{"Sku": True}]}, ("Lines", "0", "Sku")) == ("true", None)
    assert scope_key({"Invoice": {"id": 7}}, ("Invoice", "Id"))[1] == (
        "body has no property 'Invoice:Id' (scope 'Invoice:Id'; names are case-sensitive)")
    assert "is an object" in str(scope_key({"Invoice": {"Id": {}}}, ("Invoice", "Id"))[1])
    assert scope_key(["x"], ("Invoice",))[0] is None


def test_tenure_queues_loads_no_driver_until_a_source_is_used() -> None:
    code = ("import sys, tenure.queues; "
            "print(sorted(m for m in ('azure.storage.queue', 'psycopg') if m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    assert output.strip() == "[]"


# -- the handler's lease, as a type checker sees it --------------------------------------------

def _python_block(page: Path, containing: str) -> str:
    """The page's ```python block that contains `containing`."""
    blocks = page.read_text().split("```python\n")[1:]
    return next(block.split("```")[0] for block in blocks if containing in block)


def test_the_readme_and_docs_handlers_fencing_with_the_lease_pass_mypy_strict(
        tmp_path: Path) -> None:
    from mypy import api as mypy_api

    root = Path(__file__).resolve().parents[2]
    setup = ("import os\nimport tenure, tenure.queues\nfrom typing import Any\n"
             "worker = tenure.Worker(tenure.connect('sqlite:///locks.db'))\n"
             "conn = ''\n"
             "async def charge(invoice: Any, fence: int) -> None: ...\n"
             "async def post_invoice(invoice: Any, fence: int) -> None: ...\n")
    for number, (page, use) in enumerate([(root / "README.md", "message.lease.token"),
                                          (root / "docs/jobs/queues.md", "msg.lease.token")]):
        snippet = tmp_path / f"snippet_{number}.py"
        snippet.write_text(setup + _python_block(page, use).replace("worker.run()", ""))
        out, err, status = mypy_api.run(["--strict", "--cache-dir", str(tmp_path / "cache"),
                                         "--no-error-summary", str(snippet)])
        assert status == 0, f"{page.name}:\n{out}{err}"


def test_a_message_not_locked_says_so_to_code_that_checks() -> None:
    message = QueueMessage("m1", "{}", dequeue_count=1)
    assert message.lease is None  # the consumer's own check: no scope lock (yet)
    assert not message.stopped
    message.check()
