"""Redis-specific behaviour the conformance suite cannot express: one round trip per renewal
tick for 1,000 leases (counted by the client and by the server), waiters woken by the release
(BLPOP on the name's signal list), the restart grace and leases reclaimed after the server lost
its data, dropped connections (pub/sub included), URL forms and options, and the key layout
(one cluster slot per name). The conformance suite runs everything else on the same server.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from redis.asyncio.connection import AbstractConnection as AsyncConnection
from redis.connection import AbstractConnection
from redis.crc import key_slot
from servers import RedisServer, ServiceMissing, service_missing
from waiting import call, eventually, wait_until

import tenure
import tenure.aio
from tenure._async.stores.redis import DEFAULT_RESTART_GRACE, name_keys, parse_options

pytestmark = pytest.mark.anyio


def uptime(port: int) -> int:
    with redis.Redis(port=port) as client:
        return int(client.info("server")["uptime_in_seconds"])


@pytest.fixture
def server(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's server once it is older than the restart grace (a younger one grants no
    new name), and again so after the test, which may have restarted it."""
    wait_until(lambda: uptime(redis_server.port) >= DEFAULT_RESTART_GRACE, 10,
               "the server to outlive the restart grace")
    yield redis_server
    wait_until(lambda: uptime(redis_server.port) >= DEFAULT_RESTART_GRACE, 10,
               "the restarted server to outlive the restart grace")


@pytest.fixture
def url(server: RedisServer) -> str:
    return f"{server.url}?prefix=t{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def admin(server: RedisServer) -> Iterator[Any]:
    with redis.Redis(port=server.port) as client:
        yield client



def connect(url: str, api: str, **options: Any) -> Any:
    return (tenure.aio if api == "async" else tenure).connect(url, **options)


class Sent:
    """The requests redis-py's connections send while counting: one send, one round trip."""

    def __init__(self) -> None:
        self.commands: list[list[bytes]] = []
        self.counting = False

    def __enter__(self) -> Sent:
        self._send = AbstractConnection.send_packed_command
        self._async_send = AsyncConnection.send_packed_command
        sent, send, async_send = self, self._send, self._async_send

        def send_packed_command(connection: Any, command: Any, *args: Any, **kw: Any) -> Any:
            sent.record(command)
            return send(connection, command, *args, **kw)

        async def async_send_packed_command(connection: Any, command: Any, *args: Any,
                                            **kw: Any) -> Any:
            sent.record(command)
            return await async_send(connection, command, *args, **kw)

        AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
        AsyncConnection.send_packed_command = async_send_packed_command  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        AbstractConnection.send_packed_command = self._send  # type: ignore[method-assign]
        AsyncConnection.send_packed_command = self._async_send  # type: ignore[method-assign]

    def record(self, command: Any) -> None:
        if self.counting:
            data = command if isinstance(command, bytes) else b"".join(command)
            self.commands.append(data.split(b"\r\n")[2:7:2])  # the first 3 arguments


def script_calls(client: Any) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(name, {}).get("calls", 0))
               for name in ("cmdstat_evalsha", "cmdstat_eval"))


# -- batched renewal ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_renewing_1000_leases_is_one_round_trip(url: str, admin: Any, api: str) -> None:
    store = connect(url, api)
    backend = store.backend
    try:
        reclaims: list[int] = []
        renew = backend.renew
        if api == "async":
            async def watched(grants: Any, ttl: float) -> Any:
                reclaims.append(len(grants))
                return await renew(grants, ttl)
        else:
            def watched(grants: Any, ttl: float) -> Any:
                reclaims.append(len(grants))
                return renew(grants, ttl)
        backend.renew = watched
        grants = [await call(backend.try_acquire(f"batch/{i}", "me", 30.0, 1))
                  for i in range(1000)]
        assert all(grant is not None for grant in grants)
        # The reader renews what is held once it connected; let that happen first.
        await eventually(lambda: reclaims, 10, "the reader's first renewal")
        backend.renew = renew

        before = script_calls(admin)
        with Sent() as sent:
            sent.counting = True
            results = await call(backend.renew(grants, 30.0))
            sent.counting = False
        assert results == grants
        assert len(sent.commands) == 1, sent.commands[:5]
        assert sent.commands[0][0] == b"EVALSHA" and sent.commands[0][2] == b"1000"
        assert script_calls(admin) - before == 1  # the server ran one script for all 1,000
        renewed_at = time.monotonic()
        with admin.pipeline(transaction=False) as pipeline:
            for grant in grants:
                pipeline.pttl(grant.key)
            ttls = pipeline.execute()
        assert min(ttls) > 30_000 - (time.monotonic() - renewed_at) * 1000 - 1000
    finally:
        await call(store.close())


