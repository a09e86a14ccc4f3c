"""The redis:// part of the benchmark: tenure next to the raw floor and the Python peers.

A redis-server is started with the test suite's own launcher (tests/servers.py: no persistence,
a free loopback port, a temporary directory) and stopped with the caller's ExitStack. Three
measurements, all on that one server:

- uncontended acquire+release cycles/s (`uncontended_rows`): tenure sync (fencing on, as
  always) and async; the raw floor, a bare `SET key value NX PX 30000` plus a
  compare-and-delete Lua script by EVALSHA, twice: through redis-py's client API
  (`Redis.set`, `Script`: what code using redis-py writes; the goal's reference) and hand-packed
  on one redis-py `Connection` (`send_packed_command`/`read_response`: the least any Python
  code can spend per command with redis-py, and how tenure sends its scripts); and the peers:
  redis-py's `Lock`, python-redis-lock, pottery's `Redlock` (one master), portalocker's
  `RedisLock` and tooz's redis driver;
- contended hand-off (`contended`): 8 OS processes loop acquire / hold 1 ms / release on one
  name for a few seconds; hand-offs per second and release-to-acquire latency, for tenure,
  redis-py's `Lock` and python-redis-lock, each with its default way of waiting;
- round trips per renewal tick with 1, 100 and 1,000 held leases (`renewal_round_trips`):
  the requests the client sent, and the scripts the server ran (INFO commandstats).

bench/run.py calls these: `start_redis` (a `Server`, or why it could not start), then
`uncontended_rows` (each `Row` becomes a `Case`; `FLOOR` is the goal's reference, `PACKED_FLOOR`
the lower one) and `extra_tables` (markdown for below the section's table).
`python bench/redis_bench.py` runs everything alone and prints the tables.

Example::

    with ExitStack() as stack:
        server = start_redis(Path("/tmp/redis-bench"), stack)
        if isinstance(server, Server):
            rows = uncontended_rows(server.url, stack)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from timing import Runner, timed_loop

import tenure
import tenure.aio

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SECTION = "redis:// (local redis-server)"
LOCK_NAME = "bench"
LEASE_SECONDS = 30  # tenure's default ttl; the peers' expiry is set to the same
ASYNC_WARMUP_CYCLES = 50  # per asyncio.run: opens the connections
CONTENDERS = 8
HOLD_SECONDS = 0.001
GOAL_VS_FLOOR = 1.1  # floor cycles/s ÷ tenure cycles/s at most this
FLOOR = "floor: bare `SET NX PX` + compare-and-delete script (EVALSHA), redis-py client API"
PACKED_FLOOR = ("floor, hand-packed: the same pair packed once, on one redis-py `Connection` "
                "(`send_packed_command` + `read_response`)")
TICKS = 3  # renewal ticks measured per size

# A compare-and-delete, the usual release of a Redis lock (redis-py's Lock uses the same).
COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass
class Server:
    """A running redis-server: its URL and the versions that explain its figures."""

    url: str
    port: int
    facts: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Row:
    """One uncontended row: "tenure", "floor" or "peer", a label, and how to time n cycles."""

    kind: str
    label: str
    run: Runner


@dataclass
class HandOff:
    """One library's contended run: acquisitions, hand-offs between processes, latencies."""

    label: str
    seconds: float
    acquisitions: int
    latencies: list[float]  # seconds from each release to the next acquire, whoever took it
    handoffs: list[float]  # the same, where another process than the releaser took it

    @property
    def per_second(self) -> float:
        return len(self.handoffs) / self.seconds


