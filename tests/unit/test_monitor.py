"""The lease monitor renews in batches and keeps going through store failures."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import anyio
import pytest
from waiting import eventually, wait_until

import tenure
import tenure.aio
from tenure import StoreUnavailable
from tenure._sync._shim import run_all
from tenure.aio.stores import AsyncMemoryStore
from tenure.stores import Grant, LostReason, MemoryStore


class CountingStore(MemoryStore):
    """A real memory store that records each renewal batch, and can fail on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.failing = False

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        self.batches.append(len(grants))
        if self.failing:
            raise StoreUnavailable("memory://: injected failure")
        return super().renew(grants, ttl)


def test_many_leases_are_renewed_in_few_batches() -> None:
    backend = CountingStore()
    with tenure.connect(backend) as store:
        leases = [store.lock(f"job-{i}", ttl=0.9).try_acquire() for i in range(200)]
        wait_until(lambda: sum(backend.batches) >= 400, 5, "two renewals of every lease")
        assert all(lease is not None and not lease.lost for lease in leases)
        # 200 leases taken within a few ms share their renewal ticks.
        assert len(backend.batches) <= 10, backend.batches
        assert max(backend.batches) >= 150


def test_transient_failures_are_retried_then_the_deadline_decides() -> None:
    backend = CountingStore()
    lost: list[tenure.Lease] = []
    with tenure.connect(backend) as store:
        lease = store.lock("jobs", ttl=1.0, on_lost=lost.append).try_acquire()
        assert lease is not None
        backend.failing = True
        failing_since = time.monotonic()
        wait_until(lambda: lease.lost, 3, "the deadline to pass without a renewal")
        assert lease.lost_reason is LostReason.DEADLINE
        assert time.monotonic() - failing_since < 1.0  # deadline = 0.99 ttl - 0.1 s margin
        assert len(backend.batches) >= 2, "a failed renewal is retried before the deadline"
        wait_until(lambda: lost == [lease], 1, "on_lost to run")


def test_renewals_resume_when_the_store_recovers(caplog: pytest.LogCaptureFixture) -> None:
    backend = CountingStore()
    caplog.set_level("INFO", logger="tenure")
    with tenure.connect(backend) as store:
        lease = store.lock("jobs", ttl=1.5).try_acquire()
        assert lease is not None
        backend.failing = True
        wait_until(lambda: len(backend.batches) >= 3, 2, "a failed renewal and two retries")
        backend.failing = False
        count = len(backend.batches)
        wait_until(lambda: len(backend.batches) >= count + 3, 3, "renewals to succeed again")
        assert not lease.lost
    # One line when the outage starts and one when it ends, not one per failed retry.
    outage = [(record.levelname, record.getMessage()) for record in caplog.records
              if "renewal" in record.getMessage()]
    assert [level for level, _ in outage] == ["WARNING", "INFO"], outage
    assert "injected failure" in outage[0][1] and "succeed again" in outage[1][1]


class FlakyReleaseStore(MemoryStore):
    """A real memory store whose next release fails once."""

    fail_next_release = False

    def release(self, grant: Grant) -> bool:
        if self.fail_next_release:
            self.fail_next_release = False
            raise StoreUnavailable("memory://: injected failure")
        return super().release(grant)


def test_a_failed_release_can_be_retried() -> None:
    backend = FlakyReleaseStore()
    with tenure.connect(backend) as store:
        lease = store.lock("jobs", ttl=5).try_acquire()
        assert lease is not None
        backend.fail_next_release = True
        try:
            lease.release()
        except StoreUnavailable:
            pass
        else:
            raise AssertionError("the injected failure did not surface")
        assert not lease.released
        assert store.lock("jobs").try_acquire() is None  # still held in the store
        assert lease.release() is True
        assert store.lock("jobs").try_acquire() is not None


def test_sync_run_all_runs_items_concurrently() -> None:
    """A sync store's per-lease requests (azblob renewal) overlap instead of adding up."""
    barrier = threading.Barrier(8)
    # Sequential calls would each wait alone at the barrier and time out.
    assert run_all(lambda item: (barrier.wait(timeout=5), item)[1], list(range(8))) == list(
        range(8))


