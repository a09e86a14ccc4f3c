"""`tenure run` and `tenure jobs`: real worker processes on a SQLite store in tmp_path, stopped
with SIGTERM; configuration precedence and every validation error (checked in-process with
`tenure run --check`, which imports the app and applies the configuration without running it);
the health endpoint; secrets in store URLs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from servers import free_port
from waiting import wait_until

import tenure
from tenure.cli import main

SECRET = "hunter2"
JOB_NAME_PREFIX = "job:"  # a job's lock and record name
STOP_DEADLINE = 30.0  # generous: grace is 5 s, the jobs take milliseconds

APP = '''
import os
import tenure
import tenure.aio
from tenure.jobs import AsyncWorker, Worker


def record(job, run):
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(f"{job} {run.period_start.isoformat()} {run.instance}\\n")


worker = Worker(tenure.connect(os.environ["TENURE_STORE"]), grace=5)


@worker.every(0.2, name="app.tick")
def tick(run):
    record("app.tick", run)


@worker.every(0.5, name="app.lead", leader=True)
def lead(run):
    record("app.lead", run)


def make_async():
    worker = AsyncWorker(tenure.aio.connect(os.environ["TENURE_STORE"]), grace=5)

    @worker.every(0.2, name="app.tick")
    async def tick(run):
        record("app.tick", run)

    @worker.every(0.5, name="app.lead", leader=True)
    async def lead(run):
        record("app.lead", run)

    return worker


def make_stuck():
    worker = Worker(tenure.connect(os.environ["TENURE_STORE"]), grace=0.5)

    @worker.every(60, name="app.stuck")
    def stuck(run):
        record("app.stuck", run)
        import time
        time.sleep(3)  # ignores run.check(): outlives the grace period

    return worker


def make_failing():
    worker = Worker(tenure.connect(os.environ["TENURE_STORE"]), grace=5)

    @worker.every(0.2, name="app.fails", unhealthy_after=1)
    def fails(run):
        raise RuntimeError("boom")

    return worker
'''


@dataclass
class Project:
    """A directory holding an app module, its store, and the file its jobs append to."""

    path: Path
    module: str
    store: str
    runs: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("TENURE_") or key.startswith("TENURE_TEST_")}
        return {**env, "RUNS_FILE": str(self.runs), "PYTHONUNBUFFERED": "1", **extra}

    def ran(self, job: str) -> list[list[str]]:
        if not self.runs.exists():
            return []
        return [line.split() for line in self.runs.read_text().splitlines()
                if line.startswith(job + " ")]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    module = f"jobsapp_{uuid.uuid4().hex[:8]}"  # unique: in-process tests import it
    (tmp_path / f"{module}.py").write_text(APP)
    return Project(tmp_path, module, f"sqlite:///{tmp_path / 'locks.db'}", tmp_path / "runs.txt")


def tenure_cli(project: Project, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tenure", *args], cwd=project.path,
                          env=project.env(**env), capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture
def running(project: Project) -> Iterator[list[subprocess.Popen[str]]]:
    """Started `tenure run` processes; killed at the end if a test left one running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def start(project: Project, running: list[subprocess.Popen[str]], app: str,
          *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tenure", "run", f"{project.module}:{app}", *args],
        cwd=project.path, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    running.append(process)
    return process


def stop(process: subprocess.Popen[str], failing_jobs: bool = False) -> str:
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=STOP_DEADLINE)
    assert process.returncode == 0, stderr
    if not failing_jobs:  # a failing job's traceback is logged
        assert "Traceback" not in stderr, stderr
    assert stdout == ""  # logs go to stderr
    return stderr


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def serving(url: str, process: subprocess.Popen[str]) -> bool:
    if process.poll() is not None:
        pytest.fail(f"tenure run exited early: {process.communicate()[1]}")
    try:
        get(url)
    except OSError:
        return False
    return True


# -- running -----------------------------------------------------------------------------------

