"""The interleaved-rounds framework: a Case is one row of a table, `measure` times them all.

Every case is warmed up and then measured in interleaved rounds (round 1 of every case, then
round 2, ...), in the listed order on even rounds and reversed on odd ones (ABBA), so a noisy
neighbour on this shared VM slows compared cases alike and the per-round ratios stay fair.

Example::

    floor = Case("file://", "floor", "floor: bare flock pair", timed_loop(flock_cycle))
    row = Case("file://", "tenure", "tenure: `with lock.acquire(): pass`", run, floor=floor)
    rounds = measure([row, floor], repeats=11, seconds=0.3, budget=120.0)
"""

from __future__ import annotations

import asyncio
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from timing import Runner, timed_loop

import tenure
import tenure.aio

MIN_ROUNDS = 5  # rounds run even when the time budget is exceeded
MIN_CYCLES = 20  # per round and case
LOCK_NAME = "bench"
_STARTED = time.perf_counter()
ASYNC_WARMUP_CYCLES = 50  # per asyncio.run: starts the worker thread, opens the connection


@dataclass(eq=False)  # a case is equal only to itself
class Case:
    """One benchmark row: how to run n cycles, and what to compare the result with.

    `floor` is the reference of the "floor ÷ this" column (and of a floor goal, `goal_limit`),
    `also` more floors shown next to it, `peers` the rows of the "this ÷ peer" column (and of a
    peer goal, `peer_goal`: this ÷ every peer at least that). `short` names a floor or peer
    where the table refers to it.

    Example::

        Case("file://", "floor", "floor: bare flock pair", timed_loop(cycle), short="flock")
    """

    section: str
    kind: str  # "tenure", "floor" or "peer"
    label: str
    run: Runner
    floor: Case | None = None
    also: list[Case] = field(default_factory=list)
    peers: list[Case] = field(default_factory=list)
    short: str = ""
    goal: str = ""  # the floor goal's wording in the goals table...
    goal_limit: float | None = None  # ...and the largest floor ÷ this that meets it
    peer_goal: str = ""  # the peer goal's wording...
    peer_limit: float | None = None  # ...and the smallest this ÷ peer (every peer) that meets it
    baseline: Case | None = None  # the retain goal's reference (see kept_names_case)...
    baseline_goal: str = ""  # ...its wording...
    baseline_limit: float | None = None  # ...and the smallest this ÷ baseline that meets it
    scale: float = 1.0  # a round of this case lasts scale x --seconds
    fragile: bool = False  # an error drops its section from the report instead of the run
    cycles: list[int] = field(default_factory=list)  # per round
    seconds: list[float] = field(default_factory=list)  # per round

    @property
    def rates(self) -> list[float]:
        """Cycles per second of each round."""
        return [cycles / seconds for cycles, seconds in zip(self.cycles, self.seconds, strict=True)]

    @property
    def median(self) -> float:
        """Median cycles per second over the rounds."""
        return statistics.median(self.rates)

    @property
    def name(self) -> str:
        """How tables refer to this case: its short name, else its label without the kind."""
        return self.short or self.label.split(": ", 1)[-1]


@dataclass
class GoalRow:
    """One row of the goals table; `met` None means not measured (`why` says why).

    Example::

        GoalRow("p50 < 3 round trips", "redis:// tenure", "0.39 ms", "3.2", "", False)
    """

    goal: str
    where: str
    numbers: str
    value: str
    spread: str
    met: bool | None
    why: str = ""


@dataclass
class Extras:
    """What the report says besides the timed rows: facts, notes and tables per section, and
    goal rows measured outside the rounds (hand-off, renewal) or not measured at all.

    Example::

        extras = Extras(); extras.notes["azblob:// (Azurite)"] = ["Not measured: node is missing."]
    """

    facts: list[tuple[str, str]] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)  # markdown blocks by section
    goals: list[GoalRow] = field(default_factory=list)

    def note(self, section: str, text: str) -> None:
        """Add a markdown block below `section`'s table."""
        self.notes.setdefault(section, []).append(text)

    def unmeasured(self, goal: str, where: str, why: str) -> None:
        """List `goal` as not measured, with the reason."""
        self.goals.append(GoalRow(goal, where, "", "", "", None, why))


