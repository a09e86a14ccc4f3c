"""Sync store classes, for building a store in code and passing it to `tenure.connect`.

Example::

    from tenure.stores import SQLiteStore
    store = tenure.connect(SQLiteStore("/var/lib/app/locks.db", synchronous="full"))

The server-backed stores are imported on first use, each needing its extra:
`AzureBlobStore` (tenure[azure]), `RedisStore` (tenure[redis]),
`PostgresStore` (tenure[postgres]) and `MySQLStore` (tenure[mysql]).
"""

import typing as _typing

from tenure._lazy import module_dir as _module_dir
from tenure._lazy import module_getattr as _module_getattr
from tenure._sync.stores import _registry
from tenure._sync.stores._protocol import Backend, RecordKeeper
from tenure._sync.stores.file import FileStore
from tenure._sync.stores.memory import MemoryStore
from tenure._sync.stores.sqlite import SQLiteStore
from tenure._types import Capabilities, Grant, LostReason

if _typing.TYPE_CHECKING:
    from tenure._sync.stores.azblob import AzureBlobStore
    from tenure._sync.stores.mysql import MySQLStore
    from tenure._sync.stores.postgres import PostgresStore
    from tenure._sync.stores.redis import RedisStore
    from tenure._sync.stores.redis_quorum import RedisQuorumStore

# A driver loads only for those who use its store: the classes of the stores that need an
# extra, from the one registry of stores.
__getattr__ = _module_getattr(__name__, lazy=_registry.lazy_classes())
__dir__ = _module_dir(__name__)  # the lazy classes too, before their first use


__all__ = ["AzureBlobStore", "Backend", "Capabilities", "FileStore", "Grant", "LostReason",
           "MemoryStore", "MySQLStore", "PostgresStore", "RecordKeeper", "RedisQuorumStore",
           "RedisStore", "SQLiteStore"]
