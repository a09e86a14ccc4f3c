"""One chaos run: the oracle, the proxies, the workers, the phases with their faults, and the
checks on the history.

Example::

    report = run_chaos(ChaosSettings("redis://127.0.0.1:6379/0", duration=30, seed=3),
                       restart_store=server.restart)
    assert not report.violations
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tenure
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import parse_store_url, redact
from tenure.chaos._checkers import check_history
from tenure.chaos._faults import Nemesis, plan_faults
from tenure.chaos._fleet import Fleet
from tenure.chaos._history import HistoryWriter, read_history
from tenure.chaos._lifeline import Lifeline
from tenure.chaos._oracle import Oracle
from tenure.chaos._producer import Producer, drain, settle_events
from tenure.chaos._proxy import Proxy, ProxyHost, ProxyTarget, proxied_store
from tenure.chaos._report import Report
from tenure.chaos._settings import QUEUE_VISIBILITY, ChaosSettings
from tenure.chaos._workload_checkers import check_jobs, check_queue
from tenure.jobs.queues._source import COPY_GUARD

WORKER_MODULES = {"lock": "tenure.chaos._worker", "jobs": "tenure.chaos._jobs_worker",
                  "queue": "tenure.chaos._queue_worker"}
WARM_UP = 1.0  # seconds of each phase before the first fault
START_TIMEOUT = 60.0  # for every worker to have started (imports, connections)
TICK = 0.02  # the control loop's pace


def run_chaos(settings: ChaosSettings,
              restart_store: Callable[[], object] | None = None) -> Report:
    """Run workers against `settings.store` under faults; returns the report (its
    `violations` are empty when every check held). `restart_store`, when given, restarts the
    store's server (the `restart` fault); it returns once the server is back.

    Example::

        report = run_chaos(ChaosSettings("sqlite:////tmp/chaos-locks.db", duration=20,
                                         faults=("kill", "pause"), seed=1))
        print(report.grants, report.faults, report.violations)
    """
    settings.check()
    if restart_store is not None and not callable(restart_store):
        raise InvalidArgumentType(f"restart_store must be a function that restarts the store "
                                  f"server, got {type(restart_store).__name__}")
    restart = restart_store or _command(settings.restart_command)
    seed = random.randrange(1 << 30) if settings.seed is None else settings.seed
    with tenure.connect(settings.store) as store:  # a bad URL or a down store fails here
        store.leases(settings.name)
    target, not_applicable = _applicable(settings, restart)
    kinds = faults_to_inject(settings, not_applicable)
    directory = settings.directory or Path(tempfile.mkdtemp(prefix="tenure-chaos-"))
    directory.mkdir(parents=True, exist_ok=True)
    history_path = directory / "history.jsonl"
    # A reused directory's request files could name a pid that is reused now.
    for stale in (history_path, directory / "control.json", *directory.glob("requests-*.json")):
        stale.unlink(missing_ok=True)
    started = time.monotonic()
    run = _Run(settings, seed, directory, history_path, restart, kinds,
               target if {"proxy", "stall"} & set(kinds) else None)
    try:
        notes = run.play()
    finally:
        run.close()
    if settings.skip_record:
        notes.insert(0, "period records never read (positive control)")
    if not settings.key_lock:
        notes.insert(0, "no per-key lock (positive control)")
    events, _ = read_history(history_path)
    if settings.workload == "jobs":
        verdict = check_jobs(events, settings.period)
    elif settings.workload == "queue":
        verdict = check_queue(events)
    else:
        verdict = check_history(events)
    return Report.build(events, verdict, store=redact(settings.store), seed=seed,
                        workload=settings.workload,
                        fencing=settings.fencing, workers=settings.workers,
                        seconds=time.monotonic() - started, history=history_path,
                        not_applicable=not_applicable, injectable=kinds,
                        liveness_bound=settings.liveness_bound,
                        late_signal=settings.late_signal, notes=notes)


def faults_to_inject(settings: ChaosSettings, not_applicable: dict[str, str]) -> tuple[str, ...]:
    """The faults asked that can apply to the store. Refuses the run (one line) when some were
    asked and none can apply: a run without faults would pass and prove nothing. Warns on the
    console, at the start, of each one that cannot apply.

    Example::

        faults_to_inject(ChaosSettings("sqlite:////tmp/x.db", faults=("restart",)),
                         {"restart": "sqlite:// has no server to restart"})  # InvalidArgument
    """
    kinds = tuple(kind for kind in settings.faults if kind not in not_applicable)
    if settings.faults and not kinds:
        reasons = "; ".join(f"{kind}: {why}" for kind, why in not_applicable.items())
        raise InvalidArgument(
            f"none of the faults asked ({', '.join(settings.faults)}) can apply to "
            f"{redact(settings.store)} ({reasons}); ask for others in --faults (e.g. "
            "kill,pause) or leave it out for every fault that applies")
    if settings.console is not None:
        for kind, why in not_applicable.items():
            settings.console.print(f"warning: fault {kind} cannot apply and will not be "
                                   f"injected: {why}", markup=False, highlight=False)
    return kinds


def _command(command: str | None) -> Callable[[], object] | None:
    if command is None:
        return None

    def restart() -> None:
        subprocess.run(command, shell=True, check=True, timeout=300,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return restart


def _applicable(settings: ChaosSettings, restart: Callable[[], object] | None,
                ) -> tuple[ProxyTarget | None, dict[str, str]]:
    """The proxy target (when the proxy or stall fault applies) and why the other faults do
    not."""
    skipped: dict[str, str] = {}
    target = None
    if "fork" in settings.faults and settings.workload != "lock":
        skipped["fork"] = (f"the {settings.workload} workload does not fork (the lock workload "
                           "checks the fork rule)")
    if {"proxy", "stall"} & set(settings.faults):
        found = proxied_store(settings.store, dict(os.environ))
        if not isinstance(found, str):
            target = found
        elif "proxy" in settings.faults:
            skipped["proxy"] = found
        if "stall" not in settings.faults or not isinstance(found, str):
            pass
        elif settings.scheme == "file":
            skipped["stall"] = ("file:// calls no server: renewals are in memory (the kernel "
                                "holds the flock), so no store call can hang; the pause fault "
                                "stops the holder instead")
        elif settings.scheme != "sqlite":  # SQLite: the nemesis locks the database instead
            skipped["stall"] = found
    if "restart" in settings.faults and restart is None:
        if settings.scheme in ("file", "sqlite"):
            skipped["restart"] = f"{settings.scheme}:// has no server to restart"
        else:
            skipped["restart"] = ("no way to restart the server: pass --restart-command "
                                  "(or restart_store= to run_chaos)")
    return target, skipped


class _Run:
    """The processes of one run and its control loop."""

    def __init__(self, settings: ChaosSettings, seed: int, directory: Path, history_path: Path,
                 restart: Callable[[], object] | None, kinds: tuple[str, ...],
                 target: ProxyTarget | None) -> None:
        self.settings, self.seed, self.kinds, self.target = settings, seed, kinds, target
        self.directory, self.history_path = directory, history_path
        self.history = HistoryWriter(history_path, "nemesis")
        self.oracle: Oracle | None = None
        self.proxy_host: ProxyHost | None = None
        self.proxies: dict[int, list[Proxy]] = {}
        # Every process of the run exits soon after this one, however it ends (kill -9 too).
        self.lifeline = Lifeline.start()
        self.fleet = Fleet(log=directory / "workers.log", module=WORKER_MODULES[settings.workload],
                           lifeline=self.lifeline)
        self.chance = random.Random(seed)  # the schedule only: the same seed, the same plan
        database = parse_store_url(settings.store).location if settings.scheme == "sqlite" \
            else None
        self.nemesis = Nemesis(self.fleet, self.history, settings, self.proxies, None, restart,
                               random.Random(f"{seed}-targets"), database)
        self.offset = 0

    def play(self) -> list[str]:
        settings = self.settings
        self.oracle = Oracle.start(self.history_path, settings.fencing,
                                   self.directory / "oracle.log", lifeline=self.lifeline)
        if self.target is not None:
            self.proxy_host = self.nemesis.proxy_host = ProxyHost()
        run_id = uuid.uuid4().hex[:8]
        base = {"history": str(self.history_path), "oracle_port": self.oracle.port,
                "control": str(self.directory / "control.json"), "ttl": settings.lease_ttl,
                "retry": settings.retry, "seed": self.seed, "store": settings.store,
                "late_signal": settings.late_signal, "period": settings.period,
                "skip_record": settings.skip_record, "key_lock": settings.key_lock,
                "queue_url": settings.queue_source, "visibility": QUEUE_VISIBILITY}
        for number in range(1, settings.workers + 1):
            url, env = settings.store, dict[str, str]()
            if self.target is not None and self.proxy_host is not None:
                proxies = [self.proxy_host.add(host, port)
                           for host, port in self.target.addresses]
                self.proxies[number] = proxies
                url, env = self.target.rewrite([proxy.port for proxy in proxies])
            self.fleet.add(number, {**base, "store": url}, env)
        self._wait_for_workers()
        phases = self._phases(run_id)
        control = self.directory / "control.json"
        temporary = control.with_suffix(".tmp")
        temporary.write_text(json.dumps({"phases": phases}))
        temporary.replace(control)  # atomically: a worker never reads half of it
        for phase in phases:
            self.history.emit("info", "phase", name=phase["name"], kind=phase["kind"],
                              start=phase["start"], until=phase["until"])
        notes = []
        if settings.workload == "queue":
            notes = self._play_queue(phases[0])
        else:
            for phase in phases:
                self._play_phase(phase)
        stragglers = self.fleet.wait_all(timeout=settings.lease_ttl + 15.0)
        for worker in self.fleet.workers:  # for the exits checker (jobs and queue)
            if worker.process is not None:
                self.history.emit("info", "worker-exit", worker=worker.name,
                                  target_pid=worker.pid, returncode=worker.process.returncode,
                                  straggler=worker in stragglers)
        if settings.workload == "queue":
            settle_events(str(settings.queue_source), phases[0]["name"], self.history)
        return notes + [f"{w.name} had not stopped 15 s after the end and was killed"
                        for w in stragglers]

    def _play_queue(self, phase: dict[str, Any]) -> list[str]:
        """The queue workload's phase: messages sent until 2 s before its end, then the queue
        drained (within the liveness bound + 10 s), then the workers told to stop."""
        settings = self.settings
        url = str(settings.queue_source)
        producer = Producer(url, phase["name"], self.history, settings.keys, self.seed)
        producer.start()
        try:
            self._play_phase(phase, until=phase["until"] - 2.0, then=producer.stop)
        finally:
            producer.stop()
        patience = settings.liveness_bound + 10.0
        if url.startswith("azqueue") and "kill" in settings.faults:
            # A consumer killed while it dead-lettered or released a message (copy sent, the
            # original not yet deleted) left the original hidden for the copy's guard.
            patience += COPY_GUARD
        took = drain(url, phase["name"], timeout=patience)
        self.history.emit("info", "drained", seconds=took)
        for worker in self.fleet.workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.process.terminate()  # the Worker's clean stop
        if took is None:
            return [f"the queue was not empty {patience:g} s after the end"]
        return []

    def _phases(self, run_id: str) -> list[dict[str, Any]]:
        phases = []
        start = time.monotonic()
        for kind, seconds in self.settings.phases:
            name = f"{self.settings.name}-{run_id}" + {"semaphore": "-sem",
                                                        "lock_all": "-all",
                                                        "group": "-group"}.get(kind, "")
            phases.append({"kind": kind, "name": name, "limit": self.settings.semaphore_limit,
                           "start": start, "until": start + seconds})
            start += seconds
        return phases

    def _wait_for_workers(self) -> None:
        started: set[int] = set()
        deadline = time.monotonic() + START_TIMEOUT
        while len(started) < self.settings.workers:
            events = self._read()
            self.nemesis.observe(events)  # it signals only workers that said `start`
            started |= {e["pid"] for e in events if e["f"] == "start"}
            dead = [w for w in self.fleet.workers if w.process is not None
                    and w.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                log = (self.directory / "workers.log").read_text(errors="replace")[-1500:]
                what = f"{dead[0].name} exited with {dead[0].process.returncode}" if dead and \
                    dead[0].process is not None else f"workers not started in {START_TIMEOUT:g} s"
                raise tenure.TenureError(f"tenure chaos: {what}; workers.log ends with:\n"
                                         f"{redact(log)}")
            time.sleep(TICK)  # polling a condition with a deadline

    def _read(self) -> list[dict[str, Any]]:
        events, self.offset = read_history(self.history_path, self.offset)
        return events

    def _play_phase(self, phase: dict[str, Any], until: float | None = None,
                    then: Callable[[], object] | None = None) -> None:
        """Play the phase's faults until its end; `then` runs at `until` (before the end)."""
        settings = self.settings
        fault_start = phase["start"] + WARM_UP
        window_end = phase["until"] - settings.liveness_bound - 2.0
        plan = plan_faults(self.chance, self.kinds, settings.lease_ttl,
                           window_end - fault_start, settings.pause_factors)
        self.nemesis.begin_phase(phase["name"], plan, fault_start, window_end)
        while time.monotonic() < phase["until"]:
            if then is not None and until is not None and time.monotonic() >= until:
                then()
                then = None
            self.nemesis.observe(self._read())
            self.nemesis.tick()
            time.sleep(TICK)  # the control loop's pace
        if not self.nemesis.healed:
            self.nemesis.heal()

    def close(self) -> None:
        """Stop everything this run started, whatever happened."""
        if not self.nemesis.healed:
            self.nemesis.heal()
        self.fleet.wait_all(timeout=5.0)
        if self.oracle is not None:
            self.oracle.stop()
        if self.proxy_host is not None:
            self.proxy_host.close()
        self.lifeline.close()
        self.history.close()
