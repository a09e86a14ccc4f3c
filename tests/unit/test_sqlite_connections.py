"""SQLite connections are pooled, not tied to threads: short-lived threads do not leak them."""

from __future__ import annotations

import threading
from pathlib import Path

import tenure
from tenure.stores import SQLiteStore


def test_connections_are_reused_across_short_lived_threads(tmp_path: Path) -> None:
    backend = SQLiteStore(tmp_path / "locks.db")
    with tenure.connect(backend) as store:
        for burst in range(5):
            barrier = threading.Barrier(4)

            def work(worker: int, burst: int = burst,
                     barrier: threading.Barrier = barrier) -> None:
                barrier.wait(timeout=10)
                lease = store.lock(f"job-{burst}-{worker}", ttl=5).try_acquire()
                assert lease is not None
                lease.release()

            threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=10)
        # 20 threads in all, at most 4 at once (+1 for the renewal thread)
        assert len(backend._all) <= 5, len(backend._all)
