"""Measure tenure on every store next to its raw floor and its peers, and write BENCHMARKS.md.

One process, one run: the servers (redis-server, PostgreSQL, MariaDB, Azurite) start first, with
the test suite's own launcher; then every store's uncontended rows, embedded and server alike,
are measured in interleaved rounds (bench/cases.py); then, per server store, the contended
hand-off with 8 processes per library next to the floors of a fair hand-off (bench/handoff.py) and
the renewal round trips with 1, 100 and 1,000 held leases (bench/renewal.py); then, per store,
the time to take over after a SIGKILL and after a clean release (bench/takeover.py) and the peak
memory per 1,000 held leases (bench/footprint.py), tenure next to the peers; then many waiters
on one name (processes x async tasks) on Redis, PostgreSQL and MariaDB side by side
(bench/many_waiters.py); last, per server store, how soon a worker's jobs run again after
restarts of a server of its own (bench/outage_recovery.py); bench/report.py writes the markdown.

Usage::

    python bench/run.py --output BENCHMARKS.md     # what `make bench` runs (about 20-25 minutes)
    python bench/run.py --quick                    # a smoke run of everything, nothing written
    python bench/run.py --stores redis,postgres    # some stores only
    python bench/run.py --quick --only contended --stores sqlite,file   # some parts only
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import advisory_capacity
import azblob_cases
import filelock
import listing
import local_cases
import many_waiters
import mysql_cases
import outage_recovery
import postgres_cases
import redis_cases
import servers
import state
from cases import (
    ASYNC_WARMUP_CYCLES,
    MIN_CYCLES,
    RETAIN_GOAL_LIMIT,
    Case,
    Extras,
    GoalRow,
    ServerSection,
    measure,
    progress,
)
from footprint import run_footprint
from handoff import HOLD_SECONDS, fair_floors, run_contender
from libraries import AZURE_POLL_SECONDS
from lineup import MEMORY_HOLD, MEMORY_TTL, TAKEOVER_TTL
from renewal import TICKS, renewal_costs
from report import (
    ASYNC_VS_SYNC_GOAL,
    FAIRNESS_GOAL,
    HANDOFF_GOAL_ROUND_TRIPS,
    VERSUS_BLOCKING_FLOOR,
    WAITER_P99_GOAL,
    Header,
    render,
)
from takeover import KILL_AFTER, SETTLE, run_taker

import tenure

LOCAL = ("memory", "file", "sqlite")
SERVER_STORES: dict[str, tuple[ModuleType, str]] = {  # store -> its bench module, its starter
    "redis": (redis_cases, "start_redis"),
    "postgres": (postgres_cases, "start_postgres"),
    "mysql": (mysql_cases, "start_mariadb"),
}
STORES = (*LOCAL, "azblob", *SERVER_STORES)
RENEWAL_TTL = 1.5
STATE_NAMES = 100_000  # fresh names per store in the state part
STATE_KEPT_NAMES = 10_000  # names of the per-name cost with the default retain
STATE_RETAIN = 2.0  # seconds: the state part's retain
LISTING_DEAD = 1_000_000  # dead names of the listing measure
PROCESSES_DEFAULT = 8
PEERS = {  # URL scheme -> the peer libraries every multi-process benchmark must list there
    "file": {"filelock", "portalocker-file", "tooz"},
    "azblob": {"azure-sdk"},
    "redis": {"redis-py", "python-redis-lock", "pottery", "portalocker-redis", "tooz"},
    "postgresql": {"tooz"},
    "mysql": {"tooz"},
}
CONTENDED_PEERS = {  # URL scheme -> peers the contended hand-off lists too (on a directory)
    "sqlite": {"filelock", "portalocker-file", "tooz"},
}
PARTS = {  # --only: the parts of a run, in the order they run
    "rounds": "the uncontended rows (interleaved rounds) and their goals",
    "contended": f"the contended hand-off ({PROCESSES_DEFAULT} processes, hold "
                 f"{HOLD_SECONDS * 1e3:g} ms)",
    "renewal": "renewal round trips per tick",
    "takeover": "takeover after a SIGKILL and after a clean release",
    "memory": "memory per 1,000 held leases",
    "crowd": "many waiters on one name",
    "advisory": "PostgreSQL advisory mode: leases per connection",
    "state": "what stores keep of names nobody holds, and how soon they forget it",
    "outage": "job recovery after server restarts",
}
QUICK = {"repeats": 3, "seconds": 0.03, "budget": 15.0, "handoff_seconds": 0.3, "processes": 4,
         "takeover_repeats": 2, "memory_repeats": 1, "memory_leases": 100, "outage_restarts": 2,
         "crowd_seconds": 0.5, "state_names": 2_000}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options.

    Example::

        parse_args(["--output", "BENCHMARKS.md", "--stores", "redis,file"])
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated stores to measure (default: all of "
                             f"{','.join(STORES)})")
    parser.add_argument("--only", default=",".join(PARTS),
                        help="comma-separated parts to run (default: all): " + "; ".join(
                            f"{name}: {what}" for name, what in PARTS.items())
                        + ". E.g. `--quick --only contended --stores sqlite,file`")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: few short rounds, short hand-offs with 4 processes")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when anything could not be measured (a smoke check)")
    parser.add_argument("--repeats", type=int, default=11, help="rounds per case (default 11)")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="approximate length of one round of one case (default 0.3)")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds of uncontended measuring after which no new round "
                             "starts, once 5 rounds ran (default 300)")
    parser.add_argument("--handoff-seconds", type=float, default=3.0,
                        help="length of each library's contended run (default 3)")
    parser.add_argument("--processes", type=int, default=PROCESSES_DEFAULT,
                        help="contending processes per library (default 8)")
    parser.add_argument("--takeover-repeats", type=int, default=5,
                        help="repetitions of each takeover measure (default 5)")
    parser.add_argument("--memory-repeats", type=int, default=3,
                        help="fresh processes per memory measure (default 3)")
    parser.add_argument("--memory-leases", type=int, default=0,
                        help="leases each memory process holds (default: 1,000; azblob 200)")
    parser.add_argument("--crowd-seconds", type=float, default=many_waiters.SECONDS,
                        help="length of each store's many-waiters run (default "
                             f"{many_waiters.SECONDS:g})")
    parser.add_argument("--outage-restarts", type=int, default=outage_recovery.RESTARTS,
                        help="restarts of each server store under a running worker (default "
                             f"{outage_recovery.RESTARTS})")
    parser.add_argument("--state-names", type=int, default=STATE_NAMES,
                        help="fresh names per store in the state part (default "
                             f"{STATE_NAMES:,}; azblob a fiftieth)")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    args.stores = _chosen(parser, "--stores", args.stores, STORES)
    args.only = _chosen(parser, "--only", args.only, PARTS)
    if args.repeats < 1 or args.seconds <= 0 or args.budget <= 0 or args.processes < 2 \
            or args.handoff_seconds <= 0 or args.takeover_repeats < 1 or args.crowd_seconds <= 0 \
            or args.memory_repeats < 1 or args.memory_leases < 0 or args.outage_restarts < 1:
        parser.error("--repeats, --takeover-repeats, --memory-repeats and --outage-restarts "
                     "must be at least 1, "
                     "--processes at least 2, --seconds, --budget, --handoff-seconds and "
                     "--crowd-seconds positive, --memory-leases not negative")
    return args


def start_servers(names: list[str], directory: Path,
                  stack: ExitStack) -> dict[str, servers.Server | str]:
    """Start the servers of `names` ("azblob" = Azurite) at once; each a Server or why not.

    Example::

        started = start_servers(["redis", "postgres"], Path(tmp), stack)
    """
    starters = {"azblob": "start_azurite",
                **{name: starter for name, (_, starter) in SERVER_STORES.items()}}
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        futures = {name: pool.submit(getattr(servers, starters[name]), directory / name, stack)
                   for name in names}
    return {name: future.result() for name, future in futures.items()}


def server_sections(started: dict[str, servers.Server | str], stack: ExitStack,
                    extras: Extras) -> list[ServerSection]:
    """The sections of the server stores that started; a note for each that did not.

    Example::

        sections = server_sections(start_servers(["redis"], Path(tmp), stack), stack, extras)
    """
    sections = []
    for name, (module, _) in SERVER_STORES.items():
        if name not in started:
            continue
        server, why = started[name], ""
        if isinstance(server, servers.Server):
            extras.facts += server.facts
            try:
                sections.append(module.section(server, stack, extras))
                continue
            except Exception as exc:
                why = f"setting up failed ({_reason(exc)})"
        else:
            why = server
        extras.note(module.TITLE, f"**Not measured**: {why}.")
        extras.unmeasured(f"{module.TITLE}: every goal", module.TITLE, why)
    return sections


def contend_and_renew(section: ServerSection, args: argparse.Namespace,
                      directory: Path) -> None:
    """The section's hand-off runs and renewal counts, into the section (errors as reasons).

    Example::

        contend_and_renew(section, parse_args([]), Path(tmp))
    """
    for contender in section.contenders if "contended" in args.only else []:
        progress(f"{section.title}: hand-off, {contender.label}")
        try:
            section.handoffs.append(run_contender(contender, args.processes,
                                                  args.handoff_seconds, directory))
        except Exception as exc:
            section.handoff_errors.append((contender.label, _reason(exc)))
    if section.counter is not None and "renewal" in args.only:
        progress(f"{section.title}: renewal")
        try:
            section.renewals = renewal_costs(section.url, section.counter, ttl=RENEWAL_TTL,
                                             options=section.renewal_options)
        except Exception as exc:
            section.renewal_error = _reason(exc)


def take_over_and_hold(section: ServerSection, args: argparse.Namespace) -> None:
    """The section's takeover runs (each mode of each taker) and memory runs, into the
    section (errors as reasons; a library that ran but cannot hold that many locks apart).

    Example::

        take_over_and_hold(section, parse_args(["--quick"]))
    """
    for taker in section.takers if "takeover" in args.only else []:
        for mode in taker.modes:
            progress(f"{section.title}: takeover after {mode}, {taker.label}")
            try:
                section.takeovers.append(run_taker(taker, mode, args.takeover_repeats))
            except Exception as exc:
                section.takeover_errors.append((taker.label, mode, _reason(exc)))
    for spec in section.footprints if "memory" in args.only else []:
        progress(f"{section.title}: memory, {spec.label}")
        leases = min(spec.leases, args.memory_leases) if args.memory_leases else None
        try:
            section.memories.append(run_footprint(spec, args.memory_repeats, leases))
        except Exception as exc:
            why = " ".join(str(exc).split())[:400]
            cannot = why.startswith("could not hold") and spec.library != "tenure"
            section.memory_errors.append((spec.label, why, not cannot))


STATE_TITLE = "State: what a store keeps of names nobody holds"


# The Redis database of each space of the state part (state_urls).
REDIS_DATABASES = {"state": "/14", "kept": "/13", "listing": "/15"}


def state_urls(directory: Path, started: dict[str, servers.Server | str],
               stores: Collection[str],
               space: str = "state") -> list[tuple[str, str, dict[str, object], int]]:
    """(label, url, connect keywords, share of --state-names) of every store the state part
    measures: a database, directory, schema, table, prefix or container of its own, named
    after `space`.

    Example::

        state_urls(Path(tmp), {}, {"sqlite"})[0][1]   # 'sqlite:///.../state/locks.db'
    """
    (directory / space).mkdir(parents=True, exist_ok=True)
    found: list[tuple[str, str, dict[str, object], int]] = []
    if "sqlite" in stores:
        found.append(("sqlite://", f"sqlite:///{directory / space / 'locks.db'}", {}, 1))
    if "file" in stores:
        found.append(("file://", f"file://{directory / space / 'files'}", {}, 1))
    for name, label, option in (("redis", "redis://", f"prefix={space}:"),
                                ("postgres", "postgresql://", f"schema=tenure_{space}"),
                                ("mysql", "mysql://", f"table=tenure_{space}")):
        server = started.get(name)
        if name in stores and isinstance(server, servers.Server):
            url = server.url
            if name == "redis":  # a database of its own: DBSIZE counts only this part's keys
                url = url.rsplit("/", 1)[0] + REDIS_DATABASES[space]
            found.append((label, f"{url}?{option}", {}, 1))
    azurite = started.get("azblob")
    if "azblob" in stores and isinstance(azurite, servers.Server):
        secret = azurite.details["connection_string"]
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = secret  # for the footprint reader
        # Three requests per cycle on Azurite: a fiftieth of the names keeps the run short.
        found.append(("azblob:// (Azurite)", f"azblob:///tenure-{space}",
                      {"connection_string": secret}, 50))
    return found


def state_runs(directory: Path, started: dict[str, servers.Server | str],
               args: argparse.Namespace) -> list[state.Retention]:
    """The state part: per store, the per-name cost with the default retain (then pruned), and
    a run of fresh names with a short retain until the store has forgotten them.

    Example::

        runs = state_runs(Path(tmp), started, parse_args(["--quick", "--only", "state"]))
    """
    runs = []
    # The kept names go to a space of their own: in the retention run's table, the space its
    # forgotten rows left (PostgreSQL's dead tuples, InnoDB's free pages) took them for nothing.
    for (label, url, connect, share), (_, kept_url, _, _) in zip(
            state_urls(directory, started, args.stores),
            state_urls(directory, started, args.stores, "kept"), strict=True):
        names = max(args.state_names // share, 100)
        progress(f"{STATE_TITLE}: {label}, {names:,} names, retain {STATE_RETAIN:g} s")
        try:
            run = state.measure_retention(url, names, STATE_RETAIN, label, **connect)
            kept = state.measure_state(kept_url, max(
                min(STATE_KEPT_NAMES, args.state_names) // share, 100), **connect)
            with tenure.connect(kept_url, **connect) as store:  # type: ignore[arg-type]
                store.prune(0)
            runs.append(dataclasses.replace(run, kept=kept))
        except Exception as exc:  # a store that cannot prune yet, a server gone: said so
            empty = state.Footprint(0, 0, "")
            runs.append(state.Retention(label, names, STATE_RETAIN, empty, empty, empty, None,
                                        0.0, error=_reason(exc)))
    return runs


def listing_runs(directory: Path, started: dict[str, servers.Server | str],
                 args: argparse.Namespace) -> list[listing.Listing]:
    """`store.leases()` and `tenure locks` with a million dead names and 10 live leases, on
    SQLite and the server stores, PostgreSQL and MySQL in both modes (a store of their own each;
    --quick: 20,000 dead names).

    Example::

        listings = listing_runs(Path(tmp), started, parse_args(["--quick", "--only", "state"]))
    """
    dead = LISTING_DEAD // 50 if args.quick else LISTING_DEAD
    found = []
    spaces = state_urls(directory, started, args.stores, "listing")
    # The session-lock modes list tables of their own (and ask the server which locks are
    # held): measured too.
    modes = {"postgresql://": "advisory", "mysql://": "getlock"}
    spaces += [(f"{label} `?mode={modes[label]}`", f"{url}_{modes[label]}&mode={modes[label]}",
                connect, share) for label, url, connect, share in spaces if label in modes]
    for label, url, connect, _ in spaces:
        if urlsplit(url).scheme not in listing.FILLERS:
            continue
        progress(f"{STATE_TITLE}: listing {label} with {dead:,} dead names")
        try:
            found.append(listing.measure_listing(url, dead, label=label, **connect))
        except Exception as exc:  # a server gone, a layout the filler does not know: said so
            found.append(listing.Listing(label, dead, 10, 0, 0.0, 0.0, _reason(exc)))
    return found


def listing_goal(result: listing.Listing) -> GoalRow:
    """The goal row of one store's listing run: `tenure locks` answers in under 1 s."""
    goal = (f"listing: `tenure locks` with {result.dead:,} dead names and {result.live} live "
            "leases answers in < 1 s")
    if result.error:
        return GoalRow(goal, result.label, "", "", "", None, result.error)
    return GoalRow(goal, result.label, f"store.leases() {result.api_seconds * 1e3:,.0f} ms",
                   f"{result.cli_seconds:.2f} s", "", result.cli_seconds < 1.0)