def percentile(values: list[float], fraction: float) -> float:
    """The value below which `fraction` of `values` fall (nan when empty).

    Example:
        >>> percentile([3.0, 1.0, 2.0], 0.5)
        2.0
    """
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def start_redis(workdir: Path, stack: ExitStack) -> Server | str:
    """Start redis-server with tests/servers.py; the running server, or why it is not running.

    Waits until the server is older than tenure's restart grace (2 s): a younger server grants
    no name it has not seen yet (see docs/stores/redis.md).

    Example::

        server = start_redis(Path(tmp) / "redis", stack)
    """
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    try:
        import redis
        import servers  # the test suite's launcher
    except Exception as exc:
        return f"cannot import redis-py or the test suite's launcher ({exc!r})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.RedisServer(workdir)
    try:
        server.start()
    except Exception as exc:  # ServiceMissing: no redis-server binary
        server.stop()
        return " ".join(str(exc).split()) or type(exc).__name__
    stack.callback(server.stop)
    with redis.Redis(port=server.port) as client:
        info = client.info("server")
        while info["uptime_in_seconds"] < 2:
            time.sleep(0.1)
            info = client.info("server")
    facts = [("Redis server", f"{info['redis_version']} (no persistence, loopback TCP)"),
             ("redis-py", redis.__version__),
             ("round trip (PING, median of 2,000): hand-packed on one connection, client API",
              round_trips(server.port))]
    return Server(server.url, server.port, facts)


def round_trips(port: int) -> str:
    """The median PING round trip, hand-packed on one connection and through the client API.

    Example::

        round_trips(6399)  # '38 µs, 71 µs'
    """
    import redis

    with redis.Redis(port=port) as client:
        pool = client.connection_pool
        connection = pool.connection_class(**pool.connection_kwargs)
        ping = _packed(b"PING")
        raw, api = [], []
        for _ in range(2000):
            start = time.perf_counter()
            connection.send_packed_command((ping,))
            connection.read_response()
            middle = time.perf_counter()
            client.ping()
            raw.append(middle - start)
            api.append(time.perf_counter() - middle)
        connection.disconnect()
    return f"{statistics.median(raw) * 1e6:.0f} µs, {statistics.median(api) * 1e6:.0f} µs"


# -- uncontended cycles ---------------------------------------------------------------------------


def uncontended_rows(url: str, stack: ExitStack) -> list[Row]:
    """Every uncontended row, floor first: tenure, the floor, the async pair, the peers.

    Example::

        rows = uncontended_rows("redis://127.0.0.1:6399/0", stack)
    """
    import redis

    client = redis.Redis.from_url(url)
    stack.callback(client.close)
    store = tenure.connect(url)
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME, ttl=LEASE_SECONDS)

    def tenure_try() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    def tenure_with() -> None:
        with lock.acquire():
            pass

    rows = [Row("floor", FLOOR, floor(client)),
            Row("floor", PACKED_FLOOR, packed_floor(client, stack)),
            Row("tenure", "tenure: `lock.try_acquire().release()`", timed_loop(tenure_try)),
            Row("tenure", "tenure: `with lock.acquire(): pass`", timed_loop(tenure_with)),
            Row("floor", "floor, async: the same pair with redis.asyncio", async_floor(url)),
            Row("tenure", "tenure async: `async with lock.acquire(): pass`", async_tenure(url))]
    return rows + peer_rows(url, client, stack)


def floor(client: Any) -> Runner:
    """The raw floor: `SET key value NX PX 30000`, then compare-and-delete by EVALSHA.

    Example::

        run = floor(redis.Redis(port=6399))
    """
    release = client.register_script(COMPARE_AND_DELETE)
    key, value = "floor:lock", uuid.uuid4().hex

    def cycle() -> None:
        if not client.set(key, value, nx=True, px=LEASE_SECONDS * 1000):
            raise RuntimeError("the floor's lock was held")
        release(keys=[key], args=[value])

    return timed_loop(cycle)


def packed_floor(client: Any, stack: ExitStack) -> Runner:
    """The same pair, each command packed once, on one redis-py connection of its own.

    Example::

        run = packed_floor(redis.Redis(port=6399), stack)
    """
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


