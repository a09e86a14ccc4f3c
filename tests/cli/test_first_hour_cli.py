"""A second new-user pass over the `tenure` command and the first names a user types:
error lines kept whole around a hidden password, unknown options pointing at the right help,
usage that matches the help, stores the command cannot see, the resolved path of a relative
store, what `tenure run` says about an APP that is not a Worker, `tenure.claims` and friends
after `import tenure`, timeout messages, and long names in a pipe or on a terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mypy import api as mypy_api
from servers import PostgresServer

import tenure


def tenure_command(*args: str, cwd: Path | None = None,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key != "TENURE_STORE"}
    return subprocess.run([sys.executable, "-m", "tenure", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=cwd, env={**base, **(env or {})})


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr of a failed command (nothing else on stderr or stdout)."""
    assert result.returncode != 0, result.stdout
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("tenure: error: "), line
    return line


# -- A: a password given as a URL query option -------------------------------------------------

@pytest.mark.parametrize("password", ["x", "does", "wrongpw", "a;b c"])
def test_a_query_password_leaves_the_rest_of_the_error_whole(tmp_path: Path,
                                                             password: str) -> None:
    """'does' is a word of the message: hiding it by its text would garble the message; the
    value of a query option runs to the next '&', ';' and spaces included."""
    missing = tmp_path / "typo" / "locks.db"
    line = error_line(tenure_command("locks", "--store",
                                     f"sqlite:///{missing}?password={password}"))
    assert line == (f"tenure: error: sqlite:///{missing}?password=***: {missing} does not "
                    "exist; check the path (a store is created by the applications that use it)")


PG_ROLE, PG_PASSWORD = "tenure_cli_pw_user", "right-horse-battery-staple"


@pytest.fixture(scope="module")
def password_role(postgres_server: PostgresServer) -> Iterator[str]:
    """A role that must log in with a password over TCP (the suite's cluster trusts everyone):
    a pg_hba.conf line for it alone goes first, and goes again."""
    hba = postgres_server._data / "pg_hba.conf"  # type: ignore[operator]
    original = hba.read_text()
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"DROP ROLE IF EXISTS {PG_ROLE}")
        db.execute(f"CREATE ROLE {PG_ROLE} LOGIN PASSWORD '{PG_PASSWORD}'")
        hba.write_text(f"host all {PG_ROLE} 127.0.0.1/32 scram-sha-256\n" + original)
        db.execute("SELECT pg_reload_conf()")
    yield PG_ROLE
    hba.write_text(original)
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute("SELECT pg_reload_conf()")
        db.execute(f"DROP ROLE IF EXISTS {PG_ROLE}")


@pytest.mark.parametrize("wrong", ["1", "refused", "not-the-password-but-a-long-one"])
def test_a_refused_query_password_prints_the_library_message_whole(
        postgres_server: PostgresServer, password_role: str, wrong: str) -> None:
    """'1' occurs in the address, 'refused' in the message: the line is the library's own."""
    url = (f"postgresql://{password_role}@127.0.0.1:{postgres_server.port}/postgres"
           f"?password={wrong}")
    with pytest.raises(tenure.StoreRefused) as raised, tenure.connect(url, timeout=2) as store:
        store.leases()
    library = str(raised.value)
    assert "?password=***: " in library and "authentication refused" in library

    line = error_line(tenure_command("locks", "--store", url))
    assert line == f"tenure: error: {' '.join(library.split())}"
    if len(wrong) > 1 and wrong != "refused":
        assert wrong not in line


# -- B: unknown options point at the subcommand's help -----------------------------------------

@pytest.mark.parametrize(("args", "help_of"), [
    (["locks", "--bogus"], "tenure locks"),
    (["jobs", "--bogus"], "tenure jobs"),
    (["demo", "--bogus"], "tenure demo"),
    (["chaos", "--bogus"], "tenure chaos"),
    (["run", "app:worker", "--bogus"], "tenure run"),
    (["locks", "break", "x", "--bogus"], "tenure locks break"),
    (["--bogus", "locks"], "tenure"),
])
def test_an_unknown_option_points_at_the_help_of_its_command(args: list[str],
                                                              help_of: str) -> None:
    result = tenure_command(*args)

    assert result.returncode == 2
    assert error_line(result) == (f"tenure: error: unrecognized arguments: --bogus; see "
                                  f"'{help_of} --help'")


# -- C: usage lines and help agree ---------------------------------------------------------------

