"""`azblob://ACCOUNT/CONTAINER`: leases on blobs of an Azure Storage container (blob leases).

Every name has its own virtual directory `tenure/<readable prefix>-<digest>/` (see
tenure._names.safe_key), so any name maps to a legal blob name and distinct names never share
one. A lock is the page blob `lock` there; a semaphore of `limit` has the blobs `slot-0` ..
`slot-<limit-1>`, tried in a random order, and a `counter` blob. Lock blobs are page blobs of
size 0 (until they keep a record) created when missing and never deleted by tenure; the
original name is kept in their metadata (base64, since metadata is ASCII).

A lease is an Azure blob lease of 15 to 60 s (the service's range) with a lease id proposed by
the client (uuid4), so an acquire retried after a lost response is idempotent. The fencing
token is the blob's sequence number, incremented under the lease right after acquiring: atomic
on the server, and nobody can move it without the lease. A lock blob created afresh starts its
sequence number at the wall clock in microseconds, so tokens never go backwards even when the
blob was deleted. A semaphore's token comes from incrementing its shared counter blob (tokens
grow across slots), then is copied into the slot blob's sequence number under the lease.

A record (`write_record`) is kept in the pages of the lock blob: one Put Page under the
grant's lease, so only a live holder can write it (the first record of a name also grows the
blob from 0 to RECORD_BLOB_SIZE bytes). Metadata is not used for records: it is limited to
8 KiB in all, base64 would cut that to 6 KiB, and the holder's description rewrites it. Records
need a lock: a semaphore of several slots has no blob that one lease guards for the name.

The holder's identity is written into the blob's metadata in the background 0.25 s after the
grant, unless the lease was released by then (short holds cost no extra request, and nothing is
added to acquire itself); `leases()` shows it within a second, at once for this store's own.

Example::

    store = tenure.connect("azblob://myaccount/locks")  # DefaultAzureCredential
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import inspect
import logging
import os
import random
import struct
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import anyio

from tenure import _forks
from tenure._async import _shim
from tenure._async.stores._azure_sign_in import QuietCredential, no_token_hint
from tenure._async.stores._failures import failure, refusal
from tenure._async.stores._options import as_number, refuse_unknown
from tenure._async.stores._protocol import (
    MAX_RECORD_BYTES,
    AsyncBackend,
    AsyncRecordKeeper,
    closed_store,
    record_bytes,
)
from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreUnavailable,
)
from tenure._hostclock import wall_us
from tenure._names import safe_key, safe_key_prefix
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import parse_store_url

try:
    from azure.core import MatchConditions
    from azure.core.exceptions import (
        AzureError,
        ClientAuthenticationError,
        HttpResponseError,
        ResourceExistsError,
        ServiceRequestError,
        ServiceResponseError,
    )
    from azure.storage.blob.aio import BlobClient, BlobLeaseClient, ContainerClient, LinearRetry
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra(
        "the azblob:// store needs the Azure SDK: install tenure[azure] "
        "(pip install 'tenure[azure]')"
    ) from exc

log = logging.getLogger("tenure")

DEFAULT_BLOB_URL_FORMAT = "https://{account}.blob.core.windows.net/{container}"
ROOT = "tenure/"
ROLE = "Storage Blob Data Contributor"
_NAME, _HOLDER, _TOKEN, _ACQUIRED = "tenure_name", "tenure_holder", "tenure_token", "tenure_at"
_UNKNOWN_HOLDER = "?"
# Lease answers that say the lease is definitely not ours (any other error is transient).
_TAKEN = {"LeaseIdMismatchWithLeaseOperation", "LeaseAlreadyPresent", "LeaseIdMismatch"}
_BROKEN = {"LeaseIsBrokenAndCannotBeRenewed", "LeaseIsBreakingAndCannotBeAcquired",
           "BlobNotFound", "ContainerNotFound"}
# The holder's identity is written into the blob's metadata this long after the grant, unless
# the lease was released before: short holds never pay that request, and `leases()` still shows
# the holder within a second.
DESCRIBE_AFTER = 0.25
# A record in the lock blob's pages: magic, length of the UTF-8 that follows; page-aligned.
_RECORD_HEADER = struct.Struct(">4sI")
_RECORD_MAGIC = b"TNR1"
_PAGE = 512
RECORD_BLOB_SIZE = -(-(_RECORD_HEADER.size + MAX_RECORD_BYTES) // _PAGE) * _PAGE
_REMEMBERED_RELEASES = 4096
DEFAULT_TIMEOUT = 5.0
# The SDK's retries of one request, quick ones (the lease core retries until each deadline).
_RETRIES, _BACKOFF, _JITTER = 1, 0.2, 0.1
# The async SDK's calls are coroutines: a cancel scope bounds each store call as a whole. The
# sync SDK's are bounded by their per-attempt socket timeouts (see open_store).
_COROUTINES = inspect.iscoroutinefunction(BlobClient.get_blob_properties)
if _COROUTINES:
    try:  # the async SDK's transport, which it imports only once it sends a first request
        import aiohttp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised without the extra installed
        raise MissingExtra("the azblob:// store needs aiohttp: install tenure[azure] "
                           "(pip install 'tenure[azure]')") from exc
# Inherited across fork(): HTTP sessions let go of without closing them (see _start_afresh).
_FORSAKEN: list[Any] = []


def per_attempt(timeout: float) -> float:
    """The connection and read timeout of each attempt of a request, so that every attempt
    and the backoffs between them end within `timeout` seconds on a path gone silent.

    Example:
        >>> per_attempt(5.0)
        2.35
    """
    return round((timeout - _RETRIES * (_BACKOFF + _JITTER)) / (_RETRIES + 1), 3)


def encode(text: str) -> str:
    """A metadata-safe (ASCII) spelling of any text: URL-safe base64 of its UTF-8.

    Example:
        >>> decode(encode("名前/ロック"))
        '名前/ロック'
    """
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def decode(value: str | None) -> str | None:
    """The text that `encode` spelled, or None when `value` is missing or not ours.

    Example:
        >>> decode("not base64!") is None
        True
    """
    if value is None:
        return None
    try:
        return base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None


def directory(name: str) -> str:
    """The virtual directory of `name`'s blobs; no other name's blobs are under it.

    Example:
        >>> directory("invoices/2026")[:28]
        'tenure/invoices_2026-50c0ace'
    """
    return f"{ROOT}{safe_key(name)}/"


def blob_name(name: str, slot: int, limit: int) -> str:
    """The blob that holds slot `slot` of `name` (a lock when limit is 1).

    Example:
        >>> blob_name("jobs", 2, 3).endswith("/slot-2"), blob_name("jobs", 0, 1).endswith("/lock")
        (True, True)
    """
    return directory(name) + ("lock" if limit == 1 else f"slot-{slot}")


def record_pages(record: bytes) -> bytes:
    """The pages that keep `record` (UTF-8) in a lock blob: header, record, zero padding.

    Example:
        >>> len(record_pages(b"{}")), parse_record(record_pages(b"{}"))
        (512, '{}')
    """
    data = _RECORD_HEADER.pack(_RECORD_MAGIC, len(record)) + record
    return data + bytes(-len(data) % _PAGE)


def parse_record(data: bytes) -> str | None:
    """The record kept in a lock blob's content, or None when it holds none.

    Example:
        >>> parse_record(b"") is None
        True
    """
    if len(data) < _RECORD_HEADER.size:
        return None
    magic, length = _RECORD_HEADER.unpack_from(data)
    end = _RECORD_HEADER.size + length
    if magic != _RECORD_MAGIC or len(data) < end:
        return None
    try:
        return data[_RECORD_HEADER.size:end].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _sequence_number(answer: dict[str, Any]) -> int:
    value = answer.get("blob_sequence_number")
    if not isinstance(value, int):
        raise StoreUnavailable(f"the blob service answered without a sequence number: {value!r}")
    return value


def _code(exc: AzureError) -> str:
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or "")


def _token_service_blip(exc: AzureError) -> bool:
    """True when the token service (Entra ID, a managed-identity endpoint) answered HTTP 429
    or 5xx: busy, not a refused credential. A credential that is missing or unavailable stays
    permanent: on a machine with no credential at all, DefaultAzureCredential's message also
    says the managed-identity endpoint did not answer, so its words cannot tell a pod that
    has just started from a laptop that was never signed in."""
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def _status(exc: AzureError) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _no_token(exc: BaseException) -> bool:
    """True when the credential found no token and will not find one by trying again."""
    return isinstance(exc, ClientAuthenticationError) and not _token_service_blip(exc)


class _Retry(LinearRetry):
    """The SDK's linear retry, minus retrying a credential that found no token: the storage
    SDK retries every error of a request, and each retry ran the whole credential chain again
    (its probes, its log) to fail the same way."""

    def increment(self, settings: dict[str, Any], request: Any, response: Any = None,
                  error: AzureError | None = None) -> bool:
        if error is not None and _no_token(error):
            return False
        return bool(super().increment(settings, request, response, error))


class AsyncAzureBlobStore(AsyncBackend, AsyncRecordKeeper):
    """Leases on blobs of one Azure Storage container, through a ContainerClient you configured
    (credentials, retries, proxies are then yours). Needs tenure[azure].

    Example::

        from azure.identity.aio import DefaultAzureCredential
        from azure.storage.blob.aio import ContainerClient

        client = ContainerClient("https://myaccount.blob.core.windows.net", "locks",
                                 credential=DefaultAzureCredential())
        store = tenure.aio.connect(AsyncAzureBlobStore(client))
    """

    capabilities = Capabilities(min_ttl=15.0, max_ttl=60.0,
                                ttl_hint=" (Azure blob leases last 15 to 60 s)")

    def __init__(self, container: ContainerClient, *, create_container: bool = True,
                 fencing: bool = True, close_client: bool = False,
                 credential: Any = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(container, ContainerClient):
            raise InvalidArgumentType(
                f"container must be an azure.storage.blob.aio.ContainerClient, got "
                f"{type(container).__module__}.{type(container).__qualname__}"
            )
        self.timeout = _checked_timeout(timeout)
        self.container = container
        self.url = f"azblob://{container.account_name}/{container.container_name}"
        self._create_container = create_container
        # fencing=False skips the sequence-number increment (one request of three per cycle):
        # every grant's token is then 0, and nothing downstream can refuse a stale holder.
        self._fencing = fencing
        self._close_client = close_client
        self._credential = credential
        self._blobs: dict[str, BlobClient] = {}
        self._describing: dict[str, _shim.Scheduled] = {}  # holder writes not yet made, by lease
        # Lease ids this store released. Azurite lets a released lease id write to the blob
        # until someone leases it again; write_record refuses those ids here instead.
        self._released: dict[str, None] = {}
        self._closed = False
        _forks.in_child_after_fork(self, AsyncAzureBlobStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a child after fork(): the HTTP session, and the connections in its pool, stay the
        parent's. It is let go of without closing it (closing would take the sockets out of the
        epoll instance that an async child shares with its parent, and its connector does so
        when collected), and the SDK opens a new one on next use. A session of your own
        (session_owner=False) cannot be replaced: give a forked child a store of its own."""
        transport = getattr(getattr(self.container, "_pipeline", None), "_transport", None)
        if getattr(transport, "session", None) is not None and getattr(
                transport, "_session_owner", False):
            _FORSAKEN.append(transport.session)  # type: ignore[union-attr]
            transport.session = None  # type: ignore[union-attr]
            transport._has_been_opened = False  # type: ignore[union-attr]
        self._describing = {}  # the parent's holder writes, under the parent's leases

    @contextlib.contextmanager
    def _bounded(self, operation: str, name: str) -> Iterator[None]:
        """The client-side bound of one store call: `timeout` seconds in all. In async code a
        cancel scope, which also drops the connection in use; sync calls are bounded by the
        SDK's per-attempt timeouts (see `per_attempt`)."""
        try:
            with anyio.fail_after(self.timeout) if _COROUTINES else contextlib.nullcontext():
                yield
        except TimeoutError:
            raise failure(self.url, operation, name, "check the network and the blob service",
                          f"no answer within timeout={self.timeout:g} s") from None

    # -- helpers ------------------------------------------------------------------------------

    def _blob(self, name: str) -> BlobClient:
        blob = self._blobs.get(name)
        if blob is None:
            blob = self.container.get_blob_client(name)
            if len(self._blobs) < 4096:
                self._blobs[name] = blob
        return blob

    def _failure(self, operation: str, name: str, exc: AzureError) -> StoreUnavailable:
        """One clear error for an SDK failure: what was tried, what went wrong, what to check;
        StoreRefused when retrying cannot clear it (see `_refusal`)."""
        status, code = _status(exc), _code(exc)
        fix = self._refusal(exc)
        if fix is not None:
            return refusal(self.url, operation, name, fix)
        if status == 404:
            hint = f"not found (HTTP 404 {code}): check the account, container and endpoint"
        elif isinstance(exc, ServiceRequestError):
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            hint = (f"cannot reach the blob service ({reason}): check the account name, the "
                    "endpoint (blob_url_format) and the network")
        elif isinstance(exc, ServiceResponseError):
            hint = "the blob service did not answer in time"
        else:
            hint = f"the blob service answered HTTP {status} {code}".rstrip()
        return failure(self.url, operation, name, hint)

    def _refusal(self, exc: AzureError) -> str | None:
        """What to fix when `exc` is permanent: access refused (401, 403: a wrong key or SAS,
        a missing role, a disabled account), no credential at all, or a missing container this
        store may not create. None when it is transient (5xx, 408, 429, a network error)."""
        status, code = _status(exc), _code(exc)
        if status in (401, 403):
            return (f"the service refused access (HTTP {status} {code}): check the account key "
                    f"or SAS in the connection string, or give this identity the '{ROLE}' role "
                    "on the account or container")
        if _no_token(exc):
            return no_token_hint(self._credential)
        if code == "ContainerNotFound":
            return (f"container {self.container.container_name!r} does not exist; create it or "
                    "leave create_container=True (the default)")
        return None

    def _refuse_if_closed(self, operation: str, name: str) -> None:
        if self._closed:
            raise closed_store(self.url, operation, name)

    async def _ensure_container(self, name: str, exc: AzureError) -> None:
        if not self._create_container:
            raise self._failure("acquire", name, exc) from None
        try:
            await self.container.create_container()
        except ResourceExistsError:
            pass  # created meanwhile by another holder
        except AzureError as error:
            raise self._failure("creating the container for", name, error) from None

    async def _create_blob(self, blob: BlobClient, name: str) -> None:
        """An empty page blob whose sequence number starts at the wall clock (never from 0)."""
        try:
            await blob.create_page_blob(0, metadata={_NAME: encode(name)},
                                        sequence_number=wall_us(),
                                        match_condition=MatchConditions.IfMissing)
        except HttpResponseError as exc:
            if _status(exc) not in (409, 412):  # 409/412: it exists (and may be leased)
                raise

    async def _take(self, blob: BlobClient, lease_id: str, duration: int, name: str) -> bool:
        """Acquire the blob's lease with our proposed id; False when someone else holds it."""
        for _ in range(3):
            try:
                await BlobLeaseClient(blob, lease_id).acquire(duration)
                return True
            except HttpResponseError as exc:
                if _status(exc) == 409:
                    return False  # LeaseAlreadyPresent: held by someone else
                if _status(exc) != 404:
                    raise
                if _code(exc) == "ContainerNotFound":
                    await self._ensure_container(name, exc)
                else:
                    await self._create_blob(blob, name)
        return False

    async def _token(self, blob: BlobClient, lease_id: str, name: str, limit: int,
                     holder: str) -> tuple[int, bool]:
        """(token, whether the holder was written with it) for a grant held under `lease_id`."""
        if limit == 1:
            try:
                answer = await blob.set_sequence_number("increment", lease=lease_id)
            except HttpResponseError as exc:
                if _status(exc) != 400:
                    raise
                return await self._metadata_token(blob, lease_id, name, holder, exc), True
            return _sequence_number(answer), False
        counter = self._blob(directory(name) + "counter")
        for attempt in range(2):
            try:
                answer = await counter.set_sequence_number("increment")
                break
            except HttpResponseError as exc:
                if _status(exc) != 404 or attempt:
                    raise
                await self._create_blob(counter, name)
        token = _sequence_number(answer)
        await blob.set_sequence_number("update", str(token), lease=lease_id)
        return token, False

    async def _metadata_token(self, blob: BlobClient, lease_id: str, name: str, holder: str,
                              refusal: HttpResponseError) -> int:
        """The fallback counter of a lock blob that is not a page blob (a block blob someone
        put at the lock's name): kept in its metadata, written under the lease AND only if the
        blob is unchanged since read (If-Match), keeping the blob's other metadata."""
        properties = await blob.get_blob_properties(lease=lease_id)
        if str(properties.blob_type).lower().endswith("pageblob"):
            raise refusal  # a page blob refused the increment for another reason
        metadata = dict(properties.metadata or {})
        stored = metadata.get(_TOKEN, "")
        token = int(stored) + 1 if stored.isdigit() else wall_us()
        metadata.update(self._holder_metadata(name, holder, token))
        await blob.set_blob_metadata(metadata, lease=lease_id, etag=properties.etag,
                                     match_condition=MatchConditions.IfNotModified)
        return token

    @staticmethod
    def _holder_metadata(name: str, holder: str, token: int) -> dict[str, str]:
        return {_NAME: encode(name), _HOLDER: encode(holder), _TOKEN: str(token),
                _ACQUIRED: datetime.now(timezone.utc).isoformat(timespec="seconds")}

    async def _describe(self, blob: BlobClient, lease_id: str, name: str, holder: str,
                        token: int) -> None:
        """Write who holds the blob (for leases() and the CLI); a failure only hides that."""
        if lease_id not in self._describing:  # released meanwhile, or the parent's (fork)
            return
        metadata = self._holder_metadata(name, holder, token)
        # A failure (lost meanwhile, service away) only leaves leases() showing the holder as "?"
        with contextlib.suppress(AzureError, StoreUnavailable), self._bounded("describing", name):
            await blob.set_blob_metadata(metadata, lease=lease_id)

    async def _undo(self, blob: BlobClient, lease_id: str, tries: int = 3) -> None:
        """Free what an acquire cut short (cancelled, failed) may have taken, by its lease id,
        in the background (`_shim.start_soon`). The service runs a request it received even
        when its client gave up, and one still on its way (a slow connection) can arrive after
        this release, sent on another connection: a release that finds the blob not leased
        is tried again later, `tries` times in all. Best effort: a lease left behind expires
        within its ttl."""
        try:
            with self._bounded("freeing an abandoned acquire", blob.blob_name):
                await BlobLeaseClient(blob, lease_id).release()
        except HttpResponseError as exc:
            if _code(exc) == "LeaseNotPresentWithLeaseOperation" and tries > 1:
                _shim.call_later(self.timeout / 2, self._undo, blob, lease_id, tries - 1)
        except Exception as exc:  # unreachable, closed meanwhile: nobody to tell
            log.debug("tenure: %s: freeing an abandoned acquire failed: %r", self.url, exc)

    # -- the Backend protocol ----------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        self._refuse_if_closed("acquire", name)
        # Whole seconds: rounding down keeps the service's lease at least as long as the holder's
        # local deadline (ttl x 0.99 - 1 s), which is below int(ttl) for every ttl >= 15.
        duration = int(ttl)
        slots = [0] if limit == 1 else random.sample(range(limit), limit)
        with self._bounded("acquire", name):
            for slot in slots:
                key = blob_name(name, slot, limit)
                blob = self._blob(key)
                lease_id = str(uuid.uuid4())
                try:
                    taken = await self._take(blob, lease_id, duration, name)
                    token, described = (
                        await self._token(blob, lease_id, name, limit, holder)
                        if taken and self._fencing else (0, False))
                except BaseException as exc:  # the lease may be taken: undo, never wait for it
                    # (a ServiceRequestError sent nothing; without a token no undo can be sent)
                    if not isinstance(exc, ServiceRequestError) and not _no_token(exc):
                        _shim.start_soon(self._undo, blob, lease_id)
                    if isinstance(exc, AzureError):
                        raise self._failure("acquire", name, exc) from None
                    raise
                if not taken:
                    continue
                if not described:
                    self._describing[lease_id] = _shim.call_later(
                        DESCRIBE_AFTER, self._describe, blob, lease_id, name, holder, token)
                return Grant(name, slot, holder, lease_id, token, key)
        return None

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        with self._bounded("renewal", label):
            results: list[Grant | LostReason] = await _shim.run_all(self._renew_one, grants)
        return results

    async def _renew_one(self, grant: Grant) -> Grant | LostReason:
        try:
            await BlobLeaseClient(self._blob(grant.key), grant.lease_id).renew()
            return grant
        except HttpResponseError as exc:
            code = _code(exc)
            if code in _BROKEN:
                return LostReason.BROKEN
            if code in _TAKEN:
                return LostReason.TAKEN
            if _status(exc) in (409, 412):
                return LostReason.EXPIRED  # e.g. LeaseNotPresentWithLeaseOperation
            raise self._failure("renewal", grant.name, exc) from None
        except AzureError as exc:
            raise self._failure("renewal", grant.name, exc) from None

    async def release(self, grant: Grant) -> bool:
        self._refuse_if_closed("release", grant.name)
        scheduled = self._describing.pop(grant.lease_id, None)
        if scheduled is not None:
            scheduled.cancel()  # one already writing fails harmlessly once the lease is gone
        self._released[grant.lease_id] = None
        if len(self._released) > _REMEMBERED_RELEASES:
            # Forget the oldest; threads releasing at once may race here, and losing that race
            # only forgets one id fewer.
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del self._released[next(iter(self._released))]
        try:
            with self._bounded("release", grant.name):
                await BlobLeaseClient(self._blob(grant.key), grant.lease_id).release()
            return True
        except HttpResponseError as exc:
            if _status(exc) in (404, 409, 412):
                return False  # gone already (expired, broken, taken): nothing of ours to free
            raise self._failure("release", grant.name, exc) from None
        except AzureError as exc:
            raise self._failure("release", grant.name, exc) from None

    async def break_lease(self, name: str) -> int:
        self._refuse_if_closed("break", name)
        with self._bounded("break", name):
            return await self._break(name)

    async def _break(self, name: str) -> int:
        broken = 0
        try:
            async for blob in self.container.list_blobs(name_starts_with=directory(name)):
                if blob.lease.state != "leased":
                    continue
                try:
                    await BlobLeaseClient(self._blob(blob.name)).break_lease(0)
                    broken += 1
                except HttpResponseError as exc:
                    if _status(exc) != 409:  # 409: its lease ended meanwhile
                        raise
        except HttpResponseError as exc:
            if _code(exc) == "ContainerNotFound":
                return 0
            raise self._failure("break", name, exc) from None
        except AzureError as exc:
            raise self._failure("break", name, exc) from None
        return broken

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._refuse_if_closed("listing", prefix)
        with self._bounded("listing", prefix):
            return await self._list(prefix)

    async def _list(self, prefix: str) -> list[LeaseInfo]:
        for scheduled in list(self._describing.values()):
            await scheduled.run_now()  # this store's own grants show their holders at once
        found: list[LeaseInfo] = []
        try:
            async for blob in self.container.list_blobs(
                    name_starts_with=ROOT + safe_key_prefix(prefix), include=["metadata"]):
                info = _lease_info(blob.name, blob.lease.state, blob.metadata,
                                   blob.page_blob_sequence_number)
                if info is not None and info.name.startswith(prefix):
                    found.append(info)
        except HttpResponseError as exc:
            if _code(exc) == "ContainerNotFound":
                return []
            raise self._failure("listing", prefix, exc) from None
        except AzureError as exc:
            raise self._failure("listing", prefix, exc) from None
        return sorted(found, key=lambda info: (info.name, info.slot))

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        await _shim.sleep(timeout)  # blob leases have no notifications; the core polls

    async def read_record(self, name: str) -> str | None:
        self._refuse_if_closed("reading the record", name)
        with self._bounded("reading the record", name):
            return await self._read_record_blob(blob_name(name, 0, 1), name)

    async def _read_record_blob(self, key: str, name: str) -> str | None:
        try:
            download = await self._blob(key).download_blob()
            data = await download.readall()
        except HttpResponseError as exc:
            if _status(exc) == 404:  # no blob, or no container: never recorded
                return None
            raise self._failure("reading the record", name, exc) from None
        except AzureError as exc:
            raise self._failure("reading the record", name, exc) from None
        return parse_record(data)

    async def write_record(self, grant: Grant, record: str) -> bool:
        self._refuse_if_closed("writing the record", grant.name)
        pages = record_pages(record_bytes(record))
        if not grant.key.endswith("/lock"):
            raise InvalidArgument(
                f"write_record needs a lock's grant on azblob:// stores, and {grant.name!r} is "
                "held as a semaphore slot: a record is kept in the pages of the lock blob, "
                "under its lease; keep records under a lock (limit=1)"
            )
        if grant.lease_id in self._released:
            return False
        with self._bounded("writing the record", grant.name):
            return await self._write_record(grant, pages)

    async def _write_record(self, grant: Grant, pages: bytes) -> bool:
        blob = self._blob(grant.key)
        try:
            try:
                await blob.upload_page(pages, offset=0, length=len(pages), lease=grant.lease_id)
            except HttpResponseError as exc:
                if _status(exc) != 416:  # 416: the blob is still 0 bytes, never recorded
                    raise
                await blob.resize_blob(RECORD_BLOB_SIZE, lease=grant.lease_id)
                await blob.upload_page(pages, offset=0, length=len(pages), lease=grant.lease_id)
        except HttpResponseError as exc:
            if _status(exc) in (404, 412):  # lease released, expired, broken or taken; blob gone
                return False
            if _code(exc) == "InvalidBlobType":
                raise failure(self.url, "writing the record", grant.name, "delete it (tenure "
                              "creates it again as a page blob)", f"the blob {grant.key!r} is "
                              "not a page blob, so it cannot keep a record") from None
            raise self._failure("writing the record", grant.name, exc) from None
        except AzureError as exc:
            raise self._failure("writing the record", grant.name, exc) from None
        return True

    async def records(self, prefix: str = "") -> dict[str, str]:
        self._refuse_if_closed("listing the records", prefix)
        with self._bounded("listing the records of", prefix):
            return await self._records(prefix)

    async def _records(self, prefix: str) -> dict[str, str]:
        recorded: list[tuple[str, str]] = []  # (blob, name) of lock blobs that were recorded
        try:
            async for blob in self.container.list_blobs(
                    name_starts_with=ROOT + safe_key_prefix(prefix), include=["metadata"]):
                name = decode((blob.metadata or {}).get(_NAME))
                if (blob.name.endswith("/lock") and blob.size and name is not None
                        and name.startswith(prefix)):
                    recorded.append((blob.name, name))
        except HttpResponseError as exc:
            if _code(exc) == "ContainerNotFound":
                return {}
            raise self._failure("listing the records of", prefix, exc) from None
        except AzureError as exc:
            raise self._failure("listing the records of", prefix, exc) from None
        recorded.sort(key=lambda listed: listed[1])
        found = await _shim.run_all(self._read_listed, recorded) if recorded else []
        return {name: record for (_, name), record in zip(recorded, found, strict=True)
                if record is not None}

    async def _read_listed(self, listed: tuple[str, str]) -> str | None:
        return await self._read_record_blob(*listed)

    async def close(self) -> None:
        self._closed = True
        for scheduled in list(self._describing.values()):
            scheduled.cancel()
        self._describing.clear()
        if self._close_client:
            self._close_client = False
            await self.container.close()
            if self._credential is not None:
                await self._credential.close()


