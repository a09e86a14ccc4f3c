# GENERATED from src/tenure/_async/stores/mysql/__init__.py by scripts/unasync.py: do not edit.
"""`mysql://user:password@host:3306/database` (or `mariadb://`): leases in a MySQL or MariaDB table.

One InnoDB row per (name, slot) in `tenure_leases` (option `table`), created on first use and
deleted once the name has been idle for `retain` seconds (default an hour; see _forgetting).
Expiry is the SERVER's clock in microseconds since the epoch (UTC_TIMESTAMP(6), which no
session time zone affects), never this host's. The row of slot 0 also keeps the name's
fencing counter, so a lock is taken with ONE autocommit `INSERT ... ON DUPLICATE KEY UPDATE`
whose answer (affected rows and LAST_INSERT_ID, both in the OK packet) says whether it won and
with which token. A semaphore is one round trip too: a short transaction sent as one
multi-statement, serialized per name by the lock on that slot-0 row. Renewal of every lease a
process holds is one UPDATE; release and break are one UPDATE each. A waiter sleeps on the
server (SELECT SLEEP) with its next try sent right behind the sleep, and the release that frees
its name ends the sleep with KILL QUERY, so the server runs that try at once and the wait
returns the grant it took; one waiter per name and process sleeps so, the others poll with
their backoff.

`?mode=getlock` keeps each lease as a session lock (GET_LOCK) of one of the store's connections
instead, freed by the server when that connection ends, with the fencing counter bumped in the
same round trip; its waiters wait in a blocking GET_LOCK that the release ends (see _getlock).

Where things are:

- `_sql`: the SQL text, and the statements of one table (Statements)
- `_options`: the URL and options (Settings)
- `_driver`: the driver (the asyncio driver or PyMySQL) and where the two differ
- `_connections`: the connection pool and the calls on it, with their errors
- `_waking`: the sleep on the server, the try behind it, the KILL QUERY that wakes it
- `_undo`: freeing what an acquire cut short may have taken
- `_forgetting`: forgetting idle names (`retain`'s sweeps, retain=0, `prune`), both modes
- `_store`: MySQLStore, the operations and the wait that returns a grant
- `_getlock_sql`, `_getlock_sessions`, `_getlock`: `mode=getlock` (MySQLGetLockStore)

Example::

    store = tenure.connect("mysql://app:secret@db.internal/locks")
"""

from __future__ import annotations

from typing import Any

from tenure._sync.stores._protocol import Backend
from tenure._sync.stores.mysql._getlock import MySQLGetLockStore
from tenure._sync.stores.mysql._options import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TABLE,
    DEFAULT_TIMEOUT,
    OPTIONS,
    SCHEMES,
    Settings,
)
from tenure._sync.stores.mysql._store import MySQLStore

__all__ = ["DEFAULT_POOL_SIZE", "DEFAULT_TABLE", "DEFAULT_TIMEOUT", "OPTIONS", "SCHEMES",
           "MySQLGetLockStore", "MySQLStore", "from_url"]


def from_url(url: str, **options: Any) -> Backend:
    """The store for a `mysql://` (or `mariadb://`) URL, as `tenure.connect` builds it:
    options from the URL's query or as keywords (see MySQLStore); `mode=getlock` gives an
    MySQLGetLockStore.

    Example::

        backend = from_url("mysql://app:secret@db.internal/locks?table=app_leases", timeout=2)
    """
    if Settings.parse(url, options).mode == "getlock":
        return MySQLGetLockStore(url, **options)
    return MySQLStore(url, **options)
