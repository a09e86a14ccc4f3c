"""Sync store classes, for building a store in code and passing it to `tenure.connect`.

Example::

    from tenure.stores import SQLiteStore
    store = tenure.connect(SQLiteStore("/var/lib/app/locks.db", synchronous="full"))
"""

from tenure._sync.stores._protocol import Backend
from tenure._sync.stores.file import FileStore
from tenure._sync.stores.memory import MemoryStore
from tenure._sync.stores.sqlite import SQLiteStore
from tenure._types import Capabilities, Grant, LostReason

__all__ = ["Backend", "Capabilities", "FileStore", "Grant", "LostReason", "MemoryStore",
           "SQLiteStore"]
