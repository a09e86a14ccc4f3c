"""BENCHMARKS.md from measured cases: one table renderer for every store, the goals, the method.

Example::

    text = render(cases, sections, extras, Header(started, elapsed, facts, rounds, args))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cases import Case, Extras, GoalRow, ServerSection, median_ratio, per_round, where
from handoff import BLOCKING_FLOORS, FAIR_FLOORS, FLOORS, HOLD_SECONDS, HandOff, percentile
from takeover import Takeover

METHOD = Path(__file__).with_name("method.md")
HANDOFF_GOAL_ROUND_TRIPS = 3.0  # hand-off p50 under this many round trips
KILL_GOAL_MARGIN = 1.0  # takeover goal: a SIGKILLed holder's lease is taken within ttl + 1 s
FILE_KILL_GOAL = 1.0  # ...the file store's "at once": within the waiter's longest backoff (1 s)
_KIND_ORDER = ("tenure", "floor", "peer")
# Issue 20's goals for the contended loop and the async embedded stores
FAIRNESS_GOAL = 0.8  # acquisitions per process, least-served ÷ most-served, at least
WAITER_P99_GOAL = 0.025  # a waiter's p99 wait, seconds, at most
VERSUS_BLOCKING_FLOOR = 0.9  # advisory/getlock modes: acquisitions/s ÷ the bare blocking lock's
ASYNC_VS_SYNC_GOAL = 0.5  # async SQLite and file cycles/s ÷ sync, at least
FLOOR_NAMES = {"ring-pipe": "FIFO ring", "ring-flock": "FIFO + flock ring",
               "ring-redis": "pub/sub ring", "pg-advisory-lock": "blocking pg_advisory_lock",
               "get-lock": "blocking GET_LOCK", "pg-notify-handover": "NOTIFY hand-off",
               "get-lock-bell": "GET_LOCK doorbell", "flock": "blocking flock",
               "redis-blpop": "bare BLPOP hand-off"}


@dataclass
class FloorRow(GoalRow):
    """A line of the goals table under a goal that is not met: the floor of the mechanism
    measured in the same run (no verdict of its own, not counted as a goal).

    Example::

        FloorRow("file://: floor of a fair hand-off", "tenure", "660/s, FIFO ring 850/s",
                 "0.78x", "", None)
    """


@dataclass
class Header:
    """What the report's top says: when, how long, on what, and how it was measured.

    Example::

        Header(datetime.now(timezone.utc), 300.0, facts, "make bench", {"repeats": 11})
    """

    started: datetime
    elapsed: float
    facts: list[tuple[str, str]]
    command: str
    settings: dict[str, Any]


def _x(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.2f}x"


def _against(value: float, limit: float, at_least: bool, suffix: str = "x") -> str:
    """`value` with 2 decimals, or as many more as it takes for the shown figure to fall on
    the same side of `limit` as the value itself (0.4968 against >= 0.5: "0.497x", not
    "0.50x" next to "not met").

    Example:
        >>> _against(0.4968, 0.5, at_least=True), _against(1.2, 1.1, at_least=False)
        ('0.497x', '1.20x')
    """
    if math.isnan(value):
        return ""
    met = value >= limit if at_least else value <= limit
    for digits in range(2, 7):
        shown = float(f"{value:.{digits}f}")
        if (shown >= limit if at_least else shown <= limit) == met:
            return f"{value:.{digits}f}{suffix}"
    return f"{value!r}{suffix}"


def _num(value: float) -> str:
    """A count per tick: up to 2 decimals, no trailing zeros (1, 1.17, 52.67)."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _range(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else ""


def _slowest_margin(case: Case) -> tuple[float, Case]:
    """This ÷ peer for the peer it leads least (the fastest peer), and that peer."""
    return min(((median_ratio(case, peer), peer) for peer in case.peers if peer.rates),
               key=lambda pair: pair[0])


# -- the uncontended table --------------------------------------------------------------------