def _packed(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def async_floor(url: str) -> Runner:
    """The floor with redis.asyncio, one asyncio.run per round (as tenure's async row).

    Example::

        run = async_floor("redis://127.0.0.1:6399/0")
    """
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
            for _ in range(ASYNC_WARMUP_CYCLES):
                await cycle()
            start = time.perf_counter()
            for _ in range(count):
                await cycle()
            return time.perf_counter() - start
        finally:
            await client.aclose()

    return lambda count: asyncio.run(cycles(count))


def async_tenure(url: str) -> Runner:
    """tenure's async row: `async with lock.acquire(): pass`, one asyncio.run per round.

    Example::

        run = async_tenure("redis://127.0.0.1:6399/0")
    """

    async def cycles(count: int) -> float:
        async with tenure.aio.connect(url) as store:
            lock = store.lock(LOCK_NAME + "-async", ttl=LEASE_SECONDS)
            for _ in range(ASYNC_WARMUP_CYCLES):
                async with lock.acquire():
                    pass
            start = time.perf_counter()
            for _ in range(count):
                async with lock.acquire():
                    pass
            return time.perf_counter() - start

    return lambda count: asyncio.run(cycles(count))


def peer_rows(url: str, client: Any, stack: ExitStack) -> list[Row]:
    """The peers, each with an expiry of 30 s and its lock object reused across cycles.

    Example::

        rows = peer_rows("redis://127.0.0.1:6399/0", redis.Redis(port=6399), stack)
    """
    rows = []

    def add(label: str, make: Callable[[], Callable[[], object]]) -> None:
        try:
            cycle = make()
            cycle()  # fails here, not in the middle of the measurement
        except Exception as exc:
            print(f"redis bench: skipping {label}: {exc!r}", file=sys.stderr)
            return
        rows.append(Row("peer", label, timed_loop(cycle)))

    def redis_py() -> Callable[[], object]:
        peer = client.lock("peer:redis-py", timeout=LEASE_SECONDS)

        def cycle() -> None:
            assert peer.acquire(blocking=False)
            peer.release()

        return cycle

    def python_redis_lock() -> Callable[[], object]:
        import redis_lock

        peer = redis_lock.Lock(client, "peer:python-redis-lock", expire=LEASE_SECONDS)

        def cycle() -> None:
            assert peer.acquire(blocking=False)
            peer.release()

        return cycle

    def pottery() -> Callable[[], object]:
        from pottery import Redlock

        peer = Redlock(key="peer:pottery", masters={client}, auto_release_time=LEASE_SECONDS)

        def cycle() -> None:
            assert peer.acquire(blocking=False)
            peer.release()

        return cycle

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

        coordinator = coordination.get_coordinator(url.split("?")[0], b"bench-member")
        coordinator.start()
        stack.callback(coordinator.stop)
        peer = coordinator.get_lock(b"peer:tooz")

        def cycle() -> None:
            assert peer.acquire(blocking=False)
            peer.release()

        return cycle

    add("peer: redis-py `Lock` (`acquire(blocking=False)` + `release()`)", redis_py)
    add("peer: python-redis-lock `Lock` (`acquire(blocking=False)` + `release()`)",
        python_redis_lock)
    add("peer: pottery `Redlock` (one master)", pottery)
    add("peer: portalocker `RedisLock`", portalocker)
    add("peer: tooz redis driver (`get_lock`)", tooz)
    return rows


# -- contended hand-off ---------------------------------------------------------------------------


CONTENDED = {
    "tenure": "tenure: `with lock.acquire(timeout=60)` (woken by BLPOP; backoff 10 ms..1 s)",
    "redis-py": "redis-py `Lock`: `with client.lock(name, timeout=30)` (polls every 0.1 s)",
    "python-redis-lock": "python-redis-lock `with Lock(...)` (BLPOP on a signal list)",
}


def contended(url: str, seconds: float = 3.0, workdir: Path | None = None) -> list[HandOff]:
    """8 processes per library loop acquire / hold 1 ms / release on one name for `seconds`.

    Each process appends "acquire|release <monotonic ns> <pid>" lines to a shared log
    (O_APPEND, one write per line): right after its acquire returned, and right before it
    calls release. CLOCK_MONOTONIC is one clock for every process of the host, so the lines
    of all processes can be merged in time order. A hand-off is an acquire by another process
    than the last releaser; its latency runs from that release call to the acquire's return,
    so it includes the release's own round trip.

    Example::

        results = contended("redis://127.0.0.1:6399/0", seconds=3)
    """
    results = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for library, label in CONTENDED.items():
            log = Path(tmp) / f"{library}.log"
            processes = [
                subprocess.Popen([sys.executable, __file__, "--worker", library, url,
                                  f"contended-{library}", str(seconds), str(log)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for _ in range(CONTENDERS)]
            for process in processes:  # each is connected and warmed up, then all start at once
                assert process.stdout is not None and process.stdin is not None
                if process.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"a {library} contender did not start")
            start = time.monotonic() + 0.05
            for process in processes:
                assert process.stdin is not None
                process.stdin.write(f"{start}\n")
                process.stdin.close()
            for process in processes:
                if process.wait(timeout=seconds + 120) != 0:
                    raise RuntimeError(f"a {library} contender failed")
                assert process.stdout is not None
                process.stdout.close()
            results.append(hand_offs(label, log, seconds))
    return results


def hand_offs(label: str, log: Path, seconds: float) -> HandOff:
    """Read a contended run's log (see `contended`).

    Example::

        result = hand_offs("tenure", Path("/tmp/tenure.log"), 3.0)
    """
    events = sorted((int(ns), kind, int(pid)) for kind, ns, pid in
                    (line.split() for line in log.read_text().splitlines()))
    last_release: tuple[int, int] | None = None
    acquisitions, latencies, handoffs = 0, [], []
    for ns, kind, pid in events:
        if kind == "release":
            last_release = (ns, pid)
        else:
            acquisitions += 1
            if last_release is not None:
                latencies.append((ns - last_release[0]) / 1e9)
                if last_release[1] != pid:
                    handoffs.append(latencies[-1])
    return HandOff(label, seconds, acquisitions, latencies, handoffs)


def worker(library: str, url: str, name: str, seconds: float, log: str) -> None:
    """One contended process (see `contended`): says "ready" once connected, then starts at
    the monotonic time it reads from stdin."""
    import redis

    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def record(kind: str) -> None:
        os.write(fd, f"{kind} {time.monotonic_ns()} {os.getpid()}\n".encode())

    client = redis.Redis.from_url(url.split("?")[0])
    lock: Any
    if library == "tenure":
        store = tenure.connect(url)
        lock = store.lock(name, ttl=LEASE_SECONDS)
        store.lock(f"{name}-warm-{os.getpid()}").try_acquire().release()  # type: ignore[union-attr]
        acquire: Callable[[], Any] = lambda: lock.acquire(timeout=60)  # noqa: E731
    elif library == "redis-py":
        lock = client.lock(name, timeout=LEASE_SECONDS)
        acquire = lambda: lock  # noqa: E731
    else:
        import redis_lock

        lock = redis_lock.Lock(client, name, expire=LEASE_SECONDS)
        acquire = lambda: lock  # noqa: E731
    client.ping()
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.monotonic()))
    deadline = start + seconds
    while time.monotonic() < deadline:
        with acquire() as _:
            record("acquire")
            time.sleep(HOLD_SECONDS)
            record("release")
    os.close(fd)
    if library == "tenure":
        store.close()


