"""`make demo` (`tenure demo`): with every layer on, the faults leave no duplicate charge, no
unpaid invoice and one mail per invoice; with fencing and idempotency off, the same kind of
fault schedule produces a duplicate charge, so the demo's checks can fail (its positive
control)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from waiting import wait_until


def demo(tmp_path: Path, *options: str) -> tuple[int, dict[str, Any]]:
    finished = subprocess.run(
        [sys.executable, "-m", "tenure", "demo", "--invoices", "300", "--instances", "3",
         "--faults", "2", "--seed", "7", "--json", "--dir", str(tmp_path / "run"), *options],
        capture_output=True, text=True, timeout=180)
    assert finished.stdout, finished.stderr
    return finished.returncode, json.loads(finished.stdout)


def test_every_invoice_is_paid_once_despite_kills_and_freezes(tmp_path: Path) -> None:
    status, report = demo(tmp_path)
    assert report["failures"] == [] and status == 0, report
    assert (report["paid"], report["charges"], report["notifications"]) == (300, 300, 300)
    assert report["freezes"] >= 1 and report["kills"] >= 1, "the faults must have happened"
    # The frozen holder woke up after its invoice was paid by another instance: its late
    # write was refused (fencing) and its charge answered from the idempotency key.
    assert report["rejected_writes"] >= 1 and report["replays"] >= 1, report
    assert report["takeover_seconds"], report


def test_without_fencing_and_idempotency_the_same_faults_charge_twice(tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-fencing", "--no-idempotency")
    assert status == 1, report
    assert report["duplicate_charges"] >= 1, report
    assert any("duplicate charge" in failure for failure in report["failures"])


def test_bad_options_are_refused_before_anything_starts(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-m", "tenure", "demo", "--instances", "1"],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "--instances must be 2 to 32" in finished.stderr


def test_a_store_that_is_down_or_private_fails_at_once_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    for store, expected in ((f"redis://:pw@127.0.0.1:{port}/0", "Connection refused"),
                            ("memory://", "private to one process")):
        started = time.monotonic()
        finished = subprocess.run([sys.executable, "-m", "tenure", "demo", "--store", store,
                                   "--dir", str(tmp_path / "run")],
                                  capture_output=True, text=True, timeout=60)
        assert finished.returncode in (1, 2), finished.stderr
        assert expected in finished.stderr and finished.stderr.count("\n") == 1, finished.stderr
        assert "pw" not in finished.stderr
        assert time.monotonic() - started < 30  # sanity: it does not start the instances


def test_sigterm_stops_the_instances_and_removes_the_temporary_directory(tmp_path: Path) -> None:
    environment = {**os.environ, "TMPDIR": str(tmp_path)}
    demo = subprocess.Popen([sys.executable, "-m", "tenure", "demo", "--json"],
                            env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any((run / "instances.log").exists()
                               for run in tmp_path.glob("tenure-demo-*")),
                   60, "the demo's instances to start")
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) != 0
    finally:
        demo.kill()
        demo.wait(10)
    assert list(tmp_path.glob("tenure-demo-*")) == []
