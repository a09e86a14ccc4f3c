"""Async store classes, for building a store in code and passing it to `tenure.aio.connect`.

Example::

    from tenure.aio.stores import AsyncFileStore
    store = tenure.aio.connect(AsyncFileStore("/var/lib/app/locks"))
"""

from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.file import AsyncFileStore
from tenure._async.stores.memory import AsyncMemoryStore
from tenure._async.stores.sqlite import AsyncSQLiteStore

__all__ = ["AsyncBackend", "AsyncFileStore", "AsyncMemoryStore", "AsyncSQLiteStore"]
