"""`tenure chaos`: fenced runs with zero violations on every store the suite starts (the server
stores also under the restart fault; every store but file:// under the stall fault, and a
forking holder on every store but Azurite), the positive controls (no fencing + pauses: the
checker must find overlapping critical sections; late loss signals + a stall: the checker must
find them), bad options, and each checker on hand-written histories (one that passes, one that
fails each checker).

The runs are short (12 to 32 s, 70 s on Azurite whose leases last at least 15 s) with 4 workers
instead of 8: `make test` runs on 2 shared cores; docs/chaos.md says why that still covers
every fault kind. `make chaos` runs the same fenced runs longer: TENURE_CHAOS_SECONDS (per
store), TENURE_CHAOS_WORKERS and TENURE_CHAOS_SEED override the defaults, and each run leaves
its summary table in run/summary.txt next to its history.
"""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chaos_histories import HandWrittenHistory
from chaos_runs import LONG_RUN, run_and_report
from rich.console import Console

from tenure.chaos import ChaosSettings, Report, print_report
from tenure.chaos._checkers import LATE_SIGNAL, check_history
from tenure.chaos._faults import PAUSE_WAIT, PlannedFault, plan_faults
from tenure.chaos._proxy import ProxyHost, ProxyTarget, proxied_store
from tenure.chaos._run import WARM_UP, _applicable, faults_to_inject

# Seed 417 puts every fault kind, a pause past the ttl and the proxy reset first in a 28 s run
# (see _faults.plan_faults), with 4.1 s to spare for faults that run long.
SEED = int(os.environ.get("TENURE_CHAOS_SEED", "417"))


def chaos(store: str, tmp_path: Path, restart: Callable[[], object] | None = None,
          **options: Any) -> Report:
    options = {"duration": 28.0, "seed": SEED, **options}
    if LONG_RUN and "TENURE_CHAOS_SEED" in os.environ:
        options["seed"] = SEED
    return run_and_report(store, tmp_path, restart, options, width=110)


def assert_clean(report: Report, *kinds: str) -> None:
    """No violation, real work done, and each fault kind in `kinds` injected; a stall lost the
    holder's lease and the loss was signalled (in time: no violation); a fork was made."""
    assert report.violations == [], report.as_dict()
    assert report.accepted_writes >= 20, report.as_dict()
    assert sum(report.grants.values()) >= report.accepted_writes
    injected = {label.split()[0] for label in report.faults}
    assert set(kinds) <= injected, report.as_dict()
    assert report.verdict.takeovers, "liveness was not measured"
    if "stall" in kinds:
        assert report.verdict.signal_delays, ("the stall lost no lease past its deadline",
                                              report.as_dict())
    if "fork" in kinds:
        assert report.verdict.forks >= 1, report.as_dict()
    assert report.history.exists()


# -- fenced runs, one per store ------------------------------------------------------------------

def test_fenced_run_on_file_store(tmp_path: Path) -> None:
    # 20 s: the fault window is 14 s and the three kinds' first round needs 8.8 s of it, so a
    # fork that waits its 3 s for the holder does not push the pause out of the run.
    report = chaos(f"file://{tmp_path}/locks", tmp_path, duration=20.0,
                   faults=("kill", "pause", "fork"))
    assert_clean(report, "kill", "pause", "fork")
    assert set(report.not_applicable) == set()


def test_the_stall_does_not_apply_to_the_file_store_and_says_why(tmp_path: Path) -> None:
    settings = ChaosSettings(f"file://{tmp_path}/locks", faults=("stall",))
    _, skipped = _applicable(settings, None)
    assert "no store call can hang" in skipped["stall"]


def test_fenced_run_on_sqlite_with_a_semaphore_phase(tmp_path: Path) -> None:
    # Seed 1522 begins both phases with a stall (the database's write lock held past every
    # deadline), then a pause past the ttl in the first and a fork in the second.
    report = chaos(f"sqlite:///{tmp_path}/locks.db", tmp_path, semaphore_phase=True,
                   duration=32.0, seed=1522)
    assert_clean(report, "kill", "pause", "stall", "fork")
    assert len(report.grants) == 2, "a lock phase and a semaphore phase"
    assert set(report.not_applicable) == {"proxy", "restart"}  # and the summary says why
    assert "not reached over the network" in report.not_applicable["proxy"]