def test_the_monitor_renews_every_held_lease_in_one_round_trip_per_tick(url: str) -> None:
    ttl = 3.0  # renewed every 1 s; leases due within 0.5 s of each other go in one batch
    with tenure.connect(url) as store:
        started = time.monotonic()
        leases = [store.lock(f"held/{i}", ttl=ttl).try_acquire() for i in range(1000)]
        spread = time.monotonic() - started
        assert all(lease is not None for lease in leases)
        ticks: list[tuple[set[str], int]] = []  # (leases renewed, commands sent), per tick
        renew = store.backend.renew
        with Sent() as sent:
            def counted(grants: Any, seconds: float) -> Any:
                before = len(sent.commands)
                try:
                    return renew(grants, seconds)
                finally:
                    ticks.append(({g.lease_id for g in grants}, len(sent.commands) - before))

            sent.counting = True
            store.backend.renew = counted  # type: ignore[method-assign]
            try:
                wait_until(lambda: len(ticks) >= 2, 10, "two renewal ticks")
            finally:
                store.backend.renew = renew  # type: ignore[method-assign]
        assert [commands for _, commands in ticks] == [1] * len(ticks)
        assert set().union(*(renewed for renewed, _ in ticks[:2])) == {
            lease.grant.lease_id for lease in leases}
        if spread < 0.4:  # taken within one batching window: all in every tick
            assert [len(renewed) for renewed, _ in ticks[:2]] == [1000, 1000]
        assert not any(lease.lost for lease in leases)


# -- waking waiters --------------------------------------------------------------------------------


def blocked(admin: Any) -> int:
    """Clients blocked in BLPOP: waiters waiting for a release."""
    return sum(1 for client in admin.client_list() if client["cmd"] == "blpop")


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_waiter_wakes_on_the_release_not_after_its_backoff(
        url: str, admin: Any, api: str) -> None:
    holder, waiter = connect(url, api), connect(url, api)
    lease = await call(holder.lock("handoff", ttl=30).try_acquire())
    lock = waiter.lock("handoff", ttl=30, min_wait=10, max_wait=10)  # polling alone: 10 s
    got: dict[str, Any] = {}
    try:
        if api == "async":
            async def wait() -> None:
                got["lease"] = await lock.acquire(timeout=30)
                got["at"] = time.monotonic()

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await eventually(lambda: blocked(admin) >= 1, 10, "the waiter to block")
                released_at = time.monotonic()
                await lease.release()
        else:
            def wait_in_thread() -> None:
                got["lease"] = lock.acquire(timeout=30)
                got["at"] = time.monotonic()

            thread = threading.Thread(target=wait_in_thread)
            thread.start()
            wait_until(lambda: blocked(admin) >= 1, 5, "the waiter to block")
            released_at = time.monotonic()
            lease.release()
            thread.join(timeout=30)
        assert got["at"] - released_at < 0.5, "the waiter slept out its backoff"
        assert got["lease"].token > lease.token
        await call(got["lease"].release())
    finally:
        await call(holder.close())
        await call(waiter.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_connections_killed_by_the_server_pubsub_too(
        url: str, admin: Any, api: str) -> None:
    holder, waiter = connect(url, api), connect(url, api)
    lease = await call(holder.lock("killed", ttl=1.0).try_acquire())
    lock = waiter.lock("killed", ttl=1.0, min_wait=10, max_wait=10)
    with pytest.raises(tenure.LockTimeout):
        await call(lock.acquire(timeout=0.2))
    killed = admin.client_kill_filter(_type="normal", skipme=True)
    killed += admin.client_kill_filter(_type="pubsub")  # the holder's reader
    assert killed >= 3
    try:
        # Renewal goes on through new connections; the reader reconnects by itself.
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            assert not lease.lost, lease.lost_reason
            await anyio.sleep(0.05)
        assert sum(1 for c in admin.client_list() if c["flags"] == "P") >= 1
        got: dict[str, Any] = {}
        if api == "async":
            async def wait() -> None:
                got["lease"] = await lock.acquire(timeout=30)
                got["at"] = time.monotonic()

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await eventually(lambda: blocked(admin) >= 1, 10, "the waiter to block")
                released_at = time.monotonic()
                await lease.release()
        else:
            def wait_in_thread() -> None:
                got["lease"] = lock.acquire(timeout=30)
                got["at"] = time.monotonic()

            thread = threading.Thread(target=wait_in_thread)
            thread.start()
            wait_until(lambda: blocked(admin) >= 1, 5, "the waiter to block")
            released_at = time.monotonic()
            lease.release()
            thread.join(timeout=30)
        assert got["at"] - released_at < 0.5
        assert got["lease"].token > lease.token
        await call(got["lease"].release())
    finally:
        await call(holder.close())
        await call(waiter.close())


# -- data loss and restarts -----------------------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_holders_keep_their_leases_through_a_restart_that_lost_everything(
        server: RedisServer, url: str, api: str) -> None:
    holder, other = connect(url, api), connect(url, api)
    try:
        lock = await call(holder.lock("restart", ttl=2).try_acquire())
        slots = [await call(holder.semaphore("pool", 2, ttl=2).try_acquire()) for _ in range(2)]
        held = [lock, *slots]
        server.restart(graceful=False)
        restarted = time.monotonic()
        # Refused in the grace (the holders reclaim meanwhile), refused after (they did).
        while time.monotonic() - restarted < 2 * DEFAULT_RESTART_GRACE + 1:
            assert await call(other.lock("restart", ttl=2).try_acquire()) is None
            assert await call(other.semaphore("pool", 2, ttl=2).try_acquire()) is None
            assert not any(lease.lost for lease in held), [x.lost_reason for x in held]
            await anyio.sleep(0.05)
        listed = await call(other.leases())
        assert sorted((i.name, i.slot, i.token) for i in listed) == sorted(
            (lease.name, lease.slot, lease.token) for lease in held)
        for lease in held:
            assert await call(lease.release()) is True
        again = await call(other.lock("restart", ttl=2).try_acquire())
        assert again is not None and again.token > lock.token
        assert await call(other.semaphore("pool", 2, ttl=2).try_acquire()) is not None
    finally:
        await call(holder.close())
        await call(other.close())


