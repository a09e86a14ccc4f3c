"""File-store behaviour the conformance suite cannot express: breaks that overlap a waiter's
parked file, another break or an acquire midway, fork() with the open file
descriptions a child shares with its parent (item 2), one open file per held lease under a
lowered RLIMIT_NOFILE (one descriptor per lease) and relative directories resolved at connect.

Some interleavings are forced rather than hoped for: a break is paused inside `os.rename` (the
step that puts its copy in place), an acquire between its check of the "replaced" mark and its
record write (by wrapping the store's `_tail` helper, which runs there), and a waiting break where
it sleeps between tries of the break guard (the `_shim.sleep` of the store's `_leases` module).
These are hooks into the store's internals, used only to stop a thread at a known point.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from waiting import exit_status, wait_until

import tenure
import tenure.aio
from tenure._async.stores.file import _handles as async_file_handles
from tenure._async.stores.file import _leases as async_file_leases
from tenure._names import safe_key
from tenure._sync import _shim
from tenure._sync.stores import file as file_module
from tenure._sync.stores.file import _handles as file_handles
from tenure._sync.stores.file import _leases as file_leases
from tenure._types import LostReason


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"file://{tmp_path}/locks"


@pytest.fixture(params=["plain", "mapped"])
def lock_files(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both kinds of lock file: plain (pread, pwrite) and mapped (Python 3.13+'s default; on
    older Pythons it keeps a second descriptor, which these tests do not count)."""
    for module in (file_handles, async_file_handles):
        kind = module._MappedLockFile if request.param == "mapped" else module._LockFile
        monkeypatch.setattr(module, "_LOCK_FILE", kind)


@pytest.fixture
def connect(url: str, lock_files: None) -> Iterator[Callable[[], tenure.Store]]:
    """A fresh store of the test's directory each call (its own open files); all closed after."""
    stores: list[tenure.Store] = []

    def make() -> tenure.Store:
        stores.append(tenure.connect(url))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


def test_a_store_that_tried_before_takes_the_name_right_after_a_break(
        connect: Callable[[], tenure.Store]) -> None:
    holder, tries, waits = connect(), connect(), connect()
    broken = holder.lock("job", ttl=1).try_acquire()
    assert broken is not None
    # Both keep (park) an open file of the held lock file for their next try.
    assert tries.lock("job", ttl=60).try_acquire() is None
    assert waits.lock("job", ttl=60).try_acquire() is None
    assert connect().break_lease("job") == 1

    # The broken holder's process lives on and still flocks the replaced file: the parked files
    # are of that file, and must be reopened at the path, not retried.
    lease = tries.lock("job", ttl=60).try_acquire()
    assert lease is not None, "a store that tried before the break is refused after it"
    assert lease.release()
    waited = waits.lock("job", ttl=60).acquire(timeout=5)
    assert waited.token > lease.token > broken.token
    assert waited.release()
    wait_until(lambda: broken.lost, 5, "the broken holder to learn of the break")


