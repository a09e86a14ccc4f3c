"""The faults: a schedule drawn from the seed, and the nemesis that injects it, one fault at a
time, into the current holder where there is one.

- kill: SIGKILL the holder, restart its worker 0.2 to 1 s later;
- pause: the holder stops itself (SIGSTOP) right before its next write, for 0.5x, 1.5x or 3x
  the ttl, then SIGCONT (the GC-pause case; a direct SIGSTOP if it reaches no write in 3 s);
- proxy: the holder's proxy adds latency above the renewal interval, blackholes, or resets
  every connection, for 0.5 to 1.5 ttl;
- stall: every worker is asked to hold its next critical section until it is told its lease is
  lost; the first that does (the holder) keeps the request, the others forget it, and its path
  to the store goes silent (its proxies stop reading and
  forwarding, connections stay open) for the ttl plus 0.5 to 1 ttl (at most 4 s more), past
  every deadline of its leases, then flows again; on SQLite the nemesis holds the database's
  write lock that long instead, which stalls every worker's store calls;
- fork: the holder forks a child in its next critical section; the child uses the store afresh
  (acquires and releases a name of its own) and exits with sys.exit, so atexit handlers run;
  the parent goes on with its section for half a ttl, across a renewal;
- restart: the store server restarts, through the callable the caller passed.

The seed fixes the kinds, their order, lengths and gaps; which worker is hit depends on who
holds the lock at that moment. When the fault window ends, everything heals at once (SIGCONT,
killed workers restarted, proxies back to normal, a restart finished) and a `heal` event marks
where liveness is measured from.

Example::

    plan = plan_faults(random.Random(7), ("kill", "pause"), ttl=2.0, window=20.0)
    nemesis = Nemesis(fleet, history, settings, proxies={}, proxy_host=None, restart=None)
    nemesis.begin_phase("chaos", plan, window_end=time.monotonic() + 20.0)
    while ...:
        nemesis.observe(new_events)
        nemesis.tick()
"""

from __future__ import annotations

import math
import random
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tenure.chaos._fleet import Fleet, WorkerProcess
from tenure.chaos._history import Event, HistoryWriter
from tenure.chaos._proxy import Proxy, ProxyHost
from tenure.chaos._requests import RequestBoard, requests_path
from tenure.chaos._settings import ChaosSettings

PAUSE_WAIT = 3.0  # how long a pause (or a fork) waits for the holder to reach its point
RESTART_ESTIMATE = 3.0  # a store restart is not started unless this much of the window is left
PROXY_MODES = ("latency", "blackhole", "reset")
FORK_SIGNAL = signal.SIGWINCH  # asks the holder to fork in its next critical section
HOLD_SIGNAL = signal.SIGURG  # asks the holder to hold its next section until told of the loss
# The jobs and queue workloads' units of work: a job's run, a message's handler. While one runs,
# its worker is the holder; a pause is asked of every worker, the first to reach its write takes it.
WORK = ("run", "handle")


# How soon a fault with no worker to aim at (all still starting) is tried again.
_NO_TARGET_RETRY = 0.1