def test_locks_help_lists_no_positional_its_usage_lines_do_not_show() -> None:
    result = tenure_command("locks", "--help")

    assert result.returncode == 0, result.stderr
    usage, _, rest = result.stdout.partition("\n\n")
    assert "ACTION" not in result.stdout
    assert "tenure locks break [-h] NAME [--store URL]" in usage
    listed = [line.split()[0] for line in rest.splitlines()
              if line.startswith("  ") and not line.strip().startswith("-")
              and line[2] != " "]
    for word in listed:
        assert word in usage, (word, usage)


# -- D: a memory:// store is private to the process --------------------------------------------

@pytest.mark.parametrize("args", [["locks"], ["locks", "break", "x"], ["jobs"]])
@pytest.mark.parametrize("via", ["flag", "env"])
def test_commands_that_read_a_store_refuse_memory(args: list[str], via: str) -> None:
    if via == "flag":
        result = tenure_command(*args, "--store", "memory://")
    else:
        result = tenure_command(*args, env={"TENURE_STORE": "memory://"})

    line = error_line(result)
    assert result.returncode == 2
    assert "memory:// is private to the process" in line, line
    assert "sqlite:///" in line and "file:///" in line, line


# -- E: the resolved path of a relative local store -------------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("file:fl", "file:fl (directory {}/fl)"),
    ("sqlite:///rel.db", "sqlite:///{0}/rel.db (database file {0}/rel.db)")])
def test_the_empty_store_line_shows_the_resolved_path_as_the_header_does(
        tmp_path: Path, url: str, shown: str) -> None:
    where = shown.format(tmp_path)
    absolute = url.replace(":", f":{tmp_path}/", 1) if url.startswith("file") else (
        f"sqlite:///{tmp_path}/rel.db")
    with tenure.connect(absolute) as store:  # a write creates the store
        assert store.break_lease("warm-up") == 0
        empty = tenure_command("locks", "--store", url, cwd=tmp_path)
        empty_prefix = tenure_command("locks", "--prefix", "a", "--store", url, cwd=tmp_path)
        jobs = tenure_command("jobs", "--store", url, cwd=tmp_path)
        lease = store.lock("a", ttl=30).try_acquire()
        assert lease is not None
        full = tenure_command("locks", "--store", url, cwd=tmp_path)

    for result in (empty, empty_prefix, jobs, full):
        assert result.returncode == 0, result.stderr
    assert empty.stdout == f"no live leases in {where}\n"
    assert empty_prefix.stdout == f"no live leases with prefix 'a' in {where}\n"
    assert jobs.stdout == f"no jobs recorded in {where}\n"
    assert full.stdout.splitlines()[0] == f"leases in {where}"


# -- F: an APP that is not a Worker, and --dir that is a file -----------------------------------

MISC = """\
import tenure


def number():
    return 3


def tick(run: tenure.Run) -> None:
    pass


def build(store_url, instance="a"):
    return None
"""


@pytest.mark.parametrize(("app", "said"), [
    ("misc:number", "misc:number is a function that returned an int, not a tenure.Worker or "
                    "tenure.aio.AsyncWorker"),
    ("misc:tick", "misc:tick is a function that takes arguments (run), not a tenure.Worker: "
                  "pass the Worker its jobs are registered on, as module:worker (e.g. "
                  "myapp.jobs:worker), or a function that takes no arguments and returns it"),
    ("misc:build", "misc:build is a function that takes arguments (store_url), not a "
                   "tenure.Worker: pass the Worker its jobs are registered on, as module:worker "
                   "(e.g. myapp.jobs:worker), or a function that takes no arguments and "
                   "returns it"),
])
@pytest.mark.parametrize("command", ["run", "jobs"])
def test_an_app_that_is_not_a_worker_is_one_line_saying_what_it_is(
        tmp_path: Path, app: str, said: str, command: str) -> None:
    (tmp_path / "misc.py").write_text(MISC)
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    with tenure.connect(url) as store:  # `tenure jobs` reads an existing store: write one
        assert store.break_lease("warm-up") == 0
    result = tenure_command(command, app, "--store", url, cwd=tmp_path)

    assert result.returncode == 2
    assert error_line(result) == f"tenure: error: {said}"