def test_fenced_run_on_redis_with_restarts(redis_server: Any, tmp_path: Path) -> None:
    report = chaos(redis_server.url, tmp_path, restart=redis_server.restart)
    assert_clean(report, "kill", "pause", "proxy", "stall", "fork", "restart")
    assert report.verdict.grants_after_restarts > 0, "tokens checked across the restart"
    assert "proxy reset" in report.faults  # the schedule's first proxy mode


def test_fenced_run_on_redis_quorum_with_stalls(redis_masters: Any, tmp_path: Path) -> None:
    # The holder's paths to all three masters go silent.
    report = chaos(os.environ["TENURE_TEST_REDIS_QUORUM_URL"], tmp_path, duration=12.0,
                   faults=("stall",))
    assert_clean(report, "stall")


def test_fenced_run_on_postgres_with_restarts(postgres_server: Any, tmp_path: Path) -> None:
    report = chaos(postgres_server.url, tmp_path, restart=postgres_server.restart)
    assert_clean(report, "kill", "pause", "proxy", "stall", "fork", "restart")
    assert report.verdict.grants_after_restarts > 0


def test_fenced_run_on_postgres_advisory_mode_with_stalls(postgres_server: Any,
                                                          tmp_path: Path) -> None:
    report = chaos(f"{postgres_server.url}?mode=advisory", tmp_path, duration=12.0,
                   faults=("stall",))
    assert_clean(report, "stall")


def test_fenced_run_on_mariadb_with_restarts(mariadb_server: Any, tmp_path: Path) -> None:
    report = chaos(mariadb_server.url, tmp_path, restart=mariadb_server.restart)
    assert_clean(report, "kill", "pause", "proxy", "stall", "fork", "restart")


def test_fenced_run_on_mariadb_getlock_mode_with_stalls(mariadb_server: Any,
                                                      tmp_path: Path) -> None:
    # Session locks freed with their connection, like advisory mode: a stalled holder's lease
    # is lost at its deadline and its waiters, blocked in GET_LOCK, take over.
    report = chaos(f"{mariadb_server.url}?mode=getlock", tmp_path, duration=12.0,
                   faults=("stall",))
    assert_clean(report, "stall")


def test_fenced_run_on_azurite_with_restarts(azurite: Any, tmp_path: Path) -> None:
    # Blob leases last 15 s at least: a longer run, pauses of half the ttl only, and no fork
    # (its half-ttl section does not fit; the conformance suite forks on Azurite). Seed 952
    # puts every kind in the 51 s fault window with 6.8 s to spare.
    container = f"chaos-{uuid.uuid4().hex[:12]}"
    report = chaos(f"azblob:///{container}", tmp_path, restart=azurite.restart, duration=70.0,
                   pause_factors=(0.5,), seed=952,
                   faults=("kill", "pause", "proxy", "stall", "restart"))
    assert_clean(report, "kill", "pause", "proxy", "stall", "restart")
    assert report.liveness_bound == 16.0


# -- the schedule --------------------------------------------------------------------------------

def test_every_kind_comes_first_once_with_the_restart_last_of_them() -> None:
    kinds = ("kill", "pause", "proxy", "restart")
    for seed in range(100):
        plan = plan_faults(random.Random(seed), kinds, ttl=2.0, window=19.0)
        assert sorted(fault.kind for fault in plan[:4]) == sorted(kinds), (seed, plan)
        assert plan[3].kind == "restart", (seed, plan)