# -- the rows every store has -------------------------------------------------------------------


def tenure_cases(section: str, lock: tenure.Lock, suffix: str = "") -> list[Case]:
    """The two sync tenure rows of one store: try_acquire/release and `with acquire()`.

    Example::

        cases = tenure_cases("memory://", tenure.connect("memory://").lock("x"))
    """

    def try_release() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    def with_acquire() -> None:
        with lock.acquire():
            pass

    return [
        Case(section, "tenure", f"tenure: `lock.try_acquire().release()`{suffix}",
             timed_loop(try_release)),
        Case(section, "tenure", f"tenure: `with lock.acquire(): pass`{suffix}",
             timed_loop(with_acquire)),
    ]


def multi_lock_cases(section: str, store: tenure.Store, ttl: float = 30.0) -> list[Case]:
    """issue 22's multi-lock rows: `store.lock_all` of 2 and of 10 names, taken and released,
    each next to the same names taken one by one in the same order (n `try_acquire()`, then
    the n releases), its floor: what the set costs beyond its locks.

    Example::

        rows = multi_lock_cases("memory://", tenure.connect("memory://"))
    """
    rows: list[Case] = []
    for count in (2, 10):
        names = [f"{LOCK_NAME}-set-{index}" for index in range(count)]
        locks = [store.lock(name, ttl=ttl) for name in names]

        def one_by_one(locks: list[tenure.Lock] = locks) -> None:
            leases = [lock.try_acquire() for lock in locks]
            for lease in reversed(leases):
                lease.release()  # type: ignore[union-attr]  # None would raise: good

        def all_at_once(names: list[str] = names) -> None:
            store.lock_all(names, ttl=ttl, timeout=0).release()

        floor = Case(section, "floor", f"{count} locks taken one by one (`try_acquire()` each, "
                     "then each `release()`)", timed_loop(one_by_one),
                     short=f"{count} one by one")
        rows += [Case(section, "tenure", f"tenure: `store.lock_all({count} names, timeout=0)` "
                      "+ `release()`", timed_loop(all_at_once), floor=floor), floor]
    return rows


RETAIN_GOAL_LIMIT = 0.95  # the default retain's cycle ÷ retain=inf's: "within noise"


def kept_names_case(section: str, default: Case, url: str, stack: ExitStack,
                    ttl: float = 30.0, **options: Any) -> Case:
    """The cost of forgetting names: `lock.try_acquire().release()` on a second store of the
    same URL (keyword `options` to connect; the lock's `ttl`) with `retain=inf`, which keeps
    every name as the stores did before `retain`; it becomes `default`'s baseline (the
    default retain's cycle ÷ this, per round, at least RETAIN_GOAL_LIMIT) and takes its
    floor.

    Example::

        kept = kept_names_case("redis://", try_row, url, stack)
    """
    store = tenure.connect(url, retain=math.inf, **options)
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME + "-kept", ttl=ttl)

    def try_release() -> None:
        lock.try_acquire().release()  # type: ignore[union-attr]  # None would raise: good

    kept = Case(section, "tenure", "tenure: `lock.try_acquire().release()`, `retain=inf` (no "
                "name forgotten: the cycle before `retain`)", timed_loop(try_release),
                floor=default.floor, short="retain=inf")
    default.baseline, default.baseline_limit = kept, RETAIN_GOAL_LIMIT
    default.baseline_goal = (f"{section}: the default retain's cycle ÷ `retain=inf`'s >= "
                             f"{RETAIN_GOAL_LIMIT:g} (forgetting names costs the cycle no "
                             "more than noise)")
    return kept


