"""Five OS processes take turns on one tenure lock, then the run is checked.

`make demo` runs this script. The parent process creates a SQLite store in a fresh temporary
directory and starts the workers: the same script run with `--worker N`, each a real OS process
with its own connection. For about ten seconds every worker loops: take the lock
"invoice-processing", "charge" a few invoices (sleeps of 30-60 ms) while holding it, give it
back, pause briefly. Whoever holds the lock prints its fencing token.

While holding the lease each worker appends one JSON line per turn to its own history file:
its token and the `time.monotonic()` readings taken right after the acquire returned and right
before the release. On Linux that clock is one clock for every process on the host, so turns
of different processes can be compared. When all workers are done the parent merges the files
and checks two things:

1. no two turns overlap in time: no two workers held the lock at once;
2. in order of time, the fencing tokens strictly increase.

It exits 0 when both hold, 1 with a FAILED line when one does not, 130 when interrupted.

Usage::

    python demo/take_turns.py [--seconds 10] [--workers 5] [--dir DIR]

Ctrl-C (or SIGTERM to the parent) stops every worker; each releases its lease on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.table import Table

import tenure

LOCK_NAME = "invoice-processing"
COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
STARTUP_TIMEOUT = 60.0  # generous: seconds for the workers to start on a loaded machine
STOP_TIMEOUT = 10.0  # how long interrupted workers get to release and exit before SIGKILL

console = Console(soft_wrap=True, highlight=False)


@dataclass(frozen=True)
class Turn:
    """One hold of the lock by one worker, as that worker recorded it.

    `start` and `end` are `time.monotonic()` readings in the worker's process.

    Example::

        Turn(worker=2, pid=4121, token=1795312575547085, start=81.250, end=81.412)
    """

    worker: int
    pid: int
    token: int
    start: float
    end: float
    lost: bool = False


@dataclass
class Verdict:
    """What `check` found: overlapping turns and pairs whose token did not go up.

    Example::

        verdict = check(turns)
        if not verdict.ok:
            print(verdict.overlaps, verdict.regressions)
    """

    overlaps: list[tuple[Turn, Turn]] = field(default_factory=list)
    regressions: list[tuple[Turn, Turn]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no two turns overlapped and every token was larger than the one before."""
        return not self.overlaps and not self.regressions


def check(turns: Iterable[Turn]) -> Verdict:
    """Check a merged history: no two turns overlap, and tokens strictly increase over time.

    Each overlap is reported as (earlier turn still running, later turn that started inside it);
    each regression as (turn, next turn by start time whose token is not larger).

    Example::

        >>> a = Turn(worker=1, pid=10, token=7, start=0.0, end=1.0)
        >>> b = Turn(worker=2, pid=11, token=8, start=1.5, end=2.0)
        >>> check([b, a]).ok
        True
        >>> check([a, Turn(worker=2, pid=11, token=6, start=0.5, end=2.0)]).ok
        False
    """
    ordered = sorted(turns, key=lambda turn: (turn.start, turn.end))
    verdict = Verdict()
    longest: Turn | None = None  # the turn seen so far that ends last
    for turn in ordered:
        if longest is not None and turn.start < longest.end:
            verdict.overlaps.append((longest, turn))
        if longest is None or turn.end > longest.end:
            longest = turn
    verdict.regressions = [(a, b) for a, b in itertools.pairwise(ordered) if b.token <= a.token]
    return verdict


def verdict_lines(verdict: Verdict, turns: Sequence[Turn]) -> list[str]:
    """The closing lines of the demo (rich markup): a check mark per check, or FAILED lines.

    Example::

        >>> verdict_lines(Verdict(), [])[0]
        '[green]✓[/] no two workers held the lock at once (0 turns checked)'
    """
    lines = []
    if not verdict.overlaps:
        lines.append(
            f"[green]✓[/] no two workers held the lock at once ({len(turns)} turns checked)"
        )
    for a, b in verdict.overlaps:
        lines.append(
            f"[bold red]✗ FAILED:[/] worker {a.worker} (token {a.token}, until {a.end:.6f}) "
            f"and worker {b.worker} (token {b.token}, from {b.start:.6f}) held the lock together"
        )
    if not verdict.regressions:
        tokens = sorted(turn.token for turn in turns)
        span = f" ({tokens[0]} → {tokens[-1]})" if tokens else ""
        lines.append(f"[green]✓[/] fencing tokens only went up{span}")
    for a, b in verdict.regressions:
        lines.append(
            f"[bold red]✗ FAILED:[/] token went backwards: worker {a.worker} got {a.token}, "
            f"then worker {b.worker} got {b.token}"
        )
    return lines


