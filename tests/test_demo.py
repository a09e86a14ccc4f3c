"""`make demo` (`tenure demo`): with every layer on, the faults leave no duplicate charge, no
unpaid invoice and one mail per invoice; with fencing and idempotency off, the same kind of
fault schedule produces a duplicate charge, so the demo's checks can fail (its positive
control)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


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
