"""Store URLs: parsing into a scheme, a location and options, and redaction of secrets for
messages. Pure logic, no I/O (a relative SQLite path is made absolute against the working
directory, as SQLAlchemy does).

Example:
    >>> parse_store_url("sqlite:////var/lib/app/locks.db").location
    '/var/lib/app/locks.db'
    >>> redact("redis://user:hunter2@cache:6379/0")
    'redis://user:***@cache:6379/0'
    >>> parse_store_url("azblob://myaccount/locks").location
    'myaccount/locks'
    >>> parse_store_url("redis://cache:6379/0?prefix=app:").options
    {'prefix': 'app:'}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from tenure._async.stores import _registry
from tenure._errors import InvalidArgument, InvalidArgumentType

# Every URL form, and the server-backed schemes by the store module that serves them (their
# stores parse the rest of the URL themselves, each knows its options; here only the shape is
# checked): both from the one registry of stores.
SUPPORTED = _registry.SUPPORTED
SERVER_SCHEMES = _registry.server_schemes()
# Azure's rules: 3 to 63 of [a-z0-9-], starting and ending with a letter or digit, no "--".
_CONTAINER = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
# Greedy up to the last '@': a password may hold '/' or '@' unencoded. Over-redacting is fine.
# Up to the last '@' of the URL (a password may hold '@' or '/'), never past whitespace: a
# whole message is redacted, and a later 'user@host' in it is not the URL's.
_SECRET_IN_NETLOC = re.compile(r"(?<=://)([^/@:\s]*):(\S*)@")
# A value ends at '&', ';' or whitespace (a URL's query has none; in a message the text goes
# on after it), or is a libpq conninfo value in single quotes.
_SECRET_IN_QUERY = re.compile(
    r"(?i)((?:password|secret|token|key|sig|accountkey)=)(?:'(?:[^'\\]|\\.)*'|[^&;\s]*)")
_SECRET_KEY = re.compile(r"(?i)(?:password|secret|token|key|sig)$")  # as _SECRET_IN_QUERY
# Characters a sqlite URL shows as they are (quote() keeps letters, digits and '_.-~'):
# what percent-decoding and the split at '?' leave unchanged.
_PLAIN_IN_PATH = "/:@!$&'()*+,;="
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


def redact_url(url: str) -> str:
    """Hide the password of a string known to be ONE store URL, in redact()'s form (the user
    name stays): structurally, up to the URL's last '@', so a password with spaces (which
    redact() cannot tell from a message's text) is hidden too.

    Example:
        >>> redact_url("redis://app:two words@cache:6379/0")
        'redis://app:***@cache:6379/0'
        >>> redact_url("mysql://root@db/app")
        'mysql://root@db/app'
        >>> redact_url("postgresql://app@db/app?password=a;b&sslmode=require")
        'postgresql://app@db/app?password=***&sslmode=require'
    """
    scheme, separator, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if separator and at and colon:
        url = f"{scheme}://{user}:***@{host}"
    # The query's secrets by its pairs: a value runs to the next '&' (redact() stops at ';' or
    # '&' too, as it must in a message's text, and would show the rest of 'password=a;b').
    base, question, query = url.partition("?")
    if question:
        query = "&".join(_hide_secret_value(pair) for pair in query.split("&"))
    return redact(base + question + query)


def _hide_secret_value(pair: str) -> str:
    key, equals, _value = pair.partition("=")
    return f"{key}=***" if equals and _SECRET_KEY.search(key) else pair


def parse_store_url(url: object, schemes: tuple[str, ...] = ()) -> StoreURL:
    """Split a store URL; a clear error for anything tenure cannot connect to, or (given
    `schemes`, a store module's SCHEMES) for a URL of another store.

    SQLite URLs read as in SQLAlchemy: `sqlite:///locks.db` is relative to the working
    directory, `sqlite:////var/lib/app/locks.db` absolute (see _parse_sqlite). `file:///abs/dir`
    takes an absolute path and `file:relative/dir` a relative one.

    Example:
        >>> parse_store_url("sqlite:////tmp/locks.db?synchronous=full").options
        {'synchronous': 'full'}
    """
    if not isinstance(url, str):
        raise InvalidArgumentType(
            f"url must be a str such as 'sqlite:////var/lib/app/locks.db', got {type(url).__name__}"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL": an unclosed '['
        raise InvalidArgument(
            f"url {redact(url)!r} cannot be parsed ({exc}); write an IPv6 address in brackets, "
            "e.g. postgresql://app@[::1]:5432/app"
        ) from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidArgument(
            f"url {redact(url)!r} has no scheme; use one of: {SUPPORTED}"
        )
    if schemes and scheme not in schemes:
        expected = " or ".join(f"{name}://" for name in schemes)
        raise InvalidArgument(f"url {redact(url)!r} is not a {expected} URL")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "memory":
        return StoreURL(scheme, "", options)
    if scheme == "sqlite":
        return _parse_sqlite(url)
    if scheme == "file":
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
        if _registry.entry(scheme).needs_address and not where.strip("/"):
            example = ("unix:///run/redis/redis.sock" if scheme == "unix"
                       else f"{scheme}://HOST:PORT/...")
            raise InvalidArgument(f"url {redact(url)!r} names no server; e.g. {example}")
        return StoreURL(scheme, url, options)
    raise InvalidArgument(
        f"url scheme {scheme!r} is not supported by this version of tenure; use one of: "
        f"{SUPPORTED}"
    )


def _parse_sqlite(url: str) -> StoreURL:
    """SQLAlchemy's reading: the path is what follows `sqlite:///`, percent-decoded, so
    `sqlite:///locks.db` is relative to the working directory and `sqlite:////var/x.db` absolute.
    Without the `//`, `sqlite:locks.db` and `sqlite:/var/x.db` say the same. A relative path is
    resolved now, against the working directory, as SQLAlchemy does when it makes an engine;
    '~' is a plain name, not the home directory."""
    # No fragment: '#' belongs to the file name, as in SQLAlchemy ('%23' also works).
    parts = urlsplit(url, allow_fragments=False)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    forms = "write sqlite:///relative/path.db or sqlite:////absolute/path.db"
    after_scheme = url[url.index(":") + 1:]
    if parts.netloc:
        # 'localhost' too: SQLAlchemy refuses any host, and the file-URL reading of
        # sqlite://localhost/x.db (absolute) differs from the SQLAlchemy one (relative).
        host = parts.netloc.rpartition("@")[2]
        what = f"names host {host!r}" if host else "names a user"
        raise InvalidArgument(f"url {redact(url)!r} {what}; sqlite stores are local: {forms}")
    path = parts.path[1:] if after_scheme.startswith("//") else parts.path
    location = unquote(path)
    if location.startswith("//"):  # POSIX may give '//' a meaning of its own: one '/' is meant
        location = "/" + location.lstrip("/")
    if location in ("", ":memory:"):
        raise InvalidArgument(
            f"url {redact(url)!r} names no database file (SQLAlchemy reads it as an in-memory "
            "database, which no other process and no other connection sees, so it cannot keep "
            f"leases); {forms}, or use memory:// for leases within one process"
        )
    if location.endswith("/"):
        raise InvalidArgument(
            f"url {redact(url)!r} names a directory; end it with the database file's name, "
            "e.g. sqlite:////var/lib/app/locks.db"
        )
    return StoreURL("sqlite", os.path.abspath(location), options)


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
    """The URL of a local store path, as parse_store_url reads it back: for sqlite, the path
    after `sqlite:///` (so four slashes for an absolute one) with '%', '?', '#', spaces and
    other characters a URL cannot hold percent-encoded; for file, `file:///abs/dir` or
    `file:relative/dir`.

    Example:
        >>> local_url("sqlite", "/var/lib/app/locks.db"), local_url("file", "locks")
        ('sqlite:////var/lib/app/locks.db', 'file:locks')
    """
    if scheme == "sqlite":
        return f"sqlite:///{quote(path, safe=_PLAIN_IN_PATH)}"
    return f"{scheme}://{path}" if path.startswith("/") else f"{scheme}:{path}"
