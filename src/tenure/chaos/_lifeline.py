"""Children that die with their parent, however it dies (`tenure demo`, `tenure chaos`).

SIGTERM and Ctrl-C let the parent stop its children itself; SIGKILL (or a crash of the
interpreter) does not. Two mechanisms cover that case:

- the lifeline: a pipe whose write end only the parent holds (non-inheritable, so no child,
  grandchild or shell command gets a copy). Each child gets the read end and watches it on a
  daemon thread (`watch_parent`): the read returns end-of-file when the parent process is gone,
  and the child then stops itself as on SIGTERM (its clean stop), and exits hard if that takes
  longer than `GRACE`. Why a pipe and not Linux's prctl(PR_SET_PDEATHSIG): the death signal
  fires when the parent THREAD that started the child ends (the chaos run restarts workers
  from its control loop, the demo from its main thread: a thread ending would kill a healthy
  child), it is Linux only, and a child started before the parent died but after its own
  prctl ran would race; an EOF on a pipe means the whole process is gone, on every POSIX
  system, and cannot be missed: a child that starts watching late reads EOF at once.
- the guardian: a stopped child (the demo's freeze, chaos's pause fault: SIGSTOP) runs no
  thread and cannot see the EOF. A small guardian process (this file run as a script: stdlib
  only, it starts fast) reads the pids of the children on its stdin; at EOF without the
  parent's "done" it sends them SIGCONT, so they see the EOF and stop; it SIGKILLs those still
  alive after `GRACE` (on Linux only, where it can tell by the process's start time that the
  pid still names the same process), then removes the directory it was given (the demo's
  temporary directory: the dying run's files go with it, not at the next run).

Example::

    with Lifeline.start(remove=temporary_directory) as lifeline:
        process = subprocess.Popen(command, **lifeline.child_options(env))
        lifeline.adopt(process.pid)
    # in the child, first thing:
    watch_parent()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

ENVIRONMENT = "TENURE_LIFELINE_FD"  # the read end's number, in a child's environment
GRACE = 10.0  # seconds a child has to stop cleanly once its parent is gone
_DONE = "done"  # the parent's last word to the guardian: a normal end, nothing to do


class Lifeline:
    """The parent's side: the pipe's write end and the guardian's stdin."""

    def __init__(self, read_end: int, write_end: int, guardian: subprocess.Popen[str]) -> None:
        self._read_end, self._write_end, self._guardian = read_end, write_end, guardian
        self._closed = False

    @classmethod
    def start(cls, remove: Path | None = None) -> Lifeline:
        """Open the lifeline and start its guardian (which removes `remove` when the parent
        dies).

        Example::

            lifeline = Lifeline.start()
        """
        read_end, write_end = os.pipe()  # both non-inheritable: children get only what we pass
        guardian = subprocess.Popen(
            [sys.executable, "-I", __file__, *([str(remove)] if remove is not None else [])],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            start_new_session=True)  # not in the parent's process group: a kill -9 -PGID
        return cls(read_end, write_end, guardian)  # of the terminal's group leaves it alive

    def child_options(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Popen's keyword arguments that hand the lifeline to a child.

        Example::

            subprocess.Popen(command, **lifeline.child_options({"X": "1"}))
        """
        return {"pass_fds": (self._read_end,),
                "env": {**os.environ, **(env or {}), ENVIRONMENT: str(self._read_end)}}

    def adopt(self, pid: int) -> None:
        """Tell the guardian about a child (to resume it, should it be stopped, at the end).

        Example::

            lifeline.adopt(process.pid)
        """
        self._tell(f"+{pid}")

    def forget(self, pid: int) -> None:
        """A child that was reaped: its pid may name another process from now on.

        Example::

            lifeline.forget(process.pid)
        """
        self._tell(f"-{pid}")

    def _tell(self, line: str) -> None:
        stdin = self._guardian.stdin
        if self._closed or stdin is None:
            return
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the guardian is gone: the children still watch the pipe themselves

    def close(self) -> None:
        """A normal end (the children were stopped): the guardian leaves without acting.

        Example::

            lifeline.close()
        """
        if self._closed:
            return
        self._tell(_DONE)
        self._closed = True
        if self._guardian.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._guardian.stdin.close()
        os.close(self._write_end)
        os.close(self._read_end)
        try:
            self._guardian.wait(5.0)
        except subprocess.TimeoutExpired:
            self._guardian.kill()
            self._guardian.wait()

    def __enter__(self) -> Lifeline:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def watch_parent() -> None:
    """In a child: stop (SIGTERM to itself, then a hard exit after `GRACE`) once the parent
    that passed a lifeline is gone. Does nothing in a process started without one.

    Example::

        def main() -> int:
            watch_parent()
            ...
    """
    number = os.environ.pop(ENVIRONMENT, None)  # not for this process's own children
    if number is None:
        return
    fd = int(number)
    os.set_inheritable(fd, False)
    threading.Thread(target=_wait_for_eof, args=(fd,), name="tenure-lifeline",
                     daemon=True).start()


def _wait_for_eof(fd: int) -> None:
    try:
        while os.read(fd, 1):
            pass  # the parent never writes; a byte would not mean anything
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE)  # the clean stop's time limit, not a synchronization
    os._exit(70)


# -- the guardian (this file run as a script) ---------------------------------------------------

def _started(pid: int) -> str | None:
    """The process's start time (Linux), which tells a pid's process from a later one."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _alive(pid: int, started: str | None) -> bool:
    if Path("/proc/self/stat").exists():
        return started is not None and _started(pid) == started
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _guard(stdin: IO[str], remove: Path | None) -> None:
    children: dict[int, str | None] = {}
    for line in stdin:
        line = line.strip()
        if line == _DONE:
            return
        if line.startswith("+"):
            children[int(line[1:])] = _started(int(line[1:]))
        elif line.startswith("-"):
            children.pop(int(line[1:]), None)
    # EOF without "done": the parent died. Resume the stopped children (they watch the pipe),
    # again and again until they are gone: a child may stop itself once more on its way out
    # (a freeze or pause it was asked for before the parent died).
    deadline = time.monotonic() + GRACE + 2.0
    while children and time.monotonic() < deadline:
        children = {pid: started for pid, started in children.items() if _alive(pid, started)}
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)  # polling the children's exit, with a deadline
    for pid, started in children.items():
        if started is not None:  # Linux: still the same process, so a SIGKILL is safe
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    if remove is not None:
        shutil.rmtree(remove, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; only its death counts
    _guard(sys.stdin, Path(sys.argv[1]) if len(sys.argv) > 1 else None)
