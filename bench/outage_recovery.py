"""Recovery after a store restart: how soon a worker's jobs run again once the store is back.

Per server store (Redis, PostgreSQL, MariaDB, Azurite; SQLite and files have no server to
restart), a server of its own (tests/support/servers.py) and one worker process
(tests/support/outage_worker.py: a sync `tenure.Worker` with a job every 1 s, a leader-mode job
every 1 s and an election). The server is stopped, left down DOWN seconds and started again on
the same port, `restarts` times, each at a random phase of the period. For each restart: the
time from the server's port accepting connections again (polled every millisecond) to the next
completed run of each job (the job function returned), on CLOCK_MONOTONIC, one clock for every
process of the host.

Usage::

    python bench/outage_recovery.py                          # every store, 5 restarts each
    python bench/outage_recovery.py --stores redis --restarts 2

bench/run.py runs it last (the restarts disturb no other measure: the servers are its own) and
puts its table in BENCHMARKS.md.

Example::

    recoveries = measure_all(["redis", "postgres"], Path(tmp), restarts=5)
    print(markdown(recoveries))
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servers import ROOT, launcher

TITLE = "Recovery after a store restart"
STORES = ("redis", "postgres", "mysql", "azblob")
LABELS = {"redis": "redis:// (no persistence: restarts empty)", "postgres": "postgresql://",
          "mysql": "mysql:// (MariaDB)", "azblob": "azblob:// (Azurite in memory: restarts empty)"}
SERVER_CLASS = {"redis": "RedisServer", "postgres": "PostgresServer", "mysql": "MariaDBServer",
                "azblob": "Azurite"}
CHILD = ROOT / "tests" / "support" / "outage_worker.py"
PERIOD = 1.0  # the jobs' interval
TTL = {"redis": 3.0, "postgres": 3.0, "mysql": 3.0, "azblob": 15.0}  # azblob: 15 s minimum
DOWN = 3.0  # seconds each restart keeps the server down
RESTARTS = 5
READY_TIMEOUT = 60.0  # the worker's first runs
RECOVERY_DEADLINE = 120.0  # a job not run again by then counts as "never"
JOBS = (("every", "periodic job"), ("leader", "leader-mode job"))


@dataclass
class Recovery:
    """One store's restarts: per restart, seconds the server was down (stop to port accepting)
    and seconds from port accepting to each job's next completed run (inf: never).

    Example::

        Recovery("redis", 3.0, down=[3.1], back={"every": [2.4], "leader": [2.2]}).median("every")
    """

    store: str
    ttl: float
    down: list[float] = field(default_factory=list)
    back: dict[str, list[float]] = field(default_factory=lambda: {job: [] for job, _ in JOBS})
    exited: str = ""  # the worker process ended during the run: how
    error: str = ""  # could not be measured at all: why

    def median(self, job: str) -> float:
        """The median seconds from port accepting to `job`'s next run (nan: none measured)."""
        values = self.back[job]
        return statistics.median(values) if values else math.nan