class _PausedRenames:
    """Stops `os.rename` in the named threads until the test lets each go."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *threads: str) -> None:
        self.arrived = {name: threading.Event() for name in threads}
        self.go = {name: threading.Event() for name in threads}
        real_rename = os.rename

        def rename(source: Any, target: Any) -> None:
            name = threading.current_thread().name
            if name in self.go:
                self.arrived[name].set()
                assert self.go[name].wait(30)
            real_rename(source, target)

        monkeypatch.setattr(os, "rename", rename)


def test_overlapping_breaks_take_turns_and_leave_one_holder(
        monkeypatch: pytest.MonkeyPatch, connect: Callable[[], tenure.Store]) -> None:
    renames = _PausedRenames(monkeypatch, "B1", "B2")
    waiting, let_go = threading.Event(), threading.Event()

    class PausingShim:  # the file store's _leases._shim, pausing B2 when it finds the guard taken
        def __getattr__(self, attribute: str) -> Any:
            return getattr(_shim, attribute)

        def sleep(self, seconds: float) -> None:
            if threading.current_thread().name == "B2":
                waiting.set()
                assert let_go.wait(30)
            _shim.sleep(seconds)

    monkeypatch.setattr(file_leases, "_shim", PausingShim())
    first = connect().lock("job", ttl=60).try_acquire()
    assert first is not None
    freed: dict[str, int] = {}

    def break_it(tag: str) -> None:
        freed[tag] = connect().break_lease("job")

    b1 = threading.Thread(target=break_it, args=("B1",), name="B1", daemon=True)
    b1.start()
    assert renames.arrived["B1"].wait(10)  # B1 marked the old file and made its copy
    b2 = threading.Thread(target=break_it, args=("B2",), name="B2", daemon=True)
    b2.start()
    wait_until(lambda: waiting.is_set() or renames.arrived["B2"].is_set(), 10,
               "the second break to wait for the first, or to reach its own rename")
    assert not renames.arrived["B2"].is_set(), (
        "the second break reached its rename while the first was midway")

    renames.go["B1"].set()
    b1.join(10)
    d = connect().lock("job", ttl=1).try_acquire()  # locks the first break's copy
    assert d is not None
    assert d.token > first.token
    renames.go["B2"].set()
    let_go.set()
    b2.join(10)
    assert freed == {"B1": 1, "B2": 1}  # the second break came after D's acquire: it broke D

    e = connect().lock("job", ttl=60).try_acquire()
    assert e is not None
    assert e.token > d.token, "two holders of one name with the same fencing token"
    wait_until(lambda: d.lost, 5, "the holder that the second break broke to learn of it")
    assert d.lost_reason is LostReason.BROKEN
    assert e.release()


@pytest.mark.anyio
async def test_an_async_break_waits_its_turn_without_stalling_the_loop(
        monkeypatch: pytest.MonkeyPatch, url: str, connect: Callable[[], tenure.Store]) -> None:
    renames = _PausedRenames(monkeypatch, "B1")
    assert connect().lock("job", ttl=60).try_acquire() is not None
    b1 = threading.Thread(target=lambda: connect().break_lease("job"), name="B1", daemon=True)
    b1.start()
    assert renames.arrived["B1"].wait(10)  # B1 has the break turn until its rename
    monkeypatch.setattr(async_file_leases, "_BREAK_PATIENCE", 0.3)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    async with tenure.aio.connect(url) as store:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tick)
            with pytest.raises(tenure.StoreUnavailable,
                               match="break of 'job' failed: another break_lease"):
                await store.break_lease("job")
            tasks.cancel_scope.cancel()
        assert ticks >= 2, "the event loop stalled while the break waited for its turn"
        renames.go["B1"].set()
        b1.join(10)
        assert await store.break_lease("job") == 0  # B1's break is done: nobody holds the name


def test_a_break_during_an_acquire_is_not_undone(
        monkeypatch: pytest.MonkeyPatch, connect: Callable[[], tenure.Store]) -> None:
    first = connect().lock("job", ttl=60).try_acquire()  # the lock file exists
    assert first is not None and first.release()
    acquiring, early = connect(), connect()
    backend = acquiring.backend
    assert isinstance(backend, file_module.FileStore)
    real_tail = backend._tail
    paused, go = threading.Event(), threading.Event()

    def paused_tail(name: str, holder: str) -> bytes:
        paused.set()
        assert go.wait(10)
        return real_tail(name, holder)

    monkeypatch.setattr(backend, "_tail", paused_tail)
    box: dict[str, tenure.Lease | None] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("a", acquiring.lock("job", ttl=1).try_acquire()))
    thread.start()
    # A flocked the old file and found it unmarked; it has not written its record yet.
    assert paused.wait(10)
    assert early.lock("job", ttl=60).try_acquire() is None  # parks a file of the old lock file
    assert connect().break_lease("job") == 1  # breaks A: marks the old file, renames a copy
    go.set()
    thread.join(10)

    a = box["a"]
    d = connect().lock("job", ttl=60).try_acquire()  # locks the copy
    assert d is not None
    if a is not None:  # A may hand out its grant, but must then learn it was broken
        wait_until(lambda: a.lost, 5, "the broken acquirer to learn of the break")
        assert a.token < d.token
        a.release()
    assert early.lock("job", ttl=60).try_acquire() is None, (
        "a store with a file of the replaced lock took the name from the copy's holder")
    assert d.release()
    e = early.lock("job", ttl=60).try_acquire()
    assert e is not None and e.token > d.token
    assert e.release()


@pytest.mark.parametrize("limit", [1, 2], ids=["lock", "semaphore"])
def test_the_listed_holder_is_the_last_acquirers_whoever_wrote_the_file_before(
        connect: Callable[[], tenure.Store], limit: int) -> None:
    # A store writes the holder only when the file's counter shows another writer since its
    # own last write: alternate holders over one file (kept open for reuse by each store).
    first, second = connect(), connect()
    for store, holder in [(first, "a"), (second, "b-longer"), (first, "a"), (first, "c"),
                          (first, "c"), (second, "b-longer"), (second, "d")]:
        lease = store.semaphore("job", limit, ttl=30, holder=holder).try_acquire()
        assert lease is not None
        assert [info.holder for info in first.leases()] == [holder]
        assert lease.release()


def test_an_acquire_that_fails_after_locking_a_slot_lets_go_of_it(
        tmp_path: Path, connect: Callable[[], tenure.Store]) -> None:
    counter = tmp_path / "locks" / f"{safe_key('pool')}.sem"
    counter.mkdir(parents=True)  # the semaphore's counter cannot be opened
    with pytest.raises(tenure.StoreUnavailable, match="acquire of 'pool' failed"):
        connect().semaphore("pool", 2, ttl=5).try_acquire()
    counter.rmdir()
    leases = [connect().semaphore("pool", 2, ttl=5).try_acquire() for _ in range(2)]
    assert all(leases), "the failed acquire left a slot locked"



def test_a_forked_child_cannot_take_a_lock_its_parent_holds(
        connect: Callable[[], tenure.Store]) -> None:
    store = connect()
    lock = store.lock("x", ttl=3)
    warm = lock.try_acquire()
    assert warm is not None and warm.release()  # its file stays open, parked for reuse
    ready_r, ready_w = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: told when the parent holds "x"
        status = 1
        try:
            os.read(ready_r, 1)
            inherited = store.lock("x", ttl=3).try_acquire()
            own = store.lock("child's", ttl=3).try_acquire()  # the store works afresh
            os.write(answer_w, f"{inherited is None} {own is not None}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(answer_w)
    lease = lock.try_acquire()
    assert lease is not None
    os.write(ready_w, b"x")
    assert exit_status(pid, 30) == 0
    assert os.read(answer_r, 100).decode() == "True True", (
        "the child took the lock its parent holds (or could not lock a name of its own)")
    # The child closed its copies of the parent's files: that unlocked none of them.
    assert connect().lock("x", ttl=3).try_acquire() is None
    assert not lease.lost
    assert lease.release()
    for fd in (ready_r, ready_w, answer_r):
        os.close(fd)


_HOLD_AND_FORK = """
import os, sys, time, tenure
store = tenure.connect(sys.argv[1])
store.lock("x", ttl=30).try_acquire().release()  # a parked file
lease = store.lock("x", ttl=30).try_acquire()
if os.fork() == 0:
    # The child's cleanup has run when fork() returns here: saying its pid only now keeps
    # the test from killing the parent before the child has closed its copies.
    print(os.getpid(), flush=True)
    sys.stdin.read()  # the child lives on until its stdin closes
    os._exit(0)
