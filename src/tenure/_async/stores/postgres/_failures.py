"""How a PostgreSQL failure reads: which ones are permanent (a StoreRefused, with what to fix)
and which clear by themselves, from the SQLSTATE or, for a failed connection, libpq's message;
and a driver's message made fit for users.

Example:
    >>> _connection_sqlstate('connection failed: FATAL:  database "x" does not exist')
    '3D000'
"""

from __future__ import annotations

import re

import psycopg

from tenure._async.stores._failures import cleaned


def clean(exc: BaseException, password: str) -> str:
    """A driver message fit for users: one line, `password` hidden (stores._failures.cleaned).

    Example:
        >>> clean(OSError("no  route\\n to host"), "")
        'no route to host'
    """
    return cleaned(exc, password)


# A connection refused because the server is full (53300, which a failed connection does not
# carry): "sorry, too many clients already", or only reserved slots left.
_TOO_MANY = ("too many clients", "too many connections", "remaining connection slots")

# A failed connection carries libpq's message, not the server's SQLSTATE: the permanent ones.
_CONNECTION_REFUSALS = (
    ("password authentication failed", "28P01"),
    ("no pg_hba.conf entry", "28000"),
    ("no password supplied", "28P01"),
    ("authentication failed", "28000"),
    ("does not exist", "3D000"),  # a database (a missing role says "role ... does not exist")
    ("permission denied", "42501"),
)


# A connection that libpq, or the server at startup, refuses for a setting of the URL (or of
# libpq's environment: PGSSLMODE, PGOPTIONS, a service file): no retry can change that. Matched
# on libpq's messages (a failed connection carries no SQLSTATE), each with what to fix; checked
# before _CONNECTION_REFUSALS ("root certificate file ... does not exist" names no database).
_LIBPQ_DOCS = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"
_MISCONFIGURATIONS = tuple((re.compile(pattern), fix) for pattern, fix in (
    (r"does not support SSL",
     "the server does not accept SSL connections: enable ssl on the server, or lower sslmode "
     "in the URL (sslmode=prefer or disable) if an unencrypted connection is acceptable"),
    (r"certificate|private key|SSL support is not compiled|sslnegotiation",
     "check the URL's SSL settings (sslmode, sslrootcert, sslcert, sslkey): each file must "
     "exist and be readable, and the server's certificate must match them and the host name"),
    (r"GSSAPI encryption required|channel binding|authentication method requirement",
     "the server cannot meet what the URL requires (gssencmode, channel_binding or "
     "require_auth): change that setting, or the server's pg_hba.conf"),
    (r"unrecognized configuration parameter|invalid value for parameter|"
     r"parameter \S+ cannot be|permission denied to set parameter",
     "the server refused a setting the connection asks for: fix or remove it in the URL's "
     "options parameter (or PGOPTIONS)"),
    (r"unsupported startup parameter",
     "the server or a pooler refuses startup parameters: behind PgBouncer in transaction "
     "pooling mode add pgbouncer=true to the URL"),
    (r'invalid (integer )?"?\w+"? value|invalid port number|could not parse network address|'
     r"invalid connection option|definition of service|service file|weak sslmode",
     f"fix this libpq parameter in the URL (or its PG* environment variable); see {_LIBPQ_DOCS}"),
))


def _misconfiguration(message: str) -> str | None:
    """What to fix when a failed connection's message says a setting is wrong; else None.

    Example:
        >>> _misconfiguration('connection is bad: invalid sslmode value: "bogus"')[:30]
        'fix this libpq parameter in th'
        >>> _misconfiguration("connection failed: Connection refused") is None
        True
    """
    for pattern, fix in _MISCONFIGURATIONS:
        if pattern.search(message):
            return fix
    return None


def _connection_sqlstate(message: str) -> str | None:
    """The SQLSTATE a failed connection's message stands for (None: none, or transient).

    Example:
        >>> _connection_sqlstate('connection failed: FATAL:  database "x" does not exist')
        '3D000'
    """
    if "role " in message and "does not exist" in message:
        return "28000"
    for words, state in _CONNECTION_REFUSALS:
        if words in message:
            return state
    return None


def refusal(exc: psycopg.Error, schema: str, table: str) -> str | None:
    """What to fix when `exc` is permanent, by SQLSTATE (or, for a failed connection,
    which has none, by libpq's message); None when it is transient: a connection refused
    or reset, a server starting up or shutting down (57P01, 57P03), a read-only server
    during a failover (25006), too many connections (53300), a deadlock or a lock wait
    (40P01, 55P03), a cancelled statement (57014). `schema` and `table` are the store's.

    Example:
        >>> refusal(psycopg.errors.InsufficientPrivilege("denied"), "public", "t")[:23]
        'grant this user USAGE a'
    """
    if exc.sqlstate is None:
        misconfigured = _misconfiguration(str(exc))
        if misconfigured is not None:
            return misconfigured
    state = exc.sqlstate or _connection_sqlstate(str(exc))
    if state is None:
        return None
    if state.startswith("28"):  # invalid authorization specification
        return ("authentication refused: check the user and password in the URL (or "
                "PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf")
    if state == "3D000":
        return ("the database does not exist: create it (CREATE DATABASE) or fix the "
                "database name in the URL")
    if state == "42501":
        return (f"grant this user USAGE and CREATE on schema {schema!r} (or create "
                f"the table as the docs show) and SELECT, INSERT, UPDATE on {table!r}")
    if state == "3F000":
        return (f"schema {schema!r} does not exist and this user may not create it: "
                "create it, or set the schema option to one that exists")
    if state in ("42P10", "42703"):  # no key matching ON CONFLICT, an undefined column
        # (a missing column made the store create or re-key the table first: still there)
        return (f'the table "{schema}"."{table}" does not have the keys and '
                "columns this version of tenure uses: was it changed by another version "
                "of tenure? Versions that key the table differently cannot share it: see "
                "the upgrade notes in docs/stores/postgres.md (upgrade every process at "
                "once, or give the new version a table of its own with table=)")
    if state.startswith("54"):  # program limit exceeded, e.g. an index row too big
        return "the server cannot take this request as it is; retrying will not help"
    if state == "0A000" and "cached plan" in str(exc):
        return None  # a prepared statement outlived an ALTER TABLE: the retry re-plans it
    if state in ("08004", "0A000"):  # connection rejected, feature not supported
        return "the server does not accept this client or request; see its log"
    return None