async def test_a_young_server_grants_no_new_name_within_the_restart_grace(
        server: RedisServer, url: str) -> None:
    server.restart(graceful=False)
    with tenure.connect(url) as store, tenure.connect(
            url.replace("?", "?restart_grace=0&")) as impatient:
        assert store.lock("young").try_acquire() is None
        assert impatient.lock("eager").try_acquire() is not None
        wait_until(lambda: uptime(server.port) >= DEFAULT_RESTART_GRACE, 10, "the grace to end")
        assert store.lock("young").try_acquire() is not None


def first_grant_and_reclaim(backend: Any, name: str) -> Any:
    """A grant on a new sync store, once the store's reader connected and renewed it."""
    renew, renewed = backend.renew, threading.Event()

    def watched(grants: Any, ttl: float) -> Any:
        try:
            return renew(grants, ttl)
        finally:
            renewed.set()

    backend.renew = watched
    try:
        grant = backend.try_acquire(name, "me", 30.0, 1)
        assert renewed.wait(10), "the reader did not connect"
    finally:
        backend.renew = renew
    return grant


async def test_a_released_lease_never_comes_back_after_data_loss(url: str, admin: Any) -> None:
    with tenure.connect(url) as store:
        backend = store.backend
        grant = first_grant_and_reclaim(backend, "gone")
        keys = name_keys(backend.prefix, "gone")
        admin.delete(keys.slot0, keys.counter)  # what a restart without persistence does
        # While nothing else happened to the name, a renewal writes the lease back...
        assert backend.renew([grant], 30.0) == [grant]
        assert admin.exists(keys.slot0)
        # ...but once it was released (after the loss), a late renewal cannot revive it.
        admin.delete(keys.slot0, keys.counter)
        assert backend.release(grant) is False
        assert backend.renew([grant], 30.0) == [tenure.LostReason.EXPIRED]
        assert not admin.exists(keys.slot0)
        newer = backend.try_acquire("gone", "me", 30.0, 1)
        assert newer is not None and newer.token > grant.token


async def test_tokens_grow_past_a_counter_that_went_back(url: str, admin: Any) -> None:
    """A failover to a replica that missed increments leaves an old counter behind."""
    with tenure.connect(url) as store:
        first = store.lock("fenced").try_acquire()
        first.release()
        keys = name_keys(store.backend.prefix, "fenced")
        admin.set(keys.counter, 5)
        second = store.lock("fenced").try_acquire()
        assert second.token > first.token
        second.release()
        admin.set(keys.counter, second.token + 10**9)  # a counter ahead of the clock is kept
        third = store.lock("fenced").try_acquire()
        assert third.token == second.token + 10**9 + 1
        third.release()


async def test_break_is_reported_as_broken(url: str) -> None:
    with tenure.connect(url) as store:
        backend = store.backend
        grants = [backend.try_acquire("broken", "me", 30.0, 3) for _ in range(3)]
        assert backend.break_lease("broken") == 3
        assert backend.renew(grants, 30.0) == [tenure.LostReason.BROKEN] * 3
        assert [backend.release(grant) for grant in grants] == [False] * 3


# -- URLs, options, errors, keys ------------------------------------------------------------------