@pytest.mark.parametrize("ttl", [2.0, 15.0])
def test_a_stall_outlasts_every_deadline_of_the_holders_leases(ttl: float) -> None:
    for seed in range(50):
        plan = plan_faults(random.Random(seed), ("stall",), ttl=ttl, window=60.0)
        # A lease renewed as the stall begins is lost by 0.99 ttl - margin: long before.
        assert all(ttl + 0.5 * min(ttl, 4.0) <= f.seconds <= 2 * ttl for f in plan), plan
    stall = PlannedFault("stall", gap=1.0, seconds=3.8)
    assert stall.within(3.0, ttl=2.0, first_of_kind=True) == PlannedFault("stall", 1.0, 3.0)
    assert stall.within(2.9, ttl=2.0, first_of_kind=True) is None  # 1.5 ttl at least


def test_a_fault_that_no_longer_fits_is_cut_to_fit_only_when_its_kind_is_new() -> None:
    proxy = PlannedFault("proxy", gap=1.0, seconds=3.0, mode="reset")
    assert proxy.within(5.0, ttl=2.0, first_of_kind=False) is proxy
    assert proxy.within(1.0, ttl=2.0, first_of_kind=False) is None
    assert proxy.within(1.0, ttl=2.0, first_of_kind=True) == PlannedFault(
        "proxy", gap=1.0, seconds=1.0, mode="reset")
    assert proxy.within(0.5, ttl=2.0, first_of_kind=True) is None  # under a renewal interval
    kill = PlannedFault("kill", gap=1.0, seconds=0.8)
    assert kill.within(0.3, ttl=2.0, first_of_kind=True) == PlannedFault("kill", 1.0, 0.3)
    # A pause is cut only once the phase is running (in tenths of the ttl, down to half
    # of it); while planning, it is left out.
    pause = PlannedFault("pause", 1.0, factor=1.5)
    assert pause.within(2.5, 2.0, True, running=True) == PlannedFault("pause", 1.0, factor=1.2)
    assert pause.within(2.5, 2.0, first_of_kind=True) is None
    assert pause.within(2.5, 2.0, first_of_kind=False, running=True) is None
    assert pause.within(0.9, 2.0, first_of_kind=True, running=True) is None
    # A restart's length is the server's, not the plan's to cut.
    assert PlannedFault("restart", 1.0).within(2.0, 2.0, first_of_kind=True) is None


def test_the_file_stores_run_has_room_for_its_first_round_to_wait_on_the_holder() -> None:
    # The fork waits up to PAUSE_WAIT for the holder's next section, beyond its estimate; the
    # pause, planned last, must still fit, with a second for a kill's retry (CI once lost the
    # pause with 0.2 s to spare in a 15 s run).
    window = 20.0 - WARM_UP - ChaosSettings("memory://").liveness_bound - 2.0
    plan = plan_faults(random.Random(SEED), ("kill", "pause", "fork"), ttl=2.0, window=window)
    first_round = plan[:3]
    assert sorted(fault.kind for fault in first_round) == ["fork", "kill", "pause"]
    needed = sum(fault.gap + fault.estimate(2.0) for fault in first_round)
    assert needed + PAUSE_WAIT + 1.0 <= window, (needed, window)


# -- the positive control, through the command ------------------------------------------------

def cli(tmp_path: Path, *options: str) -> tuple[int, dict[str, Any]]:
    finished = subprocess.run(
        [sys.executable, "-m", "tenure", "chaos", "--store", f"sqlite:///{tmp_path}/locks.db",
         "--workers", "4", "--duration", "15", "--faults", "pause", "--seed", "1", "--json",
         "--dir", str(tmp_path / "run"), *options],
        capture_output=True, text=True, timeout=180)
    assert finished.stdout, finished.stderr
    return finished.returncode, json.loads(finished.stdout)


def test_without_fencing_pauses_produce_overlapping_critical_sections(tmp_path: Path) -> None:
    status, report = cli(tmp_path, "--no-fencing")
    assert any(label in report["faults"] for label in ("pause 1.5x ttl", "pause 3x ttl")), report
    assert status == 1, report
    assert report["overlaps"] >= 1 and report["by_checker"]["writes"] >= 1, report
    assert report["rejected_writes"] == 0, "without fencing the oracle only records"
    assert any("overlapping critical sections" in v["message"] for v in report["violations"])


