"""The `tenure` command, run as a real subprocess against SQLite and file stores in tmp_path,
and an Azure container on Azurite.

Leases are held by this test process (a real lease in the store, renewed by its background
thread); the CLI process sees them through the store, as an operator's shell would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from waiting import wait_until

import tenure
from tenure._urls import redact

NAME = "jobs/[bold] nightly"  # '[bold]' would vanish if the table treated names as markup
SECRET = "hunter2"
LOSS_DEADLINE = 15.0  # generous: the lease below is checked every 0.5 s


def run(*args: str, env_store: str | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "TENURE_STORE"}
    if env_store is not None:
        env["TENURE_STORE"] = env_store
    return subprocess.run(
        [sys.executable, "-m", "tenure", *args],
        capture_output=True, text=True, env=env, timeout=60, check=False, cwd=cwd,
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tenure: error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


@dataclass
class Held:
    url: str
    store: tenure.Store
    lease: tenure.Lease
    lost: threading.Event


@pytest.fixture(params=["sqlite", "file", "azblob"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'locks.db'}"  # sqlite:////abs/path.db
    if request.param == "azblob":  # Azurite; the connection string is in the environment
        request.getfixturevalue("azurite")
        return f"azblob:///t{uuid.uuid4().hex[:20]}"
    return f"file://{tmp_path / 'locks'}"


@pytest.fixture
def held(url: str) -> Iterator[Held]:
    store = tenure.connect(url)
    lost = threading.Event()
    lock = store.lock(NAME, ttl=30, renew_every=0.5, on_lost=lambda _lease: lost.set())
    lease = lock.try_acquire()
    assert lease is not None
    try:
        yield Held(url, store, lease, lost)
    finally:
        store.close()


def described(store: tenure.Store) -> str:
    """How `tenure locks` names a store: its URL and, for a local one, the resolved path."""
    backend = store.backend
    if isinstance(backend, tenure.stores.SQLiteStore):
        return f"{store.url} (database file {backend.path})"
    if isinstance(backend, tenure.stores.FileStore):
        return f"{store.url} (directory {backend.directory})"
    return store.url


def header(stdout: str) -> list[str]:
    """The table's column names (below the 'leases in STORE' line)."""
    return next(line for line in stdout.splitlines() if not line.startswith("leases in ")).split()


def test_table_shows_the_held_lease(held: Held) -> None:
    result = run("locks", "--store", held.url)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "slot" not in header(result.stdout)  # a plain lock: no slot column
    row = next(line for line in result.stdout.splitlines() if NAME in line)
    assert held.lease.holder in row
    assert str(held.lease.token) in row.split()
    if held.url.startswith(("file:", "azblob:")):  # kernel-held; Azure does not list expiry
        assert "held until released" in row
    else:
        seconds = float(re.search(r"(\d+\.\d) s\s*$", row).group(1))  # type: ignore[union-attr]
        assert 0 < seconds <= 30


def test_json_matches_the_held_lease(held: Held) -> None:
    result = run("locks", "--json", "--store", held.url)

    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout)
    expires_at = entry.pop("expires_at")
    assert entry == {"name": NAME, "slot": 0, "holder": held.lease.holder,
                     "token": held.lease.token}
    if held.url.startswith(("file:", "azblob:")):
        assert expires_at is None
    else:
        remaining = datetime.fromisoformat(expires_at) - datetime.now(timezone.utc)
        assert 0 < remaining.total_seconds() <= 31


def test_prefix_filters_and_empty_result_says_so(held: Held) -> None:
    other = held.store.lock("other", ttl=30).try_acquire()
    assert other is not None

    everything = json.loads(run("locks", "--json", "--store", held.url).stdout)
    only_jobs = json.loads(run("locks", "--json", "--prefix", "jobs/", "--store", held.url).stdout)
    nothing = run("locks", "--prefix", "zzz", "--store", held.url)

    assert [entry["name"] for entry in everything] == [NAME, "other"]
    assert [entry["name"] for entry in only_jobs] == [NAME]
    assert nothing.returncode == 0
    assert nothing.stdout.strip() == (f"no live leases with prefix 'zzz' in "
                                      f"{described(held.store)}")


