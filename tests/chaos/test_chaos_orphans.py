"""`tenure chaos` killed with SIGKILL leaves no process behind: its oracle and its workers, a
worker the pause fault stopped (SIGSTOP) too, exit soon after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from process_tree import alive, descendants, stopped
from waiting import wait_until


def test_a_sigkilled_chaos_run_leaves_no_process_behind(tmp_path: Path) -> None:
    run = tmp_path / "run"
    chaos = subprocess.Popen(
        [sys.executable, "-m", "tenure", "chaos", "--store", f"sqlite:///{tmp_path}/locks.db",
         "--workers", "3", "--duration", "40", "--faults", "pause", "--seed", "1", "--dir",
         str(run), "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: set[int] = set()
    try:
        def paused() -> bool:
            history = run / "history.jsonl"
            return history.exists() and any(stopped(pid) for pid in descendants(chaos.pid))

        wait_until(paused, 120, "a worker stopped by the pause fault")
        children |= descendants(chaos.pid)
        assert len(children) >= 4, children  # the oracle and the workers
        chaos.kill()
        chaos.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in children), 30,
                   "every process of the SIGKILLed chaos run to exit")
    finally:
        chaos.kill()
        chaos.wait(10)
        for pid in children:  # a failed run leaves nothing behind either
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