# -- renewal ------------------------------------------------------------------------------------


@dataclass
class Renewal:
    """Renewal ticks of `leases` held leases: what one tick cost, by three counts."""

    leases: int
    renewed: float  # leases renewed per tick
    round_trips: float  # requests the client sent, per tick
    scripts: float  # EVALSHA/EVAL calls the server ran, per tick
    inner: float  # commands those scripts ran inside the server, per tick


def renewal_round_trips(url: str, sizes: tuple[int, ...] = (1, 100, 1000),
                        ttl: float = 3.0) -> list[Renewal]:
    """Hold `size` leases in one store and count what each renewal tick costs.

    tenure's monitor renews the leases every ttl/3. Over three ticks, seen by wrapping the
    store's `renew`: round trips are the requests redis-py's connections sent during those
    calls; scripts and the commands they ran are the server's INFO commandstats, taken just
    before the first tick and just after the third (Redis counts the commands a script runs
    like any other; INFO itself is left out).

    Example::

        rows = renewal_round_trips("redis://127.0.0.1:6399/0", sizes=(1, 100))
    """
    import redis

    with redis.Redis.from_url(url.split("?")[0]) as client:
        return [_renewal(url, client, size, ttl) for size in sizes]


def _renewal(url: str, client: Any, size: int, ttl: float) -> Renewal:
    from redis.connection import AbstractConnection

    send = AbstractConnection.send_packed_command
    sent, ticks, requests, renewed = [0], [0], [0], [0]
    stats: list[dict[str, int]] = []

    def counted_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        return send(self, *args, **kwargs)

    with tenure.connect(url) as store:
        leases = [store.lock(f"renew-{size}-{i}", ttl=ttl).try_acquire() for i in range(size)]
        assert all(lease is not None for lease in leases)
        renew = store.backend.renew

        def counted(grants: Any, seconds: float) -> Any:
            if not stats:
                stats.append(_commandstats(client))  # just before the first tick
            started = sent[0]
            try:
                return renew(grants, seconds)
            finally:
                if ticks[0] < TICKS:
                    ticks[0] += 1
                    requests[0] += sent[0] - started
                    renewed[0] += len(grants)
                    if ticks[0] == TICKS:
                        stats.append(_commandstats(client))  # just after the last

        AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign]
        store.backend.renew = counted  # type: ignore[method-assign]
        try:
            deadline = time.monotonic() + 10 * ttl
            while len(stats) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            store.backend.renew = renew  # type: ignore[method-assign]
            AbstractConnection.send_packed_command = send  # type: ignore[method-assign]
        if len(stats) < 2:
            raise RuntimeError(f"no {TICKS} renewal ticks within {10 * ttl:g} s")
        before, after = stats
        scripts = sum(after.get(name, 0) - before.get(name, 0)
                      for name in ("cmdstat_evalsha", "cmdstat_eval"))
        total = sum(after.values()) - sum(before.values())
        for lease in leases:
            lease.release()  # type: ignore[union-attr]
    return Renewal(size, renewed[0] / TICKS, requests[0] / TICKS, scripts / TICKS,
                   (total - scripts) / TICKS)