def section_table(cases: list[Case]) -> str:
    """A markdown table of one section's rows; ratio columns empty for every row are left out.

    "floor ÷ this" compares with the row's floor (named when it is not the section's usual
    one), "other floors ÷ this" with its `also` floors, "this ÷ peer" with its peer (the
    fastest one, named, when it has several).

    Example::

        print(section_table([case for case in cases if case.section == "file://"]))
    """
    usual = next((case.floor for case in cases if case.floor is not None), None)

    def floor_cell(case: Case) -> str:
        if case.floor is None or not case.floor.rates:
            return ""
        named = "" if case.floor is usual else f" ({case.floor.name})"
        return _x(median_ratio(case.floor, case)) + named

    def also_cell(case: Case) -> str:
        return "; ".join(f"{_x(median_ratio(other, case))} ({other.name})"
                         for other in case.also if other.rates)

    def peer_cell(case: Case) -> str:
        if not any(peer.rates for peer in case.peers):
            return ""
        value, peer = _slowest_margin(case)
        return _x(value) + (f" ({peer.name})" if len(case.peers) > 1 else "")

    ordered = sorted(cases, key=lambda case: _KIND_ORDER.index(case.kind))
    columns = [(title, cell) for title, cell in (("floor ÷ this", floor_cell),
                                                  ("other floors ÷ this", also_cell),
                                                  ("this ÷ peer", peer_cell))
               if any(cell(case) for case in ordered)]
    lines = ["| case | cycles/s (median) | µs/cycle (median) | spread, cycles/s (min-max) "
             + "".join(f"| {title} " for title, _ in columns) + "|",
             "|---|---:|---:|---:|" + "---:|" * len(columns)]
    for case in ordered:
        lines.append(f"| {case.label} | {case.median:,.0f} | {1e6 / case.median:,.1f} "
                     f"| {min(case.rates):,.0f} - {max(case.rates):,.0f} "
                     + "".join(f"| {cell(case)} " for _, cell in columns) + "|")
    return "\n".join(lines)


# -- goals ------------------------------------------------------------------------------------


def uncontended_goals(cases: list[Case]) -> list[GoalRow]:
    """Goal rows of the timed cases: floor ÷ this at most `goal_limit`, this ÷ every peer at
    least `peer_limit`.

    Example::

        rows = uncontended_goals(cases)
    """
    rows = []
    for case in cases:
        if case.goal_limit is not None and case.floor is not None and case.floor.rates:
            value = median_ratio(case.floor, case)
            rows.append(GoalRow(case.goal, where(case),
                                f"{case.median:,.0f}, floor {case.floor.median:,.0f}",
                                _against(value, case.goal_limit, at_least=False),
                                _range(per_round(case.floor, case)),
                                value <= case.goal_limit))
        baseline, limit = case.baseline, case.baseline_limit
        if baseline is not None and limit is not None and baseline.rates and case.rates:
            value = median_ratio(case, baseline)
            rows.append(GoalRow(case.baseline_goal, where(case),
                                f"{case.median:,.0f}, {baseline.name} {baseline.median:,.0f}",
                                _against(value, limit, at_least=True),
                                _range(per_round(case, baseline)), value >= limit))
        if case.peer_limit is not None and any(peer.rates for peer in case.peers):
            value, peer = _slowest_margin(case)
            rows.append(GoalRow(case.peer_goal, where(case),
                                f"{case.median:,.0f}, {peer.name} {peer.median:,.0f}",
                                _against(value, case.peer_limit, at_least=True),
                                _range(per_round(case, peer)), value >= case.peer_limit))
    return rows


