"""The Redis store of one server: leases granted, renewed, released and broken, each by ONE
server-side Lua script (see _scripts.py), the renewal of every lease the process holds in one
call; waiting in _waiting.py, records in _records.py, connections in _connections.py.

A token is max(counter + 1, the server's TIME in microseconds): tokens keep growing when the
server loses its data (no persistence) or fails over to a replica that missed increments, as
long as the server's clock does not step back. After a restart that lost the data, holders write
their leases back (one pub/sub connection per store notices the restart at once, _reader.py),
while the server grants no new name for `restart_grace` seconds.

Example::

    backend = AsyncRedisStore("redis://cache:6379/0", prefix="myapp:")
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tenure._async import _shim
from tenure._async.stores._protocol import AsyncBackend, AsyncRecordKeeper, closed_store
from tenure._async.stores.redis._connections import Connections, Undo, UndoAll
from tenure._async.stores.redis._ordering import RENEWAL_PATIENCE, RenewalOrder
from tenure._async.stores.redis._reader import Reader
from tenure._async.stores.redis._records import Records, Version
from tenure._async.stores.redis._scripts import (
    LOST,
    SCRIPTS,
    Keys,
    Script,
    bulk,
    evalsha,
    glob_escape,
    name_keys,
    packed,
)
from tenure._async.stores.redis._settings import (
    checked_client,
    own_options,
    parse_options,
    retain_ms,
    with_retain,
)
from tenure._async.stores.redis._waiting import Waits
from tenure._errors import InvalidArgumentType, StoreUnavailable
from tenure._forks import in_child_after_fork
from tenure._names import safe_key_prefix
from tenure._timing import local_deadline
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

log = logging.getLogger("tenure")

# Caches of names' keys and commands are emptied when they reach this size.
_CACHED = 4096
# Entries a listing reads per script, keys a prune's SCAN asks for per call.
_PAGE = 1000


class _Held(NamedTuple):
    """A lease this store granted and has not released, for reclaiming after a restart."""

    grant: Grant
    ttl: float
    deadline: float  # local, as the lease monitor computes it


class AsyncRedisStore(AsyncBackend, AsyncRecordKeeper):
    """Leases in one Redis server (or Valkey, or another server with Redis's Lua scripting).

    Options, in the URL's query or as keywords (keywords win): `prefix` (default "tenure:"),
    `timeout` (seconds for connecting and for each reply, default 5), `restart_grace` (default
    2 s), `db`, and for rediss:// the TLS settings `ssl_ca_certs`, `ssl_certfile`,
    `ssl_keyfile`, `ssl_cert_reqs`, `ssl_check_hostname`. Nothing connects until the first call.

    Example::

        backend = AsyncRedisStore("redis://:secret@cache:6379/0", prefix="myapp:")
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, url: str | None = None, *, client: Redis | None = None,
                 **options: Any) -> None:
        if client is not None:
            checked_client(client, url)
            self.prefix, timeout, self.restart_grace, self.retain = own_options(
                dict(options), ("prefix", "timeout", "restart_grace", "retain"),
                "redis:// stores made from a client", "its other settings are the client's")
            self._connections = Connections.of_client(client, timeout, self.prefix)
        else:
            if not isinstance(url, str):
                raise InvalidArgumentType(
                    f"url must be a str such as 'redis://cache:6379/0' (or pass client=), got "
                    f"{type(url).__name__}")
            settings = parse_options(url, options)
            self.prefix, self.restart_grace = settings.prefix, settings.restart_grace
            self.retain = settings.retain
            self._connections = Connections.of_url(url, settings)
        self._connections.url = with_retain(self._connections.url, self.retain)
        self.url, self.timeout = self._connections.url, self._connections.timeout
        self._grace = repr(self.restart_grace).encode()
        self._retain_ms = retain_ms(self.retain)
        self._index = f"{self.prefix}live".encode()  # the live slots (see _scripts.py)
        self._names: dict[str, Keys] = {}
        self._tails: dict[tuple[str, str], str] = {}
        self._acquiring: dict[tuple[str, str, float, int, Script], tuple[bytes, bytes]] = {}
        self._releasing: dict[str, bytes] = {}  # the RELEASE command up to the value, by key
        self._ids = itertools.count()
        self._writes = itertools.count()  # orders records written under one lease
        self._id_prefix = secrets.token_hex(6)
        self._held: dict[str, _Held] = {}  # by lease id
        self._order = RenewalOrder()  # no RENEW of a lease after its RELEASE
        self._reader = self._new_reader()
        self._waits = Waits(self)
        self._records = Records(self)
        in_child_after_fork(self, AsyncRedisStore._start_afresh)

    def _new_reader(self) -> Reader:
        control = f"{self.prefix}control:{secrets.token_hex(8)}"
        return Reader(self._connections, control, self._reclaim, self._live)

    def _start_afresh(self) -> None:
        """In a forked child: the parent's connections and leases are not this process's."""
        self._connections.start_afresh()
        self._held = {}
        self._order = RenewalOrder()
        self._reader = self._new_reader()
        # Lease ids of its own: siblings forked from one parent would otherwise send the same
        # ids, and ACQUIRE takes a slot holding its own id for a retry of its own request.
        self._id_prefix = secrets.token_hex(6)
        self._acquiring = {}  # commands built around the old prefix (the waiter's wake key)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- helpers ------------------------------------------------------------------------------

    def _keys(self, name: str) -> Keys:
        keys = self._names.get(name)
        if keys is None:
            if len(self._names) >= _CACHED:
                self._names.clear()
            keys = self._names[name] = name_keys(self.prefix, name)
        return keys

    def _tail(self, holder: str, name: str) -> str:
        tail = self._tails.get((holder, name))
        if tail is None:
            if len(self._tails) >= _CACHED:
                self._tails.clear()
            tail = self._tails[holder, name] = f",{json.dumps(holder)},{json.dumps(name)}]"
        return tail

    def _value(self, grant: Grant) -> bytes:
        """What the slot key holds while `grant` is live."""
        tail = self._tail(grant.holder, grant.name)
        return f'["{grant.lease_id}",{grant.token}{tail}'.encode()

    def _new_lease_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids)}"

    def _wake_key(self, name: str) -> bytes:
        """This store's own list that a waiter's BLMOVE moves the name's signal into."""
        return f"{self._keys(name).base}w{self._id_prefix}".encode()

    def _acquire_command(self, name: str, holder: str, ttl: float, limit: int, head: bytes,
                         script: Script = SCRIPTS.acquire) -> bytes:
        """The ACQUIRE (or WAKE_ACQUIRE, LAST_ACQUIRE) command of these arguments, with the
        value head `head` ('["<lease id>",'); the rest is packed once per arguments."""
        key = (name, holder, ttl, limit, script)
        around = self._acquiring.get(key)
        if around is None:
            if len(self._acquiring) >= _CACHED:
                self._acquiring.clear()
            keys = self._keys(name)
            names = [keys.slot0.encode(), keys.counter.encode()]
            if limit > 1:
                names.append(keys.limit.encode())
            if script is not SCRIPTS.acquire:
                names.append(self._wake_key(name))
            before = evalsha(script, names, b"%d" % limit, b"%d" % int(ttl * 1000))
            before = b"*%d\r\n" % (len(names) + 9) + before.partition(b"\r\n")[2]
            after = (bulk(self._tail(holder, name).encode()) + bulk(self._grace)
                     + bulk(self._retain_ms))
            around = self._acquiring[key] = (before, after)
        return around[0] + bulk(head) + around[1]

    async def _scan(self, pattern: str) -> list[list[bytes]]:
        """The keys matching `pattern`, in chunks of at most 1,000."""
        keys: list[bytes] = []
        cursor = b"0"
        while True:
            cursor, batch = await self._connections.call(
                packed(b"SCAN", cursor, b"MATCH", pattern.encode(), b"COUNT", b"1000"))
            keys.extend(batch)
            if cursor == b"0":
                return [keys[start:start + 1000] for start in range(0, len(keys), 1000)]

    # -- leases -------------------------------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        return await self._acquire_as(self._new_lease_id(), name, holder, ttl, limit)

    async def _acquire_as(self, lease_id: str, name: str, holder: str, ttl: float,
                          limit: int) -> Grant | None:
        """try_acquire with the caller's lease id (a quorum gives one id on every master)."""
        head = f'["{lease_id}",'.encode()
        undo = Undo(name, self._keys(name).slot0.encode(), head, ttl, limit, self._retain_ms)
        sent_at = _shim.monotonic()
        try:
            granted = await self._connections.eval(
                SCRIPTS.acquire, self._acquire_command(name, holder, ttl, limit, head), undo)
        except (RedisError, OSError) as exc:
            raise self._connections.failure("acquire", name, exc) from exc
        return self._granted(granted, sent_at, lease_id, name, holder, ttl, limit)

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
        self._reader.start()
        return grant

    async def try_acquire_all(self, names: Sequence[str], holder: str,
                              ttl: float) -> list[Grant] | None:
        """Locks on every one of `names` in ONE script (ACQUIRE_ALL), or on none (see
        tenure._async.stores._protocol.AsyncTryAcquireAll).

        Example::

            grants = await backend.try_acquire_all(["a", "b"], "worker-1", 30.0)
        """
        lease_ids = [self._new_lease_id() for _ in names]
        heads = [f'["{lease_id}",'.encode() for lease_id in lease_ids]
        each = [self._keys(name) for name in names]
        slot0s = [of_name.slot0.encode() for of_name in each]
        keys = [key for slot0, of_name in zip(slot0s, each, strict=True)
                for key in (slot0, of_name.counter.encode())]
        values = [value for name, head in zip(names, heads, strict=True)
                  for value in (head, self._tail(holder, name).encode())]
        command = evalsha(SCRIPTS.acquire_all, keys, b"%d" % int(ttl * 1000), self._grace,
                          self._retain_ms, *values)
        undo = UndoAll(names, slot0s, heads, ttl, self._retain_ms)
        sent_at = _shim.monotonic()
        try:
            tokens = await self._connections.eval(SCRIPTS.acquire_all, command, undo)
        except (RedisError, OSError) as exc:
            raise self._connections.failure("acquire", names[0], exc) from exc
        if tokens is None:
            return None
        grants = [self._granted(token, sent_at, lease_id, name, holder, ttl, 1)
                  for token, lease_id, name in zip(tokens, lease_ids, names, strict=True)]
        return [grant for grant in grants if grant is not None]  # a token each: all of them

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Block on the name's signal list (see _waiting.py).

        Example::

            await backend.wait_released("jobs", 1.0)
        """
        await self._waits.wait_released(name, timeout)

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait up to `timeout` seconds for a release of `name` and return the Grant its
        wake-up took in the same server turn, or None (see _waiting.py).

        Example::

            grant = await backend.wait_and_acquire("jobs", "web-1", 30.0, 1, 0.5, 10.0)
        """
        return await self._waits.wait_and_acquire(name, holder, ttl, limit, timeout, patience)

    async def _wait_signal(self, name: str, deadline: float) -> bool:
        """Block until a release of `name` signals (True) or `deadline` (monotonic) passes;
        driver errors raised as they are (the quorum store moves to another master)."""
        return await self._waits.wait_signal(name, deadline)

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        lease_ids = [grant.lease_id for grant in grants]
        on_its_way = _shim.Event()
        releasing = self._order.start_renewal(on_its_way, lease_ids)
        # A lease being released is left out: its RENEW could come second (see _ordering.py).
        sending = [grant for grant in grants if grant.lease_id not in releasing]
        sent_at = _shim.monotonic()
        try:
            answers = await self._send_renewal(sending, ttl) if sending else []
        finally:
            self._order.end_renewal(on_its_way, lease_ids)
        deadline = local_deadline(sent_at, ttl)
        answered = dict(zip((grant.lease_id for grant in sending), answers, strict=True))
        results: list[Grant | LostReason] = []
        for grant in grants:
            answer = answered.get(grant.lease_id)
            # A quorum may retoken a lease here while a renewal sent with the old value is on
            # its way (a master's late grant joins it): the renewal's answer then speaks of
            # the grant as it was, and the lease lives on under `current`.
            current = self._held.get(grant.lease_id)
            if answer is None:  # being released: the caller ignores what renewal says of it
                results.append(LostReason.EXPIRED)
            elif answer == 1 and current is not None:
                self._held[grant.lease_id] = _Held(current.grant, ttl, deadline)
                results.append(grant)
            elif answer == 1:
                # Released (or given up) while this renewal was on its way: a renewal sent
                # again after a restart that lost the data may have written it back. Free it.
                with contextlib.suppress(StoreUnavailable):
                    await self.release(grant)
                results.append(LostReason.EXPIRED)
            else:
                if current is not None and self._value(current.grant) == self._value(grant):
                    del self._held[grant.lease_id]
                results.append(LOST[answer])
        return results

    async def _send_renewal(self, grants: Sequence[Grant], ttl: float) -> list[int]:
        """renew()'s RENEW of `grants` (one call): each one's answer (see RENEW)."""
        command = evalsha(SCRIPTS.renew, [grant.key.encode() for grant in grants],
                          b"%d" % int(ttl * 1000), self._retain_ms, *map(self._value, grants))
        try:
            answers: list[int] = await self._connections.eval(SCRIPTS.renew, command)
        except (RedisError, OSError) as exc:
            label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
            raise self._connections.failure("renewal", label, exc) from exc
        return answers

    def _release_command(self, grant: Grant) -> bytes:
        before = self._releasing.get(grant.key)
        if before is None:
            if len(self._releasing) >= _CACHED:
                self._releasing.clear()
            keys = [grant.key.encode(), self._keys(grant.name).counter.encode()]
            before = self._releasing[grant.key] = b"*7\r\n" + evalsha(
                SCRIPTS.release, keys).partition(b"\r\n")[2]
        return before + bulk(self._value(grant)) + bulk(self._retain_ms)

    async def release_all(self, grants: Sequence[Grant]) -> list[bool]:
        """release() of each of `grants`, their RELEASE scripts pipelined: one round trip.

        Example::

            freed = await backend.release_all(grants)
        """
        if len(grants) == 1:
            return [await self.release(grants[0])]
        command = b"".join(map(self._release_command, grants))
        lease_ids = [grant.lease_id for grant in grants]
        await self._order.start_release(lease_ids, min(self.timeout, RENEWAL_PATIENCE))
        try:
            replies = await self._connections.eval_each(SCRIPTS.release, command, len(grants))
            for reply in replies:  # an error reply of the server: as release() raises it
                if isinstance(reply, Exception):
                    raise reply
        except (RedisError, OSError) as exc:
            raise self._connections.failure("release", grants[0].name, exc) from exc
        finally:  # as in release()
            self._order.end_release(lease_ids)
            for grant in grants:
                self._held.pop(grant.lease_id, None)
        return [bool(reply) for reply in replies]

    async def release(self, grant: Grant) -> bool:
        await self._order.start_release((grant.lease_id,), min(self.timeout, RENEWAL_PATIENCE))
        try:
            freed = await self._connections.eval(SCRIPTS.release, self._release_command(grant))
        except (RedisError, OSError) as exc:
            raise self._connections.failure("release", grant.name, exc) from exc
        finally:
            self._order.end_release((grant.lease_id,))
            # Given up even when the call failed: a restart's reclaim must not write back a
            # lease its holder released (it would refuse every other holder for a ttl). Not
            # before the answer: a renewal answered meanwhile would free the lease itself, and
            # this release find nothing left to free.
            self._held.pop(grant.lease_id, None)
        return bool(freed)

    async def _release_quietly(self, grant: Grant) -> None:
        try:
            await self.release(grant)
        except Exception as exc:  # best effort (the store may be closing): else it expires
            log.debug("tenure: could not release %r: %s", grant.name, exc)

    async def _raise_counter(self, grant: Grant, token: int) -> Grant:
        """Raise the fencing counter of `grant`'s name to `token` where it is behind, and give
        this master's `grant` that token (quorum mode: a lease's token is the largest its
        masters gave); the grant as it now is (unchanged when the lease is gone)."""
        new = grant._replace(token=token)
        command = evalsha(SCRIPTS.raise_counter,
                          [self._keys(grant.name).counter.encode(), grant.key.encode()],
                          b"%d" % token, self._retain_ms, self._value(grant), self._value(new))
        try:
            done = await self._connections.eval(SCRIPTS.raise_counter, command)
        except (RedisError, OSError) as exc:
            raise self._connections.failure("fencing counter update", grant.name, exc) from exc
        return self._retokened(grant, new) if done else grant

    async def _retoken(self, grant: Grant, token: int) -> Grant | None:
        """The live `grant` with `token` instead of its own, its expiry kept (quorum mode: a
        master's late grant joins its lease); None when the lease is gone."""
        new = grant._replace(token=token)
        command = evalsha(SCRIPTS.retoken, [grant.key.encode()], self._value(grant),
                          self._value(new))
        try:
            done = await self._connections.eval(SCRIPTS.retoken, command)
        except (RedisError, OSError) as exc:
            raise self._connections.failure("joining a lease", grant.name, exc) from exc
        return self._retokened(grant, new) if done else None

    def _retokened(self, grant: Grant, new: Grant) -> Grant:
        """`new`, which the store now holds instead of `grant`, is what renewal sends next."""
        held = self._held.get(grant.lease_id)
        if held is not None:
            self._held[grant.lease_id] = held._replace(grant=new)
        return new

    async def break_lease(self, name: str) -> int:
        keys = self._keys(name)
        command = evalsha(SCRIPTS.break_lease, [keys.slot0.encode(), keys.limit.encode(),
                                                keys.counter.encode()], self._retain_ms)
        try:
            freed = await self._connections.eval(SCRIPTS.break_lease, command)
        except (RedisError, OSError) as exc:
            raise self._connections.failure("break", name, exc) from exc
        return int(freed)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        found = [info for _, info in await self._listing(prefix)]
        return sorted(found, key=lambda info: (info.name, info.slot))

    async def _listing(self, prefix: str = "") -> list[tuple[str, LeaseInfo]]:
        """Live leases whose name starts with `prefix`, with their lease ids, unsorted: read
        from the index of live slots, a page at a time, never from the names nobody holds."""
        if self._connections.closed:
            raise closed_store(self.url)
        keys = f"{self.prefix}{{{safe_key_prefix(prefix)}".encode()
        found: dict[bytes, tuple[str, LeaseInfo]] = {}  # by key: a renewal may move one on
        start, skip = b"", 0
        try:
            while True:
                last, ties, read, *page = await self._connections.eval(SCRIPTS.list, evalsha(
                    SCRIPTS.list, [self._index], keys, start, b"%d" % skip, b"%d" % _PAGE))
                now = datetime.now(timezone.utc)
                for key, value, left in zip(page[::3], page[1::3], page[2::3], strict=True):
                    entry = _lease_entry(key, value, left, now)
                    if entry is not None and entry[1].name.startswith(prefix):
                        found[key] = entry
                if read < _PAGE:
                    return list(found.values())
                # The next page starts at the last expiry read, past the entries read there.
                skip = skip + ties if last == start else ties
                start = last
        except (RedisError, OSError) as exc:
            raise self._connections.failure("listing", prefix, exc) from exc

    async def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names with no live slot that were not granted for `idle` seconds (their
        counters and semaphore limits; records stay), or with `dry_run` only count them; the
        number of names. SCAN finds the counters, and one script per batch checks and deletes
        them (see PRUNE), so a grant racing it comes first or finds the name forgotten.

        Example::

            forgotten = await backend.prune(idle=3600.0)
        """
        return len(await self._prune(idle, dry_run))

    async def _prune(self, idle: float, dry_run: bool) -> set[bytes]:
        """prune's work: the counter keys of the names forgotten (or that would be)."""
        if self._connections.closed:
            raise closed_store(self.url, "prune")
        pattern = f"{glob_escape(self.prefix)}{{*}}:token".encode()
        idle_us, dry = b"%d" % int(idle * 1_000_000), b"1" if dry_run else b"0"
        forgotten: set[bytes] = set()  # SCAN may return a key twice
        cursor = b"0"
        try:
            while True:
                cursor, batch = await self._connections.call(
                    packed(b"SCAN", cursor, b"MATCH", pattern, b"COUNT", b"%d" % _PAGE))
                if batch:
                    forgotten.update(await self._connections.eval(
                        SCRIPTS.prune, evalsha(SCRIPTS.prune, batch, idle_us, dry)))
                if cursor == b"0":
                    return forgotten
        except (RedisError, OSError) as exc:
            raise self._connections.failure("prune", "", exc) from exc

    # -- records ------------------------------------------------------------------------------

    async def read_record(self, name: str) -> str | None:
        """The record last written next to `name` (kept across releases), or None.

        Example::

            last = await backend.read_record("nightly-report")
        """
        found = await self._records.read(name)
        return None if found is None else found[1]

    async def write_record(self, grant: Grant, record: str) -> bool:
        """Replace the record of `grant.name`, in one script, only while `grant` is live.

        Example::

            written = await backend.write_record(grant, '{"done": "2026-11-23"}')
        """
        return await self._records.write(grant, record, (grant.token, next(self._writes)))

    async def records(self, prefix: str = "") -> dict[str, str]:
        """Every record whose name starts with `prefix`, by name.

        Example::

            everything = await backend.records("jobs/")
        """
        if self._connections.closed:
            raise closed_store(self.url)
        found = await self._records.all(prefix)
        return {name: record for name, (_, record) in found.items()}

    # The quorum store's: versions to pick the newest, and writes it can take back.

    async def _read_versioned_record(self, name: str) -> tuple[Version, str] | None:
        return await self._records.read(name)

    async def _versioned_records(self, prefix: str = "") -> dict[str, tuple[Version, str]]:
        if self._connections.closed:
            raise closed_store(self.url)
        return await self._records.all(prefix)

    async def _write_versioned_record(self, grant: Grant, record: str,
                                      version: Version) -> bytes | None:
        return await self._records.swap(grant, record, version)

    async def _undo_record(self, name: str, undo: bytes) -> None:
        await self._records.undo(name, undo)

    # -- restarts -----------------------------------------------------------------------------

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
        if self._connections.closed:
            return
        self._connections.closed = True
        self._reader.stop()
        await self._connections.close()


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
