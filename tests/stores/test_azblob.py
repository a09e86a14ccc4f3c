"""Azure-specific behaviour of the azblob store: the service behaviours it relies on (pinned
here, so a change in Azurite or the SDK shows up first in this file), the name mapping, error
translation, and loss on an admin break or a restart of the service. The conformance suite runs
everything else on Azurite."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob.aio import BlobLeaseClient, ContainerClient
from hypothesis import given
from hypothesis import strategies as st
from servers import Azurite, ServiceMissing, service_missing
from test_mysql import Forwarder  # a loopback forwarder with a delay, that can go silent
from waiting import call, eventually

import tenure
import tenure.aio
from tenure._async.stores.azblob import ROLE, blob_name, decode, directory, encode, open_store
from tenure._sync.stores.azblob import open_store as open_sync_store

pytestmark = pytest.mark.anyio

HOSTILE = ["a/b", "a\\b", "a_b", "a//b", "a/", "/a", ".", "..", "../..", "trailing.", "x/.",
           " ", "\n", "nul\x00byte", "名前/ロック", "🔒", "%2e%2e", "a" * 48 + "/x",
           "a" * 48 + "/y", "x" * 1024, "é" * 1024, "-dash", ".dot", "A", "a"]


def container_name() -> str:
    return "t" + uuid.uuid4().hex[:20]


@pytest.fixture
async def container(azurite: Azurite) -> AsyncIterator[ContainerClient]:
    """A fresh container on the session's Azurite, through the bare async SDK."""
    client = ContainerClient.from_connection_string(azurite.connection_string, container_name())
    async with client:
        await client.create_container()
        yield client


# -- the service behaviours the store relies on -------------------------------------------------


async def test_service_lease_behaviours(container: ContainerClient) -> None:
    blob = container.get_blob_client("tenure/pinned/lock")
    await blob.create_page_blob(0, sequence_number=1000)
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    await BlobLeaseClient(blob, mine).acquire(15)

    # A second acquire with another proposed id: 409 LeaseAlreadyPresent (held, not an error).
    with pytest.raises(HttpResponseError) as raised:
        await BlobLeaseClient(blob, theirs).acquire(15)
    assert (raised.value.status_code, raised.value.error_code) == (409, "LeaseAlreadyPresent")

    # Re-acquire with the same proposed id succeeds: a retried acquire is idempotent.
    again = BlobLeaseClient(blob, mine)
    await again.acquire(15)
    assert again.id == mine

    # A write without the lease id: 412 LeaseIdMissing. The counter only moves under the lease.
    with pytest.raises(HttpResponseError) as raised:
        await blob.set_sequence_number("increment")
    assert (raised.value.status_code, raised.value.error_code) == (412, "LeaseIdMissing")
    with pytest.raises(HttpResponseError) as raised:
        await blob.set_blob_metadata({"k": "v"})
    assert raised.value.status_code == 412
    answer = await blob.set_sequence_number("increment", lease=mine)
    assert answer["blob_sequence_number"] == 1001

    # Creating a blob only when missing never resets an existing counter.
    with pytest.raises(HttpResponseError) as raised:
        await blob.create_page_blob(0, sequence_number=1, match_condition=MatchConditions.IfMissing)
    assert raised.value.status_code == 409

    # After a break with period 0: renewal answers 409 LeaseIsBrokenAndCannotBeRenewed and
    # the blob is free for others at once.
    assert await BlobLeaseClient(blob).break_lease(0) == 0
    with pytest.raises(HttpResponseError) as raised:
        await BlobLeaseClient(blob, mine).renew()
    assert (raised.value.status_code, raised.value.error_code) == (
        409, "LeaseIsBrokenAndCannotBeRenewed")
    # ...but its old id can still release it (so a release right after a break, before anyone
    # took the blob, reports True: nothing of anyone else's is freed).
    await BlobLeaseClient(blob, mine).release()
    await BlobLeaseClient(blob, theirs).acquire(15)

    # The old holder can neither release nor renew the new holder's lease.
    for operation in ("release", "renew"):
        with pytest.raises(HttpResponseError) as raised:
            await getattr(BlobLeaseClient(blob, mine), operation)()
        assert raised.value.status_code == 409, operation
    properties = await blob.get_blob_properties()
    assert (properties.lease.state, properties.page_blob_sequence_number) == ("leased", 1001)


