"""SQLite expiry across Linux time namespaces: real `unshare --time` children.

Processes in another time namespace share the host's boot id but read CLOCK_MONOTONIC shifted
by the namespace's offset. The SQLite store keeps expiry times on the host's monotonic clock,
so it takes that offset off (tenure._hostclock.host_monotonic): a child in a namespace ahead of
the host must not see a live lease as expired (and steal it), and a killed child's lease must
expire after its ttl, not after its ttl plus the offset. Needs root (CAP_SYS_ADMIN) and a kernel
with time namespaces; skipped, saying which, otherwise.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

import tenure
from tenure._hostclock import host_monotonic, monotonic_offset

CHILD = r"""
import datetime, json, sys
import tenure
from tenure._hostclock import monotonic_offset
url, mode, name, ttl = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
store = tenure.connect(url)
lease = store.lock(name, ttl=ttl, holder="child").try_acquire()
now = datetime.datetime.now(datetime.timezone.utc)
print(json.dumps({
    "acquired": lease is not None,
    "offset": monotonic_offset(),
    "listed": [[info.name, info.holder, (info.expires_at - now).total_seconds()]
               for info in store.leases(name)],
}), flush=True)
if mode == "hold":
    sys.stdin.read()  # hold (renewing) until killed
"""

AHEAD = 100_000  # seconds: far more than any ttl here, so a missed correction cannot pass


def _refusal() -> str | None:
    """Why this machine cannot run a child in a new time namespace (None: it can)."""
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    if not Path("/proc/self/timens_offsets").exists():
        return "this kernel has no time namespaces (/proc/self/timens_offsets is missing)"
    probe = subprocess.run(["unshare", "--time", "--monotonic=1", "--fork", "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare --time was refused here (needs root): {probe.stderr.strip()}"
    return None


REFUSAL = _refusal()
pytestmark = pytest.mark.skipif(REFUSAL is not None, reason=str(REFUSAL))


def behind() -> int:
    """An offset that puts a namespace's monotonic clock behind the host's by far more than the
    tests' ttls of 3 s and 30 s allow a missed correction to go unseen, yet keeps it >= 0."""
    seconds = min(int(time.monotonic()) // 2, AHEAD)
    if seconds < 10:
        pytest.skip(f"the host booted {time.monotonic():.0f} s ago: too recently for a "
                    "namespace clock 10 s behind it (the kernel keeps clocks >= 0)")
    return -seconds


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/locks.db"


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)


def spawn(children: list[subprocess.Popen[str]], offset: int, url: str, mode: str, name: str,
          ttl: float) -> subprocess.Popen[str]:
    """A Python child in a new time namespace whose monotonic and boot-time clocks run
    `offset` seconds ahead of the host's. Killing it (unshare) kills the Python child too."""
    child = subprocess.Popen(
        ["unshare", "--time", f"--monotonic={offset}", f"--boottime={offset}", "--fork",
         "--kill-child", "--",
         sys.executable, "-c", CHILD, url, mode, name, str(ttl)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    children.append(child)
    return child


def report(child: subprocess.Popen[str], timeout: float = 60.0) -> dict[str, Any]:
    """The child's one JSON line (it fails the test when none comes within `timeout` s)."""
    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            pytest.fail(f"no report from the child within {timeout:g} s")
    line = child.stdout.readline()
    if not line:
        child.wait(timeout=30)
        assert child.stderr is not None
        pytest.fail(f"the child exited ({child.returncode}) without a report: "
                    f"{child.stderr.read()}")
    answer: dict[str, Any] = json.loads(line)
    return answer


def test_the_offset_of_this_process_is_read_and_taken_off() -> None:
    offset = monotonic_offset()
    assert abs(host_monotonic() - (time.monotonic() - offset)) < 1.0


@pytest.mark.parametrize("direction", ["ahead", "behind"])
def test_a_child_in_a_shifted_namespace_neither_steals_nor_misreads_a_live_lease(
        url: str, children: list[subprocess.Popen[str]], direction: str) -> None:
    offset = AHEAD if direction == "ahead" else behind()
    with tenure.connect(url) as store:
        lease = store.lock("held", ttl=30, holder="parent").try_acquire()
        assert lease is not None
        answer = report(spawn(children, offset, url, "try", "held", 30))
        assert answer["offset"] == offset  # the child really ran shifted, and read it
        assert answer["acquired"] is False, "the child stole a live lease"
        [[name, holder, left]] = answer["listed"]
        assert (name, holder) == ("held", "parent")
        assert 0 < left <= 30, f"the child sees the lease expire in {left:.0f} s, not <= 30 s"
        assert not lease.lost
        assert lease.release() is True


@pytest.mark.parametrize("direction", ["ahead", "behind"])
def test_a_killed_holder_in_a_shifted_namespace_loses_its_lease_after_its_ttl(
        url: str, children: list[subprocess.Popen[str]], direction: str) -> None:
    offset, ttl = (AHEAD if direction == "ahead" else behind()), 3.0
    started = time.monotonic()  # before the child's acquire, which expires >= ttl after it
    holder = spawn(children, offset, url, "hold", "killed", ttl)
    answer = report(holder)
    assert answer["acquired"] is True and answer["offset"] == offset
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    killed = time.monotonic()
    with tenure.connect(url) as store:
        taken: list[Any] = []

        def take() -> bool:
            lease = store.lock("killed", ttl=30, holder="parent").try_acquire()
            if lease is not None:
                taken.append((time.monotonic(), lease))
            return lease is not None

        wait_until(take, timeout=ttl + 30, what="the killed holder's lease to expire")
        at, lease = taken[0]
        assert at - started >= ttl, (
            f"taken {at - started:.2f} s after the child started, before its ttl of {ttl:g} s")
        assert at - killed <= ttl + 30
        assert lease.release() is True


REFUSED_CHILD = r"""
import ctypes, sys
import tenure
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x80) == 0, ctypes.get_errno()  # CLONE_NEWTIME: only children move there
with open("/proc/self/timens_offsets", "w") as offsets:
    offsets.write("monotonic 1000 0")
try:
    tenure.connect(sys.argv[1]).lock("x", ttl=5).try_acquire()
    print("acquired")
except tenure.StoreRefused as exc:
    print(f"refused: {exc}")
"""


def test_a_process_that_unshared_its_time_namespace_itself_is_refused(url: str) -> None:
    """Its /proc/self/timens_offsets shows its future children's offset, not its own clock's:
    the store cannot know its clock, so it refuses rather than guess."""
    child = subprocess.run([sys.executable, "-c", REFUSED_CHILD, url], capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("refused: this process called unshare(CLONE_NEWTIME) "
                                   "and has not forked since")
    assert "open the SQLite store in a child process" in child.stdout