def state_goal(run: state.Retention) -> GoalRow:
    """The goal row of one store's state run: back within 1% of its footprint before."""
    goal = ("state: after fresh names and retain passing, the footprint is back within 1% "
            "of before")
    if run.error:
        return GoalRow(goal, run.label, "", "", "", None, run.error)
    return GoalRow(goal, run.label, f"{run.before.items:,} -> {run.end.items:,} -> "
                   f"{run.after.items:,} {run.before.unit}",
                   f"{(run.after.items - run.before.items) / max(run.before.items, 1):+.1%}",
                   "", run.back_within(0.01))


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def machine_facts(directory: Path) -> list[tuple[str, str]]:
    """Facts that explain the numbers: CPUs, load, versions, kernel, temp file system.

    Example::

        for name, value in machine_facts(Path(tempfile.gettempdir())):
            print(name, value)
    """
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        ("CPUs (nproc)", str(usable)),
        ("load average at start (1, 5, 15 min)", load_average()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("SQLite", sqlite3.sqlite_version),
        ("kernel / platform", platform.platform()),
        ("temp directory file system", _file_system(directory)),
        ("tenure", tenure.__version__),
        ("filelock", filelock.__version__),
    ]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: how busy the shared machine was.

    Example::

        load_average()  # '0.52, 0.40, 0.31'
    """
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def _file_system(path: Path) -> str:
    """The type and mount point of the file system holding `path`, from /proc/mounts."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best = ("", "unknown")
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3:
            mount_point, kind = fields[1], fields[2]
            inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best[0]):
                best = (mount_point, kind)
    return f"{best[1]} (mounted at {best[0] or '?'})"


