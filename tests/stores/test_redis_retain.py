"""redis://'s `retain` option and what it leaves behind: the counter (and a semaphore's limit)
of a name nobody holds expires `retain` after its last slot, at once with retain=0, never
with retain=inf; a held name's counter never expires; records stay; a broken lease is never
written back by a renewal once its name was forgotten; listing reads the index of live slots
(in pages) and never the dead names; prune pages through SCAN. Bad values fail at the call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from servers import RedisServer
from waiting import wait_until

import tenure
from tenure._async.stores.redis import DEFAULT_RESTART_GRACE, name_keys

pytestmark = pytest.mark.anyio


def uptime(port: int) -> int:
    with redis.Redis(port=port) as client:
        return int(client.info("server")["uptime_in_seconds"])


@pytest.fixture
def server(redis_server: RedisServer) -> RedisServer:
    wait_until(lambda: uptime(redis_server.port) >= DEFAULT_RESTART_GRACE, 10,
               "the server to outlive the restart grace")
    return redis_server


@pytest.fixture
def prefix() -> str:
    return f"r{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def admin(server: RedisServer) -> Iterator[Any]:
    with redis.Redis(port=server.port) as client:
        yield client


def store_of(server: RedisServer, prefix: str, **options: Any) -> tenure.Store:
    return tenure.connect(f"{server.url}?prefix={prefix}", **options)


def own_keys(admin: Any, prefix: str) -> list[str]:
    return sorted(key.decode() for key in admin.scan_iter(f"{prefix}*", count=1000))


def test_retain_0_forgets_at_release_and_the_next_token_is_larger(
        server: RedisServer, prefix: str, admin: Any) -> None:
    keys = name_keys(prefix, "invoice-7")
    with store_of(server, prefix, retain=0) as store:
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=30).acquire() as lease:
                assert admin.exists(keys.counter) == 1
                tokens.append(lease.token)
            assert admin.exists(keys.counter) == 0, "forgotten at release"
        assert tokens == sorted(set(tokens)), tokens
        pool = name_keys(prefix, "pool")
        first, second = (store.semaphore("pool", 2, ttl=30).try_acquire() for _ in range(2))
        assert first is not None and second is not None
        assert first.release()
        assert admin.exists(pool.counter, pool.limit) == 2, "kept while a slot is held"
        assert admin.pttl(pool.counter) > 25_000, "as long as the slot still held"
        assert second.release()
        assert admin.exists(pool.counter, pool.limit) == 0
        # What is left: the signal lists, which go by themselves within 2 s.
        assert all(key.endswith(":signal") for key in own_keys(admin, prefix))
        wait_until(lambda: own_keys(admin, prefix) == [], 10, "the signal lists to expire")


def test_a_counter_outlives_its_slot_by_retain_and_records_stay(
        server: RedisServer, prefix: str, admin: Any) -> None:
    keys = name_keys(prefix, "nightly")
    with store_of(server, prefix, retain=1) as store:
        assert store.url.endswith("&retain=1")
        lease = store.lock("nightly", ttl=20).acquire()
        assert 20_000 < admin.pttl(keys.counter) <= 21_000, "ttl + retain while held"
        assert store.backend.write_record(lease.grant, "done")
        assert lease.release()
        assert 0 < admin.pttl(keys.counter) <= 1_000, "retain after the release"
        wait_until(lambda: admin.exists(keys.counter) == 0, 10, "the counter to expire")
        assert store.backend.read_record("nightly") == "done"
        assert admin.pttl(f"{keys.base}record") == -1, "a record never expires"
        again = store.lock("nightly", ttl=20).acquire()
        assert again.token > lease.token
        assert again.release()


def test_a_held_name_is_kept_while_it_is_renewed(server: RedisServer, prefix: str,
                                                 admin: Any) -> None:
    keys = name_keys(prefix, "long-job")
    with store_of(server, prefix, retain=0) as store:
        lease = store.lock("long-job", ttl=0.3).acquire()
        started = time.monotonic()

        def held_for_ten_ttls() -> bool:  # renewed every 0.1 s; the counter stays all along
            assert admin.exists(keys.counter) == 1 and not lease.lost
            return time.monotonic() - started >= 3

        wait_until(held_for_ten_ttls, 10, "3 s of renewals")
        assert not lease.lost
        assert admin.exists(keys.counter) == 1
        first = lease.token
        assert lease.release()
        assert admin.exists(keys.counter) == 0
        with store.lock("long-job", ttl=5).acquire() as again:
            assert again.token > first


def test_retain_inf_keeps_every_counter_and_the_url_says_so(server: RedisServer, prefix: str,
                                                            admin: Any) -> None:
    keys = name_keys(prefix, "kept")
    with store_of(server, prefix, retain="inf") as store:
        assert store.url.endswith("&retain=inf")
        with store.lock("kept", ttl=5).acquire():
            pass
        assert admin.pttl(keys.counter) == -1
        assert store.prune(3600) == 0
        assert store.prune(0) == 1
        assert admin.exists(keys.counter) == 0
    with tenure.connect(f"{server.url}?prefix={prefix}&retain=3600") as store:
        assert store.url.endswith("retain=3600"), "as given"
    with store_of(server, prefix) as store:
        assert "retain" not in store.url, "the default is not shown"


@pytest.mark.parametrize("value, message", [
    (-1, "retain='?-1'? is out of range"), ("soon", "retain='soon' is not a number"),
    (float("nan"), "is out of range")])
def test_a_bad_retain_fails_at_the_call(server: RedisServer, value: object,
                                        message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"redis://127.0.0.1:1/0?retain={value}")
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect("redis://127.0.0.1:1/0", retain=value)
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.stores.RedisStore(client=redis.Redis(port=1), retain=value)


def test_a_broken_lease_is_not_written_back_after_its_name_was_forgotten(
        server: RedisServer, prefix: str, admin: Any) -> None:
    """A broken, B granted and broken (its shorter tombstone over A's), C granted and released
    (retain=0: the counter goes): A's renewal must not write A back."""
    with store_of(server, prefix, retain=0) as store:
        backend = store.backend
        a = backend.try_acquire("shared", "a", 60.0, 1)
        assert a is not None
        assert backend.break_lease("shared") == 1
        b = backend.try_acquire("shared", "b", 0.5, 1)
        assert b is not None and b.token > a.token
        assert backend.break_lease("shared") == 1
        c = backend.try_acquire("shared", "c", 0.5, 1)
        assert c is not None and backend.release(c)
        assert admin.exists(name_keys(prefix, "shared").counter) == 0
        [answer] = backend.renew([a], 60.0)
        assert answer in (tenure.LostReason.BROKEN, tenure.LostReason.EXPIRED), answer
        assert store.leases() == []


def test_listing_reads_the_live_slots_only_in_pages(server: RedisServer, prefix: str,
                                                    admin: Any) -> None:
    with admin.pipeline(transaction=False) as pipe:  # 5,000 dead names, as the store lays them
        for number in range(5000):
            pipe.set(name_keys(prefix, f"dead-{number}").counter, "1764600000000000")
        pipe.execute()
    with store_of(server, prefix, retain="inf") as store:
        backend = store.backend
        grants = [backend.try_acquire(f"live-{number:04}", "me", 60.0, 1)
                  for number in range(1200)]  # more than a page (1,000)
        short = backend.try_acquire("gone-soon", "me", 0.2, 1)
        assert short is not None and all(grants)
        listed = [info.name for info in store.leases() if info.name != "gone-soon"]
        assert listed == [f"live-{n:04}" for n in range(1200)], "each once, in order"
        wait_until(lambda: len(store.leases()) == 1200, 10, "the short lease to expire")
        assert [info.name for info in store.leases("live-11")] == [
            f"live-11{n:02}" for n in range(100)]
        # An acquire (one in 16, by the server clock's last digits) drops the expired slot's
        # entry from the index.
        gone = name_keys(prefix, "gone-soon").slot0
        assert admin.zscore(f"{prefix}live", gone) is not None

        def dropped() -> bool:
            grant = backend.try_acquire("extra", "me", 60.0, 1)
            assert grant is not None and backend.release(grant)
            return admin.zscore(f"{prefix}live", gone) is None

        wait_until(dropped, 30, "an acquire to drop the expired entry")
        for grant in grants:
            assert backend.release(grant)
        assert store.leases() == []
        assert admin.exists(f"{prefix}live") == 0, "an empty index is no key"


def test_prune_pages_through_scan_and_keeps_records(server: RedisServer, prefix: str,
                                                    admin: Any) -> None:
    with admin.pipeline(transaction=False) as pipe:
        for number in range(2500):
            pipe.set(name_keys(prefix, f"dead-{number}").counter, "1764600000000000")
        pipe.execute()
    with store_of(server, prefix, retain="inf") as store:
        pool = store.semaphore("pool", 3, ttl=30).acquire()
        assert store.backend.write_record(pool.grant, "kept")
        assert pool.release()
        held = store.lock("held", ttl=30).acquire()
        assert store.prune(0, dry_run=True) == 2501
        assert store.prune(0) == 2501
        assert store.prune(0) == 0
        left = own_keys(admin, prefix)
        assert not [key for key in left if key.endswith((":token", ":limit"))
                    and name_keys(prefix, "held").base not in key]
        assert store.backend.read_record("pool") == "kept"
        assert held.release()


def test_a_quorum_forgets_on_every_master_and_tokens_still_grow(
        redis_masters: list[RedisServer], prefix: str) -> None:
    wait_until(lambda: min(uptime(server.port) for server in redis_masters)
               >= DEFAULT_RESTART_GRACE, 10, "the masters to outlive the restart grace")
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in redis_masters)
    clients = [redis.Redis(port=server.port) for server in redis_masters]
    counter = name_keys(prefix, "invoice-9").counter
    try:
        with tenure.connect(f"redis://{hosts}/0?prefix={prefix}", retain=0) as store:
            assert "retain=0" in store.url
            tokens = []
            for _ in range(5):
                with store.lock("invoice-9", ttl=30).acquire() as lease:
                    tokens.append(lease.token)
                # the last master may still be releasing in the background
                wait_until(lambda: sum(c.exists(counter) for c in clients) == 0, 10,
                           "every master to forget the name")
            assert tokens == sorted(set(tokens)), tokens
        with tenure.connect(f"redis://{hosts}/0?prefix={prefix}&retain=inf") as store:
            with store.lock("kept", ttl=30).acquire():
                pass
            wait_until(lambda: store.prune(0, dry_run=True) == 1, 10, "a quorum to free it")
            assert store.prune(0) == 1
            assert sum(c.exists(name_keys(prefix, "kept").counter) for c in clients) <= 1
    finally:
        for client in clients:
            client.close()
