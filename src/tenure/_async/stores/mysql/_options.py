"""The URL and options of the mysql:// store, checked before any I/O.

Example:
    >>> settings = Settings.parse("mysql://app:secret@db:3307/locks?table=app_leases", {})
    >>> settings.table, settings.timeout, settings.pool_size, settings.connect_options["port"]
    ('app_leases', 5.0, 10, 3307)
    >>> Settings.parse("mysql://db/locks", {"retain": 60}).url
    'mysql://db/locks?retain=60'

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tenure._async.stores._options import (
    DEFAULT_RETAIN,
    as_count,
    as_identifier,
    as_number,
    refuse_unknown,
    retain_seconds,
)
from tenure._async.stores.mysql._driver import CLIENT, driver_options
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import redact

SCHEMES: tuple[str, ...] = ("mysql", "mariadb")
OPTIONS = ("table", "timeout", "pool_size", "unix_socket", "mode", "retain")
MODES = ("table", "getlock")  # a lease row per (name, slot); a session GET_LOCK per lease
DEFAULT_TABLE = "tenure_leases"
DEFAULT_TIMEOUT = 5.0
DEFAULT_POOL_SIZE = 10


@dataclass(frozen=True)
class Settings:
    """A store's URL (redacted), options, and the keywords its connections are made with.

    `pool_size` is the most connections the store opens for its lease calls (a call waits
    up to `timeout` while all are busy); waits have their own, one per waiting acquire that
    sleeps on the server, at most `pool_size` of them kept idle (see AsyncSleepers).

    Example:
        >>> Settings.parse("mariadb://db/locks", {"pool_size": 2}).pool_size
        2
    """

    url: str
    table: str
    timeout: float
    pool_size: int
    database: str
    password: str
    connect_options: dict[str, Any]
    mode: str = "table"
    retain: float = DEFAULT_RETAIN  # seconds a name nobody holds is kept (see retain_seconds)

    @classmethod
    def parse(cls, url: str, options: dict[str, Any]) -> Settings:
        """The settings of `url` with `options` (keywords win over the URL's query); raises
        InvalidArgument (InvalidArgumentType) naming a bad one and the fix."""
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        redacted = redact(url)
        parts = urlsplit(url)
        if parts.scheme.lower() not in SCHEMES:
            raise InvalidArgument(f"url {redacted!r} is not a mysql:// or mariadb:// URL")
        given = {**dict(parse_qsl(parts.query, keep_blank_values=True)), **options}
        refuse_unknown(given, OPTIONS, "mysql:// stores")
        table = as_identifier("table", given.get("table", DEFAULT_TABLE), 64,
                              default=DEFAULT_TABLE)
        timeout = as_number("timeout", given.get("timeout", DEFAULT_TIMEOUT), 0.1, 600.0,
                            default=DEFAULT_TIMEOUT)
        pool_size = as_count("pool_size", given.get("pool_size", DEFAULT_POOL_SIZE), 1, 1000,
                             default=DEFAULT_POOL_SIZE)
        mode = given.get("mode", "table") or "table"
        if mode not in MODES:
            raise InvalidArgument(
                f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}: 'table' "
                "(the default) keeps leases in a table, 'getlock' as session locks (GET_LOCK)")
        retain = retain_seconds(given.get("retain", DEFAULT_RETAIN))
        if retain != DEFAULT_RETAIN and "retain" not in dict(parse_qsl(parts.query)):
            redacted += f"{'&' if '?' in redacted else '?'}retain={retain:g}"  # reads back
        unix_socket = given.get("unix_socket") or None
        if unix_socket is not None and not isinstance(unix_socket, str):
            raise InvalidArgumentType(
                f"unix_socket must be a str path, got {type(unix_socket).__name__}")
        try:
            port = parts.port or 3306
        except ValueError:
            raise InvalidArgument(f"url {redacted!r} has an invalid port") from None
        database = unquote(parts.path.lstrip("/"))
        if not database or "/" in database:
            raise InvalidArgument(
                f"url {redacted!r} must name a database, as in mysql://user@host/database")
        password = unquote(parts.password or "")
        connect_options: dict[str, Any] = {
            "host": parts.hostname or "localhost", "port": port,
            "user": unquote(parts.username or "") or None, "password": password,
            "unix_socket": unix_socket, "charset": "utf8mb4", "autocommit": True,
            # Several statements per round trip (semaphores). FOUND_ROWS stays off: affected
            # rows must count changed rows, which is how an upsert tells a win from a miss.
            "client_flag": CLIENT.MULTI_STATEMENTS,
            "connect_timeout": timeout,
            **driver_options(database, timeout),
        }
        return cls(redacted, table, timeout, pool_size, database, password, connect_options,
                   mode, retain)

    @property
    def where(self) -> str:
        """The server's address as errors name it: the socket path, or host:port.

        Example:
            >>> Settings.parse("mysql://db:3307/locks", {}).where
            'db:3307'
        """
        return (self.connect_options["unix_socket"] or
                f"{self.connect_options['host']}:{self.connect_options['port']}")

