"""Errors of the local stores that retrying cannot clear fail at once: a SQLite path
whose directory cannot be made, a file that is not a database, a lock directory gone. Busy
databases and held locks stay transient or plain misses. (Permission errors cannot be made
as root, which the suite runs as: their classification is the same code path.)"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from refusals import refused_within_a_second
from waiting import call

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.stores

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sync", "async"])
def module(request: pytest.FixtureRequest) -> Any:
    return tenure.aio if request.param == "async" else tenure


async def test_sqlite_under_a_file_is_refused(module: Any, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("not a directory")
    message = await refused_within_a_second(module.connect(f"sqlite:///{tmp_path}/plain/x.db"))
    assert "cannot be created or written" in message and "path in the URL" in message


async def test_sqlite_file_that_is_not_a_database_is_refused(module: Any,
                                                             tmp_path: Path) -> None:
    (tmp_path / "x.db").write_bytes(b"this is no SQLite database at all, " * 100)
    message = await refused_within_a_second(module.connect(f"sqlite:///{tmp_path}/x.db"))
    assert "not a usable SQLite database" in message, message


async def test_sqlite_path_that_is_a_directory_is_refused_as_one(module: Any,
                                                                  tmp_path: Path) -> None:
    """`sqlite:///.` names the working directory: say so, not "unable to open database file;
    check that the database file and its directory are writable"."""
    store = module.connect(f"sqlite:///{tmp_path}")
    try:  # bounded: were it transient, acquire would retry it until its timeout
        with pytest.raises(tenure.StoreRefused) as raised:
            await call(store.lock("jobs", ttl=5).acquire(timeout=3))
    finally:
        await call(store.close())
    message = str(raised.value)
    assert f"{str(tmp_path)!r} is a directory, not a database file" in message, message
    assert f"sqlite:///{tmp_path}/locks.db" in message and "writable" not in message, message
    store = module.connect(f"sqlite:///{tmp_path}")
    try:  # a listing says it too (a directory is no empty database)
        with pytest.raises(tenure.StoreRefused, match="is a directory, not a database file"):
            await call(store.leases())
    finally:
        await call(store.close())


async def test_a_lock_directory_that_is_a_file_is_refused_as_one(module: Any,
                                                                tmp_path: Path) -> None:
    """`file:///etc/passwd`: a file, not a missing directory to recreate."""
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(tenure.StoreRefused) as raised:
        module.connect(f"file://{tmp_path}/plain")
    message = str(raised.value)
    assert f"'{tmp_path}/plain' is a file, not a directory" in message, message
    assert "missing" not in message and "recreate" not in message, message


async def test_a_busy_sqlite_database_stays_transient(module: Any, tmp_path: Path) -> None:
    import sqlite3

    kind = module.stores.AsyncSQLiteStore if module is tenure.aio else module.stores.SQLiteStore
    store = module.connect(kind(tmp_path / "x.db", busy_timeout=0.05))
    assert await call(store.lock("warm-up", ttl=5).try_acquire()) is not None
    blocker = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(store.lock("jobs", ttl=5, max_wait=0.05).acquire(timeout=0.3))
        assert raised.value.transient and "locked" in str(raised.value)
    finally:
        blocker.rollback()
        blocker.close()
        await call(store.close())


async def test_a_lock_directory_removed_after_connect_is_refused(module: Any,
                                                                 tmp_path: Path) -> None:
    store = module.connect(f"file://{tmp_path}/locks")
    shutil.rmtree(tmp_path / "locks")
    message = await refused_within_a_second(store)
    assert "missing or not a directory" in message and "locks" in message, message


async def test_a_refused_renewal_is_a_failed_renewal_not_a_loss(module: Any, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    """The store object closed under a held lease: each renewal raises StoreRefused. The
    monitor survives it, and the lease is lost at its deadline, not at the first refusal."""
    import logging

    from waiting import eventually

    store = module.connect(f"sqlite:///{tmp_path}/x.db")
    lease = await call(store.lock("jobs", ttl=0.9).try_acquire())
    assert lease is not None
    deadline = lease.deadline
    with caplog.at_level(logging.WARNING, logger="tenure"):
        await call(store.backend.close())
        await eventually(lambda: lease.lost_reason is not None, 5, "the loss")
    assert lease.lost_reason is tenure.LostReason.DEADLINE
    assert time.monotonic() >= deadline - 0.01
    refused = [r for r in caplog.records if "renewal" in r.getMessage()
               and "the store was closed" in r.getMessage()]
    assert refused, "the renewal met the refusal and logged it"
    assert store._monitor._background.alive(), "the renewal loop survived"
    await call(store.close())
