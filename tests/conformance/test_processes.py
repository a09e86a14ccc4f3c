"""Exclusion, fencing, crashes and pauses between real OS processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import Target, call
from history import backwards_tokens, max_concurrency, overlaps, read_holds

import tenure

pytestmark = pytest.mark.anyio


def needs_processes(target: Target) -> None:
    if not target.kind.shared_between_processes:
        pytest.skip(f"{target.kind.name}:// lives inside one process; threads and tasks "
                    "cover it in the other tests")


async def test_exclusion_and_fencing_over_many_acquisitions(target: Target,
                                                            tmp_path: Path) -> None:
    log, counter = tmp_path / "history.log", tmp_path / "counter"
    counter.write_text("0")
    # 1,000 acquisitions, or about 15 s of them where a store hands off slowly (azblob)
    contenders, each = 4, min(250, round(target.kind.contended_per_second * 15 / 4))
    await target.run_contenders("cycles", "shared", contenders, count=each, log=str(log),
                                counter=str(counter))
    holds = read_holds(log)
    assert len(holds) == contenders * each
    assert overlaps(holds) == [], "two holders were inside the critical section at once"
    assert backwards_tokens(holds) == [], "fencing tokens must only grow"
    assert int(counter.read_text()) == contenders * each, "an update was lost"
    if target.kind.shared_between_processes:
        assert len({hold.pid for hold in holds}) == contenders


async def test_semaphore_never_exceeds_its_limit(target: Target, tmp_path: Path) -> None:
    log = tmp_path / "history.log"
    await target.run_contenders("sem", "pool", 8, count=25, limit=3, log=str(log), hold_s=0.005)
    holds = read_holds(log)  # also asserts every token was granted once
    assert len(holds) == 200
    peak = max_concurrency(holds)
    assert peak <= 3, f"{peak} holders of a semaphore of 3 at once"
    assert peak >= 2, "8 contenders never overlapped: this is not behaving like a semaphore"


async def test_sigkill_of_the_holder_frees_the_lock_within_ttl(
        target: Target, processes: list[subprocess.Popen[str]]) -> None:
    needs_processes(target)
    ttl = target.ttl(1.0)
    holder, held_token = target.hold_in_process("jobs", ttl)
    processes.append(holder)
    lock = target.connect().lock("jobs", ttl=ttl, min_wait=0.01, max_wait=0.05)
    assert await call(lock.try_acquire()) is None

    holder.kill()
    holder.wait()
    killed_at = time.monotonic()
    lease = await call(lock.acquire(timeout=ttl + 1))
    took = time.monotonic() - killed_at
    assert lease.token > held_token
    assert took <= ttl + 1
    if target.kind.kernel_expiry:
        assert took < 0.5, "the kernel frees a dead holder's lock at once"


async def test_clean_exit_releases_at_once(
        target: Target, processes: list[subprocess.Popen[str]]) -> None:
    needs_processes(target)
    app, held_token = target.hold_in_process("jobs", 30.0, mode="exit")
    processes.append(app)
    assert app.stdin is not None
    lock = target.connect().lock("jobs", ttl=target.ttl(5))
    assert await call(lock.try_acquire()) is None
    app.stdin.close()
    assert app.wait(timeout=10) == 0
    lease = await call(lock.try_acquire())
    assert lease is not None, "a clean exit must free the lease at once, not after its ttl (30 s)"
    assert lease.token > held_token


async def test_sigterm_handled_by_the_app_releases_at_once(
        target: Target, processes: list[subprocess.Popen[str]]) -> None:
    needs_processes(target)
    app, held_token = target.hold_in_process("jobs", 30.0, mode="serve")
    processes.append(app)
    lock = target.connect().lock("jobs", ttl=target.ttl(5), min_wait=0.01, max_wait=0.05)
    assert await call(lock.try_acquire()) is None

    app.send_signal(signal.SIGTERM)
    signalled_at = time.monotonic()
    lease = await call(lock.acquire(timeout=5))
    assert time.monotonic() - signalled_at < 2.0, "released at exit, not left to expire (30 s)"
    assert lease.token > held_token
    assert app.wait(timeout=10) == 0


async def test_paused_holder_loses_its_lease_and_cannot_free_the_next(
        target: Target, processes: list[subprocess.Popen[str]]) -> None:
    """The GC-pause case: SIGSTOP the holder past its ttl, let someone take over, SIGCONT."""
    needs_processes(target)
    ttl = target.ttl(1.0)
    holder, held_token = target.hold_in_process("jobs", ttl)
    processes.append(holder)
    assert holder.stdin is not None and holder.stdout is not None
    os.kill(holder.pid, signal.SIGSTOP)
    store = target.connect()
    lock = store.lock("jobs", ttl=target.ttl(5), min_wait=0.01, max_wait=0.05)

    if target.kind.kernel_expiry:
        # A stopped process is alive: the kernel keeps its lock, nobody else gets it.
        with pytest.raises(tenure.LockTimeout):
            await call(lock.acquire(timeout=ttl + 0.5))
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.close()
        # Stopped past its local deadline, it must assume the worst; the flock was still its own.
        assert holder.stdout.readline().split() == ["LOST", "True", "RELEASED", "True"]
        assert await call(lock.try_acquire()) is not None
        return

    lease = await call(lock.acquire(timeout=ttl + 1))
    assert lease.token > held_token
    os.kill(holder.pid, signal.SIGCONT)
    holder.stdin.close()  # the resumed holder now releases what it believes it holds
    assert holder.stdout.readline().split() == ["LOST", "True", "RELEASED", "False"]
    assert holder.wait(timeout=10) == 0
    assert not lease.lost
    assert await call(target.connect().lock("jobs").try_acquire()) is None
    assert [info.token for info in await call(store.leases("jobs"))] == [lease.token]
