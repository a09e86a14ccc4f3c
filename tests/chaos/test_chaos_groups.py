"""The lock workload's group phase (`--group-phase`): every worker joins the phase's group as
one of three member ids (eight workers: ids are contended, a join waits for its member to
leave or expire), lists the group right after its join, writes the member's counter with the
member's token and leaves, under kills, pauses, stalls and forks. The lock checkers hold for
each member's lease, and the members checker for each listing: it shows its member, with its
own token. Positive controls: without fencing a member paused past its ttl overwrites a
counter its member lost; hand-written listings without their member are found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos_runs import run_and_report
from test_chaos import History, assert_clean

from tenure.chaos import Report
from tenure.chaos._checkers import check_history


def group_run(store: str, tmp_path: Path, **options: Any) -> Report:
    return run_and_report(store, tmp_path, None, {"group_phase": True, **options}, width=110)


def test_fenced_run_with_a_group_phase_on_sqlite(tmp_path: Path) -> None:
    # Seed 128 begins the group phase (20 s) with a kill, a pause past the ttl, a stall (the
    # database's write lock held past every deadline) and a fork, 2.1 s to spare.
    report = group_run(f"sqlite:///{tmp_path}/locks.db", tmp_path, duration=40.0, seed=128,
                       faults=("kill", "pause", "stall", "fork"))
    assert_clean(report, "kill", "pause", "stall", "fork")
    members = {name: count for name, count in report.grants.items() if "-group:" in name}
    assert len(members) == 3 and min(members.values()) >= 5, members
    assert report.verdict.member_listings >= sum(members.values()) // 2, report.as_dict()


def test_without_fencing_a_paused_member_overwrites_the_counter_it_lost(
        tmp_path: Path) -> None:
    """The positive control: every pause outlasts the ttl, and nothing refuses the writes."""
    report = group_run(f"sqlite:///{tmp_path}/locks.db", tmp_path, duration=26.0, seed=3,
                       faults=("pause",), fencing=False, pause_factors=(1.5,), workers=4)
    on_members = [violation.message for violation in report.violations
                  if "-group:" in violation.message]
    assert any("tokens went backwards" in message or "lost update" in message
               for message in on_members), on_members


def test_checker_members_finds_a_listing_without_its_member() -> None:
    def listing(listed: dict[str, int], lost: bool = False) -> list[dict[str, Any]]:
        history = History()
        history.grant(0.0, 0.1, "worker-1", token=5)
        history.worker(0.15, "worker-1", "info", "members", token=5, id="a", lost=lost,
                       members=listed)
        history.worker(0.4, "worker-1", "invoke", "release", slot=0, token=5, deadline=2.0)
        history.worker(0.4, "worker-1", "ok", "release", slot=0, token=5, freed=True)
        history.grant(0.5, 0.6, "worker-2", token=6)
        return history.end(final=0)

    clean = check_history(listing({"a": 5, "b": 3}))
    assert clean.violations == [] and clean.member_listings == 1
    for wrong, seen in (({"b": 3}, "not listed"), ({"a": 4}, "listed with token 4")):
        found = check_history(listing(wrong))
        assert [v.checker for v in found.violations] == ["members"], found.violations
        assert seen in found.violations[0].message
    assert check_history(listing({}, lost=True)).violations == [], "lost: proves nothing"
