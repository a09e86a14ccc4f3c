"""Opening an azblob store from its URL: `azblob://ACCOUNT/CONTAINER` (signed in with
DefaultAzureCredential) or `azblob:///CONTAINER` (a connection string), options as keywords.

Example::

    backend = from_url("azblob:///locks", connection_string="UseDevelopmentStorage=true")
"""

from __future__ import annotations

from typing import Any

from azure.storage.blob.aio import ContainerClient

from tenure._async.stores._azure_sign_in import QuietCredential
from tenure._async.stores._options import DEFAULT_RETAIN, merged, refuse_unknown
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.azblob._failures import client_options
from tenure._async.stores.azblob._settings import (
    DEFAULT_TIMEOUT,
    KEYWORDS,
    URL_OPTIONS,
    check_flags,
    checked_timeout,
    connection_string_for,
    container_url,
)
from tenure._async.stores.azblob._store import AsyncAzureBlobStore
from tenure._errors import InvalidArgument, MissingExtra
from tenure._urls import parse_store_url

SCHEMES: tuple[str, ...] = ("azblob",)


def open_store(account: str, container: str, *, connection_string: str | None = None,
               blob_url_format: str | None = None, create_container: bool = True,
               fencing: bool = True, timeout: float = DEFAULT_TIMEOUT,
               retain: float | str = DEFAULT_RETAIN) -> AsyncAzureBlobStore:
    """The store of an `azblob://ACCOUNT/CONTAINER` or `azblob:///CONTAINER` URL.

    With an account: the container URL comes from `blob_url_format` (or the environment
    variable TENURE_AZURE_BLOB_URL_FORMAT, default https://{account}.blob.core.windows.net/
    {container}) and the credential from azure-identity's DefaultAzureCredential. Without one: a
    connection string (`connection_string=` or AZURE_STORAGE_CONNECTION_STRING; Azurite's
    `UseDevelopmentStorage=true` works). Every store call ends within `timeout` seconds (default
    5): the SDK tries a request twice (the lease core does its own retrying until each lease's
    deadline), each attempt with connection and read timeouts of `per_attempt(timeout)`.
    `retain` (seconds, default 3600, 0 to inf) is how long the blobs of a name nobody holds
    are kept (see docs/stores/azblob.md, "Forgetting names").

    Example::

        backend = open_store("", "locks", connection_string="UseDevelopmentStorage=true")
    """
    options = client_options(checked_timeout(timeout))
    check_flags(create_container=create_container, fencing=fencing)
    if not account:
        secret = connection_string_for(container, connection_string)
        try:
            client = ContainerClient.from_connection_string(secret, container, **options)
        except (ValueError, TypeError):
            raise InvalidArgument(
                "connection_string is not an Azure Storage connection string (expected "
                "'AccountName=...;AccountKey=...;BlobEndpoint=...' or "
                "'UseDevelopmentStorage=true')"
            ) from None
        return AsyncAzureBlobStore(client, create_container=create_container,
                                   fencing=fencing, close_client=True, timeout=timeout,
                                   retain=retain)
    if connection_string is not None:
        raise InvalidArgument(
            f"azblob://{account}/{container} signs in with DefaultAzureCredential; to use a "
            f"connection string instead, write azblob:///{container}"
        )
    url = container_url(account, container, blob_url_format)
    try:
        from azure.identity.aio import DefaultAzureCredential
    except ImportError as exc:  # pragma: no cover - exercised without the extra installed
        raise MissingExtra("azblob://ACCOUNT/... signs in with azure-identity: install "
                           "tenure[azure] (pip install 'tenure[azure]')") from exc
    credential = QuietCredential(DefaultAzureCredential())
    client = ContainerClient.from_container_url(url, credential=credential, **options)
    return AsyncAzureBlobStore(client, create_container=create_container, fencing=fencing,
                               close_client=True, credential=credential, timeout=timeout,
                               retain=retain)


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store of an `azblob://ACCOUNT/CONTAINER` or `azblob:///CONTAINER` URL, as
    `tenure.aio.connect` builds it (see open_store): options as keywords, and `retain` also in
    the URL's query (given both ways, they must agree).

    Example::

        backend = from_url("azblob:///locks", connection_string="UseDevelopmentStorage=true")
    """
    parsed = parse_store_url(url, SCHEMES)
    note = f"in the URL's query; as keywords: {', '.join(KEYWORDS)}"
    if "connection_string" in parsed.options:  # also where the CLI takes only a URL
        note += ("; a connection string is a secret, kept out of URLs: set the environment "
                 "variable AZURE_STORAGE_CONNECTION_STRING, or pass "
                 "connect(url, connection_string=...)")
    refuse_unknown(parsed.options, URL_OPTIONS, "azblob:// stores", note=note)
    refuse_unknown(options, KEYWORDS, "azblob:// stores")
    account, container = parsed.location.split("/")
    return open_store(account, container, **merged(parsed.options, options))
