"""Bad input fails at the call with a message naming the argument, and touches nothing."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

import pytest
from conftest import Target, call

import tenure
import tenure.aio

pytestmark = pytest.mark.anyio

BAD_LOCK_CALLS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("empty name", {"name": ""}, tenure.InvalidArgument, "name must not be empty"),
    ("int name", {"name": 5}, tenure.InvalidArgumentType, "name must be a str"),
    ("None name", {"name": None}, tenure.InvalidArgumentType, "name must be a str"),
    ("long name", {"name": "x" * 1025}, tenure.InvalidArgument, "limit is 1024"),
    ("surrogate", {"name": "bad\ud800"}, tenure.InvalidArgument, "lone surrogate"),
    ("zero ttl", {"ttl": 0}, tenure.InvalidArgument, "ttl=0 is out of range"),
    ("negative ttl", {"ttl": -1}, tenure.InvalidArgument, "ttl=-1 is out of range"),
    ("text ttl", {"ttl": "30"}, tenure.InvalidArgumentType, "ttl must be seconds"),
    ("bool ttl", {"ttl": True}, tenure.InvalidArgumentType, "ttl must be seconds"),
    ("nan ttl", {"ttl": math.nan}, tenure.InvalidArgument, "NaN"),
    ("infinite ttl", {"ttl": math.inf}, tenure.InvalidArgument,
     "ttl=inf (infinite, or an int too large for a float) is out of range"),
    ("int too large for a float", {"ttl": 10**400}, tenure.InvalidArgument,
     "ttl=inf (infinite, or an int too large for a float) is out of range"),
    ("huge ttl", {"ttl": timedelta(days=30)}, tenure.InvalidArgument, "out of range"),
    ("empty holder", {"holder": ""}, tenure.InvalidArgument, "holder must be 1 to 256"),
    ("int holder", {"holder": 7}, tenure.InvalidArgumentType, "holder must be a str"),
    ("renew too late", {"ttl": 20, "renew_every": 11}, tenure.InvalidArgument, "renew_every=11"),
    ("zero min_wait", {"min_wait": 0}, tenure.InvalidArgument, "min_wait=0"),
    ("max below min", {"min_wait": 1, "max_wait": 0.5}, tenure.InvalidArgument,
     "max_wait=0.5 is below min_wait=1"),
    ("on_lost", {"on_lost": "print"}, tenure.InvalidArgumentType, "on_lost must be a function"),
]


async def assert_untouched(target: Target, store: Any) -> None:
    if target.kind.name == "sqlite":
        assert not (target.tmp / "locks.db").exists(), "a bad call created the database"
    elif target.kind.name == "file":
        assert list((target.tmp / "locks").iterdir()) == [], "a bad call created a lock file"
    else:
        assert await call(store.leases()) == []


@pytest.mark.parametrize(("case", "arguments", "error", "message"), BAD_LOCK_CALLS,
                         ids=[case[0] for case in BAD_LOCK_CALLS])
async def test_bad_lock_arguments(target: Target, case: str, arguments: dict[str, Any],
                                  error: type[Exception], message: str) -> None:
    store = target.connect()
    options = {"name": "jobs", **arguments}
    with pytest.raises(error, match=re.escape(message)):
        store.lock(**options)
    with pytest.raises(error):
        store.semaphore(limit=2, **options)
    await assert_untouched(target, store)


@pytest.mark.parametrize(("limit", "error"), [
    (0, tenure.InvalidArgument), (-1, tenure.InvalidArgument), (10_001, tenure.InvalidArgument),
    (1.5, tenure.InvalidArgumentType), (True, tenure.InvalidArgumentType),
    ("3", tenure.InvalidArgumentType),
])
async def test_bad_semaphore_limit(target: Target, limit: Any, error: type[Exception]) -> None:
    store = target.connect()
    with pytest.raises(error, match="limit"):
        store.semaphore("imports", limit)
    await assert_untouched(target, store)


@pytest.mark.parametrize(("timeout", "error", "message"), [
    (-1, tenure.InvalidArgument, "timeout=-1 is negative"),
    ("10", tenure.InvalidArgumentType, "timeout must be"),
    (math.nan, tenure.InvalidArgument, "NaN"),
])
async def test_bad_timeout(target: Target, timeout: Any, error: type[Exception],
                           message: str) -> None:
    store = target.connect()
    with pytest.raises(error, match=message):
        store.lock("jobs").acquire(timeout=timeout)
    await assert_untouched(target, store)


async def test_bad_admin_arguments(target: Target) -> None:
    store = target.connect()
    with pytest.raises(tenure.InvalidArgument, match="name must not be empty"):
        await call(store.break_lease(""))
    with pytest.raises(tenure.InvalidArgumentType, match="prefix must be a str"):
        await call(store.leases(5))
    await assert_untouched(target, store)


@pytest.mark.parametrize(("url", "error", "message"), [
    ("nope", tenure.InvalidArgument, "has no scheme"),
    ("mongodb://user:hunter2@cache:27017/0", tenure.InvalidArgument, "not supported"),
    ("redis://user:hunter2@/0", tenure.InvalidArgument, "names no server"),
    ("unix://", tenure.InvalidArgument, "names no server"),
    ("sqlite://dbhost/locks.db", tenure.InvalidArgument, "stores are local"),
    ("sqlite:////tmp/x.db?bogus=1", tenure.InvalidArgument,
     "unknown option 'bogus' for sqlite:// stores; accepted: synchronous"),
    ("sqlite:////tmp/x.db?synchronous=off", tenure.InvalidArgument, "synchronous='off'"),
    ("file:///tmp/x?fsync=1", tenure.InvalidArgument,
     "unknown option 'fsync' for file:// stores; accepted: retain"),
    (5, tenure.InvalidArgumentType, "url must be a str"),
])
def test_bad_urls(url: Any, error: type[Exception], message: str) -> None:
    for module in (tenure, tenure.aio):
        with pytest.raises(error, match=message) as raised:
            module.connect(url)
        assert "hunter2" not in str(raised.value)
