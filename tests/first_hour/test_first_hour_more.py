"""What a new user meets next: `tenure.queues.X` and `tenure.stores.X` after a bare
`import tenure` (for mypy --strict and at runtime, without loading drivers), and the default name
of a job defined in a script, alike however the instance was started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from mypy import api as mypy_api

DRIVERS = ("redis", "psycopg", "psycopg_pool", "pymysql", "aiomysql", "asyncmy",
           "azure.storage.blob", "azure.storage.queue")


def test_mypy_strict_sees_the_lazy_submodules_after_a_bare_import(tmp_path: Path) -> None:
    snippet = tmp_path / "uses_tenure.py"
    snippet.write_text(textwrap.dedent("""\
        import tenure
        import tenure.aio

        azure: tenure.queues.AzureQueue = tenure.queues.AzureQueue("q", connection_string="x")
        postgres: tenure.queues.PostgresQueue = tenure.queues.PostgresQueue("q", "dbname=x")
        message: type[tenure.queues.Message] = tenure.queues.Message
        sqlite: tenure.stores.SQLiteStore = tenure.stores.SQLiteStore("locks.db")
        files: tenure.aio.stores.AsyncFileStore = tenure.aio.stores.AsyncFileStore("locks")
        reveal_type(tenure.queues.AzureQueue)
        """))
    out, err, status = mypy_api.run(["--strict", "--cache-dir", str(tmp_path / "cache"),
                                     "--no-error-summary", str(snippet)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors == [] and status == 0, out + err
    assert "tenure.jobs.queues._azure.AzureQueue" in out, out


def _run(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def test_tenure_stores_is_an_attribute_after_import_tenure_and_loads_no_driver() -> None:
    result = _run(f"""\
        import json, sys
        import tenure
        loaded = lambda: sorted(m for m in {DRIVERS!r} if m in sys.modules)
        at_import = loaded()
        store = tenure.connect(tenure.stores.SQLiteStore("unused.db"))  # never opened
        store.close()
        import tenure.aio
        print(json.dumps({{"at_import": at_import, "after": loaded(),
                           "sync": tenure.stores.SQLiteStore.__name__,
                           "aio": tenure.aio.stores.AsyncSQLiteStore.__name__,
                           "queues": tenure.queues.QueueMessage.__name__}}))
        """)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {"at_import": [], "after": [], "sync": "SQLiteStore",
                    "aio": "AsyncSQLiteStore", "queues": "QueueMessage"}


APP = """\
import json
from datetime import timedelta

import tenure

worker = tenure.Worker(tenure.connect("memory://"))


@worker.every(timedelta(minutes=5))
def process_invoices(run: tenure.Run) -> None: ...


if __name__ == "__main__":
    print(json.dumps(sorted(worker.jobs)))
"""


def _names(command: list[str], cwd: Path) -> list[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd)
    assert result.returncode == 0, result.stderr
    names: list[str] = json.loads(result.stdout)
    return names


def _run_check(app: str, cwd: Path) -> list[str]:
    """The job names `tenure run APP` registers (its --check prints them and exits)."""
    result = subprocess.run([sys.executable, "-m", "tenure", "run", app, "--check",
                             "--store", "memory://"], capture_output=True, text=True,
                            timeout=60, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return sorted(json.loads(result.stdout)["jobs"])


def test_a_job_in_a_script_is_named_alike_however_the_instance_starts(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    as_script = _names([sys.executable, "app.py"], tmp_path)
    from_elsewhere = _names([sys.executable, str(tmp_path / "app.py")], tmp_path.parent)
    as_module = _names([sys.executable, "-m", "app"], tmp_path)
    by_tenure_run = _run_check("app:worker", tmp_path)
    assert as_script == from_elsewhere == as_module == by_tenure_run == ["app.process_invoices"]


def test_a_job_in_a_packaged_module_run_with_dash_m_is_named_by_its_import_name(
        tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "app.py").write_text(APP)
    as_module = _names([sys.executable, "-m", "pkg.app"], tmp_path)
    by_tenure_run = _run_check("pkg.app:worker", tmp_path)
    assert as_module == by_tenure_run == ["pkg.app.process_invoices"]


def test_an_ambiguous_script_name_is_refused_asking_for_name(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "app.py").write_text(APP)
    in_package = subprocess.run([sys.executable, "pkg/app.py"], capture_output=True, text=True,
                                timeout=60, cwd=tmp_path)
    assert in_package.returncode == 1
    assert "InvalidArgument" in in_package.stderr
    assert "pass name=" in in_package.stderr and "python -m" in in_package.stderr
    no_file = _run(APP.replace('__name__ == "__main__"', "True"), cwd=tmp_path)
    assert no_file.returncode == 1
    assert "no file" in no_file.stderr and "pass name=" in no_file.stderr


def test_an_explicit_name_is_kept_in_a_script(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "app.py").write_text(APP.replace(
        "@worker.every(timedelta(minutes=5))",
        '@worker.every(timedelta(minutes=5), name="billing.process_invoices")'))
    assert _names([sys.executable, "pkg/app.py"], tmp_path) == ["billing.process_invoices"]
