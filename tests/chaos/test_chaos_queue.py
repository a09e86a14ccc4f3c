"""`tenure chaos --workload queue`: keyed messages through the suite's PostgreSQL queue, handled
by 4 worker processes (tenure.Worker queue jobs, one lock per key) under kills, pauses, proxy
faults (between the workers and the lock store) and a server restart, with zero violations with
the key locks on SQLite, Redis, PostgreSQL and MariaDB (with SQLite the restart is the queue's
PostgreSQL server); the positive control (`--no-key-lock`: handlers of one key overlap, exit 1);
and the queue checkers on hand-written histories.

The runs last 22 s (seed 149, as tests/chaos/test_chaos_jobs.py); TENURE_CHAOS_SECONDS,
TENURE_CHAOS_WORKERS and TENURE_CHAOS_SEED override them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_histories import HandWrittenHistory
from chaos_runs import run_and_report

from tenure.chaos import Report
from tenure.chaos._workload_checkers import check_queue

SEED = int(os.environ.get("TENURE_CHAOS_SEED", "149"))
SERVER_FAULTS = ("kill", "pause", "proxy", "restart")


def queue(store: str, queue_url: str, tmp_path: Path,
          restart: Callable[[], object] | None = None, **options: Any) -> Report:
    return run_and_report(store, tmp_path, restart, {"duration": 22.0, "seed": SEED,
                                                     "workload": "queue", "queue_url": queue_url,
                                                     **options})


def assert_clean(report: Report, *kinds: str) -> None:
    figures = report.verdict.figures
    assert report.violations == [], report.as_dict()
    assert figures["messages completed"] >= 100, report.as_dict()
    assert figures["messages poisoned, by reason"].get("handler failed", 0) >= 3
    assert figures["messages left in the queue"] == 0 and figures["messages lost"] == 0
    injected = {label.split()[0] for label in report.faults}
    assert set(kinds) <= injected, report.as_dict()
    assert report.verdict.takeovers, "liveness was not measured"
    if "restart" in kinds:
        assert figures["recovery after store restart (s)"], report.as_dict()


def test_queue_with_sqlite_locks_and_a_queue_server_restart(postgres_server: Any,
                                                           tmp_path: Path) -> None:
    report = queue(f"sqlite:///{tmp_path}/locks.db", postgres_server.url, tmp_path,
                   restart=postgres_server.restart, faults=("kill", "pause", "restart"))
    assert_clean(report, "kill", "pause", "restart")


def test_queue_with_redis_locks(redis_server: Any, postgres_server: Any, tmp_path: Path) -> None:
    report = queue(redis_server.url, postgres_server.url, tmp_path,
                   restart=redis_server.restart, faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


def test_queue_with_postgres_locks(postgres_server: Any, tmp_path: Path) -> None:
    report = queue(postgres_server.url, postgres_server.url, tmp_path,
                   restart=postgres_server.restart, faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


def test_queue_with_mariadb_locks(mariadb_server: Any, postgres_server: Any,
                                  tmp_path: Path) -> None:
    report = queue(mariadb_server.url, postgres_server.url, tmp_path,
                   restart=mariadb_server.restart, faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


def test_without_the_key_lock_handlers_of_a_key_overlap_and_the_command_exits_1(
        postgres_server: Any, tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "tenure", "chaos", "--workload", "queue", "--no-key-lock",
         "--store", f"sqlite:///{tmp_path}/locks.db", "--queue-url", postgres_server.url,
         "--keys", "1", "--workers", "3", "--duration", "12", "--faults", "kill", "--seed", "1",
         "--json", "--dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=180)
    assert finished.stdout, finished.stderr
    report = json.loads(finished.stdout)
    assert finished.returncode == 1, report
    assert report["by_checker"]["keys"] >= 1, report
    assert report["figures"]["overlapping handlers of a key"] >= 1, report
    assert any("two handlers of one key at once" in v["message"]
               for v in report["violations"]), report


# -- the checkers on hand-written histories ------------------------------------------------------

class QueueHistory(HandWrittenHistory):
    """A queue history as the producer, the workers and the orchestrator would write it."""

    def __init__(self) -> None:
        super().__init__()
        self.nemesis(0.0, "phase", name="Q", until=20.0)

    def send(self, message: str, poison: bool = False) -> None:
        self.add(0.1, 1, "ok", "enqueue", n=int(message), message=message, poison=poison)

    def handle(self, start: float, end: float, pid: int, message: str, key: str, token: int,
               complete: bool = True, deadline: float = 99.0) -> None:
        fields = {"n": int(message), "message": message, "key": key, "token": token,
                  "name": f"key-{key}"}
        self.add(start, pid, "invoke", "handle", **fields)
        self.add(end, pid, "ok", "handle", accepted=True, deadline=deadline, **fields)
        if complete:
            self.add(end + 0.01, pid, "ok", "complete", n=int(message), message=message)

    def end(self, heal: float = 1.0, remaining: int = 0) -> list[dict[str, Any]]:
        self.nemesis(heal, "heal", name="Q", bound=5.0)
        self.nemesis(19.0, "queue-final", remaining=remaining)
        return self.events


def test_a_clean_queue_history_passes_every_checker() -> None:
    history = QueueHistory()
    for message in ("1", "2", "3"):
        history.send(message)
    history.send("4", poison=True)
    history.handle(1.0, 1.1, 2, "1", "a", token=10)
    history.handle(1.2, 1.3, 3, "2", "a", token=11)
    history.handle(1.0, 1.2, 3, "3", "b", token=5)
    history.nemesis(1.5, "poisoned", n=4, reason="handler failed on ...")
    verdict = check_queue(history.end())
    assert verdict.violations == []
    assert verdict.figures["messages completed"] == 3
    assert verdict.figures["messages poisoned, by reason"] == {"handler failed": 1}


def test_queue_checkers_find_overlapping_keys_lost_and_twice_completed_messages() -> None:
    history = QueueHistory()
    for message in ("1", "2", "3"):
        history.send(message)
    history.handle(1.0, 1.3, 2, "1", "a", token=0)
    history.handle(1.1, 1.2, 3, "2", "a", token=0)  # the same key, at once (no key lock)
    history.handle(1.5, 1.6, 2, "1", "a", token=0)  # completed again
    history.handle(1.7, 1.8, 2, "2", "a", token=0, complete=False)  # a stale delivery: counted
    verdict = check_queue(history.end(remaining=1))
    assert verdict.figures["messages handled again after they were completed (stale delivery)"] \
        == 2
    assert {v.checker for v in verdict.violations} == {"keys", "messages"}
    messages = " ".join(v.message for v in verdict.violations)
    assert "completed 2 times" in messages and "neither completed nor poisoned" in messages
    # A handler whose key lock's deadline passed before the other began does not overlap it.
    history = QueueHistory()
    history.send("1")
    history.send("2")
    history.handle(1.0, 1.3, 2, "1", "a", token=10, complete=False, deadline=1.05)
    history.handle(1.1, 1.2, 3, "2", "a", token=11)
    history.handle(2.0, 2.1, 3, "1", "a", token=12)
    verdict = check_queue(history.end())
    assert verdict.violations == []
    assert verdict.figures["messages handled more than once (not completed the first time)"] == 1
    # Nor does one that began after its own deadline (paused between the runner's check and
    # the handler's first step; its write refused): it never counted as running (a fresh-clone
    # run: the lease's deadline 1.2 s before the handler began).
    history = QueueHistory()
    history.send("1")
    history.send("2")
    history.handle(1.0, 1.3, 3, "2", "a", token=11)
    history.handle(1.2, 1.25, 2, "1", "a", token=10, complete=False, deadline=1.1)
    history.handle(2.0, 2.1, 3, "1", "a", token=12)
    verdict = check_queue(history.end())
    assert verdict.violations == [], verdict.violations


def test_a_complete_cut_by_a_kill_may_have_deleted_its_message_a_failed_one_did_not() -> None:
    """A worker killed between sending a complete and its answer: the store may have deleted
    the message (indeterminate, as in Jepsen): not a loss. A complete answered with a failure
    deleted nothing: its message, never completed, is lost."""
    history = QueueHistory()
    history.send("1")
    history.send("2")
    history.handle(1.0, 1.1, 2, "1", "a", token=10, complete=False)
    history.add(1.11, 2, "invoke", "complete", n=1, message="1")  # then the worker was killed
    history.handle(1.2, 1.3, 3, "2", "b", token=11, complete=False)
    history.add(1.31, 3, "invoke", "complete", n=2, message="2")
    history.add(1.32, 3, "fail", "complete", n=2, message="2", error="ResourceNotFoundError")
    verdict = check_queue(history.end())
    messages = [v.message for v in verdict.violations if v.checker == "messages"]
    assert len(messages) == 1 and "1 message(s) sent but neither completed" in messages[0]
    assert "(e.g. 2)" in messages[0]
    assert verdict.figures["completes unanswered (the message may be deleted)"] == 1


def test_a_message_completed_twice_is_allowed_only_after_a_release_cut_by_a_kill() -> None:
    """On Azure an untried release sends a copy, then deletes the original: a worker killed in
    between leaves both, and each may be completed. A release that was answered (ok, or failed
    before any copy, as a stale receipt now does) explains no second completion."""
    def completed_twice(release_answer: str | None) -> list[str]:
        history = QueueHistory()
        history.send("1")
        history.add(1.0, 2, "invoke", "release", n=1, message="m1")
        if release_answer is not None:
            history.add(1.01, 2, release_answer, "release", n=1, message="m1")
        history.handle(1.5, 1.6, 3, "1", "a", token=11)
        history.handle(2.0, 2.1, 4, "1", "a", token=12)
        verdict = check_queue(history.end())
        return [v.message for v in verdict.violations if v.checker == "messages"]

    assert completed_twice(None) == []
    assert completed_twice("ok") == ["message 1 was completed 2 times"]
    assert completed_twice("fail") == ["message 1 was completed 2 times"]


def test_queue_on_azurite_with_sqlite_locks(azurite_queue: Any, tmp_path: Path,
                                            monkeypatch: Any) -> None:
    # Azurite keeps its queues in memory: a restart would lose every message, so no restart.
    monkeypatch.setenv("AZURE_STORAGE_QUEUE_CONNECTION_STRING", azurite_queue.connection_string)
    report = queue(f"sqlite:///{tmp_path}/locks.db", "azqueue://", tmp_path,
                   faults=("kill", "pause"))
    assert_clean(report, "kill", "pause")
