"""`redis://HOST:PORT/DB`, `rediss://...` (TLS), `unix:///path/to/redis.sock?db=N`: leases in Redis.

Every name has keys of its own that share one hash tag, `{<readable prefix>-<digest>}` (see
tenure._names.safe_key; it never contains a brace), so each script touches one cluster slot:

    <prefix>{<tag>}:s<slot>   the lease of a slot: a JSON array [lease id, token, holder, name]
                              with a PX expiry (PTTL is the time left, by the server's clock)
    <prefix>{<tag>}:token     the name's fencing counter; never expires, never deleted
    <prefix>{<tag>}:limit     the largest semaphore limit used (semaphores only; for breaks)
    <prefix>{<tag>}:b<slot>   left by break_lease for the broken lease's remaining time, so its
                              holder's next renewal reports BROKEN rather than EXPIRED
    <prefix>{<tag>}:signal    a list a release pushes one item onto (for 2 s): a waiter blocked
                              in BLPOP on it wakes at once, one waiter per release

Acquire, release and break are each ONE server-side Lua script (EVALSHA; the script is loaded
when the server lacks it), and so is the renewal of every lease the process holds, in one call.
A token is max(counter + 1, the server's TIME in microseconds): tokens keep growing when the
server loses its data (no persistence) or fails over to a replica that missed increments, as
long as the server's clock does not step back. Waiters block in BLPOP on the name's signal list.
After a restart that lost the data, holders write their leases back (one pub/sub connection per
store notices the restart at once), while the server grants no new name for `restart_grace`
seconds. See docs/stores/redis.md.

Example::

    store = tenure.connect("redis://cache.internal:6379/0?prefix=myapp:")
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

from tenure._async import _shim
from tenure._async.stores._protocol import AsyncBackend
from tenure._errors import InvalidArgument, InvalidArgumentType, MissingExtra, StoreUnavailable
from tenure._names import safe_key, safe_key_prefix
from tenure._timing import local_deadline
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import redact

try:
    from redis.asyncio import ConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import (
        AuthenticationError,
        NoScriptError,
        ReadOnlyError,
        RedisError,
        ResponseError,
    )
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("the redis:// store needs redis-py: install tenure[redis]") from exc

log = logging.getLogger("tenure")

DEFAULT_PREFIX = "tenure:"
DEFAULT_TIMEOUT = 5.0
# Options that go to redis-py as they are (TLS files and checks, the database number).
PASSED_ON = ("db", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs",
             "ssl_check_hostname")
OPTIONS = ("prefix", "timeout", "restart_grace", *PASSED_ON)
# In its first seconds, a server grants no name that has no counter: a server that lost its
# data gives the holders from before its restart this long to reclaim their leases.
DEFAULT_RESTART_GRACE = 2.0
# A release's wake-up item stays this long for a waiter that was not blocked yet (the scripts
# say 2000 too).
SIGNAL_MS = 2000
# The reader looks for dropped leases (and whether the store closed) this often at least.
TICK = 0.5
# The reader reconnects after a failure within this long (the restart grace must exceed it).
RECONNECT_MAX = 0.25
# Renewal answers of the RENEW script.
_LOST = {0: LostReason.EXPIRED, 2: LostReason.TAKEN, 3: LostReason.BROKEN}

# KEYS: slot 0, counter, and for a semaphore its highest limit. ARGV: limit, ttl ms, value head
# '["<lease id>",', value tail ',"<holder>","<name>"]', restart grace s. Takes the first free
# slot; returns the token for a lock, {slot, token} for a semaphore, false when all are held.
ACQUIRE = """
local limit, head = tonumber(ARGV[1]), ARGV[3]
local base = string.sub(KEYS[1], 1, -3)
local key, free
for slot = 0, limit - 1 do
  key = slot == 0 and KEYS[1] or base .. 's' .. slot
  local value = redis.call('GET', key)
  if not value then free = slot break end
  if string.sub(value, 1, #head) == head then
    -- this very request, retried after its reply was lost: the same grant again
    local token = tonumber(string.match(value, '^[^,]*,(%d+)'))
    if limit == 1 then return token end
    return {slot, token}
  end
end
if not free then return false end
local counter = redis.call('GET', KEYS[2])
if not counter then
  -- Never granted on this server, or the server lost its data: in the server's first seconds,
  -- wait, so that holders from before a restart can reclaim their leases first.
  local up = string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')
  if tonumber(up) < tonumber(ARGV[5]) then return false end
end
-- the token: the server's clock in microseconds, or the counter + 1 when that is ahead
local now = redis.call('TIME')
local token = now[1] .. string.rep('0', 6 - #now[2]) .. now[2]
if counter and tonumber(counter) >= tonumber(token) then
  token = string.format('%d', tonumber(counter) + 1)
end
redis.call('SET', KEYS[2], token)
redis.call('SET', key, head .. token .. ARGV[4], 'PX', ARGV[2])
if limit == 1 then return tonumber(token) end
if tonumber(redis.call('GET', KEYS[3]) or '1') < limit then redis.call('SET', KEYS[3], limit) end
return {free, token}
"""

# KEYS: the slot keys of the leases. ARGV: ttl ms, then each lease's value. One answer per
# lease: 1 renewed, 2 taken by another lease, 3 broken, 0 expired. A lease whose key is gone
# while its name's counter is gone too was lost with the server's data, and nothing of that
# name was granted, released or broken since: it is written back, and kept.
RENEW = """
local answers = {}
for i, key in ipairs(KEYS) do
  local mine = ARGV[i + 1]
  local value = redis.call('GET', key)
  if value == mine then
    redis.call('PEXPIRE', key, ARGV[1])
    answers[i] = 1
  elseif value then
    answers[i] = 2
  else
    local base, slot = string.match(key, '^(.*:)s(%d+)$')
    if redis.call('GET', base .. 'b' .. slot) == mine then
      answers[i] = 3
    elseif redis.call('EXISTS', base .. 'token') == 0 then
      redis.call('SET', key, mine, 'PX', ARGV[1])
      answers[i] = 1
    else
      answers[i] = 0
    end
  end
end
return answers
"""

# KEYS: slot key, counter. ARGV: the lease's value. Compare-and-delete, then wake one waiter
# (see `signal` above). A counter the server lost is written back first (as 0: the next token
# comes from the clock), so that no renewal still on its way can bring the released lease back
# (see RENEW).
RELEASE = """
redis.call('SET', KEYS[2], '0', 'NX')
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local signal = string.sub(KEYS[2], 1, -6) .. 'signal'
  if redis.call('RPUSH', signal, 1) > 1 then redis.call('LTRIM', signal, -1, -1) end
  redis.call('PEXPIRE', signal, 2000)  -- SIGNAL_MS
  return 1
end
return 0
"""

# KEYS: slot 0, highest limit, counter. Frees every slot (the counter stays) and wakes a waiter
# per slot freed; a tombstone with the lease's remaining time lets its holder's next renewal
# report BROKEN.
BREAK = """
local base = string.sub(KEYS[1], 1, -3)
local freed = 0
for slot = 0, tonumber(redis.call('GET', KEYS[2]) or '1') - 1 do
  local key = slot == 0 and KEYS[1] or base .. 's' .. slot
  local value = redis.call('GET', key)
  if value then
    local left = redis.call('PTTL', key)
    redis.call('DEL', key)
    redis.call('SET', base .. 'b' .. slot, value, 'PX', math.max(left, 1))
    freed = freed + 1
  end
end
redis.call('SET', KEYS[3], '0', 'NX')  -- as in RELEASE
if freed > 0 then
  redis.call('DEL', base .. 'signal')
  for _ = 1, freed do redis.call('RPUSH', base .. 'signal', 1) end
  redis.call('PEXPIRE', base .. 'signal', 2000)  -- SIGNAL_MS
end
return freed
"""

# KEYS: slot keys. Returns value and PTTL of each ('' and -2 when gone).
READ = """
local found = {}
for i, key in ipairs(KEYS) do
  found[2 * i - 1] = redis.call('GET', key) or ''
  found[2 * i] = redis.call('PTTL', key)
end
return found
"""


class _Script(NamedTuple):
    text: bytes
    sha: bytes


def _script(text: str) -> _Script:
    return _Script(text.encode(), hashlib.sha1(text.encode()).hexdigest().encode())


def _bulk(arg: bytes) -> bytes:
    """One argument of a command in the Redis protocol."""
    return b"$%d\r\n%s\r\n" % (len(arg), arg)


def packed(*args: bytes) -> bytes:
    """A command in the Redis protocol (RESP), ready to send.

    Example:
        >>> packed(b"GET", b"k")
        b'*2\\r\\n$3\\r\\nGET\\r\\n$1\\r\\nk\\r\\n'
    """
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


def _evalsha(script: _Script, keys: Sequence[bytes], *args: bytes) -> bytes:
    return packed(b"EVALSHA", script.sha, b"%d" % len(keys), *keys, *args)


_ACQUIRE, _RENEW, _RELEASE, _BREAK, _READ = map(_script, (ACQUIRE, RENEW, RELEASE, BREAK, READ))


class _Keys(NamedTuple):
    """The keys of one name (see the module docstring)."""

    base: str
    slot0: str
    counter: str
    limit: str
    signal: str


def name_keys(prefix: str, name: str) -> _Keys:
    """The keys of `name` under the store prefix `prefix`.

    Example:
        >>> name_keys("tenure:", "jobs").slot0
        'tenure:{jobs-a7fc61ab40ee3e2bb1ba1b73ab0fc3a5}:s0'
    """
    base = f"{prefix}{{{safe_key(name)}}}:"
    return _Keys(base, base + "s0", base + "token", base + "limit", base + "signal")


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


class _Held(NamedTuple):
    """A lease this store granted and has not released, for reclaiming after a restart."""

    grant: Grant
    ttl: float
    deadline: float  # local, as the lease monitor computes it


@dataclass(frozen=True)
class Settings:
    """A Redis store's validated options; `url` is for redis-py, without tenure's options."""

    url: str = field(repr=False)  # may hold a password
    prefix: str
    timeout: float
    restart_grace: float
    driver: dict[str, Any]


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
    unknown = sorted(set(merged) - set(OPTIONS))
    if unknown:
        raise InvalidArgument(
            f"unknown option(s) {', '.join(unknown)} for redis:// stores; accepted: "
            f"{', '.join(OPTIONS)}")
    prefix = merged.pop("prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str):
        raise InvalidArgumentType(f"prefix must be a str, got {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix or len(prefix) > 200:
        raise InvalidArgument(
            f"prefix={prefix!r} is not allowed: at most 200 characters and no '{{' or '}}' "
            "(braces would change the keys' cluster hash tag); e.g. prefix='myapp:'")
    timeout = _seconds("timeout", merged.pop("timeout", DEFAULT_TIMEOUT), 600.0,
                       "it bounds every connect and every reply")
    grace = _seconds("restart_grace", merged.pop("restart_grace", DEFAULT_RESTART_GRACE),
                     3600.0, "0 turns it off (see the Redis store's docs)", zero=True)
    driver: dict[str, Any] = {}
    if "db" in merged:
        db = merged.pop("db")
        if isinstance(db, bool) or not (isinstance(db, int) or str(db).isdigit()):
            raise InvalidArgument(f"db={db!r} is not a database number; use e.g. db=0")
        driver["db"] = int(db)
    if merged and scheme != "rediss":
        raise InvalidArgument(
            f"option(s) {', '.join(sorted(merged))} are TLS settings: use a rediss:// URL")
    driver.update(merged)
    return Settings(f"{scheme}://{parts.netloc}{parts.path}", prefix, timeout, grace, driver)


def _seconds(option: str, value: object, most: float, why: str, zero: bool = False) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]  # anything else is refused below
    except (TypeError, ValueError):
        seconds = math.nan
    in_range = (seconds >= 0 if zero else seconds > 0) and seconds <= most
    if isinstance(value, bool) or not in_range:
        least = "0 or more" if zero else "more than 0"
        raise InvalidArgument(
            f"{option}={value!r} is out of range: give seconds, {least} and at most {most:g}; "
            f"{why}")
    return seconds


class AsyncRedisStore(AsyncBackend):
    """Leases in one Redis server (or Valkey, or another server with Redis's Lua scripting).

    Options, in the URL's query or as keywords (keywords win): `prefix` (default "tenure:"),
    `timeout` (seconds for connecting and for each reply, default 5), `restart_grace` (default
    2 s), `db`, and for rediss:// the TLS settings `ssl_ca_certs`, `ssl_certfile`,
    `ssl_keyfile`, `ssl_cert_reqs`, `ssl_check_hostname`. Nothing connects until the first call.

    Example::

        backend = AsyncRedisStore("redis://:secret@cache:6379/0", prefix="myapp:")
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0, notifies_release=True,
                                batched_renewal=True)

    def __init__(self, url: str, **options: Any) -> None:
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        self.url = redact(url)
        settings = parse_options(url, options)
        self.prefix, self.timeout = settings.prefix, settings.timeout
        self.restart_grace = settings.restart_grace
        self._grace = repr(self.restart_grace).encode()
        # redis-py retries a connection that broke once, at once (its default backs off for
        # seconds); a timeout is not retried: the caller's deadline rules.
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        try:
            self._pool = ConnectionPool.from_url(
                settings.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                health_check_interval=30, retry=retry, **settings.driver)
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"url {self.url!r} is not usable: {exc}") from None
        self._client = Redis(connection_pool=self._pool)
        self._pubsub: Callable[[], Any] = self._client.pubsub  # untyped in redis-py
        self._password = unquote(urlsplit(url).password or "")
        self._names: dict[str, _Keys] = {}
        self._tails: dict[tuple[str, str], str] = {}
        self._acquiring: dict[tuple[str, str, float, int], tuple[bytes, bytes]] = {}
        self._releasing: dict[str, bytes] = {}  # the RELEASE command up to the value, by key
        # Connections of the scripts: idle ones, and all (closed with the store).
        self._idle: list[Any] = []
        self._connections: list[Any] = []
        self._ids = itertools.count()
        self._id_prefix = secrets.token_hex(6)
        self._held: dict[str, _Held] = {}  # by lease id
        self._mutex = threading.Lock()
        self._reader: _shim.Background | None = None
        self._control = f"{self.prefix}control:{secrets.token_hex(8)}"
        self._closed = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- helpers ------------------------------------------------------------------------------

    def _keys(self, name: str) -> _Keys:
        keys = self._names.get(name)
        if keys is None:
            if len(self._names) >= 4096:
                self._names.clear()
            keys = self._names[name] = name_keys(self.prefix, name)
        return keys

    def _tail(self, holder: str, name: str) -> str:
        tail = self._tails.get((holder, name))
        if tail is None:
            if len(self._tails) >= 4096:
                self._tails.clear()
            tail = self._tails[holder, name] = f",{json.dumps(holder)},{json.dumps(name)}]"
        return tail

    def _value(self, grant: Grant) -> bytes:
        """What the slot key holds while `grant` is live."""
        tail = self._tail(grant.holder, grant.name)
        return f'["{grant.lease_id}",{grant.token}{tail}'.encode()

    def _acquire_command(self, name: str, holder: str, ttl: float,
                         limit: int) -> tuple[bytes, bytes]:
        """The ACQUIRE command of these arguments but the lease id, packed around it."""
        key = (name, holder, ttl, limit)
        around = self._acquiring.get(key)
        if around is None:
            if len(self._acquiring) >= 4096:
                self._acquiring.clear()
            keys = self._keys(name)
            names = [keys.slot0.encode(), keys.counter.encode()]
            if limit > 1:
                names.append(keys.limit.encode())
            before = _evalsha(_ACQUIRE, names, b"%d" % limit, b"%d" % int(ttl * 1000))
            before = b"*%d\r\n" % (len(names) + 8) + before.partition(b"\r\n")[2]
            after = _bulk(self._tail(holder, name).encode()) + _bulk(self._grace)
            around = self._acquiring[key] = (before, after)
        return around

    def _failure(self, operation: str, name: str, exc: Exception) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to do."""
        detail = str(exc) or type(exc).__name__
        if self._password:
            detail = detail.replace(self._password, "***")
        if isinstance(exc, AuthenticationError):
            hint = "check the user name and password in the URL (and the server's ACL)"
        elif isinstance(exc, ReadOnlyError):
            hint = "this server is a read-only replica: point the URL at the primary"
        elif isinstance(exc, ResponseError):
            hint = ("the server refused the command; check that it runs Redis 5 or later with "
                    f"Lua scripting, and that nothing else writes keys under {self.prefix!r}")
        else:
            hint = ("check that the server is running and reachable at this address, and the "
                    f"TLS settings; each call waits at most timeout={self.timeout:g} s")
        return StoreUnavailable(f"{self.url}: {operation} of {name!r} failed: {detail}; {hint}")

    def _closed_error(self) -> StoreUnavailable:
        return StoreUnavailable(f"{self.url}: the store is closed; connect again")

    async def _eval(self, script: _Script, command: bytes) -> Any:
        """Run a packed EVALSHA of `script`; first load the script if the server lacks it."""
        try:
            return await self._call(command)
        except NoScriptError:
            await self._call(packed(b"SCRIPT", b"LOAD", script.text))
            return await self._call(command)

    async def _call(self, command: bytes) -> Any:
        """Send one packed command and read its reply, on a connection of this store's own.

        Connections are redis-py's, used through their send/read API: its client API and pool
        cost about as much CPU again per command. A broken connection reconnects when used
        next; when one breaks mid-call, the idle ones are dropped too (a restart broke them
        all) and the command is sent once more (every script here is safe to repeat).
        """
        if self._closed:
            raise self._closed_error()
        for last_try in (False, True):
            try:
                connection = self._idle.pop()
            except IndexError:
                connection = self._new_connection()
            try:
                await connection.send_packed_command((command,))
                reply = await connection.read_response()
            except ResponseError:
                self._idle.append(connection)  # the error reply was read whole
                raise
            except RedisConnectionError:
                await connection.disconnect()
                self._idle.append(connection)
                if last_try or self._closed:
                    raise
                stale, self._idle = self._idle, []
                for other in stale:
                    await other.disconnect()
                self._idle.extend(stale)
                continue
            except BaseException:  # a timeout, a cancellation: its reply may still come
                with _shim.shielded():
                    await connection.disconnect()
                self._idle.append(connection)
                raise
            self._idle.append(connection)
            if self._closed:
                await connection.disconnect()
            return reply
        raise AssertionError("unreachable")

    def _new_connection(self) -> Any:
        connection = self._pool.connection_class(**self._pool.connection_kwargs)
        with self._mutex:
            self._connections.append(connection)
        return connection

    # -- leases -------------------------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        before, after = self._acquire_command(name, holder, ttl, limit)
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        sent_at = _shim.monotonic()
        try:
            granted = await self._eval(
                _ACQUIRE, before + _bulk(f'["{lease_id}",'.encode()) + after)
        except (RedisError, OSError) as exc:
            raise self._failure("acquire", name, exc) from exc
        if granted is None:
            return None
        if limit == 1:
            grant = Grant(name, 0, holder, lease_id, granted, self._keys(name).slot0)
        else:
            slot, token = granted
            key = f"{self._keys(name).base}s{slot}"
            grant = Grant(name, slot, holder, lease_id, int(token), key)
        self._held[lease_id] = _Held(grant, ttl, local_deadline(sent_at, ttl))
        reader = self._reader
        if reader is None or not reader.alive():
            self._start_reader()
        return grant

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        sent_at = _shim.monotonic()
        command = _evalsha(_RENEW, [grant.key.encode() for grant in grants],
                           b"%d" % int(ttl * 1000), *map(self._value, grants))
        try:
            answers = await self._eval(_RENEW, command)
        except (RedisError, OSError) as exc:
            label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
            raise self._failure("renewal", label, exc) from exc
        deadline = local_deadline(sent_at, ttl)
        results: list[Grant | LostReason] = []
        for grant, answer in zip(grants, answers, strict=True):
            if answer == 1:
                if grant.lease_id in self._held:
                    self._held[grant.lease_id] = _Held(grant, ttl, deadline)
                results.append(grant)
            else:
                self._held.pop(grant.lease_id, None)
                results.append(_LOST[answer])
        return results

    async def release(self, grant: Grant) -> bool:
        before = self._releasing.get(grant.key)
        if before is None:
            if len(self._releasing) >= 4096:
                self._releasing.clear()
            keys = [grant.key.encode(), self._keys(grant.name).counter.encode()]
            before = self._releasing[grant.key] = b"*6\r\n" + _evalsha(
                _RELEASE, keys).partition(b"\r\n")[2]
        try:
            freed = await self._eval(_RELEASE, before + _bulk(self._value(grant)))
        except (RedisError, OSError) as exc:
            raise self._failure("release", grant.name, exc) from exc
        self._held.pop(grant.lease_id, None)
        return bool(freed)

    async def break_lease(self, name: str) -> int:
        keys = self._keys(name)
        command = _evalsha(_BREAK, [keys.slot0.encode(), keys.limit.encode(),
                                    keys.counter.encode()])
        try:
            freed = await self._eval(_BREAK, command)
        except (RedisError, OSError) as exc:
            raise self._failure("break", name, exc) from exc
        return int(freed)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        if self._closed:
            raise self._closed_error()
        pattern = f"{_glob_escape(self.prefix)}{{{safe_key_prefix(prefix)}*}}:s[0-9]*"
        found: list[LeaseInfo] = []
        try:
            keys: list[bytes] = []
            async for key in self._client.scan_iter(match=pattern, count=1000):
                keys.append(key)
            for start in range(0, len(keys), 1000):
                chunk = keys[start:start + 1000]
                read = await self._eval(_READ, _evalsha(_READ, chunk))
                now = datetime.now(timezone.utc)
                for key, value, left in zip(chunk, read[::2], read[1::2], strict=True):
                    info = _lease_info(key, value, left, now)
                    if info is not None and info.name.startswith(prefix):
                        found.append(info)
        except (RedisError, OSError) as exc:
            raise self._failure("listing", prefix, exc) from exc
        return sorted(found, key=lambda info: (info.name, info.slot))

    # -- waiting and restarts -----------------------------------------------------------------

    async def wait_released(self, name: str, timeout: float) -> None:
        """Block in BLPOP on the name's signal list: a release pushes one item, so one waiter
        wakes at once, and a release just before the wait is not missed (the item stays 2 s).
        Each BLPOP lasts at most half the store's timeout (a reply must come within it)."""
        deadline = _shim.monotonic() + timeout
        key = self._keys(name).signal.encode()
        while not self._closed:
            left = deadline - _shim.monotonic()
            if left <= 0:
                return
            seconds = max(0.001, min(left, self.timeout / 2))
            try:
                if await self._call(packed(b"BLPOP", key, b"%.3f" % seconds)) is not None:
                    return
            except (RedisError, OSError):  # e.g. the server is down: poll like other stores
                if not self._closed:
                    await _shim.sleep(max(0.0, deadline - _shim.monotonic()))
                return

    def _start_reader(self) -> None:
        with self._mutex:
            if not self._closed and (self._reader is None or not self._reader.alive()):
                self._reader = _shim.spawn(self._listen, "tenure-redis-reader")

    async def _listen(self) -> None:
        """The reader, from the store's first grant on: a pub/sub connection subscribed to a
        channel of its own, only to learn at once when the connection drops. Each time it is
        (re)established, every lease held is renewed: after a restart that lost the server's
        data, this writes the leases back (see RENEW) within the restart grace, before anyone
        else can be granted them."""
        delay = 0.05
        while not self._closed:
            try:
                async with self._pubsub() as pubsub:
                    await pubsub.subscribe(self._control)
                    while not self._closed:
                        message = await pubsub.get_message(timeout=TICK)
                        if message is not None and message["type"] == "subscribe":
                            await self._reclaim()  # (re)connected, maybe to a new server
                        self._live()
                        delay = 0.05
            except Exception as exc:  # the reader must outlive any failure
                if self._closed:
                    return
                log.debug("tenure: redis reader interrupted: %s", exc)
            await _shim.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)

    async def _reclaim(self) -> None:
        """Renew every lease held now, in one call per ttl (see RENEW)."""
        by_ttl: dict[float, list[Grant]] = {}
        for held in self._live():
            by_ttl.setdefault(held.ttl, []).append(held.grant)
        for ttl, grants in by_ttl.items():
            try:
                await self.renew(grants, ttl)
            except StoreUnavailable as exc:  # the lease monitor retries on its own
                log.debug("tenure: could not renew leases after reconnecting: %s", exc)

    def _live(self) -> list[_Held]:
        """Leases held now; those past their deadline (never released) are forgotten."""
        now = _shim.monotonic()
        live = []
        for lease_id, held in list(self._held.items()):
            if held.deadline > now:
                live.append(held)
            else:
                self._held.pop(lease_id, None)
        return live

    async def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            connections, self._connections, self._idle = self._connections, [], []
        if self._reader is not None:
            self._reader.stop()
        for connection in connections:
            await connection.disconnect()
        await self._pool.disconnect()


def _lease_info(key: bytes, value: bytes, left: int, now: datetime) -> LeaseInfo | None:
    """A LeaseInfo from a slot key's value and PTTL; None when gone or not tenure's."""
    try:
        _, token, holder, name = json.loads(value)
        slot = int(key.rpartition(b":s")[2])
    except (ValueError, TypeError):
        return None
    if left < 0 or not isinstance(name, str) or not isinstance(holder, str):
        return None
    return LeaseInfo(name, holder, int(token), now + timedelta(milliseconds=left), slot)