def async_case(section: str, url: str, options: dict[str, Any] | None = None,
               name: str = LOCK_NAME, warmup: int = ASYNC_WARMUP_CYCLES,
               suffix: str = "") -> Case:
    """The async row of a store: `async with lock.acquire(): pass`, one asyncio.run per round.

    The store is connected (with keyword `options`) and warmed up (`warmup` cycles) inside each
    asyncio.run; only the cycles are timed.

    Example::

        case = async_case("file://", "file:///tmp/locks")
    """

    async def cycles(count: int) -> float:
        async with tenure.aio.connect(url, **(options or {})) as store:
            lock = store.lock(name)
            for _ in range(warmup):
                async with lock.acquire():
                    pass
            start = time.perf_counter()
            for _ in range(count):
                async with lock.acquire():
                    pass
            return time.perf_counter() - start

    def run(count: int) -> float:
        return asyncio.run(cycles(count))

    return Case(section, "tenure", f"tenure async: `async with lock.acquire(): pass`{suffix}",
                run)


def optional_case(section: str, kind: str, label: str, make: Callable[[], Callable[[], object]],
                  extras: Extras, short: str = "") -> Case | None:
    """A case whose one-cycle function `make()` builds, after one untimed cycle; None (and a
    note on the section) when building or that cycle fails, e.g. a peer that is not installed.

    Example::

        case = optional_case("redis://", "peer", "peer: pottery", make_pottery, extras)
    """
    try:
        cycle = make()
        cycle()  # fails here, not in the middle of the measurement
    except Exception as exc:
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        extras.note(section, f"**Not measured**: {label} ({reason}).")
        progress(f"{section}: skipping {label}: {reason}")
        return None
    return Case(section, kind, label, timed_loop(cycle), short=short)


# -- ratios -----------------------------------------------------------------------------------


def per_round(numerator: Case, denominator: Case) -> list[float]:
    """The cycles/s ratio of two cases in each round (they ran seconds apart in a round).

    Pairing by round cancels most of the noise both cases saw together.

    Example::

        per_round(case.floor, case)  # [1.31, 1.28, ...]
    """
    return [ours / theirs
            for ours, theirs in zip(numerator.rates, denominator.rates, strict=False)]


def median_ratio(numerator: Case, denominator: Case) -> float:
    """Median over rounds of numerator cycles/s ÷ denominator's.

    Example::

        median_ratio(case.floor, case)  # 1.31: the floor does 1.31x the cycles
    """
    return statistics.median(per_round(numerator, denominator))


# -- measuring ----------------------------------------------------------------------------------


def warm_up(case: Case, seconds: float, first: int = 10) -> float:
    """Run doubling batches of `case` until one takes a tenth of `seconds`; its cycles/s.

    Example::

        rate = warm_up(case, 0.3)
    """
    cycles = first
    while True:
        elapsed = case.run(cycles)
        if elapsed >= seconds / 10 or cycles >= 10_000_000:
            return cycles / elapsed
        cycles *= 2


def cycles_for(rate: float, seconds: float, least: int = MIN_CYCLES) -> int:
    """How many cycles take about `seconds` at `rate` cycles/s (at least `least`).

    Example:
        >>> cycles_for(1000.0, 0.3)
        300
    """
    return max(least, math.ceil(rate * seconds))


