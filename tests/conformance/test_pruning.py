"""Forgetting the names nobody holds (`store.prune`, and the stores' `retain` option): a name
forgotten and taken again gets a larger token; a held name, a semaphore with a slot still held
and a name used within the idle time are never forgotten; records stay; and a prune racing
grants of the name, from another process, never lets two hold it nor hands out a smaller
token. Every store can forget names: one that cannot fails here."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from typing import Any

import anyio
import pytest
from conftest import Target, call, eventually

import tenure
from tenure._async.stores._protocol import prunes

pytestmark = pytest.mark.anyio

# A process that prunes every idle name of the store at argv[1] until its stdin closes.
PRUNER = r"""
import sys, threading, tenure
store = tenure.connect(sys.argv[1])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
rounds = forgotten = 0
print("pruning", flush=True)
while not done.is_set():
    forgotten += store.prune(0)
    rounds += 1
store.close()
print(rounds, forgotten, flush=True)
"""


def pruning_store(target: Target) -> Any:
    store = target.connect()
    assert prunes(store.backend) is not None, f"{target.kind.name}:// cannot forget names"
    return store


async def test_a_forgotten_name_comes_back_with_a_larger_token(target: Target,
                                                               make_lock: Any) -> None:
    store, ttl = pruning_store(target), target.ttl(5)
    lease = await call(make_lock(store, "invoice-1", ttl=ttl).try_acquire())
    assert await call(store.backend.write_record(lease.grant, "done")) is True
    first = lease.token
    assert await call(lease.release()) is True
    held = await call(store.lock("held", ttl=ttl).try_acquire())

    assert await call(store.prune(3600)) == 0, "a name used a moment ago is not idle an hour"
    assert await call(store.prune(0, dry_run=True)) == 1
    assert await call(store.prune(0, dry_run=True)) == 1, "a dry run forgets nothing"
    assert await call(store.prune(0)) == 1, "invoice-1 only: 'held' is held"
    assert await call(store.prune(0)) == 0

    assert await call(store.backend.read_record("invoice-1")) == "done", "records stay"
    again = await call(make_lock(store, "invoice-1", ttl=ttl).try_acquire())
    assert again.token > first
    assert [info.name for info in await call(store.leases())] == ["held", "invoice-1"]
    assert await call(again.release()) is True
    assert await call(held.release()) is True


async def test_a_crashed_holders_name_once_expired_and_forgotten_comes_back_with_a_larger_token(
        target: Target) -> None:
    if not target.kind.shared_between_processes:
        pytest.skip(f"{target.kind.name}:// is not shared between processes")
    store, ttl = pruning_store(target), target.ttl(0.5)
    holder, crashed_token = target.hold_in_process("invoice-9", ttl)
    assert await call(store.prune(0)) == 0, "a held name is never forgotten"
    holder.kill()
    holder.wait(30)
    # Its lease expires (or, where the kernel or the server frees it with its holder, ends
    # with the process); then the name is idle and prune forgets it.
    async def listed_free() -> bool:
        return await call(store.leases("invoice-9")) == []

    await eventually(listed_free, ttl + 30, "the crashed holder's lease to expire")
    await eventually(lambda: call(store.prune(0)), 30, "prune to forget the expired name")
    again = await call(store.lock("invoice-9", ttl=target.ttl(5)).try_acquire())
    assert again is not None and again.token > crashed_token, (again, crashed_token)
    assert await call(again.release()) is True


async def test_a_semaphore_with_a_slot_held_is_not_forgotten(target: Target) -> None:
    store, ttl = pruning_store(target), target.ttl(5)
    first = await call(store.semaphore("pool", 2, ttl=ttl).try_acquire())
    second = await call(store.semaphore("pool", 2, ttl=ttl).try_acquire())
    assert await call(first.release()) is True
    assert await call(store.prune(0)) == 0
    third = await call(store.semaphore("pool", 2, ttl=ttl).try_acquire())
    assert third.token > second.token
    assert await call(store.semaphore("pool", 2, ttl=ttl).try_acquire()) is None
    for lease in (second, third):
        assert await call(lease.release()) is True
    assert await call(store.prune(0)) == 1


async def test_bad_arguments_are_refused_before_the_store_is_touched(target: Target) -> None:
    store = pruning_store(target)
    with pytest.raises(tenure.InvalidArgument, match="idle=-1 is out of range"):
        await call(store.prune(-1))
    with pytest.raises(tenure.InvalidArgumentType, match="idle must be seconds"):
        await call(store.prune("1h"))
    with pytest.raises(tenure.InvalidArgumentType, match="dry_run must be True or False"):
        await call(store.prune(0, dry_run="yes"))


async def test_a_prune_racing_grants_never_makes_two_holders_or_a_smaller_token(
        target: Target) -> None:
    first, second = pruning_store(target), target.connect()
    ttl, tokens = target.ttl(5), []

    async def take_turns() -> None:
        for turn in range(300):
            taker, other = (first, second) if turn % 2 else (second, first)
            lease = await call(taker.lock("invoice", ttl=ttl).try_acquire())
            assert lease is not None, f"turn {turn}: the free name was refused"
            assert await call(other.lock("invoice", ttl=ttl).try_acquire()) is None, (
                f"turn {turn}: a second holder while the name was held")
            tokens.append(lease.token)
            assert await call(lease.release()) is True
            await anyio.sleep(0)  # an async pruner of this process gets its turn

    if target.kind.shared_between_processes:
        # The real race: another process prunes (the store's own serialization decides).
        pruner = subprocess.Popen([sys.executable, "-c", PRUNER, target.url], text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert pruner.stdout is not None and pruner.stdin is not None
        try:
            assert pruner.stdout.readline().strip() == "pruning"
            await take_turns()
        finally:
            pruner.stdin.close()
            rounds, forgotten = map(int, pruner.stdout.readline().split())
            pruner.wait(30)
        assert forgotten > 0, f"the pruner never forgot the name in {rounds} rounds"
    elif target.is_async:  # memory://: a task prunes the same store object
        async with anyio.create_task_group() as tasks:
            async def prune_until_cancelled() -> None:
                while True:
                    await pruner_store.prune(0)
                    await anyio.sleep(0)

            pruner_store = target.connect()
            tasks.start_soon(prune_until_cancelled)
            await take_turns()
            tasks.cancel_scope.cancel()
    else:  # memory://: a thread prunes the same store object
        pruner_store, stop = target.connect(), threading.Event()

        def prune_until_stopped() -> None:
            while not stop.is_set():
                pruner_store.prune(0)

        thread = threading.Thread(target=prune_until_stopped)
        thread.start()
        try:
            await take_turns()
        finally:
            stop.set()
            thread.join(30)
    assert all(earlier < later for earlier, later in itertools.pairwise(tokens)), tokens
