"""The first hour: what an operator meets in their first hour with the `tenure`
command and the library (usage lines, pipes, odd lock names, read-only stores, a released
lease's figures, closed stores, store options).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
import tenure.stores
from tenure import cli
from tenure._sync.stores._protocol import subject


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[name] = child
                found.update({f"{name} {k}": v for k, v in _subparsers(child).items()})
    return found


def test_every_usage_line_names_its_command_and_all_its_options() -> None:
    for command, parser in _subparsers(cli._parser()).items():
        usage = " ".join(parser.format_usage().split())
        first = usage.split("\n")[0]
        assert first.startswith(f"usage: tenure {command.split()[0]}"), (command, usage)
        assert parser.prog == f"tenure {command}", (command, parser.prog)
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                if "-h" in action.option_strings:
                    continue
                long = max(action.option_strings, key=len)
                assert long in usage, (command, long, usage)


def test_locks_break_usage_and_its_error_point_at_the_right_command() -> None:
    result = subprocess.run([sys.executable, "-m", "tenure", "locks", "break", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: tenure locks break [-h] NAME [--store URL]\n")

    missing = subprocess.run([sys.executable, "-m", "tenure", "locks", "break", "--store",
                              "memory://"], capture_output=True, text=True, timeout=60,
                             check=False)
    assert missing.returncode == 2
    assert missing.stderr == ("tenure: error: the following arguments are required: NAME; "
                              "see 'tenure locks break --help'\n")


def _run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """`tenure ARGS | head -0`, deterministically: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "tenure", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["locks", "--json"], ["locks"], ["locks", "--help"],
                                  ["locks", "break", "nobody"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(
        tmp_path: Path, args: list[str]) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    with tenure.connect(url) as store:
        lease = store.lock("first", ttl=60).try_acquire()
        assert lease is not None

        result = _run_into_closed_pipe(*args, "--store", url)

    assert result.stderr == ""
    assert result.returncode == 141  # 128 + SIGPIPE, as `ls | head` reports for ls


ODD = "jobs/\x1b[31mred\x07\u202eevil\nline\t[bold]"
ODD_SHOWN = "jobs/\\x1b[31mred\\x07\\u202eevil\\nline\\t[bold]"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tenure", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_control_characters_in_names_are_escaped_in_text_output(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    with tenure.connect(url) as store:
        leases = [store.lock(name, ttl=60, holder=f"host\x1b]0;{name}").try_acquire()
                  for name in (ODD, "job:" + ODD)]
        assert all(leases)

        table = _run("locks", "--store", url)
        prefixed = _run("locks", "--prefix", "none\x1b", "--store", url)
        broken = _run("locks", "break", "\x1bx", "--store", url)
        jobs = _run("jobs", "--store", url)
        as_json = _run("locks", "--json", "--store", url)

    for result in (table, prefixed, broken, jobs):
        assert result.returncode == 0, result.stderr
        assert not any(ch != "\n" and not ch.isprintable() for ch in result.stdout), result
    assert ODD_SHOWN in table.stdout and ("job:" + ODD_SHOWN) in table.stdout
    assert "host\\x1b]0;" in table.stdout
    assert ODD_SHOWN in jobs.stdout
    assert {entry["name"] for entry in json.loads(as_json.stdout)} == {
        ODD, "job:" + ODD}  # JSON keeps the exact names


def _as_unprivileged() -> list[str]:
    """The prefix that runs a command as a user the permissions apply to: root ignores them
    (no read-only bind mount here), so root runs it as nobody."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: read-only files would not be read-only")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory nobody can reach (pytest's tmp_path is private to its user)."""
    directory = Path(tempfile.mkdtemp(prefix="tenure-ro-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


@pytest.mark.parametrize("wal_files", ["checkpointed", "left-by-a-live-writer"])
def test_listing_a_read_only_sqlite_file(world_readable_dir: Path, wal_files: str) -> None:
    path = world_readable_dir / "locks.db"
    url = f"sqlite:///{path}"
    # A holder that dies holding a lease (os._exit: no release), as an application would.
    subprocess.run([sys.executable, "-c", f"""
import os, tenure
store = tenure.connect({url!r})
assert store.lock("nightly", ttl=300, renew_every=None).try_acquire() is not None
os._exit(0)
"""], check=True, timeout=60)
    if wal_files == "checkpointed":  # the last connection to close removes -wal and -shm
        last = sqlite3.connect(path)
        last.execute("SELECT count(*) FROM tenure_leases").fetchall()
        last.close()
        # Left: the database and the waiters' queue directory beside it (docs/stores/sqlite.md).
        assert sorted(p.name for p in world_readable_dir.iterdir()) == ["locks.db",
                                                                        "locks.db-queues"]
    else:
        assert (world_readable_dir / "locks.db-shm").exists()
    for file in world_readable_dir.iterdir():
        file.chmod(0o444)
    world_readable_dir.chmod(0o555)
    before = sorted((p.name, p.stat().st_size) for p in world_readable_dir.iterdir())

    def tenure_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_as_unprivileged(), sys.executable, "-m", "tenure", *args,
                               "--store", url], capture_output=True, text=True, timeout=60,
                              check=False)

    listed = tenure_cli("locks", "--json")
    broken = tenure_cli("locks", "break", "nightly")

    assert listed.returncode == 0, listed.stderr
    assert [entry["name"] for entry in json.loads(listed.stdout)] == ["nightly"]
    assert broken.returncode == 1  # proof that the file is read-only for the CLI's user
    assert "read-only" in broken.stderr and "Traceback" not in broken.stderr
    assert sorted((p.name, p.stat().st_size) for p in world_readable_dir.iterdir()) == before


@pytest.mark.parametrize("how", ["release", "with", "store close"])
def test_a_released_lease_expires_in_zero(tmp_path: Path, how: str) -> None:
    store = tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}")
    lock = store.lock("report", ttl=30)
    if how == "with":
        with lock.acquire(timeout=5) as lease:
            assert lease.expires_in > 25
    else:
        lease = lock.acquire(timeout=5)
        assert lease.expires_in > 25
        lease.release() if how == "release" else store.close()
    store.close()

    assert lease.expires_in == 0.0
    assert not lease.lost


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_a_closed_backend_refuses_every_call_with_one_plain_message(
        tmp_path: Path, kind: str) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}" if kind == "sqlite" else f"file://{tmp_path}"
    store = tenure.connect(url)
    backend = store.backend
    grant = backend.try_acquire("a", "me", 30.0, 1)
    assert grant is not None
    store.close()

    calls = {
        ("acquire", "b"): lambda: backend.try_acquire("b", "me", 30.0, 1),
        ("renewal", "a"): lambda: backend.renew([grant], 30.0),
        ("release", "a"): lambda: backend.release(grant),
        ("break", "a"): lambda: backend.break_lease("a"),
        ("listing", ""): lambda: backend.leases(""),
        ("reading the record", "a"): lambda: backend.read_record("a"),
        ("writing the record", "a"): lambda: backend.write_record(grant, "r"),
        ("listing the records", ""): lambda: backend.records(""),
    }
    for (operation, name), call in calls.items():
        if kind == "file" and operation == "renewal":
            continue  # renewing a flock holds nothing to refuse: it reports the lease lost
        with pytest.raises(tenure.StoreRefused) as refused:
            call()
        message = str(refused.value)
        assert message == (f"{backend.url}: {subject(operation, name)} refused: the store was "
                           "closed; open a new one with tenure.connect(...)"), message


