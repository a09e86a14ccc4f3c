# GENERATED from src/tenure/_async/stores/redis/_connections.py by scripts/unasync.py: do not edit.
"""The Redis store's connections: redis-py's, used through their send/read API (its client API
and pool cost about as much CPU again per command), the undo of acquires whose answers were
given up on, and what a driver error means (transient, or refused for good).

Example::

    connections = Connections.of_url("redis://cache:6379/0", settings)
    reply = connections.call(packed(b"PING"))
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from redis import ConnectionPool, Redis
from redis.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from tenure._sync import _shim
from tenure._sync.stores import _failures as failures
from tenure._sync.stores._protocol import closed_store
from tenure._sync.stores.redis._scripts import SCRIPTS, Script, packed
from tenure._sync.stores.redis._settings import DEFAULT_TIMEOUT, Settings, client_address
from tenure._errors import InvalidArgument, StoreRefused, StoreUnavailable
from tenure._urls import redact

log = logging.getLogger("tenure")

# Error replies that no retry clears: the credentials, the user's rights, the setup. LOADING,
# READONLY (a replica, or a failover under way), BUSY, MISCONF, OOM, TRYAGAIN and CLUSTERDOWN
# pass by themselves and stay transient.
_REFUSED_REPLIES = {
    "WRONGPASS": "authentication refused: check the user name and password in the URL",
    "NOAUTH": "the server requires a password: put it in the URL (redis://:PASSWORD@host)",
    "NOPERM": ("the user may not run this command or touch these keys: grant it +@scripting "
               "+@read +@write and the key pattern of the prefix in the server's ACL"),
    "ERR invalid password": "authentication refused: check the password in the URL",
    "ERR AUTH": "the server has no password set: remove the password from the URL",
    "ERR Client sent AUTH": "the server has no password set: remove the password from the URL",
    "ERR DB index is out of range": ("the database number in the URL does not exist on the "
                                     "server: use one below its 'databases' setting"),
    "ERR unknown command": ("the server does not run this command (renamed or disabled, or a "
                            "Redis before 5): tenure needs EVAL, EVALSHA and SCRIPT"),
}


def refusal(exc: BaseException) -> str | None:
    """What to fix when a Redis error is permanent; None when it is transient (a timeout, a
    refused or reset connection, a server loading or failing over).

    Example:
        >>> refusal(ResponseError("NOPERM this user has no permissions"))[:31]
        'the user may not run this comma'
    """
    if isinstance(exc, (NoPermissionError, AuthorizationError)):
        return _REFUSED_REPLIES["NOPERM"]
    message = str(exc)
    for start, fix in _REFUSED_REPLIES.items():
        if message.startswith(start) or message.startswith(start.removeprefix("ERR ")):
            return fix
    if isinstance(exc, AuthenticationError):  # redis-py drops the NOAUTH and WRONGPASS codes
        if "already authenticated" in message or "Authentication required" in message:
            return _REFUSED_REPLIES["NOAUTH"]
        return "authentication refused: check the user name and password in the URL"
    return None


class Undo(NamedTuple):
    """What an ACQUIRE of a lease id may take, to free it if its answer is given up on."""

    name: str
    slot0: bytes  # the name's first slot key
    head: bytes  # '["<lease id>",'
    ttl: float
    limit: int
    retain: bytes = b"-1"  # the store's retain in ms (-1: inf), see KEEP in _scripts.py

    def command(self) -> bytes:
        """UNDO_ACQUIRE of this lease id, packed. EVAL, not EVALSHA: rare, and maybe on a new
        connection, where round trips count.

        Example::

            connections.call(undo.command())
        """
        return packed(b"EVAL", SCRIPTS.undo_acquire.text, b"1", self.slot0, b"%d" % self.limit,
                      self.head, b"%d" % max(1, int(self.ttl * 1000)), self.retain)


class UndoAll(NamedTuple):
    """What an ACQUIRE_ALL of one lease id per name may take, to free it if its answer is given
    up on (the Undo of a lock_all)."""

    names: Sequence[str]
    slot0s: Sequence[bytes]  # each name's first slot key
    heads: Sequence[bytes]  # each name's '["<lease id>",'
    ttl: float
    retain: bytes = b"-1"

    @property
    def name(self) -> str:
        """The names, for a log line."""
        return ", ".join(self.names)

    def command(self) -> bytes:
        """UNDO_ALL of these lease ids, packed (EVAL: see Undo.command).

        Example::

            connections.call(undo.command())
        """
        return packed(b"EVAL", SCRIPTS.undo_all.text, b"%d" % len(self.slot0s), *self.slot0s,
                      b"%d" % max(1, int(self.ttl * 1000)), self.retain, *self.heads)


def _retry() -> Retry:
    # redis-py retries a connection that broke once, at once (its default backs off for
    # seconds); a timeout is not retried: the caller's deadline rules.
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


class Connections:
    """One store's connections to one Redis server: `call` sends a packed command and reads
    its reply, `failure` turns a driver error into tenure's. Build with `of_url` or
    `of_client`.

    Example::

        connections = Connections.of_client(redis.Redis(), timeout=None)
    """

    def __init__(self, url: str, pool: ConnectionPool, owns_pool: bool,
                 kwargs: dict[str, Any], password: str, timeout: float, prefix: str) -> None:
        self.url, self.timeout, self.prefix = url, timeout, prefix
        self.closed = False
        self._pool, self._owns_pool, self._kwargs = pool, owns_pool, kwargs
        self._password = password
        # A password for the default user is checked once (see _check_password).
        self._password_unchecked = bool(password) and kwargs.get("username") in (None, "",
                                                                                  "default")
        self._client = Redis(connection_pool=pool)
        # Connections of the scripts: idle ones, and all (closed with the store).
        self._idle: list[Any] = []
        self._all: list[Any] = []
        self._mutex = threading.Lock()

    @classmethod
    def of_url(cls, url: str, settings: Settings) -> Connections:
        """The connections for `url` (its password and tenure's options are in `settings`).

        Example::

            connections = Connections.of_url(url, parse_options(url, {}))
        """
        shown = redact(settings.given or url)
        try:
            pool = ConnectionPool.from_url(
                settings.url, socket_timeout=settings.timeout,
                socket_connect_timeout=settings.timeout, health_check_interval=30,
                retry=_retry(), **settings.driver)
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"url {shown!r} is not usable: {exc}") from None
        return cls(shown, pool, True, pool.connection_kwargs,
                   unquote(urlsplit(url).password or ""), settings.timeout, settings.prefix)

    @classmethod
    def of_client(cls, client: Redis, timeout: float | None, prefix: str) -> Connections:
        """Connections with `client`'s settings, but raw replies and tenure's retry; `timeout`
        replaces the client's socket timeouts when given.

        Example::

            connections = Connections.of_client(redis.Redis(), None, "app:")
        """
        pool = client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        # A client without a socket timeout (redis-py's default) would wait forever on a
        # silent path: the store's connections get the default timeout then.
        seconds = timeout or float(kwargs.get("socket_timeout") or DEFAULT_TIMEOUT)
        address = client_address(kwargs)
        password = str(kwargs.get("password") or "")
        kwargs.update(decode_responses=False, retry=_retry(), socket_timeout=seconds)
        if timeout is not None or not kwargs.get("socket_connect_timeout"):
            kwargs.update(socket_connect_timeout=seconds)
        return cls(address, pool, False, kwargs, password, seconds, prefix)

    def start_afresh(self) -> None:
        """In a forked child: forget the parent's connections without a word on their sockets
        (redis-py shuts a socket down only in the process that opened it), and connect afresh,
        from a pool of the store's own (a client's pool may hand out the parent's connections),
        on next use.

        Example::

            os.register_at_fork(after_in_child=connections.start_afresh)
        """
        self._pool = ConnectionPool(connection_class=self._pool.connection_class,
                                    **self._kwargs)
        self._client, self._owns_pool = Redis(connection_pool=self._pool), True
        self._idle, self._all = [], []
        self._mutex = threading.Lock()

    def pubsub(self) -> Any:
        """A redis-py PubSub on this server (untyped in redis-py).

        Example::

            with connections.pubsub() as pubsub: ...
        """
        pubsub: Callable[[], Any] = self._client.pubsub  # untyped in redis-py
        return pubsub()

    def failure(self, operation: str, name: str, exc: Exception) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to do;
        StoreRefused when retrying cannot clear it (see `refusal`).

        Example::

            raise connections.failure("acquire", "jobs", exc) from exc
        """
        if isinstance(exc, StoreRefused):  # the store is closed: already says so
            return StoreRefused(str(exc))
        detail = str(exc).rstrip(".") or type(exc).__name__
        fix = refusal(exc)
        if fix is not None:
            return failures.refusal(self.url, operation, name, fix, detail,
                                    password=self._password)
        if isinstance(exc, ReadOnlyError):
            hint = ("this server is a read-only replica (or failing over): point the URL at the "
                    "primary")
        elif isinstance(exc, ResponseError):
            hint = ("the server refused the command; check that it runs Redis 5 or later with "
                    f"Lua scripting, and that nothing else writes keys under {self.prefix!r}")
        else:
            hint = f"{self._reach_hint()}; each call waits at most timeout={self.timeout:g} s"
        return failures.failure(self.url, operation, name, hint, detail, password=self._password)

    def _reach_hint(self) -> str:
        """What to check when the server did not answer, for this store's transport: a unix
        socket (a file to listen on and to open; no address, no TLS) or TCP."""
        socket_path = self._kwargs.get("path")  # only a unix socket connection has one
        if socket_path:
            return (f"check that the server is running and listening on the socket "
                    f"{socket_path}, and that this user may open it")
        return ("check that the server is running and reachable at this address, and the TLS "
                "settings")

    def eval(self, script: Script, command: bytes, undo: Undo | UndoAll | None = None) -> Any:
        """Run a packed EVALSHA of `script`; first load the script if the server lacks it.

        Example::

            answers = connections.eval(SCRIPTS.renew, command)
        """
        try:
            return self.call(command, undo=undo)
        except NoScriptError:
            self.call(packed(b"SCRIPT", b"LOAD", script.text))
            return self.call(command, undo=undo)

    def eval_each(self, script: Script, command: bytes, count: int) -> list[Any]:
        """Run `count` packed EVALSHAs of `script` pipelined (one round trip), as `eval` runs
        one: the script loaded and the lot sent again when the server lacks it. Their replies,
        error replies among them returned, not raised.

        Example::

            freed = connections.eval_each(SCRIPTS.release, commands, 3)
        """
        replies: list[Any] = []
        for _ in (1, 2):
            replies = self.call(command, replies=count)
            if not any(isinstance(reply, NoScriptError) for reply in replies):
                break
            self.call(packed(b"SCRIPT", b"LOAD", script.text))
        return replies

    def call(self, command: bytes, replies: int = 1,
                   undo: Undo | UndoAll | None = None) -> Any:
        """Send one packed command and read its reply (`replies` > 1: that many pipelined
        replies, error replies among them returned, not raised).

        A broken connection reconnects when used next; when one breaks mid-call, the idle ones
        are dropped too (a restart broke them all) and the command is sent once more (every
        script here is safe to repeat).

        `undo`: what an acquire sent took, to free when its answer is given up on (cancelled,
        timed out, broken) after it may have reached the server; see _finish and undo_soon.

        Example::

            reply = connections.call(packed(b"GET", b"key"))
        """
        if self.closed:
            raise closed_store(self.url)
        for last_try in (False, True):
            try:
                connection = self._idle.pop()
            except IndexError:
                connection = self._new_connection()
            sent, reply = False, []
            try:
                if self._password_unchecked:
                    self._check_password(connection)
                connection.send_packed_command((command,))
                sent = True
                if replies == 1:
                    reply = connection.read_response(disconnect_on_error=False)
                else:  # pipelined: every reply, error replies among them
                    for _ in range(replies):
                        reply.append(_reply_or_error(connection))
            except ResponseError:
                self._idle.append(connection)  # the error reply was read whole
                raise
            except RedisConnectionError:
                connection.disconnect()
                self._idle.append(connection)
                if last_try or self.closed:
                    if undo is not None:
                        self.undo_soon(undo)
                    raise
                stale, self._idle = self._idle, []
                for other in stale:
                    other.disconnect()
                self._idle.extend(stale)
                continue
            except BaseException as exc:  # a timeout, a cancellation: its reply may still come
                if undo is not None and sent and not isinstance(exc, Exception):
                    # Cancelled while the answer is on its way: the connection is intact
                    # (redis-py's parser resumes a cut read), so the undo goes right behind.
                    left = replies - (len(reply) if isinstance(reply, list) else 0)
                    _shim.start_soon(self._finish, connection, left, undo)
                    raise
                with _shim.shielded():
                    connection.disconnect()
                self._idle.append(connection)
                if undo is not None:
                    self.undo_soon(undo)
                raise
            self._idle.append(connection)
            if self.closed:
                connection.disconnect()
            return reply
        raise AssertionError("unreachable")

    def _check_password(self, connection: Any) -> None:
        """Warn once when the server has no password set: redis-py authenticates with HELLO
        AUTH default <password>, which a default user without a password accepts whatever the
        password, so a password in the URL would go unchecked without a word. A plain AUTH
        <password> says so."""
        self._password_unchecked = False
        try:
            connection.send_packed_command((packed(b"AUTH", self._password.encode()),))
            connection.read_response(disconnect_on_error=False)
        except (AuthenticationError, ResponseError) as exc:  # the reply was read whole
            if "without any password" in str(exc) or "no password is set" in str(exc):
                log.warning("tenure: %s: the server has no password set, so the password given "
                            "was not checked; remove it from the URL, or set one on the server "
                            "(requirepass)", self.url)

    def _finish(self, connection: Any, replies: int, undo: Undo | UndoAll) -> None:
        """Free what a cancelled acquire took: UNDO_ACQUIRE sent on the request's own
        connection, which Redis runs right after the request (one connection's commands run in
        order), then the answers of both read, and the connection used again."""
        try:
            connection.send_packed_command((undo.command(),))
            for _ in range(replies + 1):
                _reply_or_error(connection)
        except Exception as exc:  # the path broke too: from another connection, then
            log.debug("tenure: could not undo a cancelled acquire on its connection: %s", exc)
            connection.disconnect()
            self.undo_soon(undo)
        self._idle.append(connection)

    def undo_soon(self, undo: Undo | UndoAll) -> None:
        """Free, in the background and on another connection, what an ACQUIRE whose answer
        was given up on (timed out, broken) took.

        Disconnecting the request's connection first is not enough: the request may still be
        on its way (a retransmission, a proxy), and Redis may serve the undo's connection
        first. So UNDO_ACQUIRE leaves a mark when it finds nothing, and the ACQUIRE takes
        nothing when it finds the mark: whichever comes second, nothing is held.

        Example::

            connections.undo_soon(Undo("jobs", slot0, b'["lease-1",', 30.0, 1))
        """
        _shim.start_soon(self.undo, undo)

    def undo(self, undo: Undo | UndoAll) -> None:
        """UNDO_ACQUIRE now, best effort (the store may be closing: else the lease expires).

        Example::

            connections.undo(Undo("jobs", slot0, b'["lease-1",', 30.0, 1))
        """
        try:
            self.call(undo.command())
        except Exception as exc:
            log.debug("tenure: could not undo an unanswered acquire of %r: %s", undo.name, exc)

    def _new_connection(self) -> Any:
        connection = self._pool.connection_class(**self._kwargs)
        with self._mutex:
            self._all.append(connection)
        return connection

    def close(self) -> None:
        """Close every connection (and the pool, unless it is a client's: its owner closes it).

        Example::

            connections.close()
        """
        with self._mutex:
            self.closed = True
            connections, self._all, self._idle = self._all, [], []
        for connection in connections:
            connection.disconnect()
        if self._owns_pool:
            self._pool.disconnect()


def _reply_or_error(connection: Any) -> Any:
    """The next reply on `connection`; an error reply is returned, not raised. A read that
    fails or is cancelled leaves the connection as it is (the caller decides)."""
    try:
        return connection.read_response(disconnect_on_error=False)
    except ResponseError as exc:
        return exc

