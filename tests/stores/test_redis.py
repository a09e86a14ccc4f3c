"""Redis-specific behaviour the conformance suite cannot express: one round trip per renewal
tick for 1,000 leases (counted by the client and by the server), waiters woken by the release
(BLPOP on the name's signal list), the restart grace and leases reclaimed after the server lost
its data, dropped connections (pub/sub included), URL forms and options, and the key layout
(one cluster slot per name). The conformance suite runs everything else on the same server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
import redis.asyncio
from handover import acquired_after_release
from redis.asyncio.connection import AbstractConnection as AsyncConnection
from redis.connection import AbstractConnection
from redis.crc import key_slot
from refusals import assert_password_hidden, refused_within_a_second
from servers import RedisServer, start_or_skip
from waiting import call, eventually, wait_until

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.stores
from tenure._async.stores.redis import (
    ACQUIRE,
    DEFAULT_RESTART_GRACE,
    LAST_ACQUIRE,
    WAKE_ACQUIRE,
    name_keys,
    packed,
    parse_options,
)
from tenure._async.stores.redis._connections import Undo, UndoAll
from tenure._async.stores.redis._scripts import SCRIPTS
from tenure.chaos._proxy import Proxy, ProxyHost

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's server once it is older than the restart grace (a younger one grants no
    new name), and again so after the test, which may have restarted it."""
    redis_server.wait_past_restart_grace(DEFAULT_RESTART_GRACE)
    yield redis_server
    redis_server.wait_past_restart_grace(DEFAULT_RESTART_GRACE)


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
            held = {lease.grant.lease_id for lease in leases}
            try:
                # Leases taken over a longer spread (a loaded machine) fall into more batches:
                # every one renewed, whatever the number of ticks that takes.
                wait_until(lambda: len(ticks) >= 2 and set().union(
                    *(renewed for renewed, _ in list(ticks))) == held, 10,
                    "every lease renewed")
            finally:
                store.backend.renew = renew  # type: ignore[method-assign]
        assert [commands for _, commands in ticks] == [1] * len(ticks)
        # Taken well within one batching window (0.5 s, less the renewal's +-10 % jitter of
        # 1 s on each side): all in every tick.
        if spread < 0.2:
            assert [len(renewed) for renewed, _ in ticks[:2]] == [1000, 1000]
        assert not any(lease.lost for lease in leases)


# -- waking waiters --------------------------------------------------------------------------------


def blocked(admin: Any) -> int:
    """Clients blocked in BLMOVE or BLPOP: waiters waiting for a release."""
    return sum(1 for client in admin.client_list() if client["cmd"] in ("blmove", "blpop"))


async def assert_woken_by_the_release(api: str, admin: Any, lock: Any, lease: Any) -> None:
    """`lock`'s waiter (a 10 s backoff) blocks on the server, then gets the lock within 0.5 s
    of `lease`'s release: the release's notification woke it.

    Example::

        await assert_woken_by_the_release(api, admin, waiter.lock("jobs", min_wait=10), lease)
    """
    got, seconds = await acquired_after_release(
        api, lock, lambda: blocked(admin) >= 1, "the waiter to block",
        lambda: call(lease.release()), within=10 if api == "async" else 5)
    assert seconds < 0.5, "the waiter slept out its backoff"
    assert got.token > lease.token
    await call(got.release())


