"""`redis://HOST:PORT/DB`, `rediss://...` (TLS), `unix:///path/to/redis.sock?db=N`: leases in Redis;
several masters with a quorum (`redis://a,b,c/0?quorum=2`) too.

Where things are:

    _scripts.py      the Lua scripts, the keys of a name, commands packed by hand
    _settings.py     options: a URL's, a client's, a quorum's (checked before any I/O)
    _connections.py  connections to one server, the undo of unanswered acquires, errors
    _reader.py       the pub/sub reader that notices a restart and reclaims the leases held
    _ordering.py     no renewal of a lease reaches the server after its release
    _waiting.py      waiting for a release; the wake-up takes the lease and returns it
    _records.py      the records API (a record per name, fenced by its lease)
    _single.py       AsyncRedisStore: one server
    _fan_out.py      calls to several masters at once, answers counted as they come
    _quorum.py       AsyncRedisQuorumStore: a quorum of independent masters
    _quorum_records.py  the quorum store's records API

See docs/stores/redis.md.

Example::

    store = tenure.connect("redis://cache.internal:6379/0?prefix=myapp:")
    store = tenure.connect(tenure.stores.RedisStore(client=redis.Redis(), prefix="myapp:"))
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

try:  # the driver, once for the package: its modules import it plainly (they load after this)
    import redis  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from tenure._errors import MissingExtra

    raise MissingExtra("the redis:// store needs redis-py: install tenure[redis] "
                       "(pip install 'tenure[redis]')") from exc

from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.redis._quorum import (
    MASTER_SHARE,
    WAIT_SLACK,
    AsyncRedisQuorumStore,
)
from tenure._async.stores.redis._reader import RECONNECT_MAX, TICK
from tenure._async.stores.redis._scripts import (
    ACQUIRE,
    BREAK,
    LAST_ACQUIRE,
    RAISE,
    READ,
    RELEASE,
    RENEW,
    RETOKEN,
    SIGNAL_MS,
    SWAP_RECORD,
    UNDO_ACQUIRE,
    UNDO_RECORD,
    WAKE_ACQUIRE,
    WRITE_RECORD,
    name_keys,
    packed,
)
from tenure._async.stores.redis._settings import (
    DEFAULT_PREFIX,
    DEFAULT_RESTART_GRACE,
    DEFAULT_TIMEOUT,
    OPTIONS,
    PASSED_ON,
    Settings,
    parse_options,
    parse_quorum,
)
from tenure._async.stores.redis._single import AsyncRedisStore
from tenure._async.stores.redis._waiting import SERVER_TIMER_SLACK

# The URL schemes this store serves (several masters: a quorum store, by the same schemes).
SCHEMES: tuple[str, ...] = ("redis", "rediss", "unix")


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store for a `redis://`, `rediss://` or `unix://` URL, as `tenure.aio.connect` builds
    it: one server, or a quorum of masters when the URL names several (comma-separated).

    Example::

        backend = from_url("redis://cache:6379/0?prefix=app:", timeout=2)
        quorum = from_url("redis://r1:6379,r2:6379,r3:6379/0")  # AsyncRedisQuorumStore
    """
    return open_store(url, **options)


def open_store(url: str | None = None, **options: Any) -> AsyncBackend:
    """The Redis store for `url` (or `client=`): a quorum store when the URL names several
    masters.

    Example::

        backend = open_store("redis://r1,r2,r3/0")  # AsyncRedisQuorumStore, quorum 2
    """
    if isinstance(url, str) and "," in urlsplit(url).netloc:
        return AsyncRedisQuorumStore(url, **options)
    return AsyncRedisStore(url, **options)


__all__ = [
    "ACQUIRE", "BREAK", "DEFAULT_PREFIX", "DEFAULT_RESTART_GRACE", "DEFAULT_TIMEOUT",
    "LAST_ACQUIRE", "MASTER_SHARE", "OPTIONS", "PASSED_ON", "RAISE", "READ", "RECONNECT_MAX",
    "RELEASE", "RENEW", "RETOKEN", "SCHEMES", "SERVER_TIMER_SLACK", "SIGNAL_MS", "SWAP_RECORD",
    "TICK", "UNDO_ACQUIRE", "UNDO_RECORD", "WAIT_SLACK", "WAKE_ACQUIRE", "WRITE_RECORD",
    "AsyncRedisQuorumStore", "AsyncRedisStore", "Settings", "from_url", "name_keys",
    "open_store", "packed", "parse_options", "parse_quorum",
]