def test_long_names_are_not_wrapped_when_piped(url: str) -> None:
    name = "reports/" + "quarterly-" * 20
    with tenure.connect(url) as store:
        lease = store.lock(name, ttl=30).try_acquire()
        assert lease is not None

        result = run("locks", "--store", url)

    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if name in line]
    assert str(lease.token) in row.split()


def test_a_300_character_name_keeps_the_table_inside_a_terminal(tmp_path: Path) -> None:
    """On a terminal (FORCE_COLOR makes rich treat the pipe as one) 100 columns wide, a name too
    long for the screen is cut with an ellipsis; holder, token and expiry stay on screen."""
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    name = "invoice-" + "x" * 292
    with tenure.connect(url) as store:
        lease = store.lock(name, ttl=30).try_acquire()
        assert lease is not None
        env = {**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1"}
        env.pop("TENURE_STORE", None)
        result = subprocess.run([sys.executable, "-m", "tenure", "locks", "--store", url],
                                capture_output=True, text=True, env=env, timeout=60, check=False)

    assert result.returncode == 0, result.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout).splitlines()
    table = lines[1:]  # below the header line (the store's URL, wrapped by the terminal)
    assert max(len(line) for line in table) <= 100, lines
    [row] = [line for line in lines if "invoice-xxx" in line]
    assert "\u2026" in row and str(lease.token) in row.split() and row.rstrip().endswith(" s")


def test_semaphore_slots_are_shown(url: str) -> None:
    with tenure.connect(url) as store:
        first = store.semaphore("imports", limit=3, ttl=30).try_acquire()
        second = store.semaphore("imports", limit=3, ttl=30).try_acquire()
        assert first is not None and second is not None

        table = run("locks", "--store", url)
        listed = json.loads(run("locks", "--json", "--store", url).stdout)

    assert table.returncode == 0, table.stderr
    assert header(table.stdout)[:2] == ["name", "slot"]
    assert [(entry["name"], entry["slot"], entry["token"]) for entry in listed] == sorted(
        ("imports", lease.slot, lease.token) for lease in (first, second))  # azblob: random slots


def test_break_frees_the_lease(held: Held) -> None:
    result = run("locks", "break", NAME, "--store", held.url)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"broke 1 lease on {NAME!r}"
    with tenure.connect(held.url) as other:
        fresh = other.lock(NAME, ttl=30).try_acquire()
        assert fresh is not None  # free at once, not after a ttl
        assert fresh.token > held.lease.token
        assert held.lost.wait(LOSS_DEADLINE)  # the old holder learns at its next check
        assert held.lease.lost
        assert held.lease.release() is False  # nothing of the new holder's is freed
        listed = json.loads(run("locks", "--json", "--store", held.url).stdout)
        assert [entry["token"] for entry in listed] == [fresh.token]


def test_break_with_no_live_lease(url: str) -> None:
    with tenure.connect(url) as store:  # a write creates the store (a listing creates nothing)
        assert store.break_lease("warm-up") == 0
        shown = described(store)

    result = run("locks", "break", "nobody", "--store", url)
    listing = run("locks", "--store", url)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no live lease on 'nobody'"
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.strip() == f"no live leases in {shown}"


def test_prune_forgets_the_idle_names_and_keeps_the_held_one(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path}/prune.db"
    with tenure.connect(store_url) as store:
        for name in ("invoice-1", "invoice-2"):
            store.lock(name, ttl=30).try_acquire().release()  # type: ignore[union-attr]
        kept = store.lock("held", ttl=30).try_acquire()
        dry = run("locks", "prune", "--idle", "0s", "--dry-run", "--store", store_url)
        pruned = run("locks", "prune", "--idle", "0", "--store", store_url)
        again = run("locks", "prune", "--idle", "1h", "--store", store_url)
        bad = run("locks", "prune", "--idle", "soon", "--store", store_url)
        assert kept is not None and kept.release()

    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == "would forget 2 names idle for 0 s or more"
    assert pruned.stdout.strip() == "forgot 2 names idle for 0 s or more"
    assert again.stdout.strip() == "forgot 0 names idle for 3600 s or more"
    assert bad.returncode == 2
    assert "argument --idle: 'soon' is not a duration" in bad.stderr


