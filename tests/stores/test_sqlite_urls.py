"""SQLite store URLs as in SQLAlchemy, on real databases: `sqlite:///locks.db`
opens locks.db in the working directory (0.1.0 wrote /locks.db), `sqlite:////abs/x.db` the
absolute file, a missing directory is refused (not created) with the absolute path it resolved
to, and `tenure locks` shows that path above its table."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from waiting import call

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.stores

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sync", "async"])
def module(request: pytest.FixtureRequest) -> Any:
    return tenure.aio if request.param == "async" else tenure


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lease_rows(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as db:
        rows: list[tuple[str, int]] = db.execute(
            "SELECT name, token FROM tenure_leases ORDER BY name").fetchall()
    return rows


async def test_three_slashes_open_the_file_in_the_working_directory(module: Any,
                                                                    in_tmp: Path) -> None:
    (in_tmp / "data").mkdir()
    store = module.connect("sqlite:///data/locks.db")
    try:
        lease = await call(store.lock("jobs", ttl=30).try_acquire())
        assert lease is not None
        assert store.url == f"sqlite:///{in_tmp}/data/locks.db"  # four slashes: absolute
        assert store.backend.path == in_tmp / "data" / "locks.db"
        assert lease_rows(in_tmp / "data" / "locks.db") == [("jobs", lease.token)]
        assert not Path("/data/locks.db").exists()
        await call(lease.release())
    finally:
        await call(store.close())


async def test_the_same_file_as_sqlalchemy_and_four_slashes(module: Any, in_tmp: Path) -> None:
    """One URL, one file: a lease taken through `sqlite:///locks.db` is seen through
    `sqlite:////<cwd>/locks.db` and in the file SQLAlchemy opens for the same URL."""
    relative = module.connect("sqlite:///locks.db")
    absolute = module.connect(f"sqlite:///{in_tmp}/locks.db")
    try:
        lease = await call(relative.lock("jobs", ttl=30).try_acquire())
        assert lease is not None
        assert await call(absolute.lock("jobs", ttl=30).try_acquire()) is None
        engine = sa.create_engine("sqlite:///locks.db")
        with engine.connect() as connection:
            names = connection.execute(sa.text("SELECT name FROM tenure_leases")).scalars()
            assert list(names) == ["jobs"]
        engine.dispose()
        await call(lease.release())
    finally:
        await call(relative.close())
        await call(absolute.close())


async def test_a_later_chdir_does_not_move_the_database(module: Any, in_tmp: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store = module.connect("sqlite:///locks.db")
    elsewhere = in_tmp / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    try:
        lease = await call(store.lock("jobs", ttl=30).try_acquire())
        assert lease is not None
        assert lease_rows(in_tmp / "locks.db") == [("jobs", lease.token)]
        assert not (elsewhere / "locks.db").exists()
        await call(lease.release())
    finally:
        await call(store.close())


async def test_percent_encoded_and_tilde_paths_are_plain_names(module: Any,
                                                               in_tmp: Path) -> None:
    (in_tmp / "~").mkdir()
    store = module.connect("sqlite:///~/my%20locks%23%3F.db")
    try:
        lease = await call(store.lock("jobs", ttl=30).try_acquire())
        assert lease is not None
        assert lease_rows(in_tmp / "~" / "my locks#?.db") == [("jobs", lease.token)]
        assert store.url == f"sqlite:///{in_tmp}/~/my%20locks%23%3F.db"
        await call(lease.release())
    finally:
        await call(store.close())


async def test_a_missing_directory_is_refused_with_its_absolute_path(module: Any,
                                                                     in_tmp: Path) -> None:
    """The URL 0.1.0 read as /var/lib/app/locks.db: now relative, and its directory is not
    created (a second database would split the leases), so the first call says where."""
    store = module.connect("sqlite:///var/lib/app/locks.db")
    try:
        with pytest.raises(tenure.StoreRefused) as raised:
            await call(store.lock("jobs", ttl=30).acquire(timeout=None))
    finally:
        await call(store.close())
    message = str(raised.value)
    directory = in_tmp / "var" / "lib" / "app"
    assert f"sqlite:///{directory}/locks.db: acquire of 'jobs' refused" in message, message
    assert f"directory {str(directory)!r} does not exist" in message, message
    assert "sqlite:////path absolute" in message, message
    assert not (in_tmp / "var").exists()


async def test_a_directory_removed_after_the_first_call_is_refused_too(module: Any,
                                                                       in_tmp: Path) -> None:
    (in_tmp / "data").mkdir()
    first = module.connect("sqlite:///data/locks.db")
    try:
        assert await call(first.lock("warm-up", ttl=30).try_acquire()) is not None
    finally:
        await call(first.close())
    shutil.rmtree(in_tmp / "data")
    store = module.connect("sqlite:///data/locks.db")
    try:
        with pytest.raises(tenure.StoreRefused, match=f"{in_tmp}/data' does not exist"):
            await call(store.lock("jobs", ttl=30).try_acquire())
    finally:
        await call(store.close())


@pytest.mark.parametrize("path", [":memory:", ""])
def test_a_store_without_a_database_file_is_refused(module: Any, path: str) -> None:
    kind = module.stores.AsyncSQLiteStore if module is tenure.aio else module.stores.SQLiteStore
    with pytest.raises(tenure.InvalidArgument, match="memory://"):
        kind(path)


def test_a_relative_store_path_is_made_absolute(in_tmp: Path) -> None:
    backend = tenure.stores.SQLiteStore("locks.db")
    assert backend.path == in_tmp / "locks.db"
    assert backend.url == f"sqlite:///{in_tmp}/locks.db"


# -- the `tenure` command ----------------------------------------------------------------------

def tenure_cli(*args: str, cwd: Path, prefix: list[str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "tenure", *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


def test_tenure_locks_shows_the_resolved_database_above_the_table(in_tmp: Path) -> None:
    with tenure.connect("sqlite:///locks.db") as store:
        lease = store.lock("jobs", ttl=60).try_acquire()
        assert lease is not None
        result = tenure_cli("locks", "--store", "sqlite:///locks.db", cwd=in_tmp)

    assert result.returncode == 0, result.stderr
    first, columns = result.stdout.splitlines()[:2]
    assert first == f"leases in sqlite:///{in_tmp}/locks.db (database file {in_tmp}/locks.db)"
    assert columns.split()[0] == "name"
    assert "jobs" in result.stdout and str(lease.token) in result.stdout


def test_tenure_locks_names_the_absolute_path_that_does_not_exist(in_tmp: Path) -> None:
    result = tenure_cli("locks", "--store", "sqlite:///var/lib/app/locks.db", cwd=in_tmp)

    assert result.returncode == 1
    assert f"{in_tmp}/var/lib/app/locks.db does not exist" in result.stderr, result.stderr
    assert not (in_tmp / "var").exists()


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory the unprivileged user can enter (pytest's tmp_path is private to root)."""
    directory = Path(tempfile.mkdtemp(prefix="tenure-url-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


def test_a_read_only_database_error_names_the_absolute_path(world_readable_dir: Path) -> None:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only file would not be read-only")
    unprivileged = (["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                    if os.geteuid() == 0 else [])
    with tenure.connect(f"sqlite:///{world_readable_dir}/locks.db") as store:
        assert store.lock("warm-up", ttl=1).try_acquire() is not None
    for file in world_readable_dir.iterdir():
        file.chmod(0o444)
    world_readable_dir.chmod(0o555)

    result = tenure_cli("locks", "break", "jobs", "--store", "sqlite:///locks.db",
                        cwd=world_readable_dir, prefix=unprivileged)

    assert result.returncode == 1
    assert f"the database file '{world_readable_dir}/locks.db' is read-only" in result.stderr, \
        result.stderr
    assert result.stderr.startswith(f"tenure: error: sqlite:///{world_readable_dir}/locks.db: ")


def test_a_writable_database_in_a_read_only_directory_names_the_directory(
        world_readable_dir: Path) -> None:
    """SQLite creates the -wal and -shm files next to the database: with the file writable and
    its directory not, the directory is what to fix."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only directory would not be one")
    unprivileged = (["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                    if os.geteuid() == 0 else [])
    with tenure.connect(f"sqlite:///{world_readable_dir}/locks.db") as store:
        assert store.lock("warm-up", ttl=1).try_acquire() is not None
    for file in world_readable_dir.iterdir():
        file.chmod(0o666)
    world_readable_dir.chmod(0o555)

    result = tenure_cli("locks", "break", "jobs", "--store", "sqlite:///locks.db",
                        cwd=world_readable_dir, prefix=unprivileged)

    assert result.returncode == 1
    assert (f"the database's directory '{world_readable_dir}' is read-only for this process"
            in result.stderr), result.stderr
    assert "database file" not in result.stderr.partition("refused:")[2], result.stderr


APP = '''
import json
import os
import tenure

worker = tenure.Worker(tenure.connect(os.environ["TENURE_STORE"]))


@worker.every(60, name="tick")
def tick(run):
    pass
'''


def test_tenure_run_sees_a_relative_url_and_its_absolute_store_as_one(in_tmp: Path) -> None:
    """The worker's store.url is absolute (sqlite:////...), the configured URL relative: the
    same file, so no 'uses the store ..., not ...' warning."""
    (in_tmp / "urlapp.py").write_text(APP)
    env = {key: value for key, value in os.environ.items() if not key.startswith("TENURE_")}
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "run", "urlapp:worker", "--check",
         "--store", "sqlite:///locks.db"],
        capture_output=True, text=True, timeout=60, cwd=in_tmp, check=False,
        env={**env, "PYTHONPATH": str(in_tmp)})

    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["warnings"] == [], settings["warnings"]
    assert settings["store"]["value"] == "sqlite:///locks.db"


def test_a_url_that_meant_an_existing_absolute_file_in_0_1_0_is_warned_of(
        in_tmp: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`sqlite:///x` meant `/x` in tenure 0.1.0: when that file exists and differs from what
    the URL means now, the other instances may still use it, so connect() warns (once)."""
    old = in_tmp / "elsewhere" / "locks.db"
    old.parent.mkdir()
    old.touch()
    as_before = f"sqlite:///{str(old).lstrip('/')}"  # 0.1.0's reading: the file above
    (in_tmp / str(old.parent).lstrip("/")).mkdir(parents=True)
    with caplog.at_level("WARNING", logger="tenure"):
        store = tenure.connect(as_before)
        store.close()
        tenure.connect(f"sqlite:///{old}").close()  # four slashes: what it meant, no warning
        tenure.connect("sqlite:///new.db").close()  # /new.db does not exist: no warning
    warnings = [record.getMessage() for record in caplog.records
                if record.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert f"write sqlite:///{old}" in warnings[0] and str(in_tmp) in warnings[0]


@pytest.mark.parametrize("given", ["url", "keyword"])
async def test_busy_timeout_is_an_option_of_the_url_and_of_connect(module: Any, in_tmp: Path,
                                                                    given: str) -> None:
    """docs/stores/sqlite.md promises `busy_timeout`: how long a call waits for another
    writer's lock before the store answers busy (a transient error, retried by the core)."""
    store = (module.connect("sqlite:///x.db?busy_timeout=0.05") if given == "url"
             else module.connect("sqlite:///x.db", busy_timeout=0.05))
    try:
        assert await call(store.lock("warm-up", ttl=5).try_acquire()) is not None
        blocker = sqlite3.connect(in_tmp / "x.db", isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            started = time.monotonic()
            with pytest.raises(tenure.StoreUnavailable) as raised:
                await call(store.lock("jobs", ttl=5).try_acquire())
            waited = time.monotonic() - started
        finally:
            blocker.rollback()
            blocker.close()
    finally:
        await call(store.close())
    assert raised.value.transient and "locked" in str(raised.value), raised.value
    assert waited < 2.5, waited  # the default busy_timeout (5 s) would wait twice as long


@pytest.mark.parametrize("value", [0, -1, "0", "soon", "nan", True, None, 601])
def test_a_bad_busy_timeout_is_refused_before_any_file_is_opened(module: Any, in_tmp: Path,
                                                                 value: object) -> None:
    with pytest.raises((tenure.InvalidArgument, tenure.InvalidArgumentType),
                       match="busy_timeout"):
        module.connect("sqlite:///x.db", busy_timeout=value)
    if isinstance(value, str):
        with pytest.raises(tenure.InvalidArgument, match="busy_timeout"):
            module.connect(f"sqlite:///x.db?busy_timeout={value}")
    kind = module.stores.AsyncSQLiteStore if module is tenure.aio else module.stores.SQLiteStore
    with pytest.raises((tenure.InvalidArgument, tenure.InvalidArgumentType),
                       match="busy_timeout"):
        kind("x.db", busy_timeout=value)
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize(("url", "keywords", "shown"), [
    ("sqlite:///t.db?synchronous=full", {}, "?synchronous=full"),
    ("sqlite:///t.db?synchronous=FULL&busy_timeout=2", {}, "?synchronous=full&busy_timeout=2"),
    ("sqlite:///t.db", {"busy_timeout": 0.5}, "?busy_timeout=0.5"),
    ("sqlite:///t.db?synchronous=normal&busy_timeout=5", {}, ""),
])
def test_the_store_url_keeps_its_options(module: Any, in_tmp: Path, url: str,
                                         keywords: dict[str, object], shown: str) -> None:
    """As a Redis or PostgreSQL store's url does: the options that differ from the defaults,
    and the url reads back as the same store."""
    store = module.connect(url, **keywords)
    assert store.url == f"sqlite:///{in_tmp}/t.db{shown}"
    again = module.connect(store.url)
    assert again.url == store.url