@pytest.mark.parametrize("app", ["worker", "make_async"])
def test_run_serves_health_and_stops_on_sigterm(project: Project, running: list[Any],
                                                 app: str) -> None:
    port = free_port()
    process = start(project, running, app, "--store", project.store, "--health-port", str(port))
    health = f"http://127.0.0.1:{port}"
    wait_until(lambda: serving(health + "/health", process), 30, "the health endpoint")
    wait_until(lambda: len(project.ran("app.tick")) >= 3 and project.ran("app.lead"), 30,
               "3 runs of app.tick and one of app.lead")

    status, report = get(health + "/health")
    assert status == 200, report
    assert report["healthy"] is True
    assert set(report["jobs"]) == {"app.tick", "app.lead"}
    assert get(health + "/ready") == (200, {"ready": True})
    assert get(health + "/nothing-here")[0] == 404

    instance = project.ran("app.lead")[0][2]
    listed = tenure_cli(project, "jobs", "--json", "--store", project.store)
    assert listed.returncode == 0, listed.stderr
    jobs = {entry["job"]: entry for entry in json.loads(listed.stdout)}
    assert set(jobs) == {"app.tick", "app.lead"}
    assert jobs["app.lead"]["holder"] == instance  # a leader keeps its lease between periods
    assert jobs["app.tick"]["last_outcome"] == "ok"
    assert jobs["app.tick"]["last_holder"] == instance
    assert jobs["app.tick"]["next_due"] is not None  # from the schedule kept in the record

    stderr = stop(process)

    assert "SIGTERM received" in stderr
    with tenure.connect(project.store) as store:
        assert store.leases("job:") == []  # released at once, not left to expire
    periods = [period for _, period, _ in project.ran("app.tick")]
    assert len(periods) == len(set(periods))


def test_jobs_table_with_app_shows_schedules_and_next_due(project: Project,
                                                          running: list[Any]) -> None:
    process = start(project, running, "worker", "--store", project.store)
    wait_until(lambda: len(project.ran("app.tick")) >= 2 and project.ran("app.lead"), 30,
               "runs of both jobs")
    stop(process)

    table = tenure_cli(project, "jobs", f"{project.module}:worker", "--store", project.store)
    as_json = tenure_cli(project, "jobs", f"{project.module}:worker", "--json",
                         "--store", project.store)

    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == [
        "job", "schedule", "last", "period", "outcome", "last", "success", "holder", "next",
        "due"]
    # Piped: plain columns, as `tenure locks` prints them (no rule line, no trailing blanks).
    assert all(line == line.rstrip() and "\u2500" not in line
               for line in table.stdout.splitlines()), table.stdout
    row = next(line for line in table.stdout.splitlines() if line.split()[0] == "app.tick")
    assert "every 0.2s" in row
    assert " ok " in row
    jobs = {entry["job"]: entry for entry in json.loads(as_json.stdout)}
    assert jobs["app.tick"]["schedule"] == "every 0.2s"
    assert jobs["app.tick"]["holder"] is None  # stopped: every lease released
    assert jobs["app.tick"]["next_due"] > jobs["app.tick"]["last_period"]


def test_jobs_says_when_the_store_has_none(project: Project) -> None:
    with tenure.connect(project.store) as store:
        assert store.break_lease("warm-up") == 0  # a write creates the database
        shown = f"{store.url} (database file {store.backend.path})"  # type: ignore[attr-defined]
    result = tenure_cli(project, "jobs", "--store", project.store)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"no jobs recorded in {shown}"


@pytest.mark.parametrize("scheme", ["sqlite", "file"])
def test_jobs_of_an_app_on_a_store_not_created_yet_never_ran(project: Project,
                                                             scheme: str) -> None:
    """As on Redis or PostgreSQL with no records: exit 0, the app's jobs listed as never ran
    (before: "... does not exist", exit 1). The listing itself creates no database."""
    where = project.path / "fresh" / ("locks.db" if scheme == "sqlite" else "locks")
    url = f"{scheme}://{where}"
    result = tenure_cli(project, "jobs", f"{project.module}:worker", "--json", "--store", url)
    assert result.returncode == 0, result.stderr
    jobs = {entry["job"]: entry for entry in json.loads(result.stdout)}
    assert sorted(jobs) == ["app.lead", "app.tick"]
    assert all(entry["last_period"] is None and entry["next_due"] for entry in jobs.values())
    if scheme == "sqlite":  # the app's own connect() creates a file store's directory
        assert not (project.path / "fresh").exists()
    table = tenure_cli(project, "jobs", f"{project.module}:worker", "--store", url)
    assert table.returncode == 0, table.stderr
    assert "never ran" in table.stdout
    alone = tenure_cli(project, "jobs", "--store", f"{scheme}://{project.path / 'typo'}")
    assert alone.returncode == 1 and "does not exist" in alone.stderr