time.sleep(60)
"""


def test_a_killed_holders_lock_is_free_while_its_forked_child_lives(
        url: str, connect: Callable[[], tenure.Store]) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _HOLD_AND_FORK, url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert connect().lock("x", ttl=30).try_acquire() is None
        parent.kill()
        parent.wait(10)
        os.kill(child, 0)  # the child still runs
        # The kernel frees a lock when its last descriptor closes: the child must have closed
        # its copies, or it would keep its dead parent's lock.
        lease = connect().lock("x", ttl=30).try_acquire()
        assert lease is not None, "a forked child kept its killed parent's lock"
        assert lease.release()
    finally:
        parent.kill()
        parent.stdin.close()  # type: ignore[union-attr]
        parent.wait(10)


_HOLD_UNTIL_OUT_OF_FILES = """
import json, os, resource, sys, tenure
url, limit, hard, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = tenure.connect(url)
for i in range(warm):  # released, their files stay open for reuse
    store.lock(f"warm-{i}", ttl=30).try_acquire().release()
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
baseline = len(os.listdir("/dev/fd")) - 1 - warm  # not counting listdir's own descriptor
leases = []
try:
    while True:
        leases.append(store.lock(f"held-{len(leases)}", ttl=30).acquire(timeout=10))
except tenure.StoreUnavailable as error:
    print(json.dumps({"baseline": baseline, "held": len(leases), "type": type(error).__name__,
                      "transient": error.transient, "message": str(error)}), flush=True)