def server_goals(section: ServerSection) -> list[GoalRow]:
    """The hand-off goal (p50 under 3 round trips) and the renewal goal (1 round trip per tick
    at every size) of one server store.

    Example::

        rows = server_goals(section)
    """
    rows = []
    goal = f"{section.title}: hand-off p50 < {HANDOFF_GOAL_ROUND_TRIPS:g} round trips"
    for result in section.handoffs:
        if result.goal:
            p50 = percentile(result.handoffs, 0.5)
            trips = p50 / section.rtt
            rows.append(GoalRow(goal, result.label,
                                f"p50 {p50 * 1e3:.2f} ms, round trip {section.rtt * 1e3:.3f} ms",
                                f"{trips:.1f} round trips",
                                f"p99 {percentile(result.handoffs, 0.99) * 1e3:.2f} ms",
                                trips < HANDOFF_GOAL_ROUND_TRIPS))
    for label, why in section.handoff_errors:
        if label.startswith("tenure"):
            rows.append(GoalRow(goal, label, "", "", "", None, why))
    goal = f"{section.title}: 1 round trip per renewal tick at every size"
    if section.renewal_error:
        rows.append(GoalRow(goal, "tenure's lease monitor", "", "", "", None,
                            section.renewal_error))
    elif section.renewals:
        trips = [renewal.round_trips for renewal in section.renewals]
        sizes = ", ".join(f"{renewal.leases:,}" for renewal in section.renewals)
        measured = all(value > 0 for value in trips)
        rows.append(GoalRow(goal, f"tenure's lease monitor, {sizes} leases",
                            "round trips per tick: " + ", ".join(_num(v) for v in trips),
                            f"max {_num(max(trips))}", "", max(trips) <= 1.0 if measured else None,
                            "" if measured else "the driver's requests were not counted"))
    return rows


def contended_goals(section: ServerSection) -> list[GoalRow]:
    """Issue 20's goals for each `fair` contended run of tenure: acquisitions per process
    min/max >= 0.8, a waiter's p99 wait <= 25 ms, acquisitions/s >= the best peer's on the
    store, and (`versus_floor`: advisory/getlock modes) >= 0.9x the bare blocking server lock;
    and a single waiter's hand-off after a clean release (the takeover run of the same URL) no
    slower than the contended hand-off p50. Under an acquisitions/s goal that is not met, a
    FloorRow per fair floor of the section (handoff.FAIR_FLOORS: a token passed round a ring,
    one wake-up per hand-off) gives tenure ÷ that floor. An `as_fair` run (a store that cannot
    wake its waiters) is held to the fairest peer's per-process min/max instead.

    Example::

        rows = contended_goals(section)
    """
    rows: list[GoalRow] = []
    title = section.title
    peers = [result for result in section.handoffs if result.library not in ("tenure", *FLOORS)]
    floor = next((result for result in section.handoffs if result.library in BLOCKING_FLOORS),
                 None)
    for result in (result for result in section.handoffs if result.as_fair):
        rows += _as_fair_goal(title, result, peers)
    for result in (result for result in section.handoffs if result.fair):
        rate = result.acquisitions_per_second
        rows.append(GoalRow(f"{title}: contended, acquisitions per process min/max >= "
                            f"{FAIRNESS_GOAL:g}", result.label,
                            f"{_fairness(result)} acquisitions",
                            _against(result.fairness, FAIRNESS_GOAL, True, suffix=""), "",
                            result.fairness >= FAIRNESS_GOAL))
        p99 = percentile(result.waits, 0.99)
        rows.append(GoalRow(f"{title}: contended, a waiter's p99 wait <= "
                            f"{WAITER_P99_GOAL * 1e3:g} ms", result.label,
                            f"p50 {percentile(result.waits, 0.5) * 1e3:.2f} ms of "
                            f"{len(result.waits):,} waits", f"p99 {p99 * 1e3:.2f} ms", "",
                            p99 <= WAITER_P99_GOAL if result.waits else None,
                            "" if result.waits else "no acquire waited"))
        if peers:
            best = max(peers, key=lambda peer: peer.acquisitions_per_second)
            ratio = rate / best.acquisitions_per_second
            rows.append(GoalRow(f"{title}: contended acquisitions/s >= the best peer's",
                                result.label, f"{rate:,.0f}/s, {best.library} "
                                f"{best.acquisitions_per_second:,.0f}/s",
                                _against(ratio, 1.0, at_least=True), "", ratio >= 1.0))
            if ratio < 1.0:
                rows += _fair_floor_rows(section, result, best)
        if result.versus_floor:
            goal = (f"{title}: contended acquisitions/s >= {VERSUS_BLOCKING_FLOOR:g}x the bare "
                    "blocking server lock")
            if floor is None:
                rows.append(GoalRow(goal, result.label, "", "", "", None,
                                    "the blocking floor did not run"))
            else:
                ratio = rate / floor.acquisitions_per_second
                rows.append(GoalRow(goal, result.label, f"{rate:,.0f}/s, floor "
                                    f"{floor.acquisitions_per_second:,.0f}/s",
                                    _against(ratio, VERSUS_BLOCKING_FLOOR, at_least=True), "",
                                    ratio >= VERSUS_BLOCKING_FLOOR))
        single = next((taker for taker in section.takers
                       if taker.tenure and taker.url == result.url), None)
        release = _result(section, single.label, "release") if single is not None else None
        if isinstance(release, Takeover) and result.handoffs:
            p50 = percentile(result.handoffs, 0.5)
            rows.append(GoalRow(f"{title}: a single waiter's hand-off after a clean release <= "
                                "the contended hand-off p50", result.label,
                                f"single {release.median * 1e3:.2f} ms, contended p50 "
                                f"{p50 * 1e3:.2f} ms",
                                _against(release.median / p50, 1.0, at_least=False),
                                _ms_range(release.seconds) + " ms", release.median <= p50))
            if release.median > p50:
                rows += _single_floor_rows(section, result, release)
    return rows