CLOSE_WHILE_LISTING = """
import sys, threading, tenure
errors = []
for _ in range(200):
    store = tenure.connect(sys.argv[1])
    store.leases("")
    def list_until_refused():
        while True:
            try:
                store.leases("")
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
    threads = [threading.Thread(target=list_until_refused) for _ in range(3)]
    for thread in threads:
        thread.start()
    store.close()  # while the threads' calls run
    for thread in threads:
        thread.join()
print("\\n".join(sorted(set(errors))))
"""


def test_closing_a_sqlite_store_while_other_threads_use_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    result = subprocess.run([sys.executable, "-c", CLOSE_WHILE_LISTING, url],
                            capture_output=True, text=True, timeout=120, check=False)

    assert result.returncode == 0, result  # -11 before: close() closed connections in use
    assert result.stdout.splitlines() == [
        f"StoreRefused: {url}: listing of all leases refused: "
        "the store was closed; open a new one with tenure.connect(...)"]


def test_a_closed_memory_store_refuses_and_its_sharers_keep_their_leases() -> None:
    # memory://'s backend is an in-process object that Stores may share (docs/stores/memory.md):
    # closing one Store closes that Store, not the others' leases.
    backend = tenure.stores.MemoryStore()
    first, second = tenure.connect(backend), tenure.connect(backend)
    lease = first.lock("report", ttl=30).try_acquire()
    assert lease is not None
    second.close()

    with pytest.raises(tenure.StoreRefused, match="the store was closed"):
        second.leases()
    with pytest.raises(tenure.StoreRefused, match="the store was closed"):
        second.lock("other", ttl=30).try_acquire()
    assert [info.name for info in first.leases()] == ["report"]
    assert tenure.connect(backend).lock("report", ttl=30).try_acquire() is None
    assert not lease.lost
    first.close()


@pytest.mark.parametrize(("url_query", "keywords", "expected"), [
    ("", {"synchronous": "full"}, 2),  # PRAGMA synchronous: 1 NORMAL, 2 FULL
    ("?synchronous=full", {}, 2),
    ("?synchronous=FULL", {"synchronous": "full"}, 2),
    ("", {}, 1),
])
def test_sqlite_synchronous_as_a_keyword_or_in_the_url(
        tmp_path: Path, url_query: str, keywords: dict[str, str], expected: int) -> None:
    store = tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}{url_query}", **keywords)
    try:
        store.break_lease("warm-up")  # a write opens a connection with the store's settings
        (connection,) = store.backend._idle
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == expected
    finally:
        store.close()


@pytest.mark.parametrize(("url", "keywords", "error", "words"), [
    ("?synchronous=normal", {"synchronous": "full"}, tenure.InvalidArgument,
     ["synchronous is 'normal' in the URL but 'full' as a keyword; give it once"]),
    ("", {"synchronous": 2}, tenure.InvalidArgumentType, ["synchronous must be a str"]),
    ("", {"synchronus": "full"}, tenure.InvalidArgument, ["synchronus", "accepted: synchronous"]),
])
def test_sqlite_keyword_options_that_cannot_work_are_named(
        tmp_path: Path, url: str, keywords: dict[str, object], error: type[Exception],
        words: list[str]) -> None:
    with pytest.raises(error) as raised:
        tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}{url}", **keywords)

    assert all(word in str(raised.value) for word in words), str(raised.value)