class UnixSocketRedis(RedisServer):
    name = "redis-unix"

    def command(self, port: int) -> list[str]:
        return [*super().command(port), "--unixsocket", str(self.socket), "--unixsocketperm",
                "700"]

    @property
    def socket(self) -> Path:
        return self.workdir / "redis.sock"


def test_unix_socket_url(tmp_path: Path) -> None:
    server = UnixSocketRedis(tmp_path)
    try:
        server.start()
    except ServiceMissing as exc:
        service_missing(str(exc))
    try:
        with tenure.connect(f"unix://{server.socket}?db=3&restart_grace=0") as store:
            lease = store.lock("over-a-socket").try_acquire()
            assert lease is not None
            with redis.Redis(unix_socket_path=str(server.socket), db=3) as client:
                assert client.exists(lease.grant.key)
            lease.release()
    finally:
        server.stop()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_errors_name_the_store_and_never_the_password(server: RedisServer,
                                                            api: str) -> None:
    wrong = f"redis://someone:hunter2@127.0.0.1:{server.port}/0"
    store = connect(wrong, api, timeout=2)
    try:
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(store.lock("jobs").try_acquire())
        message = str(raised.value)
        assert "hunter2" not in message and "hunter2" not in repr(store)
        assert "redis://someone:***@127.0.0.1" in message and "'jobs'" in message
        assert "password" in message
    finally:
        await call(store.close())
    closed = tenure.StoreUnavailable
    refused = connect(f"redis://127.0.0.1:{server.port + 1 if server.port < 65535 else 1}/0",
                      api, timeout=1)
    with pytest.raises(closed, match="check that the server is running"):
        await call(refused.lock("jobs").try_acquire())
    await call(refused.close())


@pytest.mark.parametrize(("url", "options", "message"), [
    ("redis://h:6379/0?bogus=1", {}, "unknown option.*bogus.*accepted: prefix, timeout"),
    ("redis://h:6379/0", {"prefix": "a{b}"}, "no '{' or '}'"),
    ("redis://h:6379/0?timeout=0", {}, "timeout=.0. is out of range"),
    ("redis://h:6379/0", {"timeout": "soon"}, "timeout='soon' is out of range"),
    ("redis://h:6379/0", {"restart_grace": -1}, "restart_grace=-1 is out of range"),
    ("redis://h:6379/0?ssl_ca_certs=/ca.pem", {}, "TLS settings: use a rediss:// URL"),
    ("redis://h:6379/zero", {}, "the path is the database number"),
    ("redis://h:6379/0", {"db": "one"}, "db='one' is not a database number"),
    ("redis://a:6379,b:6379/0", {}, "names several servers"),
    ("unix://", {}, "names no"),
])
def test_bad_urls_and_options(url: str, options: dict[str, Any], message: str) -> None:
    for module in (tenure, tenure.aio):
        with pytest.raises(tenure.InvalidArgument, match=message):
            module.connect(url, **options)


def test_options_from_the_url_and_keywords() -> None:
    settings = parse_options("rediss://u:pw@h:6380/2?prefix=app:&timeout=1.5&ssl_cert_reqs=none",
                             {"timeout": 3})
    assert (settings.prefix, settings.timeout, settings.driver) == (
        "app:", 3.0, {"ssl_cert_reqs": "none"})
    assert settings.url == "rediss://u:pw@h:6380/2" and "pw" not in repr(settings)
    assert parse_options("unix:///run/redis.sock?db=4", {}).driver == {"db": 4}


@pytest.mark.parametrize("name", ["jobs", "a/b", "{braces}", "}{", "x" * 1024, "名前", "\n",
                                  "tenure:{x}:s0"])
def test_keys_of_a_name_share_one_cluster_slot(name: str) -> None:
    keys = name_keys("app:", name)
    tagged = [keys.slot0, keys.counter, keys.limit, keys.base + "s7", keys.base + "b7"]
    assert {key_slot(key.encode()) for key in tagged} == {key_slot(keys.slot0.encode())}
    assert keys.base.count("{") == 1 and keys.base.count("}") == 1
    assert keys.base.startswith("app:{") and keys.base.endswith("}:")


def test_distinct_names_get_distinct_keys() -> None:
    names: Callable[[str], str] = lambda name: name_keys("p:", name).base  # noqa: E731
    assert len({names(name) for name in ["a/b", "a_b", "a b", "A/b", "a/b "]}) == 5


def test_the_docs_quote_the_scripts_as_sent() -> None:
    from tenure._async.stores import redis as store

    docs = (Path(__file__).parents[1] / "docs" / "stores" / "redis.md").read_text()
    for script in (store.ACQUIRE, store.RENEW, store.RELEASE):
        assert script.strip() in docs