def _lease_info(blob: str, state: str | None, metadata: dict[str, str] | None,
                sequence_number: int | None) -> LeaseInfo | None:
    """A listed blob as a live lease; None for free blobs, counters and foreign blobs."""
    kind = blob.rsplit("/", 1)[-1]
    metadata = metadata or {}
    if sequence_number is None and metadata.get(_TOKEN, "").isdigit():
        sequence_number = int(metadata[_TOKEN])  # a block blob: its counter is in metadata
    if state != "leased" or sequence_number is None or not (
            kind == "lock" or kind.startswith("slot-")):
        return None
    name = decode(metadata.get(_NAME))
    if name is None:
        return None
    holder = decode(metadata.get(_HOLDER)) if metadata.get(_TOKEN) == str(sequence_number) else None
    slot = 0 if kind == "lock" else int(kind[len("slot-"):])
    return LeaseInfo(name, holder or _UNKNOWN_HOLDER, sequence_number, None, slot)


def open_store(account: str, container: str, *, connection_string: str | None = None,
               blob_url_format: str | None = None, create_container: bool = True,
               fencing: bool = True, timeout: float = DEFAULT_TIMEOUT) -> AsyncAzureBlobStore:
    """The store of an `azblob://ACCOUNT/CONTAINER` or `azblob:///CONTAINER` URL.

    With an account: the container URL comes from `blob_url_format` (or the environment
    variable TENURE_AZURE_BLOB_URL_FORMAT, default https://{account}.blob.core.windows.net/
    {container}) and the credential from azure-identity's DefaultAzureCredential. Without one: a
    connection string (`connection_string=` or AZURE_STORAGE_CONNECTION_STRING; Azurite's
    `UseDevelopmentStorage=true` works). Every store call ends within `timeout` seconds (default
    5): the SDK tries a request twice (the lease core does its own retrying until each lease's
    deadline), each attempt with connection and read timeouts of `per_attempt(timeout)`.

    Example::

        backend = open_store("", "locks", connection_string="UseDevelopmentStorage=true")
    """
    attempt = per_attempt(_checked_timeout(timeout))
    options: dict[str, Any] = {
        # Seconds as floats work; the SDK's stub says int.
        "retry_policy": _Retry(backoff=_BACKOFF, random_jitter_range=_JITTER,  # type: ignore[arg-type]
                               retry_total=_RETRIES),
        "connection_timeout": attempt, "read_timeout": attempt,
    }
    for option, value in (("create_container", create_container), ("fencing", fencing)):
        if not isinstance(value, bool):
            raise InvalidArgumentType(
                f"{option} must be True or False, got {type(value).__name__}")
    if not account:
        secret = connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if not secret:
            raise InvalidArgument(
                f"azblob:///{container} needs a connection string: pass connection_string=... "
                "or set AZURE_STORAGE_CONNECTION_STRING; or name the account: "
                f"azblob://ACCOUNT/{container} (signs in with DefaultAzureCredential)"
            )
        if not isinstance(secret, str):
            raise InvalidArgumentType(
                f"connection_string must be a str, got {type(secret).__name__}")
        try:
            client = ContainerClient.from_connection_string(secret, container, **options)
        except (ValueError, TypeError):
            raise InvalidArgument(
                "connection_string is not an Azure Storage connection string (expected "
                "'AccountName=...;AccountKey=...;BlobEndpoint=...' or "
                "'UseDevelopmentStorage=true')"
            ) from None
        return AsyncAzureBlobStore(client, create_container=create_container,
                                   fencing=fencing, close_client=True, timeout=timeout)
    if connection_string is not None:
        raise InvalidArgument(
            f"azblob://{account}/{container} signs in with DefaultAzureCredential; to use a "
            f"connection string instead, write azblob:///{container}"
        )
    url_format = blob_url_format or os.environ.get("TENURE_AZURE_BLOB_URL_FORMAT") or (
        DEFAULT_BLOB_URL_FORMAT)
    try:
        container_url = url_format.format(account=account, container=container)
    except (KeyError, IndexError, ValueError, AttributeError):
        raise InvalidArgument(
            f"blob_url_format {url_format!r} must be a format string with {{account}} and "
            f"{{container}}, e.g. {DEFAULT_BLOB_URL_FORMAT!r}"
        ) from None
    try:
        from azure.identity.aio import DefaultAzureCredential
    except ImportError as exc:  # pragma: no cover - exercised without the extra installed
        raise MissingExtra("azblob://ACCOUNT/... signs in with azure-identity: install "
                           "tenure[azure] (pip install 'tenure[azure]')") from exc
    credential = QuietCredential(DefaultAzureCredential())
    client = ContainerClient.from_container_url(container_url, credential=credential, **options)
    return AsyncAzureBlobStore(client, create_container=create_container, fencing=fencing,
                               close_client=True, credential=credential, timeout=timeout)


