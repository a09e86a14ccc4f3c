"""The quorum store's old import path: it lives in the redis package now
(tenure._async.stores.redis._quorum), and this module re-exports it.

Example::

    from tenure._async.stores.redis_quorum import AsyncRedisQuorumStore, open_store
"""

from __future__ import annotations

from tenure._async.stores.redis import (
    MASTER_SHARE,
    WAIT_SLACK,
    AsyncRedisQuorumStore,
    open_store,
    parse_quorum,
)

__all__ = ["MASTER_SHARE", "WAIT_SLACK", "AsyncRedisQuorumStore", "open_store", "parse_quorum"]
