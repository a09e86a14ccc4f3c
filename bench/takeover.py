"""Time to take over: after a SIGKILL of the holder, and after a clean release.

One harness for every library (bench/libraries.py): a waiter process, connected and warmed up
beforehand, is told to wait for a name a holder process has just taken; it reports "waiting"
right before it calls acquire. The holder is then SIGKILLed KILL_AFTER seconds after its acquire
returned (before any renewal: a lease that must expire has about ttl - KILL_AFTER left), or told
to release (it stamps the time right before calling release). The waiter stamps the time its
acquire returned. CLOCK_MONOTONIC is one clock for every process of the host.

A new holder process per SIGKILL repetition; for clean releases one holder process takes and
releases every repetition's name. A waiter that has not taken over `deadline` seconds after the
kill is killed and the repetition counts as "not within the deadline" (a lock that stays held).

`in_process` takers (memory://, which no other process can reach) measure the clean release
with two threads of one process, and no SIGKILL.

Example::

    taker = Taker("tenure", "tenure", "sqlite:////tmp/x.db", ttl=2.0)
    result = run_taker(taker, "kill", repeats=5)
    print(result.median, result.median / taker.ttl)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from libraries import Row, open_library

KILL_AFTER = 0.25  # seconds from the holder's acquire returning to the SIGKILL
SETTLE = 0.1  # the waiter's first attempt fails and it waits, before the release
READY_TIMEOUT = 120.0
MODES = ("kill", "release")


@dataclass
class Taker(Row):
    """One library's holder and waiter on one store.

    `ttl` is the lock's expiry (the library's own where it has one); `expires` says whether the
    lock expires at all; `modes` which measures apply.

    Example::

        Taker("redis-py `Lock` (polls every 0.1 s)", "redis-py", url, ttl=2.0)
    """

    ttl: float
    options: dict[str, Any] = field(default_factory=dict)
    connect: dict[str, Any] = field(default_factory=dict)
    expires: bool = True
    modes: tuple[str, ...] = MODES
    in_process: bool = False
    tenure: bool = False  # a tenure row: the takeover goals apply
    floor: bool = False  # the bare mechanism: the floor of the single-waiter hand-off goal


@dataclass
class Takeover:
    """The repetitions of one taker and mode: seconds from the kill/release to the waiter's
    acquire returning (inf: not within `deadline`), and how long after the holder's acquire
    each kill came.

    Example::

        Takeover(taker, "kill", [1.9, 2.1], [0.25, 0.25], 12.0)
    """

    taker: Taker
    mode: str
    seconds: list[float]
    held_for: list[float]
    deadline: float
    error: str = ""

    @property
    def median(self) -> float:
        """Median seconds (inf when most repetitions never took over; nan when none ran)."""
        return statistics.median(self.seconds) if self.seconds else math.nan

    @property
    def past_expiry(self) -> float:
        """Median of (kill -> acquired) - (ttl - held before the kill): how long after the
        lease's latest expiry the waiter took over; negative when death freed it earlier."""
        late = [seconds - (self.taker.ttl - held)
                for seconds, held in zip(self.seconds, self.held_for, strict=True)]
        return statistics.median(late) if late else math.nan


def deadline_for(taker: Taker) -> float:
    """How long a waiter may take before its repetition counts as "not within the deadline".

    Example:
        >>> deadline_for(Taker("x", "tenure", "file:///tmp", ttl=2.0))
        12.0
    """
    return 3 * taker.ttl + 6.0


def run_taker(taker: Taker, mode: str, repeats: int) -> Takeover:
    """`repeats` repetitions of `mode` ("kill" or "release") for `taker`.

    Raises RuntimeError when a process fails to start or says something unexpected.

    Example::

        result = run_taker(Taker("tenure", "tenure", url, ttl=2.0), "release", 5)
    """
    if taker.in_process:
        return _in_process(taker, mode, repeats)
    deadline = deadline_for(taker)
    result = Takeover(taker, mode, [], [], deadline)
    spec = json.dumps(asdict(taker))
    waiter = _Worker(spec)
    holder = None if mode == "kill" else _Worker(spec)
    try:
        for repetition in range(repeats):
            name = f"takeover-{mode}-{os.getpid()}-{time.monotonic_ns()}-{repetition}"
            if mode == "kill":
                holder = _Worker(spec)
            assert holder is not None
            held = float(holder.ask(f"take {name}", "held"))
            waiter.ask(f"wait {name} {deadline}", "waiting")
            if mode == "kill":
                time.sleep(max(0.0, held + KILL_AFTER - time.monotonic()))
                start = time.monotonic()
                holder.kill()
            else:
                time.sleep(SETTLE)
                start = float(holder.ask("release", "releasing"))
            answer = waiter.answer(("acquired", "gaveup"), deadline + 10.0)
            if answer is None or answer[0] == "gaveup":
                result.seconds.append(math.inf)
                waiter.kill()
                waiter = _Worker(spec)  # the old one may still be blocked
            else:
                result.seconds.append(float(answer[1]) - start)
            result.held_for.append(start - held)
            if mode == "release":
                holder.expect("released")
    finally:
        waiter.kill()
        if holder is not None:
            holder.kill()
    return result


