# GENERATED from src/tenure/_async/stores/redis_quorum.py by scripts/unasync.py: do not edit.
"""The quorum store's old import path: it lives in the redis package now
(tenure._sync.stores.redis._quorum), and this module re-exports it.

Example::

    from tenure._sync.stores.redis_quorum import RedisQuorumStore, open_store
"""

from __future__ import annotations

from tenure._sync.stores.redis import (
    MASTER_SHARE,
    WAIT_SLACK,
    RedisQuorumStore,
    open_store,
    parse_quorum,
)

__all__ = ["MASTER_SHARE", "WAIT_SLACK", "RedisQuorumStore", "open_store", "parse_quorum"]
