# GENERATED from src/tenure/_async/stores/postgres/__init__.py by scripts/unasync.py: do not edit.
"""`postgresql://USER@HOST:PORT/DB`: leases in a table of a PostgreSQL database (psycopg 3).

One row per (name, slot) in the table `tenure_leases` of the schema `public` (or `?table=`,
`?schema=`), created on first use; slot 0's row also keeps the name's fencing counter. Expiry
is decided by the database server's clock (`now()`), never the client's. Acquire, renew (a
whole batch), release and break are each ONE autocommit statement, so a lock cycle costs two
round trips; release notifies waiters through LISTEN/NOTIFY in the same statement, or hands a
lock's lease to a waiter registered for it, which then holds it without another round trip. Nothing
depends on session state, so the store also works through PgBouncer in transaction pooling
mode (`?pgbouncer=true`: waiters then poll instead of listening). `?mode=advisory` keeps each
lease as a session advisory lock instead, held by one of the pool's connections (many leases
share one; freed when that connection ends), with the same fencing counter.

The package, by concern: _settings (options), _table_sql and _advisory_sql (the statements'
text), _statements (rendered, ready to run), _connection and _pool (connections), _listener
(LISTEN/NOTIFY), _handover (a release handing a lock to a waiter), _failures (what a failure
means), _base (what both modes share), _table and _advisory (the two modes).

Example::

    store = tenure.connect("postgresql://app@db.internal/app?schema=locks")
"""

from __future__ import annotations

from typing import Any

try:  # the driver, once for the package: its modules import it plainly (they load after this)
    import psycopg  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from tenure._errors import MissingExtra

    raise MissingExtra(
        "the postgresql:// store needs psycopg 3: install tenure[postgres] "
        "(pip install 'tenure[postgres]')"
    ) from exc

from tenure._sync.stores._protocol import Backend
from tenure._sync.stores.postgres._advisory import PostgresAdvisoryStore
from tenure._sync.stores.postgres._advisory_sql import _advisory_keys
from tenure._sync.stores.postgres._base import PostgresStore
from tenure._sync.stores.postgres._settings import MODES, OPTIONS
from tenure._sync.stores.postgres._table import PostgresTableStore
from tenure._sync.stores.postgres._table_sql import _ALIVE_CLASS

__all__ = ["MODES", "OPTIONS", "SCHEMES", "PostgresAdvisoryStore", "PostgresStore",
           "PostgresTableStore", "from_url"]

# Kept importable from the package for code that reached into the old module.
_KEPT = (_ALIVE_CLASS, _advisory_keys)

SCHEMES: tuple[str, ...] = ("postgresql", "postgres")


def from_url(url: str, **options: Any) -> Backend:
    """The store for a `postgresql://` (or `postgres://`) URL, as `tenure.connect` builds
    it: tenure's options from the URL's query or keywords, the rest of the query for libpq;
    `mode=advisory` gives an PostgresAdvisoryStore, else an PostgresTableStore.

    Example::

        backend = from_url("postgresql://app@db.internal/app?mode=advisory", timeout=3)
    """
    return PostgresStore(url, **options)
