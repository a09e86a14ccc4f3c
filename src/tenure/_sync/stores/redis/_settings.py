# GENERATED from src/tenure/_async/stores/redis/_settings.py by scripts/unasync.py: do not edit.
"""The Redis store's options: a URL's, a client's, and a quorum's, checked before any I/O.

Example:
    >>> parse_options("redis://cache:6379/0?prefix=app:", {"timeout": 2}).timeout
    2.0
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote_plus, urlsplit

from redis import Redis

from tenure._sync.stores._options import DEFAULT_RETAIN, as_number, refuse_unknown, retain_seconds
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import redact

DEFAULT_PREFIX = "tenure:"
DEFAULT_TIMEOUT = 5.0
# Options that go to redis-py as they are (TLS files and checks, the database number).
PASSED_ON = ("db", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs",
             "ssl_check_hostname")
OPTIONS = ("prefix", "timeout", "restart_grace", "retain", *PASSED_ON)
# In its first seconds, a server grants no name that has no counter: a server that lost its
# data gives the holders from before its restart this long to reclaim their leases.
DEFAULT_RESTART_GRACE = 2.0


@dataclass(frozen=True)
class Settings:
    """A Redis store's validated options; `url` is for redis-py, without tenure's options;
    `given` is the URL as given with the options in effect (a keyword wins over the query)."""

    url: str = field(repr=False)  # may hold a password
    prefix: str
    timeout: float
    restart_grace: float
    retain: float
    driver: dict[str, Any]
    given: str = field(default="", repr=False)  # may hold a password


def parse_options(url: str, options: dict[str, Any]) -> Settings:
    """Validate a Redis URL and its options (keywords win over the query).

    Example:
        >>> parse_options("redis://cache:6379/0?prefix=app:", {"timeout": 2}).prefix
        'app:'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    shown = redact(url)
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidArgument(
            f"url {shown!r} is not a Redis URL; use redis://HOST:PORT/DB, rediss://HOST:PORT/DB "
            "or unix:///path/to/redis.sock?db=N")
    if "," in parts.netloc:
        raise InvalidArgument(
            f"url {shown!r} names several servers; this store talks to one Redis server (or "
            "one endpoint of a proxy): give one host")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise InvalidArgument(f"url {shown!r} has a bad port; e.g. redis://cache:6379/0") from None
    path = parts.path.strip("/")
    if scheme == "unix" and not path:
        raise InvalidArgument(f"url {shown!r} names no socket; e.g. unix:///run/redis.sock?db=0")
    if scheme != "unix" and not host:
        raise InvalidArgument(f"url {shown!r} names no server; e.g. {scheme}://HOST:6379/0")
    if scheme != "unix" and path and not path.isdigit():
        raise InvalidArgument(
            f"url {shown!r} has path {parts.path!r}; the path is the database number, e.g. "
            f"{scheme}://{host}:{port or 6379}/0")
    merged: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(options)
    prefix, timeout, grace, retain = own_options(merged, OPTIONS, "redis:// stores")
    driver: dict[str, Any] = {}
    if "db" in merged:
        db = merged.pop("db")
        if isinstance(db, bool) or not (isinstance(db, int) or str(db).isdigit()):
            raise InvalidArgument(f"db={db!r} is not a database number; use e.g. db=0")
        driver["db"] = int(db)
    if merged and scheme != "rediss":
        raise InvalidArgument(
            f"option(s) {', '.join(sorted(merged))} are TLS settings: use a rediss:// URL")
    if "ssl_cert_reqs" in merged:
        merged["ssl_cert_reqs"] = _cert_reqs(merged["ssl_cert_reqs"])
    driver.update(merged)
    return Settings(f"{scheme}://{parts.netloc}{parts.path}", prefix, timeout or DEFAULT_TIMEOUT,
                    grace, retain, driver, in_effect(url, options))


def _cert_reqs(value: object) -> object:
    """ssl_cert_reqs as redis-py takes it: none, optional or required (or an ssl.VerifyMode),
    checked now rather than at the first connection."""
    if isinstance(value, ssl.VerifyMode):
        return value
    if isinstance(value, str) and value.lower() in _CERT_REQS:
        return value.lower()
    raise InvalidArgument(f"ssl_cert_reqs={value!r} is not supported; use none, optional or "
                          "required (the default: the server's certificate is checked)")


_CERT_REQS = ("none", "optional", "required")


def in_effect(url: str, keywords: Mapping[str, Any]) -> str:
    """`url` with each option of its query that a keyword overrides showing the keyword's
    value: what the store's url and repr show is what is in effect.

    Example:
        >>> in_effect("redis://cache:6379/0?timeout=700&prefix=app:", {"timeout": 3})
        'redis://cache:6379/0?timeout=3&prefix=app:'
    """
    base, _, query = url.partition("?")
    if not query or not keywords:
        return url
    pairs = []
    for pair in query.split("&"):
        key = pair.partition("=")[0]
        if unquote_plus(key) in keywords:
            pair = f"{key}={quote(str(keywords[unquote_plus(key)]), safe=':/,')}"
        pairs.append(pair)
    return f"{base}?{'&'.join(pairs)}"