async def assert_waiter_wakes_on_release(url: str, admin: Any, api: str) -> None:
    """A waiter whose backoff alone would sleep 10 s gets the lock within 0.5 s of its release:
    the release's notification woke it."""
    holder, waiter = connect(url, api), connect(url, api)
    lease = await call(holder.lock("handoff", ttl=30).try_acquire())
    lock = waiter.lock("handoff", ttl=30, min_wait=10, max_wait=10)  # polling alone: 10 s
    try:
        await assert_woken_by_the_release(api, admin, lock, lease)
    finally:
        await call(holder.close())
        await call(waiter.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_waiter_wakes_on_the_release_not_after_its_backoff(
        url: str, admin: Any, api: str) -> None:
    await assert_waiter_wakes_on_release(url, admin, api)


def acquires(commands: list[list[bytes]]) -> list[list[bytes]]:
    """The requests among `commands` that begin with an acquire script (not behind a wait)."""
    shas = {hashlib.sha1(text.encode()).hexdigest().encode()
            for text in (ACQUIRE, WAKE_ACQUIRE, LAST_ACQUIRE)}
    return [command for command in commands
            if command[:1] in ([b"EVALSHA"], [b"EVAL"]) and command[1:2][0] in shas]


def test_the_wake_up_takes_the_lease_and_returns_it(url: str, admin: Any) -> None:
    """wait_and_acquire: the acquire pipelined behind the BLMOVE runs in the wake-up's server
    turn, and its grant is returned, with no other request sent."""
    with tenure.connect(url) as holder, tenure.connect(url) as waiting:
        backend = waiting.backend
        lease = holder.lock("relay", ttl=30).try_acquire()
        assert backend.try_acquire("relay", "w", 30.0, 1) is None  # connected; found it held
        admin.script_load(WAKE_ACQUIRE)
        got: dict[str, Any] = {}

        def wait() -> None:
            got["grant"] = backend.wait_and_acquire("relay", "w", 30.0, 1, 30.0, 30.0)

        with Sent() as sent:
            sent.counting = True
            thread = threading.Thread(target=wait)
            thread.start()
            wait_until(lambda: blocked(admin) >= 1, 5, "the waiter to block")
            released_at = time.monotonic()
            assert lease.release() is True
            thread.join(timeout=30)
            sent.counting = False
        grant = got["grant"]
        assert grant is not None and grant.token > lease.token and grant.holder == "w"
        assert grant.sent_at <= released_at  # the lease's deadline counts from the BLMOVE
        assert admin.get(grant.key) == backend._value(grant)
        assert [b"BLMOVE"] in [command[:1] for command in sent.commands]
        assert not acquires(sent.commands), "a try after the wake-up"
        assert backend.release(grant) is True
        assert not admin.exists(name_keys(backend.prefix, "relay").base + "w"
                                + backend._id_prefix)


def test_a_wait_that_no_release_ends_takes_a_free_slot_at_its_end(url: str, admin: Any) -> None:
    """The last block of a wait has an acquire behind it whether or not a release came: a
    lease that expired meanwhile (no release, no wake-up) is taken without another request."""
    with tenure.connect(url) as holder, tenure.connect(url) as waiting:
        backend = waiting.backend
        lease = holder.backend.try_acquire("lapse", "h", 0.3, 1)  # never renewed nor released
        assert lease is not None
        # Nor by the holder's reader, which renews what its store holds once it connects (late
        # on a loaded machine: a renewal among the requests counted below).
        holder.backend._held.pop(lease.lease_id)
        assert backend.try_acquire("lapse", "w", 30.0, 1) is None  # connected; found it held
        admin.script_load(LAST_ACQUIRE)
        with Sent() as sent:
            sent.counting = True
            grant = backend.wait_and_acquire("lapse", "w", 30.0, 1, 0.6, 0.6)
            sent.counting = False
        assert grant is not None and grant.holder == "w" and grant.token > lease.token
        # Not the readers' commands, nor a renewal: the waiting store's reader, connecting late
        # on a loaded machine, renews what its store holds by then (the lease just taken).
        requests = [command[0] for command in sent.commands
                    if command[0] in (b"BLMOVE", b"EVALSHA", b"EVAL")
                    and command[1:2] != [SCRIPTS.renew.sha]]
        assert requests == [b"BLMOVE"], sent.commands  # and the acquire behind it
        assert backend.release(grant) is True


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
        await assert_woken_by_the_release(api, admin, lock, lease)
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
        server.wait_past_restart_grace(DEFAULT_RESTART_GRACE)
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


async def test_a_release_that_could_not_reach_the_server_is_not_written_back(
        server: RedisServer, url: str, admin: Any) -> None:
    """A release that failed (the server was down) gives the lease up all the same: when the
    server comes back without its data, the store's reclaim does not write it back (a ghost
    that would refuse every other holder for a ttl; a quorum master killed while a late grant
    was released held it so)."""
    with tenure.connect(url) as store:
        backend = store.backend
        grant = first_grant_and_reclaim(backend, "given-up")
        server.stop(graceful=False)
        with pytest.raises(tenure.StoreUnavailable):
            backend.release(grant)
        server.start_again()
        backend._reclaim()  # what the store's reader does once it reconnected
        assert not admin.exists(name_keys(backend.prefix, "given-up").slot0)


async def test_a_renewal_sent_before_a_retoken_does_not_forget_the_lease(url: str) -> None:
    """A quorum retokens a master's late grant when it joins the lease. A renewal (the
    reconnect's reclaim) sent with the old value is answered "taken"; the lease lives on under
    its new token and must stay known, or the next renewal frees it as released (a quorum lease
    was lost 1.8 s after one master froze)."""
    with tenure.connect(url) as store:
        backend = store.backend
        grant = backend.try_acquire("joined", "me", 30.0, 1)
        retokened = backend._retoken(grant, grant.token - 1)
        assert retokened is not None
        assert backend.renew([grant], 30.0) == [tenure.LostReason.TAKEN]  # the old value
        assert backend.renew([retokened], 30.0) == [retokened]
        assert [held.grant for held in backend._live()] == [retokened]
        assert backend.release(retokened) is True


async def test_a_renewal_that_crossed_a_release_and_a_data_loss_frees_what_it_wrote_back(
        url: str, admin: Any) -> None:
    """A renewal sent before a release, and sent again (its connection broke) to a server that
    restarted without its data, finds neither lease nor counter and writes the lease back: the
    store frees it again at once, since it was released meanwhile."""
    with tenure.connect(url) as store:
        backend = store.backend
        grant = first_grant_and_reclaim(backend, "crossed")
        assert backend.release(grant) is True
        keys = name_keys(backend.prefix, "crossed")
        admin.delete(keys.counter)  # the restart lost everything
        assert backend.renew([grant], 30.0) == [tenure.LostReason.EXPIRED]
        assert not admin.exists(keys.slot0)
        again = store.lock("crossed").try_acquire()
        assert again is not None and again.token > grant.token
        again.release()


async def test_a_renewal_while_the_release_is_on_its_way_leaves_that_lease_out(
        url: str, admin: Any) -> None:
    """A RENEW that reached the server after the RELEASE, the name's counter forgotten (by
    retain=0 here, by a prune in the conformance race that found this), wrote the released
    lease back: the free name was refused until the renewal's answer freed it again, or for
    the whole ttl when that answer came before the release's. So a renewal leaves out a lease
    whose release is on its way (and a release waits for a renewal on its way)."""
    with key_events(admin) as events:
        await renew_while_releasing(url, admin, events)


async def renew_while_releasing(url: str, admin: Any,
                                events: Callable[[str], list[str]]) -> None:
    async with tenure.aio.connect(f"{url}&retain=0") as store:
        backend = store.backend
        grant = await backend.try_acquire("crossing", "me", 30.0, 1)
        assert grant is not None
        slot0 = name_keys(backend.prefix, "crossing").slot0
        released: list[bool] = []

        async def release() -> None:
            released.append(await backend.release(grant))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(release)
            await anyio.sleep(0)  # the RELEASE is sent; its answer is awaited
            renewed = await backend.renew([grant], 30.0)
        assert released == [True]
        assert renewed == [tenure.LostReason.EXPIRED]
        happened = events(slot0)
        after_release = happened[happened.index("del") + 1:]
        assert "set" not in after_release, f"the released lease was written back: {happened}"
        again = await store.lock("crossing").try_acquire()
        assert again is not None and again.token > grant.token
        await again.release()


@contextlib.contextmanager
def key_events(admin: Any) -> Iterator[Callable[[str], list[str]]]:
    """Keyspace notifications on while the block runs: `events(key)` lists what the server
    did to `key` so far (set, expire, del...), in order."""
    before = admin.config_get("notify-keyspace-events")["notify-keyspace-events"]
    admin.config_set("notify-keyspace-events", "K$gx")
    listener = admin.pubsub()
    listener.psubscribe("__keyspace@*")
    listener.get_message(timeout=5)  # the subscription's confirmation
    seen: list[tuple[str, str]] = []

    def events(key: str) -> list[str]:
        with admin.client() as client:
            client.ping()  # every event before this has been published by now
        while (message := listener.get_message(timeout=0.2)) is not None:
            seen.append((message["channel"].decode().partition(":")[2],
                         message["data"].decode()))
        return [event for name, event in seen if name == key]

    try:
        yield events
    finally:
        listener.close()
        admin.config_set("notify-keyspace-events", before)


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
    server = start_or_skip(UnixSocketRedis(tmp_path))
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
async def test_a_socket_that_does_not_answer_gets_a_hint_about_the_socket(
        tmp_path: Path, api: str) -> None:
    """A unix:// store has no address to reach and no TLS: its hint names the socket file."""
    socket_path = tmp_path / "redis.sock"
    module = tenure.aio if api == "async" else tenure
    store = module.connect(f"unix://{socket_path}", timeout=1)
    try:
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(store.lock("jobs", ttl=5).acquire(timeout=0))
    finally:
        await call(store.close())
    message = str(raised.value)
    assert "TLS" not in message and "address" not in message, message
    assert (f"check that the server is running and listening on the socket {socket_path}, and "
            "that this user may open it; each call waits at most timeout=1 s") in message, message


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
    ("redis://h:6379/0", {"timeout": "soon"}, "timeout='soon' is not a number"),
    ("redis://h:6379/0", {"restart_grace": -1}, "restart_grace=-1 is out of range"),
    ("redis://h:6379/0?ssl_ca_certs=/ca.pem", {}, "TLS settings: use a rediss:// URL"),
    ("rediss://h:6379/0?ssl_cert_reqs=bogus", {}, "ssl_cert_reqs='bogus' is not supported; "
     "use none, optional or required"),
    ("rediss://h:6379/0", {"ssl_cert_reqs": True}, "ssl_cert_reqs=True is not supported"),
    ("redis://h:6379/zero", {}, "the path is the database number"),
    ("redis://h:6379/0", {"db": "one"}, "db='one' is not a database number"),
    ("redis://a:6379,b:6379,c:6379/0?quorum=1", {}, "quorum=1 is out of range for 3 masters"),
    ("redis://a:6379,b:6379/0", {"quorum": 1}, "give 2 to 2.*two holders"),
    ("redis://a:6379,b:6379,c:6379/0", {"quorum": 4}, "quorum=4 is out of range"),
    ("redis://a:6379,a:6379,c:6379/0", {}, "names a master twice"),
    ("redis://a:6379,,c:6379/0", {}, "empty host"),
    ("redis://a:6379,b:6379,c:6379/0", {"bogus": 1}, "unknown option.*bogus"),
    ("unix://a,b/x.sock", {}, "several masters need redis://"),
    ("unix://", {}, "names no"),
])
def test_bad_urls_and_options(url: str, options: dict[str, Any], message: str) -> None:
    for module in (tenure, tenure.aio):
        with pytest.raises(tenure.InvalidArgument, match=message):
            module.connect(url, **options)


