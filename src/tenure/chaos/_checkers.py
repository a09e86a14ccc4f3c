"""The checkers, each a pure function of the history (a list of events, see _history):

1. writes: accepted writes never interleave across tokens and never go backwards. A critical
   section is a worker's read and its accepted write under one token, in the oracle's order;
   two sections of different tokens must not overlap, and accepted tokens must not decrease.
2. tokens: every grant's token is unique for its name, and a grant asked for after another
   was granted has a larger token (real-time order), also across store restarts.
3. counter: no lost update: each counter's final value equals its number of accepted writes.
4. liveness: after the faults stop (the `heal` event), a new holder is granted the lock
   (in the group phase: a member joins the group) within the bound the event carries (ttl +
   2 retry intervals).
5. signals: every lost lease's holder is told (`on_lost` ran) at most 100 ms after the lease's
   local deadline; a signal that never came while the holder went on past that is late too. A
   loss by a definitive refusal before the deadline is fine. The delay counts from the moment
   the holder could be told: not before it was granted the lease, nor while its process was
   stopped (the pause fault).
6. forks: a child forked by a holder leaves the parent's lease alone: the child could use the
   store (exit 0), and the parent's lease was neither lost during the fork fault nor found
   freed by someone else at its release.
7. members: a group member's own listing of the group right after its join (the group
   phase) shows it, under its own token: one live member per id, and none missing.

Example::

    verdict = check_history(events)
    for violation in verdict.violations:
        print(violation.checker, violation.message)
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tenure.chaos._history import Event

CHECKERS = {
    "writes": "accepted writes never interleave across tokens and never go backwards",
    "tokens": "tokens are unique per grant and increasing, also across store restarts",
    "counter": "no lost update: the final counter equals the accepted writes",
    "liveness": "after the faults stop, a new holder within ttl + 2 retry intervals",
    "signals": "a loss is signalled within 100 ms of the lease's local deadline",
    "forks": "a forked child leaves the parent's lease alone",
    "members": "a member's listing right after its join shows it, with its token",
}
LATE_SIGNAL = 0.1  # seconds after the deadline: a later loss signal is a violation
DETAILS = 3  # violations described one by one per checker; the rest are counted


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which checker found it, and what happened."""

    checker: str
    message: str


@dataclass
class Verdict:
    """What the checkers found, and the figures they measured on the way."""

    violations: list[Violation] = field(default_factory=list)
    overlaps: int = 0
    backwards: int = 0
    lost_updates: int = 0
    duplicate_tokens: int = 0
    grants_after_restarts: int = 0
    takeovers: list[float] = field(default_factory=list)
    signal_delays: list[float] = field(default_factory=list)  # deadline -> signal, seconds
    losses_before_deadline: int = 0  # definitive refusals: signalled before the deadline
    late_signals: int = 0  # including signals that never came
    forks: int = 0
    member_listings: int = 0  # the group phase's listings checked
    checkers: dict[str, str] = field(default_factory=lambda: dict(CHECKERS))  # the workload's
    figures: dict[str, Any] = field(default_factory=dict)  # the jobs and queue workloads'

    @property
    def worst_signal_delay(self) -> float | None:
        return max(self.signal_delays, default=None)

    @property
    def median_signal_delay(self) -> float | None:
        return statistics.median(self.signal_delays) if self.signal_delays else None

    def by_checker(self) -> dict[str, int]:
        counts = dict.fromkeys(self.checkers, 0)
        for violation in self.violations:
            counts[violation.checker] += 1
        return counts


def check_history(events: Sequence[Event]) -> Verdict:
    """Run the checkers on a run's history.

    Example::

        verdict = check_history(read_history(path)[0])
        assert not verdict.violations
    """
    verdict = Verdict()
    ordered = sorted(events, key=lambda e: (e["t"], e.get("seq", 0)))
    check_writes(ordered, verdict)
    check_tokens(ordered, verdict)
    check_counter(ordered, verdict)
    check_liveness(ordered, verdict)
    check_signals(ordered, verdict)
    check_forks(ordered, verdict)
    check_members(ordered, verdict)
    return verdict


def _oracle(events: Sequence[Event], type_: str, f: str) -> list[Event]:
    return sorted((e for e in events if e.get("by") == "oracle" and e["type"] == type_
                   and e["f"] == f), key=lambda e: e["seq"])


def _resource(event: Event) -> tuple[str, int]:
    return str(event["name"]), int(event.get("slot") or 0)


def _add(verdict: Verdict, checker: str, found: int, message: str) -> None:
    if found <= DETAILS:
        verdict.violations.append(Violation(checker, message))


