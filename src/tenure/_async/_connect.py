"""`connect(url)`: a store URL (or a store object) to an AsyncStore.

Example::

    store = tenure.aio.connect("sqlite:////var/lib/app/locks.db")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure._async.stores._options import refuse_unknown
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores._registry import store_module
from tenure._errors import InvalidArgumentType
from tenure._urls import parse_store_url

if TYPE_CHECKING:
    from tenure._async._store import AsyncStore


def connect(url: str | AsyncBackend, *, holder: str | None = None,
            **options: Any) -> AsyncStore:
    """Open a store by URL (or wrap a store object you built). The scheme picks the store module
    (stores/_registry.py), whose `from_url` builds the store.

    Bad URLs fail here. Connections open on first use; the file store creates its directory now.

    URLs: `memory://`, `sqlite:////abs/path.db` (option `synchronous="full"`, in the query or
    as a keyword),
    `file:///abs/dir`, `azblob://ACCOUNT/CONTAINER` (DefaultAzureCredential) and
    `azblob:///CONTAINER` (a connection string). Keyword options of azblob stores:
    `connection_string` (else env AZURE_STORAGE_CONNECTION_STRING), `blob_url_format` (else env
    TENURE_AZURE_BLOB_URL_FORMAT), `create_container` (default True), `fencing` (default
    True; False skips the token increment and every token is 0) and `timeout` (default 5 s:
    every store call ends within it).
    `redis://HOST:PORT/DB` (also rediss:// and unix:///path.sock), `postgresql://USER@HOST/DB`
    and `mysql://USER@HOST/DB` take the options their docs pages list, in the URL's query or as
    keywords (e.g. `prefix=`, `schema=`, `table=`, `timeout=`).

    Example::

        store = tenure.aio.connect("sqlite:////var/lib/app/locks.db")
        store = tenure.aio.connect("azblob://myaccount/locks")  # DefaultAzureCredential
    """
    from tenure._async._store import AsyncStore  # _store re-exports connect: imported late

    if not isinstance(url, str):
        if isinstance(url, AsyncBackend):
            refuse_unknown(options, (), "a store object",
                           note="give a store object its options when you build it")
            return AsyncStore(url, holder=holder)
        raise InvalidArgumentType(
            f"url must be a str such as 'sqlite:////var/lib/app/locks.db' or a store object, "
            f"got {type(url).__name__}"
        )
    # The registry names the module of each scheme, imported now: a driver loads only when used.
    module = store_module(parse_store_url(url).scheme)
    return AsyncStore(module.from_url(url, **options), holder=holder)