@dataclass(frozen=True)
class PlannedFault:
    """One fault of the schedule: what, how long, and the gap before it."""

    kind: str
    gap: float
    seconds: float = 0.0  # kill: restart after; proxy and stall: how long
    factor: float = 0.0  # pause: multiple of the ttl
    mode: str = ""  # proxy: latency, blackhole or reset

    def within(self, left: float, ttl: float, first_of_kind: bool,
               running: bool = False) -> PlannedFault | None:
        """This fault if it fits in the `left` seconds of the window; else, when the phase has
        not had its kind yet, the fault cut to fit where its length is the plan's to choose (a
        kill's restart delay; a proxy fault, down to one renewal interval; once the phase is
        `running`, a pause too, down to half the ttl); else None. (While planning, a pause that
        does not fit is left out instead: its length is the point of its factor, and the time
        left may still hold another kind's first fault.)

        A fault that ran long (a slow server restart, a holder slow to reach its write) must
        not cost the phase a kind it has not had.

        Example::

            PlannedFault("proxy", gap=1.0, seconds=3.0, mode="reset").within(1.0, 2.0, True)
            # -> the same proxy fault, 1 s long
        """
        if self.estimate(ttl) <= left:
            return self
        if self.kind == "pause":
            # Under way, a shorter pause (in tenths of the ttl) than planned rather than none:
            # the phase still has a holder frozen mid-section.
            factor = min(self.factor, math.floor(left / ttl * 10) / 10)
            return replace(self, factor=factor) if running and first_of_kind and \
                factor >= 0.5 else None
        # None: not ours to cut. A stall stays past every deadline of the holder's leases.
        shortest = {"kill": 0.0, "proxy": ttl / 3, "stall": stall_seconds(ttl, 0.5)}.get(
            self.kind)
        if first_of_kind and shortest is not None and left > 0 and left >= shortest:
            return replace(self, seconds=min(self.seconds, left))
        return None

    def estimate(self, ttl: float) -> float:
        """Seconds it may last, to keep it inside the fault window."""
        if self.kind == "pause":
            return self.factor * ttl
        if self.kind == "restart":
            return RESTART_ESTIMATE
        if self.kind == "fork":
            return ttl / 2 + 1.0  # the parent's section after the fork, and the child
        return self.seconds

    @property
    def label(self) -> str:
        if self.kind == "pause":
            return f"pause {self.factor:g}x ttl"
        if self.kind == "proxy":
            return f"proxy {self.mode}"
        return self.kind


def stall_seconds(ttl: float, share: float) -> float:
    """A stall's length: the ttl plus `share` (0.5 to 1) of the ttl, at most 4 s more. A lease
    renewed right before the stall began has its deadline within 0.99 ttl - margin: every lease
    of the holder passes its deadline during the stall, well before it ends.

    Example::

        stall_seconds(2.0, 0.5)   # 3.0
    """
    return ttl + share * min(ttl, 4.0)


def plan_faults(chance: random.Random, kinds: Sequence[str], ttl: float, window: float,
                pause_factors: Sequence[float] = (0.5, 1.5, 3.0)) -> list[PlannedFault]:
    """The faults that fit in `window` seconds, drawn from `chance` (a seeded Random).

    Every kind comes once first, in a shuffled order except that a restart comes last (its
    length is the server's, so it must not push a kind whose length the plan sets out of the
    window), then kinds are drawn at random; a kind's first fault is cut to fit where its
    length is the plan's (see PlannedFault.within). Pause lengths and proxy modes cycle through
    a shuffled order, so a run with three pauses has one of each length.

    Example::

        plan_faults(random.Random(1), ("kill", "pause", "proxy"), ttl=2.0, window=30.0)
    """
    factors = list(pause_factors)
    modes = list(PROXY_MODES)
    chance.shuffle(factors)
    chance.shuffle(modes)
    plan: list[PlannedFault] = []
    used = 0.0
    counts: dict[str, int] = {}
    first_round = list(kinds)  # every kind once, in a seeded order; then at random
    chance.shuffle(first_round)
    first_round.sort(key=lambda kind: kind == "restart")  # stable: the others keep their order
    for _ in range(200 if kinds else 0):
        kind = first_round.pop(0) if first_round else chance.choice(list(kinds))
        gap = chance.uniform(0.25, 1.0) * min(ttl, 4.0)
        if kind == "kill":
            fault = PlannedFault(kind, gap, seconds=chance.uniform(0.2, 1.0))
        elif kind == "pause":
            fault = PlannedFault(kind, gap, factor=factors[counts.get("pause", 0) % len(factors)])
        elif kind == "proxy":
            mode = modes[counts.get("proxy", 0) % len(modes)]
            fault = PlannedFault(kind, gap, seconds=chance.uniform(0.5, 1.5) * ttl, mode=mode)
        elif kind == "stall":
            fault = PlannedFault(kind, gap, seconds=stall_seconds(ttl, chance.uniform(0.5, 1.0)))
        else:
            fault = PlannedFault(kind, gap)
        fitted = fault.within(window - used - gap, ttl, first_of_kind=kind not in counts)
        if fitted is None:
            continue  # too long for what is left; a shorter one may fit
        used += gap + fitted.estimate(ttl)
        counts[kind] = counts.get(kind, 0) + 1
        plan.append(fitted)
    return plan


