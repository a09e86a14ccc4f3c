"""What acquire() logs when its store is down: one WARNING before its first retry, saying for
how long it retries, and none when the timeout leaves no retry (the error is raised at once)."""

from __future__ import annotations

import logging

import pytest
from waiting import call

import tenure
import tenure.aio
from tenure import StoreUnavailable
from tenure.aio.stores import AsyncMemoryStore
from tenure.stores import Grant, MemoryStore

pytestmark = pytest.mark.anyio


class DownStore(MemoryStore):
    """A memory store whose every acquire fails as a store that is down does."""

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        raise StoreUnavailable("memory://: acquire failed: connection refused")


class AsyncDownStore(AsyncMemoryStore):
    """The async twin of DownStore."""

    async def try_acquire(self, name: str, holder: str, ttl: float,
                          limit: int) -> Grant | None:
        raise StoreUnavailable("memory://: acquire failed: connection refused")


@pytest.fixture(params=["sync", "async"])
def down_store(request: pytest.FixtureRequest) -> object:
    if request.param == "async":
        return tenure.aio.connect(AsyncDownStore())
    return tenure.connect(DownStore())


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "tenure" and record.levelno == logging.WARNING]


async def test_a_timeout_of_zero_claims_no_retry(down_store: tenure.Store,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    with pytest.raises(StoreUnavailable, match="connection refused"):
        await call(down_store.lock("jobs", ttl=5).acquire(timeout=0))
    assert [line for line in warnings_of(caplog) if "retrying" in line] == []


async def test_a_wait_that_retries_says_so_once(down_store: tenure.Store,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    with pytest.raises(StoreUnavailable, match="connection refused"):
        await call(down_store.lock("jobs", ttl=5, min_wait=0.01, max_wait=0.02)
                   .acquire(timeout=0.2))
    [warning] = warnings_of(caplog)
    assert "lock 'jobs' on memory://: store error, retrying for up to 0.2 s" in warning, warning
