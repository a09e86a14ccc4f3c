"""`sqlite:////absolute/locks.db` or `sqlite:///relative/locks.db` (as in SQLAlchemy): the
embedded default. Processes on one host share the file.

One row per (name, slot) in `tenure_leases`, never deleted: it keeps the name's fencing counter
across releases and breaks. Expiry uses this host's monotonic clock (shared by all processes on
the host, immune to wall-clock steps; a process in a Linux time namespace reads it with the
namespace's offset taken off, see tenure._hostclock) together with the boot id, because the
monotonic clock restarts at reboot. A lock is taken and released with ONE autocommit statement
each, so a cycle costs what two bare write transactions cost. Journal: WAL; synchronous=NORMAL
by default (a crash of the host may lose the last commits; counters written before a reboot are
reseeded from the wall clock, so tokens still never go backwards). `?synchronous=full` makes
every commit durable at the price of an fsync. Records (`write_record`) are rows of
`tenure_records`, written by one statement that takes effect only while the writer's lease row
is live. The path is made absolute when the store is built (relative to the working
directory then), and every error shows it; a missing directory is an error, not created.

Where things are:

    _sql.py          the tables and every statement, as text
    _settings.py     the URL's path and the options (synchronous, busy_timeout), checked first
    _failures.py     what a failure means: what to fix, or a transient error to retry
    _connections.py  the connection pool: pragmas, WAL, fork(), reads that create nothing
    _records.py      the records API (a row per name, fenced by its lease)
    _leases.py       AsyncSQLiteStore: acquire, renew, release, break, listing

Example::

    store = tenure.connect("sqlite:////var/lib/app/locks.db")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenure._async.stores._options import merged, only
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.sqlite._leases import AsyncSQLiteStore
from tenure._async.stores.sqlite._settings import warn_of_the_old_reading
from tenure._urls import parse_store_url

__all__ = ["SCHEMES", "AsyncSQLiteStore", "from_url", "warn_of_the_old_reading"]

SCHEMES: tuple[str, ...] = ("sqlite",)


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store of a `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` URL, as
    `tenure.aio.connect` builds it: options `synchronous` ("normal" or "full"),
    `busy_timeout` (seconds, default 5) and `retain` (seconds a name nobody holds is kept,
    default 3600, 0 to inf) in the URL's query or as keywords (given both ways, they must agree).

    Example::

        backend = from_url("sqlite:////var/lib/app/locks.db?synchronous=full&busy_timeout=2")
    """
    parsed = parse_store_url(url, SCHEMES)
    warn_of_the_old_reading(url, Path(parsed.location))
    return AsyncSQLiteStore(parsed.location, **only(
        merged(parsed.options, options), "synchronous", "busy_timeout", "retain",
        store="sqlite:// stores"))