def test_store_from_environment(held: Held) -> None:
    from_env = run("locks", env_store=held.url)
    flag_wins = run("locks", "--store", held.url, env_store="redis://elsewhere/0")

    for result in (from_env, flag_wins):
        assert result.returncode == 0, result.stderr
        assert NAME in result.stdout


@pytest.mark.parametrize("args", [["locks"], ["locks", "break", "jobs"]])
def test_missing_store_is_a_usage_error(args: list[str]) -> None:
    result = run(*args)

    line = assert_one_error_line(result)
    assert result.returncode == 2
    assert "TENURE_STORE" in line and "--store" in line


@pytest.mark.parametrize("bad_url", [
    f"redis://user:{SECRET}@cache:6379/0",
    f"sqlite://user:{SECRET}@host/locks.db",  # a host in a local store's URL
    f"sqlite://user:pw/{SECRET}@host/locks.db",  # '/' and '@' in a password fool redact()
    f"sqlite://user:pw@{SECRET}@host/locks.db",
    f"sqlite:////nonexistent/locks.db?password={SECRET}",
    f"redis://app:two {SECRET}@127.0.0.1:1/0",  # a space: redact() cannot tell it from text
    f"mysql://root:two {SECRET}@127.0.0.1:1/db",
])
@pytest.mark.parametrize("via", ["flag", "env"])
@pytest.mark.parametrize("command", [["locks"], ["locks", "break", "jobs"]])
def test_bad_url_is_one_line_without_secrets(bad_url: str, via: str, command: list[str]) -> None:
    if via == "flag":
        result = run(*command, "--store", bad_url)
    else:
        result = run(*command, env_store=bad_url)

    assert_one_error_line(result)
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.parametrize("password", ["e", "127", "p%40ss", "redis"])
def test_short_and_odd_passwords_are_hidden_without_garbling_the_message(
        password: str) -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    result = run("locks", "--store", f"redis://:{password}@127.0.0.1:{port}/0")

    line = assert_one_error_line(result)
    assert line == (f"tenure: error: redis://:***@127.0.0.1:{port}/0: listing of all leases "
                    f"failed: Error 111 connecting to 127.0.0.1:{port}. Connection refused; "
                    "check that the server is running and reachable at this address, and the TLS "
                    "settings; each call waits at most timeout=5 s")
    unsupported = assert_one_error_line(run("locks", "--store", "ftp://x"))
    assert "sqlite:////absolute/locks.db" in unsupported and "***" not in unsupported


def test_missing_store_path_is_reported_and_not_created(tmp_path: Path) -> None:
    for url, path in [(f"sqlite:///{tmp_path / 'typo' / 'locks.db'}", tmp_path / "typo"),
                      (f"file://{tmp_path / 'typo-dir'}", tmp_path / "typo-dir")]:
        result = run("locks", "--store", url)

        line = assert_one_error_line(result)
        assert result.returncode == 1
        assert "does not exist" in line
        assert not path.exists()


@pytest.mark.parametrize("args", [
    ["locks", "--bogus", "--store", "{store}"],
    ["locks", "break", "--store", "{store}"],  # NAME missing
    ["locks", "break", "", "--store", "{store}"],  # empty name
    ["frobnicate"],
    [],
])
def test_usage_errors_are_one_line(args: list[str], tmp_path: Path) -> None:
    result = run(*(arg.format(store=f"file://{tmp_path}") for arg in args))

    assert_one_error_line(result)
    assert result.returncode == 2


def test_version() -> None:
    result = run("--version")

    assert result.returncode == 0
    assert result.stdout.strip() == f"tenure {tenure.__version__}"


