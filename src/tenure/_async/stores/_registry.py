"""The one registry of stores: which module serves each URL scheme, which extra it needs, which
public classes it exports. `connect()`, the URL parser (tenure._urls), `tenure.stores` and
`tenure.aio.stores` all read it; a store module is imported only when its scheme or one of its
classes is used, so a driver loads only for those who use its store.

Each store module declares `SCHEMES` (the schemes listed here for it) and
`from_url(url, **options) -> AsyncBackend`, which builds the store as `connect(url)` does.
Adding a store = its module, one entry below, a conformance fixture and a docs page
(docs/contributing.md, "Adding a store").

Example:
    >>> entry("rediss").module, entry("rediss").extra
    ('redis', 'redis')
    >>> entry("postgres").schemes
    ('postgresql', 'postgres')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

from tenure._errors import InvalidArgument, MissingExtra

if TYPE_CHECKING:
    from tenure._async.stores._protocol import AsyncBackend

_PACKAGE = "tenure._async.stores"


class StoreModule(Protocol):
    """What the registry asks of a store module.

    Example::

        backend = module.from_url("memory://")
    """

    SCHEMES: tuple[str, ...]

    def from_url(self, url: str, **options: Any) -> AsyncBackend:
        """The store of `url` (a scheme of SCHEMES), built as `connect(url, **options)` does."""
        ...


@dataclass(frozen=True)
class Entry:
    """One store module.

    `module` is its name under tenure._async.stores; `schemes` the URL schemes it serves (none:
    it is reached through another store's URLs); `forms` its URLs' forms, for messages (one
    for each of its schemes, so a message lists every scheme); `extra` the pip extra that
    installs its driver; `classes` the public classes that tenure.aio.stores
    exports from it (tenure.stores: the same names without "Async"); `server` when the store
    parses its URL itself (a server's address and its options: tenure._urls checks only the
    scheme), `needs_address` when such a URL must name a host or socket; `docs` its page,
    docs/stores/<docs>.md.

    Example:
        >>> Entry("memory", ("memory",), "memory://").docs
        'memory'
    """

    module: str
    schemes: tuple[str, ...]
    forms: str
    extra: str | None = None
    classes: tuple[str, ...] = ()
    server: bool = False
    needs_address: bool = False
    docs: str = ""

    def __post_init__(self) -> None:
        if not self.docs:
            object.__setattr__(self, "docs", self.module)


STORES: tuple[Entry, ...] = (
    Entry("memory", ("memory",), "memory://", classes=("AsyncMemoryStore",)),
    Entry("sqlite", ("sqlite",), "sqlite:///relative/locks.db, sqlite:////absolute/locks.db",
          classes=("AsyncSQLiteStore",)),
    Entry("file", ("file",), "file:///path/to/dir", classes=("AsyncFileStore",)),
    Entry("azblob", ("azblob",),
          "azblob://ACCOUNT/CONTAINER, azblob:///CONTAINER (with a connection string)",
          extra="azure", classes=("AsyncAzureBlobStore",)),
    Entry("redis", ("redis", "rediss", "unix"),
          "redis://HOST:PORT/DB, rediss://..., unix:///path/to/redis.sock",
          extra="redis", classes=("AsyncRedisStore",), server=True, needs_address=True),
    # Several masters with a quorum: reached through redis:// URLs that name several hosts.
    Entry("redis_quorum", (),
          "redis://HOST1:PORT,HOST2:PORT,HOST3:PORT/DB (a quorum of masters)",
          extra="redis", classes=("AsyncRedisQuorumStore",), docs="redis"),
    Entry("postgres", ("postgresql", "postgres"),
          "postgresql://USER@HOST:PORT/DB, postgres://...",
          extra="postgres", classes=("AsyncPostgresStore",), server=True),
    Entry("mysql", ("mysql", "mariadb"), "mysql://USER@HOST:PORT/DB, mariadb://...",
          extra="mysql", classes=("AsyncMySQLStore",), server=True),
)

_BY_SCHEME = {scheme: found for found in STORES for scheme in found.schemes}

SUPPORTED = ", ".join(found.forms for found in STORES)
"""Every URL form of every store (each scheme, and the Redis quorum's several hosts), for the
message of a URL tenure cannot connect to."""


def entry(scheme: str) -> Entry:
    """The registry entry of `scheme` (lowercase, without "://").

    Example:
        >>> entry("mariadb").module
        'mysql'
    """
    found = _BY_SCHEME.get(scheme)
    if found is None:
        raise InvalidArgument(f"url scheme {scheme!r} is not supported by this version of "
                              f"tenure; use one of: {SUPPORTED}")
    return found


def schemes() -> tuple[str, ...]:
    """Every scheme, in the registry's order.

    Example:
        >>> schemes()[:3]
        ('memory', 'sqlite', 'file')
    """
    return tuple(_BY_SCHEME)


def server_schemes() -> dict[str, str]:
    """The schemes whose stores parse their URLs themselves, by the module that serves them.

    Example:
        >>> server_schemes()["unix"]
        'redis'
    """
    return {scheme: found.module for scheme, found in _BY_SCHEME.items() if found.server}


def lazy_classes() -> dict[str, str]:
    """The public classes of stores that need an extra, each as "module:attribute" (the `lazy`
    of tenure._lazy.module_getattr: tenure.aio.stores and tenure.stores import them on first
    use).

    Example:
        >>> lazy_classes()["AsyncPostgresStore"]
        'tenure._async.stores.postgres:AsyncPostgresStore'
    """
    return {name: f"{_PACKAGE}.{found.module}:{name}"
            for found in STORES if found.extra for name in found.classes}


def load(found: Entry) -> ModuleType:
    """Import the store module of `found`: MissingExtra, naming the pip command, when its
    extra is not installed.

    Example::

        module = load(entry("memory"))
    """
    try:
        return importlib.import_module(f"{_PACKAGE}.{found.module}")
    except MissingExtra:
        raise
    except ModuleNotFoundError as exc:
        # A driver of the extra is missing (not a module of tenure itself: that is a bug).
        ours = _PACKAGE.partition(".")[0]
        if found.extra is None or (exc.name or "").partition(".")[0] == ours:
            raise
        raise MissingExtra(
            f"the {found.schemes[0] if found.schemes else found.module} store needs "
            f"{exc.name}: install tenure[{found.extra}] (pip install "
            f"'tenure[{found.extra}]')") from exc


def store_module(scheme: str) -> StoreModule:
    """The module that serves `scheme`, imported now (see `load`).

    Example::

        backend = store_module("memory").from_url("memory://")
    """
    return cast(StoreModule, load(entry(scheme)))
