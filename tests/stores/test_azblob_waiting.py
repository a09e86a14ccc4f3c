"""How the azblob store's waiters wait (issue 20): blob leases cannot wake anyone, so every
waiter tries at the same bounded pace (docs/stores/azblob.md, _waiting.py), not the core's
backoff, under which a fresh waiter tries many times faster than one that waited long.

The lease requests a waiter sends are counted at the SDK's raw request hook of its own client.
Bounds are generous sanity limits; the pace's effect on fairness is measured in bench/.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import anyio
import pytest
from azure.storage.blob import ContainerClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from servers import Azurite
from waiting import eventually

import tenure
import tenure.aio
from tenure._async.stores.azblob._waiting import POLL_EVERY, POLL_JITTER

pytestmark = pytest.mark.anyio

SHORTEST = POLL_EVERY * (1 - POLL_JITTER)  # a waiter's shortest pause between tries
SLACK = 0.5  # a loaded machine's round trip and scheduling, on top of a pause


class Tries:
    """The monotonic times of the lease acquires a client sent (raw_request_hook)."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def __call__(self, request: object) -> None:
        http = request.http_request  # type: ignore[attr-defined]
        if http.headers.get("x-ms-lease-action") == "acquire":
            self.at.append(time.monotonic())

    def gaps(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.at, self.at[1:], strict=False)]


@pytest.fixture
def container() -> str:
    return "w" + uuid.uuid4().hex[:20]


@pytest.fixture
def holder(azurite: Azurite, container: str) -> Iterator[tenure.Store]:
    store = tenure.connect(f"azblob:///{container}",
                           connection_string=azurite.connection_string)
    yield store
    store.close()


def test_a_waiter_tries_at_a_bounded_pace_from_its_first_wait(
        azurite: Azurite, container: str, holder: tenure.Store) -> None:
    held = holder.lock("paced", ttl=15).acquire(timeout=10)
    tries = Tries()
    client = ContainerClient.from_connection_string(azurite.connection_string, container,
                                                    raw_request_hook=tries)
    waiter = tenure.connect(tenure.stores.AzureBlobStore(client, close_client=True))
    try:
        with pytest.raises(tenure.LockTimeout):
            waiter.lock("paced", ttl=15).acquire(timeout=3)
    finally:
        waiter.close()
        held.release()
    gaps = tries.gaps()
    # 3 s of waiting: a try at once, then one per pause (0.19 to 0.25 s) plus a round trip.
    assert 3 / (POLL_EVERY + SLACK) <= len(gaps) <= 3 / SHORTEST + 1, tries.at
    # The fresh waiter tries no faster than one that waited long (the core's backoff would
    # try 10 ms, then 20 ms... after its first try), and a long wait no slower than the pace.
    # (The last try comes at the acquire's timeout, whatever is left of a pause then.)
    assert min(gaps[:-1]) >= SHORTEST - 0.01, gaps
    assert max(gaps) <= POLL_EVERY + SLACK, gaps


async def test_a_long_waiter_gets_a_release_within_a_pause(
        azurite: Azurite, container: str) -> None:
    url = f"azblob:///{container}"
    async with tenure.aio.connect(url, connection_string=azurite.connection_string) as store:
        held = await store.lock("handed", ttl=15).acquire(timeout=10)
        tries = Tries()
        client = AsyncContainerClient.from_connection_string(
            azurite.connection_string, container, raw_request_hook=tries)
        waiter_store = tenure.aio.connect(
            tenure.aio.stores.AsyncAzureBlobStore(client, close_client=True))
        got: list[tuple[float, int]] = []

        async def wait() -> None:
            lease = await waiter_store.lock("handed", ttl=15).acquire(timeout=30)
            got.append((time.monotonic(), lease.token))
            await lease.release()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait)
                # Long enough that the core's backoff would have grown to its 1 s cap.
                await eventually(lambda: len(tries.at) >= 10, 20, "ten tries of the waiter")
                released_at = time.monotonic()
                await held.release()
                await eventually(lambda: got, 10, "the waiter's acquire")
        finally:
            await waiter_store.close()
    acquired_at, token = got[0]
    assert token > held.token
    # The waiter's next try after the release takes it (or one sent while the release was on
    # its way): one pause, plus round trips.
    assert acquired_at - released_at <= POLL_EVERY + SLACK
    assert sum(at > released_at for at in tries.at) <= 1, tries.at


def test_a_process_refused_a_name_goes_behind_the_others_when_it_asks_again(
        azurite: Azurite, container: str, holder: tenure.Store) -> None:
    # Refused "turns" a moment ago: others are likely polling for it. Its next acquire of it,
    # after the release, pauses before its first try (a waiter's try then comes first); a
    # try_acquire, an acquire with timeout 0, and a name it was never refused try at once.
    tries = Tries()
    client = ContainerClient.from_connection_string(azurite.connection_string, container,
                                                    raw_request_hook=tries)
    asker = tenure.connect(tenure.stores.AzureBlobStore(client, close_client=True))
    try:
        held = holder.lock("turns", ttl=15).acquire(timeout=10)
        assert asker.lock("turns", ttl=15).try_acquire() is None
        held.release()

        def first_try_after(take: object) -> float:
            called = time.monotonic()
            count = len(tries.at)
            lease = take()  # type: ignore[operator]
            assert lease is not None
            lease.release()
            return tries.at[count] - called

        assert first_try_after(asker.lock("turns", ttl=15).try_acquire) < SHORTEST
        assert first_try_after(lambda: asker.lock("turns", ttl=15).acquire(timeout=0)) < \
            SHORTEST
        assert first_try_after(lambda: asker.lock("turns", ttl=15).acquire(timeout=5)) >= \
            SHORTEST
        assert first_try_after(lambda: asker.lock("free", ttl=15).acquire(timeout=5)) < SHORTEST
    finally:
        asker.close()
