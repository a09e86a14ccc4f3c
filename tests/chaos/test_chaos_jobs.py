"""`tenure chaos --workload jobs`: a periodic job (1 s period, 2 s ttl) on 4 worker processes
under kills, pauses, proxy faults and a store restart, with zero violations on SQLite, Redis,
PostgreSQL and MariaDB; the positive control (`--skip-record`: periods run again and are
recorded twice, exit 1); and the checkers on hand-written histories.

The runs are short (22 s; seed 149 puts a proxy latency, a kill, a 1.5x-ttl pause and the store
restart in the 14 s fault window, 3.7 s to spare): `make test` runs on 2 shared cores.
TENURE_CHAOS_SECONDS, TENURE_CHAOS_WORKERS and TENURE_CHAOS_SEED override them (`make chaos`);
each run leaves its summary table in run/summary.txt next to its history.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chaos_histories import HandWrittenHistory
from chaos_runs import run_and_report

from tenure.chaos import Report
from tenure.chaos._workload_checkers import check_jobs

SEED = int(os.environ.get("TENURE_CHAOS_SEED", "149"))
SERVER_FAULTS = ("kill", "pause", "proxy", "restart")


def jobs(store: str, tmp_path: Path, restart: Callable[[], object] | None = None,
         **options: Any) -> Report:
    return run_and_report(store, tmp_path, restart,
                          {"duration": 22.0, "seed": SEED, "workload": "jobs", **options})


def assert_clean(report: Report, *kinds: str) -> None:
    """No violation, periods recorded, each fault kind in `kinds` injected, liveness measured,
    and after a restart a period recorded again."""
    figures = report.verdict.figures
    assert report.violations == [], report.as_dict()
    assert figures["periods recorded"] >= 8, report.as_dict()
    injected = {label.split()[0] for label in report.faults}
    assert set(kinds) <= injected, report.as_dict()
    assert report.verdict.takeovers, "liveness was not measured"
    if "restart" in kinds:
        assert figures["recovery after store restart (s)"], report.as_dict()


# -- fenced runs, one per store ------------------------------------------------------------------

def test_jobs_on_sqlite(tmp_path: Path) -> None:
    report = jobs(f"sqlite:///{tmp_path}/locks.db", tmp_path, faults=("kill", "pause", "stall"))
    assert_clean(report, "kill", "pause", "stall")


def test_jobs_on_redis_with_a_restart(redis_server: Any, tmp_path: Path) -> None:
    report = jobs(redis_server.url, tmp_path, restart=redis_server.restart, faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


def test_jobs_on_postgres_with_a_restart(postgres_server: Any, tmp_path: Path) -> None:
    report = jobs(postgres_server.url, tmp_path, restart=postgres_server.restart,
                  faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


def test_jobs_on_mariadb_with_a_restart(mariadb_server: Any, tmp_path: Path) -> None:
    report = jobs(mariadb_server.url, tmp_path, restart=mariadb_server.restart,
                  faults=SERVER_FAULTS)
    assert_clean(report, *SERVER_FAULTS)


# -- the positive control, through the command ---------------------------------------------------

def test_without_the_period_record_periods_run_again_and_the_command_exits_1(
        tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "tenure", "chaos", "--workload", "jobs", "--skip-record",
         "--store", f"sqlite:///{tmp_path}/locks.db", "--workers", "3", "--duration", "10",
         "--faults", "kill", "--seed", "1", "--json", "--dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=180)
    assert finished.stdout, finished.stderr
    report = json.loads(finished.stdout)
    assert finished.returncode == 1, report
    assert report["by_checker"]["periods"] >= 1, report
    assert report["figures"]["periods recorded more than once"] >= 1, report
    assert any("was recorded" in v["message"] or "ran again" in v["message"]
               for v in report["violations"]), report
    assert report["by_checker"]["runs"] == 0, "the lock still serializes the runs"


@pytest.mark.parametrize(("options", "message"), [
    (["--workload", "jobs", "--no-key-lock"], "--no-key-lock belongs to --workload queue"),
    (["--workload", "lock", "--skip-record"], "--skip-record belongs to --workload jobs"),
    (["--workload", "jobs", "--lock-all-phase"], "--lock-all-phase belongs to --workload lock"),
    (["--workload", "jobs", "--period", "0.01"], "--period must be"),
    (["--workload", "queue"], "needs a PostgreSQL database"),
])
def test_bad_workload_options_are_refused(options: list[str], message: str) -> None:
    finished = subprocess.run([sys.executable, "-m", "tenure", "chaos", "--store",
                               "sqlite:////tmp/x.db", *options],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    assert message in finished.stderr


# -- the checkers on hand-written histories ------------------------------------------------------

P0, P1, P2 = 1_000.0, 1_001.0, 1_002.0  # period starts (epoch seconds)


class JobsHistory(HandWrittenHistory):
    """A jobs history as the workers and the nemesis would write it."""

    def __init__(self) -> None:
        super().__init__(name="J")
        self.nemesis(0.0, "phase", name="J", until=20.0)

    def run(self, start: float, end: float | None, pid: int, token: int, period: float,
            recorded: bool | None = True, deadline: float = 99.0, error: str | None = None,
            ) -> None:
        fields = {"token": token, "period": period, "slot": 0}
        self.add(start, pid, "invoke", "run", **fields)
        if end is None:
            return
        if error is None:
            self.add(end, pid, "ok", "run", accepted=True, deadline=deadline, **fields)
        else:
            self.add(end, pid, "fail", "run", error=error, deadline=deadline, **fields)
        if recorded is not None:
            self.add(end + 0.01, pid, "ok", "record", written=recorded, **fields)

    def heal(self, t: float) -> list[dict[str, Any]]:
        self.nemesis(t, "heal", name="J", bound=4.0)
        return self.events


def test_a_clean_jobs_history_passes_every_checker() -> None:
    history = JobsHistory()
    history.run(1.0, 1.2, pid=2, token=10, period=P0)
    history.run(2.0, 2.2, pid=3, token=11, period=P1)
    history.run(3.0, 3.2, pid=2, token=12, period=P2)
    verdict = check_jobs(history.heal(1.5), period=1.0)
    assert verdict.violations == []
    assert verdict.figures["periods recorded"] == 3
    assert verdict.takeovers == [pytest.approx(0.71)]


def test_checker_runs_finds_two_runs_at_once_but_not_a_run_past_its_deadline() -> None:
    history = JobsHistory()
    history.run(1.0, 2.0, pid=2, token=10, period=P0, recorded=False)  # paused, lease lost
    history.run(1.5, 1.7, pid=3, token=11, period=P0)
    verdict = check_jobs(history.heal(1.8), period=1.0)
    assert [v.checker for v in verdict.violations] == ["runs"]
    # The same, but worker-2's lease deadline passed at 1.4, before worker-3 began.
    history = JobsHistory()
    history.run(1.0, 2.0, pid=2, token=10, period=P0, recorded=False, deadline=1.4)
    history.run(1.5, 1.7, pid=3, token=11, period=P0)
    assert check_jobs(history.heal(1.8), period=1.0).violations == []


def test_checker_periods_finds_a_period_recorded_twice_or_run_after_its_record() -> None:
    history = JobsHistory()
    history.run(1.0, 1.2, pid=2, token=10, period=P0)
    history.run(1.3, 1.5, pid=3, token=11, period=P0)  # the record was not read
    verdict = check_jobs(history.heal(1.6), period=1.0)
    messages = [v.message for v in verdict.violations if v.checker == "periods"]
    assert any("recorded 2 times" in m for m in messages), messages
    assert any("ran again after it was recorded" in m for m in messages), messages


def test_checker_periods_covers_a_period_whose_run_lost_its_lease_by_the_misfire_rule() -> None:
    history = JobsHistory()
    history.run(1.0, 1.2, pid=2, token=10, period=P0, recorded=False)  # record refused
    history.run(1.3, 1.5, pid=3, token=11, period=P0)  # ran again: documented
    history.run(2.0, None, pid=3, token=12, period=P1)  # killed mid-run
    history.nemesis(2.1, "fault", kind="kill", target_pid=3)
    history.run(3.0, 3.2, pid=2, token=13, period=P2)
    verdict = check_jobs(history.heal(2.5), period=1.0)
    assert verdict.violations == []
    assert verdict.figures["periods whose job wrote more than once"] == 1
    assert verdict.figures["periods not recorded, by reason"] == {
        "killed; the next run covered it (misfire)": 1}


def test_checker_tokens_and_exits() -> None:
    history = JobsHistory()
    history.run(1.0, 1.2, pid=2, token=11, period=P0)
    history.run(2.0, 2.2, pid=3, token=10, period=P1)  # a later run with a lower token
    history.add(2.5, 4, "fail", "exit", error="ExceptionGroup: unhandled errors",
                detail=["StoreUnavailable: down"])
    history.run(3.0, 3.2, pid=2, token=12, period=P2)
    verdict = check_jobs(history.heal(2.6), period=1.0)
    assert sorted(v.checker for v in verdict.violations) == ["exits", "tokens"]
    assert "StoreUnavailable: down" in next(v.message for v in verdict.violations
                                            if v.checker == "exits")


def test_checker_liveness_of_jobs() -> None:
    history = JobsHistory()
    history.run(1.0, 1.2, pid=2, token=10, period=P0)
    history.run(8.0, 8.2, pid=2, token=11, period=P0 + 7)
    verdict = check_jobs(history.heal(2.0), period=1.0)
    assert [v.checker for v in verdict.violations] == ["liveness"]
