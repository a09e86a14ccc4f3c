"""SQLite connections: opening a new database from many threads at once, and pooling (not tying
connections to threads, so short-lived threads do not leak them)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import tenure
from tenure.stores import SQLiteStore


def run_together(work: Callable[[int], None], count: int) -> list[BaseException]:
    """Run `work(i)` in `count` threads released at the same instant; return their errors."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            barrier.wait(timeout=10)
            work(worker)
        except BaseException as exc:  # reported to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def test_a_new_database_opened_by_many_threads_at_once(tmp_path: Path) -> None:
    """Turning a new file into WAL does not wait on the busy handler: opening must retry."""
    for attempt in range(10):
        backend = SQLiteStore(tmp_path / f"new-{attempt}.db")

        def acquire(worker: int, backend: SQLiteStore = backend) -> None:
            assert backend.try_acquire(f"job-{worker}", "me", 5.0, 1) is not None

        errors = run_together(acquire, 8)
        backend.close()
        assert errors == []


def test_connections_are_reused_across_short_lived_threads(tmp_path: Path) -> None:
    backend = SQLiteStore(tmp_path / "locks.db")
    with tenure.connect(backend) as store:
        for burst in range(5):

            def cycle(worker: int, burst: int = burst) -> None:
                lease = store.lock(f"job-{burst}-{worker}", ttl=5).try_acquire()
                assert lease is not None
                lease.release()

            assert run_together(cycle, 4) == []
        # 20 threads in all, at most 4 at once (+1 for the renewal thread)
        assert len(backend._all) <= 5, len(backend._all)
