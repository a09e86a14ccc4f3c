"""Peak memory per 1,000 held leases, each library in a fresh process.

The process (this file, `--worker`) imports the library, connects and takes and releases one
lock (connections, tables, listeners exist), collects garbage and reads its resident set size
(RSS: `/proc/self/statm`, resident pages) as the baseline. It then takes
`leases` locks of fresh names on one client and holds them for `hold` seconds (tenure's lease
monitor renews them meanwhile; a peer renews only if it has its own renewal), sampling its RSS
every 50 ms from a thread. The figure, scaled to 1,000 leases: the highest RSS sample less the
baseline (what the process costs the machine: threads' stacks, C libraries and mapped files
included; tracemalloc is not used, its own bookkeeping would be counted). The median over
`repeats` processes is reported.

Example::

    spec = Footprint("tenure", "tenure", "redis://127.0.0.1:6399/0", ttl=1.5, hold=1.2)
    result = run_footprint(spec, repeats=3)
    print(result.per_thousand_kib)
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from libraries import open_library

TAKE_BUDGET = 120.0  # seconds to take every lease before the process gives up
SAMPLE_EVERY = 0.05  # seconds between RSS samples
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") / 1024


@dataclass
class Footprint:
    """One library holding `leases` locks on one store; `renewal` says who renews them.

    Example::

        Footprint("filelock", "filelock", "file:///tmp/locks", ttl=30.0, hold=0.5,
                  renewal="nothing to renew (no expiry)")
    """

    label: str
    library: str
    url: str
    ttl: float
    hold: float
    leases: int = 1000
    renewal: str = "tenure's lease monitor, every ttl/3"
    options: dict[str, Any] = field(default_factory=dict)
    connect: dict[str, Any] = field(default_factory=dict)


@dataclass
class Memory:
    """Per process holding `leases` locks: peak RSS growth (KiB), and the seconds taking them
    took.

    Example::

        Memory(spec, 1000, [4100.0, 4012.0], [0.31, 0.29])
    """

    spec: Footprint
    leases: int
    growth_kib: list[float]
    take_seconds: list[float]
    baseline_kib: list[float] = field(default_factory=list)

    @property
    def per_thousand_kib(self) -> float:
        """Median peak RSS growth scaled to 1,000 leases."""
        return statistics.median(self.growth_kib) * 1000 / self.leases


def run_footprint(spec: Footprint, repeats: int = 3, leases: int | None = None) -> Memory:
    """`repeats` fresh processes, each holding `leases` (default spec.leases) locks.

    Raises RuntimeError with the worker's reason when it could not hold them.

    Example::

        memory = run_footprint(spec, repeats=1, leases=100)
    """
    count = leases or spec.leases
    result = Memory(spec, count, [], [])
    for _ in range(repeats):
        answer = subprocess.run(
            [sys.executable, __file__, "--worker"], capture_output=True, text=True,
            input=json.dumps({**asdict(spec), "leases": count}),
            timeout=TAKE_BUDGET + spec.hold + 120.0)
        lines = answer.stdout.strip().splitlines()
        if not lines:
            tail = " ".join(answer.stderr.strip().splitlines()[-1:])[:300]
            raise RuntimeError(f"the worker exited with {answer.returncode}: {tail}")
        data = json.loads(lines[-1])
        if "error" in data:
            raise RuntimeError(data["error"])
        result.growth_kib.append(data["peak_kib"] - data["baseline_kib"])
        result.baseline_kib.append(data["baseline_kib"])
        result.take_seconds.append(data["take_seconds"])
    return result


def _rss_kib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_KIB


class _Sampler(threading.Thread):
    """The highest RSS seen, sampled every SAMPLE_EVERY seconds until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = _rss_kib()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(SAMPLE_EVERY):
            self.peak = max(self.peak, _rss_kib())

    def stop(self) -> float:
        self.stopped.set()
        self.join()
        return max(self.peak, _rss_kib())


def worker() -> None:
    """Reads a Footprint (with "leases") as JSON on stdin and prints one JSON line: baseline and
    peak RSS KiB and the seconds taking took, or {"error": why}. Exits
    without releasing (the leases expire, or the process's death frees them)."""
    warnings.simplefilter("ignore", DeprecationWarning)
    spec = json.loads(sys.stdin.read())
    library = open_library(spec["library"], spec["url"], spec["ttl"], spec["options"],
                           spec["connect"])
    warm = library.lock(f"footprint-warm-{os.getpid()}")
    if not warm.acquire(30.0):
        raise RuntimeError("could not take a fresh lock")
    warm.release()
    gc.collect()
    baseline = _rss_kib()
    sampler = _Sampler()
    sampler.start()
    held = []
    start = time.monotonic()
    try:
        for index in range(spec["leases"]):
            lock = library.lock(f"footprint-{os.getpid()}-{index}")
            if not lock.acquire(30.0):
                raise RuntimeError(f"lock {index} of a fresh name was refused")
            held.append(lock)
            if time.monotonic() - start > TAKE_BUDGET:
                raise RuntimeError(f"took only {index + 1} of {spec['leases']} locks in "
                                   f"{TAKE_BUDGET:g} s")
    except Exception as exc:
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        print(json.dumps({"error": f"could not hold {spec['leases']:,} locks: after "
                                   f"{len(held):,}, {why}"}), flush=True)
        os._exit(0)
    took = time.monotonic() - start
    time.sleep(spec["hold"])  # the background renewal runs meanwhile
    print(json.dumps({"baseline_kib": baseline, "peak_kib": sampler.stop(), "take_seconds": took}),
          flush=True)
    os._exit(0)  # no release, no close: nothing more to measure


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    sys.exit("usage: footprint.py --worker (started by run_footprint; reads its spec on stdin)")
