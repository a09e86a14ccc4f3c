"""Many waiters on one name: processes x async tasks loop acquire / hold 1 ms / release.

Per server store (Redis, PostgreSQL, MariaDB), in the same run and on the same kind of load:
`processes` OS processes (this file, `--worker`), each with `tasks` asyncio tasks on one store
object, loop `async with lock.acquire(timeout=...)`, hold 1 ms and release, on ONE name, for
`seconds`. Unlike the contended hand-off (one waiter per process), a crowd waits: what counts
is that the lock keeps moving, that an acquire gives up on time, and that no lease taken for a
waiter is left behind. Per store: grants per second, the acquire time (call to return) p50 and
p99 of the successful ones, the LockTimeouts, the slowest acquire that gave up (its timeout
plus the overrun), and the leases still held once every process closed its store.

The processes connect and warm up first (one acquire of the name each), then start at one
monotonic instant, like bench/handoff.py's.

Usage::

    python bench/many_waiters.py --urls mysql=mysql://root@127.0.0.1:3306/tenure,redis=redis://...
    python bench/many_waiters.py                 # starts its own servers (tests/support/servers.py)

bench/run.py runs it on the servers it started and puts its table in BENCHMARKS.md.

Example::

    crowds = measure_all({"redis": "redis://127.0.0.1:6379/0"})
    print(markdown(crowds))
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from handoff import READY_TIMEOUT, percentile, started_together, wait_finished

TITLE = "Many waiters on one name"
LABELS = {"mysql": "mysql:// (MariaDB)", "postgres": "postgresql://", "redis": "redis://"}
STORES = ("mysql", "postgres", "redis")
PROCESSES = 3
TASKS = 20
SECONDS = 5.0
TIMEOUT = 2.0  # each acquire's
MAX_WAIT = 0.05  # the locks' backoff ceiling (min_wait: the default 10 ms)
TTL = 10.0  # long enough that a lease left behind is still there at the end
HOLD_SECONDS = 0.001


@dataclass
class Crowd:
    """One store's run: what the processes recorded, merged.

    Example::

        crowd.grants_per_second, crowd.timeouts, crowd.left_held
    """

    store: str
    seconds: float
    acquired: list[float] = field(default_factory=list)  # seconds from call to return
    gave_up: list[float] = field(default_factory=list)  # the same, for LockTimeouts
    left_held: int = 0  # leases of the name still held after every process closed its store
    error: str = ""

    @property
    def grants_per_second(self) -> float:
        return len(self.acquired) / self.seconds

    @property
    def timeouts(self) -> int:
        return len(self.gave_up)


def measure(store: str, url: str, processes: int = PROCESSES, tasks: int = TASKS,
            seconds: float = SECONDS, timeout: float = TIMEOUT) -> Crowd:
    """Run the crowd on `url` and merge what the processes recorded (errors as `error`).

    Example::

        crowd = measure("redis", "redis://127.0.0.1:6379/0", seconds=2.0)
    """
    crowd = Crowd(store, seconds)
    name = f"crowd-{store}-{time.monotonic_ns()}"
    spec = {"url": url, "name": name, "tasks": tasks, "seconds": seconds, "timeout": timeout}
    with tempfile.TemporaryDirectory(prefix="tenure-crowd-") as tmp:
        outputs = [Path(tmp) / f"{index}.json" for index in range(processes)]
        specs = [{**spec, "out": str(out)} for out in outputs]
        try:
            with started_together(__file__, specs, "many-waiters worker") as workers:
                wait_finished(workers, seconds + timeout + READY_TIMEOUT, "worker")
                for out in outputs:
                    data = json.loads(out.read_text())
                    crowd.acquired += data["acquired"]
                    crowd.gave_up += data["gave_up"]
                crowd.left_held = _held(url, name)
        except Exception as exc:
            crowd.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return crowd


def _held(url: str, name: str) -> int:
    import tenure

    with tenure.connect(url) as store:
        return len(store.leases(name))


def measure_all(urls: dict[str, str], processes: int = PROCESSES, tasks: int = TASKS,
                seconds: float = SECONDS, progress: Any = None) -> list[Crowd]:
    """`measure` for each store of `urls` (store -> URL), one after the other.

    Example::

        crowds = measure_all({"mysql": mysql_url, "postgres": pg_url, "redis": redis_url})
    """
    results = []
    for store in STORES:
        if store in urls:
            if progress is not None:
                progress(f"{TITLE}: {LABELS[store]}, {processes} processes x {tasks} tasks")
            results.append(measure(store, urls[store], processes, tasks, seconds))
    return results


def _ms(value: float) -> str:
    return "" if value != value else f"{value * 1e3:,.1f}"  # nan: none


def markdown(crowds: list[Crowd], processes: int = PROCESSES, tasks: int = TASKS,
             timeout: float = TIMEOUT) -> str:
    """The report's section: what was measured, then one row per store.

    Example::

        print(markdown(measure_all({"redis": url})))
    """
    seconds = crowds[0].seconds if crowds else SECONDS
    lines = [
        f"{processes} processes x {tasks} asyncio tasks (one store object per process) loop "
        f"`async with lock.acquire(timeout={timeout:g})`, hold {HOLD_SECONDS * 1e3:g} ms and "
        f"release, on one name, for {seconds:g} s (ttl {TTL:g} s, backoff 10 ms .. "
        f"{MAX_WAIT * 1e3:g} ms), one store after the other in the same run. Acquire times run "
        "from the call to its return, for the acquires that got the lease; the slowest give-up "
        f"is the longest a LockTimeout took (the timeout is {timeout:g} s); \"left held\" counts "
        "the name's leases still live once every process closed its store (a lease taken for a "
        "waiter and never handed over stays until its ttl).",
        "",
        "| store | grants/s | acquire p50, p99 (ms) | LockTimeouts | slowest give-up (s) "
        "| left held |",
        "|---|---:|---:|---:|---:|---:|"]
    for crowd in crowds:
        label = LABELS[crowd.store]
        if crowd.error:
            lines.append(f"| {label} | **Not measured**: {crowd.error} | | | | |")
            continue
        slowest = f"{max(crowd.gave_up):.2f}" if crowd.gave_up else ""
        lines.append(
            f"| {label} | {crowd.grants_per_second:,.0f} | {_ms(percentile(crowd.acquired, 0.5))}"
            f", {_ms(percentile(crowd.acquired, 0.99))} | {crowd.timeouts:,} | {slowest} "
            f"| {crowd.left_held} |")
    return "\n".join(lines)


def unmeasured(crowds: list[Crowd]) -> list[str]:
    """What the run could not measure, or leases left held after a run.

    Example::

        unmeasured([])  # []
    """
    problems = []
    for crowd in crowds:
        if crowd.error:
            problems.append(f"{TITLE}, {LABELS[crowd.store]}: {crowd.error}")
        elif crowd.left_held:
            problems.append(f"{TITLE}, {LABELS[crowd.store]}: {crowd.left_held} lease(s) left "
                            "held after the run")
    return problems


# -- the worker process ---------------------------------------------------------------------------


def worker(spec: dict[str, Any]) -> None:
    """One process of the crowd (its spec is the first line on stdin): says "ready" once
    connected and warmed up, starts at the monotonic time it reads from stdin, writes its
    acquire times to spec["out"]."""
    import anyio

    import tenure
    import tenure.aio

    acquired: list[float] = []
    gave_up: list[float] = []

    async def task(store: Any, deadline: float) -> None:
        lock = store.lock(spec["name"], ttl=TTL, max_wait=MAX_WAIT)
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                async with lock.acquire(timeout=spec["timeout"]):
                    acquired.append(time.monotonic() - started)
                    await anyio.sleep(HOLD_SECONDS)
            except tenure.LockTimeout:
                gave_up.append(time.monotonic() - started)

    async def main() -> None:
        async with tenure.aio.connect(spec["url"]) as store:
            async with store.lock(spec["name"], ttl=TTL).acquire(timeout=60):
                pass  # connects, creates tables, starts listeners
            print("ready", flush=True)
            start = float(await anyio.to_thread.run_sync(sys.stdin.readline))
            await anyio.sleep(max(0.0, start - time.monotonic()))
            deadline = time.monotonic() + spec["seconds"]
            async with anyio.create_task_group() as group:
                for _ in range(spec["tasks"]):
                    group.start_soon(task, store, deadline)

    anyio.run(main)
    Path(spec["out"]).write_text(json.dumps({"acquired": acquired, "gave_up": gave_up}))


def main(argv: list[str] | None = None) -> int:
    """Measure, print the markdown section; with --check, exit 1 when anything failed.

    Example::

        main(["--stores", "redis,mysql", "--seconds", "2"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", default="",
                        help="store=URL,... of running servers (default: start servers of its "
                             "own with the test suite's launcher)")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated, from {','.join(STORES)} (default: all)")
    parser.add_argument("--processes", type=int, default=PROCESSES)
    parser.add_argument("--tasks", type=int, default=TASKS)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a store was not measured or left leases held")
    args = parser.parse_args(argv)
    stores = [store.strip() for store in args.stores.split(",") if store.strip()]
    unknown = sorted(set(stores) - set(STORES))
    if unknown or not stores or args.processes < 1 or args.tasks < 1 or args.seconds <= 0:
        parser.error(f"--stores: choose from {','.join(STORES)} (unknown: "
                     f"{', '.join(unknown) or 'none'}); --processes and --tasks at least 1, "
                     "--seconds positive")
    progress = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="tenure-crowds-") as tmp, ExitStack() as stack:
        if args.urls:
            urls = dict(pair.split("=", 1) for pair in args.urls.split(",") if "=" in pair)
        else:
            import servers

            starters = {"mysql": servers.start_mariadb, "postgres": servers.start_postgres,
                        "redis": servers.start_redis}
            urls = {}
            for store in stores:
                server = starters[store](Path(tmp) / store, stack)
                if isinstance(server, servers.Server):
                    urls[store] = server.url
                else:
                    progress(f"{LABELS[store]}: not started: {server}")
        urls = {store: url for store, url in urls.items() if store in stores}
        crowds = measure_all(urls, args.processes, args.tasks, args.seconds, progress)
    print(f"## {TITLE}\n\n{markdown(crowds, args.processes, args.tasks)}")
    problems = unmeasured(crowds)
    for problem in problems:
        print(f"not measured: {problem}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
        sys.exit(0)
    sys.exit(main())
