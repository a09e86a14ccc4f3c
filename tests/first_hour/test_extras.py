"""tenure without its extras: `import tenure` works with the base dependencies alone, and every
store, queue and SQL helper that needs an extra raises `tenure.MissingExtra` naming the pip
command (the CLI prints it as one error line), never a raw ModuleNotFoundError.

Building a venv without extras per test would take minutes; instead each case runs the
project's Python in a subprocess whose `sitecustomize` (on PYTHONPATH) installs an import hook
refusing the extra's packages, exactly as if they were not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

BLOCKER = '''
import os, sys
from importlib.abc import MetaPathFinder

BLOCKED = [name for name in os.environ.get("TENURE_TEST_BLOCK", "").split(",") if name]


class NotInstalled(MetaPathFinder):
    """Refuses the blocked packages (and their submodules) as a missing install would."""

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == name or fullname.startswith(name + ".") for name in BLOCKED):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, NotInstalled())
'''

# Each extra of pyproject.toml: the packages it installs that tenure imports, and the store
# URLs that need it.
EXTRAS = {
    "redis": (["redis"], ["redis://127.0.0.1:6379/0", "rediss://127.0.0.1:6380/0",
                          "unix:///tmp/redis.sock", "redis://r1:6379,r2:6379,r3:6379/0"]),
    "postgres": (["psycopg", "psycopg_binary"], ["postgresql://127.0.0.1/db",
                                                 "postgres://127.0.0.1/db"]),
    "mysql": (["aiomysql", "pymysql"], ["mysql://127.0.0.1/db", "mariadb://127.0.0.1/db"]),
    "azure": (["azure", "aiohttp"], ["azblob://myaccount/locks"]),
}
# The store classes of tenure.stores (and Async... of tenure.aio.stores) each extra provides.
CLASSES = {"redis": ["RedisStore", "RedisQuorumStore"], "postgres": ["PostgresStore"],
           "mysql": ["MySQLStore"], "azure": ["AzureBlobStore"]}
ALL_DRIVERS = sorted({name for packages, _ in EXTRAS.values() for name in packages}
                     | {"sqlalchemy"})


def run(args: list[str], blocked: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the project's Python with `blocked` packages uninstallable, in tmp_path."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {key: value for key, value in os.environ.items()
           if key != "TENURE_STORE" and not key.startswith("AZURE_")}
    env.update(PYTHONPATH=str(tmp_path), TENURE_TEST_BLOCK=",".join(blocked))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60, check=False)


def run_code(code: str, blocked: list[str], tmp_path: Path) -> object:
    """Run `code` (which prints one JSON document) with `blocked` packages uninstallable."""
    result = run(["-c", code], blocked, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_blocker_blocks(tmp_path: Path) -> None:
    code = """
import json
try:
    import redis.asyncio
except ModuleNotFoundError as exc:
    print(json.dumps(exc.name))
"""
    assert run_code(code, ["redis"], tmp_path) == "redis"


def base_distributions() -> set[str]:
    """The distributions `pip install tenure` installs: its requirements without an extra,
    and theirs, transitively (normalized names)."""
    found: set[str] = set()
    todo = ["tenure"]
    while todo:
        for line in metadata.requires(todo.pop()) or []:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            if name in found or (requirement.marker is not None and not requirement.marker
                                 .evaluate({"extra": ""})):
                continue
            found.add(name)
            with contextlib.suppress(metadata.PackageNotFoundError):
                metadata.distribution(name)
                todo.append(name)
    return found


def test_the_base_install_imports_everything_but_the_sql_helpers(tmp_path: Path) -> None:
    code = """
import json, sys
before = set(sys.modules)
import tenure, tenure.aio, tenure.stores, tenure.aio.stores, tenure.queues, tenure.jobs
import tenure.cli, tenure.demo, tenure.chaos
with tenure.connect("sqlite:locks.db") as store:
    with store.lock("jobs", ttl=5).acquire(timeout=1) as lease:
        token = lease.token
loaded = sorted({name.partition(".")[0] for name in set(sys.modules) - before})
print(json.dumps({"token": token, "loaded": loaded}))
"""
    found = run_code(code, ALL_DRIVERS, tmp_path)
    assert isinstance(found, dict) and found["token"] >= 1
    # Nothing outside the standard library and what `pip install tenure` installs.
    providers = metadata.packages_distributions()
    base = base_distributions() | {"tenure"}
    foreign = {name: providers.get(name) for name in found["loaded"]
               if name not in sys.stdlib_module_names and name != "tenure"
               and not name.startswith("_sysconfigdata_")  # the stdlib's, named per platform
               and not {canonicalize_name(dist) for dist in providers.get(name, [])} & base}
    assert not foreign, foreign


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_every_store_url_names_the_pip_command(extra: str, tmp_path: Path) -> None:
    blocked, urls = EXTRAS[extra]
    code = f"""
