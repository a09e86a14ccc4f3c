"""Async store classes, for building a store in code and passing it to `tenure.aio.connect`.

Example::

    from tenure.aio.stores import AsyncFileStore
    store = tenure.aio.connect(AsyncFileStore("/var/lib/app/locks"))

The server-backed stores are imported on first use, each needing its extra:
`AsyncAzureBlobStore` (tenure[azure]), `AsyncRedisStore` (tenure[redis]),
`AsyncPostgresStore` (tenure[postgres]) and `AsyncMySQLStore` (tenure[mysql]).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tenure._async.stores import _registry
from tenure._async.stores._protocol import AsyncBackend, AsyncRecordKeeper
from tenure._async.stores.file import AsyncFileStore
from tenure._async.stores.memory import AsyncMemoryStore
from tenure._async.stores.sqlite import AsyncSQLiteStore
from tenure._types import Capabilities, Grant, LostReason

if TYPE_CHECKING:
    from tenure._async.stores.azblob import AsyncAzureBlobStore
    from tenure._async.stores.mysql import AsyncMySQLStore
    from tenure._async.stores.postgres import AsyncPostgresStore
    from tenure._async.stores.redis import AsyncRedisStore
    from tenure._async.stores.redis_quorum import AsyncRedisQuorumStore

# A driver loads only for those who use its store: the classes of the stores that need an
# extra, by module, from the one registry of stores.
_LAZY = _registry.lazy_classes()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"tenure._async.stores.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AsyncAzureBlobStore", "AsyncBackend", "AsyncFileStore", "AsyncMemoryStore",
           "AsyncMySQLStore", "AsyncPostgresStore", "AsyncRecordKeeper", "AsyncRedisQuorumStore",
           "AsyncRedisStore", "AsyncSQLiteStore", "Capabilities", "Grant", "LostReason"]
