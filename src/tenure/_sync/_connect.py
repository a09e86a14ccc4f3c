# GENERATED from src/tenure/_async/_connect.py by scripts/unasync.py: do not edit.
"""`connect(url)`: a store URL (or a store object) to an Store.

Example::

    store = tenure.connect("sqlite:////var/lib/app/locks.db")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tenure._sync.stores._protocol import Backend
from tenure._sync.stores.file import FileStore
from tenure._sync.stores.memory import MemoryStore
from tenure._sync.stores.sqlite import SQLiteStore, warn_of_the_old_reading
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import SERVER_SCHEMES, parse_store_url

if TYPE_CHECKING:
    from tenure._sync._store import Store

T = TypeVar("T")


def connect(url: str | Backend, *, holder: str | None = None,
            **options: Any) -> Store:
    """Open a store by URL (or wrap a store object you built).

    Bad URLs fail here. Connections open on first use; the file store creates its directory now.

    URLs: `memory://`, `sqlite:////abs/path.db` (option `synchronous="full"`, in the query or
    as a keyword),
    `file:///abs/dir`, `azblob://ACCOUNT/CONTAINER` (DefaultAzureCredential) and
    `azblob:///CONTAINER` (a connection string). Keyword options of azblob stores:
    `connection_string` (else env AZURE_STORAGE_CONNECTION_STRING), `blob_url_format` (else env
    TENURE_AZURE_BLOB_URL_FORMAT), `create_container` (default True), `fencing` (default
    True; False skips the token increment and every token is 0) and `timeout` (default 5 s:
    every store call ends within it).
    `redis://HOST:PORT/DB` (also rediss:// and unix:///path.sock), `postgresql://USER@HOST/DB`
    and `mysql://USER@HOST/DB` take the options their docs pages list, in the URL's query or as
    keywords (e.g. `prefix=`, `schema=`, `table=`, `timeout=`).

    Example::

        store = tenure.connect("sqlite:////var/lib/app/locks.db")
        store = tenure.connect("azblob://myaccount/locks")  # DefaultAzureCredential
    """
    from tenure._sync._store import Store  # _store re-exports connect: imported late

    if not isinstance(url, str):
        if isinstance(url, Backend):
            _only(options, kind="a store object")
            return Store(url, holder=holder)
        raise InvalidArgumentType(
            f"url must be a str such as 'sqlite:////var/lib/app/locks.db' or a store object, "
            f"got {type(url).__name__}"
        )
    parsed = parse_store_url(url)
    backend: Backend
    if parsed.scheme == "memory":
        _only(options, kind="memory://")
        _only(parsed.options)
        backend = MemoryStore()
    elif parsed.scheme == "sqlite":
        warn_of_the_old_reading(url, Path(parsed.location))
        backend = SQLiteStore(parsed.location, **_merged(
            _only(parsed.options, "synchronous"), _only(options, "synchronous", kind="sqlite://")))
    elif parsed.scheme == "azblob":
        from tenure._sync.stores.azblob import open_store  # needs tenure[azure]

        _only(parsed.options)
        account, container = parsed.location.split("/")
        backend = open_store(account, container, **_only(
            options, "connection_string", "blob_url_format", "create_container", "fencing",
            "timeout",
            kind="azblob://"))
    elif parsed.scheme in SERVER_SCHEMES:
        backend = _server_store(SERVER_SCHEMES[parsed.scheme], url, options)
    else:
        _only(options, kind="file://")
        _only(parsed.options)
        backend = FileStore(parsed.location)
    return Store(backend, holder=holder)


def _server_store(module: str, url: str, options: dict[str, Any]) -> Backend:
    """Redis, PostgreSQL and MySQL stores, imported here so each driver loads only when used;
    each validates its own URL and keyword options."""
    if module == "redis":  # one server, or several masters with a quorum
        from tenure._sync.stores.redis_quorum import open_store

        return open_store(url, **options)
    if module == "postgres":
        from tenure._sync.stores.postgres import PostgresStore

        return PostgresStore(url, **options)
    from tenure._sync.stores.mysql import MySQLStore

    return MySQLStore(url, **options)


def _merged(in_url: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """The options given in the URL's query and as keywords; one given both ways must agree."""
    for name in sorted(set(in_url) & set(keywords)):
        if str(keywords[name]).lower() != str(in_url[name]).lower():
            raise InvalidArgument(f"{name} is {in_url[name]!r} in the URL but {keywords[name]!r} "
                                  "as a keyword; give it once")
    return {**in_url, **keywords}


def _only(options: dict[str, T], *allowed: str, kind: str = "") -> dict[str, T]:
    """`options` when all are allowed: URL options, or keyword options of `kind` of store."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) or "none"
        where = f"keyword option(s) for {kind} stores" if kind else "URL option(s)"
        raise InvalidArgument(f"unknown {where} {', '.join(unknown)}; accepted: {accepted}")
    return options
