"""Sync store classes, for building a store in code and passing it to `tenure.connect`.

Example::

    from tenure.stores import SQLiteStore
    store = tenure.connect(SQLiteStore("/var/lib/app/locks.db", synchronous="full"))

`AzureBlobStore` (azblob://) is imported on first use: it needs `pip install tenure[azure]`.
"""

from typing import TYPE_CHECKING, Any

from tenure._sync.stores._protocol import Backend
from tenure._sync.stores.file import FileStore
from tenure._sync.stores.memory import MemoryStore
from tenure._sync.stores.sqlite import SQLiteStore
from tenure._types import Capabilities, Grant, LostReason

if TYPE_CHECKING:
    from tenure._sync.stores.azblob import AzureBlobStore


def __getattr__(name: str) -> Any:
    if name == "AzureBlobStore":  # the Azure SDK loads only for those who use it
        from tenure._sync.stores.azblob import AzureBlobStore

        return AzureBlobStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AzureBlobStore", "Backend", "Capabilities", "FileStore", "Grant", "LostReason",
           "MemoryStore", "SQLiteStore"]