class _Worker:
    """The worker process and the JSON-line events it prints (tests/support/outage_worker.py)."""

    def __init__(self, settings: dict[str, Any], env: dict[str, str], stderr: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self.stderr = stderr
        with stderr.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(settings)], stdout=subprocess.PIPE,
                stderr=sink, stdin=subprocess.DEVNULL, text=True, env={**os.environ, **env})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def first(self, event: str, after: float) -> float | None:
        return next((entry["t"] for entry in list(self.events)
                     if entry["event"] == event and entry["t"] > after), None)

    def wait_for(self, events: list[str], after: float, deadline: float) -> dict[str, float]:
        """The first time of each of `events` after `after` (inf: not by `deadline`, or the
        process ended)."""
        found: dict[str, float] = {}
        while len(found) < len(events):
            for event in events:
                if event not in found and (at := self.first(event, after)) is not None:
                    found[event] = at
            if time.monotonic() > deadline or self.process.poll() is not None:
                break
            time.sleep(0.005)  # polling the events with a deadline
        return {event: found.get(event, math.inf) for event in events}

    def why_exited(self) -> str:
        code = self.process.poll()
        if code is None:
            return ""
        lines = [line for line in self.stderr.read_text(errors="replace").splitlines()
                 if "Error" in line or "Unavailable" in line or "Group" in line]
        last = lines[-1].strip().lstrip("|+ ").strip() if lines else ""
        return f"exited with status {code}" + (f" ({last[:160]})" if last else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._reader.join(timeout=5)


def _port_back(port: int, since: float) -> float:
    """Poll `port` every millisecond until it accepts a connection; when it did."""
    accepts = launcher().accepts_connections
    while not accepts(port):
        if time.monotonic() - since > RECOVERY_DEADLINE:
            return math.inf
        time.sleep(0.001)
    return time.monotonic()


def measure_store(store: str, directory: Path, restarts: int = RESTARTS,
                  down: float = DOWN) -> Recovery:
    """Restart `store`'s own server `restarts` times under a running worker.

    Example::

        recovery = measure_store("postgres", Path(tmp) / "postgres", restarts=5)
    """
    result = Recovery(store, TTL[store])
    servers = launcher()
    directory.mkdir(parents=True, exist_ok=True)
    server = getattr(servers, SERVER_CLASS[store])(directory)
    try:
        server.start()
    except Exception as exc:
        result.error = f"the server did not start: {' '.join(str(exc).split())[:300]}"
        return result
    worker: _Worker | None = None
    try:
        url, env = server.url if store != "azblob" else "azblob:///outage-bench", {}
        if store == "azblob":
            env = {"AZURE_STORAGE_CONNECTION_STRING": server.connection_string}
        settings = {"url": url, "api": "sync", "ttl": TTL[store], "tag": "bench"}
        worker = _Worker(settings, env, directory / "worker.stderr")
        ready = worker.wait_for(["every", "leader"], 0.0, time.monotonic() + READY_TIMEOUT)
        if any(math.isinf(at) for at in ready.values()):
            result.error = worker.why_exited() or "the jobs did not run before the restarts"
            return result
        for _ in range(restarts):
            time.sleep(random.uniform(0.0, PERIOD))  # a random phase of the jobs' period
            stopped = time.monotonic()
            server.stop()
            time.sleep(down)  # the outage itself
            starting = threading.Thread(target=server.start_again)
            starting.start()
            back = _port_back(server.port, stopped)
            starting.join()
            result.down.append(back - stopped)
            ran = worker.wait_for([job for job, _ in JOBS], back, back + RECOVERY_DEADLINE)
            for job, at in ran.items():
                result.back[job].append(at - back)
            if (why := worker.why_exited()):
                result.exited = why
                break
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finally:
        if worker is not None:
            worker.stop()
        server.stop(graceful=False)
        getattr(server, "cleanup", lambda: None)()
    return result


def measure_all(stores: list[str], directory: Path, restarts: int = RESTARTS,
                progress: Any = None) -> list[Recovery]:
    """`measure_store` for each of `stores`, one after the other.

    Example::

        recoveries = measure_all(["redis"], Path(tmp))
    """
    results = []
    for store in stores:
        if progress is not None:
            progress(f"{TITLE}: {LABELS[store]}, {restarts} restarts")
        results.append(measure_store(store, directory / store, restarts))
    return results


def _cell(recovery: Recovery, job: str) -> str:
    values = recovery.back[job]
    if not values:
        return ""
    never = sum(math.isinf(value) for value in values)
    finite = [value for value in values if math.isfinite(value)]
    text = (f"{recovery.median(job):.2f} s ({max(finite):.2f} s)" if finite and
            math.isfinite(recovery.median(job)) else "never")
    return text + (f"; {never} of {len(values)} never" if never and finite else "")


def markdown(recoveries: list[Recovery], restarts: int = RESTARTS, down: float = DOWN) -> str:
    """The report's section: what was measured, then one row per store.

    Example::

        print(markdown(measure_all(["redis"], Path(tmp))))
    """
    lines = [
        f"A worker process (a sync `tenure.Worker`) runs a job every {PERIOD:g} s and a "
        f"leader-mode job every {PERIOD:g} s (plus an election) while its store's server is "
        f"stopped, left down {down:g} s and started again on the same port, {restarts} times, "
        "each at a random phase of the period. The figures run from the server's port "
        "accepting connections again (polled every millisecond) to the job's next completed "
        "run: median (max) over the restarts. A job that is working again waits for its next "
        f"period (up to {PERIOD:g} s) and its start jitter; the server's own start-up after the "
        "port opens counts, as does Redis' `restart_grace` (a Redis that restarted empty grants "
        "no name it has no counter for while its INFO uptime, in whole seconds, is under 2: "
        "for 1 to 2 s after it started). Sanity bound: ttl + one period + the runners' "
        "retry cap.",
        "",
        "| store | job ttl | down: stop to port accepting (median) | periodic job: port "
        "accepting to next run, median (max) | leader-mode job: median (max) | worker process |",
        "|---|---:|---:|---:|---:|---|"]
    for recovery in recoveries:
        label = LABELS[recovery.store]
        if recovery.error:
            lines.append(f"| {label} | {recovery.ttl:g} s | **Not measured**: {recovery.error} "
                         "| | | |")
            continue
        downs = f"{statistics.median(recovery.down):.2f} s" if recovery.down else ""
        alive = (f"**{recovery.exited}** (after {len(recovery.down)} of {restarts} restarts)"
                 if recovery.exited else "kept running")
        lines.append(f"| {label} | {recovery.ttl:g} s | {downs} | {_cell(recovery, 'every')} "
                     f"| {_cell(recovery, 'leader')} | {alive} |")
    return "\n".join(lines)


def unmeasured(recoveries: list[Recovery]) -> list[str]:
    """What the run could not measure, or where the worker died or a job never ran again.

    Example::

        unmeasured([])  # []
    """
    problems = []
    for recovery in recoveries:
        label = LABELS[recovery.store]
        if recovery.error:
            problems.append(f"{TITLE}, {label}: {recovery.error}")
        if recovery.exited:
            problems.append(f"{TITLE}, {label}: the worker {recovery.exited}")
        for job, name in JOBS:
            if any(math.isinf(value) for value in recovery.back[job]):
                problems.append(f"{TITLE}, {label}: the {name} did not run again within "
                                f"{RECOVERY_DEADLINE:g} s of a restart")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Measure, print the markdown section; with --check, exit 1 when anything failed.

    Example::

        main(["--stores", "redis", "--restarts", "2"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated, from {','.join(STORES)} (default: all)")
    parser.add_argument("--restarts", type=int, default=RESTARTS,
                        help=f"restarts per store (default {RESTARTS})")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a store was not measured, a worker exited or a job "
                             "never ran again")
    args = parser.parse_args(argv)
    stores = [store.strip() for store in args.stores.split(",") if store.strip()]
    unknown = sorted(set(stores) - set(STORES))
    if unknown or not stores or args.restarts < 1:
        parser.error(f"--stores: choose from {','.join(STORES)} (unknown: "
                     f"{', '.join(unknown) or 'none'}); --restarts: at least 1")
    with tempfile.TemporaryDirectory(prefix="tenure-outages-") as tmp:
        recoveries = measure_all(stores, Path(tmp), args.restarts,
                                 progress=lambda text: print(text, file=sys.stderr, flush=True))
    print(f"## {TITLE}\n\n{markdown(recoveries, args.restarts)}")
    problems = unmeasured(recoveries)
    for problem in problems:
        print(f"not measured: {problem}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