import json
import anyio
import tenure, tenure.aio, tenure.stores, tenure.aio.stores

errors = []
def caught(call):
    try:
        call()
    except tenure.MissingExtra as exc:
        errors.append(str(exc))
    except BaseException as exc:
        errors.append(f"{{type(exc).__name__}}: {{exc}}")
    else:
        errors.append("no error")

async def connect_async(url):
    async with tenure.aio.connect(url):
        pass

for url in {urls!r}:
    caught(lambda: tenure.connect(url).close())
    caught(lambda: anyio.run(connect_async, url))
for name in {CLASSES[extra]!r}:
    caught(lambda: getattr(tenure.stores, name))
    caught(lambda: getattr(tenure.aio.stores, "Async" + name))
print(json.dumps(errors))
"""
    errors = run_code(code, blocked, tmp_path)
    assert isinstance(errors, list)
    assert len(errors) == 2 * (len(urls) + len(CLASSES[extra])), errors
    assert all(f"pip install 'tenure[{extra}]'" in error for error in errors), errors


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_cli_prints_one_error_line_with_the_pip_command(extra: str, tmp_path: Path) -> None:
    blocked, urls = EXTRAS[extra]
    for url in urls:
        result = run(["-m", "tenure", "locks", "--store", url], blocked, tmp_path)
        assert result.returncode != 0 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("tenure: error: "), lines
        assert f"pip install 'tenure[{extra}]'" in lines[0], lines


@pytest.mark.parametrize(("blocked", "extra", "name", "module"), [
    (["azure"], "azure", "AzureQueue", "tenure.jobs.queues._azure"),
    (["psycopg"], "postgres", "PostgresQueue", "tenure.jobs.queues._postgres"),
])
def test_every_queue_names_the_pip_command(blocked: list[str], extra: str, name: str,
                                           module: str, tmp_path: Path) -> None:
    code = f"""
import importlib, json
import tenure, tenure.queues, tenure.jobs.queues
errors = []
for load in (lambda: tenure.queues.{name}, lambda: importlib.import_module({module!r})):
    try:
        load()
    except tenure.MissingExtra as exc:
        errors.append(str(exc))
print(json.dumps(errors))
"""
    errors = run_code(code, blocked, tmp_path)
    assert isinstance(errors, list) and len(errors) == 2, errors
    assert all(f"pip install 'tenure[{extra}]'" in error for error in errors), errors


@pytest.mark.parametrize("module", ["tenure.claims", "tenure.idempotency", "tenure.outbox"])
def test_the_sql_helpers_name_the_pip_command(module: str, tmp_path: Path) -> None:
    code = f"""
import json
import tenure
try:
    import {module}
except tenure.MissingExtra as exc:
    print(json.dumps(str(exc)))
"""
    error = run_code(code, ["sqlalchemy"], tmp_path)
    assert isinstance(error, str) and "pip install 'tenure[sql]'" in error, error


def test_azure_without_azure_identity_names_the_pip_command(tmp_path: Path) -> None:
    result = run(["-m", "tenure", "locks", "--store", "azblob://myaccount/locks"],
                 ["azure.identity"], tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "pip install 'tenure[azure]'" in lines[0], lines


def test_async_azure_without_aiohttp_names_the_pip_command(tmp_path: Path) -> None:
    """The async SDK sends with aiohttp, imported only at its first request; the sync SDK
    does not need it."""
    code = """
import json
import tenure, tenure.aio
tenure.connect("azblob:///locks", connection_string="UseDevelopmentStorage=true").close()
try:
    tenure.aio.connect("azblob:///locks", connection_string="UseDevelopmentStorage=true")
except tenure.MissingExtra as exc:
    print(json.dumps(str(exc)))
"""
    error = run_code(code, ["aiohttp"], tmp_path)
    assert isinstance(error, str) and "pip install 'tenure[azure]'" in error, error


def test_the_demo_without_sqlalchemy_names_the_pip_command(tmp_path: Path) -> None:
    result = run(["-m", "tenure", "demo", "--invoices", "10"], ["sqlalchemy"], tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and result.stdout == "" and len(lines) == 1, result.stderr
    assert lines[0].startswith("tenure: error: "), lines
    assert "pip install 'tenure[sql]'" in lines[0], lines