def _single_floor_rows(section: ServerSection, result: HandOff,
                       release: Takeover) -> list[GoalRow]:
    """Under a single-waiter goal that is not met: the same clean-release hand-off of each bare
    floor (the kernel's or the server's own blocking lock, Taker.floor) in the same run, and,
    where that floor also ran contended, its contended p50: the floor's own single ÷ contended
    is what waking an idle waiter costs on this machine, whatever the lock."""
    rows: list[GoalRow] = []
    for floor in (taker for taker in section.takers if taker.floor):
        measured = _result(section, floor.label, "release")
        if not isinstance(measured, Takeover) or math.isnan(measured.median):
            continue
        crowd = next((one for one in section.handoffs
                      if one.library == floor.library and one.handoffs), None)
        name = FLOOR_NAMES.get(floor.library, floor.library)
        figures = (f"tenure single {release.median * 1e3:.2f} ms; {name}: single "
                   f"{measured.median * 1e3:.2f} ms")
        if crowd is not None:
            crowd_p50 = percentile(crowd.handoffs, 0.5)
            figures += (f", contended p50 {crowd_p50 * 1e3:.2f} ms (its single ÷ contended "
                        f"{measured.median / crowd_p50:.2f}x)")
        rows.append(FloorRow(f"{section.title}: floor of a single waiter's hand-off after a "
                             "clean release (no goal: the bare lock, same run)", result.label,
                             figures, f"tenure ÷ floor {release.median / measured.median:.2f}x",
                             _ms_range(measured.seconds) + " ms", None))
    return rows


def _fair_floor_rows(section: ServerSection, result: HandOff, best: HandOff) -> list[GoalRow]:
    """One FloorRow per floor that ran in `section` (the rings of FAIR_FLOORS first, then the
    server's own lock waits and lease-row hand-offs, whose per-process min/max is shown):
    tenure's acquisitions/s ÷ the floor's, the best peer's too, each with its min/max."""
    rows: list[GoalRow] = []
    floors = sorted((one for one in section.handoffs if one.library in FLOORS),
                    key=lambda one: one.library not in FAIR_FLOORS)
    for ring in floors:
        name = FLOOR_NAMES.get(ring.library, ring.library)
        floor_rate = ring.acquisitions_per_second
        rows.append(FloorRow(
            f"{section.title}: floor of "
            + ("a fair hand-off" if ring.library in FAIR_FLOORS else "the server's hand-off")
            + f" ({name}; no goal: the mechanism alone, same run)", result.label,
            f"tenure {result.acquisitions_per_second:,.0f}/s (min/max {result.fairness:.2f}), "
            f"{name} {floor_rate:,.0f}/s (min/max {ring.fairness:.2f}); {best.library} "
            f"{best.acquisitions_per_second:,.0f}/s (min/max {best.fairness:.2f}) = "
            f"{_x(best.acquisitions_per_second / floor_rate)} the floor",
            f"tenure ÷ floor {_x(result.acquisitions_per_second / floor_rate)}", "", None))
    return rows


