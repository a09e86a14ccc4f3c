# GENERATED from src/tenure/_async/stores/postgres/_settings.py by scripts/unasync.py: do not edit.
"""The options of a PostgreSQL store, read once from its URL and keywords before any I/O: tenure's
own (schema, table, timeout, pool_size, notify, pgbouncer, prepare_threshold, mode, retain) and
libpq's parameters, with tenure's defaults for the latter where unset.

Example:
    >>> read_settings("postgresql://app@db/app?mode=advisory&sslmode=disable", {}).table
    'tenure_advisory'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from tenure._sync.stores._options import (
    DEFAULT_RETAIN,
    as_bool,
    as_count,
    as_identifier,
    as_number,
    refuse_unknown,
    retain_seconds,
)
from tenure._sync.stores.postgres._failures import clean
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import redact

OPTIONS = ("schema", "table", "timeout", "pool_size", "notify", "pgbouncer",
           "prepare_threshold", "mode", "retain")
MODES = ("table", "advisory")
_STORES = "postgresql:// stores"


@dataclass(frozen=True)
class Settings:
    """What a store was asked for (see read_settings).

    `pool_size` is the most connections the store's pool opens for its calls (the listener's
    connection, in table mode with notify, is one more); in advisory mode those same
    connections also hold the leases' locks, many leases per connection.
    """

    url: str  # redacted; with retain= when not the default
    password: str  # hidden in the driver's messages
    mode: str
    schema: str
    table: str
    timeout: float
    pool_size: int
    pgbouncer: bool
    notify: bool
    prepare: int | None  # psycopg's prepare_threshold
    params: dict[str, Any]  # libpq's
    retain: float = DEFAULT_RETAIN  # seconds a free name's rows stay (see retain_seconds)


def read_settings(url: str, options: dict[str, Any]) -> Settings:
    """The store's settings from `url` and the keyword `options` (the keyword wins); raises
    InvalidArgument, naming the option, for a bad one.

    Example:
        >>> read_settings("postgresql://app@db/app", {"timeout": 3}).timeout
        3.0
    """
    if not isinstance(url, str):
        raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
    redacted = redact(url)
    dsn, settings = _split(url, redacted, options)
    mode = settings.get("mode", "table")
    if mode not in MODES:
        raise InvalidArgument(f"mode={mode!r} is not a PostgreSQL store mode; use "
                              "mode=table (leases in a table, the default) or "
                              "mode=advisory (session advisory locks)")
    advisory = mode == "advisory"
    schema = as_identifier("schema", settings.get("schema", "public"), 63, default="public")
    default_table = "tenure_advisory" if advisory else "tenure_leases"
    table = as_identifier("table", settings.get("table", default_table), 63,
                          default=default_table)
    timeout = as_number("timeout", settings.get("timeout", 5.0), 0.1, 3600.0, default=5.0)
    pool_size = as_count("pool_size", settings.get("pool_size", 10), 1, 1000, default=10)
    pgbouncer = as_bool("pgbouncer", settings.get("pgbouncer", False))
    notify_option = settings.get("notify")
    notify = not pgbouncer if notify_option is None else as_bool("notify", notify_option)
    if notify and pgbouncer:
        raise InvalidArgument(
            "notify=true needs a direct connection (LISTEN is session state), but "
            "pgbouncer=true says this URL is a transaction-pooling PgBouncer; drop notify "
            "(waiters then poll) or listen on a direct URL in another store")
    if advisory and pgbouncer:
        raise InvalidArgument(
            "mode=advisory needs a direct connection (an advisory lock is session state), "
            "but pgbouncer=true says this URL is a transaction-pooling PgBouncer; use "
            "mode=table (the default) through PgBouncer")
    threshold = settings.get("prepare_threshold", None if pgbouncer else 5)
    if threshold is not None and str(threshold).lower() in ("none", "off", ""):
        threshold = None
    prepare = None if threshold is None else as_count("prepare_threshold", threshold, 0,
                                                       1_000_000, default=5)
    retain = retain_seconds(settings.get("retain", DEFAULT_RETAIN))
    params, password = _libpq_params(dsn, redacted, urlsplit(url).password or "", timeout,
                                     pgbouncer)
    if retain != DEFAULT_RETAIN and "retain=" not in redacted:  # reads back as the same store
        redacted += f"{'&' if '?' in redacted else '?'}retain={retain:g}"
    return Settings(redacted, password, mode, schema, table, timeout, pool_size, pgbouncer,
                    notify, prepare, params, retain)


def _split(url: str, redacted: str, keywords: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Take tenure's options out of the URL's query; the rest of the URL goes to libpq."""
    base, _, query = url.partition("?")
    scheme = urlsplit(base).scheme.lower()
    if scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(f"url {redacted!r} is not a PostgreSQL URL; use "
                              "postgresql://USER@HOST:PORT/DBNAME")
    refuse_unknown(keywords, OPTIONS, _STORES,
                   note="libpq parameters such as sslmode go in the URL's query")
    settings: dict[str, Any] = {}
    libpq: list[tuple[str, str]] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in OPTIONS:
            settings[key] = value
        else:
            libpq.append((key, value))
    settings.update(keywords)
    # quote, not quote_plus: libpq does not read '+' as a space (options=-c%20x=1).
    return base + ("?" + urlencode(libpq, quote_via=quote) if libpq else ""), settings


def _libpq_params(dsn: str, redacted: str, password: str, timeout: float,
                  pgbouncer: bool) -> tuple[dict[str, Any], str]:
    """libpq's parameters (parsed locally, no I/O) with tenure's defaults where unset, and the
    password (from the URL or its parameters)."""
    try:
        params: dict[str, Any] = dict(conninfo_to_dict(dsn))
    except psycopg.Error as exc:
        unknown = re.search(r'invalid URI query parameter: "(.*)"', str(exc))
        if unknown:
            refuse_unknown([unknown.group(1)], OPTIONS, _STORES,
                           note="in the URL also libpq's parameters: sslmode, "
                                "application_name, target_session_attrs, ...")
        raise InvalidArgument(
            f"url {redacted!r} is not a valid libpq URL: {clean(exc, password)}; see "
            "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING"
        ) from None
    password = str(params.get("password") or password)
    milliseconds = max(1, round(timeout * 1000))
    params.setdefault("connect_timeout", max(1, math.ceil(timeout)))
    # A dead peer or a cut network fails a call within about `timeout`, not the kernel's
    # 15 minutes; the listener's idle connection is probed by keepalives.
    params.setdefault("tcp_user_timeout", milliseconds)
    params.setdefault("keepalives", 1)
    params.setdefault("keepalives_idle", max(1, math.ceil(timeout)))
    params.setdefault("keepalives_interval", 1)
    params.setdefault("keepalives_count", 3)
    if not pgbouncer:
        # Startup parameters, not SETs, so no session state is needed (PgBouncer refuses
        # them: pgbouncer=true leaves them out). The server cancels a statement after
        # `timeout`; and a grant is in the WAL before acquire returns even where the
        # server's default is synchronous_commit=off, which would lose the last grants in
        # a crash and so hand a lease to a second holder. The user's own options win.
        params["options"] = (f"-c statement_timeout={milliseconds} "
                             "-c synchronous_commit=on "
                             + str(params.get("options", ""))).strip()
    return params, password
