"""file://'s forgetting of idle names: `retain` (0 unlinks a lock file at its release, a release
sweeps the names idle longer than `retain`, inf keeps every file), `prune` on this store's own
files, and the race the unlink invites: processes hammering a few names while another process
prunes them (and, with retain=0, while every release unlinks), checked by an overlap detector
(each holder O_EXCL-creates a marker while it holds) and by the order of the tokens per name.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import tenure
from tenure._names import safe_key


def files(directory: Path) -> list[str]:
    """The directory's files that belong to names (not the shared guard and waiters' map)."""
    return sorted(entry.name for entry in directory.iterdir()
                  if entry.name not in ("prune.guard", "waiters.map"))


def test_retain_0_unlinks_a_lock_file_at_its_release_and_the_next_token_is_larger(
        tmp_path: Path) -> None:
    directory = tmp_path / "locks"
    store = tenure.connect(f"file://{directory}?retain=0")
    other = tenure.connect(f"file://{directory}")
    try:
        assert store.url == f"file://{directory}?retain=0"
        key = safe_key("invoice-7")
        tokens = []
        for _ in range(3):
            with store.lock("invoice-7", ttl=30).acquire() as lease:
                assert files(directory) == [f"{key}.lock"]
                tokens.append(lease.token)
                assert other.lock("invoice-7", ttl=30).try_acquire() is None
            assert files(directory) == []
        assert tokens == sorted(set(tokens)), tokens
        # another store object's open file of the old inode (parked by its refused try above)
        # must not count: it opens the path again, and excludes a third store's holder
        lease = other.lock("invoice-7", ttl=30).try_acquire()
        assert lease is not None and lease.token > tokens[-1]
        assert store.lock("invoice-7", ttl=30).try_acquire() is None
        assert lease.release()
        first, second = (store.semaphore("pool", 2, ttl=30).try_acquire() for _ in range(2))
        assert first is not None and second is not None
        assert first.release() and second.release()
        assert len(files(directory)) == 4, "a semaphore's files stay at release; 'other' kept its"
        assert store.prune(0) == 2, "the semaphore and invoice-7 (parked by 'other')"
        assert files(directory) == []
    finally:
        store.close()
        other.close()


def test_a_release_sweeps_the_names_idle_longer_than_retain(tmp_path: Path) -> None:
    directory = tmp_path / "locks"
    store = tenure.connect(f"file://{directory}", retain=1)
    try:
        for number in range(50):
            store.lock(f"invoice-{number}", ttl=30).try_acquire().release()  # type: ignore[union-attr]
        held = store.lock("held", ttl=30).try_acquire()
        assert len(files(directory)) == 51

        def swept() -> bool:
            store.lock("ticker", ttl=30).try_acquire().release()  # type: ignore[union-attr]
            return files(directory) == sorted([f"{safe_key('held')}.lock",
                                               f"{safe_key('ticker')}.lock"])

        # retain is 1 s; then a release within the sweep interval (1 s) sweeps
        wait_until(swept, 30, "a release to sweep the 50 idle names")
        assert held is not None and held.release()
    finally:
        store.close()


def test_retain_inf_keeps_every_file_and_prune_forgets_on_demand(tmp_path: Path) -> None:
    directory = tmp_path / "locks"
    store = tenure.connect(f"file://{directory}?retain=inf")
    try:
        assert store.url.endswith("?retain=inf")
        lease = store.lock("kept", ttl=30).try_acquire()
        assert lease is not None
        assert store.backend.write_record(lease.grant, "done")
        assert store.break_lease("kept") == 1  # leaves a break guard file
        kept = files(directory)
        assert len(kept) == 3, kept
        assert store.prune(3600) == 0
        assert store.prune(0, dry_run=True) == 1
        assert files(directory) == kept, "a dry run changes nothing"
        assert store.prune(0) == 1
        assert files(directory) == [f"{safe_key('kept')}.record"], "the record stays"
        again = store.lock("kept", ttl=30).try_acquire()
        assert again is not None and again.token > lease.token
        assert again.release()
    finally:
        store.close()
    assert tenure.connect(f"file://{directory}").url == f"file://{directory}"  # the default


def test_a_name_held_by_another_process_is_never_pruned(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/locks"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, tenure; s = tenure.connect(sys.argv[1]); "
         "l = s.lock('held', ttl=30).try_acquire(); print(l.token, flush=True); sys.stdin.read()",
         url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    store = tenure.connect(url)
    try:
        token = int(holder.stdout.readline())
        assert store.prune(0) == 0
        assert store.lock("held", ttl=30).try_acquire() is None
        holder.stdin.close()
        assert holder.wait(30) == 0
        assert store.prune(0) == 1
        lease = store.lock("held", ttl=30).try_acquire()
        assert lease is not None and lease.token > token
        assert lease.release()
    finally:
        store.close()


@pytest.mark.parametrize(("retain", "message"), [
    ("-1", "retain='-1' is out of range: give seconds from 0"),
    ("soon", "retain='soon' is not a number"),
])
def test_a_bad_retain_is_refused_before_the_directory_is_made(tmp_path: Path, retain: str,
                                                              message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"file://{tmp_path}/locks?retain={retain}")
    with pytest.raises(tenure.InvalidArgument, match=message):
        tenure.connect(f"file://{tmp_path}/locks", retain=retain)
    assert list(tmp_path.iterdir()) == []


# One hammering process: takes and releases the names (locks, or semaphores of 2 when argv[6]
# says 2) in turn until its deadline; while it holds a slot it O_EXCL-creates the slot's marker
# (a second holder of it at once fails to) and appends its token to the slot's log, in the order
# the holds of the slot happen.
HAMMER = r"""
import os, sys, time, tenure
from tenure._sync.stores.file import _handles
url, marks, names, kind = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[5]
seconds, limit = float(sys.argv[4]), int(sys.argv[6])
if kind == "mapped":
    _handles._LOCK_FILE = _handles._MappedLockFile