def _as_fair_goal(title: str, result: HandOff, peers: list[HandOff]) -> list[GoalRow]:
    """The goal of a store that cannot wake its waiters (issue 20, azblob): tenure's
    acquisitions per process min/max no lower than the fairest peer's (the bare SDK's
    fixed-interval retry), in the same run."""
    measured = [peer for peer in peers if peer.per_process]
    if not measured:
        return []
    peer = max(measured, key=lambda one: one.fairness)
    who = "the SDK's" if peer.library == "azure-sdk" else f"{peer.library}'s"
    scheme = title.split(":", 1)[0]

    def figures(one: HandOff, name: str) -> str:
        waited = f"waits p50/p99 {_ms(one.waits)}" if one.waits else "no waits"
        return f"{name} {_fairness(one)}, {one.acquisitions_per_second:,.0f}/s, {waited}"

    met = None if math.isnan(result.fairness) else result.fairness >= peer.fairness
    return [GoalRow(f"{scheme}: tenure's min/max >= {who} (contended, no wake-up)",
                    result.label, f"{figures(result, 'tenure')}; {figures(peer, who[:-2])}",
                    f"{result.fairness:.2f} vs {peer.fairness:.2f}", "", met,
                    "" if met is not None else "tenure acquired nothing")]


def async_goals(cases: list[Case]) -> list[GoalRow]:
    """Issue 20's async goals: async SQLite and async file cycles/s >= 0.5x sync (`with
    lock.acquire(): pass` both), the per-round ratio's median.

    Example::

        rows = async_goals(cases)
    """
    rows = []
    for section in dict.fromkeys(case.section for case in cases):
        if not section.startswith(("sqlite://", "file://")):
            continue
        rows_here = [case for case in cases if case.section == section and case.rates]
        sync = next((case for case in rows_here
                     if case.label == "tenure: `with lock.acquire(): pass`"), None)
        aio = next((case for case in rows_here if case.label.startswith("tenure async:")), None)
        if sync is None or aio is None:
            continue
        value = median_ratio(aio, sync)
        rows.append(GoalRow(f"{section.split(' ')[0]} async >= {ASYNC_VS_SYNC_GOAL:g}x sync",
                            f"{section} async ÷ sync `with lock.acquire(): pass`",
                            f"{aio.median:,.0f}, sync {sync.median:,.0f}",
                            _against(value, ASYNC_VS_SYNC_GOAL, at_least=True),
                            _range(per_round(aio, sync)), value >= ASYNC_VS_SYNC_GOAL))
    return rows


def goals_table(rows: list[GoalRow]) -> str:
    """The goals section: one table, then a verdict line.

    Example::

        print(goals_table(uncontended_goals(cases)))
    """
    lines = ["| goal | case | figures (medians) | ratio | spread | met? |",
             "|---|---|---:|---:|---:|:---:|"]
    for row in rows:
        verdict = ("met" if row.met else "**not met**") if row.met is not None else \
            f"not measured: {row.why}"
        if isinstance(row, FloorRow):
            verdict = "(floor, no verdict)"
        lines.append(f"| {row.goal} | {row.where} | {row.numbers} | {row.value} | {row.spread} "
                     f"| {verdict} |")
    rows = [row for row in rows if not isinstance(row, FloorRow)]
    missed = sum(row.met is False for row in rows)
    unmeasured = sum(row.met is None for row in rows)
    verdict = "All goals met." if not missed else f"**{missed} of {len(rows)} goals not met.**"
    if unmeasured:
        verdict += f" {unmeasured} goal(s) could not be measured in this run."
    return "\n".join([*lines, "", verdict])


