"""The checkers of the jobs and queue workloads, each a pure function of the history.

Jobs (a periodic job on every worker, see _jobs_worker):

- writes, counter: the lock workload's checkers on the runs' fenced oracle writes;
- runs: no two runs of the job at the same time. A run counts from its start until it ends or
  its lease's local deadline passed, whichever is first (a run whose lease was lost while its
  process was stopped goes on after SIGCONT, but only until it learns of the loss: its write is
  then refused by the oracle, which the writes checker checks), or until its process was killed;
- periods: every period that started (a run began) was recorded once, and no run of a period
  began after its record was written. A period never recorded is covered by the misfire rule
  (docs/jobs/periodic.md: once the next period has started, the next run covers it; the default
  `coalesce`) when a later period was recorded, or when the run ended within the liveness bound
  of it; each is counted with why its runs did not record it. A period whose job ran to its write
  more than once is covered only when every run but the last never wrote the record (the lease
  was lost between the job and its record: documented as "may run again");
- tokens: in the order the runs began, their tokens increase (a period's runs included);
- exits: no worker process exits except those the faults killed: no runner died (`exit`), no
  process went away unasked (`crash`), every one stopped by itself at the end;
- liveness: after the faults stop, a period is recorded within ttl + period + the runner's
  retry cap (2 s, tenure.jobs._outage.RETRY_CAP).

The figures: runs, periods started and recorded, periods not recorded by reason, runs again,
the time to the first recorded period after the faults stop, and after each store restart (from
the server back to the next recorded period).

Queue (keyed messages through a PostgreSQL queue, see _queue_worker):

- writes, counter: as above, on the handlers' fenced writes (one counter per key);
- keys: no two handlers of one key at the same time (a handler counts until it ends or its key
  lock's local deadline passed, or its process was killed);
- messages: every message sent is completed exactly once (`complete` succeeded once) or is in
  the poison queue with its reason, and none is left in the queue at the end (nothing lost).
  Delivery is at least once (docs/jobs/queues.md): a message handled again because a delivery
  was not completed is counted, and so is a stale delivery handled after another completed the
  message (its own complete is refused); a message completed twice is allowed only after an
  untried release of it that was never answered (on Azure a release sends a copy, then deletes
  the original: a worker killed in between leaves both);
- exits: as above;
- liveness: after the faults stop, a message is completed within ttl + the visibility timeout.

Example::

    verdict = check_jobs(read_history(path)[0], period=1.0)
    verdict.figures["periods recorded"], verdict.violations
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tenure.chaos._checkers import (
    CHECKERS,
    DETAILS,
    Verdict,
    Violation,
    check_counter,
    check_writes,
)
from tenure.chaos._history import Event

JOBS_CHECKERS = {
    "writes": "the runs' fenced writes never interleave across tokens nor go backwards",
    "counter": CHECKERS["counter"],
    "runs": "no two runs of the job at the same time",
    "periods": "each period that started is recorded once, or a misfire rule covers it",
    "tokens": "tokens increase in the order the runs began",
    "exits": "no worker process exits but those the faults killed",
    "liveness": "after the faults stop, a period is recorded within ttl + period + 2 s",
}
QUEUE_CHECKERS = {
    "writes": "the handlers' fenced writes never interleave across tokens nor go backwards",
    "counter": CHECKERS["counter"],
    "keys": "no two handlers of one key at the same time",
    "messages": "every message completed exactly once or poisoned with its reason; none lost",
    "exits": "no worker process exits but those the faults killed",
    "liveness": "after the faults stop, a message is completed within ttl + visibility",
}


@dataclass
class Work:
    """One run of the job, or one handling of a message: who, when, under which token."""

    pid: int
    process: str
    start: float
    token: int | None
    key: Any  # jobs: the period (epoch seconds); queue: the message key
    end: Event | None = None

    @property
    def valid_until(self) -> float:
        """When it stopped counting as running: its end, or its lease's local deadline if
        that came first; +inf when it has neither (set from a kill by `_close_killed`)."""
        if self.end is None:
            return math.inf
        deadline = self.end.get("deadline")
        end = float(self.end["t"])
        return end if deadline is None else min(end, float(deadline))

    @property
    def ok(self) -> bool:
        return self.end is not None and self.end["type"] == "ok"

    @property
    def wrote(self) -> bool:
        """Its fenced write was accepted."""
        return self.ok and bool(self.end and self.end.get("accepted"))


def _works(events: Sequence[Event], f: str, key_field: str) -> list[Work]:
    works: list[Work] = []
    open_: dict[tuple[int, Any, Any], Work] = {}
    for event in events:
        if event["f"] != f or event.get("by") == "oracle":
            continue
        ident = (int(event["pid"]), event.get("token"), event.get("n", event.get("period")))
        if event["type"] == "invoke":
            work = Work(int(event["pid"]), str(event["process"]), float(event["t"]),
                        event.get("token"), event.get(key_field))
            works.append(work)
            open_[ident] = work
        elif ident in open_:
            open_.pop(ident).end = event
    return works


def _killed_at(events: Sequence[Event]) -> dict[int, float]:
    """pid -> when the nemesis killed it (the kill fault), or when it exited on its own."""
    killed: dict[int, float] = {}
    for event in events:
        if event["f"] == "fault" and event.get("kind") == "kill" and event.get("target_pid"):
            killed.setdefault(int(event["target_pid"]), float(event["t"]))
        elif event["f"] == "stop" or (event["f"] == "exit" and event["type"] == "fail"):
            killed.setdefault(int(event["pid"]), float(event["t"]))
    return killed


def _valid_until(work: Work, killed: dict[int, float]) -> float:
    if work.end is None:
        return killed.get(work.pid, math.inf)
    return work.valid_until


def _check_overlaps(works: Sequence[Work], killed: dict[int, float], verdict: Verdict,
                    checker: str, what: str, same_key: bool) -> int:
    """Works (of one key when `same_key`) whose valid spans overlap under different tokens."""
    found = 0
    ordered = sorted(works, key=lambda w: w.start)
    for index, work in enumerate(ordered):
        if _valid_until(work, killed) <= work.start:
            # Its lease's deadline had passed when it began (its process was paused between
            # the runner's last check and the work's first step): it never counted as
            # running, and its fenced writes are the writes checker's.
            continue
        for earlier in ordered[:index]:
            if same_key and earlier.key != work.key:
                continue
            if earlier.pid == work.pid and earlier.token == work.token:
                continue
            until = _valid_until(earlier, killed)
            if until > work.start:
                found += 1
                if found <= DETAILS:
                    verdict.violations.append(Violation(checker, (
                        f"{what}: {earlier.process} (token {earlier.token}) began at "
                        f"t={earlier.start:.3f} and counted until "
                        f"{'never ended' if until == math.inf else f't={until:.3f}'}; "
                        f"{work.process} (token {work.token}) began at t={work.start:.3f}")))
    if found > DETAILS:
        verdict.violations.append(Violation(checker, f"... {found} overlaps in all"))
    return found


def _check_exits(events: Sequence[Event], verdict: Verdict) -> int:
    """One problem per process (its runner's own `exit` says most): its count."""
    until = max((float(e["until"]) for e in events if e["f"] == "phase"), default=math.inf)
    found: dict[int, str] = {}
    for event in events:
        f = event["f"]
        if f == "exit" and event["type"] == "fail":
            detail = "; ".join(event.get("detail") or []) or event.get("error", "")
            found[int(event["pid"])] = (f"{event['process']} (pid {event['pid']}) exited at "
                                        f"t={event['t']:.3f}: its runner died: {detail}")
        elif f == "crash":
            found.setdefault(int(event["pid"]), (
                f"{event['worker']} (pid {event['pid']}) exited with "
                f"{event.get('returncode')} at t={event['t']:.3f} without being killed (see "
                "workers.log)"))
        elif f == "stop" and float(event["t"]) < until - 1.0 and not event.get("code"):
            found.setdefault(int(event["pid"]), (
                f"{event['process']} (pid {event['pid']}) stopped at t={event['t']:.3f}, "
                "before the end"))
        elif f == "worker-exit" and event.get("straggler"):
            found.setdefault(int(event["target_pid"]), (
                f"{event['worker']} (pid {event['target_pid']}) had not stopped 15 s after "
                "the end"))
    problems = list(found.values())
    for problem in problems[:DETAILS]:
        verdict.violations.append(Violation("exits", problem))
    if len(problems) > DETAILS:
        verdict.violations.append(Violation("exits", f"... {len(problems)} exits in all"))
    return len(problems)


def _heals(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e["f"] == "heal" and e["type"] == "info"]


def _check_liveness(events: Sequence[Event], done: Sequence[float], verdict: Verdict,
                    what: str) -> list[float]:
    """Time from each heal to the first `done` moment after it, against the heal's bound."""
    last = max((float(e["t"]) for e in events), default=0.0)
    until = min([float(e["until"]) for e in events if e["f"] == "phase"] or [last])
    waits = []
    for heal in _heals(events):
        at, bound = float(heal["t"]), float(heal["bound"])
        first = min((t for t in done if t >= at), default=None)
        if first is not None:
            waits.append(first - at)
            if first - at <= bound:
                continue
            message = f"the first {what} after the faults stopped came {first - at:.2f} s later"
        elif min(until, last) - at < bound:
            continue  # the run ended before the bound: nothing to conclude
        else:
            message = f"no {what} at all after the faults stopped"
        verdict.violations.append(Violation("liveness", f"{message} (bound {bound:g} s)"))
    return waits


def _recoveries(events: Sequence[Event], done: Sequence[float]) -> list[float]:
    """From each store restart's end (the server back) to the next `done` moment."""
    found = []
    for event in events:
        if event["f"] == "fault-end" and event.get("kind") == "restart":
            first = min((t for t in done if t >= float(event["t"])), default=None)
            if first is not None:
                found.append(round(first - float(event["t"]), 3))
    return found


def _figures_of(waits: Sequence[float]) -> dict[str, Any]:
    if not waits:
        return {}
    return {"median": round(statistics.median(waits), 3), "max": round(max(waits), 3)}


# -- jobs ---------------------------------------------------------------------------------------

def check_jobs(events: Sequence[Event], period: float) -> Verdict:
    """Run the jobs workload's checkers (see the module docstring).

    Example::

        verdict = check_jobs(events, period=1.0)
        assert not verdict.violations
    """
    verdict = Verdict(checkers=dict(JOBS_CHECKERS))
    ordered = sorted(events, key=lambda e: (e["t"], e.get("seq", 0)))
    check_writes(ordered, verdict)
    check_counter(ordered, verdict)
    runs = _works(ordered, "run", "period")
    killed = _killed_at(ordered)
    overlaps = _check_overlaps(runs, killed, verdict, "runs", "two runs of the job at once",
                               same_key=False)
    verdict.overlaps = overlaps
    records = [e for e in ordered if e["f"] == "record" and e["type"] == "ok"
               and e.get("written")]
    periods = _check_periods(ordered, runs, records, killed, period, verdict)
    _check_run_tokens(runs, verdict)
    exits = _check_exits(ordered, verdict)
    done = [float(e["t"]) for e in records]
    verdict.takeovers = _check_liveness(ordered, done, verdict, "recorded period")
    recoveries = _recoveries(ordered, done)
    outcomes = Counter("killed" if run.end is None else
                       "ok" if run.ok else str(run.end.get("error")) for run in runs)
    verdict.figures = {
        "runs": len(runs), "runs by outcome": dict(sorted(outcomes.items())),
        **periods, "overlapping runs": overlaps, "worker exits": exits,
        "first recorded period after the faults stopped (s)": [round(w, 3)
                                                                for w in verdict.takeovers],
        "recovery after store restart (s)": recoveries,
        **({"recovery after store restart: median / max (s)": _figures_of(recoveries)}
           if recoveries else {}),
    }
    return verdict


def _check_periods(events: Sequence[Event], runs: Sequence[Work], records: Sequence[Event],
                   killed: dict[int, float], period: float,
                   verdict: Verdict) -> dict[str, Any]:
    by_period: dict[float, list[Work]] = defaultdict(list)
    for run in runs:
        by_period[float(run.key)].append(run)
    recorded: dict[float, list[Event]] = defaultdict(list)
    for record in records:
        recorded[float(record["period"])].append(record)
    record_tries = defaultdict(list)  # (pid, token) -> record events of that run's lease
    for event in events:
        if event["f"] == "record" and event["type"] != "invoke":
            record_tries[(int(event["pid"]), event.get("token"))].append(event)
    last = max((float(e["t"]) for e in events), default=0.0)
    heal_bound = max((float(e["bound"]) for e in _heals(events)), default=0.0)
    problems: list[str] = []
    not_recorded: Counter[str] = Counter()
    ran_again = 0
    for start in sorted(by_period):
        its_runs = sorted(by_period[start], key=lambda w: w.start)
        its_records = recorded.get(start, [])
        label = f"period {_clock(start)}"
        if len(its_records) > 1:
            problems.append(f"{label} was recorded {len(its_records)} times (tokens "
                            f"{', '.join(str(r['token']) for r in its_records)})")
        if its_records:
            first = min(float(r["t"]) for r in its_records)
            late = [run for run in its_runs if run.start > first]
            if late:
                problems.append(f"{label} ran again after it was recorded at t={first:.3f}: "
                                f"{late[0].process} (token {late[0].token}) began at "
                                f"t={late[0].start:.3f}")
        wrote = [run for run in its_runs if run.wrote]
        if len(wrote) > 1:
            ran_again += 1
            recorded_early = [run for run in wrote[:-1]
                              if any(r.get("written") for r in
                                     record_tries.get((run.pid, run.token), []))]
            if recorded_early:
                problems.append(f"{label}: its job ran to its write {len(wrote)} times and an "
                                "earlier run had recorded it")
        if its_records:
            continue
        reason = _why_not_recorded(its_runs, record_tries, killed)
        later = any(p > start for p in recorded)
        if later:
            not_recorded[f"{reason}; the next run covered it (misfire)"] += 1
        elif last - (start + period) < heal_bound:
            not_recorded[f"{reason}; the run ended before the next period"] += 1
        else:
            problems.append(f"{label} began ({len(its_runs)} run(s), {reason}) and was never "
                            "recorded, nor was any later period")
    for problem in problems[:DETAILS]:
        verdict.violations.append(Violation("periods", problem))
    if len(problems) > DETAILS:
        verdict.violations.append(Violation("periods", f"... {len(problems)} in all"))
    started = sorted(by_period)
    missed = 0
    if started:
        span = round((started[-1] - started[0]) / period) + 1
        missed = max(0, span - len(started))
    return {"periods started": len(by_period), "periods recorded": len(recorded),
            "periods recorded more than once": sum(len(r) > 1 for r in recorded.values()),
            "periods not recorded, by reason": dict(sorted(not_recorded.items())),
            "periods whose job wrote more than once": ran_again,
            "periods with no run at all (no holder or store down; coalesced)": missed}


def _why_not_recorded(runs: Sequence[Work], record_tries: dict[tuple[int, Any], list[Event]],
                      killed: dict[int, float]) -> str:
    reasons = []
    for run in runs:
        tries = record_tries.get((run.pid, run.token), [])
        if run.end is None:
            reasons.append("killed" if run.pid in killed else "no end")
        elif not run.ok:
            reasons.append(f"run {run.end.get('error')}")
        elif any(t["type"] == "fail" for t in tries):
            reasons.append("record failed (store error)")
        elif tries:
            reasons.append("record refused (lease lost)")
        else:
            reasons.append("lease lost before the record")
    return ", ".join(sorted(set(reasons))) or "no run"


def _check_run_tokens(runs: Sequence[Work], verdict: Verdict) -> None:
    found = 0
    highest: Work | None = None
    for run in sorted(runs, key=lambda w: w.start):
        if run.token is None:
            continue
        if highest is not None and run.token <= int(highest.token or 0) and not (
                run.token == highest.token and run.pid == highest.pid):
            found += 1
            if found <= DETAILS:
                verdict.violations.append(Violation("tokens", (
                    f"{run.process} began a run with token {run.token} at t={run.start:.3f}, "
                    f"after {highest.process} began one with token {highest.token} at "
                    f"t={highest.start:.3f}")))
        if highest is None or run.token > int(highest.token or 0):
            highest = run
    verdict.duplicate_tokens = found
    if found > DETAILS:
        verdict.violations.append(Violation("tokens", f"... {found} in all"))


def _clock(epoch: float) -> str:
    """A period's start as UTC time of day, to the millisecond."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


# -- queue --------------------------------------------------------------------------------------

def check_queue(events: Sequence[Event]) -> Verdict:
    """Run the queue workload's checkers (see the module docstring).

    Example::

        verdict = check_queue(events)
        assert not verdict.violations
    """
    verdict = Verdict(checkers=dict(QUEUE_CHECKERS))
    ordered = sorted(events, key=lambda e: (e["t"], e.get("seq", 0)))
    check_writes(ordered, verdict)
    check_counter(ordered, verdict)
    handlings = _works(ordered, "handle", "key")
    killed = _killed_at(ordered)
    overlaps = _check_overlaps(handlings, killed, verdict, "keys",
                               "two handlers of one key at once", same_key=True)
    verdict.overlaps = overlaps
    messages = _check_messages(ordered, handlings, verdict)
    exits = _check_exits(ordered, verdict)
    done = [float(e["t"]) for e in ordered if e["f"] == "complete" and e["type"] == "ok"]
    verdict.takeovers = _check_liveness(ordered, done, verdict, "completed message")
    recoveries = _recoveries(ordered, done)
    verdict.figures = {
        **messages, "handler runs": len(handlings), "overlapping handlers of a key": overlaps,
        "worker exits": exits,
        "first completed message after the faults stopped (s)": [round(w, 3) for w in
                                                                   verdict.takeovers],
        "recovery after store restart (s)": recoveries,
        **({"recovery after store restart: median / max (s)": _figures_of(recoveries)}
           if recoveries else {}),
    }
    return verdict


def _check_messages(events: Sequence[Event], handlings: Sequence[Work],
                    verdict: Verdict) -> dict[str, Any]:
    # Messages are known by their number n (Azure gives a released message a new id).
    sent = {str(e["n"]): e for e in events if e["f"] == "enqueue" and e["type"] == "ok"}
    failed_sends = sum(e["f"] == "enqueue" and e["type"] == "fail" for e in events)
    completed: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        if event["f"] == "complete" and event["type"] == "ok":
            completed[str(event["n"])].append(event)
    poisoned = {str(e["n"]): e for e in events if e["f"] == "poisoned"}
    final = next((e for e in events if e["f"] == "queue-final"), None)
    handled_ok: dict[str, list[Work]] = defaultdict(list)
    for work in handlings:
        if work.ok and work.end is not None:
            handled_ok[str(work.end["n"])].append(work)
    problems: list[str] = []
    stale = 0
    # An untried release on Azure sends a copy, then deletes the original: a release never
    # answered (its worker killed mid-call) may have left both, each completed once.
    copies = _unanswered(events, "release")
    for message, completions in completed.items():
        if len(completions) > 1 + copies[message]:
            problems.append(f"message {message} was completed {len(completions)} times")
        if message in poisoned:
            problems.append(f"message {message} was completed and is in the poison queue")
        # At least once (docs/jobs/queues.md): a delivery whose visibility ran out (its worker
        # paused) may still be handled after another one completed the message; its own
        # complete is refused. Counted, not flagged: a second completion would be.
        first = float(completions[0]["t"])
        stale += any(w.start > first for w in handled_ok.get(message, []))
    for message, entry in poisoned.items():
        if not entry.get("reason"):
            problems.append(f"message {message} is in the poison queue without a reason")
    # A complete sent but never answered (its worker was killed mid-call) may have deleted the
    # message: as in Jepsen, an indeterminate operation may have happened, so such a message is
    # not counted lost (a complete that failed was answered: its message still counts).
    unanswered = set(_unanswered(events, "complete"))
    lost = [m for m in sent if m not in completed and m not in poisoned and m not in unanswered]
    if lost:
        problems.append(f"{len(lost)} message(s) sent but neither completed nor poisoned "
                        f"(e.g. {', '.join(lost[:5])}); left in the queue at the end: "
                        f"{final.get('remaining') if final else 'unknown'}")
    if final is None:
        problems.append("the queue was not inspected at the end (no queue-final event)")
    unexpected = [m for m in poisoned if m in sent and not sent[m].get("poison")]
    for problem in problems[:DETAILS]:
        verdict.violations.append(Violation("messages", problem))
    if len(problems) > DETAILS:
        verdict.violations.append(Violation("messages", f"... {len(problems)} in all"))
    reasons = Counter(_reason_kind(str(e.get("reason"))) for e in poisoned.values())
    return {"messages sent": len(sent), "sends failed (may exist or not)": failed_sends,
            "messages completed": len(completed),
            "messages poisoned, by reason": dict(sorted(reasons.items())),
            "messages poisoned that were not meant to fail": len(unexpected),
            "messages handled more than once (not completed the first time)": sum(
                len(works) > 1 for works in handled_ok.values()),
            "messages handled again after they were completed (stale delivery)": stale,
            "messages left in the queue": None if final is None else final.get("remaining"),
            "messages lost": len(lost),
            "completes unanswered (the message may be deleted)": len(
                [m for m in unanswered if m not in completed])}


def _unanswered(events: Sequence[Event], f: str) -> Counter[str]:
    """How many times each message (by number n) had `f` sent by some process and never
    answered there, neither ok nor fail: the process was killed mid-call."""
    pending: dict[tuple[object, str], int] = defaultdict(int)
    for event in events:
        if event["f"] != f:
            continue
        key = (event.get("pid"), str(event["n"]))
        if event["type"] == "invoke":
            pending[key] += 1
        elif event["type"] in ("ok", "fail"):
            pending[key] -= 1
    return Counter({n: count for (_pid, n), count in pending.items() if count > 0})


def _reason_kind(reason: str) -> str:
    for kind in ("handler failed", "not JSON", "received", "has no property"):
        if kind in reason:
            return kind
    return reason[:60]
