"""The `make demo` showcase (demo/take_turns.py): it runs, it passes, its checker can fail, and
interrupting it stops every worker and releases the lock."""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import tenure

DEMO = Path(__file__).resolve().parent.parent / "demo" / "take_turns.py"
SUCCESS_LINES = ("no two workers held the lock at once", "fencing tokens only went up")


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("take_turns", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


def _wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


def _gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie waiting to be reaped counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def test_demo_runs_and_both_checks_pass() -> None:
    workers = 3
    result = subprocess.run(
        [sys.executable, str(DEMO), "--seconds", "3", "--workers", str(workers)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for line in SUCCESS_LINES:
        assert line in result.stdout
    assert "FAILED" not in result.stdout
    total = re.search(r"(\d+) turns by 3 workers", result.stdout)
    assert total is not None, result.stdout
    assert int(total.group(1)) >= workers
    assert len(re.findall(r"holds invoice-processing +token \d+", result.stdout)) == int(
        total.group(1)
    )


def test_checker_reports_an_overlap_and_a_backwards_token() -> None:
    turn = demo.Turn
    first = turn(worker=1, pid=101, token=10, start=1.0, end=2.0)
    overlapping = turn(worker=2, pid=102, token=11, start=1.5, end=2.5)  # starts inside `first`
    backwards = turn(worker=3, pid=103, token=9, start=3.0, end=3.5)  # token below 11
    history = [backwards, overlapping, first]  # order of the files must not matter

    verdict = demo.check(history)

    assert not verdict.ok
    assert verdict.overlaps == [(first, overlapping)]
    assert verdict.regressions == [(overlapping, backwards)]
    lines = demo.verdict_lines(verdict, history)
    assert sum("FAILED" in line for line in lines) == 2
    assert not any(success in line for line in lines for success in SUCCESS_LINES)


def test_checker_finds_an_overlap_hidden_behind_a_short_turn() -> None:
    turn = demo.Turn
    long = turn(worker=1, pid=101, token=1, start=0.0, end=10.0)
    short = turn(worker=2, pid=102, token=2, start=1.0, end=2.0)
    later = turn(worker=3, pid=103, token=3, start=5.0, end=6.0)
    assert demo.check([long, short, later]).overlaps == [(long, short), (long, later)]


def test_checker_accepts_a_clean_history() -> None:
    turn = demo.Turn
    history = [turn(worker=n % 3 + 1, pid=100 + n, token=50 + n, start=n, end=n + 0.9)
               for n in range(10)]
    verdict = demo.check(history)
    assert verdict.ok
    lines = demo.verdict_lines(verdict, history)
    assert [success in "".join(lines) for success in SUCCESS_LINES] == [True, True]
    assert "FAILED" not in "".join(lines)


def test_interrupt_stops_every_worker_and_releases_the_lock(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, str(DEMO), "--seconds", "120", "--workers", "3", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        ready = [tmp_path / f"worker-{n}.ready" for n in (1, 2, 3)]
        _wait_until(lambda: all(path.exists() and path.read_text() for path in ready), 60,
                    "the workers to start")
        pids = [int(path.read_text()) for path in ready]
        _wait_until(lambda: any(path.stat().st_size for path in tmp_path.glob("*.jsonl")), 60,
                    "a first turn")

        parent.send_signal(signal.SIGINT)
        output, _ = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()

    assert parent.returncode == 130, output
    assert "interrupted" in output
    assert "Traceback" not in output
    assert all(_gone(pid) for pid in pids)
    with tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}") as store:
        assert store.leases() == []  # released on the way out (expiry takes 5 s)