def measure(cases: list[Case], repeats: int, seconds: float, budget: float,
            extras: Extras | None = None, least: int = MIN_CYCLES) -> int:
    """Warm every case up, then run up to `repeats` interleaved rounds; the rounds run.

    Each round runs every case once, for about `seconds` x its `scale` (its cycle count follows
    the case's rate in the previous round, so a machine that slows down does not stretch the
    run; at least `least` cycles). Rounds alternate between the listed order and its reverse
    (ABBA). After MIN_ROUNDS, no round starts that would end past `budget` seconds. A full
    collection runs before each timed batch; gc stays enabled while timing.

    When a fragile case fails (its server died, say), every case of its section is removed
    from `cases`, and the error goes into `extras` (a note on the section, its goals as not
    measured); the others go on.

    Example::

        rounds = measure(cases, repeats=11, seconds=0.3, budget=100.0)
    """
    extras = extras or Extras()
    start = time.perf_counter()
    rates: dict[int, float] = {}
    for case in list(cases):
        if case in cases:
            _guarded(cases, case, extras, lambda case=case: rates.update(
                {id(case): warm_up(case, seconds * case.scale, min(10, least))}))
    for round_number in range(repeats):
        round_start = time.perf_counter()
        progress(f"round {round_number + 1}/{repeats}")
        for case in list(cases if round_number % 2 == 0 else reversed(cases)):
            if case not in cases:
                continue  # its section failed earlier in this round
            cycles = cycles_for(rates[id(case)], seconds * case.scale, least)
            gc.collect()
            elapsed = _guarded(cases, case, extras, lambda case=case, n=cycles: case.run(n))
            if elapsed is None:
                continue
            case.cycles.append(cycles)
            case.seconds.append(elapsed)
            rates[id(case)] = cycles / elapsed
        now = time.perf_counter()
        done = round_number + 1
        if done >= MIN_ROUNDS and done < repeats and now + (now - round_start) > start + budget:
            progress(f"stopping after {done} rounds: the {budget:g} s budget would be exceeded")
            return done
    return repeats


def _guarded(cases: list[Case], case: Case, extras: Extras, step: Callable[[], Any]) -> Any:
    """`step()`; for a fragile case, an error drops its section and returns None instead."""
    if not case.fragile:
        return step()
    try:
        return step()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        why = f"the row \"{case.label}\" failed during the run ({reason})"
        extras.note(case.section, f"**Not measured**: {why}; the section's rows were dropped.")
        dropped = [other for other in cases if other.section == case.section]
        for other in dropped:
            if other.goal_limit is not None:
                extras.unmeasured(other.goal, where(other), why)
        progress(f"{case.section} dropped: {reason}")
        cases[:] = [other for other in cases if other.section != case.section]
        return None


def where(case: Case) -> str:
    """The goals table's "case" cell: section and label without "tenure: "."""
    return f"{case.section} {case.label.removeprefix('tenure: ')}"


def progress(message: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    print(f"bench: [{time.perf_counter() - _STARTED:4.0f} s] {message}", file=sys.stderr,
          flush=True)


@dataclass
class ServerSection:
    """What a store's bench module hands to run.py, and what run.py measured with it.

    Besides the uncontended `cases` (server stores; the embedded stores' are listed apart): the
    hand-off `contenders` (one round trip lasts `rtt` seconds, measured as `rtt_label` says;
    nan where the store has no round trip), the renewal `counter` (and the `tenure.connect`
    options of each size's store; None: no renewal table), the takeover `takers` and memory
    `footprints`, and hooks run around the rounds (`before`) or after them (`after`: markdown
    for below the table).

    Example::

        section = redis_bench.section(server, stack, extras)
    """

    title: str
    url: str
    cases: list[Case]
    contenders: list[Any] = field(default_factory=list)  # handoff.Contender
    rtt: float = float("nan")
    rtt_label: str = ""
    counter: Any = None  # renewal.Counter
    renewal_options: Callable[[int], dict[str, Any]] | None = None
    renewal_note: str = ""
    before: list[Callable[[], None]] = field(default_factory=list)
    after: list[Callable[[], str]] = field(default_factory=list)
    handoffs: list[Any] = field(default_factory=list)  # handoff.HandOff, filled by run.py
    handoff_errors: list[tuple[str, str]] = field(default_factory=list)  # label, why
    renewals: list[Any] = field(default_factory=list)  # renewal.Renewal, filled by run.py
    renewal_error: str = ""
    takers: list[Any] = field(default_factory=list)  # takeover.Taker
    footprints: list[Any] = field(default_factory=list)  # footprint.Footprint
    takeovers: list[Any] = field(default_factory=list)  # takeover.Takeover, filled by run.py
    takeover_errors: list[tuple[str, str, str]] = field(default_factory=list)  # label, mode, why
    memories: list[Any] = field(default_factory=list)  # footprint.Memory, filled by run.py
    memory_errors: list[tuple[str, str, bool]] = field(default_factory=list)  # label, why, and
    # whether the library could not run at all (False: it ran but cannot hold that many locks)
