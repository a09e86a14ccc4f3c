"""Checks over the enter/exit logs that conformance workers write (see worker.py)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path


@dataclass(frozen=True)
class Hold:
    token: int
    pid: int
    enter_ns: int
    exit_ns: int


def read_holds(log: Path) -> list[Hold]:
    """Pair enter/exit lines by token, sorted by entry time."""
    enters: dict[int, tuple[int, int]] = {}
    holds: list[Hold] = []
    for line in log.read_text().splitlines():
        event, pid, token, at = line.split()
        if event == "enter":
            assert int(token) not in enters, f"token {token} granted twice"
            enters[int(token)] = (int(pid), int(at))
        else:
            owner, entered = enters[int(token)]
            holds.append(Hold(int(token), owner, entered, int(at)))
    assert len(holds) == len(enters), "a holder entered and never left"
    return sorted(holds, key=lambda hold: hold.enter_ns)


def overlaps(holds: list[Hold]) -> list[tuple[Hold, Hold]]:
    """Pairs of consecutive holds whose critical sections overlap in time."""
    return [(a, b) for a, b in pairwise(holds) if b.enter_ns < a.exit_ns]


def backwards_tokens(holds: list[Hold]) -> list[tuple[Hold, Hold]]:
    """Consecutive holds (by entry) whose tokens did not increase."""
    return [(a, b) for a, b in pairwise(holds) if b.token <= a.token]


def max_concurrency(holds: list[Hold]) -> int:
    """The largest number of holds inside their critical section at one instant."""
    events = sorted([(h.enter_ns, 1) for h in holds] + [(h.exit_ns, -1) for h in holds],
                    key=lambda event: (event[0], event[1]))  # exits first at equal times
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak
