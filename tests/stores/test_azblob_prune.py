"""azblob://'s forgetting of names nobody holds: `prune(idle)` deletes their blobs (never a
leased one, records move to a blob of their own), `retain=0` at the release, a release's sweep
of one listing page once names have been idle `retain` seconds, never with retain=inf; listings
page through the container (continuation); the URL and the errors say the option like the
other stores'. The conformance suite (tests/conformance/test_pruning.py) covers the rest."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.storage.blob import ContainerClient
from servers import Azurite
from waiting import wait_until

import tenure
from tenure._sync.stores.azblob import _container

TTL = 15.0  # the service's shortest blob lease


@pytest.fixture
def container(azurite: Azurite) -> Iterator[str]:
    """A fresh container's name (the store creates it on first use)."""
    name = "t" + uuid.uuid4().hex[:20]
    yield name
    with ContainerClient.from_connection_string(azurite.connection_string, name) as client:
        if client.exists():
            client.delete_container()


def blobs(azurite: Azurite, container: str) -> list[str]:
    """The kinds of the container's blobs (lock, counter, slot-<i>, record), by name order."""
    with ContainerClient.from_connection_string(azurite.connection_string, container) as client:
        if not client.exists():
            return []
        return sorted(blob.name.rsplit("/", 1)[-1] for blob in client.list_blobs())


def test_retain_0_forgets_a_name_at_its_release_and_its_next_token_is_larger(
        azurite: Azurite, container: str) -> None:
    with tenure.connect(f"azblob:///{container}?retain=0") as store:
        assert store.url.endswith("?retain=0")
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=TTL).acquire() as lease:
                assert blobs(azurite, container) == ["lock"]
                tokens.append(lease.token)
            assert blobs(azurite, container) == []
        assert tokens == sorted(set(tokens)), tokens
        first, second = (store.semaphore("pool", 2, ttl=TTL).try_acquire() for _ in range(2))
        assert first is not None and second is not None
        first.release()
        assert blobs(azurite, container) == ["counter", "slot-0", "slot-1"], (
            "the name stays while a slot is held")
        second.release()
        assert blobs(azurite, container) == []


def test_a_release_sweeps_the_names_idle_longer_than_retain(azurite: Azurite,
                                                            container: str) -> None:
    with tenure.connect(f"azblob:///{container}", retain=1) as store:
        for number in range(20):
            store.lock(f"invoice-{number}", ttl=TTL).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("held", ttl=TTL).try_acquire()  # (sweeps may have begun already)

        def swept() -> bool:
            store.lock("ticker", ttl=TTL).try_acquire().release()  # type: ignore[union-attr]
            return len(blobs(azurite, container)) <= 2  # "held", and "ticker" if not idle yet

        # retain is 1 s (Last-Modified has whole seconds), a sweep page at most once a second
        wait_until(swept, 30, "a release to sweep the 20 idle names")
        assert held is not None and [info.name for info in store.leases()] == ["held"]
        assert held.release()


def test_retain_inf_keeps_every_name_and_prune_forgets_it(azurite: Azurite,
                                                          container: str) -> None:
    with tenure.connect(f"azblob:///{container}?retain=inf") as store:
        assert store.url.endswith("?retain=inf")
        store.lock("kept", ttl=TTL).try_acquire().release()  # type: ignore[union-attr]
        assert store.prune(3600) == 0
        assert blobs(azurite, container) == ["lock"]
        assert store.prune(0) == 1
        assert blobs(azurite, container) == []
    with tenure.connect(f"azblob:///{container}") as store:
        assert store.url == f"azblob://devstoreaccount1/{container}"  # 3600: the default


def test_a_record_moves_out_of_a_pruned_lock_blob_and_the_newer_record_wins(
        azurite: Azurite, container: str) -> None:
    with tenure.connect(f"azblob:///{container}", retain="inf") as store:
        lease = store.lock("nightly", ttl=TTL).try_acquire()
        assert lease is not None and store.backend.write_record(lease.grant, "first")
        first = lease.token
        lease.release()
        assert store.prune(0) == 1
        assert blobs(azurite, container) == ["record"], "the record stays, the lock blob goes"
        assert store.backend.read_record("nightly") == "first"
        assert store.backend.records() == {"nightly": "first"}

        again = store.lock("nightly", ttl=TTL).try_acquire()
        assert again is not None and again.token > first
        assert store.prune(0) == 0, "held"
        assert store.backend.read_record("nightly") == "first", "until a new one is written"
        assert store.backend.write_record(again.grant, "second")
        assert store.backend.read_record("nightly") == "second"
        assert store.backend.records() == {"nightly": "second"}
        again.release()
        assert store.prune(0) == 1
        assert blobs(azurite, container) == ["record"]
        assert store.backend.read_record("nightly") == "second"
        assert store.backend.records() == {"nightly": "second"}
        assert store.prune(0) == 0, "a record blob alone is not a name to forget"


def test_listings_page_through_the_container(azurite: Azurite, container: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_container, "PAGE", 3)  # 3 blobs a page: a name's blobs span pages
    with tenure.connect(f"azblob:///{container}", retain="inf") as store:
        held = []
        for number in range(3):  # counter, slot-0, slot-1: one slot held
            kept, let_go = (store.semaphore(f"pool-{number}", 2, ttl=TTL).try_acquire()
                            for _ in range(2))
            assert kept is not None and let_go is not None and let_go.release()
            held.append(kept)
        for number in range(7):
            lease = store.lock(f"job-{number}", ttl=TTL).try_acquire()
            assert lease is not None and store.backend.write_record(lease.grant, str(number))
            lease.release()
        assert len(blobs(azurite, container)) == 3 * 3 + 7
        assert [(info.name, info.slot) for info in store.leases()] == [
            (f"pool-{number}", lease.grant.slot) for number, lease in enumerate(held)]
        assert store.backend.records() == {f"job-{number}": str(number) for number in range(7)}
        assert store.prune(0, dry_run=True) == 7
        assert store.prune(0) == 7, "the 7 jobs; each pool has a slot held"
        assert blobs(azurite, container).count("record") == 7
        assert store.backend.records() == {f"job-{number}": str(number) for number in range(7)}
        for lease in held:
            assert lease.release()
        assert store.prune(0) == 3
        assert blobs(azurite, container) == ["record"] * 7


@pytest.mark.parametrize(("url", "keywords", "message"), [
    ("azblob:///locks?retain=-1", {}, "retain='-1' is out of range: give seconds from 0"),
    ("azblob:///locks?retain=soon", {}, "retain='soon' is not a number"),
    ("azblob:///locks?retain=5", {"retain": 6}, "retain is '5' in the URL but 6 as a keyword"),
])
def test_a_bad_retain_is_refused_before_any_request(url: str, keywords: dict[str, object],
                                                    message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(url, connection_string="UseDevelopmentStorage=true", **keywords)
