"""The demo's instances as OS processes, and the faults it injects into them: SIGKILL of the
holder mid-invoice (then a restart), and a freeze of the holder longer than its ttl (SIGSTOP
until well after the lease expired, then SIGCONT: the GC-pause case).

Example::

    fleet = Fleet(settings, count=5)
    fleet.start()
    fleet.kill(fleet.holder(events))
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Instance:
    """One app instance: its number, its current process, and what happened to it."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    state: str = "starting"  # running, freezing (asked), frozen, thawing, killed
    kills: int = 0
    freezes: int = 0
    frozen_until: float = 0.0
    freeze_asked_at: float = 0.0
    restart_at: float = 0.0

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


@dataclass
class Fault:
    """A fault the demo injected: when (monotonic), what, into which instance and process."""

    at: float
    kind: str  # "kill" or "freeze"
    instance: int
    pid: int


@dataclass
class Fleet:
    """The demo's instances."""

    settings: dict[str, Any]
    count: int
    instances: list[Instance] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lapsed_freezes: int = 0  # freeze requests withdrawn before they took effect
    log: Path | None = None

    def start(self) -> None:
        """Start every instance."""
        self.instances = [Instance(number) for number in range(1, self.count + 1)]
        for instance in self.instances:
            self._spawn(instance)

    def _spawn(self, instance: Instance) -> None:
        settings = {**self.settings, "instance": instance.number}
        output = subprocess.DEVNULL if self.log is None else self.log.open("ab")
        instance.process = subprocess.Popen(
            [sys.executable, "-m", "tenure.demo._instance", json.dumps(settings)],
            stdout=output, stderr=output, start_new_session=True)
        instance.state = "running"

    def by_pid(self, pid: int) -> Instance | None:
        """The instance whose current process is `pid`."""
        return next((i for i in self.instances if i.pid == pid), None)

    def kill(self, instance: Instance, restart_after: float) -> None:
        """SIGKILL the instance now; it is restarted after `restart_after` seconds."""
        assert instance.process is not None
        if instance.state == "freezing":  # a kill would lose the request with the process
            self._withdraw_freeze(instance)
        self.faults.append(Fault(time.monotonic(), "kill", instance.number, instance.process.pid))
        instance.process.kill()
        instance.process.wait()
        instance.state, instance.kills = "killed", instance.kills + 1
        instance.restart_at = time.monotonic() + restart_after

    def freeze(self, instance: Instance) -> None:
        """Ask the instance to freeze itself at its next invoice (SIGUSR1); `saw` learns when
        it did, and `tick` thaws it `freeze_for` seconds later."""
        assert instance.process is not None
        asked_at = time.monotonic()
        self.faults.append(Fault(asked_at, "freeze", instance.number, instance.process.pid))
        os.kill(instance.process.pid, signal.SIGUSR1)
        instance.state, instance.freeze_asked_at = "freezing", asked_at

    def saw(self, event: dict[str, Any], freeze_for: float) -> None:
        """Follow an instance's own report that it froze or thawed."""
        instance = self.by_pid(event["pid"])
        if instance is None:
            return
        if event["event"] == "frozen":
            instance.state, instance.freezes = "frozen", instance.freezes + 1
            instance.frozen_until = event["t"] + freeze_for
        elif event["event"] == "thawed" and instance.state == "thawing":
            instance.state = "running"

    def tick(self) -> None:
        """Thaw and restart instances whose time has come."""
        now = time.monotonic()
        for instance in self.instances:
            if instance.state == "frozen" and now >= instance.frozen_until:
                assert instance.process is not None
                os.kill(instance.process.pid, signal.SIGCONT)
                instance.state = "thawing"  # until it reports "thawed"
            elif instance.state == "thawing" and now - instance.frozen_until > 3.0:
                instance.state = "running"  # woken, though its "thawed" report went missing
            elif instance.state == "freezing" and now - instance.freeze_asked_at > 3.0:
                self._withdraw_freeze(instance)  # it paid nothing since
                instance.state = "running"
            elif instance.state == "killed" and now >= instance.restart_at:
                self._spawn(instance)

    def _withdraw_freeze(self, instance: Instance) -> None:
        """Take back a freeze request that did not take effect (SIGUSR2), so that it counts
        in `lapsed_freezes` and can be asked of the instance that pays now instead."""
        assert instance.process is not None
        os.kill(instance.process.pid, signal.SIGUSR2)
        self.faults = [fault for fault in self.faults if not (
            fault.kind == "freeze" and fault.pid == instance.process.pid
            and fault.at == instance.freeze_asked_at)]
        self.lapsed_freezes += 1

    @property
    def settled(self) -> bool:
        """No instance frozen, waking up or dead: the run may end."""
        return not any(i.state in ("frozen", "thawing", "killed") for i in self.instances)

    def stop(self, timeout: float = 15.0) -> None:
        """Thaw, then SIGTERM every instance and wait (SIGKILL past `timeout`)."""
        running = [i.process for i in self.instances if i.process is not None
                   and i.process.poll() is None]
        for process in running:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
        deadline = time.monotonic() + timeout
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