def test_quorum_type_errors() -> None:
    for module in (tenure, tenure.aio):
        with pytest.raises(tenure.InvalidArgumentType, match="quorum must be a whole number"):
            module.connect("redis://a:6379,b:6379,c:6379/0", quorum="most")


def test_options_from_the_url_and_keywords() -> None:
    settings = parse_options("rediss://u:pw@h:6380/2?prefix=app:&timeout=1.5&ssl_cert_reqs=none",
                             {"timeout": 3})
    assert (settings.prefix, settings.timeout, settings.driver) == (
        "app:", 3.0, {"ssl_cert_reqs": "none"})
    assert settings.url == "rediss://u:pw@h:6380/2" and "pw" not in repr(settings)
    assert parse_options("unix:///run/redis.sock?db=4", {}).driver == {"db": 4}


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_url_and_repr_show_the_options_in_effect(api: str) -> None:
    """A keyword wins over the URL's query (as in the postgresql:// and mysql:// stores), and
    the store's url says so rather than showing the value it overrode."""
    single = connect("redis://h:6379/0?timeout=700&prefix=app:", api, timeout=3)
    several = connect("redis://a:6379,b:6379,c:6379/0?timeout=700&quorum=2", api, timeout=3,
                      quorum=3)
    try:
        assert single.backend.timeout == 3.0
        assert single.url == "redis://h:6379/0?timeout=3&prefix=app:"
        assert "timeout=700" not in repr(single.backend)
        assert several.url == "redis://a:6379,b:6379,c:6379/0?timeout=3&quorum=3"
        assert several.backend.quorum == 3 and "timeout=700" not in repr(several.backend)
    finally:
        await call(single.close())
        await call(several.close())


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

    docs = (Path(__file__).resolve().parents[2] / "docs" / "stores" / "redis.md").read_text()
    from tenure._async.stores.redis._scripts import ACQUIRE_ALL, GRANT, KEEP

    assert KEEP.strip() in docs
    assert GRANT.startswith(KEEP) and GRANT.removeprefix(KEEP).strip() in docs
    for script in (store.ACQUIRE, ACQUIRE_ALL):
        assert script.startswith(GRANT) and script.removeprefix(GRANT).strip() in docs
    for script in (store.RENEW, store.RELEASE):
        assert script.startswith(KEEP) and script.removeprefix(KEEP).strip() in docs


# -- several masters (quorum) ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three masters of this module's own: the tests stop and kill them."""
    servers = [RedisServer(tmp_path_factory.mktemp(f"quorum{i}")) for i in range(3)]
    try:
        for server in servers:
            start_or_skip(server)
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def masters(three_masters: list[RedisServer]) -> Iterator[list[RedisServer]]:
    """The three masters, each running and past its restart grace, before and after."""

    def all_up() -> None:
        for server in three_masters:
            if server.process is None:
                server.start()
        for server in three_masters:
            server.wait_past_restart_grace(DEFAULT_RESTART_GRACE)

    all_up()
    yield three_masters
    all_up()


def quorum_url(masters: list[RedisServer], **query: object) -> str:
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in masters)
    options = "&".join(f"{key}={value}" for key, value in
                       {"prefix": f"q{uuid.uuid4().hex[:12]}:", **query}.items())
    return f"redis://{hosts}/0?{options}"


def lease_keys(server: RedisServer, prefix: str) -> list[bytes]:
    with redis.Redis(port=server.port) as client:
        return list(client.scan_iter(f"{prefix}*:s[0-9]*"))