store = tenure.connect(url)
deadline, taken, turn = time.monotonic() + seconds, 0, 0
while time.monotonic() < deadline:
    name = names[turn % len(names)]
    turn += 1
    lease = store.semaphore(name, limit, ttl=30).try_acquire()
    if lease is None:
        continue
    name = f"{name}.{lease.grant.slot}"
    marker = os.path.join(marks, name + ".held")
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        print("OVERLAP", name, lease.token, flush=True)
        sys.exit(3)
    os.close(fd)
    with open(os.path.join(marks, name + ".log"), "a") as log:
        log.write(f"{lease.token}\n")
    os.unlink(marker)
    assert lease.release()
    taken += 1
print("taken", taken, flush=True)
"""

PRUNER = r"""
import sys, time, tenure
store = tenure.connect(sys.argv[1])
deadline, forgotten, rounds = time.monotonic() + float(sys.argv[2]), 0, 0
while time.monotonic() < deadline:
    forgotten += store.prune(0)
    rounds += 1
print("forgotten", forgotten, rounds, flush=True)
"""


@pytest.mark.parametrize(("kind", "limit"), [("plain", 1), ("mapped", 1), ("plain", 2)])
@pytest.mark.parametrize("retain", ["inf", "0"])
def test_processes_hammering_names_while_another_prunes_never_overlap_and_tokens_grow(
        tmp_path: Path, kind: str, limit: int, retain: str) -> None:
    url = f"file://{tmp_path}/locks?retain={retain}"
    marks = tmp_path / "marks"
    marks.mkdir()
    names, seconds = ["a", "b", "c"], 3.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    hammers = [subprocess.Popen([sys.executable, "-c", HAMMER, url, str(marks), ",".join(names),
                                 str(seconds), kind, str(limit)], stdout=subprocess.PIPE, text=True,
                                env=env)
               for _ in range(4)]
    pruner = subprocess.Popen([sys.executable, "-c", PRUNER, url, str(seconds)],
                              stdout=subprocess.PIPE, text=True, env=env)
    outputs = [process.communicate(timeout=60)[0] for process in hammers]
    pruned = pruner.communicate(timeout=60)[0]
    assert [process.returncode for process in hammers] == [0] * 4, outputs
    assert pruner.returncode == 0, pruned
    assert sum(int(output.split()[1]) for output in outputs) > 100, outputs
    assert int(pruned.split()[1]) > 0 or retain == "0", f"the pruner forgot nothing: {pruned}"
    for name in names:
        logs = sorted(marks.glob(f"{name}.*.log"))
        assert 1 <= len(logs) <= limit, logs
        tokens = [int(line) for log in logs for line in log.read_text().split()]
        assert len(set(tokens)) == len(tokens), f"{name}: a token handed out twice"
    for log in marks.glob("*.log"):
        tokens = [int(line) for line in log.read_text().split()]
        name = log.name
        pairs = list(itertools.pairwise(tokens))
        assert all(earlier < later for earlier, later in pairs), (
            name, [pair for pair in pairs if pair[0] >= pair[1]][:5])


def test_a_break_landing_during_a_retain_0_release_keeps_the_breaks_copy(
        tmp_path: Path) -> None:
    # Forced interleaving: the break runs right where the release asks for the directory's
    # turn (its first step after checking the file is still its own).
    directory = tmp_path / "locks"
    store = tenure.connect(f"file://{directory}?retain=0")
    breaker, third = tenure.connect(f"file://{directory}"), tenure.connect(f"file://{directory}")
    try:
        lease = store.lock("invoice", ttl=30).try_acquire()
        assert lease is not None
        backend: Any = store.backend
        guard_path = backend._guard_path

        def break_first() -> str:
            backend._guard_path = guard_path  # once
            assert breaker.break_lease("invoice") == 1
            return guard_path()

        backend._guard_path = break_first
        backend._next_sweep = float("inf")  # no sweep after it: it would forget the free copy
        lease.release()
        assert f"{safe_key('invoice')}.lock" in files(directory), "the break's copy was unlinked"
        taken = third.lock("invoice", ttl=30).try_acquire()
        assert taken is not None and taken.token > lease.token
        assert breaker.lock("invoice", ttl=30).try_acquire() is None
        assert taken.release()
    finally:
        for each in (store, breaker, third):
            each.close()
