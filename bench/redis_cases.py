"""The redis:// section: tenure next to the raw floors and every Python peer, on one server.

- Uncontended rows: tenure sync (try/release and `with`) and async; the raw floor, a bare
  `SET key value NX PX 30000` plus a compare-and-delete Lua script by EVALSHA, through
  redis-py's client API (the goal's reference), hand-packed on one redis-py `Connection` (the
  least Python code can spend per command with redis-py, and how tenure sends its scripts) and
  with redis.asyncio; the peers: redis-py's `Lock`, python-redis-lock, pottery's `Redlock` (one
  master), portalocker's `RedisLock` and tooz's redis driver.
- Hand-off contenders: tenure and every peer, each with its default way of waiting.
- Renewal counter: requests redis-py's connections sent, and the server's INFO commandstats.

Example::

    section = redis_cases.section(server, stack, extras)
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from cases import (
    LOCK_NAME,
    Case,
    Extras,
    ServerSection,
    async_case,
    kept_names_case,
    multi_lock_cases,
    optional_case,
    tenure_cases,
)
from handoff import LEASE_SECONDS, Contender
from lineup import TAKEOVER_TTL, Entry, footprints, takers
from servers import Server
from timing import Runner, timed_async_cycles, timed_loop

import tenure

TITLE = "redis:// (local redis-server)"
GOAL_VS_FLOOR = 1.1  # client-API floor cycles/s ÷ tenure cycles/s at most this
ASYNC_WARMUP_CYCLES = 50
# A compare-and-delete, the usual release of a Redis lock (redis-py's Lock uses the same).
COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def section(server: Server, stack: ExitStack, extras: Extras) -> ServerSection:
    """Every redis case, hand-off contender and the renewal counter, on `server`.

    Example::

        section = section(server, stack, extras)
    """
    import redis

    url = server.url
    client = redis.Redis.from_url(url)
    stack.callback(client.close)
    raw, api = round_trips(client)
    extras.facts.append(("Redis round trip (PING, median of 2,000): hand-packed on one "
                         "connection, redis-py client API", f"{raw * 1e6:.0f} µs, "
                                                           f"{api * 1e6:.0f} µs"))
    store = tenure.connect(url)
    stack.callback(store.close)
    floor = Case(TITLE, "floor", "floor: bare `SET NX PX` + compare-and-delete script "
                 "(EVALSHA), redis-py client API", client_floor(client), short="client-API floor")
    packed = Case(TITLE, "floor", "floor, hand-packed: the same pair packed once, on one "
                  "redis-py `Connection` (`send_packed_command` + `read_response`)",
                  packed_floor(client, stack), short="hand-packed floor")
    aio_floor = Case(TITLE, "floor", "floor, async: the same pair with redis.asyncio",
                     async_floor(url), short="async floor")
    try_row, with_row = tenure_cases(TITLE, store.lock(LOCK_NAME, ttl=LEASE_SECONDS))
    aio_row = async_case(TITLE, url, name=LOCK_NAME + "-async", warmup=ASYNC_WARMUP_CYCLES)
    aio_row.floor = aio_floor
    peers = peer_cases(url, client, stack, extras)
    for row in (try_row, with_row):
        row.floor, row.also, row.peers = floor, [packed], peers
        row.goal, row.goal_limit = f"redis: client-API floor ÷ tenure <= {GOAL_VS_FLOOR:g}", \
            GOAL_VS_FLOOR
        row.peer_goal, row.peer_limit = "redis: tenure ÷ each peer >= 1 (ahead of every peer)", 1.0
    for peer in peers:
        peer.floor, peer.also = floor, [packed]
    kept = kept_names_case(TITLE, try_row, url, stack, ttl=LEASE_SECONDS)
    cases = [try_row, floor, with_row, packed, aio_row, aio_floor, kept, *peers,
             *multi_lock_cases(TITLE, store, ttl=LEASE_SECONDS)]
    for case in cases:
        case.fragile = True
    return ServerSection(
        TITLE, url, cases, contenders(url), rtt=api,
        rtt_label="`PING` through redis-py's client API, median of 2,000",
        counter=RedisCounter(url), takers=takers(lineup(url)), footprints=footprints(lineup(url)),
        renewal_note="One store holds 1, 100 or 1,000 leases while tenure's lease monitor "
                     "renews them. Round trips are the requests redis-py's connections sent "
                     "during the store's `renew` calls; scripts and the commands they ran "
                     "inside the server come from INFO commandstats (INFO itself left out).")


def round_trips(client: Any, count: int = 2000) -> tuple[float, float]:
    """Median PING round trip in seconds: hand-packed on one connection, and client API.

    Example::

        raw, api = round_trips(redis.Redis(port=6399))
    """
    pool = client.connection_pool
    connection = pool.connection_class(**pool.connection_kwargs)
    ping = _packed(b"PING")
    raw, api = [], []
    for _ in range(count):
        start = time.perf_counter()
        connection.send_packed_command((ping,))
        connection.read_response()
        middle = time.perf_counter()
        client.ping()
        raw.append(middle - start)
        api.append(time.perf_counter() - middle)
    connection.disconnect()
    return statistics.median(raw), statistics.median(api)


def _packed(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def client_floor(client: Any) -> Runner:
    """The raw floor: `SET key value NX PX 30000`, then compare-and-delete by EVALSHA."""
    release = client.register_script(COMPARE_AND_DELETE)
    key, value = "floor:lock", uuid.uuid4().hex

    def cycle() -> None:
        if not client.set(key, value, nx=True, px=LEASE_SECONDS * 1000):
            raise RuntimeError("the floor's lock was held")
        release(keys=[key], args=[value])

    return timed_loop(cycle)


def packed_floor(client: Any, stack: ExitStack) -> Runner:
    """The same pair, each command packed once, on one redis-py connection of its own."""
    pool = client.connection_pool
    connection = pool.connection_class(**pool.connection_kwargs)
    stack.callback(connection.disconnect)
    sha = client.script_load(COMPARE_AND_DELETE).encode()
    key, value = b"floor:packed", uuid.uuid4().hex.encode()
    take = _packed(b"SET", key, value, b"NX", b"PX", b"%d" % (LEASE_SECONDS * 1000))
    free = _packed(b"EVALSHA", sha, b"1", key, value)

    def cycle() -> None:
        connection.send_packed_command((take,))
        if not connection.read_response():
            raise RuntimeError("the floor's lock was held")
        connection.send_packed_command((free,))
        connection.read_response()

    return timed_loop(cycle)


def async_floor(url: str) -> Runner:
    """The floor with redis.asyncio, one asyncio.run per round (as tenure's async row)."""
    import redis.asyncio

    async def cycles(count: int) -> float:
        client = redis.asyncio.Redis.from_url(url)
        release = client.register_script(COMPARE_AND_DELETE)
        key, value = "floor:async", uuid.uuid4().hex

        async def cycle() -> None:
            if not await client.set(key, value, nx=True, px=LEASE_SECONDS * 1000):
                raise RuntimeError("the floor's lock was held")
            await release(keys=[key], args=[value])

        try:
            return await timed_async_cycles(cycle, count, ASYNC_WARMUP_CYCLES)
        finally:
            await client.aclose()

    return lambda count: asyncio.run(cycles(count))


def peer_cases(url: str, client: Any, stack: ExitStack, extras: Extras) -> list[Case]:
    """The peers, each with an expiry of 30 s and its lock object reused across cycles; a peer
    that cannot run is left out with a note.

    Example::

        peers = peer_cases(url, redis.Redis.from_url(url), stack, extras)
    """

    def non_blocking(peer: Any) -> Callable[[], object]:
        def cycle() -> None:
            if not peer.acquire(blocking=False):
                raise RuntimeError("the peer refused an uncontended lock")
            peer.release()

        return cycle

    def redis_py() -> Callable[[], object]:
        return non_blocking(client.lock("peer:redis-py", timeout=LEASE_SECONDS))

    def python_redis_lock() -> Callable[[], object]:
        import redis_lock

        return non_blocking(redis_lock.Lock(client, "peer:python-redis-lock",
                                            expire=LEASE_SECONDS))

    def pottery() -> Callable[[], object]:
        from pottery import Redlock

        return non_blocking(Redlock(key="peer:pottery", masters={client},
                                    auto_release_time=LEASE_SECONDS))

    def portalocker() -> Callable[[], object]:
        import portalocker

        peer = portalocker.RedisLock("peer:portalocker", connection=client,
                                     fail_when_locked=True)

        def cycle() -> None:
            peer.acquire()
            peer.release()

        return cycle

    def tooz() -> Callable[[], object]:
        from tooz import coordination

        coordinator = coordination.get_coordinator(url, b"bench-member")
        coordinator.start()
        stack.callback(coordinator.stop)
        return non_blocking(coordinator.get_lock(b"peer:tooz"))

    made = [optional_case(TITLE, "peer", label, make, extras, short) for label, make, short in (
        ("peer: redis-py `Lock` (`acquire(blocking=False)` + `release()`)", redis_py,
         "redis-py"),
        ("peer: python-redis-lock `Lock` (`acquire(blocking=False)` + `release()`)",
         python_redis_lock, "python-redis-lock"),
        ("peer: pottery `Redlock` (one master)", pottery, "pottery"),
        ("peer: portalocker `RedisLock`", portalocker, "portalocker"),
        ("peer: tooz redis driver (`get_lock`)", tooz, "tooz"))]
    return [case for case in made if case is not None]


def contenders(url: str) -> list[Contender]:
    """tenure and every peer in the contended hand-off, each waiting its default way."""
    try:
        from pottery import Redlock

        retry = f"{Redlock._RETRY_DELAY * 1e3:g} ms"  # only for the label
    except Exception:
        retry = "a short"
    return [
        Contender("tenure: `with lock.acquire(timeout=60)` (woken by the release's "
                  "notification; backoff 10 ms..1 s)", "tenure", url, goal=True,
                  fair=True),
        Contender("redis-py `Lock`: `with client.lock(name, timeout=30)` (polls every 0.1 s)",
                  "redis-py", url),
        Contender("python-redis-lock `with Lock(...)` (BLPOP on a signal list)",
                  "python-redis-lock", url),
        Contender(f"pottery `with Redlock(...)` (one master; retries after a random sleep of "
                  f"up to {retry})", "pottery", url),
        Contender("portalocker `RedisLock.acquire(timeout=60)` (pub/sub channel, polls)",
                  "portalocker-redis", url),
        Contender("tooz redis driver `with lock` (redis-py `Lock` inside: polls every 0.1 s)",
                  "tooz", url),
    ]


def lineup(url: str) -> list[Entry]:
    """tenure and every peer for the takeover and memory runs, each waiting its default way.

    Example::

        entries = lineup("redis://127.0.0.1:6399/0")
    """
    seconds = round(TAKEOVER_TTL)  # tooz and python-redis-lock take whole seconds
    return [
        Entry("tenure (woken by the release's notification; backoff 10 ms .. 1 s)", "tenure",
              url, tenure=True),
        Entry("redis-py `Lock` (`acquire(blocking_timeout=...)`: polls every 0.1 s)",
              "redis-py", url),
        Entry("python-redis-lock `Lock` (`acquire()`: BLPOP on a signal list, up to expire)",
              "python-redis-lock", url, renewal="its `auto_renewal=True`: a thread per lock",
              memory_options={"auto_renewal": True}),
        Entry("pottery `Redlock` (one master; retries after a random sleep)", "pottery", url),
        Entry("portalocker `RedisLock` (held by a pub/sub subscription, no expiry)",
              "portalocker-redis", url, expires=False,
              renewal="nothing to renew (a subscription per lock)"),
        Entry("tooz redis driver (redis-py `Lock` inside: polls every 0.1 s)", "tooz",
              f"{url}?lock_timeout={seconds}", renewal="tooz's heartbeat thread",
              memory_connect={"start_heart": True}),
        Entry("floor: a bare BLPOP hand-off (`SET NX`; a waiter's `BLPOP` with `SET NX` "
              "pipelined behind it; the release's `DEL` + `LPUSH`; redis-py, no expiry, no "
              "fencing)", "redis-blpop",
              url, expires=False, floor=True, release_only=True),
    ]


class RedisCounter:
    """Renewal counting for Redis: requests sent by redis-py connections (client side); scripts
    and the commands they ran (server side, INFO commandstats without INFO)."""

    columns = ("scripts (server)", "commands inside them (server)")

    def __init__(self, url: str) -> None:
        self.url = url
        self.count = 0
        self.original: Any = None

    def install(self) -> None:
        """Wrap `AbstractConnection.send_packed_command` to count requests."""
        import redis
        from redis.connection import AbstractConnection

        self.admin = redis.Redis.from_url(self.url)
        self.admin.ping()  # its connection is open before the first snapshot
        self.original = send = AbstractConnection.send_packed_command

        def counted(connection: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return send(connection, *args, **kwargs)

        AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]

    def uninstall(self) -> None:
        """Undo install."""
        from redis.connection import AbstractConnection

        AbstractConnection.send_packed_command = self.original  # type: ignore[method-assign]
        self.admin.close()

    def sent(self) -> int:
        """Requests sent since install."""
        return self.count

    def snapshot(self) -> tuple[float, ...]:
        """(scripts run, commands other than scripts and INFO) since the server started."""
        stats = self.admin.info("commandstats")
        calls = {key: int(value["calls"]) for key, value in stats.items()
                 if key != "cmdstat_info"}
        scripts = sum(calls.get(name, 0) for name in ("cmdstat_evalsha", "cmdstat_eval",
                                                      "cmdstat_fcall"))
        return float(scripts), float(sum(calls.values()) - scripts)
