"""sqlite://'s `retain` option: the rows of names nobody holds are deleted by the store itself,
at the release with retain=0, by a later release's sweep once they have been idle `retain`
seconds, never with retain=inf; the URL and the errors say the option like the others."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from waiting import eventually, wait_until

import tenure
import tenure.aio
from tenure._async.stores.sqlite import _leases as sqlite_leases
from tenure._async.stores.sqlite._sql import FORGET_CHUNK
from tenure._hostclock import BOOT_ID


def rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [name for (name,) in db.execute("SELECT name FROM tenure_leases ORDER BY name")]


def test_retain_0_forgets_a_name_at_its_release_and_its_next_token_is_larger(
        tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    store = tenure.connect(f"sqlite:///{path}?retain=0")
    try:
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=30).acquire() as lease:
                assert rows(path) == ["invoice-7"]
                tokens.append(lease.token)
            assert rows(path) == []
        assert tokens == sorted(set(tokens)), tokens
        first, second = (store.semaphore("pool", 2, ttl=30).try_acquire() for _ in range(2))
        assert first is not None and second is not None
        first.release()
        assert rows(path) == ["pool"], "the other slot's row stays while it is held"
        second.release()
        assert rows(path) == []
    finally:
        store.close()


def test_a_release_sweeps_the_names_idle_longer_than_retain(tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    store = tenure.connect(f"sqlite:///{path}", retain=1)
    try:
        for number in range(50):
            store.lock(f"invoice-{number}", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("held", ttl=30).try_acquire()
        assert len(rows(path)) == 51

        def swept() -> bool:
            store.lock("ticker", ttl=30).try_acquire().release()  # type: ignore[union-attr]
            return rows(path) == ["held", "ticker"]

        # At least a second: retain is 1 s; then a release within the sweep interval (1 s).
        wait_until(swept, 30, "a release to sweep the 50 idle names")
        assert held is not None and held.release()
    finally:
        store.close()


def test_retain_inf_keeps_every_name_and_the_url_says_retain(tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    store = tenure.connect(f"sqlite:///{path}?retain=inf")
    try:
        assert store.url.endswith("?retain=inf")
        store.lock("kept", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        assert store.prune(3600) == 0
        assert rows(path) == ["kept"]
        assert store.prune(0) == 1
    finally:
        store.close()
    assert tenure.connect(f"sqlite:///{path}").url == f"sqlite:///{path}"  # 3600: the default


@pytest.mark.parametrize(("retain", "message"), [
    ("-1", "retain='-1' is out of range: give seconds from 0"),
    ("soon", "retain='soon' is not a number"),
])
def test_a_bad_retain_is_refused_before_any_file_is_opened(tmp_path: Path, retain: str,
                                                           message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"sqlite:///{tmp_path}/locks.db?retain={retain}")
    assert list(tmp_path.iterdir()) == []


def fill_idle_names(path: Path, count: int) -> None:
    """`count` names released long ago (expires_at 0 on this boot), written straight into the
    lease table, quicker than taking each."""
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO tenure_leases VALUES (?, 0, 'gone', '', 1, ?, 0)",
            [(f"old-{number:05}", BOOT_ID) for number in range(count)])


@pytest.mark.anyio
async def test_an_async_release_sweeps_in_a_worker_thread_a_chunk_per_transaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "locks.db"
    store = tenure.aio.connect(f"sqlite:///{path}", retain=1)
    chunks: list[int] = []
    real_chunk = sqlite_leases._forget_chunk_in

    def recorded(*arguments: Any) -> Any:
        chunks.append(threading.get_ident())
        return real_chunk(*arguments)

    monkeypatch.setattr(sqlite_leases, "_forget_chunk_in", recorded)
    try:
        held = await store.lock("ticker", ttl=30).try_acquire()  # makes the tables
        fill_idle_names(path, 2 * FORGET_CHUNK + 500)
        loop_thread = threading.get_ident()
        assert held is not None and await held.release()  # the store's first sweep is due
        await eventually(lambda: rows(path) == ["ticker"], 30, "the sweep of the idle names")
        assert len(chunks) >= 3, "2,501 names are three chunks of FORGET_CHUNK at most"
        assert loop_thread not in chunks, "a sweep ran on the event loop's thread"
    finally:
        await store.close()
