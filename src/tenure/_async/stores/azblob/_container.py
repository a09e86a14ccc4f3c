"""The container a store keeps its blobs in, as every operation of the store reaches it: blob
clients, the client-side bound of each call, what an SDK failure means for this store, the
container created on first use, and a fresh HTTP session after fork().

Example::

    container = Container(client, url="azblob:///locks", timeout=5.0)
    with container.bounded("acquire", "jobs"):
        await container.blob("tenure/jobs-0/lock").get_blob_properties()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anyio
from azure.core.exceptions import AzureError, ResourceExistsError
from azure.storage.blob.aio import BlobClient, ContainerClient

from tenure._async import _shim
from tenure._async.stores._failures import failure
from tenure._async.stores._protocol import closed_store
from tenure._async.stores.azblob._failures import translated
from tenure._errors import MissingExtra, StoreUnavailable

# The async SDK's calls are coroutines: a cancel scope bounds each store call as a whole. The
# sync SDK's are bounded by their per-attempt socket timeouts (see open_store).
if not _shim.BLOCKING:
    try:  # the async SDK's transport, which it imports only once it sends a first request
        import aiohttp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised without the extra installed
        raise MissingExtra("the azblob:// store needs aiohttp: install tenure[azure] "
                           "(pip install 'tenure[azure]')") from exc
# Inherited across fork(): HTTP sessions let go of without closing them (see start_afresh).
_FORSAKEN: list[Any] = []
# Blobs per listing page (the service's most): one request lists this many blobs.
PAGE = 5000
# Blob clients kept for reuse, at most (more names than that are served by clients made anew).
_KEPT_BLOB_CLIENTS = 4096


class Container:
    """One store's container (see the module docstring); `closed` once the store is.

    Example::

        blob = Container(client, url="azblob:///locks", timeout=5.0).blob("tenure/x/lock")
    """

    def __init__(self, client: ContainerClient, *, url: str, timeout: float,
                 create_container: bool = True, close_client: bool = False,
                 credential: Any = None) -> None:
        self.client = client
        self.url = url
        self.timeout = timeout
        self.closed = False
        self._create_container = create_container
        self._close_client = close_client
        self._credential = credential
        self._blobs: dict[str, BlobClient] = {}

    def start_afresh(self) -> None:
        """In a child after fork(): the HTTP session, and the connections in its pool, stay the
        parent's. It is let go of without closing it (closing would take the sockets out of the
        epoll instance that an async child shares with its parent, and its connector does so
        when collected), and the SDK opens a new one on next use. A session of your own
        (session_owner=False) cannot be replaced: give a forked child a store of its own.

        Example::

            container.start_afresh()  # called by the store's fork hook
        """
        transport = getattr(getattr(self.client, "_pipeline", None), "_transport", None)
        if getattr(transport, "session", None) is not None and getattr(
                transport, "_session_owner", False):
            _FORSAKEN.append(transport.session)  # type: ignore[union-attr]
            transport.session = None  # type: ignore[union-attr]
            transport._has_been_opened = False  # type: ignore[union-attr]

    @contextlib.contextmanager
    def bounded(self, operation: str, name: str) -> Iterator[None]:
        """The client-side bound of one store call: `timeout` seconds in all. In async code a
        cancel scope, which also drops the connection in use; sync calls are bounded by the
        SDK's per-attempt timeouts (see `per_attempt`).

        Example::

            with container.bounded("release", "jobs"):
                await lease_client.release()
        """
        try:
            with (contextlib.nullcontext() if _shim.BLOCKING
                  else anyio.fail_after(self.timeout)):
                yield
        except TimeoutError:
            raise failure(self.url, operation, name, "check the network and the blob service",
                          f"no answer within timeout={self.timeout:g} s") from None

    def blob(self, name: str) -> BlobClient:
        """The client of the blob `name` (kept for reuse).

        Example::

            await container.blob("tenure/jobs-0/lock").get_blob_properties()
        """
        blob = self._blobs.get(name)
        if blob is None:
            blob = self.client.get_blob_client(name)
            if len(self._blobs) < _KEPT_BLOB_CLIENTS:
                self._blobs[name] = blob
        return blob

    async def page(self, prefix: str, token: str | None, *, metadata: bool = False,
                   operation: str = "listing") -> tuple[list[Any], str | None]:
        """One listing page (up to PAGE blobs, with their lease state, ETag, Last-Modified,
        size, sequence number, and metadata if asked) of the blobs under `prefix`, from
        continuation `token` (None: the first page); and the token of the next page (None
        after the last). One request, bounded like every call: a listing of any length holds
        one page in memory at a time and never outlasts `timeout` per page.

        Example::

            blobs, token = await container.page("tenure/", None)
        """
        with self.bounded(operation, prefix):
            pages: Any = self.client.list_blobs(
                name_starts_with=prefix, include=["metadata"] if metadata else None,
                results_per_page=PAGE).by_page(continuation_token=token)
            async for page in pages:
                return [blob async for blob in page], pages.continuation_token or None
        return [], None

    def failure(self, operation: str, name: str, exc: AzureError) -> StoreUnavailable:
        """The store's error for an SDK failure of `operation` on `name` (see `translated`).

        Example::

            raise container.failure("renewal", "jobs", exc) from None
        """
        return translated(exc, self.url, operation, name,
                          container=self.client.container_name, credential=self._credential)

    def refuse_if_closed(self, operation: str, name: str) -> None:
        """Raise the closed-store error when the store was closed.

        Example::

            container.refuse_if_closed("acquire", "jobs")
        """
        if self.closed:
            raise closed_store(self.url, operation, name)

    async def ensure_container(self, name: str, exc: AzureError) -> None:
        """Create the missing container (that `exc` reported on acquiring `name`), unless the
        store may not: then `exc` is raised as the store's refusal.

        Example::

            await container.ensure_container("jobs", exc)
        """
        if not self._create_container:
            raise self.failure("acquire", name, exc) from None
        try:
            await self.client.create_container()
        except ResourceExistsError:
            pass  # created meanwhile by another holder
        except AzureError as error:
            raise self.failure("creating the container for", name, error) from None

    async def close(self) -> None:
        """Close the client and the credential when the store made them (once).

        Example::

            await container.close()
        """
        if self._close_client:
            self._close_client = False
            await self.client.close()
            if self._credential is not None:
                await self._credential.close()