def test_late_loss_signals_under_a_stall_are_found(tmp_path: Path) -> None:
    """The positive control of the signal checker: every on_lost waits 0.5 s."""
    status, report = cli(tmp_path, "--faults", "stall", "--duration", "11", "--seed", "633",
                         "--late-signal", "0.5")
    assert report["faults"] == {"stall": 1}, report
    assert status == 1, report
    assert report["by_checker"]["signals"] >= 1 and report["late_signals"] >= 1, report
    assert report["worst_signal_delay"] >= 0.5, report
    assert any("ms after it was due" in v["message"] for v in report["violations"]), report
    assert report["by_checker"]["writes"] == report["by_checker"]["tokens"] == 0, report


def test_with_fencing_the_same_pauses_leave_no_violation(tmp_path: Path) -> None:
    status, report = cli(tmp_path)
    assert any(label in report["faults"] for label in ("pause 1.5x ttl", "pause 3x ttl")), report
    assert status == 0 and report["violations"] == [], report
    assert report["rejected_writes"] >= 1, "the woken holder's stale write must be refused"


@pytest.mark.parametrize(("options", "message"), [
    (["--store", "memory://"], "private to one process"),
    (["--store", "sqlite:////tmp/x.db", "--faults", "kill,boom"], "unknown fault(s) boom"),
    (["--store", "sqlite:////tmp/x.db", "--workers", "1"], "--workers must be 2 to 64"),
    (["--store", "sqlite:////tmp/x.db", "--duration", "3"], "--duration 3 is too short"),
])
def test_bad_options_are_refused_before_anything_starts(options: list[str], message: str) -> None:
    finished = subprocess.run([sys.executable, "-m", "tenure", "chaos", *options],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    assert message in finished.stderr


def test_faults_that_cannot_apply_to_the_store_are_refused_at_the_start(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-m", "tenure", "chaos", "--store",
                               f"sqlite:///{tmp_path}/locks.db", "--faults", "restart,proxy",
                               "--duration", "20", "--dir", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.count("\n") == 1, finished.stderr
    assert "none of the faults asked (restart, proxy) can apply" in finished.stderr
    assert "sqlite:// has no server to restart" in finished.stderr
    assert not (tmp_path / "run" / "history.jsonl").exists()


def test_faults_that_cannot_apply_are_warned_of_at_the_start(tmp_path: Path) -> None:
    output = io.StringIO()
    settings = ChaosSettings(f"sqlite:///{tmp_path}/locks.db", faults=("kill", "restart"),
                             console=Console(file=output, width=200))
    _, skipped = _applicable(settings, None)
    applicable = faults_to_inject(settings, skipped)
    assert applicable == ("kill",)
    assert output.getvalue() == ("warning: fault restart cannot apply and will not be "
                                 "injected: sqlite:// has no server to restart\n")


# -- proxies: which stores they can sit in front of ----------------------------------------------

def test_proxy_targets_rewrite_the_url_or_the_connection_string() -> None:
    target = proxied_store("postgresql://app:pw@db.internal:6543/app?schema=x", {})
    assert isinstance(target, ProxyTarget) and (target.host, target.port) == ("db.internal", 6543)
    assert target.rewrite([4000]) == ("postgresql://app:pw@127.0.0.1:4000/app?schema=x", {})
    redis = proxied_store("redis://cache/0", {})
    assert isinstance(redis, ProxyTarget) and redis.port == 6379
    azurite = proxied_store("azblob:///locks", {"AZURE_STORAGE_CONNECTION_STRING":
                                                "AccountName=a;BlobEndpoint=http://h:10000/a;"})
    assert isinstance(azurite, ProxyTarget) and (azurite.host, azurite.port) == ("h", 10000)
    assert azurite.rewrite([4001])[1] == {
        "AZURE_STORAGE_CONNECTION_STRING": "AccountName=a;BlobEndpoint=http://127.0.0.1:4001/a;"}
    for url in ("sqlite:////tmp/l.db", "file:///tmp/l", "rediss://cache/0", "azblob://acct/locks",
                "postgresql://a:1,b:2/db"):
        assert isinstance(proxied_store(url, {}), str), url
    quorum = proxied_store("redis://:pw@a:1,b,c:3/0", {})  # one proxy per master
    assert isinstance(quorum, ProxyTarget)
    assert quorum.addresses == (("a", 1), ("b", 6379), ("c", 3))
    assert quorum.rewrite([7, 8, 9]) == ("redis://:pw@127.0.0.1:7,127.0.0.1:8,127.0.0.1:9/0", {})


def test_a_stalled_proxy_keeps_connections_open_and_forwards_nothing_until_it_heals() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    echoed = threading.Event()

    def echo() -> None:
        connection, _ = server.accept()
        with connection:
            while data := connection.recv(1024):
                connection.sendall(data)
                echoed.set()

    threading.Thread(target=echo, daemon=True).start()
    host = ProxyHost()
    try:
        proxy = host.add("127.0.0.1", server.getsockname()[1])
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            client.sendall(b"a")
            assert client.recv(1) == b"a"
            # The echo sets the event after its send: wait for it, or it may come after the
            # clear below and look like a byte forwarded through the stall.
            assert echoed.wait(5)
            echoed.clear()
            host.set_mode(proxy, "stall")
            client.sendall(b"b")  # accepted by the kernel: no error, no reset
            client.settimeout(0.3)
            with pytest.raises(TimeoutError):
                client.recv(1)  # silence, not a closed connection (that would return b"")
            assert not echoed.is_set(), "the stalled proxy forwarded the bytes"
            host.set_mode(proxy, "normal")
            client.settimeout(5)
            assert client.recv(1) == b"b"  # the same connection flows again
    finally:
        host.close()
        server.close()


def test_closing_the_proxies_ends_a_stalled_connection_s_pumps() -> None:
    # A pump held by a stall waits on an event: closing the sockets does not end it, and the
    # loop stopping with it pending printed "Task was destroyed but it is pending!" in CI.
    server = socket.create_server(("127.0.0.1", 0))
    host = ProxyHost()
    try:
        proxy = host.add("127.0.0.1", server.getsockname()[1])
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            accepted, _ = server.accept()
            host.set_mode(proxy, "stall")
            client.sendall(b"held")
            host.close()
            assert not proxy._connections, "a connection's task outlived the proxy's close"
            accepted.close()
    finally:
        host.close()
        server.close()


# -- the checkers on hand-written histories -------------------------------------------------------

class History(HandWrittenHistory):
    """Builds a history as the workers and the oracle would write it."""

    def __init__(self) -> None:
        super().__init__()
        self.seq = 0

    def worker(self, t: float, process: str, type_: str, f: str, **fields: Any) -> None:
        self.events.append({"t": t, "process": process, "pid": int(process[-1]), "type": type_,
                            "f": f, "name": "L", **fields})

    def grant(self, asked: float, granted: float, process: str, token: int) -> None:
        self.worker(asked, process, "invoke", "acquire")
        self.worker(granted, process, "ok", "acquire", slot=0, token=token)

    def oracle(self, t: float, process: str, type_: str, f: str, token: int | None,
               **fields: Any) -> None:
        self.seq += 1
        self.events.append({"t": t, "process": process, "pid": 99, "type": type_, "f": f,
                            "by": "oracle", "seq": self.seq, "name": "L", "slot": 0,
                            "token": token, **fields})

    def section(self, read: float, write: float, process: str, token: int, value: int,
                accepted: bool = True) -> None:
        self.oracle(read, process, "ok", "read", token, value=value)
        self.oracle(write, process, "ok" if accepted else "fail", "write", token,
                    value=value + 1)

    def end(self, final: int, heal: float = 0.35, until: float = 10.0) -> list[dict[str, Any]]:
        self.nemesis(0.0, "phase", name="L", until=until)
        self.nemesis(heal, "heal", name="L", bound=3.0)
        self.oracle(until, "oracle", "info", "final", None, value=final)
        return self.events


def clean_history() -> History:
    history = History()
    history.grant(0.0, 0.1, "worker-1", token=1)
    history.grant(0.05, 0.4, "worker-2", token=2)
    history.section(0.2, 0.3, "worker-1", token=1, value=0)
    history.section(0.5, 0.6, "worker-2", token=2, value=1)
    return history


def test_a_clean_history_passes_every_checker() -> None:
    verdict = check_history(clean_history().end(final=2))
    assert verdict.violations == []
    assert verdict.takeovers == [pytest.approx(0.05)]


def paused_holder(late_write_accepted: bool) -> History:
    """worker-1 reads under token 1 and freezes; worker-2 takes over (token 2), reads and
    writes; worker-1 wakes up and writes."""
    history = History()
    history.grant(0.0, 0.1, "worker-1", token=1)
    history.grant(0.2, 0.3, "worker-2", token=2)
    history.oracle(0.15, "worker-1", "ok", "read", 1, value=0)
    history.section(0.35, 0.4, "worker-2", token=2, value=0)
    history.oracle(0.5, "worker-1", "ok" if late_write_accepted else "fail", "write", 1,
                   value=1)
    return history


def test_checker_writes_finds_interleaved_and_backward_writes() -> None:
    verdict = check_history(paused_holder(late_write_accepted=True).end(final=1, heal=0.25))
    assert verdict.by_checker()["writes"] == 2
    assert verdict.overlaps == 1 and verdict.backwards == 1
    # Fenced, the same late write is refused: no violation.
    fenced = paused_holder(late_write_accepted=False).end(final=1, heal=0.25)
    assert check_history(fenced).violations == []


def test_checker_tokens_finds_duplicate_and_decreasing_tokens() -> None:
    history = clean_history()
    history.grant(0.7, 0.8, "worker-3", token=2)  # the same token again, and not above 2
    verdict = check_history(history.end(final=2))
    assert verdict.by_checker()["tokens"] == 2
    assert verdict.duplicate_tokens == 1
    # Overlapping asks may come back in any order: not a violation.
    concurrent = History()
    concurrent.grant(0.0, 0.5, "worker-1", token=2)
    concurrent.grant(0.1, 0.3, "worker-2", token=1)
    assert check_history(concurrent.end(final=0)).violations == []


def test_checker_counter_finds_lost_updates() -> None:
    verdict = check_history(clean_history().end(final=1))
    assert [v.checker for v in verdict.violations] == ["counter"]
    assert verdict.lost_updates == 1


def lost_lease(signal_after: float | None, stopped: tuple[float, float] | None = None,
               reason: str = "deadline", deadline: float = 2.0) -> History:
    """worker-1 holds token 1 (granted at 0.1) with its deadline at `deadline`; `on_lost` runs
    `signal_after` seconds after 2.0 (None: never; it releases at 3.0 instead)."""
    history = History()
    history.grant(0.0, 0.1, "worker-1", token=1)
    if stopped is not None:
        history.worker(stopped[0], "worker-1", "info", "pause", slot=0, token=1)
        history.worker(stopped[1], "worker-1", "info", "resume", slot=0, token=1)
    if signal_after is not None:
        history.worker(2.0 + signal_after, "worker-1", "info", "lost", slot=0, token=1,
                       reason=reason, deadline=deadline)
        history.worker(3.0, "worker-1", "invoke", "release", slot=0, token=1, deadline=deadline)
    else:
        history.worker(3.0, "worker-1", "invoke", "release", slot=0, token=1, deadline=deadline)
    history.worker(3.0, "worker-1", "ok", "release", slot=0, token=1, freed=False)
    return history


def test_checker_signals_measures_deadline_to_signal_and_finds_late_or_missing_ones() -> None:
    on_time = check_history(lost_lease(0.05).end(final=0, heal=0.05))
    assert on_time.violations == [] and on_time.signal_delays == [pytest.approx(0.05)]
    late = check_history(lost_lease(LATE_SIGNAL + 0.05).end(final=0, heal=0.05))
    assert [v.checker for v in late.violations] == ["signals"] and late.late_signals == 1
    assert "150 ms after it was due" in late.violations[0].message
    never = check_history(lost_lease(None).end(final=0, heal=0.05))
    assert [v.checker for v in never.violations] == ["signals"]
    assert "never told" in never.violations[0].message
    # Refused by the store before the deadline: told early, which is fine.
    refused = check_history(lost_lease(-0.5, reason="taken").end(final=0, heal=0.05))
    assert refused.violations == [] and refused.losses_before_deadline == 1
    # Stopped (SIGSTOP) across the deadline: the signal is due when the process resumes.
    paused = check_history(lost_lease(1.05, stopped=(1.5, 3.0)).end(final=0, heal=0.05))
    assert paused.violations == [] and paused.signal_delays == [pytest.approx(0.05)]


def test_checker_forks_finds_a_parents_lease_lost_to_its_child() -> None:
    def forked(parent_lost: bool, child_exit: int = 0) -> list[dict[str, Any]]:
        history = History()
        history.grant(0.0, 0.1, "worker-1", token=1)
        history.worker(0.2, "worker-1", "invoke", "fork", slot=0, token=1)
        history.worker(0.3, "worker-1", "ok" if child_exit == 0 else "fail", "fork", slot=0,
                       token=1, exit=child_exit)
        if parent_lost:
            history.worker(0.6, "worker-1", "info", "lost", slot=0, token=1, reason="taken",
                           deadline=2.0)
        history.nemesis(1.3, "fault-end", kind="fork", name="L")
        history.worker(1.4, "worker-1", "invoke", "release", slot=0, token=1, deadline=3.0)
        history.worker(1.4, "worker-1", "ok", "release", slot=0, token=1,
                       freed=not parent_lost)
        history.grant(1.5, 1.6, "worker-2", token=2)
        return history.end(final=0, heal=1.45)

    clean = check_history(forked(parent_lost=False))
    assert clean.violations == [] and clean.forks == 1
    broken = check_history(forked(parent_lost=True))
    assert [v.checker for v in broken.violations] == ["forks", "forks"], broken.violations
    failed = check_history(forked(parent_lost=False, child_exit=1))
    assert [v.checker for v in failed.violations] == ["forks"]


def test_checker_liveness_finds_no_holder_within_the_bound() -> None:
    late = clean_history()
    late.grant(1.0, 4.5, "worker-3", token=3)
    verdict = check_history(late.end(final=2, heal=1.0))
    assert [v.checker for v in verdict.violations] == ["liveness"]
    assert verdict.takeovers == [pytest.approx(3.5)]
    never = check_history(clean_history().end(final=2, heal=1.0))
    assert [v.checker for v in never.violations] == ["liveness"]
    # A run that ends before the bound proves nothing either way.
    short = check_history(clean_history().end(final=2, heal=1.0, until=2.0))
    assert short.violations == []


def test_a_run_that_injected_no_fault_is_inconclusive_not_a_pass(tmp_path: Path) -> None:
    """Faults asked, none injected (a --duration with no room for one): the run checked
    nothing under faults, so it must not say every check held, and it exits 1."""
    fields: dict[str, Any] = {"store": "sqlite:///x.db", "seed": 3, "fencing": True,
                              "workers": 2, "seconds": 8.0, "history": tmp_path / "h.jsonl",
                              "liveness_bound": 3.0, "injectable": ("kill", "pause")}
    idle = Report.build([], check_history([]), **fields)
    assert idle.inconclusive is not None and "--duration" in idle.inconclusive
    shown = io.StringIO()
    print_report(idle, Console(file=shown, width=200))
    assert "INCONCLUSIVE" in shown.getvalue() and "every check held" not in shown.getvalue()
    assert idle.as_dict()["inconclusive"] == idle.inconclusive
    faulted = Report.build([{"f": "fault", "type": "info", "label": "kill"}],
                           check_history([]), **fields)
    assert faulted.inconclusive is None
    unasked = Report.build([], check_history([]), **{**fields, "injectable": ()})
    assert unasked.inconclusive is None
