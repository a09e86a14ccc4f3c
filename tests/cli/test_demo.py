"""`make demo` (`tenure demo`): with every layer on, the faults leave no duplicate charge, no
unpaid invoice and one mail per invoice; with a layer off, the fault aimed at that layer
produces the harm the layer prevents (its positive control), and the lease, whose absence the
claims still cover, is reported as such; the faults injected are the faults asked, or the
report says why fewer."""

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


def demo(tmp_path: Path, *options: str, invoices: int = 60,
         faults: int = 2) -> tuple[int, dict[str, Any]]:
    """One small run (about 10 s): a freeze after a claim, then a kill after a commit."""
    finished = subprocess.run(
        [sys.executable, "-m", "tenure", "demo", "--invoices", str(invoices), "--instances", "3",
         "--faults", str(faults), "--seed", "7", "--json", "--dir", str(tmp_path / "run"),
         *options],
        capture_output=True, text=True, timeout=180)
    assert finished.stdout, finished.stderr
    return finished.returncode, json.loads(finished.stdout)


def test_every_invoice_is_paid_once_despite_kills_and_freezes(tmp_path: Path) -> None:
    status, report = demo(tmp_path)
    assert report["failures"] == [] and status == 0, report
    assert (report["paid"], report["charges"], report["notifications"]) == (60, 60, 60)
    assert (report["freezes"], report["kills"]) == (1, 1), "the faults asked must land"
    assert report["notes"] == [], report
    # The frozen holder woke up after its invoice was paid by another instance: its late
    # write was refused (fencing) and its charge answered from the idempotency key.
    assert report["rejected_writes"] >= 1 and report["replays"] >= 1, report
    assert report["takeover_seconds"], report


def test_without_fencing_and_idempotency_the_same_faults_charge_twice(tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-fencing", "--no-idempotency")
    assert status == 1, report
    assert report["duplicate_charges"] >= 1, report
    assert any("duplicate charge" in failure for failure in report["failures"])


def test_without_fencing_the_woken_holders_late_write_lands_and_mails_again(
        tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-fencing")
    assert status == 1 and report["freezes"] == 1, report
    assert report["duplicate_notifications"] >= 1 and report["rejected_writes"] == 0, report
    assert report["duplicate_charges"] == 0, report  # idempotency still held
    assert any(note.startswith("fencing off: the woken holder's late write was applied")
               for note in report["notes"]), report


def test_without_idempotency_the_woken_holder_charges_again(tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-idempotency")
    assert status == 1 and report["freezes"] == 1, report
    assert report["duplicate_charges"] >= 1 and report["replays"] == 0, report
    assert report["duplicate_notifications"] == 0, report  # fencing refused the late write
    assert any(note.startswith("idempotency off: the woken holder charged the invoice again")
               for note in report["notes"]), report


def test_without_the_outbox_a_kill_between_commit_and_mail_loses_the_mail(
        tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-outbox")
    assert status == 1 and report["kills"] == 1, report
    assert report["missing_notifications"] >= 1, report
    assert any("without a mail" in failure for failure in report["failures"]), report
    assert any(note.startswith("outbox off: the instance killed between the payment's commit")
               for note in report["notes"]), report


def test_without_the_lease_the_instances_race_and_the_claims_say_they_held(
        tmp_path: Path) -> None:
    status, report = demo(tmp_path, "--no-lease")
    # Honest outcome, not a positive control: the per-invoice claims keep every invoice to
    # one payer, and the report says so instead of a bare "all invariants held".
    assert status == 0 and report["failures"] == [], report
    assert (report["freezes"], report["kills"]) == (1, 1), report
    assert report["claims_lost"] >= 1, "the instances must have raced for the same invoices"
    assert any(note.startswith("lease off: the instances paid side by side")
               and "defence in depth" in note for note in report["notes"]), report


def test_faults_that_cannot_land_are_reported_with_the_reason(tmp_path: Path) -> None:
    status, report = demo(tmp_path, invoices=2, faults=10)
    injected = report["kills"] + report["freezes"]
    assert status == 0 and report["faults_asked"] == 10 and injected < 10, report
    assert f"{injected} of 10 fault(s) injected: every invoice was paid before the next " \
        "fault's moment came; ask for more --invoices." in report["notes"], report


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


def test_a_sigkilled_demo_leaves_no_process_and_no_directory_behind(tmp_path: Path) -> None:
    """kill -9 of `tenure demo` while one of its instances is frozen (SIGSTOP): every instance,
    the frozen one too, exits soon after, and the temporary directory goes with them."""
    from process_tree import alive, descendants, stopped

    environment = {**os.environ, "TMPDIR": str(tmp_path)}
    demo = subprocess.Popen([sys.executable, "-m", "tenure", "demo", "--json", "--invoices",
                             "400", "--instances", "4", "--faults", "1", "--seed", "7"],
                            env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    children: set[int] = set()
    try:
        def frozen() -> bool:
            return any('"frozen"' in events.read_text()
                       for events in tmp_path.glob("tenure-demo-*/events.jsonl"))

        wait_until(frozen, 120, "an instance frozen by the demo's fault")
        children |= descendants(demo.pid)
        assert len(children) >= 4 and any(stopped(pid) for pid in children), children
        demo.kill()
        demo.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in children), 30,
                   "every process of the SIGKILLed demo to exit")
        wait_until(lambda: list(tmp_path.glob("tenure-demo-*")) == [], 30,
                   "the temporary directory to be removed")
    finally:
        demo.kill()
        demo.wait(10)
        for pid in children:  # a failed run leaves nothing behind either
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