def check_writes(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 1: no interleaving of critical sections across tokens, no token going back.

    Example::

        verdict = Verdict(); check_writes(events, verdict); verdict.overlaps
    """
    reads: dict[tuple[str, int, str, int], Event] = {}
    sections: dict[tuple[str, int], list[tuple[Event, Event]]] = defaultdict(list)
    highest: dict[tuple[str, int], Event] = {}
    ordered = sorted((e for e in events if e.get("by") == "oracle" and e["f"] in
                      ("read", "write")), key=lambda e: e["seq"])
    for event in ordered:
        resource = _resource(event)
        key = (*resource, str(event["process"]), int(event["token"]))
        if event["f"] == "read":
            reads[key] = event
            continue
        if event["type"] != "ok":
            continue  # refused: not an effect
        before = highest.get(resource)
        if before is not None and event["token"] < before["token"]:
            verdict.backwards += 1
            _add(verdict, "writes", verdict.backwards,
                 f"{_at(event)}: {event['process']} wrote {_where(resource)} with token "
                 f"{event['token']} after token {before['token']} was written: tokens went "
                 "backwards")
        if before is None or event["token"] > before["token"]:
            highest[resource] = event
        read = reads.get(key)
        if read is not None:
            sections[resource].append((read, event))
    for resource, found in sections.items():
        found.sort(key=lambda pair: pair[0]["seq"])
        widest: tuple[Event, Event] | None = None
        for read, write in found:
            if widest is not None and read["seq"] < widest[1]["seq"] and \
                    read["token"] != widest[0]["token"]:
                verdict.overlaps += 1
                _add(verdict, "writes", verdict.overlaps,
                     f"overlapping critical sections on {_where(resource)}: "
                     f"{widest[0]['process']} (token {widest[0]['token']}) read at "
                     f"{_at(widest[0])} and wrote at {_at(widest[1])}; {read['process']} "
                     f"(token {read['token']}) read at {_at(read)} and wrote at {_at(write)}")
            if widest is None or write["seq"] > widest[1]["seq"]:
                widest = (read, write)
    if verdict.overlaps > DETAILS:
        verdict.violations.append(Violation(
            "writes", f"... {verdict.overlaps} overlapping critical sections in all"))


def check_tokens(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 2: tokens unique per grant, larger than those granted before the ask.

    Example::

        verdict = Verdict(); check_tokens(events, verdict); verdict.duplicate_tokens
    """
    asked: dict[tuple[str, int], float] = {}
    grants: dict[str, list[tuple[float, float, Event]]] = defaultdict(list)  # name -> (ask, ok)
    for event in events:
        if event["f"] != "acquire" or event.get("by") == "oracle":
            continue
        who = (str(event["process"]), int(event.get("pid") or 0))
        if event["type"] == "invoke":
            asked[who] = event["t"]
        elif event["type"] == "ok":
            grants[str(event["name"])].append((asked.pop(who, event["t"]), event["t"], event))
    restarts = [e["t"] for e in events if e["f"] == "fault-end" and e.get("kind") == "restart"]
    if restarts:
        verdict.grants_after_restarts = sum(
            1 for found in grants.values() for _, at, _ in found if at > min(restarts))
    for name, found in grants.items():
        seen: dict[int, Event] = {}
        for _, _, event in found:
            token = int(event["token"])
            if token in seen:
                verdict.duplicate_tokens += 1
                _add(verdict, "tokens", verdict.duplicate_tokens,
                     f"token {token} of {name!r} was granted twice: to {seen[token]['process']} "
                     f"at {_at(seen[token])} and to {event['process']} at {_at(event)}")
            seen[token] = event
        by_grant = sorted(found, key=lambda g: g[1])
        latest: Event | None = None
        position = 0
        late = 0
        for ask, _, event in sorted(found, key=lambda g: g[0]):
            while position < len(by_grant) and by_grant[position][1] < ask:
                candidate = by_grant[position][2]
                if latest is None or candidate["token"] > latest["token"]:
                    latest = candidate
                position += 1
            if latest is not None and event["token"] <= latest["token"]:
                late += 1
                _add(verdict, "tokens", late,
                     f"{event['process']} asked for {name!r} at {_at_time(ask)} and got token "
                     f"{event['token']}, not above token {latest['token']} granted before "
                     f"that to {latest['process']} at {_at(latest)}")
        if late > DETAILS:
            verdict.violations.append(Violation(
                "tokens", f"... {late} grants of {name!r} with a token not above an earlier one"))


def check_counter(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 3: each counter's final value equals its accepted writes.

    Example::

        verdict = Verdict(); check_counter(events, verdict); verdict.lost_updates
    """
    accepted: dict[tuple[str, int], int] = defaultdict(int)
    for event in _oracle(events, "ok", "write"):
        accepted[_resource(event)] += 1
    finals = {_resource(e): int(e["value"]) for e in _oracle(events, "info", "final")}
    for resource in sorted(set(accepted) | set(finals)):
        if resource not in finals:
            verdict.violations.append(Violation(
                "counter", f"no final value of {_where(resource)} in the history (the oracle "
                           "did not stop cleanly)"))
            continue
        count, final = accepted[resource], finals[resource]
        if final != count:
            verdict.lost_updates += max(0, count - final)
            verdict.violations.append(Violation(
                "counter", f"{_where(resource)} ends at {final} after {count} accepted writes: "
                           f"{count - final} lost update(s)"))


def check_liveness(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 4: a grant within the bound after each `heal`, if the phase lasted that long.

    Example::

        verdict = Verdict(); check_liveness(events, verdict); verdict.takeovers
    """
    phase_end = {str(e["name"]): float(e["until"]) for e in events
                 if e["f"] == "phase" and e["type"] == "info"}
    last = max((e["t"] for e in events), default=0.0)
    for heal in (e for e in events if e["f"] == "heal" and e["type"] == "info"):
        name, bound = str(heal["name"]), float(heal["bound"])
        first = next((e for e in events if e["f"] == "acquire" and e["type"] == "ok" and
                      e.get("by") != "oracle" and name in (e["name"], e.get("phase"))
                      and e["t"] >= heal["t"]), None)
        if first is not None:
            waited = first["t"] - heal["t"]
            verdict.takeovers.append(waited)
            if waited <= bound:
                continue
            message = f"the first holder after the faults stopped came {waited:.2f} s later"
        elif min(phase_end.get(name, last), last) - heal["t"] < bound:
            continue  # the run ended before the bound: nothing to conclude
        else:
            message = "no holder at all after the faults stopped"
        verdict.violations.append(Violation(
            "liveness", f"{name!r}: {message} (bound: ttl + 2 retry intervals = {bound:g} s)"))


def _holder_events(events: Sequence[Event], f: str, type_: str) -> dict[tuple[int, int], Event]:
    """The first worker event of a kind per (pid, token): one lease of one process."""
    found: dict[tuple[int, int], Event] = {}
    for event in events:
        if event["f"] == f and event["type"] == type_ and event.get("by") != "oracle" \
                and event.get("token") is not None:
            found.setdefault((int(event["pid"]), int(event["token"])), event)
    return found


def _stops(events: Sequence[Event]) -> dict[int, list[tuple[float, float]]]:
    """When each worker process was stopped (the pause fault): pid -> (from, to), from its
    pause to the first of its resume, the pause's fault-end or the heal."""
    stops: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for index, event in enumerate(events):
        if event["f"] != "pause" or event["type"] != "info":
            continue
        pid = int(event.get("target_pid") or event["pid"])
        end = next((e["t"] for e in events[index + 1:] if
                    (e["f"] == "resume" and e["pid"] == pid) or e["f"] == "heal" or
                    (e["f"] == "fault-end" and e.get("kind") == "pause")), math.inf)
        stops[pid].append((float(event["t"]), float(end)))
    return stops


def _due(deadline: float, granted: float, stops: Sequence[tuple[float, float]]) -> float:
    """When the loss of a lease with this deadline is due to be signalled: not before it was
    granted, nor while its process was stopped."""
    due = max(deadline, granted)
    for start, end in stops:
        if start <= due <= end:
            due = end
    return due


def check_signals(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 5: loss signals within LATE_SIGNAL of the deadline (see the module docstring).

    Example::

        verdict = Verdict(); check_signals(events, verdict); verdict.signal_delays
    """
    stops = _stops(events)
    granted = _holder_events(events, "acquire", "ok")
    lost = _holder_events(events, "lost", "info")
    for (pid, token), event in lost.items():
        if "deadline" not in event:
            continue
        grant = granted.get((pid, token))
        due = _due(float(event["deadline"]), grant["t"] if grant else -math.inf, stops[pid])
        delay = float(event["t"]) - due
        if delay < 0 and float(event["t"]) < float(event["deadline"]):
            verdict.losses_before_deadline += 1
            continue
        verdict.signal_delays.append(max(0.0, delay))
        if delay > LATE_SIGNAL:
            verdict.late_signals += 1
            _add(verdict, "signals", verdict.late_signals,
                 f"{event['process']} was told its lease on {event['name']!r} (token {token}) "
                 f"was lost ({event.get('reason')}) {delay * 1000:.0f} ms after it was due at "
                 f"{_at_time(due)} (bound: {LATE_SIGNAL * 1000:.0f} ms)")
    for (pid, token), event in _holder_events(events, "release", "invoke").items():
        if (pid, token) in lost or "deadline" not in event:
            continue
        grant = granted.get((pid, token))
        due = _due(float(event["deadline"]), grant["t"] if grant else -math.inf, stops[pid])
        if float(event["t"]) - due > LATE_SIGNAL:
            verdict.late_signals += 1
            _add(verdict, "signals", verdict.late_signals,
                 f"{event['process']} released its lease on {event['name']!r} (token {token}) "
                 f"at {_at(event)}, {float(event['t']) - due:.2f} s after its loss was due at "
                 f"{_at_time(due)}, and was never told it was lost")
    if verdict.late_signals > DETAILS:
        verdict.violations.append(Violation(
            "signals", f"... {verdict.late_signals} late or missing loss signals in all"))


def check_forks(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 6: a holder's forked child left the parent's lease alone.

    Example::

        verdict = Verdict(); check_forks(events, verdict); verdict.forks
    """
    lost = _holder_events(events, "lost", "info")
    released = _holder_events(events, "release", "ok")
    found = 0
    for index, fork in enumerate(events):
        if fork["f"] != "fork" or fork["type"] not in ("ok", "fail"):
            continue
        verdict.forks += 1
        key = (int(fork["pid"]), int(fork["token"]))
        who = f"{fork['process']}'s lease on {fork['name']!r} (token {key[1]})"
        later = events[index + 1:]
        fault_end = next((e["t"] for e in later if e["f"] in ("fault-end", "heal")
                          and e.get("kind", "fork") == "fork"), math.inf)
        release = released.get(key)
        other_fault = release is not None and any(
            e["f"] == "fault" and fork["t"] < e["t"] < release["t"] for e in later)
        problems = []
        if fork["type"] == "fail":
            problems.append(f"its child exited with {fork.get('exit')} (it could not use the "
                            "store afresh; see workers.log)")
        loss = lost.get(key)
        if loss is not None and loss["t"] <= fault_end:
            problems.append(f"was lost ({loss.get('reason')}) at {_at(loss)}, after the child "
                            "exited")
        if release is not None and not release.get("freed", True) and not other_fault:
            problems.append(f"was no longer the parent's to release at {_at(release)}")
        for problem in problems:
            found += 1
            _add(verdict, "forks", found, f"{who}: {problem}")
    if found > DETAILS:
        verdict.violations.append(Violation("forks", f"... {found} fork problems in all"))


def check_members(events: Sequence[Event], verdict: Verdict) -> None:
    """Checker 7: a member's listing of its group right after its join shows it, with its
    own token (a listing taken once the member was lost already proves nothing).

    Example::

        verdict = Verdict(); check_members(events, verdict); verdict.member_listings
    """
    wrong = 0
    for event in events:
        if event["f"] != "members" or event["type"] != "info" or event.get("lost"):
            continue
        verdict.member_listings += 1
        listed = event["members"].get(event["id"])
        if listed == event["token"]:
            continue
        wrong += 1
        seen = "not listed" if listed is None else f"listed with token {listed}"
        _add(verdict, "members", wrong,
             f"{_at(event)}: {event['process']} joined as member {event['id']!r} with token "
             f"{event['token']}, and its listing right after showed it {seen}")
    if wrong > DETAILS:
        verdict.violations.append(Violation(
            "members", f"... {wrong} listings in all without their member's own token"))


def _where(resource: tuple[str, int]) -> str:
    name, slot = resource
    return f"{name!r}" + (f" slot {slot}" if slot else "")


def _at(event: Event) -> str:
    return _at_time(float(event["t"]))


def _at_time(t: float) -> str:
    return f"t={t:.3f}"


def as_dict(verdict: Verdict) -> dict[str, Any]:
    """The verdict as plain data, for JSON."""
    return {"violations": [{"checker": v.checker, "message": v.message}
                           for v in verdict.violations],
            "by_checker": verdict.by_checker(), "overlaps": verdict.overlaps,
            "backwards": verdict.backwards, "lost_updates": verdict.lost_updates,
            "duplicate_tokens": verdict.duplicate_tokens,
            "grants_after_restarts": verdict.grants_after_restarts,
            "takeovers": [round(t, 3) for t in verdict.takeovers],
            "signals": len(verdict.signal_delays),
            "worst_signal_delay": _rounded(verdict.worst_signal_delay),
            "median_signal_delay": _rounded(verdict.median_signal_delay),
            "losses_before_deadline": verdict.losses_before_deadline,
            "late_signals": verdict.late_signals, "forks": verdict.forks,
            "member_listings": verdict.member_listings, "figures": verdict.figures}


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 4)