def command(argv: list[str]) -> str:
    """How the report says it was made.

    Example:
        >>> command(["--output", "BENCHMARKS.md"])
        '`make bench` (runs `.venv/bin/python bench/run.py --output BENCHMARKS.md`)'
    """
    line = " ".join([".venv/bin/python bench/run.py", *argv])
    return f"`make bench` (runs `{line}`)" if argv == ["--output", "BENCHMARKS.md"] else f"`{line}`"


def _chosen(parser: argparse.ArgumentParser, option: str, given: str,
            allowed: Collection[str]) -> set[str]:
    """The comma-separated choices of `option`; a usage error when one is unknown or none is
    given."""
    chosen = [item.strip() for item in given.split(",") if item.strip()]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown or not chosen:
        parser.error(f"{option}: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {','.join(allowed)}")
    return set(chosen)


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, print the report, and write it to `--output` if given.

    Example::

        main(["--quick", "--stores", "memory,redis"])
    """
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started_at = datetime.now(timezone.utc)
    clock = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        facts = machine_facts(directory)
        extras = Extras()
        wanted = [name for name in ("azblob", *SERVER_STORES) if name in args.stores]
        progress(f"starting {', '.join(wanted) or 'no servers'}")
        started = start_servers(wanted, directory, stack)
        timed = "rounds" in args.only
        cases: list[Case] = local_cases.cases(directory, stack, args.stores, extras) \
            if timed else []
        if "azblob" in started and timed:
            cases += azblob_cases.cases(started["azblob"], stack, extras)
        sections = local_cases.sections(directory, args.stores)
        azblob = azblob_cases.section(started["azblob"]) if "azblob" in started else None
        sections += [azblob] if azblob is not None else []
        sections += server_sections(started, stack, extras)
        for section in sections:  # the ceiling of a fair (FIFO) hand-off, in the same run
            section.contenders += fair_floors(section.url, args.processes)
        rounds = 0
        if timed:
            for section in sections:
                cases += section.cases
                for hook in section.before:
                    hook()
            progress(f"{len(cases)} cases, {args.repeats} rounds of ~{args.seconds:g} s each")
            rounds = measure(cases, args.repeats, args.seconds, args.budget, extras,
                             3 if args.quick else MIN_CYCLES)
        for section in sections:
            if timed and section.cases and not any(case in cases for case in section.cases):
                continue  # its server failed during the rounds (see the section's note)
            for hook in section.after if timed else []:
                extras.note(section.title, hook())
            contend_and_renew(section, args, directory)
            take_over_and_hold(section, args)
        crowds = many_waiters.measure_all(
            {name: server.url for name, server in started.items()
             if isinstance(server, servers.Server) and name in many_waiters.STORES},
            seconds=args.crowd_seconds, progress=progress) if "crowd" in args.only else []
        if crowds:
            extras.note(many_waiters.TITLE, many_waiters.markdown(crowds))
        postgres = started.get("postgres")
        if isinstance(postgres, servers.Server) and "advisory" in args.only:
            progress("postgres advisory mode: leases per connection")
            extras.note(advisory_capacity.TITLE,
                        advisory_capacity.section(postgres.url, args.quick))
        if "state" in args.only:
            runs = state_runs(directory, started, args)
            extras.note(STATE_TITLE, state.retention_markdown(runs))
            for run in runs:
                extras.goals.append(state_goal(run))
            listings = listing_runs(directory, started, args)
            extras.note(STATE_TITLE, listing.listing_markdown(listings))
            extras.goals += [listing_goal(each) for each in listings]
        # Last: these restart servers of their own, nothing else runs meanwhile.
        recoveries = outage_recovery.measure_all(
            [name for name in outage_recovery.STORES if name in args.stores],
            directory / "outages", args.outage_restarts, progress) \
            if "outage" in args.only else []
        if recoveries:
            extras.note(outage_recovery.TITLE,
                        outage_recovery.markdown(recoveries, args.outage_restarts))
    facts += extras.facts
    facts.append(("load average at end (1, 5, 15 min)", load_average()))
    settings = {
        "warmup": ASYNC_WARMUP_CYCLES, "seconds": args.seconds, "repeats": rounds,
        "min_cycles": MIN_CYCLES, "az_warmup": azblob_cases.ASYNC_WARMUP_CYCLES,
        "lease": azblob_cases.LEASE_SECONDS, "az_scale": azblob_cases.SCALE,
        "azurite": dict(facts).get("Azurite", "").split(" ", 1)[0] or "(not started)",
        "az_goal": azblob_cases.GOAL_VS_FLOOR, "sqlite_goal": local_cases.GOAL_SQLITE_VS_FLOOR,
        "file_goal": local_cases.GOAL_FILE_VS_FILELOCK, "processes": args.processes,
        "hold_ms": HOLD_SECONDS * 1e3, "handoff_seconds": args.handoff_seconds,
        "handoff_goal": HANDOFF_GOAL_ROUND_TRIPS, "renewal_ttl": RENEWAL_TTL, "ticks": TICKS,
        "takeover_ttl": TAKEOVER_TTL, "kill_after": KILL_AFTER,
        "takeover_repeats": args.takeover_repeats, "memory_ttl": MEMORY_TTL,
        "memory_hold": MEMORY_HOLD, "memory_repeats": args.memory_repeats,
        "az_ttl": azblob_cases.MIN_TTL, "az_hold": azblob_cases.MEMORY_HOLD,
        "az_leases": azblob_cases.MEMORY_LEASES, "settle_ms": SETTLE * 1e3,
        "az_poll": AZURE_POLL_SECONDS, "fair_goal": FAIRNESS_GOAL,
        "waiter_goal_ms": WAITER_P99_GOAL * 1e3, "floor_goal": VERSUS_BLOCKING_FLOOR,
        "async_goal": ASYNC_VS_SYNC_GOAL, "retain_goal": RETAIN_GOAL_LIMIT,
    }
    header = Header(started_at, time.perf_counter() - clock, facts, command(argv), settings)
    report = render(cases, sections, extras, header)
    print(report)
    if args.output is not None:
        args.output.write_text(report)
        progress(f"wrote {args.output}")
    missing = (unmeasured(sections, extras, args.only) + many_waiters.unmeasured(crowds)
               + outage_recovery.unmeasured(recoveries))
    for problem in missing:
        progress(f"not measured: {problem}")
    return 1 if args.check and missing else 0


def unmeasured(sections: list[ServerSection], extras: Extras,
               parts: set[str] | None = None) -> list[str]:
    """Everything the run could not measure: goals, hand-offs, renewals, rows left out, and
    peers missing from the `parts` that ran (default: all).

    Example::

        unmeasured([], Extras())  # []
    """
    problems = [f"{row.goal}: {row.why}" for row in extras.goals if row.met is None]
    for section in sections:
        problems += [f"{section.title} hand-off {label}: {why}"
                     for label, why in section.handoff_errors]
        if section.renewal_error:
            problems.append(f"{section.title} renewal: {section.renewal_error}")
        problems += [f"{section.title} takeover after {mode}, {label}: {why}"
                     for label, mode, why in section.takeover_errors]
        problems += [f"{section.title} memory, {label}: {why}"
                     for label, why, missing in section.memory_errors if missing]
    problems += [f"{title}: {text}" for title, texts in extras.notes.items() for text in texts
                 if "**Not measured**" in text]
    return problems + missing_peers(sections, parts)


def missing_peers(sections: list[ServerSection], parts: set[str] | None = None) -> list[str]:
    """Peers of PEERS that a section does not list in its hand-off, takeover or memory runs
    (and of CONTENDED_PEERS in its hand-off), among the `parts` that ran (default: all).

    Example::

        missing_peers([])  # []
    """
    problems = []
    for section in sections:
        scheme = section.url.split(":", 1)[0]
        wanted = PEERS.get(scheme, set())
        for kind, part, listed, more in (
                ("hand-off", "contended", section.contenders, CONTENDED_PEERS.get(scheme, set())),
                ("takeover", "takeover", section.takers, set()),
                ("memory", "memory", section.footprints, set())):
            if parts is not None and part not in parts:
                continue
            for library in sorted((wanted | more) - {entry.library for entry in listed}):
                problems.append(f"{section.title} {kind}: the peer {library} is missing")
    return problems


if __name__ == "__main__":
    sys.exit(main())
