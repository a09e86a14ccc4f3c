"""The chaos workers seen from the orchestrator: starting them (each with its own store URL or
connection string when a proxy sits in front of the store), killing, stopping and continuing
them, and restarting the killed ones.

Example::

    fleet = Fleet(base_settings, count=8, log=directory / "workers.log")
    fleet.start(envs)
    fleet.kill(fleet.workers[0])
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure.chaos._lifeline import Lifeline


@dataclass
class WorkerProcess:
    """One worker slot: its number, its current process, and its state."""

    number: int
    settings: dict[str, Any]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    state: str = "running"  # running, paused, killed
    restarts: int = 0

    @property
    def name(self) -> str:
        return f"worker-{self.number}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


@dataclass
class Fleet:
    """Every worker of the run."""

    log: Path
    workers: list[WorkerProcess] = field(default_factory=list)
    module: str = "tenure.chaos._worker"  # the workload's worker: _jobs_worker, _queue_worker
    lifeline: Lifeline | None = None  # each worker exits soon after the run, however it ends

    def add(self, number: int, settings: dict[str, Any], env: dict[str, str]) -> WorkerProcess:
        worker = WorkerProcess(number, {**settings, "number": number}, env)
        self.workers.append(worker)
        self.spawn(worker)
        return worker

    def spawn(self, worker: WorkerProcess) -> None:
        """Start (or restart) the worker's process."""
        options: dict[str, Any] = {"env": {**os.environ, **worker.env}} \
            if self.lifeline is None else self.lifeline.child_options(worker.env)
        if worker.process is not None and self.lifeline is not None:
            self.lifeline.forget(worker.process.pid)  # reaped by now: a restart follows a kill
        with self.log.open("ab") as output:
            worker.process = subprocess.Popen(
                [sys.executable, "-m", self.module, json.dumps(worker.settings)],
                stdout=output, stderr=output, stdin=subprocess.DEVNULL,
                start_new_session=True, **options)
        if self.lifeline is not None:
            self.lifeline.adopt(worker.process.pid)
        worker.state = "running"

    def by_pid(self, pid: int) -> WorkerProcess | None:
        return next((w for w in self.workers if w.pid == pid), None)

    def kill(self, worker: WorkerProcess) -> None:
        """SIGKILL the worker's process now."""
        assert worker.process is not None
        worker.process.kill()
        worker.process.wait()
        worker.state = "killed"

    def restart(self, worker: WorkerProcess) -> None:
        worker.restarts += 1
        self.spawn(worker)

    def stop(self, worker: WorkerProcess) -> None:
        """SIGSTOP the worker's process (a pause the worker did not choose)."""
        assert worker.process is not None
        os.kill(worker.process.pid, signal.SIGSTOP)
        worker.state = "paused"

    def cont(self, worker: WorkerProcess) -> None:
        """SIGCONT the worker's process."""
        if worker.process is not None and worker.process.poll() is None:
            os.kill(worker.process.pid, signal.SIGCONT)
        worker.state = "running"

    def running(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.state == "running"]

    def wait_all(self, timeout: float) -> list[WorkerProcess]:
        """Wait for every process to exit (they do once the last phase ends); SIGKILL those
        still running at the deadline. Returns the ones that had to be killed."""
        deadline = time.monotonic() + timeout
        stragglers = []
        for worker in self.workers:
            process = worker.process
            if process is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stragglers.append(worker)
                process.kill()
                process.wait()
        return stragglers
