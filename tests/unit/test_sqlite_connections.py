"""SQLite connections are pooled, not tied to threads: short-lived threads do not leak them."""

from __future__ import annotations

import threading
from pathlib import Path

import tenure
from tenure.stores import SQLiteStore


def test_a_new_database_opened_by_many_threads_at_once(tmp_path: Path) -> None:
    """Turning a new file into WAL does not wait on the busy handler: opening must retry."""
    for attempt in range(10):
        backend = SQLiteStore(tmp_path / f"new-{attempt}.db")
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def open_and_lock(worker: int, backend: SQLiteStore = backend,
                          barrier: threading.Barrier = barrier,
                          errors: list[BaseException] = errors) -> None:
            try:
                barrier.wait(timeout=10)
                assert backend.try_acquire(f"job-{worker}", "me", 5.0, 1) is not None
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        threads = [threading.Thread(target=open_and_lock, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        backend.close()
        assert errors == []


def test_connections_are_reused_across_short_lived_threads(tmp_path: Path) -> None:
    backend = SQLiteStore(tmp_path / "locks.db")
    errors: list[BaseException] = []
    with tenure.connect(backend) as store:
        for burst in range(5):
            barrier = threading.Barrier(4)

            def work(worker: int, burst: int = burst,
                     barrier: threading.Barrier = barrier) -> None:
                try:
                    barrier.wait(timeout=10)
                    lease = store.lock(f"job-{burst}-{worker}", ttl=5).try_acquire()
                    assert lease is not None
                    lease.release()
                except BaseException as exc:  # reported by the test below
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=10)
        assert errors == []
        # 20 threads in all, at most 4 at once (+1 for the renewal thread)
        assert len(backend._all) <= 5, len(backend._all)
