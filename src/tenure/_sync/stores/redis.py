# GENERATED from src/tenure/_async/stores/redis.py by scripts/unasync.py: do not edit.
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
    <prefix>{<tag>}:x<id>     left by UNDO_ACQUIRE (for the ttl) when it found nothing to free:
                              an ACQUIRE of lease id <id> still on its way takes nothing
    <prefix>{<tag>}:record    the name's record (records API): JSON [name, token, seq, record];
                              never expires, written only while the writer's lease is live

Acquire, release and break are each ONE server-side Lua script (EVALSHA; the script is loaded
when the server lacks it), and so is the renewal of every lease the process holds, in one call.
A token is max(counter + 1, the server's TIME in microseconds): tokens keep growing when the
server loses its data (no persistence) or fails over to a replica that missed increments, as
long as the server's clock does not step back. Waiters block in BLPOP on the name's signal list.
After a restart that lost the data, holders write their leases back (one pub/sub connection per
store notices the restart at once), while the server grants no new name for `restart_grace`
seconds. Several masters with a quorum (`redis://a,b,c?quorum=2`) are in redis_quorum.py, built
on one store of this module per master. See docs/stores/redis.md.

Example::

    store = tenure.connect("redis://cache.internal:6379/0?prefix=myapp:")
    store = tenure.connect(tenure.stores.RedisStore(client=redis.Redis(), prefix="myapp:"))
"""

from __future__ import annotations

import contextlib
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

from tenure._sync import _shim
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    record_bytes,
    subject,
)
from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreRefused,
    StoreUnavailable,
)
from tenure._forks import in_child_after_fork
from tenure._names import safe_key, safe_key_prefix
from tenure._timing import fresh_for, local_deadline
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import redact

try:
    from redis import ConnectionPool, Redis
    from redis.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import (
        AuthenticationError,
        AuthorizationError,
        NoPermissionError,
        NoScriptError,
        ReadOnlyError,
        RedisError,
        ResponseError,
    )
    from redis.exceptions import ConnectionError as RedisConnectionError
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("the redis:// store needs redis-py: install tenure[redis] "
                       "(pip install 'tenure[redis]')") from exc

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
# Redis ends a blocking command whose time ran out up to 1/hz late (hz is 10 by default): the
# last wait before an acquire's deadline blocks this much less, and not at all when it has less.
SERVER_TIMER_SLACK = 0.1
# The reader looks for dropped leases (and whether the store closed) this often at least.
TICK = 0.5
# The reader reconnects after a failure within this long (the restart grace must exceed it).
RECONNECT_MAX = 0.25
# The URL schemes this store serves (several masters: the quorum store of redis_quorum.py).
SCHEMES: tuple[str, ...] = ("redis", "rediss", "unix")


def from_url(url: str, **options: Any) -> Backend:
    """The store for a `redis://`, `rediss://` or `unix://` URL, as `tenure.connect` builds
    it: one server, or a quorum of masters when the URL names several (comma-separated).

    Example::

        backend = from_url("redis://cache:6379/0?prefix=app:", timeout=2)
        quorum = from_url("redis://r1:6379,r2:6379,r3:6379/0")  # RedisQuorumStore
    """
    from tenure._sync.stores.redis_quorum import open_store  # it builds on this module

    return open_store(url, **options)


# Renewal answers of the RENEW script.
_LOST = {0: LostReason.EXPIRED, 2: LostReason.TAKEN, 3: LostReason.BROKEN}

# KEYS: slot 0, counter, and for a semaphore its highest limit. ARGV: limit, ttl ms, value head
# '["<lease id>",', value tail ',"<holder>","<name>"]', restart grace s. Takes the first free
# slot; returns the token for a lock, {slot, token} for a semaphore, false when all are held
# (or when UNDO_ACQUIRE of this lease id came first).
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
-- a request that was given up before it ran (see UNDO_ACQUIRE) takes nothing
if redis.call('EXISTS', base .. 'x' .. string.sub(head, 3, -3)) == 1 then return false end
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

# ACQUIRE for a waiter, sent right behind its BLMOVE of the name's signal list into a list of the
# waiter's store's own (the last key): it runs as soon as a release woke the waiter, in the same
# server turn, and only then (-1 when the BLMOVE timed out).
WAKE_ACQUIRE = "if not redis.call('LPOP', KEYS[#KEYS]) then return -1 end\n" + ACQUIRE
# The same behind the last BLMOVE of a wait: it acquires whether or not a release woke the
# waiter (a wait ends with a try), and saves the try's own round trip.
LAST_ACQUIRE = "redis.call('LPOP', KEYS[#KEYS])\n" + ACQUIRE

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

# KEYS: slot 0. ARGV: limit, value head '["<lease id>",', ttl ms. Frees the slot an ACQUIRE of
# this lease id took, if any, and wakes a waiter (its caller gave up on the answer: cancelled,
# or timed out); when it took none, leaves the mark `x<lease id>` for the ttl, so that the
# ACQUIRE takes nothing if it is still on its way (on another connection, it may come second).
UNDO_ACQUIRE = """
local limit, head = tonumber(ARGV[1]), ARGV[2]
local base = string.sub(KEYS[1], 1, -3)
for slot = 0, limit - 1 do
  local key = slot == 0 and KEYS[1] or base .. 's' .. slot
  local value = redis.call('GET', key)
  if value and string.sub(value, 1, #head) == head then
    redis.call('DEL', key)
    local signal = base .. 'signal'
    if redis.call('RPUSH', signal, 1) > 1 then redis.call('LTRIM', signal, -1, -1) end
    redis.call('PEXPIRE', signal, 2000)  -- SIGNAL_MS
    return 1
  end
end
redis.call('SET', base .. 'x' .. string.sub(head, 3, -3), '1', 'PX', ARGV[3])
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

# KEYS: counter. ARGV: a token. Raises the counter to the token when it is behind (quorum mode:
# every master that granted a lease learns the lease's token, the largest of their counters).
RAISE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
"""

# KEYS: slot key. ARGV: the lease's value, the value with another token. Gives a live lease
# another token, keeping its expiry (quorum mode: a master's late grant joins its lease with the
# lease's token); 1 when done.
RETOKEN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', math.max(redis.call('PTTL', KEYS[1]), 1))
return 1
"""

# KEYS: slot key, record. ARGV: the lease's value, the new record. Writes only while the lease is
# live; 1 when written.
WRITE_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

# As WRITE_RECORD, for the quorum store: returns the record it replaced ('' when none), or nil
# when the lease is not live, so a write that misses its quorum can be undone.
SWAP_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return nil end
local old = redis.call('GET', KEYS[2]) or ''
redis.call('SET', KEYS[2], ARGV[2])
return old
"""

# KEYS: record. ARGV: the record written, the one it replaced. Puts the old one back unless the
# record changed since.
UNDO_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
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


(_ACQUIRE, _RENEW, _RELEASE, _BREAK, _READ, _RAISE, _WAKE_ACQUIRE, _LAST_ACQUIRE, _WRITE_RECORD,
 _SWAP_RECORD, _UNDO_RECORD, _UNDO_ACQUIRE, _RETOKEN) = map(_script, (
     ACQUIRE, RENEW, RELEASE, BREAK, READ, RAISE, WAKE_ACQUIRE, LAST_ACQUIRE, WRITE_RECORD,
     SWAP_RECORD, UNDO_RECORD, UNDO_ACQUIRE, RETOKEN))


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
        'tenure:{jobs-65177a560cada1f767891398e66c46de}:s0'
    """
    base = f"{prefix}{{{safe_key(name)}}}:"
    return _Keys(base, base + "s0", base + "token", base + "limit", base + "signal")


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


class _Undo(NamedTuple):
    """What an ACQUIRE of a lease id may take, to free it if its answer is given up on."""

    name: str
    head: bytes  # '["<lease id>",'
    ttl: float
    limit: int


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
    prefix, timeout, grace = _own_options(merged, OPTIONS, "redis:// stores")
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
    return Settings(f"{scheme}://{parts.netloc}{parts.path}", prefix, timeout or DEFAULT_TIMEOUT,
                    grace, driver)


def _own_options(merged: dict[str, Any], accepted: Sequence[str],
                 where: str) -> tuple[str, float | None, float]:
    """Pop and check tenure's own options: prefix, timeout (None when not given), grace."""
    unknown = sorted(set(merged) - set(accepted))
    if unknown:
        raise InvalidArgument(
            f"unknown option(s) {', '.join(unknown)} for {where}; accepted: "
            f"{', '.join(accepted)}")
    prefix = merged.pop("prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str):
        raise InvalidArgumentType(f"prefix must be a str, got {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix or len(prefix) > 200:
        raise InvalidArgument(
            f"prefix={prefix!r} is not allowed: at most 200 characters and no '{{' or '}}' "
            "(braces would change the keys' cluster hash tag); e.g. prefix='myapp:'")
    timeout = None if "timeout" not in merged else _seconds(
        "timeout", merged.pop("timeout"), 600.0, "it bounds every connect and every reply")
    grace = _seconds("restart_grace", merged.pop("restart_grace", DEFAULT_RESTART_GRACE),
                     3600.0, "0 turns it off (see the Redis store's docs)", zero=True)
    return prefix, timeout, grace


def _checked_client(client: object, url: object) -> Any:
    """`client` when it is a client of this API's kind (redis.Redis for tenure.aio,
    redis.Redis for tenure) and no URL came with it."""
    if url is not None:
        raise InvalidArgument(
            "give either a URL or client=, not both: the client already says where the server "
            "is; e.g. tenure.connect(tenure.stores.RedisStore(client=my_client, prefix='app:'))")
    if not isinstance(client, Redis):
        raise InvalidArgumentType(
            f"client must be a {Redis.__module__}.{Redis.__name__} for this store, got "
            f"{type(client).__module__}.{type(client).__name__}: tenure.stores.RedisStore takes "
            "a redis.Redis, tenure.aio.stores.RedisStore a redis.Redis (Redis "
            "Cluster clients are not supported)")
    return client


def _client_address(kwargs: dict[str, Any]) -> str:
    """Where a client's connections go, for messages (never its password)."""
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}?db={db} (client)"
    if kwargs.get("host"):
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{db} (client)"
    return "redis:// (client)"


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


def _refusal(exc: BaseException) -> str | None:
    """What to fix when a Redis error is permanent; None when it is transient (a timeout, a
    refused or reset connection, a server loading or failing over)."""
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


class RedisStore(Backend, RecordKeeper):
    """Leases in one Redis server (or Valkey, or another server with Redis's Lua scripting).

    Options, in the URL's query or as keywords (keywords win): `prefix` (default "tenure:"),
    `timeout` (seconds for connecting and for each reply, default 5), `restart_grace` (default
    2 s), `db`, and for rediss:// the TLS settings `ssl_ca_certs`, `ssl_certfile`,
    `ssl_keyfile`, `ssl_cert_reqs`, `ssl_check_hostname`. Nothing connects until the first call.

    Example::

        backend = RedisStore("redis://:secret@cache:6379/0", prefix="myapp:")
        store = tenure.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0, notifies_release=True,
                                batched_renewal=True)

    def __init__(self, url: str | None = None, *, client: Redis | None = None,
                 **options: Any) -> None:
        # redis-py retries a connection that broke once, at once (its default backs off for
        # seconds); a timeout is not retried: the caller's deadline rules.
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        if client is not None:
            self._client = _checked_client(client, url)
            self._pool, self._owns_pool = self._client.connection_pool, False
            self.prefix, timeout, self.restart_grace = _own_options(
                dict(options), ("prefix", "timeout", "restart_grace"),
                "a store made from a client (its other settings are the client's)")
            kwargs = dict(self._pool.connection_kwargs)
            self.url = _client_address(kwargs)
            self._password = str(kwargs.get("password") or "")
            # The scripts' connections: the client's settings, but raw replies and tenure's
            # retry; `timeout` replaces the client's socket timeouts when given.
            # A client without a socket timeout (redis-py's default) would wait forever on a
            # silent path: the store's connections get the default timeout then.
            self.timeout = timeout or float(kwargs.get("socket_timeout") or DEFAULT_TIMEOUT)
            kwargs.update(decode_responses=False, retry=retry, socket_timeout=self.timeout)
            if timeout is not None or not kwargs.get("socket_connect_timeout"):
                kwargs.update(socket_connect_timeout=self.timeout)
        else:
            if not isinstance(url, str):
                raise InvalidArgumentType(
                    f"url must be a str such as 'redis://cache:6379/0' (or pass client=), got "
                    f"{type(url).__name__}")
            self.url = redact(url)
            settings = parse_options(url, options)
            self.prefix, self.timeout = settings.prefix, settings.timeout
            self.restart_grace = settings.restart_grace
            try:
                self._pool = ConnectionPool.from_url(
                    settings.url, socket_timeout=self.timeout,
                    socket_connect_timeout=self.timeout, health_check_interval=30, retry=retry,
                    **settings.driver)
            except (ValueError, TypeError) as exc:
                raise InvalidArgument(f"url {self.url!r} is not usable: {exc}") from None
            self._client, self._owns_pool = Redis(connection_pool=self._pool), True
            self._password = unquote(urlsplit(url).password or "")
            kwargs = self._pool.connection_kwargs
        self._connection_kwargs: dict[str, Any] = kwargs
        self._grace = repr(self.restart_grace).encode()
        self._pubsub: Callable[[], Any] = self._client.pubsub  # untyped in redis-py
        self._names: dict[str, _Keys] = {}
        self._tails: dict[tuple[str, str], str] = {}
        self._acquiring: dict[tuple[str, str, float, int, _Script], tuple[bytes, bytes]] = {}
        self._blmove = True  # False once the server turned BLMOVE down (Redis before 6.2)
        self._releasing: dict[str, bytes] = {}  # the RELEASE command up to the value, by key
        # Connections of the scripts: idle ones, and all (closed with the store).
        self._idle: list[Any] = []
        self._connections: list[Any] = []
        self._ids = itertools.count()
        self._writes = itertools.count()  # orders records written under one lease
        self._id_prefix = secrets.token_hex(6)
        self._held: dict[str, _Held] = {}  # by lease id
        self._mutex = threading.Lock()
        self._reader: _shim.Background | None = None
        self._control = f"{self.prefix}control:{secrets.token_hex(8)}"
        self._closed = False
        in_child_after_fork(self, RedisStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a forked child: the parent's connections and leases are not this
        process's. Forget them without a word on their sockets (redis-py shuts a socket down
        only in the process that opened it), and connect afresh, from a pool of the store's
        own (a client's pool may hand out the parent's connections), on next use."""
        self._pool = ConnectionPool(connection_class=self._pool.connection_class,
                                    **self._connection_kwargs)
        self._client, self._owns_pool = Redis(connection_pool=self._pool), True
        self._pubsub = self._client.pubsub
        self._idle, self._connections = [], []
        self._held = {}
        self._reader = None
        self._mutex = threading.Lock()
        # Lease ids of its own: siblings forked from one parent would otherwise send the same
        # ids, and ACQUIRE takes a slot holding its own id for a retry of its own request.
        self._id_prefix = secrets.token_hex(6)
        self._acquiring = {}  # commands built around the old prefix (the waiter's wake key)
        self._control = f"{self.prefix}control:{secrets.token_hex(8)}"

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

    def _acquire_command(self, name: str, holder: str, ttl: float, limit: int,
                         script: _Script = _ACQUIRE) -> tuple[bytes, bytes]:
        """The ACQUIRE (or WAKE_ACQUIRE, LAST_ACQUIRE) command of these arguments but the lease
        id, packed around it."""
        key = (name, holder, ttl, limit, script)
        around = self._acquiring.get(key)
        if around is None:
            if len(self._acquiring) >= 4096:
                self._acquiring.clear()
            keys = self._keys(name)
            names = [keys.slot0.encode(), keys.counter.encode()]
            if limit > 1:
                names.append(keys.limit.encode())
            if script is not _ACQUIRE:
                names.append(self._wake_key(name))
            before = _evalsha(script, names, b"%d" % limit, b"%d" % int(ttl * 1000))
            before = b"*%d\r\n" % (len(names) + 8) + before.partition(b"\r\n")[2]
            after = _bulk(self._tail(holder, name).encode()) + _bulk(self._grace)
            around = self._acquiring[key] = (before, after)
        return around

    def _failure(self, operation: str, name: str, exc: Exception) -> StoreUnavailable:
        """One clear error for a driver failure: what was tried, what went wrong, what to do;
        StoreRefused when retrying cannot clear it (see `_refusal`)."""
        if isinstance(exc, StoreRefused):  # the store is closed: already says so
            return StoreRefused(str(exc))
        detail = str(exc).rstrip(".") or type(exc).__name__
        # A password of a few characters would mangle the address and numbers it occurs in
        # (drivers never echo one; the URL itself is redacted by its structure).
        if len(self._password) >= 4:
            detail = detail.replace(self._password, "***")
        fix = _refusal(exc)
        if fix is not None:
            return StoreRefused(f"{self.url}: {subject(operation, name)} refused: {detail}; {fix}")
        if isinstance(exc, ReadOnlyError):
            hint = ("this server is a read-only replica (or failing over): point the URL at the "
                    "primary")
        elif isinstance(exc, ResponseError):
            hint = ("the server refused the command; check that it runs Redis 5 or later with "
                    f"Lua scripting, and that nothing else writes keys under {self.prefix!r}")
        else:
            hint = ("check that the server is running and reachable at this address, and the "
                    f"TLS settings; each call waits at most timeout={self.timeout:g} s")
        return StoreUnavailable(f"{self.url}: {subject(operation, name)} failed: {detail}; {hint}")

    def _closed_error(self) -> StoreRefused:
        return closed_store(self.url)

    def _eval(self, script: _Script, command: bytes, undo: _Undo | None = None) -> Any:
        """Run a packed EVALSHA of `script`; first load the script if the server lacks it."""
        try:
            return self._call(command, undo=undo)
        except NoScriptError:
            self._call(packed(b"SCRIPT", b"LOAD", script.text))
            return self._call(command, undo=undo)

    def _call(self, command: bytes, replies: int = 1, undo: _Undo | None = None) -> Any:
        """Send one packed command and read its reply, on a connection of this store's own.

        Connections are redis-py's, used through their send/read API: its client API and pool
        cost about as much CPU again per command. A broken connection reconnects when used
        next; when one breaks mid-call, the idle ones are dropped too (a restart broke them
        all) and the command is sent once more (every script here is safe to repeat).

        `undo`: what an acquire sent took, to free when its answer is given up on (cancelled,
        timed out, broken) after it may have reached the server; see _finish and _undo_soon.
        """
        if self._closed:
            raise self._closed_error()
        for last_try in (False, True):
            try:
                connection = self._idle.pop()
            except IndexError:
                connection = self._new_connection()
            sent, reply = False, []
            try:
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
                if last_try or self._closed:
                    if undo is not None:
                        self._undo_soon(*undo)
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
                    self._undo_soon(*undo)
                raise
            self._idle.append(connection)
            if self._closed:
                connection.disconnect()
            return reply
        raise AssertionError("unreachable")

    def _finish(self, connection: Any, replies: int, undo: _Undo) -> None:
        """Free what a cancelled acquire took: UNDO_ACQUIRE sent on the request's own
        connection, which Redis runs right after the request (one connection's commands run in
        order), then the answers of both read, and the connection used again."""
        try:
            connection.send_packed_command((self._undo_command(*undo),))
            for _ in range(replies + 1):
                _reply_or_error(connection)
        except Exception as exc:  # the path broke too: from another connection, then
            log.debug("tenure: could not undo a cancelled acquire on its connection: %s", exc)
            connection.disconnect()
            self._undo_soon(*undo)
        self._idle.append(connection)

    def _new_connection(self) -> Any:
        connection = self._pool.connection_class(**self._connection_kwargs)
        with self._mutex:
            self._connections.append(connection)
        return connection

    # -- leases -------------------------------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        return self.acquire_as(f"{self._id_prefix}{next(self._ids)}", name, holder, ttl,
                                     limit)

    def acquire_as(self, lease_id: str, name: str, holder: str, ttl: float,
                         limit: int) -> Grant | None:
        """try_acquire with the caller's lease id (a quorum gives one id on every master).

        Example::

            grant = backend.acquire_as("q1-7", "jobs", "web-1", 30.0, 1)
        """
        before, after = self._acquire_command(name, holder, ttl, limit)
        head = f'["{lease_id}",'.encode()
        sent_at = _shim.monotonic()
        try:
            granted = self._eval(_ACQUIRE, before + _bulk(head) + after,
                                       _Undo(name, head, ttl, limit))
        except (RedisError, OSError) as exc:
            raise self._failure("acquire", name, exc) from exc
        return self._granted(granted, sent_at, lease_id, name, holder, ttl, limit)

    def _undo_command(self, name: str, head: bytes, ttl: float, limit: int) -> bytes:
        # EVAL, not EVALSHA: rare, and maybe on a new connection, where round trips count.
        return packed(b"EVAL", _UNDO_ACQUIRE.text, b"1", self._keys(name).slot0.encode(),
                      b"%d" % limit, head, b"%d" % max(1, int(ttl * 1000)))

    def _undo_soon(self, name: str, head: bytes, ttl: float, limit: int) -> None:
        """Free, in the background and on another connection, what an ACQUIRE whose answer
        was given up on (timed out, broken) took.

        Disconnecting the request's connection first is not enough: the request may still be
        on its way (a retransmission, a proxy), and Redis may serve the undo's connection
        first. So UNDO_ACQUIRE leaves a mark when it finds nothing, and the ACQUIRE takes
        nothing when it finds the mark: whichever comes second, nothing is held.
        """
        _shim.start_soon(self._undo, name, self._undo_command(name, head, ttl, limit))

    def _undo(self, name: str, command: bytes) -> None:
        try:
            self._call(command)
        except Exception as exc:  # best effort (the store may be closing): else it expires
            log.debug("tenure: could not undo an unanswered acquire of %r: %s", name, exc)

    def _granted(self, granted: Any, sent_at: float, lease_id: str, name: str, holder: str,
                 ttl: float, limit: int) -> Grant | None:
        """The Grant of an ACQUIRE's reply (None when refused), remembered for reclaiming."""
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

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        sent_at = _shim.monotonic()
        command = _evalsha(_RENEW, [grant.key.encode() for grant in grants],
                           b"%d" % int(ttl * 1000), *map(self._value, grants))
        try:
            answers = self._eval(_RENEW, command)
        except (RedisError, OSError) as exc:
            label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
            raise self._failure("renewal", label, exc) from exc
        deadline = local_deadline(sent_at, ttl)
        results: list[Grant | LostReason] = []
        for grant, answer in zip(grants, answers, strict=True):
            if answer == 1 and grant.lease_id in self._held:
                self._held[grant.lease_id] = _Held(grant, ttl, deadline)
                results.append(grant)
            elif answer == 1:
                # Released (or given up) while this renewal was on its way: a renewal sent
                # again after a restart that lost the data may have written it back. Free it.
                with contextlib.suppress(StoreUnavailable):
                    self.release(grant)
                results.append(LostReason.EXPIRED)
            else:
                self._held.pop(grant.lease_id, None)
                results.append(_LOST[answer])
        return results

    def release(self, grant: Grant) -> bool:
        before = self._releasing.get(grant.key)
        if before is None:
            if len(self._releasing) >= 4096:
                self._releasing.clear()
            keys = [grant.key.encode(), self._keys(grant.name).counter.encode()]
            before = self._releasing[grant.key] = b"*6\r\n" + _evalsha(
                _RELEASE, keys).partition(b"\r\n")[2]
        try:
            freed = self._eval(_RELEASE, before + _bulk(self._value(grant)))
        except (RedisError, OSError) as exc:
            raise self._failure("release", grant.name, exc) from exc
        self._held.pop(grant.lease_id, None)
        return bool(freed)

    def _release_quietly(self, grant: Grant) -> None:
        try:
            self.release(grant)
        except Exception as exc:  # best effort (the store may be closing): else it expires
            log.debug("tenure: could not release %r: %s", grant.name, exc)

    def raise_counter(self, name: str, token: int) -> None:
        """Raise the fencing counter of `name` to `token` where it is behind (quorum mode).

        Example::

            backend.raise_counter("jobs", 1_763_000_000_000_123)
        """
        keys = self._keys(name)
        command = _evalsha(_RAISE, [keys.counter.encode()], b"%d" % token)
        try:
            self._eval(_RAISE, command)
        except (RedisError, OSError) as exc:
            raise self._failure("fencing counter update", name, exc) from exc

    def retoken(self, grant: Grant, token: int) -> Grant | None:
        """The live `grant` with `token` instead of its own, its expiry kept (quorum mode: a
        master's late grant joins its lease); None when the lease is gone.

        Example::

            joined = backend.retoken(late_grant, lease.token)
        """
        new = grant._replace(token=token)
        command = _evalsha(_RETOKEN, [grant.key.encode()], self._value(grant), self._value(new))
        try:
            done = self._eval(_RETOKEN, command)
        except (RedisError, OSError) as exc:
            raise self._failure("joining a lease", grant.name, exc) from exc
        if not done:
            return None
        held = self._held.get(grant.lease_id)
        if held is not None:
            self._held[grant.lease_id] = held._replace(grant=new)
        return new

    def break_lease(self, name: str) -> int:
        keys = self._keys(name)
        command = _evalsha(_BREAK, [keys.slot0.encode(), keys.limit.encode(),
                                    keys.counter.encode()])
        try:
            freed = self._eval(_BREAK, command)
        except (RedisError, OSError) as exc:
            raise self._failure("break", name, exc) from exc
        return int(freed)

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        found = [info for _, info in self.listing(prefix)]
        return sorted(found, key=lambda info: (info.name, info.slot))

    def listing(self, prefix: str = "") -> list[tuple[str, LeaseInfo]]:
        """Live leases whose name starts with `prefix`, with their lease ids, unsorted.

        Example::

            [(lease_id, info)] = backend.listing("jobs")
        """
        if self._closed:
            raise self._closed_error()
        pattern = f"{_glob_escape(self.prefix)}{{{safe_key_prefix(prefix)}*}}:s[0-9]*"
        found: list[tuple[str, LeaseInfo]] = []
        try:
            for chunk in self._scan(pattern):
                read = self._eval(_READ, _evalsha(_READ, chunk))
                now = datetime.now(timezone.utc)
                for key, value, left in zip(chunk, read[::2], read[1::2], strict=True):
                    entry = _lease_entry(key, value, left, now)
                    if entry is not None and entry[1].name.startswith(prefix):
                        found.append(entry)
        except (RedisError, OSError) as exc:
            raise self._failure("listing", prefix, exc) from exc
        return found

    # -- records ------------------------------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        """The record last written next to `name` (kept across releases), or None.

        Example::

            last = backend.read_record("nightly-report")
        """
        found = self.read_versioned_record(name)
        return None if found is None else found[1]

    def read_versioned_record(self, name: str) -> tuple[tuple[int, int], str] | None:
        """The record of `name` with its version (the writer's token, then its write count).

        Example::

            version, record = backend.read_versioned_record("nightly")
        """
        try:
            value = self._call(packed(b"GET", f"{self._keys(name).base}record".encode()))
        except (RedisError, OSError) as exc:
            raise self._failure("reading the record", name, exc) from exc
        parsed = _record_entry(value)
        return None if parsed is None else parsed[1:]

    def write_record(self, grant: Grant, record: str) -> bool:
        """Replace the record of `grant.name`, in one script, only while `grant` is live.

        Example::

            written = backend.write_record(grant, '{"done": "2026-11-23"}')
        """
        record_bytes(record)
        value = json.dumps([grant.name, grant.token, next(self._writes), record],
                           ensure_ascii=False)
        command = _evalsha(_WRITE_RECORD, [grant.key.encode(),
                                           f"{self._keys(grant.name).base}record".encode()],
                           self._value(grant), value.encode())
        try:
            return bool(self._eval(_WRITE_RECORD, command))
        except (RedisError, OSError) as exc:
            raise self._failure("writing the record", grant.name, exc) from exc

    def write_versioned_record(self, grant: Grant, record: str,
                                     version: tuple[int, int]) -> bytes | None:
        """write_record with the record's version (the token of the lease that wrote it, then a
        count that orders the writes under that lease), for the quorum store: returns what
        `undo_record` needs to take the write back (None: not written, the lease is gone).

        Example::

            undo = backend.write_versioned_record(grant, "2026-11-23", (42, 0))
        """
        record_bytes(record)
        value = json.dumps([grant.name, *version, record], ensure_ascii=False).encode()
        command = _evalsha(_SWAP_RECORD, [grant.key.encode(),
                                          f"{self._keys(grant.name).base}record".encode()],
                           self._value(grant), value)
        try:
            previous = self._eval(_SWAP_RECORD, command)
        except (RedisError, OSError) as exc:
            raise self._failure("writing the record", grant.name, exc) from exc
        return None if previous is None else value + b"\n" + previous

    def undo_record(self, name: str, undo: bytes) -> None:
        """Put back the record a `write_versioned_record` replaced, unless written since.

        Example::

            backend.undo_record("nightly", undo)
        """
        written, _, previous = undo.partition(b"\n")
        command = _evalsha(_UNDO_RECORD, [f"{self._keys(name).base}record".encode()], written,
                           previous)
        try:
            self._eval(_UNDO_RECORD, command)
        except (RedisError, OSError) as exc:
            raise self._failure("undoing a record write", name, exc) from exc

    def records(self, prefix: str = "") -> dict[str, str]:
        """Every record whose name starts with `prefix`, by name.

        Example::

            everything = backend.records("jobs/")
        """
        found = self.versioned_records(prefix)
        return {name: record for name, (_, record) in found.items()}

    def versioned_records(self, prefix: str = "") -> dict[str, tuple[tuple[int, int], str]]:
        """Every record whose name starts with `prefix`, with its version, by name.

        Example::

            found = backend.versioned_records("jobs/")
        """
        if self._closed:
            raise self._closed_error()
        pattern = f"{_glob_escape(self.prefix)}{{{safe_key_prefix(prefix)}*}}:record"
        found: dict[str, tuple[tuple[int, int], str]] = {}
        try:
            for chunk in self._scan(pattern):
                for value in self._call(packed(b"MGET", *chunk)):
                    entry = _record_entry(value)
                    if entry is not None and entry[0].startswith(prefix):
                        found[entry[0]] = entry[1:]
        except (RedisError, OSError) as exc:
            raise self._failure("listing the records", prefix, exc) from exc
        return found

    def _scan(self, pattern: str) -> list[list[bytes]]:
        """The keys matching `pattern`, in chunks of at most 1,000."""
        keys: list[bytes] = []
        cursor = b"0"
        while True:
            cursor, batch = self._call(
                packed(b"SCAN", cursor, b"MATCH", pattern.encode(), b"COUNT", b"1000"))
            keys.extend(batch)
            if cursor == b"0":
                return [keys[start:start + 1000] for start in range(0, len(keys), 1000)]

    # -- waiting and restarts -----------------------------------------------------------------

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Block on the name's signal list: a release pushes one item, so one waiter wakes at
        once, and a release just before the wait is not missed (the item stays 2 s). Each
        block lasts at most half the store's timeout (a reply must come within it). When the
        server cannot be reached, the wait is slept out (the next try says why).

        Example::

            backend.wait_released("jobs", 1.0)
        """
        deadline = _shim.monotonic() + timeout
        try:
            self.wait_signal(name, deadline)
        except (RedisError, OSError):  # e.g. the server is down: poll like other stores
            if not self._closed:
                _shim.sleep(max(0.0, deadline - _shim.monotonic()))

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait up to `timeout` seconds for a release of `name`, take a free slot in the same
        server turn as the wake-up (or at the end of the wait), and return the Grant taken, or
        None when every slot was still held (see _protocol.WaitAndAcquire). Without
        BLMOVE (Redis before 6.2), or when the server cannot be reached, it waits, then tries.

        Example::

            grant = backend.wait_and_acquire("jobs", "web-1", 30.0, 1, 0.5, 10.0)
        """
        deadline = _shim.monotonic() + timeout
        try:
            if self._blmove:
                tried, grant = self._wait_and_take(name, holder, ttl, limit, deadline,
                                                         timeout >= patience)
                if tried:
                    return grant
            if not self._blmove:  # (maybe learned just now)
                self.wait_signal(name, deadline)
        except (RedisError, OSError):  # e.g. the server is down: poll like other stores
            if not self._closed:
                _shim.sleep(max(0.0, deadline - _shim.monotonic()))
        return self.try_acquire(name, holder, ttl, limit)

    def _wait_and_take(self, name: str, holder: str, ttl: float, limit: int,
                             deadline: float, final: bool) -> tuple[bool, Grant | None]:
        """Wait for a release, and take the lease in the same server turn as the wake-up: a
        BLMOVE of the signal list into this store's own list, with WAKE_ACQUIRE pipelined right
        behind it (LAST_ACQUIRE behind the last BLMOVE: a wait ends with a try). (True, what
        the acquire took) once one ran; (False, None) when none did (the server has no BLMOVE,
        or the store closed). Each block lasts at most half the store's timeout, and short
        enough that a grant is still fresh (tenure._timing.fresh_for): the lease's deadline
        counts from when the BLMOVE was sent. The `final` wait of an acquire (its caller gives
        up at its end) ends on time: its blocks end SERVER_TIMER_SLACK early, and its last
        moment is slept out here, and the try left to the caller."""
        keys = self._keys(name)
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        head = f'["{lease_id}",'.encode()
        longest = min(self.timeout / 2, fresh_for(ttl) / 2)
        slack = SERVER_TIMER_SLACK if final else 0.0
        while not self._closed:
            left = deadline - slack - _shim.monotonic()  # the blocks must end by then
            if left <= 0:
                _shim.sleep(max(0.0, deadline - _shim.monotonic()))
                return False, None
            script = _LAST_ACQUIRE if left <= longest else _WAKE_ACQUIRE
            before, after = self._acquire_command(name, holder, ttl, limit, script)
            acquire = before + _bulk(head) + after
            seconds = max(0.001, min(left, longest))
            sent_at = _shim.monotonic()
            try:
                moved, granted = self._call(packed(
                    b"BLMOVE", keys.signal.encode(), self._wake_key(name), b"LEFT", b"RIGHT",
                    b"%.3f" % seconds) + acquire, replies=2)
                if isinstance(granted, NoScriptError):  # a new server: load them, run it again
                    self._call(packed(b"SCRIPT", b"LOAD", _WAKE_ACQUIRE.text)
                                     + packed(b"SCRIPT", b"LOAD", _LAST_ACQUIRE.text), replies=2)
                    granted = self._call(acquire)
            except BaseException:
                # Cancelled or failed: the wake-up may have taken the lease. Not on the same
                # connection (see _finish): a BLMOVE still blocked would hold the undo up, and
                # dropping the connection ends it at once.
                self._undo_soon(name, head, ttl, limit)
                raise
            if isinstance(granted, ResponseError):
                raise granted
            if isinstance(moved, ResponseError):  # no BLMOVE here: BLPOP from now on
                self._blmove = False
                if granted in (-1, None):
                    return False, None
            elif granted == -1:  # not woken: block again
                continue
            grant = self._granted(granted, sent_at, lease_id, name, holder, ttl, limit)
            if grant is not None and _shim.monotonic() >= local_deadline(sent_at, ttl):
                # Answered past the lease's deadline (this process was stopped, or the path
                # stalled): of no use to the caller, and maybe granted to another by now.
                _shim.start_soon(self._release_quietly, grant)
                return True, None
            return True, None if grant is None else grant._replace(sent_at=sent_at)
        return False, None

    def _wake_key(self, name: str) -> bytes:
        """This store's own list that a waiter's BLMOVE moves the name's signal into."""
        return f"{self._keys(name).base}w{self._id_prefix}".encode()

    def wait_signal(self, name: str, deadline: float) -> bool:
        """BLPOP on the name's signal list until `deadline` (monotonic); True when a release
        signalled. Driver errors are raised as they are.

        Example::

            woken = backend.wait_signal("jobs", time.monotonic() + 1.0)
        """
        key = self._keys(name).signal.encode()
        while not self._closed:
            left = deadline - _shim.monotonic()
            if left <= 0:
                return False
            seconds = max(0.001, min(left, self.timeout / 2))
            if self._call(packed(b"BLPOP", key, b"%.3f" % seconds)) is not None:
                return True
        return False

    def _start_reader(self) -> None:
        with self._mutex:
            if not self._closed and (self._reader is None or not self._reader.alive()):
                self._reader = _shim.spawn(self._listen, "tenure-redis-reader")

    def _listen(self) -> None:
        """The reader, from the store's first grant on: a pub/sub connection subscribed to a
        channel of its own, only to learn at once when the connection drops (and, by a PING
        when it has been quiet for half the timeout, when its path went silent: no answer
        within the timeout drops the connection). Each time it is
        (re)established, every lease held is renewed: after a restart that lost the server's
        data, this writes the leases back (see RENEW) within the restart grace, before anyone
        else can be granted them."""
        delay = 0.05
        while not self._closed:
            try:
                with self._pubsub() as pubsub:
                    pubsub.subscribe(self._control)
                    heard, pinged = _shim.monotonic(), None
                    while not self._closed:
                        message = pubsub.get_message(timeout=TICK)
                        now = _shim.monotonic()
                        if message is not None:
                            heard, pinged = now, None
                            if message["type"] == "subscribe":
                                self._reclaim()  # (re)connected, maybe to a new server
                        elif pinged is not None and now - pinged > self.timeout:
                            # A silent path ends no read: the PING's missing answer tells.
                            raise StoreUnavailable(f"{self.url}: no answer to a PING")
                        elif pinged is None and now - heard > self.timeout / 2:
                            pubsub.ping()
                            pinged = now
                        self._live()
                        delay = 0.05
            except Exception as exc:  # the reader must outlive any failure
                if self._closed:
                    return
                log.debug("tenure: redis reader interrupted: %s", exc)
            _shim.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)

    def _reclaim(self) -> None:
        """Renew every lease held now, in one call per ttl (see RENEW)."""
        by_ttl: dict[float, list[Grant]] = {}
        for held in self._live():
            by_ttl.setdefault(held.ttl, []).append(held.grant)
        for ttl, grants in by_ttl.items():
            try:
                self.renew(grants, ttl)
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

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            connections, self._connections, self._idle = self._connections, [], []
        if self._reader is not None:
            self._reader.stop()
        for connection in connections:
            connection.disconnect()
        if self._owns_pool:  # a client passed in stays open: its owner closes it
            self._pool.disconnect()


def _record_entry(value: bytes | None) -> tuple[str, tuple[int, int], str] | None:
    """Name, version and record of a record key's value; None when absent or not tenure's."""
    if value is None:
        return None
    try:
        name, token, seq, record = json.loads(value)
    except (ValueError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(record, str):
        return None
    return name, (int(token), int(seq)), record


def _reply_or_error(connection: Any) -> Any:
    """The next reply on `connection`; an error reply is returned, not raised. A read that
    fails or is cancelled leaves the connection as it is (the caller decides)."""
    try:
        return connection.read_response(disconnect_on_error=False)
    except ResponseError as exc:
        return exc


def _lease_entry(key: bytes, value: bytes, left: int,
                 now: datetime) -> tuple[str, LeaseInfo] | None:
    """Lease id and LeaseInfo from a slot key's value and PTTL; None when gone or not tenure's."""
    try:
        lease_id, token, holder, name = json.loads(value)
        slot = int(key.rpartition(b":s")[2])
    except (ValueError, TypeError):
        return None
    if left < 0 or not isinstance(name, str) or not isinstance(holder, str):
        return None
    return str(lease_id), LeaseInfo(name, holder, int(token),
                                    now + timedelta(milliseconds=left), slot)
