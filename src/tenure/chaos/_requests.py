"""The nemesis' requests to a worker (pause, hold, fork; forget them all), immune to the order
in which the worker's signal handlers run.

A signal only wakes the worker; the request itself is a small file per worker process in the
run directory, which the nemesis rewrites whole (temp file + os.replace) BEFORE each signal:
every pending kind with a generation number, a forgotten kind absent. Every handler, whatever
its signal, re-reads the file. Why: Python runs handlers between bytecodes, and a worker blocked
in C code runs several pending ones at once in signal-number order, not arrival order (SIGUSR2,
12, before SIGURG, 23), so a "forget" could run before the hold it was meant to cancel. With the
file, whichever handler runs last reads the state the nemesis wrote last. A kind carried out is
remembered by its generation, so a later wake-up does not ask for it again.

Example::

    board = RequestBoard()
    board.ask(pid, requests_path(control, pid), "hold", signal.SIGURG)   # nemesis
    board.forget(pid, requests_path(control, pid))                       # SIGUSR2
    requests = Requests(requests_path(control, os.getpid()))             # worker
    listen(requests)
    if requests.take("hold"): ...
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

KINDS = ("pause", "hold", "fork")
FORGET_SIGNAL = signal.SIGUSR2
# The signals a worker takes requests by; SIGWINCH (fork) only in the lock workload's worker.
WAKE_SIGNALS = (signal.SIGUSR1, signal.SIGURG, FORGET_SIGNAL)


def requests_path(control: str | Path, pid: int) -> Path:
    """The request file of worker process `pid`, next to the run's control file.

    Example::

        requests_path("/tmp/run/control.json", 4242)  # /tmp/run/requests-4242.json
    """
    return Path(control).parent / f"requests-{pid}.json"


class RequestBoard:
    """The nemesis' side: what it has asked of each worker process and not taken back."""

    def __init__(self) -> None:
        self.generation = 0
        self.asked: dict[int, dict[str, int]] = {}  # pid -> kind -> generation

    def ask(self, pid: int, path: Path, kind: str, signum: int) -> None:
        """Ask `kind` of process `pid`: write its new state, then wake it with `signum`.

        Example::

            board.ask(worker.pid, path, "pause", signal.SIGUSR1)
        """
        self.generation += 1
        self.asked.setdefault(pid, {})[kind] = self.generation
        self._send(pid, path, signum)

    def forget(self, pid: int, path: Path) -> None:
        """Take back every request to `pid` not yet carried out (SIGUSR2 wakes it).

        Example::

            board.forget(worker.pid, path)
        """
        self.asked[pid] = {}
        self._send(pid, path, FORGET_SIGNAL)

    def _send(self, pid: int, path: Path, signum: int) -> None:
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(self.asked[pid]))
        os.replace(temporary, path)  # a reader sees a whole state, the old or the new
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


class Requests:
    """The worker's side: the state the nemesis wrote last, and the kinds carried out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.asked: dict[str, int] = {}
        self.done: dict[str, int] = {}

    def refresh(self) -> None:
        """Read the nemesis' current state (every handler does, whatever its signal).

        Example::

            signal.signal(signal.SIGUSR2, lambda *_: requests.refresh())
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            text = "{}"
        self.asked = {str(k): int(v) for k, v in json.loads(text).items()}

    def pending(self, kind: str) -> bool:
        """Whether `kind` is asked and not yet carried out.

        Example::

            if requests.pending("hold"): ...
        """
        return self.asked.get(kind, 0) > self.done.get(kind, 0)

    def take(self, kind: str) -> bool:
        """Carry out `kind` if pending: True once per request.

        Example::

            if requests.take("fork"): fork()
        """
        if not self.pending(kind):
            return False
        self.done[kind] = self.asked[kind]
        return True


def listen(requests: Requests, signals: tuple[int, ...] = WAKE_SIGNALS) -> None:
    """Install one handler for every signal of `signals`: re-read the request file.

    Example::

        listen(requests, (*WAKE_SIGNALS, signal.SIGWINCH))
    """
    for signum in signals:
        signal.signal(signum, lambda *_: requests.refresh())
