"""The nemesis' requests cannot be overtaken by a later "forget": a worker whose handlers run
late runs them in signal-number order (SIGUSR2 before SIGURG), and must still end with the
requests the nemesis asked last."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.chaos._requests import RequestBoard, Requests, requests_path

CHILD = Path(__file__).parent.parent / "support" / "chaos_requests_child.py"


def _after(tmp_path: Path, send: str) -> dict[str, bool]:
    """The child's requests after the parent's `send` steps reached it all at once."""
    control = tmp_path / "control.json"
    child = subprocess.Popen([sys.executable, str(CHILD), str(control)], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"  # its signals are blocked now
        board, path = RequestBoard(), requests_path(control, child.pid)
        for step in send.split():
            if step == "forget":
                board.forget(child.pid, path)
            elif step == "hold":
                board.ask(child.pid, path, "hold", signal.SIGURG)
            else:
                board.ask(child.pid, path, "pause", signal.SIGUSR1)
        out, _ = child.communicate("go\n", timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, out
    result: dict[str, bool] = json.loads(out)
    return result


@pytest.mark.parametrize(("send", "expected"), [
    ("hold forget", {"hold": False, "pause": False}),   # handlers run forget, then hold
    ("forget hold", {"hold": True, "pause": False}),
    ("pause hold forget", {"hold": False, "pause": False}),
    ("hold forget pause", {"hold": False, "pause": True}),
])
def test_the_last_request_wins_whatever_order_the_handlers_run_in(
        tmp_path: Path, send: str, expected: dict[str, bool]) -> None:
    assert _after(tmp_path, send) == expected


def test_a_request_carried_out_is_not_asked_again_by_a_later_signal(tmp_path: Path) -> None:
    board, path, requests = RequestBoard(), tmp_path / "requests.json", Requests(
        tmp_path / "requests.json")
    board.asked[1] = {"hold": 1}  # as ask() leaves it, without signalling a process
    board.generation = 1
    path.write_text(json.dumps(board.asked[1]))
    requests.refresh()
    assert requests.take("hold") and not requests.take("hold")
    requests.refresh()  # woken again for something else: the hold is done
    assert not requests.pending("hold")
    path.write_text(json.dumps({"hold": 2}))  # a new hold
    requests.refresh()
    assert requests.pending("hold")