@pytest.mark.parametrize("inside", [False, True])
def test_demo_dir_that_is_a_file_says_so(tmp_path: Path, inside: bool) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    chosen = a_file / "run" if inside else a_file

    result = tenure_command("demo", "--dir", str(chosen), "--invoices", "5")

    assert result.returncode == 2
    assert error_line(result) == (
        f"tenure: error: --dir {chosen}: {a_file} is a file, not a directory; --dir wants a "
        "directory for the run's databases and logs (created if missing, kept afterwards)")
    assert a_file.read_text() == "mine\n"


# -- G: the exactly-once modules as attributes of tenure ---------------------------------------

def test_exactly_once_modules_are_attributes_after_import_tenure_without_sqlalchemy() -> None:
    code = textwrap.dedent("""\
        import json, sys
        import tenure
        at_import = "sqlalchemy" in sys.modules
        names = [tenure.claims.claim.__name__, tenure.idempotency.Idempotency.__name__,
                 tenure.outbox.Outbox.__name__]
        print(json.dumps({"at_import": at_import, "names": names}))
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"at_import": False,
                                         "names": ["claim", "Idempotency", "Outbox"]}


def test_mypy_strict_sees_the_exactly_once_modules_after_a_bare_import(tmp_path: Path) -> None:
    snippet = tmp_path / "uses_exactly_once.py"
    snippet.write_text(textwrap.dedent("""\
        import tenure

        claim = tenure.claims.claim
        keys: type[tenure.idempotency.Idempotency] = tenure.idempotency.Idempotency
        outbox: type[tenure.outbox.Outbox] = tenure.outbox.Outbox
        reveal_type(tenure.claims.claim)
        """))
    out, err, status = mypy_api.run(["--strict", "--cache-dir", str(tmp_path / "cache"),
                                     "--no-error-summary", str(snippet)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors == [] and status == 0, out + err
    assert "def (" in out, out


# -- H: timeout messages ----------------------------------------------------------------------

def test_negative_and_mistyped_timeouts_say_what_each_call_accepts() -> None:
    with tenure.connect("memory://") as store:
        lock = store.lock("x", ttl=5)
        with pytest.raises(tenure.InvalidArgument) as acquire_negative:
            lock.acquire(timeout=-1)
        with pytest.raises(tenure.InvalidArgument) as lock_negative:
            store.lock("x", ttl=5, timeout=-1)
        with pytest.raises(tenure.InvalidArgumentType) as acquire_mistyped:
            lock.acquire(timeout="5")  # type: ignore[arg-type]
        with pytest.raises(tenure.InvalidArgumentType) as lock_mistyped:
            store.lock("x", ttl=5, timeout="5")  # type: ignore[arg-type]

    assert str(acquire_negative.value) == (
        "timeout=-1 is negative; use 0 to try once, a number of seconds to wait, None for the "
        "lock's timeout, or math.inf to wait forever")
    assert str(lock_negative.value) == (
        "timeout=-1 is negative; use 0 to try once, a number of seconds to wait, or None (the "
        "default) or math.inf to wait forever")
    expected = "timeout must be seconds (int or float), a timedelta, or None, got str"
    assert str(acquire_mistyped.value) == str(lock_mistyped.value) == expected


# -- I: long names in a pipe and on a terminal -------------------------------------------------

def test_a_pipe_gets_rows_without_padding_to_the_longest_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    long_name = "n" * 1024
    with tenure.connect(url) as store:
        leases = [store.lock(name, ttl=30).try_acquire() for name in ("short", long_name)]
        assert None not in leases
        result = tenure_command("locks", "--store", url)

    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    short, long_row = rows["short"], rows[long_name]
    assert len(short) < len(long_row) - 900, short  # not padded to the long name
    assert short == short.rstrip() and long_row == long_row.rstrip()
    for row, lease in zip((short, long_row), leases, strict=True):
        assert lease is not None
        assert row.split()[:3] == [lease.name, lease.holder, str(lease.token)]
        assert re.search(r" \d+\.\d s$", row), row


@pytest.mark.parametrize("cut", [True, False])
def test_a_terminal_table_with_a_cut_name_says_json_shows_it_whole(tmp_path: Path,
                                                                    cut: bool) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    name = "invoice-" + ("x" * 292 if cut else "1")
    with tenure.connect(url) as store:
        assert store.lock(name, ttl=30).try_acquire() is not None
        result = tenure_command("locks", "--store", url,
                                env={"COLUMNS": "100", "FORCE_COLOR": "1"})

    assert result.returncode == 0, result.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout).splitlines()
    assert ("names cut here are shown whole by --json" in lines) is cut, lines
    assert max(len(line) for line in lines[1:]) <= 100, lines
