"""Store URLs: parsing into a scheme, a location and options, and redaction of secrets for
messages. Pure logic, no I/O.

Example:
    >>> parse_store_url("sqlite:///var/lib/app/locks.db").location
    '/var/lib/app/locks.db'
    >>> redact("redis://user:hunter2@cache:6379/0")
    'redis://user:***@cache:6379/0'
    >>> parse_store_url("azblob://myaccount/locks").location
    'myaccount/locks'
    >>> parse_store_url("redis://cache:6379/0?prefix=app:").options
    {'prefix': 'app:'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from tenure._errors import InvalidArgument, InvalidArgumentType

SUPPORTED = ("memory://, sqlite:///path/to/locks.db, file:///path/to/dir, "
             "azblob://ACCOUNT/CONTAINER, azblob:///CONTAINER (with a connection string), "
             "redis://HOST:PORT/DB, rediss://..., unix:///path/to/redis.sock, "
             "postgresql://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB")
# Server-backed schemes, by the store module that serves them. Their stores parse the rest of
# the URL themselves (each knows its options); here only the shape is checked.
SERVER_SCHEMES = {"redis": "redis", "rediss": "redis", "unix": "redis",
                  "postgresql": "postgres", "postgres": "postgres",
                  "mysql": "mysql", "mariadb": "mysql"}
# Azure's rules: 3 to 63 of [a-z0-9-], starting and ending with a letter or digit, no "--".
_CONTAINER = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
# Greedy up to the last '@': a password may hold '/' or '@' unencoded. Over-redacting is fine.
# Up to the last '@' of the URL (a password may hold '@' or '/'), never past whitespace: a
# whole message is redacted, and a later 'user@host' in it is not the URL's.
_SECRET_IN_NETLOC = re.compile(r"(?<=://)([^/@:\s]*):(\S*)@")
_SECRET_IN_QUERY = re.compile(
    r"(?i)((?:password|secret|token|key|sig|accountkey)=)[^&;]*")
# A connection string's SAS is a whole query string ('sv=...&sig=...'): hidden up to the ';'.
_SAS_IN_CONNECTION_STRING = re.compile(r"(?i)(sharedaccesssignature=)[^;]*")


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL.

    Example:
        >>> parse_store_url("file:///tmp/locks").scheme
        'file'
    """

    scheme: str
    location: str
    options: dict[str, str] = field(default_factory=dict)


def redact(url: str) -> str:
    """Hide passwords and keys in a URL or connection string before it reaches a message.

    Example:
        >>> redact("postgresql://app:s3cret@db/locks?sslpassword=x")
        'postgresql://app:***@db/locks?sslpassword=***'
        >>> redact("AccountName=dev;AccountKey=c2VjcmV0Cg==;BlobEndpoint=http://h/dev")
        'AccountName=dev;AccountKey=***;BlobEndpoint=http://h/dev'
    """
    url = _SECRET_IN_NETLOC.sub(r"\1:***@", url)
    url = _SAS_IN_CONNECTION_STRING.sub(r"\1***", url)
    return _SECRET_IN_QUERY.sub(r"\1***", url)


def parse_store_url(url: object) -> StoreURL:
    """Split a store URL; a clear error for anything tenure cannot connect to.

    `sqlite:///abs/path.db` and `file:///abs/dir` take absolute paths; `sqlite:relative.db`
    and `file:relative/dir` take paths relative to the working directory.

    Example:
        >>> parse_store_url("sqlite:locks.db?synchronous=full").options
        {'synchronous': 'full'}
    """
    if not isinstance(url, str):
        raise InvalidArgumentType(
            f"url must be a str such as 'sqlite:///var/lib/app/locks.db', got {type(url).__name__}"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidArgument(
            f"url {redact(url)!r} has no scheme; use one of: {SUPPORTED}"
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "memory":
        return StoreURL(scheme, "", options)
    if scheme in ("sqlite", "file"):
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgument(
                f"url {redact(url)!r} names host {parts.hostname!r}; {scheme} stores are local: "
                f"write {scheme}:///absolute/path or {scheme}:relative/path"
            )
        location = unquote(parts.path)
        if location.startswith("//"):
            location = "/" + location.lstrip("/")
        if not location:
            raise InvalidArgument(f"url {redact(url)!r} has no path; e.g. {scheme}:///var/lib/app/locks")
        return StoreURL(scheme, location, options)
    if scheme == "azblob":
        return _parse_azblob(url, parts.netloc, parts.path, options)
    if scheme in SERVER_SCHEMES:
        # PostgreSQL and MySQL URLs without a host mean the local socket, as in libpq.
        where = parts.path if scheme == "unix" else parts.netloc.rpartition("@")[2]
        if SERVER_SCHEMES[scheme] == "redis" and not where.strip("/"):
            example = ("unix:///run/redis/redis.sock" if scheme == "unix"
                       else f"{scheme}://HOST:PORT/...")
            raise InvalidArgument(f"url {redact(url)!r} names no server; e.g. {example}")
        return StoreURL(scheme, url, options)
    raise InvalidArgument(
        f"url scheme {scheme!r} is not supported by this version of tenure; use one of: "
        f"{SUPPORTED}"
    )


def _parse_azblob(url: str, account: str, path: str, options: dict[str, str]) -> StoreURL:
    """`azblob://ACCOUNT/CONTAINER` or `azblob:///CONTAINER`: location 'ACCOUNT/CONTAINER'."""
    container = path.strip("/")
    if not _CONTAINER.fullmatch(container):
        raise InvalidArgument(
            f"url {redact(url)!r} needs a container name after the account, such as "
            "azblob://myaccount/locks: 3 to 63 lowercase letters, digits and single hyphens"
        )
    if account and not _ACCOUNT.fullmatch(account):
        raise InvalidArgument(
            f"url {redact(url)!r} names account {account!r}; a storage account name is 3 to 24 "
            "lowercase letters and digits (use azblob:///CONTAINER with a connection string "
            "for anything else, e.g. Azurite)"
        )
    return StoreURL("azblob", f"{account}/{container}", options)


def local_url(scheme: str, path: str) -> str:
    """The URL of a local store path, absolute or relative, as parse_store_url reads it back.

    Example:
        >>> local_url("sqlite", "/var/lib/app/locks.db"), local_url("file", "locks")
        ('sqlite:///var/lib/app/locks.db', 'file:locks')
    """
    return f"{scheme}://{path}" if path.startswith("/") else f"{scheme}:{path}"
