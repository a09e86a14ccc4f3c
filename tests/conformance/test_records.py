"""Records: the small per-name text a holder keeps next to a lock (the job runner's "last
completed period"). Written only under a live lease, kept across release, expiry and break."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from conftest import Target, call

import tenure
from tenure._async.stores._protocol import MAX_RECORD_BYTES
from tenure._types import Grant

pytestmark = pytest.mark.anyio

# Stores that keep a record under a lock only (a semaphore of several slots has no one lease
# that guards the name there); the others take a record from any live slot of a semaphore.
RECORDS_NEED_A_LOCK = {"azblob"}


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll an async condition until it holds; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(0.05)


async def test_write_then_read(target: Target, make_lock: Any) -> None:
    store, reader = target.connect(), target.connect()
    assert await call(store.backend.read_record("jobs")) is None
    assert await call(store.backend.records()) == {}

    lease = await call(make_lock(store, "jobs", ttl=target.ttl(5)).try_acquire())
    long_record = json.dumps({"period": "2026-01-01T00:05:00Z", "outcome": "ok", "pad": "x" * 900})
    assert await call(store.backend.write_record(lease.grant, long_record)) is True
    assert await call(reader.backend.read_record("jobs")) == long_record
    # A shorter record replaces the whole of the longer one (nothing of its tail is left).
    assert await call(store.backend.write_record(lease.grant, '{"period": 2}')) is True
    assert await call(reader.backend.read_record("jobs")) == '{"period": 2}'
    assert await call(store.backend.write_record(lease.grant, "")) is True
    assert await call(reader.backend.read_record("jobs")) == ""
    assert await call(reader.backend.read_record("other")) is None
    assert await call(lease.release()) is True


async def test_kept_across_release_and_break_and_refused_to_old_holders(
        target: Target, make_lock: Any) -> None:
    first, second, admin = target.connect(), target.connect(), target.connect()
    ttl = target.ttl(5)
    reads = admin.backend.read_record

    lease = await call(make_lock(first, "jobs", ttl=ttl).try_acquire())
    assert await call(first.backend.write_record(lease.grant, "v1")) is True
    assert await call(lease.release()) is True
    assert await call(reads("jobs")) == "v1", "a record outlives the lease"
    assert await call(first.backend.write_record(lease.grant, "after release")) is False
    assert await call(reads("jobs")) == "v1"

    theirs = await call(make_lock(second, "jobs", ttl=ttl).try_acquire())
    assert await call(second.backend.write_record(theirs.grant, "v2")) is True
    assert await call(first.backend.write_record(lease.grant, "stale holder")) is False
    assert await call(admin.break_lease("jobs")) == 1
    assert await call(reads("jobs")) == "v2", "a record outlives a break"
    assert await call(second.backend.write_record(theirs.grant, "after break")) is False
    assert await call(reads("jobs")) == "v2"

    # Taken over after the break: neither old holder can write over the new holder's record.
    newest = await call(make_lock(admin, "jobs", ttl=ttl).try_acquire())
    assert await call(admin.backend.write_record(newest.grant, "v3")) is True
    for old, grant in ((first, lease.grant), (second, theirs.grant)):
        assert await call(old.backend.write_record(grant, "taken over")) is False
    assert await call(reads("jobs")) == "v3"
    assert await call(newest.release()) is True


async def test_kept_across_expiry_and_refused_after_it(target: Target) -> None:
    if target.kind.kernel_expiry:
        pytest.skip(f"{target.kind.name}:// locks do not expire: the kernel frees them with "
                    "their holder (break and release are covered above)")
    store, other = target.connect(), target.connect()
    ttl = target.ttl(0.3)
    # Straight from the backend: a grant that nothing renews.
    grant = await call(store.backend.try_acquire("jobs", store.holder, ttl, 1))
    assert grant is not None
    assert await call(store.backend.write_record(grant, "v1")) is True

    async def expired() -> bool:
        return await call(other.backend.leases("jobs")) == []

    await wait_for(expired, ttl + 10, "the lease to expire")
    assert await call(other.backend.read_record("jobs")) == "v1", "a record outlives expiry"
    assert await call(store.backend.write_record(grant, "after expiry")) is False
    assert await call(other.backend.read_record("jobs")) == "v1"

    successor = await call(other.backend.try_acquire("jobs", other.holder, target.ttl(5), 1))
    assert successor is not None
    assert await call(store.backend.write_record(grant, "taken over")) is False
    assert await call(other.backend.write_record(successor, "v2")) is True
    assert await call(store.backend.read_record("jobs")) == "v2"
    assert await call(other.backend.release(successor)) is True


async def test_records_lists_exactly_the_names_with_the_prefix(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    written = ["jobs", "jobs/a", "jobs/b", "jobsx", "other", "名前/ロック", "名前2"]
    for name in [*written, "jobs/held-but-never-recorded"]:
        lease = await call(store.lock(name, ttl=ttl).try_acquire())
        if name in written:
            assert await call(store.backend.write_record(lease.grant, f"record of {name}"))
        assert await call(lease.release()) is True

    lister = target.connect().backend
    expected = {name: f"record of {name}" for name in written}

    async def listed(prefix: str) -> dict[str, str]:
        found: dict[str, str] = await call(lister.records(prefix))
        return found

    assert await listed("") == expected
    assert await listed("jobs/") == {name: expected[name] for name in ("jobs/a", "jobs/b")}
    assert await listed("jobs") == {name: expected[name]
                                    for name in ("jobs", "jobs/a", "jobs/b", "jobsx")}
    assert await listed("名前/") == {"名前/ロック": expected["名前/ロック"]}
    assert await listed("jobs/b/") == {}
    assert await listed("nothing") == {}


async def test_unicode_long_names_and_the_largest_record_round_trip(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    largest = "é" * (MAX_RECORD_BYTES // 2)  # exactly MAX_RECORD_BYTES of UTF-8
    assert len(largest.encode("utf-8")) == MAX_RECORD_BYTES
    records = {
        "名前/ロック": "période ✓ 🔒",
        "🔒 invoices": largest,
        "x" * 1024: "long name",
        "y" * 1024: "another long name",
        "a" * 48 + "/x": "same readable prefix 1",
        "a" * 48 + "/y": "same readable prefix 2",
        "../../../../etc/passwd": "contained",
        "nul\x00byte\n": "control characters\x00\n",
    }
    for name, record in records.items():
        lease = await call(store.lock(name, ttl=ttl).try_acquire())
        assert await call(store.backend.write_record(lease.grant, record)) is True, repr(name)
        assert await call(lease.release()) is True

    reader = target.connect().backend
    for name, record in records.items():
        assert await call(reader.read_record(name)) == record, repr(name)
    assert await call(reader.records()) == records
    if target.kind.name == "file":
        outside = [path for path in target.tmp.rglob("*")
                   if path.parent != target.tmp / "locks" and path != target.tmp / "locks"]
        assert outside == [], "a record file escaped the lock directory"


BAD_RECORDS: list[tuple[str, object, type[Exception], str]] = [
    ("int", 5, tenure.InvalidArgumentType, "record must be a str, got int"),
    ("bytes", b"{}", tenure.InvalidArgumentType, "record must be a str, got bytes"),
    ("None", None, tenure.InvalidArgumentType, "record must be a str, got NoneType"),
    ("dict", {"period": 1}, tenure.InvalidArgumentType, "json.dumps"),
    ("one byte too many", "x" * (MAX_RECORD_BYTES + 1), tenure.InvalidArgument,
     f"record is {MAX_RECORD_BYTES + 1} bytes of UTF-8; the limit is {MAX_RECORD_BYTES}"),
    ("counted in UTF-8", "é" * (MAX_RECORD_BYTES // 2 + 1), tenure.InvalidArgument,
     f"record is {MAX_RECORD_BYTES + 2} bytes"),
    ("surrogate", "bad\ud800", tenure.InvalidArgument, "lone surrogate"),
]


@pytest.mark.parametrize(("case", "record", "error", "message"), BAD_RECORDS,
                         ids=[case[0] for case in BAD_RECORDS])
async def test_bad_records_fail_before_any_io(target: Target, case: str, record: object,
                                              error: type[Exception], message: str) -> None:
    store = target.connect()
    # A grant no store ever issued: validation must come before the store is asked anything.
    grant = Grant("jobs", 0, store.holder, "no-such-lease", 1, "jobs")
    with pytest.raises(error, match=message):
        await call(store.backend.write_record(grant, record))
    if target.kind.name == "sqlite":
        assert not (target.tmp / "locks.db").exists(), "a bad call created the database"
    elif target.kind.name == "file":
        assert list((target.tmp / "locks").iterdir()) == [], "a bad call wrote a file"
    else:
        assert await call(store.backend.records()) == {}


async def test_a_bad_record_leaves_the_previous_one(target: Target) -> None:
    store = target.connect()
    lease = await call(store.lock("jobs", ttl=target.ttl(5)).try_acquire())
    assert await call(store.backend.write_record(lease.grant, "kept")) is True
    with pytest.raises(tenure.InvalidArgument):
        await call(store.backend.write_record(lease.grant, "x" * (MAX_RECORD_BYTES + 1)))
    assert await call(store.backend.read_record("jobs")) == "kept"
    assert await call(lease.release()) is True


async def test_semaphore_slots_and_records(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(5)
    sem = store.semaphore("imports", limit=3, ttl=ttl)
    first, second = await call(sem.try_acquire()), await call(sem.try_acquire())
    assert first.slot != second.slot
    if target.kind.name in RECORDS_NEED_A_LOCK:
        with pytest.raises(tenure.InvalidArgument, match=r"semaphore slot.*records under a lock"):
            await call(store.backend.write_record(first.grant, "v1"))
        assert await call(store.backend.records("imports")) == {}
    else:
        # One record per name, whichever live slot writes it.
        assert await call(store.backend.write_record(first.grant, "v1")) is True
        assert await call(store.backend.write_record(second.grant, "v2")) is True
        assert await call(store.backend.read_record("imports")) == "v2"
        assert await call(first.release()) is True
        assert await call(store.backend.write_record(first.grant, "released slot")) is False
        assert await call(store.backend.records("imports")) == {"imports": "v2"}


CHILD = """
import json, sys
import tenure
url, name, ttl, action = sys.argv[1:5]
with tenure.connect(url) as store:
    lease = store.lock(name, ttl=float(ttl)).try_acquire()
    if action == "write":
        print(store.backend.write_record(lease.grant, json.loads(sys.argv[5])))
    else:
        print(json.dumps(store.backend.read_record(name)))
    lease.release()
"""


def in_another_process(target: Target, *arguments: str) -> str:
    finished = subprocess.run(
        [sys.executable, "-c", CHILD, target.url, "jobs", str(target.ttl(5)), *arguments],
        capture_output=True, text=True, timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr
    return finished.stdout.strip()


async def test_a_record_written_in_one_process_is_read_in_another(target: Target) -> None:
    if not target.kind.shared_between_processes:
        pytest.skip(f"{target.kind.name}:// lives inside one process; the other tests read "
                    "records through a second store object")
    record = json.dumps({"period": "2026-01-01T00:05:00Z", "by": "child ✓"})
    assert in_another_process(target, "write", json.dumps(record)) == "True"
    store = target.connect()
    assert await call(store.backend.read_record("jobs")) == record

    lease = await call(store.lock("jobs", ttl=target.ttl(5)).try_acquire())
    assert await call(store.backend.write_record(lease.grant, "from the parent")) is True
    assert await call(lease.release()) is True
    assert json.loads(in_another_process(target, "read")) == "from the parent"
