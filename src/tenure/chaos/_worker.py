"""One chaos worker, as its own OS process:

    python -m tenure.chaos._worker SETTINGS_JSON

It waits for the run's control file (the phases, on the shared monotonic clock), then loops
until the last phase ends: acquire the phase's lock (or a slot of its semaphore), read the
counter of that name and slot from the oracle, sleep a random time (the work: mostly a few
milliseconds, one section in twenty about half the ttl, so that renewals happen inside), check the
lease, write value + 1 with the lease's fencing token, release. Every step goes to the history;
so do renewals and losses.

On SIGUSR1 the worker stops itself (SIGSTOP) in its next critical section, after the check and
right before the write: the worst moment for a GC pause, the one only fencing covers. The
orchestrator sends SIGCONT after the pause's length.

On SIGWINCH it forks in its next critical section, right after the read: the child uses the
store it inherited afresh (acquires and releases a name of its own) and exits with sys.exit,
so atexit handlers run; the parent waits for it, then goes on with its section for half a ttl,
across a renewal. The parent's lease must come through untouched.

On SIGURG it holds its critical section (right after the read, or after the work when asked
during it) until it is told its lease was lost (`on_lost`) or 2 ttl + 1 s have passed: the
nemesis stalls its path to the store meanwhile, so the lease is lost while its holder is
still at work, which is when the loss signal matters. SIGUSR2 forgets any request. Each
signal only wakes the worker: the request is in a file the nemesis writes first (_requests.py).

A loss is recorded with the lease's local deadline (`lost`, from `on_lost`), and so is every
release, so the checker can tell how late each loss signal came, and spot one that never came.

Example (what the orchestrator runs)::

    subprocess.Popen([sys.executable, "-m", "tenure.chaos._worker", json.dumps(settings)])
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import tenure
from tenure.chaos._history import HistoryWriter
from tenure.chaos._lifeline import watch_parent
from tenure.chaos._oracle import OracleClient
from tenure.chaos._requests import Requests, listen, requests_path

# The names a lock_all phase adds to its own name (each set takes one or both).
ALL_OTHERS = ("b", "c")
# The member ids a group phase joins as (fewer than the workers: ids are contended).
MEMBER_IDS = ("a", "b", "c")
CONTROL_WAIT = 60.0  # how long a worker waits for the control file before giving up


class WorkloadChaos:
    """The state a workload's worker shares with the signal handlers: the requests the
    nemesis sent, the run's random numbers, and the oracle (one socket, behind `lock` where
    several threads call it).

    Example::

        chaos = WorkloadChaos(settings, history, oracle)
        listen(chaos.requests)  # every request signal re-reads the nemesis' request file
    """

    def __init__(self, settings: dict[str, Any], history: HistoryWriter,
                 oracle: OracleClient) -> None:
        self.settings = settings
        self.history = history
        self.oracle = oracle
        self.random = random.Random(f"{settings['seed']}-{settings['number']}-{os.getpid()}")
        # The nemesis' requests: its file, re-read by every signal (see _requests.py).
        self.requests = Requests(requests_path(settings["control"], os.getpid()))
        self.lock = threading.Lock()

    @property
    def hold_requested(self) -> bool:
        """Whether the nemesis asks to hold the next section (SIGURG), not yet carried out."""
        return self.requests.pending("hold")

    @property
    def pause_requested(self) -> bool:
        """Whether the nemesis asks for a pause before the next write (SIGUSR1)."""
        return self.requests.pending("pause")

    def pause_if_requested(self, **fields: Any) -> None:
        """When the nemesis asked for a pause (SIGUSR1), stop this thread here (SIGSTOP) until
        the orchestrator's SIGCONT: right before the write, the worst moment for a GC pause.

        Example::

            chaos.pause_if_requested(name=name, slot=0, token=token)
        """
        if self.requests.take("pause"):
            self.history.emit("info", "pause", **fields)
            # To this thread, not the process: a process-wide SIGSTOP may be taken by the
            # renewal thread while this one goes on to write. The orchestrator sends SIGCONT.
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
            self.history.emit("info", "resume", **fields)


class ChaosWorker(WorkloadChaos):
    """The worker's loop and its history."""

    def __init__(self, settings: dict[str, Any], history: HistoryWriter,
                 oracle: OracleClient) -> None:
        super().__init__(settings, history, oracle)
        self.told: set[int] = set()  # tokens of the leases on_lost was called for
        self.stopping = False
        self.pid = os.getpid()  # a forked child runs none of this process's cleanups
        self.store: tenure.Store | None = None

    @property
    def fork_requested(self) -> bool:
        """Whether the nemesis asks for a fork in the next section (SIGWINCH)."""
        return self.requests.pending("fork")

    def run(self, store: tenure.Store, phases: Sequence[dict[str, Any]]) -> None:
        self.store = store
        for phase in phases:
            if phase["kind"] == "lock_all":
                while not self.stopping and time.monotonic() < phase["until"]:
                    self.cycle_all(store, phase["name"], phase["until"])
                continue
            if phase["kind"] == "group":
                group = store.group(phase["name"], ttl=self.settings["ttl"])
                while not self.stopping and time.monotonic() < phase["until"]:
                    self.cycle_member(group, phase["until"])
                continue
            if phase["kind"] == "lock":
                lock = store.lock(phase["name"], ttl=self.settings["ttl"], min_wait=0.01,
                                  max_wait=self.settings["retry"], on_lost=self._lost)
            else:
                lock = store.semaphore(phase["name"], phase["limit"], ttl=self.settings["ttl"],
                                       min_wait=0.01, max_wait=self.settings["retry"],
                                       on_lost=self._lost)
            while not self.stopping and time.monotonic() < phase["until"]:
                self.cycle(lock, phase["until"])

    def cycle(self, lock: tenure.Lock, until: float) -> None:
        """One acquire, read, work, write, release."""
        name = lock.name
        lease = self._taken(name, lambda: lock.acquire(
            timeout=max(0.0, until - time.monotonic())))
        if lease is None:
            return
        try:
            value = self.oracle.read(name, lease.slot, lease.token)
            self._section(lease)
            if lease.lost:
                self.history.emit("info", "skip-write", name=name, slot=lease.slot,
                                  token=lease.token, reason="lease lost before the write")
                return
            self.pause_if_requested(name=name, slot=lease.slot, token=lease.token)
            self.oracle.write(name, lease.slot, lease.token, value + 1)
        finally:
            if os.getpid() == self.pid:  # a forked child exits through here: not its lease
                self._release(lease)

    def cycle_all(self, store: tenure.Store, name: str, until: float) -> None:
        """One `lock_all` of the phase's name and one or both of its two others (so sets
        overlap, asked in any order), a read of each name's counter, the work, a write of
        each with its own lease's token, the release of the set. The phase's name is in every
        set: its grants are what the liveness check and the faults look at."""
        others = self.random.sample(ALL_OTHERS, self.random.randint(1, len(ALL_OTHERS)))
        names = [name, *(f"{name}-{other}" for other in others)]
        self.random.shuffle(names)  # lock_all takes them in its own order
        for each in names:
            self.history.emit("invoke", "acquire", name=each)
        try:
            leases = store.lock_all(names, ttl=self.settings["ttl"], min_wait=0.01,
                                    max_wait=self.settings["retry"], on_lost=self._set_lost,
                                    timeout=max(0.0, until - time.monotonic()))
        except tenure.LockTimeout:
            for each in names:
                self.history.emit("fail", "acquire", name=each, error="timeout")
            return
        except tenure.TenureError as exc:
            for each in names:
                self.history.emit("fail", "acquire", name=each, error=type(exc).__name__)
            time.sleep(self.settings["retry"])  # pacing after a store failure, not a wait
            return
        for lease in leases:
            self.history.emit("ok", "acquire", name=lease.name, slot=0, token=lease.token)
        first = leases[name]
        try:
            values = {lease.name: self.oracle.read(lease.name, 0, lease.token)
                      for lease in leases}
            self._section(first)
            if leases.lost:
                self.history.emit("info", "skip-write", name=name, slot=0, token=first.token,
                                  reason="lease set lost before the writes")
                return
            self.pause_if_requested(name=name, slot=0, token=first.token)
            for lease in leases:
                self.oracle.write(lease.name, 0, lease.token, values[lease.name] + 1)
        finally:
            if os.getpid() == self.pid:
                self._release_set(leases)

    def cycle_member(self, group: tenure.Group, until: float) -> None:
        """One membership: join the phase's group as one of MEMBER_IDS (more workers than ids,
        so joins of one id wait for its member to leave or expire), list the members (the
        listing must show this member with its token), read the member's counter, work,
        write it with the member's token, leave. Events name the member's lease and carry
        the phase's name (`phase`), which the liveness check and the faults look at."""
        member_id = self.random.choice(MEMBER_IDS)
        name = group.prefix + member_id
        lease = self._taken(name, lambda: group.join(
            member_id, {"worker": self.settings["number"]},
            timeout=max(0.0, until - time.monotonic()), on_lost=self._lost), phase=group.name)
        if lease is None:
            return
        try:
            self._list_members(group, member_id, lease)
            value = self.oracle.read(name, 0, lease.token)
            self._section(lease)
            if lease.lost:
                self.history.emit("info", "skip-write", name=name, slot=0, token=lease.token,
                                  reason="member lost before the write")
                return
            self.pause_if_requested(name=name, slot=0, token=lease.token)
            self.oracle.write(name, 0, lease.token, value + 1)
        finally:
            if os.getpid() == self.pid:
                self._release(lease)

    def _list_members(self, group: tenure.Group, member_id: str, lease: tenure.Lease) -> None:
        """The group's members as this member sees them right after its join (checked by
        check_members: it must be listed, with its own token)."""
        try:
            members = group.members()
        except tenure.TenureError as exc:
            self.history.emit("fail", "members", error=type(exc).__name__)
            return
        self.history.emit("info", "members", name=lease.name, token=lease.token, id=member_id,
                          lost=lease.lost, members={m.id: m.token for m in members})

    def _release_set(self, leases: tenure.LeaseSet) -> None:
        for lease in leases:
            self.history.emit("invoke", "release", deadline=lease.deadline, name=lease.name,
                              slot=0, token=lease.token)
        try:
            freed = leases.release()
        except tenure.TenureError as exc:
            for lease in leases:
                self.history.emit("fail", "release", error=type(exc).__name__,
                                  name=lease.name, slot=0, token=lease.token)
        else:
            for lease in leases:
                self.history.emit("ok", "release", freed=freed, name=lease.name, slot=0,
                                  token=lease.token)

    def _set_lost(self, leases: tenure.LeaseSet) -> None:
        """The set's loss signal: the loss of each of its leases, as `_lost` records one."""
        for lease in leases:
            self._lost(lease)

    def _taken(self, name: str, take: Callable[[], tenure.Lease],
               **fields: Any) -> tenure.Lease | None:
        """`take()`'s lease, its ask and its outcome in the history (`fields` on the invoke
        and the ok); None when it timed out or the store failed (then after a pause)."""
        self.history.emit("invoke", "acquire", name=name, **fields)
        try:
            lease = take()
        except tenure.LockTimeout:
            self.history.emit("fail", "acquire", name=name, error="timeout")
            return None
        except tenure.TenureError as exc:
            self.history.emit("fail", "acquire", name=name, error=type(exc).__name__)
            time.sleep(self.settings["retry"])  # pacing after a store failure, not a wait
            return None
        self.history.emit("ok", "acquire", name=name, slot=lease.slot, token=lease.token,
                          **fields)
        return lease

    def _section(self, lease: tenure.Lease) -> None:
        """The critical section between the read and the write: a fork or a hold when the
        nemesis asks (`lease` is the one they act on), and the work."""
        if self.fork_requested:
            self._fork(lease)
        if self.hold_requested:
            self._hold(lease)
        time.sleep(self._work_seconds())
        if self.hold_requested:  # asked during a long section: hold before the write
            self._hold(lease)

    def _fork(self, lease: tenure.Lease) -> None:
        """Fork a child that uses the store afresh and exits normally (see the module
        docstring); the parent waits for it and goes on for half a ttl, across a renewal."""
        self.requests.take("fork")
        fields: dict[str, Any] = {"name": lease.name, "slot": lease.slot, "token": lease.token}
        self.history.emit("invoke", "fork", **fields)
        child = os.fork()
        if child == 0:
            self._child(lease.name)  # never returns
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        self.history.emit("ok" if code == 0 else "fail", "fork", child=child, exit=code,
                          **fields)
        time.sleep(self.settings["ttl"] / 2)

    def _hold(self, lease: tenure.Lease) -> None:
        """Go on with the section until told of the loss, or 2 ttl + 1 s (a stall's longest
        plus a second): the body of a holder whose path to the store went silent."""
        self.requests.take("hold")
        self.history.emit("info", "hold", name=lease.name, slot=lease.slot, token=lease.token)
        until = time.monotonic() + 2 * self.settings["ttl"] + 1.0
        while lease.token not in self.told and time.monotonic() < until:
            time.sleep(0.005)  # the work, in slices: a sync body checks for the loss
        self.history.emit("info", "hold-end", name=lease.name, slot=lease.slot,
                          token=lease.token, told=lease.token in self.told)

    def _child(self, name: str) -> None:
        """In the forked child: take and give back a name of its own through the inherited
        store, then sys.exit(0), which unwinds to the interpreter's exit and runs the atexit
        handlers (the worker's own cleanups check the pid and skip)."""
        history = HistoryWriter(Path(self.settings["history"]), f"{self.history.process}-child")
        code = 1
        try:
            assert self.store is not None
            lock = self.store.lock(f"{name}-fork-child", ttl=self.settings["ttl"])
            with lock.acquire(timeout=self.settings["ttl"] * 2) as lease:
                history.emit("ok", "child-acquire", name=lease.name, slot=lease.slot,
                             token=lease.token)
            code = 0
        except BaseException as exc:
            history.emit("fail", "child", error=f"{type(exc).__name__}: {exc}")
        history.emit("info", "child-exit", code=code)
        sys.exit(code)

    def _work_seconds(self) -> float:
        """Mostly 5 to 50 ms; one section in twenty lasts about half the ttl, so renewals (and
        the faults that delay them) happen inside critical sections too."""
        if self.random.random() < 0.05:
            return float(self.random.uniform(0.4, 0.6) * self.settings["ttl"])
        return self.random.uniform(0.005, 0.05)

    def _release(self, lease: tenure.Lease) -> None:
        fields: dict[str, Any] = {"name": lease.name, "slot": lease.slot, "token": lease.token}
        # The deadline as the lease has it now: past it, a loss signal was due already.
        self.history.emit("invoke", "release", deadline=lease.deadline, **fields)
        try:
            freed = lease.release()
        except tenure.TenureError as exc:
            self.history.emit("fail", "release", error=type(exc).__name__, **fields)
        else:
            self.history.emit("ok", "release", freed=freed, **fields)

    def _lost(self, lease: tenure.Lease) -> None:
        """The loss signal (`on_lost`), recorded with the lease's local deadline."""
        late = self.settings.get("late_signal", 0.0)
        if late:
            time.sleep(late)  # the positive control: a signal that comes late
        reason = lease.lost_reason.value if lease.lost_reason else None
        self.history.emit("info", "lost", name=lease.name, slot=lease.slot, token=lease.token,
                          reason=reason, deadline=lease.deadline)
        self.told.add(lease.token)


