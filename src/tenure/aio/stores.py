"""Async store classes, for building a store in code and passing it to `tenure.aio.connect`.

Example::

    from tenure.aio.stores import AsyncFileStore
    store = tenure.aio.connect(AsyncFileStore("/var/lib/app/locks"))

The server-backed stores are imported on first use, each needing its extra:
`AsyncAzureBlobStore` (tenure[azure]), `AsyncRedisStore` (tenure[redis]),
`AsyncPostgresStore` (tenure[postgres]) and `AsyncMySQLStore` (tenure[mysql]).
"""

import typing as _typing

from tenure._async.stores import _registry
from tenure._async.stores._protocol import AsyncBackend, AsyncRecordKeeper
from tenure._async.stores.file import AsyncFileStore
from tenure._async.stores.memory import AsyncMemoryStore
from tenure._async.stores.sqlite import AsyncSQLiteStore
from tenure._lazy import module_dir as _module_dir
from tenure._lazy import module_getattr as _module_getattr
from tenure._types import Capabilities, Grant, LostReason

if _typing.TYPE_CHECKING:
    from tenure._async.stores.azblob import AsyncAzureBlobStore
    from tenure._async.stores.mysql import AsyncMySQLStore
    from tenure._async.stores.postgres import AsyncPostgresStore
    from tenure._async.stores.redis import AsyncRedisStore
    from tenure._async.stores.redis_quorum import AsyncRedisQuorumStore

# A driver loads only for those who use its store: the classes of the stores that need an
# extra, from the one registry of stores.
__getattr__ = _module_getattr(__name__, lazy=_registry.lazy_classes())
__dir__ = _module_dir(__name__)  # the lazy classes too, before their first use


__all__ = ["AsyncAzureBlobStore", "AsyncBackend", "AsyncFileStore", "AsyncMemoryStore",
           "AsyncMySQLStore", "AsyncPostgresStore", "AsyncRecordKeeper", "AsyncRedisQuorumStore",
           "AsyncRedisStore", "AsyncSQLiteStore", "Capabilities", "Grant", "LostReason"]