# -- names ------------------------------------------------------------------------------------


def legal_blob_name(name: str) -> bool:
    segments = name.split("/")
    return (0 < len(name) <= 1024 and name.isascii() and "\\" not in name
            and not name.endswith((".", "/")) and all(segments)
            and not any(segment in (".", "..") for segment in segments))


def test_hostile_names_map_to_legal_distinct_blob_names() -> None:
    blobs = {blob_name(name, 0, 1) for name in HOSTILE} | {
        blob_name(name, slot, 3) for name in HOSTILE for slot in range(3)}
    assert len(blobs) == len(HOSTILE) * 4, "two names or slots share a blob"
    assert all(legal_blob_name(blob) and blob.startswith("tenure/") for blob in blobs)
    # Azure treats '\\' as '/': the two must still map to different blobs.
    assert blob_name("a/b", 0, 1).lower() != blob_name("a\\b", 0, 1).replace("\\", "/").lower()
    # No name's directory is a prefix of another's (break_lease and leases() list by prefix).
    directories = [directory(name) for name in HOSTILE]
    assert not [(a, b) for a in directories for b in directories if a != b and b.startswith(a)]


@given(st.text(min_size=1, max_size=200))
def test_any_name_maps_to_a_legal_blob_and_round_trips_through_metadata(name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return  # refused at the call
    assert legal_blob_name(blob_name(name, 0, 1))
    assert encode(name).isascii() and decode(encode(name)) == name


# -- connecting and errors ---------------------------------------------------------------------


def test_urls_and_options_fail_at_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    secret = "AccountName=dev;AccountKey=c2VjcmV0LWtleQ==;BlobEndpoint=http://127.0.0.1:1/dev"
    cases: list[tuple[str, dict[str, Any], type[Exception], str]] = [
        ("azblob:///locks", {}, tenure.InvalidArgument, "needs a connection string"),
        ("azblob://acct/", {}, tenure.InvalidArgument, "needs a container name"),
        ("azblob://acct/Bad_Name", {}, tenure.InvalidArgument, "3 to 63 lowercase"),
        ("azblob://acct/ab", {}, tenure.InvalidArgument, "3 to 63 lowercase"),
        ("azblob://Not-An-Account/locks", {}, tenure.InvalidArgument, "3 to 24 lowercase"),
        ("azblob:///locks?bogus=1", {"connection_string": secret}, tenure.InvalidArgument,
         r"unknown option 'bogus' for azblob:// stores; accepted: retain \(in the URL's query"),
        ("azblob:///locks", {"connection_string": secret, "bogus": 1}, tenure.InvalidArgument,
         "unknown option 'bogus' for azblob:// stores; accepted: connection_string, "),
        ("azblob:///locks", {"connection_string": "nonsense;AccountKey=hunter2"},
         tenure.InvalidArgument, "not an Azure Storage connection string"),
        ("azblob://acct/locks", {"connection_string": secret}, tenure.InvalidArgument,
         "write azblob:///locks"),
        ("azblob://acct/locks", {"blob_url_format": "https://{nope}/"}, tenure.InvalidArgument,
         "blob_url_format"),
        ("azblob:///locks", {"connection_string": secret, "create_container": "no"},
         tenure.InvalidArgumentType, "create_container"),
        ("sqlite:////tmp/x.db", {"connection_string": secret}, tenure.InvalidArgument,
         "unknown option 'connection_string' for sqlite:// stores"),
        # Where the CLI takes only a URL: the two places a connection string can come from.
        (f"azblob:///locks?connection_string={secret}", {}, tenure.InvalidArgument,
         r"unknown option 'connection_string' .*set the environment variable "
         r"AZURE_STORAGE_CONNECTION_STRING, or pass connect\(url, connection_string=\.\.\.\)"),
    ]
    for module in (tenure, tenure.aio):
        for url, options, error, message in cases:
            with pytest.raises(error, match=message) as raised:
                module.connect(url, **options)
            assert "c2VjcmV0" not in str(raised.value) and "hunter2" not in str(raised.value)


def test_a_client_of_the_other_api_is_named_with_its_module() -> None:
    """The sync store given the aio ContainerClient: both are named ContainerClient, so the
    message names the module of the one given."""
    import azure.storage.blob

    for store_class, client_class in (
            (tenure.stores.AzureBlobStore, ContainerClient),
            (tenure.aio.stores.AsyncAzureBlobStore, azure.storage.blob.ContainerClient)):
        client = client_class.from_connection_string("UseDevelopmentStorage=true", "locks")
        with pytest.raises(tenure.InvalidArgumentType) as raised:
            store_class(client)
        given = f"got {client_class.__module__}"
        assert given in str(raised.value) and given.startswith("got azure.storage.blob."), (
            str(raised.value))


async def test_connect_by_account_and_by_development_storage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with tenure.aio.connect("azblob://myaccount/locks") as store:
        assert store.url == "azblob://myaccount/locks"
        assert store.backend.container.url == "https://myaccount.blob.core.windows.net/locks"
    monkeypatch.setenv("TENURE_AZURE_BLOB_URL_FORMAT", "https://{account}.blob.core.chinacloudapi"
                       ".cn/{container}")
    async with tenure.aio.connect("azblob://myaccount/locks") as store:
        assert store.backend.container.url.startswith("https://myaccount.blob.core.chinacloudapi")
    async with tenure.aio.connect("azblob://myaccount/locks",
                                  blob_url_format="https://{account}.example/{container}") as store:
        assert store.backend.container.url == "https://myaccount.example/locks"
    async with tenure.aio.connect("azblob:///locks",
                                  connection_string="UseDevelopmentStorage=true") as store:
        assert store.url == "azblob://devstoreaccount1/locks"
        assert store.backend.container.url.startswith("http://127.0.0.1:10000/devstoreaccount1")
    store = tenure.connect("azblob:///locks", connection_string="UseDevelopmentStorage=true")
    assert "AccountKey" not in repr(store) and store.url == "azblob://devstoreaccount1/locks"
    store.close()


def test_ttl_outside_the_services_range_is_refused(azurite: Azurite) -> None:
    with tenure.connect(f"azblob:///{container_name()}") as store:
        for ttl in (5, 14.9, 61, 3600):
            with pytest.raises(tenure.InvalidArgument, match="Azure blob leases last 15 to 60 s"):
                store.lock("jobs", ttl=ttl)
        assert store.lock("jobs", ttl=15) and store.semaphore("jobs", 2, ttl=60)


def test_missing_container_without_create_container(azurite: Azurite) -> None:
    name = container_name()
    with tenure.connect(f"azblob:///{name}", create_container=False) as store:
        with pytest.raises(tenure.StoreUnavailable, match=f"container '{name}' does not exist"):
            store.lock("jobs", ttl=15).try_acquire()
        assert store.leases() == [] and store.break_lease("jobs") == 0
    with tenure.connect(f"azblob:///{name}") as store:  # created on first use by default
        lease = store.lock("jobs", ttl=15).try_acquire()
        assert lease is not None and lease.release()


async def test_connection_refused_is_one_clear_error_without_a_retry_storm() -> None:
    from servers import DEV_ACCOUNT, DEV_KEY, free_port

    secret = (f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
              f"BlobEndpoint=http://127.0.0.1:{free_port()}/{DEV_ACCOUNT};")
    for module in (tenure, tenure.aio):
        store = module.connect("azblob:///locks", connection_string=secret)
        started = time.monotonic()
        with pytest.raises(tenure.StoreUnavailable, match="cannot reach the blob") as raised:
            if module is tenure.aio:
                await store.lock("jobs", ttl=15).try_acquire()
            else:
                store.lock("jobs", ttl=15).try_acquire()
        assert time.monotonic() - started < 5, "the SDK's default retries (15 s, 18 s...) leak"
        assert raised.value.__cause__ is None and raised.value.__suppress_context__
        assert DEV_KEY not in str(raised.value) and "'jobs'" in str(raised.value)
        assert str(raised.value).startswith("azblob://devstoreaccount1/locks: acquire")
        if module is tenure.aio:
            await store.close()
        else:
            store.close()


def test_wrong_key_names_the_role(azurite: Azurite) -> None:
    wrong = azurite.connection_string.replace("Eby8", "AAAA")
    with tenure.connect(f"azblob:///{container_name()}", connection_string=wrong) as store:
        with pytest.raises(tenure.StoreUnavailable, match=f"'{ROLE}' role") as raised:
            store.lock("jobs", ttl=15).try_acquire()
        assert "AAAA" not in str(raised.value)


def test_missing_extra_says_what_to_install() -> None:
    code = """
import sys
for module in ("azure.storage.blob", "azure.storage.blob.aio"):
    sys.modules[module] = None
import tenure, tenure.stores, tenure.aio.stores
assert tenure.connect("sqlite:locks.db").url
try:
    tenure.connect("azblob:///locks", connection_string="UseDevelopmentStorage=true")
except tenure.MissingExtra as exc:
    print(exc)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).parent, timeout=60, check=False)
    assert "install tenure[azure]" in result.stdout, result.stdout + result.stderr
    Path(__file__).parent.joinpath("locks.db").unlink(missing_ok=True)


# -- losing a lease ----------------------------------------------------------------------------


async def test_admin_break_cancels_the_async_body_within_a_renewal_period(
        azurite: Azurite) -> None:
    url = f"azblob:///{container_name()}"
    async with tenure.aio.connect(url) as store, tenure.aio.connect(url) as admin:
        lock = store.lock("jobs", ttl=15, renew_every=2)
        with pytest.raises(tenure.LeaseLost):
            async with lock.acquire(timeout=5) as lease:
                assert [info.holder for info in await store.leases()] == [store.holder]
                assert await admin.break_lease("jobs") == 1
                broken_at = time.monotonic()
                await anyio.sleep(60)  # cancelled by the loss
        # one renewal period (2 s + 10 % jitter), plus slack for a loaded machine
        assert time.monotonic() - broken_at < 2 * 1.1 + 2.0, "not within one renewal period"
        assert lease.lost_reason is tenure.LostReason.BROKEN
        successor = await store.lock("jobs", ttl=15).try_acquire()
        assert successor is not None and successor.token > lease.token
        await successor.release()


@pytest.fixture
def own_azurite(tmp_path: Path) -> Iterator[Azurite]:
    """An Azurite of this test's own, to kill and restart."""
    server = Azurite(tmp_path)
    try:
        server.start()
    except ServiceMissing as exc:
        service_missing(str(exc))
    yield server
    server.stop()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_restart_of_the_service_while_a_lease_is_held(
        own_azurite: Azurite, api: str) -> None:
    """In-memory Azurite restarted: every blob is gone. The holder must learn it lost the
    lease (never keep running past its deadline), and a new grant's token still grows."""
    url = f"azblob:///{container_name()}"
    options = {"connection_string": own_azurite.connection_string}
    module: Any = tenure.aio if api == "async" else tenure
    store = module.connect(url, **options)
    lock = store.lock("jobs", ttl=15, renew_every=0.5)
    lease = await _call(lock.try_acquire())
    assert lease is not None
    own_azurite.restart()
    restarted_at = time.monotonic()
    while not lease.lost:
        assert time.monotonic() - restarted_at < 15, "held past the lease's ttl"
        await anyio.sleep(0.05)
    assert lease.lost_reason in (tenure.LostReason.BROKEN, tenure.LostReason.DEADLINE)
    again = await _call(lock.try_acquire())
    assert again is not None and again.token > lease.token, "the token went backwards"
    assert await _call(again.release()) is True
    await _call(store.close())


async def _call(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


def test_connection_string_from_the_environment(azurite: Azurite) -> None:
    assert os.environ["AZURE_STORAGE_CONNECTION_STRING"] == azurite.connection_string
    with tenure.connect(f"azblob:///{container_name()}") as store:
        assert store.url.startswith("azblob://devstoreaccount1/")


def test_fencing_off_still_excludes_and_reports_token_zero(azurite: Azurite) -> None:
    url = f"azblob:///{container_name()}"
    with tenure.connect(url, fencing=False) as store, tenure.connect(url) as fenced:
        lease = store.lock("jobs", ttl=15).try_acquire()
        assert lease is not None and lease.token == 0
        assert fenced.lock("jobs", ttl=15).try_acquire() is None
        assert lease.release() is True
        # fencing on again: the counter did not move while off, and still only grows
        first = fenced.lock("jobs", ttl=15).try_acquire()
        assert first is not None and first.release()
        second = fenced.lock("jobs", ttl=15).try_acquire()
        assert second is not None and second.token > first.token > 0
    with pytest.raises(tenure.InvalidArgumentType, match="fencing must be True or False"):
        tenure.connect(url, fencing="no")


async def test_a_block_blob_at_a_locks_name_keeps_its_counter_in_metadata(
        container: ContainerClient, azurite: Azurite) -> None:
    """Someone put a block blob where the lock blob goes: fencing falls back to a metadata
    counter written under the lease with If-Match, and the blob's own metadata survives."""
    blob = container.get_blob_client(blob_name("jobs", 0, 1))
    await blob.upload_blob(b"not ours", metadata={"owner": "someone"})
    url = f"azblob:///{container.container_name}"
    async with tenure.aio.connect(url, connection_string=azurite.connection_string) as store:
        lock = store.lock("jobs", ttl=15)
        first = await lock.try_acquire()
        assert first is not None and first.token > 0
        assert await store.lock("jobs", ttl=15).try_acquire() is None
        [info] = await store.leases("jobs")
        assert (info.name, info.holder, info.token) == ("jobs", store.holder, first.token)
        assert await first.release() is True
        second = await lock.try_acquire()
        assert second is not None and second.token == first.token + 1
        assert await second.release() is True
    properties = await blob.get_blob_properties()
    assert properties.metadata["owner"] == "someone"
    assert str(properties.blob_type).lower().endswith("blockblob")


async def test_short_holds_skip_the_holder_write_long_ones_get_it(
        container: ContainerClient, azurite: Azurite) -> None:
    url = f"azblob:///{container.container_name}"
    blob = container.get_blob_client(blob_name("jobs", 0, 1))
    async with tenure.aio.connect(url, connection_string=azurite.connection_string) as store:
        lock = store.lock("jobs", ttl=15)
        lease = await lock.try_acquire()
        assert lease is not None and await lease.release()
        await anyio.sleep(0.5)  # past the write's delay: a cancelled write must stay unmade
        assert "tenure_holder" not in (await blob.get_blob_properties()).metadata

        lease = await lock.try_acquire()
        assert lease is not None
        deadline = time.monotonic() + 1.0
        while "tenure_holder" not in (await blob.get_blob_properties()).metadata:
            assert time.monotonic() < deadline, "holder not written within a second"
            await anyio.sleep(0.05)
        assert decode((await blob.get_blob_properties()).metadata["tenure_holder"]) == store.holder
        await lease.release()


# -- cut-off and silent requests ---------------------------------------------------------------


def through(azurite: Azurite, port: int) -> str:
    """Azurite's connection string, its blob endpoint on loopback port `port` instead."""
    return azurite.connection_string.replace(f"127.0.0.1:{azurite.port}/", f"127.0.0.1:{port}/")


async def test_a_cancelled_acquire_is_undone(azurite: Azurite) -> None:
    """An acquire cancelled after its lease request reached the service (the answer still on
    its way back) leaves no lease behind: the name is free again well within the 15 s lease."""
    container, delay = container_name(), 0.1
    with Forwarder(azurite.port, delay) as forwarder:
        store = open_store("", container, connection_string=through(azurite, forwarder.port))
        probe = open_store("", container, connection_string=azurite.connection_string)
        try:
            warm = await store.try_acquire("warm-up", "a", 15.0, 1)  # container, connection
            assert warm is not None and await store.release(warm) is True
            blob_made = await probe.try_acquire("cancelled", "b", 15.0, 1)  # one request then
            assert blob_made is not None and await probe.release(blob_made) is True
            with anyio.move_on_after(1.5 * delay) as scope:  # the lease request arrived
                await store.try_acquire("cancelled", "a", 15.0, 1)
            assert scope.cancelled_caught
            taken: list[Any] = []

            async def free() -> bool:
                taken.append(await probe.try_acquire("cancelled", "b", 15.0, 1))
                return taken[-1] is not None

            await eventually(free, 5, "the cancelled acquire's lease to be released")
            assert await probe.release(taken[-1]) is True
        finally:
            await store.close()
            await probe.close()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_silent_path_fails_within_the_timeout_and_the_store_recovers(
        azurite: Azurite, api: str) -> None:
    """On a path gone silent a renewal raises StoreUnavailable after about the store's
    `timeout` (not the SDK's 60 s read timeout times its retries), and the store works again
    once the path is back."""
    container = container_name()
    with Forwarder(azurite.port) as forwarder:
        opener = open_store if api == "async" else open_sync_store
        store: Any = opener("", container, connection_string=through(azurite, forwarder.port),
                            timeout=1.0)
        try:
            grant = await call(store.try_acquire("silent", "me", 15.0, 1))
            forwarder.freeze()
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable):
                await call(store.renew([grant], 15.0))
            assert time.monotonic() - started < 3.0  # 1 s, and a generous margin
            forwarder.thaw()
            assert await call(store.renew([grant], 15.0)) == [grant]
            assert await call(store.release(grant)) is True
        finally:
            await call(store.close())


# -- errors that cannot clear fail at once --------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("wrong", ["1111", "bm90LXRoZS1rZXktYnV0LWEtbG9uZy1vbmUtaW4tYmFzZTY0"])
async def test_a_wrong_account_key_is_refused_at_once(azurite: Azurite, api: str,
                                                      wrong: str) -> None:
    """acquire(timeout=None) used to retry a refused key forever, silently."""
    from servers import DEV_KEY

    module = tenure.aio if api == "async" else tenure
    secret = azurite.connection_string.replace(DEV_KEY, wrong)
    store = module.connect(f"azblob:///{container_name()}", connection_string=secret)
    started = time.monotonic()
    try:
        with pytest.raises(tenure.StoreRefused) as raised:
            await call(store.lock("jobs", ttl=15).acquire(timeout=None))
    finally:
        await call(store.close())
    assert time.monotonic() - started < 1.0
    message = str(raised.value)
    assert not raised.value.transient and "\n" not in message
    assert "refused access (HTTP 403" in message and "account key" in message, message
    assert "'jobs'" in message and message.startswith("azblob://devstoreaccount1/")
    assert f"={wrong}" not in message and DEV_KEY not in message
    if len(wrong) > 4:
        assert wrong not in message


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_missing_container_that_may_not_be_created_is_refused_at_once(
        azurite: Azurite, api: str) -> None:
    module = tenure.aio if api == "async" else tenure
    name = container_name()
    store = module.connect(f"azblob:///{name}", create_container=False)
    started = time.monotonic()
    try:
        with pytest.raises(tenure.StoreRefused, match=f"container '{name}' does not exist"):
            await call(store.lock("jobs", ttl=15).acquire(timeout=30))
    finally:
        await call(store.close())
    assert time.monotonic() - started < 1.0


async def test_a_closed_port_is_retried_until_the_timeout() -> None:
    from servers import DEV_ACCOUNT, DEV_KEY, free_port

    secret = (f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
              f"BlobEndpoint=http://127.0.0.1:{free_port()}/{DEV_ACCOUNT};")
    for module in (tenure, tenure.aio):
        store = module.connect("azblob:///locks", connection_string=secret, timeout=1)
        started = time.monotonic()
        try:
            with pytest.raises(tenure.StoreUnavailable) as raised:
                await call(store.lock("jobs", ttl=15, max_wait=0.05).acquire(timeout=2))
        finally:
            await call(store.close())
        elapsed = time.monotonic() - started
        assert raised.value.transient and not isinstance(raised.value, tenure.StoreRefused)
        assert 1.9 <= elapsed < 6, elapsed


# -- no credential at all ------------------------------------------------------------------------


def without_credentials(environ: dict[str, str], home: Path) -> dict[str, str]:
    """`environ` as on a machine never signed in to Azure: no AZURE_*, workload or managed
    identity variables, and a HOME without az login's or azd's caches."""
    kept = {key: value for key, value in environ.items()
            if not key.startswith(("AZURE_", "IDENTITY_", "MSI_", "TENURE_"))}
    return {**kept, "HOME": str(home)}


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_no_credential_is_one_quiet_refusal_after_one_attempt(
        api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """DefaultAzureCredential logged a WARNING of some twenty lines per attempt, and the SDK
    retried the attempt: screens of warnings before tenure's error."""
    for key in list(os.environ):
        monkeypatch.delenv(key)
    for key, value in without_credentials(dict(os.environ), tmp_path).items():
        monkeypatch.setenv(key, value)
    caplog.set_level("DEBUG", logger="azure.identity")
    module = tenure.aio if api == "async" else tenure
    store = module.connect("azblob://myaccount/locks")
    started = time.monotonic()
    try:
        with pytest.raises(tenure.StoreRefused) as raised:
            await call(store.lock("jobs", ttl=15).acquire(timeout=None))
    finally:
        await call(store.close())
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "\n" not in message and not raised.value.transient
    assert message.startswith("azblob://myaccount/locks: acquire of 'jobs' refused: no credential")
    for words in ("managed identity", "az login", "connection string"):
        assert words in message, message
    identity = [record for record in caplog.records if record.name.startswith("azure.identity")]
    assert not [record for record in identity if record.levelno >= logging.WARNING], identity
    chains = [record for record in identity
              if "failed to retrieve a token" in record.getMessage()]
    assert len(chains) == 1, [(record.name, record.threadName) for record in chains]


def test_the_cli_without_credentials_prints_one_line(tmp_path: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "locks", "--store", "azblob://myaccount/locks"],
        capture_output=True, text=True, env=without_credentials(dict(os.environ), tmp_path),
        cwd=tmp_path, timeout=60, check=False)
    elapsed = time.monotonic() - started
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tenure: error: azblob://myaccount/locks: listing of all leases "
                               "refused: no credential could get a token"), lines
    for words in ("managed identity", "az login", "AZURE_STORAGE_CONNECTION_STRING"):
        assert words in lines[0], lines
    assert elapsed < 10, elapsed


async def test_the_apps_own_credential_still_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Only the store's own token requests are quiet: the demotion is scoped to them. And with
    azure.identity's loggers at WARNING (as after logging.basicConfig()), a handler without a
    level of its own (caplog's) gets none of the demoted records."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity.aio import DefaultAzureCredential

    for key in list(os.environ):
        monkeypatch.delenv(key)
    for key, value in without_credentials(dict(os.environ), tmp_path).items():
        monkeypatch.setenv(key, value)
    async with tenure.aio.connect("azblob://myaccount/locks") as store:
        with pytest.raises(tenure.StoreRefused):
            await store.leases()
    assert not [record for record in caplog.records if record.name.startswith("azure.identity")]
    async with DefaultAzureCredential() as credential:
        with pytest.raises(ClientAuthenticationError):
            await credential.get_token_info("https://storage.azure.com/.default")
    assert [record for record in caplog.records if record.levelno == logging.WARNING
            and "failed to retrieve a token" in record.getMessage()]