def log_renewals(store: tenure.Store, history: HistoryWriter) -> None:
    """Record every batched renewal the lease monitor sends (invoke, then ok or fail per
    lease), by wrapping the store object's `renew`."""
    backend = store.backend
    renew = backend.renew

    def renew_and_record(grants: Any, ttl: float) -> Any:
        tokens = [grant.token for grant in grants]
        history.emit("invoke", "renew", name=grants[0].name if grants else None, tokens=tokens)
        try:
            results = renew(grants, ttl)
        except Exception as exc:
            history.emit("fail", "renew", tokens=tokens, error=type(exc).__name__)
            raise
        for grant, result in zip(grants, results, strict=False):
            error = {"error": result.value} if isinstance(result, tenure.LostReason) else {}
            history.emit("fail" if error else "ok", "renew", name=grant.name, slot=grant.slot,
                         token=grant.token, **error)
        return results

    setattr(backend, "renew", renew_and_record)  # noqa: B010 (an instance attribute on purpose)


def wait_for_control(path: Path, timeout: float) -> dict[str, Any] | None:
    """The control file's content once the orchestrator has written it (atomically)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            control: dict[str, Any] = json.loads(path.read_text())
            return control
        time.sleep(0.01)  # polling a condition with a deadline
    return None


Chaos = TypeVar("Chaos", bound=WorkloadChaos)


def start_process(argv: list[str],
                  make_chaos: Callable[[dict[str, Any], HistoryWriter, OracleClient], Chaos],
                  ) -> Chaos:
    """A workload's worker process begins: it dies with the chaos run, reads its settings
    (argv[0], JSON), opens its history and the oracle, and takes the nemesis' requests by
    signal (SIGUSR1 pause, SIGURG hold, SIGUSR2 forget: each re-reads the request file, see
    _requests.py) into the state `make_chaos` builds.

    Example::

        worker = start_process(sys.argv[1:], ChaosWorker)
    """
    watch_parent()  # exit soon after the chaos run, even one killed with SIGKILL
    settings = json.loads(argv[0])
    process = f"worker-{settings['number']}"
    chaos = make_chaos(settings, HistoryWriter(Path(settings["history"]), process),
                       OracleClient(settings["oracle_port"], process))
    listen(chaos.requests)
    return chaos


def connect_and_wait(chaos: WorkloadChaos) -> tuple[tenure.Store, dict[str, Any] | None]:
    """The process's store (renewals recorded) and the run's control file (None when it did
    not come within CONTROL_WAIT).

    Example::

        store, control = connect_and_wait(worker)
    """
    settings, history = chaos.settings, chaos.history
    store = tenure.connect(settings["store"], holder=f"worker-{settings['number']}:{os.getpid()}")
    log_renewals(store, history)
    history.emit("info", "start")
    return store, wait_for_control(Path(settings["control"]), CONTROL_WAIT)


def close_process(chaos: WorkloadChaos, store: tenure.Store, **stop: Any) -> None:
    """Close the store (a failure recorded), record `stop` (with `stop`'s fields), close the
    oracle.

    Example::

        close_process(worker, store, code=0)
    """
    try:
        store.close()
    except tenure.TenureError as exc:
        chaos.history.emit("fail", "close", error=type(exc).__name__)
    chaos.history.emit("info", "stop", **stop)
    chaos.oracle.close()


def main(argv: list[str]) -> int:
    worker = start_process(argv, ChaosWorker)
    listen(worker.requests, (signal.SIGWINCH,))
    signal.signal(signal.SIGTERM, lambda *_: setattr(worker, "stopping", True))
    store, control = connect_and_wait(worker)
    try:
        if control is not None:
            worker.run(store, control["phases"])
    finally:
        if os.getpid() == worker.pid:  # a forked child leaves all of this to its parent
            close_process(worker, store)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