class StalledRenewalStore(MemoryStore):
    """A real memory store whose renewals hang, as on a store path that went silent."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled = False
        self.thaw = threading.Event()

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        if self.stalled:
            self.thaw.wait(30)
        return super().renew(grants, ttl)


def test_a_hanging_renewal_does_not_delay_the_loss_signal() -> None:
    backend = StalledRenewalStore()
    signalled: list[float] = []
    with tenure.connect(backend) as store:
        lease = store.lock("jobs", ttl=0.6,
                           on_lost=lambda _: signalled.append(time.monotonic())).try_acquire()
        assert lease is not None
        backend.stalled = True
        try:
            wait_until(lambda: signalled, 3, "on_lost while the renewal hangs")
            # The deadline the holder was given last; on_lost runs at it, not when the store
            # answers (never, here).
            assert signalled[0] - lease.deadline < 0.1
            assert lease.lost_reason is LostReason.DEADLINE
            # Other leases of the same store are still renewed meanwhile: one stuck batch does
            # not hold up the rest.
            backend.stalled = False
            other = store.lock("reports", ttl=0.6).try_acquire()
            assert other is not None
            wait_until(lambda: other.expires_in > 0.5 and other.deadline > lease.deadline + 0.6,
                       3, "the second lease to be renewed")
            assert not other.lost
        finally:
            backend.thaw.set()


@pytest.mark.anyio
async def test_a_hanging_renewal_does_not_delay_cancelling_the_body() -> None:
    thaw = anyio.Event()

    class Stalled(AsyncMemoryStore):
        async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
            await thaw.wait()
            return await super().renew(grants, ttl)

    async with tenure.aio.connect(Stalled()) as store:
        cancelled_at = deadline = 0.0
        with pytest.raises(tenure.LeaseLost):
            async with store.lock("jobs", ttl=0.6).acquire(timeout=1) as lease:
                try:
                    await anyio.sleep(5)
                finally:
                    cancelled_at, deadline = time.monotonic(), lease.deadline
        assert cancelled_at - deadline < 0.1
        thaw.set()


def test_a_slow_on_lost_does_not_delay_another_leases_loss_signal() -> None:
    backend = StalledRenewalStore()
    signalled: dict[str, float] = {}
    release_first = threading.Event()

    def slow(lease: tenure.Lease) -> None:
        signalled[lease.name] = time.monotonic()
        release_first.wait(5)  # e.g. joins a worker, or releases through a silent path

    def record(lease: tenure.Lease) -> None:
        signalled[lease.name] = time.monotonic()

    with tenure.connect(backend) as store:
        first = store.lock("first", ttl=0.6, on_lost=slow).try_acquire()
        second = store.lock("second", ttl=0.9, on_lost=record).try_acquire()
        assert first is not None and second is not None
        backend.stalled = True
        try:
            wait_until(lambda: "second" in signalled, 3, "the second lease's on_lost")
            assert signalled["second"] - second.deadline < 0.1
            assert "first" in signalled
        finally:
            release_first.set()
            backend.thaw.set()


@pytest.mark.anyio
async def test_an_async_acquire_ends_at_its_timeout_when_a_try_hangs() -> None:
    tries: list[float] = []

    class SilentAfterFirstTry(AsyncMemoryStore):
        """The name is held elsewhere; after the first answer the path goes silent."""

        async def try_acquire(self, name: str, holder: str, ttl: float,
                              limit: int) -> Grant | None:
            tries.append(time.monotonic())
            if len(tries) > 1:
                await anyio.sleep(30)
            return None

    async with tenure.aio.connect(SilentAfterFirstTry()) as store:
        started = time.monotonic()
        with pytest.raises(tenure.LockTimeout):
            await store.lock("jobs", ttl=5).acquire(timeout=0.5)
        assert time.monotonic() - started < 0.7  # not the 30 s the hanging try would take
        assert len(tries) >= 2


def test_an_async_store_used_again_under_a_new_event_loop_renews_without_errors(
        caplog: pytest.LogCaptureFixture) -> None:
    store = tenure.aio.connect("memory://")

    async def hold_past_two_renewals() -> bool:
        lease = await store.lock("y", ttl=0.3).acquire(timeout=5)
        first_deadline = lease.deadline
        await eventually(lambda: lease.deadline > first_deadline + 0.15, 5, "two renewals")
        lost = lease.lost
        await lease.release()
        return lost

    assert asyncio.run(hold_past_two_renewals()) is False
    assert asyncio.run(hold_past_two_renewals()) is False  # a second loop, as per-test loops do
    assert "renewal loop error" not in caplog.text