def own_options(merged: dict[str, Any], accepted: Sequence[str], where: str,
                note: str = "") -> tuple[str, float | None, float, float]:
    """Pop and check tenure's own options: prefix, timeout (None when not given), grace,
    retain; refuse those not `accepted` (see stores._options.refuse_unknown).

    Example:
        >>> own_options({"prefix": "app:"}, ("prefix",), "redis:// stores")
        ('app:', None, 2.0, 3600.0)
    """
    refuse_unknown(merged, accepted, where, note)
    prefix = merged.pop("prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str):
        raise InvalidArgumentType(f"prefix must be a str, got {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix or len(prefix) > 200:
        raise InvalidArgument(
            f"prefix={prefix!r} is not allowed: at most 200 characters and no '{{' or '}}' "
            "(braces would change the keys' cluster hash tag); e.g. prefix='myapp:'")
    timeout = None if "timeout" not in merged else as_number(
        "timeout", merged.pop("timeout"), 0, 600.0, above=True, default=DEFAULT_TIMEOUT,
        why="it bounds every connect and every reply")
    grace = as_number("restart_grace", merged.pop("restart_grace", DEFAULT_RESTART_GRACE), 0,
                      3600.0, default=DEFAULT_RESTART_GRACE,
                      why="0 turns it off (see the Redis store's docs)")
    retain = retain_seconds(merged.pop("retain", DEFAULT_RETAIN))
    return prefix, timeout, grace, retain


def with_retain(url: str, retain: float) -> str:
    """`url` showing `retain` when it is not the default and the URL does not say it already:
    the store's url reads back as the same store.

    Example:
        >>> with_retain("redis://cache:6379/0?prefix=app:", 60.0)
        'redis://cache:6379/0?prefix=app:&retain=60'
        >>> with_retain("redis://cache:6379/0 (client)", 0.0)
        'redis://cache:6379/0?retain=0 (client)'
    """
    address, client, _ = url.partition(" (client)")
    if retain == DEFAULT_RETAIN or "retain" in dict(parse_qsl(urlsplit(address).query)):
        return url
    return f"{address}{'&' if '?' in address else '?'}retain={retain:g}{client}"


def retain_ms(retain: float) -> bytes:
    """`retain` as the scripts take it: milliseconds, or -1 for inf (kept forever).

    Example:
        >>> retain_ms(1.5), retain_ms(float("inf"))
        (b'1500', b'-1')
    """
    # Beyond 10^12 s (31,700 years) is forever too, and would overflow the server's expiry.
    return b"-1" if retain > 1e12 else b"%d" % round(retain * 1000)


def checked_client(client: object, url: object) -> Any:
    """`client` when it is a redis.Redis (the client of this API) and no URL came
    with it.

    Example::

        client = checked_client(redis.Redis(), None)
    """
    if url is not None:
        raise InvalidArgument(
            "give either a URL or client=, not both: the client already says where the server "
            "is; e.g. tenure.connect(tenure.stores.RedisStore(client=my_client, prefix='app:'))")
    if not isinstance(client, Redis):
        raise InvalidArgumentType(
            f"client must be a {Redis.__module__}.{Redis.__name__} for this store, got "
            f"{type(client).__module__}.{type(client).__name__}: tenure.stores.RedisStore "
            "takes a redis.Redis, "
            "tenure.aio.stores.AsyncRedisStore a redis.asyncio.Redis "  # unasync: keep
            "(Redis Cluster clients are not supported)")
    return client


def client_address(kwargs: dict[str, Any]) -> str:
    """Where a client's connections go, for messages (never its password).

    Example:
        >>> client_address({"host": "cache", "port": 6380, "password": "secret"})
        'redis://cache:6380/0 (client)'
    """
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}?db={db} (client)"
    if kwargs.get("host"):
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{db} (client)"
    return "redis:// (client)"


def parse_quorum(url: str, options: dict[str, Any]) -> tuple[list[str], int, dict[str, Any]]:
    """The masters' URLs (credentials and database shared), the quorum (a majority unless
    given), and the options left for each master's store.

    Example:
        >>> urls, quorum, rest = parse_quorum("redis://a:1,b:2,c:3/0?prefix=x:", {})
        >>> urls, quorum, rest
        (['redis://a:1/0', 'redis://b:2/0', 'redis://c:3/0'], 2, {'prefix': 'x:'})
    """
    parts = urlsplit(url)
    shown = redact(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss"):
        raise InvalidArgument(
            f"url {shown!r}: several masters need redis:// or rediss://, e.g. "
            "redis://r1:6379,r2:6379,r3:6379/0")
    credentials, _, hosts = parts.netloc.rpartition("@")
    names = hosts.split(",")
    if any(not name.strip() for name in names):
        raise InvalidArgument(
            f"url {shown!r} has an empty host between commas; e.g. redis://r1:6379,r2:6379,"
            "r3:6379/0")
    if len(set(names)) < len(names):
        raise InvalidArgument(f"url {shown!r} names a master twice; name each master once")
    at = f"{credentials}@" if credentials else ""
    urls = [f"{scheme}://{at}{name}{parts.path}" for name in names]
    merged: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(options)
    if "client" in merged:
        raise InvalidArgument(
            "client= takes one client; several masters are named in the URL only")
    quorum = _quorum(merged.pop("quorum", len(names) // 2 + 1), len(names))
    return urls, quorum, merged


def _quorum(value: object, masters: int) -> int:
    majority = masters // 2 + 1
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).isdigit()):
        raise InvalidArgumentType(
            f"quorum must be a whole number of masters, got {value!r}; e.g. quorum={majority}")
    quorum = int(str(value))
    if not majority <= quorum <= masters:
        raise InvalidArgument(
            f"quorum={quorum} is out of range for {masters} masters: give {majority} to "
            f"{masters}. A quorum of half the masters or fewer would let two holders hold one "
            "lock at once (two groups of masters that share none could each grant it)")
    return quorum