class _Worker:
    """A worker process of this file, spoken to by lines on stdin and stdout."""

    def __init__(self, spec: str) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.buffer = b""
        self.send(spec)
        self.expect("ready", READY_TIMEOUT)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self, words: tuple[str, ...], timeout: float) -> list[str] | None:
        """The next line, split, if it starts with one of `words`; None after `timeout`."""
        line = self._line(timeout)
        if line is None:
            return None
        parts = line.split()
        if not parts or parts[0] not in words:
            code = self.process.poll()
            raise RuntimeError(f"a worker said {line.strip()!r} (expected {'/'.join(words)}; "
                               f"exit code {code}; its error is above, on stderr)")
        return parts

    def _line(self, timeout: float) -> str | None:
        """One line from the worker's stdout, read unbuffered (select sees what is left)."""
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([descriptor], [], [], left)
            if not readable:
                return None
            chunk = os.read(descriptor, 4096)
            if not chunk:
                return ""  # exited: reported by the caller
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def expect(self, word: str, timeout: float = READY_TIMEOUT) -> str:
        parts = self.answer((word,), timeout)
        if parts is None:
            raise RuntimeError(f"a worker did not say {word!r} within {timeout:g} s")
        return parts[1] if len(parts) > 1 else ""

    def ask(self, line: str, word: str) -> str:
        self.send(line)
        return self.expect(word)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # the pipe to a killed process
                    stream.close()


def _in_process(taker: Taker, mode: str, repeats: int) -> Takeover:
    """Clean releases between two threads of this process (a store no other process reaches)."""
    result = Takeover(taker, mode, [], [], deadline_for(taker))
    if mode != "release":
        return result
    library = open_library(taker.library, taker.url, taker.ttl, taker.options, taker.connect)
    try:
        for repetition in range(repeats):
            name = f"takeover-thread-{repetition}"
            holder, waiter = library.lock(name), library.lock(name)
            if not holder.acquire(1.0):
                raise RuntimeError("the holder could not take a fresh lock")
            acquired: list[float] = []

            def wait(lock: Any = waiter, into: list[float] = acquired) -> None:
                into.append(time.monotonic() if lock.acquire(result.deadline) else math.inf)

            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(SETTLE)
            start = time.monotonic()
            holder.release()
            thread.join(result.deadline + 10.0)
            result.seconds.append(acquired[0] - start if acquired else math.inf)
            result.held_for.append(0.0)
            if acquired and acquired[0] != math.inf:
                waiter.release()
    finally:
        library.close()
    return result


# -- the worker process ---------------------------------------------------------------------------


def worker() -> None:
    """One holder or waiter: reads its Taker as JSON, warms up, says "ready", then serves
    "take NAME" (-> "held T"), "wait NAME SECONDS" (-> "waiting T", then "acquired T" or
    "gaveup T"; it releases what it acquired), "release" (-> "releasing T", "released")."""
    warnings.simplefilter("ignore", DeprecationWarning)
    spec = json.loads(sys.stdin.readline())
    library = open_library(spec["library"], spec["url"], spec["ttl"], spec["options"],
                           spec["connect"])
    warm = library.lock(f"warm-{os.getpid()}")  # connects, creates tables, starts listeners
    if not warm.acquire(60.0):
        raise RuntimeError("could not take a fresh lock")
    warm.release()
    print("ready", flush=True)
    held = None
    for line in sys.stdin:
        command = line.split()
        if command[0] == "take":
            held = library.lock(command[1])
            if not held.acquire(60.0):
                raise RuntimeError("could not take a fresh lock")
            print(f"held {time.monotonic()!r}", flush=True)
        elif command[0] == "wait":
            lock = library.lock(command[1])
            print(f"waiting {time.monotonic()!r}", flush=True)
            got = lock.acquire(float(command[2]))
            print(f"{'acquired' if got else 'gaveup'} {time.monotonic()!r}", flush=True)
            if got:
                lock.release()
        elif command[0] == "release" and held is not None:
            print(f"releasing {time.monotonic()!r}", flush=True)
            held.release()
            print("released", flush=True)
    library.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
        sys.exit(0)
    sys.exit("usage: takeover.py --worker (started by run_taker; reads its spec on stdin)")