def counter_of(server: RedisServer, prefix: str, name: str) -> int | None:
    with redis.Redis(port=server.port) as client:
        value = client.get(name_keys(prefix, name).counter)
    return None if value is None else int(value)


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_holds_with_one_master_down(masters: list[RedisServer], api: str) -> None:
    url = quorum_url(masters)
    store, other = connect(url, api, timeout=2), connect(url, api, timeout=2)
    try:
        assert store.backend.quorum == 2  # the default: a majority
        first = await call(store.lock("jobs", ttl=5).try_acquire())
        await call(first.release())
        masters[2].stop(graceful=False)
        lease = await call(store.lock("jobs", ttl=5).try_acquire())
        assert lease is not None and lease.token > first.token
        assert await call(other.lock("jobs", ttl=5).try_acquire()) is None  # still exclusive
        listed = await call(other.leases())
        assert [(info.name, info.token) for info in listed] == [("jobs", lease.token)]
        # Renewal goes on with two masters of three.
        [renewed] = await call(store.backend.renew([lease.grant], 5.0))
        assert renewed == lease.grant
        assert await call(lease.release()) is True
        again = await call(other.lock("jobs", ttl=5).try_acquire())
        assert again is not None and again.token > lease.token
        await call(again.release())
    finally:
        await call(store.close())
        await call(other.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_refuses_with_two_masters_down(masters: list[RedisServer], api: str) -> None:
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    store = connect(url, api, timeout=2)
    try:
        masters[1].stop(graceful=False)
        masters[2].stop(graceful=False)
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(store.lock("jobs", ttl=5).try_acquire())
        message = str(raised.value)
        # The acquire ends as soon as two refusals make a quorum impossible, maybe before the
        # live master's grant came back: that grant is undone when it comes (in the background).
        assert re.search(r"acquire of 'jobs' needs 2 of 3 masters, [01] answered", message)
        assert f"127.0.0.1:{masters[1].port}" in message
        await eventually(lambda: lease_keys(masters[0], prefix) == [], 5,
                         "what the live master granted to be undone")
        with pytest.raises(tenure.StoreUnavailable):  # acquire(timeout) ends with the cause
            await call(store.lock("jobs", ttl=5).acquire(timeout=0.2))
        await eventually(lambda: lease_keys(masters[0], prefix) == [], 5,
                         "what the live master granted to be undone")
    finally:
        await call(store.close())


def closed_port() -> int:
    """A port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_quorum_out_of_reach_does_not_claim_a_wait_it_did_not_make(api: str) -> None:
    """Two masters refuse their connections, the third accepts and never answers: the two
    refusals decide the acquire at once, so the error says so instead of reporting the third
    master as silent for the whole bound (which nobody waited for)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        hosts = [f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}",
                 f"127.0.0.1:{silent.getsockname()[1]}"]
        store = connect(f"redis://{','.join(hosts)}/0?quorum=2", api, timeout=30)
        try:
            with pytest.raises(tenure.StoreUnavailable) as raised:
                await call(store.lock("jobs", ttl=60).try_acquire())
        finally:
            await call(store.close())
    message = str(raised.value)
    assert "needs 2 of 3 masters, 0 answered" in message, message
    assert message.count("Error 111 connecting") == 2, message
    assert "no answer within" not in message, message
    assert message.endswith(f"; so the quorum cannot be reached, and redis://{hosts[2]}/0 was "
                            "not waited for"), message


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_tokens_grow_across_a_sigkill_restart_of_a_master(
        masters: list[RedisServer], api: str) -> None:
    url = quorum_url(masters)
    store = connect(url, api, timeout=2)
    try:
        tokens = []
        for victim in (0, 1, 2):
            # One master at a time: the last one restarted must be past its grace.
            for server in masters:
                server.wait_past_restart_grace(DEFAULT_RESTART_GRACE)
            lease = await call(store.lock("fenced", ttl=5).try_acquire())
            await call(lease.release())
            tokens.append(lease.token)
            masters[victim].restart(graceful=False)  # SIGKILL: no persistence, all data lost
            # Within its restart grace the new master grants nothing new: the other two do.
            lease = await call(store.lock("fenced", ttl=5).try_acquire())
            assert lease is not None
            await call(lease.release())
            tokens.append(lease.token)
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens
    finally:
        await call(store.close())


async def test_quorum_token_is_the_largest_and_raises_the_other_masters(
        masters: list[RedisServer]) -> None:
    """Counters that drifted apart (a master was down, or granted to an acquire that failed
    elsewhere): the grant's token is the largest, and each granting master learns it, so the
    next quorum (which shares a master with this one) issues a larger token."""
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    # An acquire counts the first quorum that answers; a store with a quorum of all three
    # counts every master, so the one that is ahead is always among them here.
    with tenure.connect(url) as store, tenure.connect(url, quorum=3) as all_three:
        first = store.lock("drift").try_acquire()
        first.release()
        # The release returns at its quorum; the third master's may still be on its way, and
        # a quorum of all three (another store object) would find that master still held.
        wait_until(lambda: all(lease_keys(server, prefix) == [] for server in masters), 5,
                   "the release to reach every master")
        ahead = first.token + 10**9
        with redis.Redis(port=masters[0].port) as client:
            client.set(name_keys(prefix, "drift").counter, ahead)
        second = all_three.lock("drift").try_acquire()
        assert second.token == ahead + 1
        assert [counter_of(server, prefix, "drift") for server in masters] == [ahead + 1] * 3
        second.release()
        masters[0].stop(graceful=False)  # the master that was ahead is gone
        third = store.lock("drift").try_acquire()
        assert third is not None and third.token > second.token
        third.release()