def _commandstats(client: Any) -> dict[str, int]:
    stats = client.info("commandstats")
    return {key: int(value["calls"]) for key, value in stats.items() if key != "cmdstat_info"}


# -- running it alone -----------------------------------------------------------------------------


def extra_tables(url: str, workdir: Path | None = None, seconds: float = 3.0) -> str:
    """Markdown for the redis section besides the uncontended rows: the contended hand-off
    and the renewal round trips, each with how it was measured (bench/run.py puts it below
    the section's table).

    Example::

        note = extra_tables(server.url, Path(tmp))
    """
    return "\n".join([
        f"Contended hand-off: {CONTENDERS} OS processes per library loop acquire, hold "
        f"{HOLD_SECONDS * 1e3:g} ms, release on one name for {seconds:g} s, each with its default "
        "way of waiting. Each process logs `time.monotonic()` right after its acquire returned "
        "and right before it calls release; CLOCK_MONOTONIC is one clock for all processes of "
        "a host, so the logs merge in time order. \"Release to next acquire\" runs from a "
        "release call to the next acquire's return, whoever acquired (the release's own round "
        "trip included); a hand-off is such a pair where another process took the lock.",
        "",
        contended_table(contended(url, seconds, workdir)),
        "",
        "Renewal: one store holds 1, 100 or 1,000 leases (ttl 3 s, renewed every 1 s) while "
        "tenure's lease monitor renews them; three ticks per size. Round trips are the "
        "requests redis-py's connections sent during the store's `renew` calls; scripts and "
        "the commands they ran come from the server's INFO commandstats.",
        "",
        renewal_table(renewal_round_trips(url)),
    ])