def read_history(paths: Iterable[Path]) -> list[Turn]:
    """Merge the workers' JSON-lines history files into one list of turns.

    Example::

        turns = read_history(sorted(run_dir.glob("worker-*.jsonl")))
    """
    turns = []
    for path in paths:
        with path.open() as lines:
            turns.extend(Turn(**json.loads(line)) for line in lines if line.strip())
    return turns


# -- a worker -----------------------------------------------------------------------------------


def _stop(signum: int, frame: FrameType | None) -> None:
    """The parent's SIGTERM/SIGINT handler: unwind like Ctrl-C, once."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _listen_to_parent(deadline: list[float], go: threading.Event, stop: threading.Event) -> None:
    """Read stdin: the shared deadline as one line, then EOF once the parent is gone."""
    data = b""
    while chunk := os.read(0, 64):
        data += chunk
        if b"\n" in data and not go.is_set():
            deadline.append(float(data.split(b"\n")[0]))
            go.set()
    stop.set()  # the parent closed our stdin or died: stop rather than live on as an orphan


def run_worker(number: int, run_dir: Path) -> int:
    """Take turns on the lock until the deadline the parent sends; returns the exit code.

    SIGTERM, SIGINT and the parent's exit only set a flag: the current turn ends after its
    current invoice and the lease is released by the `with` block as usual (never torn down
    halfway by an exception from a signal handler).

    Example::

        run_worker(3, Path("/tmp/tenure-demo-x1y2"))  # normally via `take_turns.py --worker 3`
    """
    # The main thread only polls `stop` (is_set never blocks), so setting it from the signal
    # handler cannot deadlock on the Event's internal lock; `go` is set by the stdin thread.
    go, stop = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    color = COLORS[(number - 1) % len(COLORS)]
    me = f"[bold {color}]worker {number}[/] (pid {os.getpid()})"
    rng = random.Random()
    deadline: list[float] = []
    with (
        tenure.connect(f"sqlite:///{run_dir / 'locks.db'}") as store,
        (run_dir / f"worker-{number}.jsonl").open("a") as history,
    ):
        lock = store.lock(LOCK_NAME, ttl=5, max_wait=0.2)
        store.leases()  # open the database now, so the first turn is not slower
        threading.Thread(target=_listen_to_parent, args=(deadline, go, stop), daemon=True).start()
        (run_dir / f"worker-{number}.ready").write_text(str(os.getpid()))
        while not go.wait(0.1):
            if stop.is_set():
                return 130  # stopped (or the parent gone) before the start
        until = deadline[0]
        while not stop.is_set() and (remaining := until - time.monotonic()) > 0:
            try:
                # Short waits, so that a stop request is noticed within half a second.
                with lock.acquire(timeout=min(remaining, 0.5)) as lease:
                    start = time.monotonic()
                    invoices = rng.randint(1, 4)
                    console.print(f"{me} holds {LOCK_NAME}  token {lease.token}  "
                                  f"[dim]charging {invoices} invoice(s)[/]")
                    for _ in range(invoices):
                        lease.check()  # a real charge would also pass fence=lease.token
                        time.sleep(rng.uniform(0.03, 0.06))
                        if stop.is_set():
                            break
                    end = time.monotonic()
                    turn = Turn(number, os.getpid(), lease.token, start, end, lease.lost)
                    history.write(json.dumps(asdict(turn)) + "\n")
                    history.flush()
            except tenure.LockTimeout:
                continue  # someone else has it: look at the clock and the stop flag, try again
            except tenure.LeaseLost as lost:
                console.print(f"{me} [bold red]lost its lease:[/] {lost}")
            time.sleep(rng.uniform(0.0, 0.1))  # look at the next batch before asking again
    return 130 if stop.is_set() else 0


# -- the parent ---------------------------------------------------------------------------------


def _spawn(number: int, run_dir: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--worker", str(number), "--dir", str(run_dir)]
    return subprocess.Popen(command, stdin=subprocess.PIPE)


def _wait_ready(workers: list[subprocess.Popen[bytes]], run_dir: Path) -> bool:
    """Wait (with a deadline) until every worker has connected, or one of them has died."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if any(worker.poll() is not None for worker in workers):
            return False
        if len(list(run_dir.glob("worker-*.ready"))) == len(workers):
            return True
        time.sleep(0.02)
    return False


