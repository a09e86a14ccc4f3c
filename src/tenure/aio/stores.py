"""Async store classes, for building a store in code and passing it to `tenure.aio.connect`.

Example::

    from tenure.aio.stores import AsyncFileStore
    store = tenure.aio.connect(AsyncFileStore("/var/lib/app/locks"))

`AsyncAzureBlobStore` (azblob://) is imported on first use: it needs `pip install tenure[azure]`.
"""

from typing import TYPE_CHECKING, Any

from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.file import AsyncFileStore
from tenure._async.stores.memory import AsyncMemoryStore
from tenure._async.stores.sqlite import AsyncSQLiteStore

if TYPE_CHECKING:
    from tenure._async.stores.azblob import AsyncAzureBlobStore


def __getattr__(name: str) -> Any:
    if name == "AsyncAzureBlobStore":  # the Azure SDK loads only for those who use it
        from tenure._async.stores.azblob import AsyncAzureBlobStore

        return AsyncAzureBlobStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AsyncAzureBlobStore", "AsyncBackend", "AsyncFileStore", "AsyncMemoryStore",
           "AsyncSQLiteStore"]