def main(argv: list[str] | None = None) -> int:
    """Start a server, run the three measurements, print tables.

    Example::

        main(["--rounds", "5"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--contended-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    import run  # bench/run.py: the interleaved measuring loop and its Case

    with tempfile.TemporaryDirectory(prefix="tenure-redis-bench-") as tmp, ExitStack() as stack:
        server = start_redis(Path(tmp) / "redis", stack)
        if not isinstance(server, Server):
            print(f"redis bench not run: {server}")
            return 1
        rows = uncontended_rows(server.url, stack)
        cases = [run.Case(SECTION, row.kind, row.label, row.run) for row in rows]
        run.measure(cases, args.rounds, args.seconds, budget=90.0)
        print(f"## {SECTION}\n")
        print(uncontended_table(cases))
        print()
        print(extra_tables(server.url, Path(tmp), args.contended_seconds))
        print()
        print("\n".join(f"- {name}: {value}" for name, value in server.facts))
    return 0


def uncontended_table(cases: list[Any]) -> str:
    """Markdown: median cycles/s of each case, and floor ÷ case per round (median) for the
    tenure and peer rows, against the client-API floor and the hand-packed one (sync rows),
    or the async floor (async rows).

    Example::

        print(uncontended_table(cases))
    """
    by_label = {case.label: case for case in cases}
    floor, packed = by_label[FLOOR], by_label[PACKED_FLOOR]
    async_floor = next(case for case in cases if case.kind == "floor" and "async" in case.label)

    def ratio(reference: Any, case: Any) -> str:
        pairs = zip(reference.rates, case.rates, strict=False)
        return f"{statistics.median(f / t for f, t in pairs):.2f}x"

    lines = ["| case | cycles/s (median) | µs/cycle | client-API floor ÷ this "
             "| hand-packed floor ÷ this |", "|---|---:|---:|---:|---:|"]
    for case in cases:
        first = second = ""
        if case.kind != "floor":
            if "async" in case.label:
                first = ratio(async_floor, case) + " (async floor)"
            else:
                first, second = ratio(floor, case), ratio(packed, case)
        lines.append(f"| {case.label} | {case.median:,.0f} | {1e6 / case.median:.0f} "
                     f"| {first} | {second} |")
    return "\n".join(lines)


def contended_table(results: list[HandOff]) -> str:
    """Markdown: hand-offs/s and latency percentiles per library.

    Example::

        print(contended_table(contended(url)))
    """
    lines = [f"| {CONTENDERS} processes, hold 1 ms | acquisitions/s | release to next acquire: "
             "p50, p99 | hand-offs to another process /s | their latency: p50, p99 |",
             "|---|---:|---:|---:|---:|"]

    def ms(values: list[float]) -> str:
        return f"{percentile(values, 0.5) * 1e3:.2f}, {percentile(values, 0.99) * 1e3:.2f} ms"

    for result in results:
        lines.append(f"| {result.label} | {result.acquisitions / result.seconds:,.0f} "
                     f"| {ms(result.latencies)} | {result.per_second:,.0f} "
                     f"| {ms(result.handoffs)} |")
    return "\n".join(lines)


def renewal_table(results: list[Renewal]) -> str:
    """Markdown: what one renewal tick costs, by number of held leases.

    Example::

        print(renewal_table([Renewal(1, 1.0, 1.0, 1.0, 2.0)]))
    """
    lines = ["| leases held | leases renewed per tick | round trips per tick "
             "| scripts per tick (server) | commands inside them per tick (server) |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.leases:,} | {r.renewed:g} | {r.round_trips:g} | {r.scripts:g} "
              f"| {r.inner:g} |" for r in results]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        library, url, name, seconds, log = sys.argv[2:7]
        worker(library, url, name, float(seconds), log)
        sys.exit(0)
    sys.exit(main())
