"""The demo's instances as OS processes, and the faults it injects into them, each aimed at
the moment a layer is there for (see `tenure.demo._instance`): a freeze of the holder right
after it claimed an invoice, longer than its ttl (SIGSTOP until well after the lease expired,
then SIGCONT: the GC-pause case), and a SIGKILL of the holder right after a payment's commit,
before its mail (then a restart).

Example::

    fleet = Fleet(settings, count=5)
    fleet.start()
    fleet.request(holder, "kill")
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

from tenure.chaos._lifeline import Lifeline

FAULT_KINDS = ("freeze", "kill")
PATIENCE = 3.0  # seconds a request may wait for its moment before it is withdrawn
# How much longer than its freeze a frozen holder may wait for another instance to pay its
# invoice, the moment its late charge is there to show (a loaded machine takes over slowly).
THAW_PATIENCE = 15.0


@dataclass
class Instance:
    """One app instance: its number, its current process, and what happened to it."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    state: str = "starting"  # running, freezing/killing (asked), frozen, thawing, killed
    kills: int = 0
    freezes: int = 0
    frozen_until: float = 0.0
    frozen_invoice: int | None = None
    paid_elsewhere: bool = False  # another instance paid the invoice it froze on
    thawed_at: float = 0.0
    asked_at: float = 0.0
    restart_at: float = 0.0

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


@dataclass
class Fault:
    """A fault that took effect: when (monotonic), what, in which instance and process."""

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
    log: Path | None = None
    lifeline: Lifeline | None = None  # each instance exits soon after the demo, however it ends

    def start(self) -> None:
        """Start every instance."""
        self.instances = [Instance(number) for number in range(1, self.count + 1)]
        for instance in self.instances:
            self._spawn(instance)

    def _spawn(self, instance: Instance) -> None:
        settings = {**self.settings, "instance": instance.number}
        output = subprocess.DEVNULL if self.log is None else self.log.open("ab")
        options = {} if self.lifeline is None else self.lifeline.child_options()
        instance.process = subprocess.Popen(
            [sys.executable, "-m", "tenure.demo._instance", json.dumps(settings)],
            stdout=output, stderr=output, start_new_session=True, **options)
        if self.lifeline is not None:
            self.lifeline.adopt(instance.process.pid)
        instance.state = "running"

    def by_pid(self, pid: int) -> Instance | None:
        """The instance whose current process is `pid`."""
        return next((i for i in self.instances if i.pid == pid), None)

    def request(self, instance: Instance, kind: str) -> None:
        """Ask a running instance to freeze or die at the fault's moment (SIGUSR1 after
        writing its request file); `saw` learns when it did."""
        assert instance.process is not None and kind in FAULT_KINDS
        pid = instance.process.pid
        (Path(self.settings["directory"]) / f"fault-{pid}").write_text(kind)
        os.kill(pid, signal.SIGUSR1)
        instance.state, instance.asked_at = ("freezing" if kind == "freeze" else "killing",
                                             time.monotonic())

    @property
    def pending(self) -> list[str]:
        """The kinds of the requests that have not taken effect yet."""
        return [{"freezing": "freeze", "killing": "kill"}[i.state] for i in self.instances
                if i.state in ("freezing", "killing")]

    def saw(self, event: dict[str, Any], freeze_for: float) -> None:
        """Follow an instance's own report that it froze, thawed or is dying."""
        if event["event"] == "killed":  # by number: it may have been restarted since
            instance = self.instances[event["instance"] - 1]
            self.faults.append(Fault(event["t"], "kill", instance.number, event["pid"]))
            instance.kills += 1
            return
        if event["event"] == "paid":
            for frozen in self.instances:
                if frozen.frozen_invoice == event["invoice"] and frozen.pid != event["pid"]:
                    frozen.paid_elsewhere = True
        instance = self.by_pid(event["pid"])
        if instance is None:
            return
        if event["event"] == "frozen":
            self.faults.append(Fault(event["t"], "freeze", instance.number, event["pid"]))
            instance.state, instance.freezes = "frozen", instance.freezes + 1
            instance.frozen_until = event["t"] + freeze_for
            instance.frozen_invoice, instance.paid_elsewhere = event["invoice"], False
        elif event["event"] == "thawed" and instance.state == "thawing":
            instance.state = "running"

    def tick(self, restart_after: float = 1.0) -> None:
        """Thaw, restart and withdraw as their time comes."""
        now = time.monotonic()
        for instance in self.instances:
            assert instance.process is not None
            if instance.state != "killed" and instance.process.poll() is not None:
                instance.state, instance.restart_at = "killed", now + restart_after
                if self.lifeline is not None:
                    self.lifeline.forget(instance.process.pid)
            elif instance.state == "frozen" and now >= instance.frozen_until and (
                    instance.paid_elsewhere or now >= instance.frozen_until + THAW_PATIENCE):
                os.kill(instance.process.pid, signal.SIGCONT)
                instance.state, instance.frozen_invoice = "thawing", None  # until "thawed"
                instance.thawed_at = now
            elif instance.state == "thawing" and now - instance.thawed_at > 3.0:
                instance.state = "running"  # woken, though its "thawed" report went missing
            elif (instance.state in ("freezing", "killing")
                  and now - instance.asked_at > PATIENCE):
                self._withdraw(instance)  # it paid nothing since: the demo asks who pays now
            elif instance.state == "killed" and now >= instance.restart_at:
                self._spawn(instance)

    def _withdraw(self, instance: Instance) -> None:
        """Take back a request that did not take effect (SIGUSR2)."""
        assert instance.process is not None
        os.kill(instance.process.pid, signal.SIGUSR2)
        instance.state = "running"

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
