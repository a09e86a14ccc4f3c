"""Contended hand-off: N OS processes loop acquire / hold 1 ms / release on one name.

One harness for every library: a `Contender` says which library (tenure or a peer), the URL
and the options; `run_contender` starts the processes (this file, `--worker`), waits until
each is connected and warmed up, starts them all at one monotonic instant, and merges what
they recorded. Each process keeps, per acquisition, the monotonic time right after its acquire
returned and right before it called release (and when it called acquire and when its release
returned); CLOCK_MONOTONIC is one clock for every process of the host, so the records of all
processes merge in time order.

"Release to next acquire" runs from a release call to the next acquire's return, whoever
acquired (the release's own round trip included); a hand-off is such a pair where another
process took the lock. An acquire that returned before the previous holder called release is
an overlap: two holders at once.

Fairness: the acquisitions of the least-served process over the most-served one's ("per-process
min/max"), and a waiter's wait: from an acquire's call to its return, for every acquire that had
to wait, i.e. during which another process held the lock at some moment (it held the lock when
the acquire was called, or took it before that acquire returned). A process that releases and
takes the lock again while nobody else held it in between did not wait; the processes' first
acquires, called together on a free lock, did wait when another process took it first.

Example::

    contender = Contender("tenure: `with lock.acquire(timeout=60)`", "tenure", url)
    result = run_contender(contender, processes=8, seconds=3.0)
    print(result.handoffs_per_second, percentile(result.handoffs, 0.5))
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from libraries import RINGS, PeerLock, Row, Seat, open_library, open_ring

PROCESSES = 8
HOLD_SECONDS = 0.001
LEASE_SECONDS = 30  # tenure's default ttl; the peers' expiry is set to the same
READY_TIMEOUT = 120.0  # seconds for every process to import, connect and warm up


@dataclass
class Contender(Row):
    """One library's way to take the contended lock, as the worker processes build it.

    `library` is one of bench/libraries.py's; `options` and `connect` go to its
    `open_library`; `goal` marks the run the hand-off goal is judged on, `fair` a tenure run
    the contended goals (issue 20: fairness, waiter p99, acquisitions/s against the peers) are
    judged on, and `versus_floor` one also held to 0.9x the bare blocking server lock (the
    advisory/getlock modes); `as_fair` a tenure run on a store that cannot wake its waiters
    (azblob), held to be no less fair (per-process min/max) than the peer's fixed-interval retry.

    Example::

        Contender("tenure, polling", "tenure", url, {"min_wait": 0.001}, {"notify": False})
    """

    options: dict[str, Any] = field(default_factory=dict)
    connect: dict[str, Any] = field(default_factory=dict)
    goal: bool = False
    fair: bool = False
    versus_floor: bool = False
    as_fair: bool = False

    @property
    def role(self) -> str:
        """"tenure", "floor" (a bare server lock or a ring, no library) or "peer"."""
        if self.library == "tenure":
            return "tenure"
        return "floor" if self.library in FLOORS else "peer"


FLOORS = ("pg-advisory-lock", "get-lock", "pg-notify-handover", "get-lock-bell", *RINGS)
FAIR_FLOORS = RINGS  # the floors of a fair hand-off: one wake-up per hand-off, nothing else
BLOCKING_FLOORS = ("pg-advisory-lock", "get-lock")  # the servers' own blocking lock waits


WAKING = ("file", "sqlite", "redis", "postgresql", "mysql")  # stores whose waiters are woken


def fair_floors(url: str, processes: int = PROCESSES) -> list[Contender]:
    """The fair floors of the contended section of `url`: the ring of FIFOs on every store
    whose waiters are woken (WAKING), and the ring with the store's own means of waking where
    it has one that the ring can use bare (file:// and sqlite://: a FIFO doorbell and a
    `flock`; redis://: pub/sub).

    Example::

        section.contenders += fair_floors("redis://127.0.0.1:6399/0")
    """
    scheme = url.split(":", 1)[0]
    if scheme not in WAKING:
        return []
    rings = [Contender(f"floor of a fair hand-off: the {processes} processes pass one token "
                       "round a ring through FIFOs, each holding it 1 ms (no lock, no store: "
                       "first come, first served, one wake-up per hand-off)", "ring-pipe", url)]
    if scheme in ("file", "sqlite"):
        rings.append(Contender("floor of a fair `flock` hand-off: the same ring, where the "
                               "woken process also takes a `flock` (LOCK_EX + LOCK_NB) and "
                               "frees it before ringing the next", "ring-flock", url))
    if scheme == "redis":
        rings.append(Contender("floor of a fair Redis hand-off: the same ring, the token "
                               "passed by `PUBLISH` to the next process's pub/sub channel "
                               "(redis-py)", "ring-redis", url))
    return rings


@dataclass
class HandOff:
    """One contended run: acquisitions, hand-offs between processes, latencies (seconds).

    Example::

        result.handoffs_per_second, percentile(result.handoffs, 0.99)
    """

    label: str
    seconds: float
    acquisitions: int
    latencies: list[float]  # from each release call to the next acquire, whoever took it
    handoffs: list[float]  # the same, where another process than the releaser took it
    overlaps: int  # acquires that returned before the previous holder called release
    per_process: list[int] = field(default_factory=list)  # acquisitions of each process
    waits: list[float] = field(default_factory=list)  # acquire call to return, waiters only
    goal: bool = False  # the run the hand-off goal is judged on
    fair: bool = False  # the run the contended goals are judged on
    versus_floor: bool = False  # ...and the 0.9x-the-blocking-floor goal
    as_fair: bool = False  # the run held to the peers' per-process min/max (azblob)
    library: str = ""
    url: str = ""

    @property
    def fairness(self) -> float:
        """Acquisitions of the least-served process ÷ the most-served one's (nan: none)."""
        most = max(self.per_process, default=0)
        return min(self.per_process) / most if most else float("nan")

    @property
    def acquisitions_per_second(self) -> float:
        return self.acquisitions / self.seconds

    @property
    def handoffs_per_second(self) -> float:
        return len(self.handoffs) / self.seconds


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank value below which `fraction` of `values` fall (nan when empty).

    Example:
        >>> percentile([3.0, 1.0, 2.0], 0.5)
        2.0
    """
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_contender(contender: Contender, processes: int = PROCESSES, seconds: float = 3.0,
                  workdir: Path | None = None) -> HandOff:
    """`processes` OS processes loop acquire / hold 1 ms / release for `seconds`.

    Raises RuntimeError when a process fails to start or to finish.

    Example::

        result = run_contender(Contender("redis-py Lock", "redis-py", url))
    """
    name = f"contended-{contender.library}-{time.monotonic_ns()}"
    with tempfile.TemporaryDirectory(prefix="tenure-handoff-", dir=workdir) as tmp:
        outputs = [Path(tmp) / f"{index}.json" for index in range(processes)]
        spec = {**asdict(contender), "name": name, "seconds": seconds}
        specs = [{**spec, "out": str(out), "index": index, "processes": processes}
                 for index, out in enumerate(outputs)]
        with started_together(__file__, specs, f"{contender.library} contender") as workers:
            wait_finished(workers, seconds + READY_TIMEOUT, f"{contender.library} contender")
        read = [_read(out) for out in outputs]
    records = [record for one in read for record in one]
    result = merge(contender.label, seconds, records)
    result.per_process = [len(one) for one in read]  # a process that never acquired: 0
    result.goal, result.fair = contender.goal, contender.fair
    result.versus_floor, result.library = contender.versus_floor, contender.library
    result.as_fair = contender.as_fair
    result.url = contender.url
    return result


@contextmanager
def started_together(script: str, specs: list[dict[str, Any]],
                     what: str) -> Iterator[list[subprocess.Popen[str]]]:
    """One `script --worker` process per spec (the spec on its stdin, as JSON: it may hold
    secrets), all ready (see wait_ready), then told one start time 50 ms ahead on the
    monotonic clock; those still running when the block ends are killed. `what` names a
    worker in the errors.

    Example::

        with started_together(__file__, specs, "many-waiters worker") as workers:
            wait_finished(workers, 30.0, "many-waiters worker")
    """
    workers = [subprocess.Popen([sys.executable, script, "--worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in specs]
    try:
        for worker, spec in zip(workers, specs, strict=True):
            assert worker.stdin is not None
            worker.stdin.write(json.dumps(spec) + "\n")
            worker.stdin.flush()
        wait_ready(workers, what)
        start = time.monotonic() + 0.05
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{start}\n")
            worker.stdin.close()
        yield workers
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            if worker.stdout is not None:
                worker.stdout.close()


def wait_finished(workers: list[subprocess.Popen[str]], timeout: float, what: str) -> None:
    """Wait for every worker to exit (`timeout` s each at most): RuntimeError naming `what`
    when one exits with a failure.

    Example::

        wait_finished(workers, seconds + READY_TIMEOUT, "redis-py contender")
    """
    for worker in workers:
        if worker.wait(timeout=timeout) != 0:
            raise RuntimeError(f"a {what} exited with {worker.returncode}")


def wait_ready(workers: list[subprocess.Popen[str]], what: str) -> None:
    """Wait until every worker printed "ready" (each connected and warmed up); `what` names a
    worker in the errors (e.g. "redis-py contender")."""
    deadline = time.monotonic() + READY_TIMEOUT
    waiting = {worker.stdout: worker for worker in workers if worker.stdout is not None}
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{len(waiting)} {what}(s) not ready in {READY_TIMEOUT:g} s")
        readable, _, _ = select.select(list(waiting), [], [], left)
        for stream in readable:
            line = stream.readline()
            if line.strip() == "ready":
                del waiting[stream]
            elif not line:
                code = waiting[stream].wait()
                raise RuntimeError(f"a {what} exited with {code} before it was ready (its "
                                   "error is above, on stderr)")


Record = tuple[int, int, int, int, int]  # acquired, pid, release called, acquire called,
# release returned (ns, CLOCK_MONOTONIC)


def _read(out: Path) -> list[Record]:
    data = json.loads(out.read_text())
    return [(acquired, data["pid"], releasing, called, released)
            for called, acquired, releasing, released in data["records"]]


def merge(label: str, seconds: float, records: list[Record]) -> HandOff:
    """A HandOff from every process's (acquired, pid, release called, acquire called, release
    returned) records, in ns.

    Example:
        >>> result = merge("x", 1.0, [(10, 1, 20, 0, 21), (25, 2, 30, 5, 31), (32, 2, 40, 31, 41)])
        >>> result.handoffs, result.waits
        ([5e-09], [2e-08])
    """
    events = sorted(records)
    latencies, handoffs, overlaps = [], [], 0
    for (_, previous, released, _, _), (acquired, pid, _, _, _) in itertools.pairwise(events):
        latency = (acquired - released) / 1e9
        overlaps += latency < 0
        latencies.append(latency)
        if pid != previous:
            handoffs.append(latency)
    return HandOff(label, seconds, len(events), latencies, handoffs, overlaps,
                   waits=waits(events))


def waits(events: list[Record]) -> list[float]:
    """The waits (s, acquire call to return) of the acquires another hold overlapped: some
    earlier-acquired hold (any process's) was released after this acquire was called. A
    process's own earlier holds ended before its call, so they never count. `events` sorted.

    Example:
        >>> waits([(10, 1, 20, 0, 21), (25, 2, 30, 5, 31), (32, 2, 40, 31, 41)])
        [2e-08]
    """
    found, latest = [], -1  # latest: the last release return of the holds acquired so far
    for acquired, _, _, called, released in events:
        if latest > called:
            found.append((acquired - called) / 1e9)
        latest = max(latest, released)
    return found


# -- the worker process ---------------------------------------------------------------------------


Hold = Callable[[], AbstractContextManager[Any]]  # a new acquire-on-enter context each call


def holder(spec: dict[str, Any]) -> tuple[Hold, Callable[[], None]]:
    """What a worker holds: a factory of context managers that acquire (waiting up to 60 s, the
    library's way) and release the lock, and a close function.

    Example::

        hold, close = holder({"library": "tenure", "url": url, "name": "x", "options": {},
                              "connect": {}})
    """
    if spec["library"] in RINGS:  # its FIFOs and marks next to the run's output files
        seat = Seat(spec["index"], spec["processes"], Path(spec["out"]).parent)
        library = open_ring(spec["library"], spec["url"], seat)
    else:
        library = open_library(spec["library"], spec["url"], LEASE_SECONDS, spec["options"],
                               spec["connect"])
    return _held(library.lock(spec["name"])), library.close


class _held(AbstractContextManager[Any]):
    """A context manager around a PeerLock: acquire (which must succeed) and release."""

    def __init__(self, lock: PeerLock) -> None:
        self.lock = lock

    def __call__(self) -> _held:
        return self

    def __enter__(self) -> _held:
        if not self.lock.acquire(60.0):
            raise RuntimeError("acquire gave up")
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def worker(spec: dict[str, Any]) -> None:
    """One contended process (see `run_contender`; its spec is the first line on stdin): says
    "ready" once connected and warmed up, starts at the monotonic time it reads from stdin,
    writes its records to spec["out"]."""
    warnings.simplefilter("ignore", DeprecationWarning)  # tooz deprecates its SQL drivers
    hold, close = holder(spec)
    with hold():  # connects, creates tables, starts listeners
        pass
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.monotonic()))
    deadline = time.monotonic_ns() + int(spec["seconds"] * 1e9)
    records = []
    while (called := time.monotonic_ns()) < deadline:
        with hold():
            acquired = time.monotonic_ns()
            time.sleep(HOLD_SECONDS)
            releasing = time.monotonic_ns()
        records.append((called, acquired, releasing, time.monotonic_ns()))
    close()
    Path(spec["out"]).write_text(json.dumps({"pid": os.getpid(), "records": records}))


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
        sys.exit(0)
    sys.exit("usage: handoff.py --worker (started by run_contender; reads its spec on stdin)")
