"""examples/fastapi: the app started as 3 real uvicorn processes sharing one SQLite store; its
job (every 1 s) must run once per period across them, and SIGTERM must stop each one cleanly.

uvicorn (0.29+) re-raises SIGTERM after its graceful shutdown, so a cleanly stopped process
ends with -SIGTERM, not 0: the test takes the lifespan's "stopped" line, written after the
worker stopped and the store closed, as the proof of a clean stop, and accepts either status.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from servers import free_port
from waiting import wait_until

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi"
INSTANCES = 3
PERIODS = 6
GRACE = 10.0  # the example's Worker(grace=10)


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def answers(url: str) -> bool:
    try:
        get(url)
    except OSError:
        return False
    return True


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def periods(path: Path) -> list[datetime]:
    return [datetime.fromisoformat(entry["period"]) for entry in lines(path) if "period" in entry]


def test_three_uvicorn_processes_run_each_period_once(tmp_path: Path) -> None:
    log = tmp_path / "heartbeat.jsonl"
    env = {**os.environ, "TENURE_STORE": f"sqlite:///{tmp_path / 'locks.db'}",
           "HEARTBEAT_LOG": str(log)}
    ports = [free_port() for _ in range(INSTANCES)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(EXAMPLE),
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for port in ports]
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_until(lambda port=port, process=process: process.poll() is not None
                       or answers(f"http://127.0.0.1:{port}/health"), 60, f"uvicorn on {port}")
            assert process.poll() is None, process.communicate()[1]
        started = len(periods(log))
        wait_until(lambda: len(periods(log)) >= started + PERIODS, 30,
                   f"{PERIODS} periods with all {INSTANCES} instances up")
        for port in ports:
            status, report = get(f"http://127.0.0.1:{port}/health")
            assert status == 200, report
            assert report["healthy"] is True
            assert report["jobs"]["example.heartbeat"]["last_outcome"] == "ok"
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            _, stderr = process.communicate(timeout=GRACE + 20)
            assert process.returncode in (0, -signal.SIGTERM), stderr
            assert "Traceback" not in stderr, stderr
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()

    entries = lines(log)
    assert len([entry for entry in entries if "stopped" in entry]) == INSTANCES
    ran = periods(log)
    twice = [period for period, count in Counter(ran).items() if count > 1]
    assert not twice, f"periods run more than once: {twice}"
    ordered = sorted(ran)
    assert len(ordered) >= PERIODS
    gaps = [(a, b) for a, b in itertools.pairwise(ordered) if b - a != timedelta(seconds=1)]
    assert not gaps, f"periods skipped between: {gaps}"
    tokens = [entry["token"] for entry in sorted(
        (entry for entry in entries if "period" in entry), key=lambda entry: entry["period"])]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