def test_a_quorum_lists_a_lease_with_its_holders_token(masters: list[RedisServer]) -> None:
    """Every master counted gets the lease's token (not only its counter), so the listing
    shows the token the holder has, even while a master whose grant came late still lists
    its own larger one (it joins the lease under the holder's token a moment later: the
    listing had shown that larger token in CI)."""
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    with tenure.connect(url) as store, tenure.connect(url, quorum=3) as all_three:
        ahead = (store.lock("listed").try_acquire() or pytest.fail("free")).token + 10**9
        store.break_lease("listed")
        with redis.Redis(port=masters[0].port) as client:
            client.set(name_keys(prefix, "listed").counter, ahead)
        lease = all_three.lock("listed").try_acquire()
        assert lease is not None and lease.token == ahead + 1
        key = name_keys(prefix, "listed").slot0
        for server in masters:
            with redis.Redis(port=server.port) as client:
                assert json.loads(client.get(key))[1] == lease.token, server
        # A master whose grant came late holds the lease under a token of its own for a moment.
        with redis.Redis(port=masters[1].port) as client:
            value = json.loads(client.get(key))
            client.set(key, json.dumps([value[0], lease.token + 5, *value[2:]],
                                       separators=(",", ":")), keepttl=True)
        assert [info.token for info in store.leases("listed")] == [lease.token]
        store.break_lease("listed")


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_lease_is_lost_when_a_majority_loses_it(
        masters: list[RedisServer], api: str) -> None:
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    store = connect(url, api, timeout=2)
    try:
        lease = await call(store.lock("lost", ttl=5).try_acquire())
        grant = lease.grant
        for server in masters[:2]:
            with redis.Redis(port=server.port) as client:
                client.delete(name_keys(prefix, "lost").slot0)
        assert await call(store.backend.renew([grant], 5.0)) == [tenure.LostReason.EXPIRED]
        await eventually(lambda: lease_keys(masters[2], prefix) == [], 5,
                         "the third master to free it too")
        assert await call(store.backend.release(grant)) is False
    finally:
        await call(store.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_record_write_that_misses_its_quorum_is_taken_back(
        masters: list[RedisServer], api: str) -> None:
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    store = connect(url, api, timeout=2)
    try:
        lease = await call(store.lock("job", ttl=30).try_acquire())
        assert await call(store.backend.write_record(lease.grant, "v1")) is True
        for server in masters[:2]:  # the lease ran out on two masters, not yet on the third
            with redis.Redis(port=server.port) as client:
                client.delete(name_keys(prefix, "job").slot0)
        assert await call(store.backend.write_record(lease.grant, "late")) is False
        assert await call(store.backend.read_record("job")) == "v1"
        assert await call(store.backend.records()) == {"job": "v1"}
    finally:
        await call(store.close())


def delayed(method: Any, seconds: float, api: str) -> Any:
    """`method`, run `seconds` late (a slow master, as the fan-out sees it)."""
    if api == "async":
        async def late_async(*args: Any) -> Any:
            await anyio.sleep(seconds)
            return await method(*args)
        return late_async

    def late(*args: Any) -> Any:
        time.sleep(seconds)  # fault injection: this master answers late, not a wait
        return method(*args)
    return late


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_listing_waits_for_a_late_write_to_be_taken_back(
        masters: list[RedisServer], api: str) -> None:
    """The write that missed its quorum returned False while one master had not answered;
    that master writes it later and takes it back later still. A listing read in between,
    with that master among the first two to answer, still shows the record as it was."""
    url = quorum_url(masters)
    prefix = url.rpartition("prefix=")[2]
    store = connect(url, api, timeout=5)
    third = tenure.connect(f"redis://127.0.0.1:{masters[2].port}/0?prefix={prefix}")
    try:
        lease = await call(store.lock("job", ttl=30).try_acquire())
        await eventually(lambda: len(store.backend._parts[lease.grant.lease_id]) == 3, 5,
                         "the third master's grant to join the lease (the write goes there)")
        assert await call(store.backend.write_record(lease.grant, "v1")) is True
        for server in masters[:2]:  # the lease ran out on two masters, not yet on the third
            with redis.Redis(port=server.port) as client:
                client.delete(name_keys(prefix, "job").slot0)
        slow, other = store.backend.nodes[2], store.backend.nodes[1]
        slow._write_versioned_record = delayed(slow._write_versioned_record, 0.2, api)
        slow._undo_record = delayed(slow._undo_record, 1.0, api)
        assert await call(store.backend.write_record(lease.grant, "late")) is False
        await eventually(lambda: third.backend.records() == {"job": "late"}, 5,
                         "the late write to land on the third master")
        other._versioned_records = delayed(other._versioned_records, 3.0, api)
        assert await call(store.backend.records()) == {"job": "v1"}
    finally:
        third.close()
        await call(store.close())


def watch_renewals(renew: Any, index: int, seen: set[int], api: str) -> Any:
    """`renew`, noting `index` in `seen` when called."""
    if api == "async":
        async def watched(grants: Any, ttl: float) -> Any:
            seen.add(index)
            return await renew(grants, ttl)
        return watched

    def watched_sync(grants: Any, ttl: float) -> Any:
        seen.add(index)
        return renew(grants, ttl)
    return watched_sync


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_renewal_is_one_round_trip_per_master(
        masters: list[RedisServer], api: str) -> None:
    # A quorum of all three: every lease on every master (with 2 of 3, an acquire counts the
    # first two to grant, and the third's grant may not join the lease).
    store = connect(quorum_url(masters, quorum=3), api)
    try:
        backend = store.backend
        reclaimed: set[int] = set()  # each master's reader renews what is held once connected
        for index, node in enumerate(backend.nodes):
            node.renew = watch_renewals(node.renew, index, reclaimed, api)
        grants = [await call(backend.try_acquire(f"many/{i}", "me", 30.0, 1)) for i in range(200)]
        assert all(grant is not None for grant in grants)
        await eventually(lambda: len(reclaimed) == 3, 10, "each master's reader to connect")
        for node in backend.nodes:
            del node.renew  # the method again
        clients = [redis.Redis(port=server.port) for server in masters]
        before = [script_calls(client) for client in clients]
        with Sent() as sent:
            sent.counting = True
            assert await call(backend.renew(grants, 30.0)) == grants
            sent.counting = False
        assert [script_calls(c) - b for c, b in zip(clients, before, strict=True)] == [1, 1, 1]
        assert len(sent.commands) == 3 and {c[2] for c in sent.commands} == {b"200"}
        for client in clients:
            client.close()
    finally:
        await call(store.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_waiter_wakes_on_release(masters: list[RedisServer], api: str) -> None:
    with redis.Redis(port=masters[0].port) as admin:
        await assert_waiter_wakes_on_release(quorum_url(masters), admin, api)


# -- client= --------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_client_of_your_own(server: RedisServer, admin: Any, api: str) -> None:
    prefix = f"c{uuid.uuid4().hex[:12]}:"
    if api == "async":
        client: Any = redis.asyncio.Redis(port=server.port, password=None,
                                          decode_responses=True)
        backend: Any = tenure.aio.stores.AsyncRedisStore(client=client, prefix=prefix)
        store = tenure.aio.connect(backend)
    else:
        client = redis.Redis(port=server.port, decode_responses=True)
        store = tenure.connect(tenure.stores.RedisStore(client=client, prefix=prefix))
    try:
        assert str(server.port) in store.url and "(client)" in store.url
        lease = await call(store.lock("own", ttl=5).try_acquire())
        assert admin.exists(lease.grant.key) and lease.grant.key.startswith(prefix)
        assert await call(store.lock("own", ttl=5).try_acquire()) is None
        [info] = await call(store.leases())
        assert (info.name, info.token) == ("own", lease.token)
        assert await call(lease.release()) is True
        again = await call(store.lock("own", ttl=5).try_acquire())
        assert again.token > lease.token
        await call(again.release())
        await call(store.close())
        assert await call(client.ping())  # the client stays open: its owner closes it
    finally:
        await call(store.close())
        await call(client.aclose() if api == "async" else client.close())


def test_client_errors(server: RedisServer) -> None:
    sync_client, async_client = redis.Redis(port=server.port), redis.asyncio.Redis()
    with pytest.raises(tenure.InvalidArgumentType, match=r"client must be a redis\.client\.Redis"):
        tenure.stores.RedisStore(client=async_client)
    with pytest.raises(tenure.InvalidArgumentType,
                       match=r"client must be a redis\.asyncio\.client\.Redis.*redis\.Redis"):
        tenure.aio.stores.AsyncRedisStore(client=sync_client)
    with pytest.raises(tenure.InvalidArgumentType, match=r"got builtins\.str"):
        tenure.stores.RedisStore(client="redis://localhost")
    with pytest.raises(tenure.InvalidArgument, match=r"either a URL or client=, not both"):
        tenure.connect(server.url, client=sync_client)
    with pytest.raises(tenure.InvalidArgument, match=r"unknown option.*db.*the client's"):
        tenure.stores.RedisStore(client=sync_client, db=2)
    with pytest.raises(tenure.InvalidArgument, match=r"client= takes one client"):
        tenure.connect("redis://a:1,b:2,c:3/0", client=sync_client)
    sync_client.close()


def test_a_client_s_password_is_never_shown(server: RedisServer) -> None:
    client = redis.Redis(port=server.port, username="someone", password="hunter2",
                         socket_timeout=2)
    with tenure.connect(tenure.stores.RedisStore(client=client)) as store:
        assert "hunter2" not in repr(store) and "hunter2" not in store.url
        with pytest.raises(tenure.StoreUnavailable) as raised:
            store.lock("jobs").try_acquire()
        assert "hunter2" not in str(raised.value) and "password" in str(raised.value)
    client.close()


# -- silent masters, cancelled acquires, fork ----------------------------------------------------


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_quorum_stays_fast_with_one_master_silent(
        redis_masters: list[RedisServer], api: str) -> None:
    """One master of three frozen (SIGSTOP: its kernel still accepts and acknowledges): the
    other two grant, renew and release at once, and a held lease outlives its ttl."""
    store = connect(quorum_url(redis_masters), api, timeout=5)
    frozen = redis_masters[2].process
    assert frozen is not None
    try:
        held = await call(store.lock("held", ttl=2).acquire(timeout=5))
        frozen.send_signal(signal.SIGSTOP)
        try:
            stalled_at = time.monotonic()
            for attempt in range(3):
                started = time.monotonic()
                lease = await call(store.lock(f"quick/{attempt}", ttl=10).acquire(timeout=5))
                assert await call(store.backend.renew([lease.grant], 10.0)) == [lease.grant]
                assert await call(lease.release()) is True
                took = time.monotonic() - started
                assert took < 1.0, f"acquire, renew and release took {took:.2f} s (timeout 5 s)"
            started = time.monotonic()
            with pytest.raises(tenure.LockTimeout):
                await call(store.lock("held", ttl=2).acquire(timeout=0.5))
            took = time.monotonic() - started
            assert took < 1.5, f"acquire(timeout=0.5) of a held name gave up after {took:.2f} s"
            while time.monotonic() - stalled_at < 3.0:  # past the held lease's ttl
                assert not held.lost, f"lost {time.monotonic() - stalled_at:.2f} s in"
                await anyio.sleep(0.05)
        finally:
            frozen.send_signal(signal.SIGCONT)
        await call(held.release())
    finally:
        await call(store.close())


@pytest.fixture
def slow_path(server: RedisServer) -> Iterator[tuple[ProxyHost, Proxy]]:
    """A loopback forwarder to the server that can delay what goes to it."""
    host = ProxyHost()
    try:
        yield host, host.add("127.0.0.1", server.port)
    finally:
        host.close()


async def test_a_cancelled_acquire_frees_what_the_server_granted(
        url: str, admin: Any, slow_path: tuple[ProxyHost, Proxy]) -> None:
    """Cancelled after the request left and before the server ran it (the path delays it
    0.3 s): the server grants it, and the undo sent behind it frees it."""
    host, proxy = slow_path
    prefix = url.rpartition("prefix=")[2]
    keys = name_keys(prefix, "ghost")
    store = tenure.aio.connect(f"redis://127.0.0.1:{proxy.port}/0?prefix={prefix}")
    try:
        await (await store.lock("warm").try_acquire()).release()  # connected, script loaded
        host.set_mode(proxy, "latency", latency=0.3)
        with anyio.move_on_after(0.1):
            await store.lock("ghost", ttl=30).try_acquire()
            pytest.fail("the acquire was not cancelled")
        await eventually(lambda: admin.exists(keys.counter), 5, "the server to run the acquire")
        await eventually(lambda: not admin.exists(keys.slot0), 5,
                         "the lease it granted to be freed (else it blocks the name for 30 s)")
    finally:
        host.set_mode(proxy, "normal")
        await store.close()


def test_an_acquire_whose_grants_all_came_too_late_says_so(
        url: str, admin: Any, slow_path: tuple[ProxyHost, Proxy]) -> None:
    """A path slower than the lease's validity: each grant arrives after its deadline and is
    given back, and the LockTimeout says the store was too slow for the ttl, not that
    another holder has it (which sent a CI failure on a loaded MariaDB looking for one)."""
    host, proxy = slow_path
    prefix = url.rpartition("prefix=")[2]
    with tenure.connect(f"redis://127.0.0.1:{proxy.port}/0?prefix={prefix}") as store:
        (store.lock("warm").try_acquire() or pytest.fail("free")).release()  # connected
        host.set_mode(proxy, "latency", latency=1.0)
        try:
            with pytest.raises(tenure.LockTimeout) as raised:
                store.lock("slow", ttl=1.0).acquire(timeout=1.5)
        finally:
            host.set_mode(proxy, "normal")
        assert "answer came after the lease's deadline (ttl=1 s" in str(raised.value)
        assert "another holder" not in str(raised.value)
        wait_until(lambda: not admin.exists(name_keys(prefix, "slow").slot0), 5,
                   "the late grants to be given back")


async def test_a_cancelled_lock_all_frees_every_name_the_server_granted(
        url: str, admin: Any, slow_path: tuple[ProxyHost, Proxy]) -> None:
    """As above, for lock_all's one request (ACQUIRE_ALL): its UNDO_ALL frees every name."""
    host, proxy = slow_path
    prefix = url.rpartition("prefix=")[2]
    keys = [name_keys(prefix, name) for name in ("ghost-a", "ghost-b")]
    store = tenure.aio.connect(f"redis://127.0.0.1:{proxy.port}/0?prefix={prefix}")
    try:
        await (await store.lock_all(["warm-a", "warm-b"], timeout=5)).release()  # loaded
        host.set_mode(proxy, "latency", latency=0.3)
        with anyio.move_on_after(0.1):
            await store.lock_all(["ghost-a", "ghost-b"], ttl=30, timeout=5)
            pytest.fail("the lock_all was not cancelled")
        await eventually(lambda: all(admin.exists(key.counter) for key in keys), 5,
                         "the server to run the lock_all")
        await eventually(lambda: not any(admin.exists(key.slot0) for key in keys), 5,
                         "the leases it granted to be freed (else they block the names 30 s)")
    finally:
        host.set_mode(proxy, "normal")
        await store.close()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_lease_set_is_released_in_one_round_trip_even_after_a_script_flush(
        url: str, admin: Any, api: str) -> None:
    """release_all pipelines the RELEASE scripts; a server that lost its scripts (SCRIPT
    FLUSH, a restart) gets RELEASE loaded and the lot sent again."""
    store = connect(url, api)
    try:
        leases = await call(store.lock_all(["r-a", "r-b", "r-c"], ttl=30, timeout=5))
        admin.script_flush()
        calls = []
        real = store.backend._connections.call

        def counted(command: bytes, **kwargs: Any) -> Any:
            if SCRIPTS.release.sha in command or SCRIPTS.release.text in command:
                calls.append(kwargs.get("replies", 1))
            return real(command, **kwargs)

        store.backend._connections.call = counted
        assert await call(leases.release()) is True
        assert calls == [3, 1, 3]  # the pipeline, SCRIPT LOAD, the pipeline again
        assert not any(admin.exists(name_keys(store.backend.prefix, name).slot0)
                       for name in ("r-a", "r-b", "r-c"))
        assert await call(leases.release()) is False
    finally:
        await call(store.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_an_undo_all_that_overtakes_its_lock_all_still_frees_it(url: str,
                                                                      api: str) -> None:
    """UNDO_ALL served before its ACQUIRE_ALL (from another connection) leaves its marks, and
    the ACQUIRE_ALL of those lease ids then takes nothing."""
    store = connect(url, api)
    try:
        backend = store.backend
        ids = iter(["overtaken-a", "overtaken-b"])
        backend._new_lease_id = lambda: next(ids)
        slot0s = [name_keys(backend.prefix, name).slot0.encode() for name in ("ga", "gb")]
        heads = [b'["overtaken-a",', b'["overtaken-b",']
        await call(backend._connections.undo(UndoAll(["ga", "gb"], slot0s, heads, 30.0)))
        assert await call(backend.try_acquire_all(["ga", "gb"], "me", 30.0)) is None
        del backend._new_lease_id
        grants = await call(backend.try_acquire_all(["ga", "gb"], "me", 30.0))
        assert [grant.name for grant in grants] == ["ga", "gb"]
        for grant in grants:
            assert await call(backend.release(grant)) is True
    finally:
        await call(store.close())


async def test_a_cancelled_wait_frees_what_its_wake_up_took(
        url: str, admin: Any, slow_path: tuple[ProxyHost, Proxy]) -> None:
    """A wait_and_acquire whose wake-up took the lease on the server, cancelled before the
    answer came back (the path to it stalled): the undo frees the lease."""
    host, proxy = slow_path
    prefix = url.rpartition("prefix=")[2]
    keys = name_keys(prefix, "woken")
    store = tenure.aio.connect(f"redis://127.0.0.1:{proxy.port}/0?prefix={prefix}")
    holder = tenure.aio.connect(url)
    try:
        lease = await holder.lock("woken", ttl=30).try_acquire()
        assert lease is not None
        assert await store.backend.try_acquire("woken", "w", 30.0, 1) is None  # connected
        admin.script_load(WAKE_ACQUIRE)
        async with anyio.create_task_group() as group:
            group.start_soon(store.backend.wait_and_acquire, "woken", "w", 30.0, 1, 5.0, 5.0)
            await eventually(lambda: blocked(admin) >= 1, 5, "the waiter to block")
            host.set_mode(proxy, "stall")
            assert await lease.release() is True
            await eventually(lambda: int(admin.get(keys.counter)) > lease.token, 5,
                             "the wake-up to take the lease")
            group.cancel_scope.cancel()
        host.set_mode(proxy, "normal")
        await eventually(lambda: not admin.exists(keys.slot0), 5,
                         "the lease its wake-up took to be freed (else it blocks the name 30 s)")
    finally:
        host.set_mode(proxy, "normal")
        await store.close()
        await holder.close()


async def test_a_wake_up_answered_past_the_lease_s_deadline_is_not_handed_out(
        url: str, admin: Any, slow_path: tuple[ProxyHost, Proxy]) -> None:
    """The wake-up took the lease, but its answer came after the lease's deadline (the path
    stalled; a process stopped by SIGSTOP is the same): wait_and_acquire returns None, not a
    lease that may be another's by now."""
    host, proxy = slow_path
    prefix = url.rpartition("prefix=")[2]
    keys = name_keys(prefix, "late")
    store = tenure.aio.connect(f"redis://127.0.0.1:{proxy.port}/0?prefix={prefix}")
    holder = tenure.aio.connect(url)
    got: dict[str, Any] = {}
    try:
        lease = await holder.lock("late", ttl=30).try_acquire()
        assert lease is not None
        assert await store.backend.try_acquire("late", "w", 0.5, 1) is None  # connected
        admin.script_load(WAKE_ACQUIRE)

        async def wait() -> None:
            got["grant"] = await store.backend.wait_and_acquire("late", "w", 0.5, 1, 5.0, 5.0)

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await eventually(lambda: blocked(admin) >= 1, 5, "the waiter to block")
            host.set_mode(proxy, "stall")
            stalled_at = time.monotonic()
            assert await lease.release() is True
            await eventually(lambda: int(admin.get(keys.counter)) > lease.token, 5,
                             "the wake-up to take the lease")
            await eventually(lambda: time.monotonic() - stalled_at > 0.5, 5,
                             "the lease's deadline to pass")
            host.set_mode(proxy, "normal")
        assert got["grant"] is None
    finally:
        host.set_mode(proxy, "normal")
        await store.close()
        await holder.close()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_an_undo_that_overtakes_its_acquire_still_frees_it(url: str, api: str) -> None:
    """An acquire given up on is undone from another connection, which the server may serve
    first: the undo leaves a mark, and the acquire of that lease id then takes nothing."""
    store, other = connect(url, api), connect(url, api)
    try:
        backend = store.backend
        head = b'["overtaken",'
        slot0 = name_keys(backend.prefix, "ghost").slot0.encode()
        await call(backend._connections.undo(Undo("ghost", slot0, head, 30.0, 1)))
        assert await call(backend._acquire_as("overtaken", "ghost", "me", 30.0, 1)) is None
        lease = await call(other.lock("ghost", ttl=30).try_acquire())
        assert lease is not None
        await call(lease.release())
    finally:
        await call(store.close())
        await call(other.close())


def test_a_forked_child_uses_its_own_connections_and_leaves_the_parent_s_lease(
        url: str) -> None:
    store, other = tenure.connect(url), tenure.connect(url)
    try:
        lease = store.lock("parent", ttl=5).acquire(timeout=5)
        parent_id = store.backend._connections.call(packed(b"CLIENT", b"ID"))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own connection, its own lease, a normal exit
            status = 1
            try:
                child = store.lock("child", ttl=5).try_acquire()
                own_id = store.backend._connections.call(packed(b"CLIENT", b"ID"))
                os.write(write_end, str(own_id).encode())
                status = 0 if child is not None else 2
                if child is not None:
                    child.release()
            finally:
                os._exit(status)
        os.close(write_end)
        with os.fdopen(read_end) as from_child:
            child_id = int(from_child.read() or -1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child could not take its own lease"
        assert child_id not in (-1, parent_id), "the child used the parent's connection"
        assert other.lock("parent", ttl=5).try_acquire() is None  # still the parent's
        assert store.backend.renew([lease.grant], 5.0) == [lease.grant]
        # The parent's connection lives on (the monitor may have taken another one from the
        # pool meanwhile, so the next call's id need not be the same).
        clients = other.backend._connections.call(packed(b"CLIENT", b"LIST"))
        assert f"id={parent_id} ".encode() in clients
        assert lease.release() is True
    finally:
        store.close()
        other.close()


# -- errors that cannot clear fail at once --------------------------------------------------------

PASSWORD = "right-horse-battery-staple"


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of its own whose default user needs PASSWORD, with a user 'limited' that
    may touch no key of the tests' prefixes."""
    server = start_or_skip(RedisServer(tmp_path_factory.mktemp("redis-password")))
    try:
        with redis.Redis(port=server.port) as client:
            client.acl_setuser("limited", enabled=True, passwords=[f"+{PASSWORD}"],
                               keys=["elsewhere:*"], commands=["+@all"])
            client.config_set("requirepass", PASSWORD)
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_password_the_server_does_not_check_is_warned_about_once(
        url: str, api: str, caplog: pytest.LogCaptureFixture) -> None:
    """A server without a password accepts any password from redis-py (HELLO AUTH default
    <password>): the store says so once, without the password, and works."""
    secret = "an-unchecked-s3cret"
    with_password = url.replace("redis://", f"redis://:{secret}@", 1)
    store = connect(with_password, api)
    try:
        with caplog.at_level(logging.WARNING, logger="tenure"):
            for _ in range(2):
                lease = await call(store.lock("pw", ttl=5).try_acquire())
                assert lease is not None
                await call(lease.release())
        said = [record.getMessage() for record in caplog.records
                if record.name == "tenure" and record.levelno == logging.WARNING]
        assert len(said) == 1, said
        assert "no password set" in said[0] and "was not checked" in said[0]
        assert secret not in said[0] and store.url in said[0]
    finally:
        await call(store.close())


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("wrong", ["1", "not-the-password-but-a-long-one"])
async def test_a_wrong_password_is_refused_at_once(password_server: RedisServer, api: str,
                                                    wrong: str) -> None:
    """acquire(timeout=None) used to retry a refused password forever, silently. "1" also
    occurs in the host: the message must still show the address whole."""
    address = f"127.0.0.1:{password_server.port}/0"
    for url in (f"redis://:{wrong}@{address}", f"redis://default:{wrong}@{address}?prefix=p:"):
        message = await refused_within_a_second(connect(url, api, timeout=2))
        assert "authentication refused" in message and "password in the URL" in message
        assert_password_hidden(message, f"redis://{url[8:].partition(':')[0]}:***@{address}",
                               wrong)


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_missing_password_or_a_missing_right_is_refused_at_once(
        password_server: RedisServer, api: str) -> None:
    store = connect(f"redis://127.0.0.1:{password_server.port}/0", api, timeout=2)
    message = await refused_within_a_second(store, timeout=30)
    assert "requires a password" in message, message
    limited = connect(f"redis://limited:{PASSWORD}@127.0.0.1:{password_server.port}/0", api,
                      timeout=2)
    message = await refused_within_a_second(limited)
    assert "may not" in message and "ACL" in message and PASSWORD not in message, message


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_quorum_whose_masters_all_refuse_is_refused_at_once(
        masters: list[RedisServer], password_server: RedisServer, api: str) -> None:
    hosts = ",".join(f"127.0.0.1:{master.port}" for master in masters)
    store = connect(f"redis://nobody:wrong-password@{hosts}/0", api, timeout=1)
    message = await refused_within_a_second(store)
    assert "wrong-password" not in message and "authentication refused" in message, message
    # One master refusing while two are down is not permanent: those two may come back.
    up = f"127.0.0.1:{password_server.port}"
    down = connect(f"redis://:wrong-password@{up},127.0.0.1:1,127.0.0.1:2/0", api, timeout=1,
                   quorum=2)
    try:
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(down.lock("jobs", ttl=5).acquire(timeout=0))
        assert raised.value.transient
    finally:
        await call(down.close())


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_server_that_is_down_is_retried_until_the_timeout_with_one_warning(
        tmp_path: Path, api: str, caplog: pytest.LogCaptureFixture) -> None:
    server = start_or_skip(RedisServer(tmp_path))
    server.stop()  # its port is closed now: connections are refused
    store = connect(f"redis://127.0.0.1:{server.port}/0", api, timeout=1)
    try:
        with caplog.at_level(logging.INFO, logger="tenure"):
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable) as raised:
                await call(store.lock("jobs", ttl=5, max_wait=0.05).acquire(timeout=2))
            elapsed = time.monotonic() - started
    finally:
        await call(store.close())
    assert raised.value.transient and not isinstance(raised.value, tenure.StoreRefused)
    assert 1.9 <= elapsed < 5, elapsed
    warnings = [r for r in caplog.records if r.name == "tenure" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert f"127.0.0.1:{server.port}" in warnings[0].getMessage()
    assert "'jobs'" in warnings[0].getMessage()


async def test_an_outage_during_acquire_logs_one_warning_and_one_info_when_it_ends(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = start_or_skip(RedisServer(tmp_path))
    server.stop()
    store = tenure.aio.connect(f"redis://127.0.0.1:{server.port}/0", timeout=1,
                               restart_grace=0)
    lease = None

    async def acquire() -> None:
        nonlocal lease
        lease = await store.lock("jobs", ttl=5, max_wait=0.05).acquire(timeout=None)

    try:
        with caplog.at_level(logging.INFO, logger="tenure"):
            async with anyio.create_task_group() as group:
                group.start_soon(acquire)
                await eventually(lambda: any(r.levelno == logging.WARNING
                                             for r in caplog.records), 10, "the warning")
                await anyio.to_thread.run_sync(server.start_again)
            assert lease is not None
            await lease.release()
    finally:
        await store.close()
        server.stop()
    tenure_records = [r for r in caplog.records if r.name == "tenure"]
    warnings = [r for r in tenure_records if r.levelno == logging.WARNING]
    infos = [r for r in tenure_records if r.levelno == logging.INFO]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert len(infos) == 1 and "reachable again after" in infos[0].getMessage(), [
        r.getMessage() for r in tenure_records]


@pytest.mark.parametrize("call", ["acquire", "listing"])
def test_a_database_number_the_server_lacks_is_refused_as_such(server: RedisServer,
                                                                call: str) -> None:
    url = f"redis://127.0.0.1:{server.port}/99"  # the default 'databases' is 16
    store = tenure.connect(url)
    try:
        with pytest.raises(tenure.StoreRefused) as refused:
            if call == "acquire":
                store.lock("report", ttl=5).acquire(timeout=30)  # refused at once, not retried
            else:
                store.leases()
    finally:
        store.close()

    message = str(refused.value)
    assert "DB index is out of range" in message and "'databases' setting" in message, message
    assert "Lua" not in message and "Redis 5" not in message
