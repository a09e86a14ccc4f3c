"""Hostile names: all distinct, all contained, none escaping the store's key space."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import STORE_KINDS, StoreKind, Target, call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenure

pytestmark = pytest.mark.anyio

HOSTILE_NAMES = [
    "a/b", "a_b", "a-b", "A", "a", "../../../../etc/passwd", "..", ".", "./.", " ", "  spaced  ",
    "名前/ロック", "🔒 invoices", "x" * 1024, "back\\slash", "C:\\Windows\\system32", "NUL", "con",
    "%2e%2e%2f", "\n", "tab\tname", "nul\x00byte", "/absolute/path", "~root", "$(rm -rf /)",
    "'; DROP TABLE tenure_leases; --", "*", "?", ".hidden", "trailing.", "a" * 48 + "/x",
    "a" * 48 + "/y",
]


async def test_hostile_names_are_distinct_and_contained(target: Target) -> None:
    store, other = target.connect(), target.connect()
    ttl = target.ttl(5)
    leases = {name: await call(store.lock(name, ttl=ttl).try_acquire()) for name in HOSTILE_NAMES}
    assert all(lease is not None and lease.name == name for name, lease in leases.items())
    for name in HOSTILE_NAMES:
        assert await call(other.lock(name, ttl=ttl).try_acquire()) is None, repr(name)
    listed = await call(other.leases())
    assert sorted(info.name for info in listed) == sorted(HOSTILE_NAMES)
    if target.kind.name == "file":
        outside = [path for path in target.tmp.rglob("*")
                   if not path.is_relative_to(target.tmp / "locks")]
        assert outside == [target.tmp / "locks"] or outside == []
        assert all(path.parent == target.tmp / "locks" for path in (target.tmp / "locks").iterdir())
    for lease in leases.values():
        assert await call(lease.release()) is True


names = st.text(min_size=1, max_size=60)


@pytest.mark.parametrize("kind", STORE_KINDS, ids=lambda kind: kind.name)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=names, second=names)
def test_distinct_names_never_share_a_lock(kind: StoreKind, tmp_path: Path, first: str,
                                           second: str, request: pytest.FixtureRequest) -> None:
    try:
        first.encode("utf-8")
        second.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates are refused at the call (see test_bad_input)
    kind.start_service(request)
    with tenure.connect(kind.make_url(tmp_path)) as store:
        lease = store.lock(first, ttl=kind.ttl(5), holder="first").try_acquire()
        assert lease is not None
        try:
            contender = store.lock(second, ttl=kind.ttl(5), holder="second").try_acquire()
            if first == second:
                assert contender is None
            else:
                assert contender is not None, f"{first!r} and {second!r} share a lock"
                contender.release()
        finally:
            lease.release()
    if kind.name == "file":
        assert all(entry.parent == tmp_path / "locks" for entry in (tmp_path / "locks").iterdir())
        assert sorted(os.listdir(tmp_path)) == ["locks"]


# Names around the characters that break naive prefix filters: NUL (SQLite's substr() of TEXT
# stops there), the last code point (a "prefix + U+10FFFF" upper bound misses names past it),
# and the characters next to the surrogate gap.
PREFIX_NAMES = [
    "a", "a\x00", "a\x00b", "a\x00\x00c", "ab", "a\x01", "\x00", "\x00\x00", "\x00z",
    "\U0010ffff", "\U0010ffff\U0010ffff", "\U0010ffffz", "a\U0010ffff", "a\U0010ffffb",
    "\ud7ff", "\ud7ffx", "\ue000", "b",
]
PREFIXES = ["", "a", "a\x00", "a\x00b", "a\x00\x00", "\x00", "\U0010ffff", "a\U0010ffff",
            "\ud7ff", "\ue000", "c"]


async def test_listings_by_prefix_keep_every_character_of_the_name(target: Target) -> None:
    store, ttl = target.connect(), target.ttl(30)
    leases = {name: await call(store.lock(name, ttl=ttl).try_acquire()) for name in PREFIX_NAMES}
    assert all(lease is not None for lease in leases.values())
    for name, lease in leases.items():
        assert await call(store.backend.write_record(lease.grant, f"of {name!r}")), repr(name)
    lister = target.connect()
    for prefix in PREFIXES:
        expected = sorted(name for name in PREFIX_NAMES if name.startswith(prefix))
        listed = sorted(info.name for info in await call(lister.leases(prefix)))
        assert listed == expected, f"leases({prefix!r})"
        records: dict[str, str] = await call(lister.backend.records(prefix))
        assert records == {name: f"of {name!r}" for name in expected}, f"records({prefix!r})"
    for lease in leases.values():
        assert await call(lease.release()) is True


# The longest names allowed (1,024 characters), also where their UTF-8 is large: 1,000 CJK
# characters are 3,000 bytes, past what a btree index entry takes (about 2,700 bytes).
LONGEST_NAMES = ["".join(chr(0x4E00 + (i * 7919) % 0x5200) for i in range(1000)),
                 "x" * 1023 + "\U0001f512", "é" * 1024]


@pytest.mark.parametrize("name", LONGEST_NAMES, ids=["cjk-1000", "1024-with-emoji", "1024-e-acute"])
async def test_longest_names_acquire_renew_release_break_and_list(target: Target,
                                                                  name: str) -> None:
    store, admin, ttl = target.connect(), target.connect(), target.ttl(30)
    lease = await call(store.lock(name, ttl=ttl).try_acquire())
    assert lease is not None and lease.name == name
    assert await call(admin.lock(name, ttl=ttl).try_acquire()) is None
    assert await call(store.backend.renew([lease.grant], ttl)) == [lease.grant]
    assert [(info.name, info.token) for info in await call(admin.leases(name[:10]))] == [
        (name, lease.token)]
    assert await call(lease.release()) is True
    again = await call(store.lock(name, ttl=ttl).try_acquire())
    assert again is not None and again.token > lease.token
    assert await call(admin.break_lease(name)) == 1
    assert await call(store.backend.renew([again.grant], ttl)) != [again.grant]
    slots = [await call(store.semaphore(name, 2, ttl=ttl).try_acquire()) for _ in range(3)]
    assert slots[0] is not None and slots[1] is not None and slots[2] is None
    assert slots[1].token > slots[0].token > again.token
    assert sorted(info.slot for info in await call(admin.leases(name))) == [0, 1]
    assert await call(slots[0].release()) is True and await call(slots[1].release()) is True
    assert await call(admin.leases(name)) == []