def _stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    """Close their stdin, SIGTERM whoever is still running, SIGKILL after STOP_TIMEOUT."""
    for worker in workers:
        if worker.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                worker.stdin.close()
        if worker.poll() is None:
            worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def _summary_table(turns: Sequence[Turn], workers: int) -> Table:
    table = Table(title=f"who held {LOCK_NAME}")
    for column in ("worker", "pid", "turns", "held (s)", "last token"):
        table.add_column(column, justify="left" if column == "worker" else "right")
    for number in range(1, workers + 1):
        mine = [turn for turn in turns if turn.worker == number]
        color = COLORS[(number - 1) % len(COLORS)]
        table.add_row(
            f"[bold {color}]worker {number}[/]",
            str(mine[0].pid) if mine else "-",
            str(len(mine)),
            f"{sum(turn.end - turn.start for turn in mine):.2f}",
            str(max(turn.token for turn in mine)) if mine else "-",
        )
    return table


def run_demo(seconds: float, workers: int, run_dir: Path) -> int:
    """Start `workers` processes, let them take turns for `seconds`, check; the exit code.

    Example::

        run_demo(3, 3, Path(tempfile.mkdtemp()))  # 0 when both checks pass
    """
    url = f"sqlite:///{run_dir / 'locks.db'}"
    console.print(f"[bold]{workers} processes take turns on [cyan]{LOCK_NAME}[/] for "
                  f"{seconds:g} s[/]  store {url}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs = [_spawn(number, run_dir) for number in range(1, workers + 1)]
        if not _wait_ready(procs, run_dir):
            console.print("[bold red]✗ FAILED:[/] the workers did not start")
            return 1
        started = time.monotonic()
        go = f"{started + seconds!r}\n".encode()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(go)
            proc.stdin.flush()
        codes = [proc.wait(timeout=seconds + STARTUP_TIMEOUT) for proc in procs]
        elapsed = time.monotonic() - started
    except (KeyboardInterrupt, subprocess.TimeoutExpired) as stopped:
        _stop_workers(procs)
        interrupted = isinstance(stopped, KeyboardInterrupt)
        console.print("[bold yellow]interrupted:[/] every worker stopped" if interrupted
                      else "[bold red]✗ FAILED:[/] the workers did not finish in time")
        return 130 if interrupted else 1
    finally:
        _stop_workers(procs)  # a no-op when they all exited; never leaves orphans

    turns = read_history(sorted(run_dir.glob("worker-*.jsonl")))
    verdict = check(turns)
    console.print()
    console.print(_summary_table(turns, workers))
    console.print(f"{len(turns)} turns by {workers} workers in {elapsed:.1f} s")
    for line in verdict_lines(verdict, turns):
        console.print(line)
    failed = [number for number, code in enumerate(codes, 1) if code != 0]
    for number in failed:
        console.print(f"[bold red]✗ FAILED:[/] worker {number} exited with code "
                      f"{codes[number - 1]}")
    if not turns:
        console.print("[bold red]✗ FAILED:[/] nobody got the lock")
    return 0 if verdict.ok and not failed and turns else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and run the demo (or, with `--worker N`, one worker).

    Example::

        main(["--seconds", "3", "--workers", "3"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long (default 10)")
    parser.add_argument("--workers", type=int, default=5, help="how many processes (default 5)")
    parser.add_argument("--dir", type=Path, help="keep the store and histories here")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        return run_worker(args.worker, args.dir)
    if args.seconds <= 0 or not 1 <= args.workers <= 64:
        parser.error("--seconds must be positive and --workers 1 to 64")
    # SIGTERM stops the run like Ctrl-C does: workers stopped, none orphaned. (SIGINT too, even
    # where a shell started us with it ignored, as it does for background jobs.)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        stale_files = ("worker-*.jsonl", "worker-*.ready", "locks.db", "locks.db-*")
        for stale in [path for pattern in stale_files for path in args.dir.glob(pattern)]:
            stale.unlink()
        return run_demo(args.seconds, args.workers, args.dir.resolve())
    with tempfile.TemporaryDirectory(prefix="tenure-demo-") as run_dir:
        return run_demo(args.seconds, args.workers, Path(run_dir))


if __name__ == "__main__":
    sys.exit(main())