@dataclass
class _Active:
    """The fault being injected now."""

    planned: PlannedFault
    worker: WorkerProcess | None
    started: float
    ends_at: float | None = None  # None: waiting (a pause for its write, a restart thread)
    thread: threading.Thread | None = None
    error: list[str] = field(default_factory=list)
    database: sqlite3.Connection | None = None  # a SQLite stall: the write lock it holds


class Nemesis:
    """Injects one phase's planned faults into the fleet, then heals everything."""

    def __init__(self, fleet: Fleet, history: HistoryWriter, settings: ChaosSettings,
                 proxies: dict[int, list[Proxy]], proxy_host: ProxyHost | None,
                 restart: Callable[[], object] | None, chance: random.Random,
                 database: str | None = None) -> None:
        self.fleet = fleet
        self.history = history
        self.settings = settings
        self.ttl = settings.lease_ttl
        self.proxies = proxies  # by worker number: one per store host
        self.database = database  # SQLite: the file a stall locks
        self.proxy_host = proxy_host
        self.restart = restart
        self.chance = chance
        self.plan: list[PlannedFault] = []
        self.injected: set[str] = set()  # the kinds this phase has had
        self.active: _Active | None = None
        self.next_at = 0.0
        self.window_end = 0.0
        self.name = ""
        self.healed = True
        self.holding: dict[int, float] = {}  # pid -> when it was granted, while it holds
        self.restart_at: dict[int, float] = {}  # worker number -> when to restart it
        self.last_worker: int | None = None  # jobs, queue: the pid that last began work
        # Pids that said `start`: their signal handlers are installed. SIGUSR1 and SIGUSR2 kill
        # a process that has none yet (a worker just restarted), so only these are signalled.
        self.listening: set[int] = set()
        self.started = time.monotonic()
        # What is asked of each worker: written before each signal (see _requests.py).
        self.requests = RequestBoard()

    # -- what the workers do -------------------------------------------------------------------

    def observe(self, events: Sequence[Event]) -> None:
        """Follow who holds a lease, and the pauses the workers put themselves into."""
        for event in events:
            pid, f, type_ = event.get("pid"), event["f"], event["type"]
            if event.get("by") == "oracle" or not isinstance(pid, int):
                continue
            if f == "start":
                self.listening.add(pid)
            if (f == "acquire" and type_ == "ok") or (f in WORK and type_ == "invoke"):
                self.holding[pid] = event["t"]
                if f in WORK:
                    self.last_worker = pid
            elif f in ("release", "stop", *WORK) and type_ != "invoke":
                self.holding.pop(pid, None)
            elif f == "pause" and type_ == "info":
                self._paused_itself(pid, event["t"])
            elif f == "fork" and type_ in ("ok", "fail"):
                self._forked(pid, event["t"])
            elif f == "hold" and type_ == "info":
                self._holding(pid)

    def _paused_itself(self, pid: int, at: float) -> None:
        worker = self.fleet.by_pid(pid)
        active = self.active
        if worker is None:
            return
        if active is not None and active.planned.kind == "pause" and active.worker is None \
                and active.ends_at is None:  # asked of every worker: the first one takes it
            active.worker = worker
            self._forget_all_but(worker)
        if active is not None and active.worker is worker and active.ends_at is None:
            active.ends_at = at + active.planned.factor * self.ttl
            worker.state = "paused"
        else:  # a request that outlived its fault: do not let it pause anyone now
            self.fleet.cont(worker)

    def _forked(self, pid: int, at: float) -> None:
        active = self.active
        if active is not None and active.planned.kind == "fork" and active.ends_at is None \
                and active.worker is not None and active.worker.pid == pid:
            active.ends_at = at + self.ttl / 2  # the parent's section goes on that long

    def _holding(self, pid: int) -> None:
        active = self.active
        if active is None or active.planned.kind != "stall" or active.ends_at is not None:
            return
        active.worker = self.fleet.by_pid(pid)
        for other in self._listening():
            if other is not active.worker and other.pid is not None:
                self._forget(other)  # one holder is stalled, not several
        self._stall(active, time.monotonic())

    def _listening(self) -> list[WorkerProcess]:
        """The running workers that can take a request by signal (see `listening`)."""
        return [w for w in self.fleet.running() if w.pid in self.listening]

    def _ask(self, worker: WorkerProcess, kind: str, signum: int) -> None:
        """Ask `kind` of `worker`: its request file first, then the signal that wakes it."""
        if worker.pid is not None:
            self.requests.ask(worker.pid, self._requests_path(worker), kind, signum)

    def _forget(self, worker: WorkerProcess) -> None:
        """Take back every request to `worker` not yet carried out (SIGUSR2 wakes it)."""
        if worker.pid is not None:
            self.requests.forget(worker.pid, self._requests_path(worker))

    @staticmethod
    def _requests_path(worker: WorkerProcess) -> Path:
        assert worker.pid is not None
        return requests_path(worker.settings["control"], worker.pid)

    def _forget_all_but(self, worker: WorkerProcess | None) -> None:
        """SIGUSR2 every running worker but `worker`: forget a request asked of all."""
        for other in self._listening():
            if other is not worker and other.pid is not None:
                self._forget(other)

    def _stall(self, active: _Active, now: float) -> None:
        """Stall the holder's path now (SQLite: lock the database), for the planned length."""
        worker = active.worker
        self.history.emit("info", "stall", name=self.name, **(
            {} if worker is None else {"worker": worker.name, "target_pid": worker.pid}))
        what = "the database locked" if self.database is not None else "its path silent"
        self._say(f"stall: {what}" + ("" if worker is None else
                                      f", {worker.name} (pid {worker.pid}) holding"))
        if self.database is not None:
            active.database = self._lock_database()
        elif active.worker is not None:
            self._set_proxies(active.worker, "stall")
        active.ends_at = now + active.planned.seconds

    # -- the schedule --------------------------------------------------------------------------

    def begin_phase(self, name: str, plan: list[PlannedFault], start: float,
                    window_end: float) -> None:
        self.name, self.plan, self.window_end, self.healed = name, list(plan), window_end, False
        self.injected = set()
        self.next_at = start + (plan[0].gap if plan else 0.0)

    def tick(self) -> None:
        """Advance: restart and thaw on time, end the active fault, start the next one, and heal
        once the window is over."""
        now = time.monotonic()
        self._supervise(now)
        active = self.active
        if active is not None:
            self._advance(active, now)
        if self.healed:
            return
        if now >= self.window_end:
            self.heal()
            return
        if self.active is None and self.plan and now >= self.next_at:
            planned = self.plan.pop(0)
            fitted = planned.within(self.window_end - now, self.ttl,
                                    first_of_kind=planned.kind not in self.injected,
                                    running=True)
            if fitted is not None:
                if not self._start(fitted, now):
                    # No worker to aim it at yet (every running one is still starting, as
                    # after a kill): try it again shortly instead of dropping it.
                    self.plan.insert(0, planned)
                    self.next_at = now + _NO_TARGET_RETRY
            elif self.plan:  # it does not fit in what is left: maybe the next one does
                self.next_at = now

    def _supervise(self, now: float) -> None:
        for worker in self.fleet.workers:
            process = worker.process
            if worker.state == "killed" and now >= self.restart_at.get(worker.number, now):
                self.fleet.restart(worker)
                self.history.emit("info", "restart-worker", worker=worker.name,
                                  pid=worker.pid)
            elif worker.state == "running" and process is not None and \
                    process.poll() is not None and not self.healed:
                # Died without being killed: recorded, and restarted like a killed one.
                self.history.emit("info", "crash", worker=worker.name, pid=process.pid,
                                  returncode=process.returncode)
                self.holding.pop(process.pid, None)
                self.fleet.restart(worker)

    def _holder(self) -> WorkerProcess | None:
        """The running worker that was granted a lease most recently and still holds it; else
        a running worker at random (of those that can take a signal)."""
        running = self._listening()
        holders = [(self.holding[w.pid], w) for w in running
                   if w.pid is not None and w.pid in self.holding]
        if holders:
            return max(holders, key=lambda pair: pair[0])[1]
        last = next((w for w in running if w.pid == self.last_worker), None)
        if last is not None:  # jobs, queue: the worker that worked last, likely again soon
            return last
        return self.chance.choice(running) if running else None

    def _start(self, planned: PlannedFault, now: float) -> bool:
        """Start `planned`; False when it needs a worker and none can take it now."""
        # A stall goes to whoever holds its section first (asked of every worker below); so
        # does a pause in the jobs and queue workloads, whose units of work are short.
        anyone = ("restart", "stall", "pause") if self.settings.workload != "lock" else (
            "restart", "stall")
        worker = None if planned.kind in anyone else self._holder()
        if planned.kind not in anyone and worker is None:
            return False
        active = _Active(planned, worker, now)
        self.active = active
        self.injected.add(planned.kind)
        target: dict[str, Any] = {} if worker is None else {
            "worker": worker.name, "target_pid": worker.pid}
        self.history.emit("info", "fault", kind=planned.kind, label=planned.label,
                          name=self.name, **target)
        self._say(f"{planned.label}" + (f" {worker.name} (pid {worker.pid})" if worker else ""))
        if planned.kind == "kill":
            assert worker is not None
            if worker.pid is not None:
                self.holding.pop(worker.pid, None)
            self.fleet.kill(worker)
            self.restart_at[worker.number] = now + planned.seconds
            active.ends_at = now + planned.seconds
        elif planned.kind == "pause":
            # It stops itself right before its next write.
            for each in [worker] if worker is not None else self._listening():
                self._ask(each, "pause", signal.SIGUSR1)
        elif planned.kind == "fork":
            assert worker is not None and worker.pid is not None
            self._ask(worker, "fork", FORK_SIGNAL)  # it forks in its next critical section
        elif planned.kind == "proxy":
            assert worker is not None
            # Latency above the renewal interval (ttl / 3): renewals arrive late.
            latency = 1.5 * self.ttl / 3 if planned.mode == "latency" else 0.0
            self._set_proxies(worker, planned.mode, latency)
            active.ends_at = now + planned.seconds
        elif planned.kind == "stall":
            for each in self._listening():  # the stall begins once one holds its section
                self._ask(each, "hold", HOLD_SIGNAL)
        else:
            active.thread = threading.Thread(target=self._restart_store, args=(active,),
                                             name="chaos-restart", daemon=True)
            active.thread.start()
        return True

    def _set_proxies(self, worker: WorkerProcess, mode: str, latency: float = 0.0) -> None:
        if self.proxy_host is not None:
            for proxy in self.proxies.get(worker.number, []):
                self.proxy_host.set_mode(proxy, mode, latency=latency)

    def _lock_database(self) -> sqlite3.Connection:
        """Take the SQLite database's write lock and keep it: every store call that writes
        (acquire, renew, release) waits on it, as behind a long transaction or a backup."""
        assert self.database is not None
        database = sqlite3.connect(self.database, isolation_level=None, timeout=10.0,
                                   check_same_thread=False)
        database.execute("BEGIN EXCLUSIVE")
        return database

    def _restart_store(self, active: _Active) -> None:
        assert self.restart is not None
        try:
            self.restart()
        except Exception as exc:  # recorded; the run goes on against whatever came back
            active.error.append(f"{type(exc).__name__}: {exc}")

    def _advance(self, active: _Active, now: float) -> None:
        planned, worker = active.planned, active.worker
        # While no worker holds a lease (a killed holder's lease runs out first: 15 s on Azure),
        # a stall waits up to a ttl longer for one: stalling a worker that holds nothing
        # would lose no lease, and prove nothing.
        patience = PAUSE_WAIT + (0.0 if self.holding else self.ttl)
        if planned.kind == "stall" and active.ends_at is None and \
                now - active.started > patience:
            # Nobody reached a section in time: stall the likely holder wherever it is. It keeps
            # its request to hold (it may be in a long section, and holds once that ends);
            # the others forget theirs.
            active.worker = self._holder()
            for each in self._listening():
                if each is not active.worker:
                    self._forget(each)
            self._stall(active, now)
        if planned.kind == "fork" and active.ends_at is None and \
                now - active.started > PAUSE_WAIT:
            active.error.append("the holder reached no critical section: no fork")
            if worker is not None:
                self._forget(worker)  # forget the request
            active.ends_at = now
        if planned.kind == "pause" and active.ends_at is None and worker is None and \
                now - active.started > PAUSE_WAIT:
            worker = active.worker = self._holder()  # nobody reached a write: stop one anyway
            self._forget_all_but(None)
        if planned.kind == "pause" and active.ends_at is None and now - active.started > \
                PAUSE_WAIT and worker is not None and worker.state == "running":
            # It reached no write in time: stop it wherever it is.
            assert worker.pid is not None
            self._forget(worker)  # forget the request
            self.fleet.stop(worker)
            self.history.emit("info", "pause", process="nemesis", worker=worker.name,
                              target_pid=worker.pid, direct=True)
            active.ends_at = now + planned.factor * self.ttl
        if planned.kind == "restart":
            if active.thread is not None and not active.thread.is_alive():
                self._end(active, now)
            return
        if active.ends_at is not None and now >= active.ends_at:
            self._end(active, now)

    def _end(self, active: _Active, now: float) -> None:
        planned, worker = active.planned, active.worker
        if planned.kind == "pause" and worker is not None:
            self.fleet.cont(worker)
        elif planned.kind in ("proxy", "stall") and worker is not None:
            self._set_proxies(worker, "normal")
        if active.database is not None:
            active.database.execute("ROLLBACK")
            active.database.close()
        errors: dict[str, Any] = {"error": active.error[0]} if active.error else {}
        self.history.emit("info", "fault-end", kind=planned.kind, label=planned.label,
                          name=self.name, seconds=round(now - active.started, 3), **errors)
        self.active = None
        if self.plan:
            self.next_at = now + self.plan[0].gap

    def heal(self) -> None:
        """End every fault now; the `heal` event is where liveness is measured from."""
        active = self.active
        if active is not None:
            if active.thread is not None:
                active.thread.join()
            self._end(active, time.monotonic())
        self.plan.clear()
        for worker in self.fleet.workers:
            if worker.state == "killed":
                self.fleet.restart(worker)
                self.history.emit("info", "restart-worker", worker=worker.name, pid=worker.pid)
            elif worker.pid is not None:
                if worker.pid in self.listening:
                    self._forget(worker)  # forget a pause or fork request
                self.fleet.cont(worker)
            self._set_proxies(worker, "normal")
        self.healed = True
        self.history.emit("info", "heal", name=self.name,
                          bound=self.settings.liveness_bound)
        self._say("healed: every fault is over")

    def _say(self, message: str) -> None:
        console = self.settings.console
        if console is not None:
            console.print(f"{time.monotonic() - self.started:7.2f} s  {message}", markup=False)