# -- hand-off and renewal tables --------------------------------------------------------------


def _ms(values: list[float]) -> str:
    return f"{percentile(values, 0.5) * 1e3:.2f}, {percentile(values, 0.99) * 1e3:.2f} ms"


def handoff_table(section: ServerSection, processes: int) -> str:
    """Markdown: acquisitions/s, hand-offs/s and latency percentiles per library.

    Example::

        print(handoff_table(section, 8))
    """
    lines = [f"| {processes} processes, hold {HOLD_SECONDS * 1e3:g} ms | acquisitions/s "
             "| acquisitions per process: min / max | a waiter's wait: p50, p99 (waits) "
             "| release to next acquire: p50, p99 | hand-offs to another process /s "
             "| hand-off latency: p50, p99 | hand-off p50 in round trips | overlapping holds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for result in section.handoffs:
        trips = percentile(result.handoffs, 0.5) / section.rtt
        waits = f"{_ms(result.waits)} ({len(result.waits):,})" if result.waits else "none"
        lines.append(f"| {result.label} | {result.acquisitions_per_second:,.0f} "
                     f"| {_fairness(result)} | {waits} "
                     f"| {_ms(result.latencies)} | {result.handoffs_per_second:,.0f} "
                     f"| {_ms(result.handoffs)} | {'' if math.isnan(trips) else f'{trips:.1f}'} "
                     f"| {result.overlaps} |")
    lines += [f"| {label} | not measured: {why} | | | | | | | |"
              for label, why in section.handoff_errors]
    return "\n".join(lines)


def _fairness(result: HandOff) -> str:
    """"min / max = ratio" of the acquisitions per process (e.g. "1 / 3,964 = 0.00")."""
    if not result.per_process:
        return ""
    return (f"{min(result.per_process):,} / {max(result.per_process):,} = "
            f"{result.fairness:.2f}")


def renewal_table(section: ServerSection) -> str:
    """Markdown: what one renewal tick costs, by number of held leases.

    Example::

        print(renewal_table(section))
    """
    server = section.counter.columns if section.counter is not None else ()
    lines = ["| leases held | ticks measured | ticks per renewal interval (ttl/3) "
             "| leases renewed per tick | round trips per tick "
             + "".join(f"| {title} per tick " for title in server) + "|",
             "|---:|---:|---:|---:|---:|" + "---:|" * len(server)]
    for row in section.renewals:
        lines.append(f"| {row.leases:,} | {row.ticks} | {row.per_interval:.2f} "
                     f"| {_num(row.renewed)} | {_num(row.round_trips)} "
                     + "".join(f"| {_num(value)} " for value in row.server) + "|")
    return "\n".join(lines)


def _seconds(values: list[float]) -> str:
    finite = [value for value in values if math.isfinite(value)]
    return f"{min(finite):.3f}-{max(finite):.3f}" if finite else ""


def _result(section: ServerSection, label: str, mode: str) -> Takeover | str | None:
    """The takeover of `label` after `mode`, or why it was not measured, or None (not run)."""
    for result in section.takeovers:
        if result.taker.label == label and result.mode == mode:
            return result if result.seconds else None
    return next((why for name, kind, why in section.takeover_errors
                 if name == label and kind == mode), None)


def takeover_table(section: ServerSection) -> str:
    """Markdown: seconds from a SIGKILL of the holder, and from a clean release, to a blocked
    waiter's acquire returning, per library.

    Example::

        print(takeover_table(section))
    """
    lines = ["| library (how the waiter waits) | expiry (ttl) | after SIGKILL: median s "
             "(min-max) | ÷ ttl | past the lease's expiry (median) | after a clean release: "
             "median ms (min-max ms) | release in round trips |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for taker in section.takers:
        kill, release = _result(section, taker.label, "kill"), _result(section, taker.label,
                                                                       "release")
        cells = [f"{taker.ttl:g} s" if taker.expires else "none"]
        if "kill" not in taker.modes:
            cells += ["not meaningful: " + ("one process" if taker.in_process else
                                            "its holder's death does not free it"), "", ""]
        elif isinstance(kill, Takeover):
            cells += _kill_cells(kill)
        else:
            cells += [f"not measured: {kill or 'not run'}", "", ""]
        if isinstance(release, Takeover):
            trips = release.median / section.rtt
            cells += [f"{release.median * 1e3:.2f} ({_ms_range(release.seconds)})",
                      "" if math.isnan(trips) or math.isinf(trips) else f"{trips:.1f}"]
        else:
            cells += [f"not measured: {release or 'not run'}", ""]
        lines.append(f"| {taker.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _kill_cells(kill: Takeover) -> list[str]:
    never = sum(math.isinf(value) for value in kill.seconds)
    if math.isinf(kill.median):
        return [f"never: not within {kill.deadline:g} s ({never} of {len(kill.seconds)})",
                "", ""]
    median = f"{kill.median:.3f} ({_seconds(kill.seconds)})"
    if never:
        median += f"; {never} of {len(kill.seconds)} never"
    if not kill.taker.expires:
        return [median, "no expiry", "freed by the holder's death"]
    late = kill.past_expiry
    past = f"{late:.3f} s" if late >= 0 else "freed before expiry"
    return [median, f"{kill.median / kill.taker.ttl:.2f}", past]


def _ms_range(values: list[float]) -> str:
    finite = [value * 1e3 for value in values if math.isfinite(value)]
    return f"{min(finite):.2f}-{max(finite):.2f}" if finite else "never"


def memory_table(section: ServerSection) -> str:
    """Markdown: peak RSS growth per 1,000 held leases, per library.

    Example::

        print(memory_table(section))
    """
    lines = ["| library | leases held per process | renewal while held | peak RSS growth per "
             "1,000 leases (median) | spread (min-max) | ÷ tenure | taking them (median) |",
             "|---|---:|---|---:|---:|---:|---:|"]
    base = next((memory.per_thousand_kib for memory in section.memories
                 if memory.spec.library == "tenure"), math.nan)
    for memory in section.memories:
        scale = 1000 / memory.leases
        ratio = memory.per_thousand_kib / base if base > 0 else math.nan
        lines.append(f"| {memory.spec.label} | {memory.leases:,} | {memory.spec.renewal} "
                     f"| {_mib(memory.per_thousand_kib)} "
                     f"| {_mib(min(memory.growth_kib) * scale)} - "
                     f"{_mib(max(memory.growth_kib) * scale)} | {_x(ratio)} "
                     f"| {sorted(memory.take_seconds)[len(memory.take_seconds) // 2]:.2f} s |")
    for label, why, missing in section.memory_errors:
        verdict = "not measured" if missing else "cannot"
        lines.append(f"| {label} | | | {verdict}: {why} | | | |")
    return "\n".join(lines)


def _mib(kib: float) -> str:
    return f"{kib / 1024:.2f} MiB"


def lifecycle_goals(section: ServerSection) -> list[GoalRow]:
    """Goal rows of the takeover runs: tenure takes over a SIGKILLed holder's lease within ttl
    + 1 s (the file store at once: within the waiter's 1 s backoff cap), every
    repetition; and on the server stores the clean-release hand-off median under 3 round trips
    (the hand-off goal, applied without contention).

    Example::

        rows = lifecycle_goals(section)
    """
    rows = []
    for taker in (taker for taker in section.takers if taker.tenure):
        kill = _result(section, taker.label, "kill") if "kill" in taker.modes else None
        limit = FILE_KILL_GOAL if section.url.startswith("file:") else \
            taker.ttl + KILL_GOAL_MARGIN
        goal = (f"{section.title}: a SIGKILLed holder's lock is taken over at once (within "
                f"{limit:g} s)" if section.url.startswith("file:") else
                f"{section.title}: takeover after SIGKILL within ttl + {KILL_GOAL_MARGIN:g} s")
        if isinstance(kill, Takeover):
            worst = max(kill.seconds)
            rows.append(GoalRow(goal, taker.label, f"median {kill.median:.3f} s, ttl "
                                f"{taker.ttl:g} s", f"max {worst:.3f} s",
                                _seconds(kill.seconds), worst <= limit))
        elif isinstance(kill, str):
            rows.append(GoalRow(goal, taker.label, "", "", "", None, kill))
    first = next((taker for taker in section.takers if taker.tenure), None)
    if first is not None and math.isfinite(section.rtt):
        goal = (f"{section.title}: clean-release hand-off median < "
                f"{HANDOFF_GOAL_ROUND_TRIPS:g} round trips (no contention)")
        release = _result(section, first.label, "release")
        if isinstance(release, Takeover):
            trips = release.median / section.rtt
            rows.append(GoalRow(goal, first.label, f"median {release.median * 1e3:.2f} ms, "
                                f"round trip {section.rtt * 1e3:.3f} ms",
                                f"{trips:.1f} round trips", _ms_range(release.seconds) + " ms",
                                trips < HANDOFF_GOAL_ROUND_TRIPS))
        elif isinstance(release, str):
            rows.append(GoalRow(goal, first.label, "", "", "", None, release))
    return rows


# -- the whole report -------------------------------------------------------------------------


def render(cases: list[Case], sections: list[ServerSection], extras: Extras,
           header: Header) -> str:
    """The whole BENCHMARKS.md.

    Example::

        Path("BENCHMARKS.md").write_text(render(cases, sections, extras, header))
    """
    by_title = {section.title: section for section in sections}
    titles = list(dict.fromkeys([*(case.section for case in cases), *by_title, *extras.notes]))
    goal_rows = uncontended_goals(cases) + async_goals(cases)
    for section in sections:
        goal_rows += server_goals(section) + contended_goals(section) + lifecycle_goals(section)
    processes = header.settings["processes"]
    parts = [
        "# Benchmarks", "",
        "Lock cycles per second of tenure's stores next to each store's raw floor and the peer "
        "libraries, the contended hand-off, the renewal cost of the server stores, the time to "
        "take over after a SIGKILL and after a clean release, and the memory per 1,000 held "
        "leases, all measured in one run. The azblob:// figures come from the Azurite emulator on "
        "loopback, not from Azure (see Method).", "",
        f"- Command: {header.command}",
        f"- Date: {header.started:%Y-%m-%d %H:%M} UTC; the run took {header.elapsed:.0f} s",
        *(f"- {name}: {value}" for name, value in header.facts), "",
        "## Goals", "", goals_table([*goal_rows, *extras.goals]), ""]
    for title in titles:
        rows = [case for case in cases if case.section == title]
        parts += [f"## {title}", ""]
        if rows:
            parts += [section_table(rows), ""]
        parts += [block for text in extras.notes.get(title, []) for block in (text, "")]
        section = by_title.get(title)
        if section is not None and (section.handoffs or section.handoff_errors):
            parts += ["### Contended hand-off", ""]
            if math.isfinite(section.rtt):
                parts += [f"One round trip: {section.rtt * 1e3:.3f} ms ({section.rtt_label}).",
                          ""]
            parts += [handoff_table(section, processes), ""]
        if section is not None and (section.renewals or section.renewal_error):
            parts += ["### Renewal", "", section.renewal_note, ""]
            parts += ([f"**Not measured**: {section.renewal_error}", ""]
                      if section.renewal_error else [renewal_table(section), ""])
        if section is not None and section.takers:
            parts += ["### Takeover after a SIGKILL and after a clean release", "",
                      takeover_table(section), ""]
        if section is not None and section.footprints:
            parts += ["### Memory per 1,000 held leases", "", memory_table(section), ""]
    parts += ["## Method", "", METHOD.read_text().format(**header.settings)]
    return "\n".join(parts)