@pytest.mark.parametrize("host", ["999.1.1.1", "192.0.2.1"])  # no such name; not this machine
def test_a_health_host_that_is_not_this_machine_s_is_a_bad_option(project: Project,
                                                                  host: str) -> None:
    """It said "...; choose another port", exit 1: the host was the problem, a bad option."""
    result = tenure_cli(project, "run", f"{project.module}:worker", "--store", project.store,
                        "--health-host", host, "--health-port", "0")
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("tenure: error: cannot serve health on"), line
    assert f"--health-host {host!r} is not an address of this machine" in line, line
    assert "choose another port" not in line, line


def test_health_is_503_while_a_job_keeps_failing(project: Project, running: list[Any]) -> None:
    port = free_port()
    process = start(project, running, "make_failing", "--store", project.store,
                    "--health-port", str(port), "--log-level", "ERROR")
    url = f"http://127.0.0.1:{port}/health"
    wait_until(lambda: serving(url, process) and get(url)[0] == 503, 30, "health to turn 503")

    status, report = get(url)
    assert status == 503
    assert report["healthy"] is False
    job = report["jobs"]["app.fails"]
    assert job["unhealthy"] is True
    assert job["last_outcome"] == "failed"
    assert job["last_error"] == "RuntimeError: boom"
    assert get(f"http://127.0.0.1:{port}/ready") == (200, {"ready": True})
    stderr = stop(process, failing_jobs=True)
    assert "RuntimeError: boom" in stderr


# -- configuration (in-process, with --check) --------------------------------------------------