os._exit(0)
"""


@pytest.mark.parametrize(("warm", "at_hard_limit"), [(0, False), (100, False), (0, True)],
                         ids=["fresh", "with-files-kept-for-reuse", "at-the-hard-limit"])
def test_a_process_holds_one_lease_per_descriptor_its_limit_allows(
        url: str, warm: int, at_hard_limit: bool) -> None:
    limit = 256
    allowed = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # a hard limit may only go down
    hard = limit if at_hard_limit else min(4096, allowed) if allowed >= 0 else 4096
    done = subprocess.run([sys.executable, "-c", _HOLD_UNTIL_OUT_OF_FILES, url, str(limit),
                           str(hard), str(warm)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    room = limit - found["baseline"]
    # One open file per held lease; the files kept for reuse are closed to make room.
    assert room - 2 <= found["held"] <= room, found
    assert (found["type"], found["transient"]) == ("StoreRefused", False), found
    message = found["message"]
    in_process = ("the hard limit too: as root" if hard == limit else
                  f"resource.setrlimit(resource.RLIMIT_NOFILE, ({hard}, hard)) in it")
    for part in ("too many open files", "EMFILE",
                 f"its limit is {limit} (RLIMIT_NOFILE, hard limit {hard})",
                 f"this store holds {found['held']} leases, one open file each",
                 "ulimit -n 65536", "LimitNOFILE=65536", in_process):
        assert part in message, f"{part!r} missing from: {message}"


def test_a_relative_directory_is_resolved_at_connect_and_named_in_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    directory = Path(os.getcwd()) / "locks"
    store = tenure.connect("file:locks")
    try:
        assert store.url == "file:locks"  # as configured, so `tenure run` knows it for its own
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        lease = store.lock("x", ttl=30).try_acquire()
        assert lease is not None
        assert [path.name for path in directory.glob("*.lock")] == [f"{safe_key('x')}.lock"], (
            "a chdir after connect moved the store's directory")
        assert lease.release()

        shutil.rmtree(directory)
        with pytest.raises(tenure.StoreRefused) as missing:
            store.lock("y", ttl=30).try_acquire()
        assert str(missing.value).startswith(
            f"file:locks (directory {directory}): acquire of 'y' refused")
        assert f"the lock directory '{directory}' is missing" in str(missing.value)
        with pytest.raises(tenure.StoreRefused,
                           match=re.escape(f"file:locks (directory {directory}): break of 'y'")):
            store.break_lease("y")
    finally:
        store.close()
    with pytest.raises(tenure.StoreRefused,
                       match=re.escape(f"file:locks (directory {directory}): acquire of 'z'")):
        store.backend.try_acquire("z", "holder", 30, 1)