def test_console_script(held: Held) -> None:
    script = Path(sys.executable).parent / "tenure"
    if not script.exists():
        pytest.skip("the tenure script is not installed in this environment")
    result = subprocess.run([str(script), "locks", "--json", "--store", held.url],
                            capture_output=True, text=True, timeout=60, check=False)

    assert result.returncode == 0, result.stderr
    assert [entry["token"] for entry in json.loads(result.stdout)] == [held.lease.token]


@pytest.mark.parametrize("url", [
    "mysql://root:{password}@127.0.0.1:{port}/tenure",
    "redis://:{password}@127.0.0.1:{port}/0",
    "postgresql://app:{password}@127.0.0.1:{port}/db",
])
def test_the_cli_redacts_a_url_as_the_library_does(url: str) -> None:
    """One form everywhere: the user name stays, only the password is hidden."""
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = url.format(password=SECRET, port=port)
    with pytest.raises(tenure.StoreUnavailable) as raised, tenure.connect(url) as store:
        store.leases()
    library = str(raised.value)

    line = assert_one_error_line(run("locks", "--store", url))
    shown = redact(url)
    assert ":***@" in shown and SECRET not in line
    assert line.startswith(f"tenure: error: {shown}: ") and library.startswith(f"{shown}: ")


@pytest.mark.parametrize("command", [["locks"], ["locks", "break"], ["run"], ["jobs"],
                                     ["demo"], ["chaos"]])
def test_every_usage_line_shows_the_help_option(command: list[str]) -> None:
    result = run(*command, "--help")

    assert result.returncode == 0, result.stderr
    usage = result.stdout.splitlines()[0]
    assert usage.startswith(f"usage: tenure {' '.join(command)} [-h]"), usage
    # The usage fits a terminal, and every option and argument it names is explained below
    # under that same spelling, each with a help text.
    usage_lines = result.stdout.split("\n\n")[0].splitlines()
    assert all(len(line) <= 100 for line in usage_lines), usage_lines
    options = result.stdout.split("\n\n", 1)[1]
    for named in re.findall(r"\[(--[a-z-]+ [A-Z]+)\]", " ".join(usage_lines)):
        assert f"  {named}" in options, (named, options)
    for line in options.splitlines():
        assert line.strip() != "NAME", "a positional without a help text"


@pytest.mark.parametrize("url", ["file:~/locks", "sqlite:///~/locks.db"])
def test_a_missing_path_with_a_tilde_shows_where_it_was_looked_for(url: str,
                                                                   tmp_path: Path) -> None:
    result = run("locks", "--store", url, cwd=tmp_path)

    line = assert_one_error_line(result)
    looked_at = tmp_path / "~" / url.rpartition("~/")[2]
    assert f"{looked_at} does not exist (~ is not expanded: write the full path)" in line, line
    assert not (tmp_path / "~").exists()


SELF_RUNNING_APP = """
import os
from datetime import timedelta
from pathlib import Path

import tenure

worker = tenure.Worker(tenure.connect("memory://"))


@worker.every(timedelta(seconds=0.2))
def beat(run: tenure.Run) -> None:
    Path(os.environ["BEATS_FILE"]).touch()


worker.run()
"""


def test_run_refuses_an_app_whose_import_ran_the_worker(tmp_path: Path) -> None:
    """The README's jobs block copied into a module ends in worker.run(): the import runs the
    worker; once Ctrl-C ends that run, `tenure run` must not start it again."""
    module = f"selfrunning_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(SELF_RUNNING_APP)
    beats = tmp_path / "beats"
    env = {key: value for key, value in os.environ.items() if key != "TENURE_STORE"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tenure", "run", f"{module}:worker", "--store", "memory://"],
        cwd=tmp_path, env={**env, "BEATS_FILE": str(beats)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(beats.exists, 30, "the worker started by the import to run its job")
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 2, err
    errors = [line for line in err.splitlines() if line.startswith("tenure: error: ")]
    assert errors == [f"tenure: error: importing {module} ran the worker (worker.run() at "
                      "module level): guard it with if __name__ == '__main__':"], err