@pytest.fixture
def checked(project: Project, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `tenure run APP --check ...` in this process; return (exit code, stdout, stderr)."""
    monkeypatch.chdir(project.path)
    monkeypatch.syspath_prepend(str(project.path))  # restores sys.path afterwards
    for variable in [key for key in os.environ if key.startswith("TENURE_")]:
        if not variable.startswith("TENURE_TEST_"):
            monkeypatch.delenv(variable)
    monkeypatch.setenv("RUNS_FILE", str(project.runs))

    def check(*args: str, toml: str | None = None, app: str = "worker", env_store: bool = True,
              module: str = project.module, **env: str) -> tuple[int, str, str]:
        if toml is not None:
            (project.path / "tenure.toml").write_text(toml)
            args = (*args, "--config", "tenure.toml")
        monkeypatch.setenv("TENURE_STORE", project.store)  # also restores it afterwards
        if not env_store:
            monkeypatch.delenv("TENURE_STORE")
        for variable, value in env.items():
            monkeypatch.setenv(variable, value)
        sys.modules.pop(module, None)  # a fresh worker, configured from the code
        code = main(["run", f"{module}:{app}", "--check", *args])
        for variable in env:
            monkeypatch.delenv(variable)
        out, err = capsys.readouterr()
        return code, out, err

    return check


def value(settings: dict[str, Any], *path: str) -> tuple[Any, str]:
    entry: Any = settings
    for key in path:
        entry = entry[key]
    return entry["value"], entry["source"]


TOML = '''
[tenure]
ttl = 20
retries = 1
grace = 4
health_port = 9001

[tenure.jobs."app.tick"]
ttl = 15
retries = 2
'''


def test_precedence_cli_over_env_over_toml_over_code(checked: Any) -> None:
    code, out, err = checked("--health-port", "9003", toml=TOML, TENURE_GRACE="6",
                             TENURE_HEALTH_PORT="9002", TENURE_JOBS__APP_LEAD__TTL="11")
    assert code == 0, err
    settings = json.loads(out)

    assert value(settings, "health_port") == (9003, "--health-port")
    assert value(settings, "grace") == (6.0, "TENURE_GRACE")
    tick_table = 'tenure.toml [tenure.jobs."app.tick"]'
    assert value(settings, "jobs", "app.tick", "ttl") == (15.0, tick_table)
    assert value(settings, "jobs", "app.tick", "retries") == (2, tick_table)
    assert value(settings, "jobs", "app.lead", "ttl") == (11.0, "TENURE_JOBS__APP_LEAD__TTL")
    assert value(settings, "jobs", "app.lead", "retries") == (1, "tenure.toml [tenure]")
    assert value(settings, "jobs", "app.lead", "leader") == (True, "code")
    assert value(settings, "jobs", "app.tick", "unhealthy_after") == (3, "code")
    assert settings["jobs"]["app.tick"]["schedule"] == "every 0.2s"


def test_env_beats_the_file_even_for_a_jobs_own_table(checked: Any) -> None:
    code, out, err = checked(toml=TOML, TENURE_TTL="12", TENURE_CONFIG="ignored.toml")
    assert code == 0, err
    settings = json.loads(out)
    assert value(settings, "jobs", "app.tick", "ttl") == (12.0, "TENURE_TTL")
    assert value(settings, "health_port") == (9001, "tenure.toml [tenure]")


def test_config_file_from_tenure_config_and_code_defaults_without_any(checked: Any,
                                                                      project: Project) -> None:
    (project.path / "from-env.toml").write_text('[tenure]\nretries = 3\n')
    code, out, err = checked(TENURE_CONFIG="from-env.toml")
    assert code == 0, err
    assert value(json.loads(out), "jobs", "app.tick", "retries") == (
        3, "from-env.toml [tenure]")

    code, out, err = checked()
    assert code == 0, err
    settings = json.loads(out)
    assert value(settings, "grace") == (5.0, "code")  # Worker(store, grace=5) in the app
    assert value(settings, "jobs", "app.tick", "ttl") == (30.0, "code")
    assert value(settings, "store") == (project.store, "TENURE_STORE")


def test_a_new_ttl_moves_the_derived_poll_default(checked: Any) -> None:
    code, out, _ = checked(TENURE_JOBS__APP_TICK__TTL="2")
    settings = json.loads(out)
    assert code == 0
    assert value(settings, "jobs", "app.tick", "poll") == (0.5, "code")  # min(1 s, ttl / 4)


ERRORS = {
    "toml unknown key": (dict(toml="[tenure]\ntll = 5\n"),
                         ["tenure.toml [tenure]", "'tll'", "did you mean 'ttl'"]),
    "toml unknown job key": (dict(toml='[tenure.jobs."app.tick"]\nretires = 2\n'),
                             ['[tenure.jobs."app.tick"]', "'retires'", "retries"]),
    "toml ttl out of range": (dict(toml="[tenure]\nttl = 0.001\n"),
                              ["tenure.toml [tenure]", "ttl=0.001", "out of range"]),
    "toml retries out of range": (dict(toml="[tenure]\nretries = 500\n"),
                                  ["tenure.toml [tenure]", "retries=500", "from 0 to 100"]),
    "toml wrong type": (dict(toml='[tenure]\nttl = "ten"\n'),
                        ["tenure.toml [tenure]", "ttl must be a number of seconds", "str"]),
    "toml bool for int": (dict(toml="[tenure]\nretries = true\n"),
                          ["tenure.toml [tenure]", "retries must be an integer"]),
    "toml unknown job": (dict(toml='[tenure.jobs."app.nope"]\nttl = 5\n'),
                         ['[tenure.jobs."app.nope"]', "no job named 'app.nope'",
                          "'app.tick'", "'app.lead'"]),
    "toml jobs not tables": (dict(toml='[tenure.jobs]\n"app.tick" = 5\n'),
                             ['[tenure.jobs."app.tick"]', "must be a table"]),
    "toml syntax": (dict(toml="[tenure\nttl = 5\n"), ["tenure.toml is not valid TOML", "line 1"]),
    "toml without [tenure]": (dict(toml="[other]\nttl = 5\n"), ["no [tenure] table"]),
    "toml poll above the env ttl": (dict(toml='[tenure]\npoll = 20\n', TENURE_TTL="10"),
                                    ["TENURE_TTL", "tenure.toml [tenure]", "poll=20",
                                     "between 0.001 and 10"]),
    "env wrong type": (dict(TENURE_RETRIES="two"),
                       ["TENURE_RETRIES='two'", "retries must be an integer"]),
    "env port out of range": (dict(TENURE_HEALTH_PORT="70000"),
                              ["TENURE_HEALTH_PORT", "health_port=70000", "0 to 65535"]),
    "env grace out of range": (dict(TENURE_GRACE="9999"),
                               ["TENURE_GRACE", "grace=9999", "between 0 and 3600"]),
    "env misfire": (dict(TENURE_MISFIRE="never"), ["TENURE_MISFIRE", "'coalesce'", "'skip'"]),
    "env bool": (dict(TENURE_JOBS__APP_TICK__LEADER="maybe"),
                 ["TENURE_JOBS__APP_TICK__LEADER='maybe'", "true or false"]),
    "env unknown job": (dict(TENURE_JOBS__APP_NOPE__TTL="5"),
                        ["TENURE_JOBS__APP_NOPE__TTL", "'APP_NOPE'", "APP_TICK (app.tick)",
                         "APP_LEAD (app.lead)"]),
    "env unknown job option": (dict(TENURE_JOBS__APP_TICK__TLL="5"),
                               ["TENURE_JOBS__APP_TICK__TLL", "'tll'", "did you mean 'ttl'"]),
    "env job ttl out of range": (dict(TENURE_JOBS__APP_TICK__TTL="-1"),
                                 ["TENURE_JOBS__APP_TICK__TTL", "job 'app.tick'", "ttl=-1",
                                  "out of range"]),
    "env malformed job variable": (dict(TENURE_JOBS__TTL="5"), ["TENURE_JOBS__<JOB>__<OPTION>"]),
    "cli port": (dict(args=("--health-port", "-1")), ["--health-port", "0 to 65535"]),
    "cli port not a number": (dict(args=("--health-port", "x")), ["--health-port", "'x'"]),
    "cli log level": (dict(args=("--log-level", "LOUD")), ["--log-level", "'LOUD'", "DEBUG"]),
    "missing config file": (dict(args=("--config", "nope.toml")),
                            ["nope.toml does not exist"]),
    "app without attribute": (dict(app=""), ["must be module:attribute"]),
    "app attribute missing": (dict(app="missing"), ["has no attribute 'missing'"]),
    "app not a worker": (dict(app="tenure"), ["is a module, not a tenure.Worker"]),
    "app an int": (dict(app="os.O_RDONLY"), ["is an int, not a tenure.Worker"]),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_configuration_is_one_clear_line(checked: Any, case: str) -> None:
    options, fragments = ERRORS[case]
    options = dict(options)
    args = options.pop("args", ())
    app = options.pop("app", "worker")
    code, out, err = checked(*args, app=app, **options)

    assert code == 2, err
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("tenure: error: ")
    for fragment in fragments:
        assert fragment in line, line


def test_unknown_module_is_a_usage_error(checked: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "no_such_module_here:worker", "--check"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot import 'no_such_module_here'" in err


def test_a_file_path_as_app_is_answered_with_its_module_path(
        checked: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "pkg/jobs.py:worker", "--check"])
    err = capsys.readouterr().err
    assert code == 2
    assert "names a file; give its module path, e.g. pkg.jobs:worker" in err


def test_unknown_tenure_variable_is_a_warning_not_a_stop(checked: Any) -> None:
    code, out, err = checked(TENURE_TLL="5")
    assert code == 0, err
    [warning] = json.loads(out)["warnings"]
    assert "TENURE_TLL" in warning and "TENURE_TTL" in warning


# -- secrets -----------------------------------------------------------------------------------

def test_secrets_in_store_urls_are_never_printed(project: Project, checked: Any) -> None:
    closed = free_port()
    url = f"postgresql://app:{SECRET}@127.0.0.1:{closed}/db"
    failures = [
        tenure_cli(project, "jobs", "--store", url),
        tenure_cli(project, "jobs", "--json", "--store", f"redis://app:{SECRET}@127.0.0.1:{closed}/0"),
        tenure_cli(project, "run", f"{project.module}:worker", "--store", url,
                   "--config", "missing.toml"),
        tenure_cli(project, "run", f"{project.module}:worker", "--store", f"{url}?ttl=x"),
    ]
    for result in failures:
        assert result.returncode in (1, 2), result
        assert result.stderr.startswith("tenure: error: "), result.stderr
        assert SECRET not in result.stdout + result.stderr

    # an app on its own store (sqlite) while the configuration names another: a warning
    own = f"ownstore_{uuid.uuid4().hex[:8]}"
    (project.path / f"{own}.py").write_text(OWN_STORE_APP)
    code, out, err = checked(toml=f'[tenure]\nstore = "{url}"\n', env_store=False,
                             module=own, OWN_STORE=project.store)
    assert code == 0, err
    assert SECRET not in out + err
    settings = json.loads(out)
    assert value(settings, "store")[0] == f"postgresql://app:***@127.0.0.1:{closed}/db"
    [warning] = settings["warnings"]
    assert warning.startswith(f"{own}:worker uses the store sqlite:")


OWN_STORE_APP = '''
import os
import tenure
from tenure.jobs import Worker

worker = Worker(tenure.connect(os.environ["OWN_STORE"]))
worker.every(60, name="app.own")(lambda run: None)
'''


def test_run_exits_1_when_a_sync_job_outlives_the_grace_period(project: Project,
                                                              running: list[Any]) -> None:
    process = start(project, running, "make_stuck", "--store", project.store)
    wait_until(lambda: project.ran("app.stuck"), 30, "the stuck job to start")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=STOP_DEADLINE)
    assert process.returncode == 1, stderr
    assert "still running after grace=0.5 s" in stderr
    assert "stopped with 1 sync job(s) still running past the grace period (app.stuck)" in stderr


def test_the_help_texts_say_what_the_commands_do(capsys: pytest.CaptureFixture[str]) -> None:
    """`run --help` left CRITICAL out of the log levels; `jobs --help` said schedules and next
    due times need APP, though a recorded run shows them without it."""
    from tenure.jobs._config import LOG_LEVELS

    helps = {}
    for command in ("run", "jobs"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        helps[command] = " ".join(capsys.readouterr().out.split())
    assert all(level in helps["run"] for level in LOG_LEVELS), helps["run"]
    assert "With APP also each job's schedule" not in helps["jobs"], helps["jobs"]
    assert "schedule and next due time once a run recorded them" in helps["jobs"], helps["jobs"]


@pytest.mark.parametrize("cut", [True, False])
def test_a_terminal_jobs_table_keeps_the_job_name_whole_or_says_json_shows_it(
        project: Project, cut: bool) -> None:
    """On 80 columns a job's name was cut with an ellipsis and no note (`tenure locks` has
    one); a name that fits is now shown whole, one that cannot fit gets the note."""
    from datetime import datetime, timezone

    from tenure.jobs import Every, JobRecord

    name = "myapp.jobs." + ("x" * 150 if cut else "process_invoices_nightly")
    now = datetime.now(timezone.utc)
    record = JobRecord(period=now, finished=now, holder="web-1:4121:3fa2c1", last_success=now,
                       schedule=Every.of(300, 0).spec())  # so the table has 7 columns
    with tenure.connect(project.store) as store:
        lease = store.lock(JOB_NAME_PREFIX + name, ttl=30).try_acquire()
        assert lease is not None
        assert store.backend.write_record(lease.grant, record.dump())  # type: ignore[attr-defined]
        lease.release()
    result = tenure_cli(project, "jobs", "--store", project.store, COLUMNS="80",
                        FORCE_COLOR="1")
    assert result.returncode == 0, result.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout).splitlines()
    assert ("names cut here are shown whole by --json" in lines) is cut, lines
    assert any(name in line for line in lines) is not cut, lines
    assert max(len(line) for line in lines) <= 80, lines