SCHEMES: tuple[str, ...] = ("azblob",)
# The options of open_store, taken as keywords only: a connection string is a secret, and a
# URL's query ends up in logs.
KEYWORDS = ("connection_string", "blob_url_format", "create_container", "fencing", "timeout")


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store of an `azblob://ACCOUNT/CONTAINER` or `azblob:///CONTAINER` URL, as
    `tenure.aio.connect` builds it (see open_store): options as keywords, none in the URL.

    Example::

        backend = from_url("azblob:///locks", connection_string="UseDevelopmentStorage=true")
    """
    parsed = parse_store_url(url, SCHEMES)
    note = f"in the URL's query; as keywords: {', '.join(KEYWORDS)}"
    if "connection_string" in parsed.options:  # also where the CLI takes only a URL
        note += ("; a connection string is a secret, kept out of URLs: set the environment "
                 "variable AZURE_STORAGE_CONNECTION_STRING, or pass "
                 "connect(url, connection_string=...)")
    refuse_unknown(parsed.options, (), "azblob:// stores", note=note)
    refuse_unknown(options, KEYWORDS, "azblob:// stores")
    account, container = parsed.location.split("/")
    return open_store(account, container, **options)


def _checked_timeout(timeout: object) -> float:
    if isinstance(timeout, str):  # a keyword only, never text from a URL
        raise InvalidArgumentType("timeout must be a number of seconds, got str")
    return as_number("timeout", timeout, 1.0, 600.0, default=DEFAULT_TIMEOUT)
