"""Configuration of a worker from a TOML file and TENURE_* environment variables, for
`tenure run` (the counterpart of the .NET libraries' appsettings sections).

Every option is settable in code (`Worker(store, grace=...)`, `@worker.every(..., ttl=...)`);
configuration overrides the code. Precedence, highest first: command-line options, then
environment variables (a job's own TENURE_JOBS__<JOB>__<OPTION> before the global
TENURE_<OPTION>), then the TOML file (a job's own [tenure.jobs."<job>"] table before the
[tenure] table), then the code. Keys and types are checked when the configuration is loaded,
ranges and job names when it is applied to a worker, both before the worker runs; every error
names the key, the allowed values and where the value came from.

Example::

    config = load_config("tenure.toml", os.environ, cli={"health_port": 8080})
    apply_config(worker, config)        # raises tenure.InvalidArgument naming the bad key
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._timing import check_range

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ENV_PREFIX = "TENURE_"
JOB_ENV_PREFIX = "TENURE_JOBS__"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# option -> kind: "seconds" (int or float), "int", "bool", "str"
WORKER_OPTIONS = {"store": "str", "grace": "seconds", "health_port": "int",
                  "health_host": "str", "log_level": "str"}
JOB_OPTIONS = {"ttl": "seconds", "retries": "int", "retry_backoff": "seconds",
               "jitter": "seconds", "misfire": "str", "misfire_grace": "seconds",
               "poll": "seconds", "unhealthy_after": "int", "leader": "bool"}
# Other TENURE_* variables that tenure or its tests read; any other one is reported as unknown.
FOREIGN_VARIABLES = {"TENURE_CONFIG", "TENURE_AZURE_BLOB_URL_FORMAT", "TENURE_REQUIRE_SERVICES"}
FOREIGN_PREFIXES = ("TENURE_TEST_",)
_KIND_TEXT = {"seconds": "a number of seconds (int or float)", "int": "an integer",
              "bool": "true or false", "str": "a string"}


@dataclass(frozen=True)
class Value:
    """A configured value and where it came from (a file and table, a variable, an option).

    Example:
        >>> Value(30.0, "TENURE_TTL").source
        'TENURE_TTL'
    """

    value: Any
    source: str


@dataclass
class Layer:
    """The values one source gives: worker options, defaults for every job, and per-job
    options (by job name for TOML; by the TENURE_JOBS__ key for environment variables)."""

    worker: dict[str, Value] = field(default_factory=dict)
    job_defaults: dict[str, Value] = field(default_factory=dict)
    jobs: dict[str, dict[str, Value]] = field(default_factory=dict)


@dataclass
class Config:
    """Configuration layers, highest precedence first: cli, env, toml.

    Example::

        config = load_config(None, {"TENURE_GRACE": "10"})
        config.worker_value("grace")    # Value(10.0, 'TENURE_GRACE')
    """

    cli: Layer = field(default_factory=Layer)
    env: Layer = field(default_factory=Layer)
    toml: Layer = field(default_factory=Layer)
    warnings: list[str] = field(default_factory=list)

    def worker_value(self, option: str) -> Value | None:
        """The highest-precedence value of a worker option, or None when unset."""
        for layer in (self.cli, self.env, self.toml):
            if option in layer.worker:
                return layer.worker[option]
        return None

    def job_values(self, job: str) -> dict[str, Value]:
        """Every option configured for `job`, each from its highest-precedence source."""
        found: dict[str, Value] = {}
        ordered = (self.env.jobs.get(env_key(job), {}), self.env.job_defaults,
                   self.toml.jobs.get(job, {}), self.toml.job_defaults)
        for values in ordered:
            for option, value in values.items():
                found.setdefault(option, value)
        return found


# -- loading -----------------------------------------------------------------------------------

def load_config(path: str | None, environ: Mapping[str, str],
                cli: Mapping[str, Any] | None = None) -> Config:
    """Read and type-check the TOML file at `path` (if any), the TENURE_* variables of
    `environ` and the command-line values `cli` (worker options only).

    Example::

        config = load_config("tenure.toml", os.environ, {"store": "sqlite:////tmp/l.db"})
    """
    warnings: list[str] = []
    config = Config(toml=_toml_layer(path) if path else Layer(),
                    env=_env_layer(environ, warnings), warnings=warnings)
    for option, raw in (cli or {}).items():
        if raw is not None:
            flag = "--" + option.replace("_", "-")
            config.cli.worker[option] = Value(_worker_value(option, raw, flag), flag)
    return config


def _toml_layer(path: str) -> Layer:
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except FileNotFoundError:
        raise InvalidArgument(f"configuration file {path} does not exist; check --config or "
                              "TENURE_CONFIG") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"configuration file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read configuration file {path}: {exc.strerror}") from None
    table = document.get("tenure")
    if not isinstance(table, dict):
        raise InvalidArgument(f"{path} has no [tenure] table; put the settings under [tenure] "
                              "and per-job ones under [tenure.jobs.\"<job name>\"]")
    layer = Layer()
    where = f"{path} [tenure]"
    for key, raw in table.items():
        if key == "jobs":
            if not isinstance(raw, dict):
                raise InvalidArgument(f"{where} jobs must be a table of job tables, e.g. "
                                      "[tenure.jobs.\"myapp.jobs.process_invoices\"]")
            for job, options in raw.items():
                job_where = f"{path} [tenure.jobs.{_quote(job)}]"
                if not isinstance(options, dict):
                    raise InvalidArgument(f"{job_where} must be a table of job options, e.g. "
                                          "ttl = 60")
                layer.jobs[job] = {
                    option: Value(_job_value(_known(option, JOB_OPTIONS, job_where), value,
                                             job_where), job_where)
                    for option, value in options.items()}
        elif key in WORKER_OPTIONS:
            layer.worker[key] = Value(_worker_value(key, raw, where), where)
        else:
            option = _known(key, {**WORKER_OPTIONS, **JOB_OPTIONS, "jobs": "table"}, where)
            layer.job_defaults[option] = Value(_job_value(option, raw, where), where)
    return layer


def _env_layer(environ: Mapping[str, str], warnings: list[str]) -> Layer:
    layer = Layer()
    for variable, text in sorted(environ.items()):
        if (not variable.startswith(ENV_PREFIX) or variable in FOREIGN_VARIABLES
                or variable.startswith(FOREIGN_PREFIXES)):
            continue
        if variable.startswith(JOB_ENV_PREFIX):
            key, separator, option_name = variable[len(JOB_ENV_PREFIX):].rpartition("__")
            if not separator or not key:
                raise InvalidArgument(
                    f"{variable}: a job's variable is TENURE_JOBS__<JOB>__<OPTION>, e.g. "
                    "TENURE_JOBS__MYAPP_JOBS_PROCESS_INVOICES__TTL=60")
            option = _known(option_name.lower(), JOB_OPTIONS, variable)
            layer.jobs.setdefault(key, {})[option] = Value(
                _job_value(option, _from_text(JOB_OPTIONS[option], text, option, variable),
                           variable), variable)
            continue
        option = variable[len(ENV_PREFIX):].lower()
        if option in WORKER_OPTIONS:
            value = _from_text(WORKER_OPTIONS[option], text, option, variable)
            layer.worker[option] = Value(_worker_value(option, value, variable), variable)
        elif option in JOB_OPTIONS:
            value = _from_text(JOB_OPTIONS[option], text, option, variable)
            layer.job_defaults[option] = Value(_job_value(option, value, variable), variable)
        else:  # the environment is shared: an unknown variable is worth a warning, not a stop
            try:
                _known(option, {**WORKER_OPTIONS, **JOB_OPTIONS}, variable, prefix=ENV_PREFIX)
            except InvalidArgument as exc:
                warnings.append(f"ignoring {exc}")
    return layer


def env_key(job: str) -> str:
    """A job name as it appears in TENURE_JOBS__<JOB>__<OPTION>: upper case, every run of
    other characters than letters and digits turned into one '_'.

    Example:
        >>> env_key("myapp.jobs.process_invoices")
        'MYAPP_JOBS_PROCESS_INVOICES'
    """
    return re.sub(r"[^A-Z0-9]+", "_", job.upper()).strip("_")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the choice closest to a misspelt `word`, else "".

    Example:
        >>> did_you_mean("retires", ["retries", "ttl"])
        " (did you mean 'retries'?)"
    """
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known(key: str, allowed: Mapping[str, str], where: str, prefix: str = "") -> str:
    if key in allowed:
        return key
    shown = {prefix + name.upper() if prefix else name: name for name in allowed}
    hint = did_you_mean(prefix + key.upper() if prefix else key, shown)
    what = f"variable {where}" if prefix else f"key {key!r} in {where}"
    raise InvalidArgument(f"unknown {what}{hint}; accepted: {', '.join(sorted(shown))}")


def _from_text(kind: str, text: str, option: str, variable: str) -> Any:
    """An environment variable's text as a value of `kind`."""
    stripped = text.strip()
    try:
        if kind == "seconds":
            return float(stripped)
        if kind == "int":
            return int(stripped)
    except ValueError:
        raise InvalidArgumentType(f"{variable}={text!r}: {option} must be {_KIND_TEXT[kind]}, "
                                  f"e.g. {variable}={_EXAMPLES[option]}") from None
    if kind == "bool":
        if stripped.lower() in ("1", "true", "yes", "on"):
            return True
        if stripped.lower() in ("0", "false", "no", "off"):
            return False
        raise InvalidArgumentType(f"{variable}={text!r}: {option} must be true or false")
    return text


_EXAMPLES = {"grace": "30", "health_port": "8080", "ttl": "30", "retries": "2",
             "retry_backoff": "1.5", "jitter": "0.5", "misfire_grace": "60", "poll": "1",
             "unhealthy_after": "3", "leader": "true", "store": "sqlite:////var/lib/app/l.db",
             "health_host": "0.0.0.0", "log_level": "INFO", "misfire": "coalesce"}


def _check_kind(option: str, kind: str, value: Any, where: str) -> Any:
    ok = {"seconds": isinstance(value, (int, float)) and not isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool),
          "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
    if not ok:
        raise InvalidArgumentType(f"{where}: {option} must be {_KIND_TEXT[kind]}, got "
                                  f"{type(value).__name__} {value!r}; e.g. {option} = "
                                  f"{_toml_example(option)}")
    if kind == "seconds" and not math.isfinite(value):
        raise InvalidArgument(f"{where}: {option}={value!r} must be a finite number of seconds")
    return float(value) if kind == "seconds" else value


def _toml_example(option: str) -> str:
    example = _EXAMPLES[option]
    return f'"{example}"' if (WORKER_OPTIONS.get(option) or JOB_OPTIONS.get(option)) == "str" \
        else example


def _worker_value(option: str, value: Any, where: str) -> Any:
    """Type and range checks of a worker option, which need no worker."""
    value = _check_kind(option, WORKER_OPTIONS[option], value, where)
    if option == "grace":
        _in_range(lambda: check_range(value, "grace", 0.0, 3600.0), where)
    elif option == "health_port" and not 0 <= value <= 65535:
        raise InvalidArgument(f"{where}: health_port={value} is out of range: it must be from "
                              "0 to 65535 (0: any free port)")
    elif option == "log_level":
        if value.upper() not in LOG_LEVELS:
            raise InvalidArgument(f"{where}: log_level={value!r} must be one of "
                                  f"{', '.join(LOG_LEVELS)}")
        value = value.upper()
    elif option in ("store", "health_host") and not value.strip():
        raise InvalidArgument(f"{where}: {option} must not be empty")
    return value


def _job_value(option: str, value: Any, where: str) -> Any:
    """Type checks of a job option; ranges need the job and the store (see apply_config)."""
    value = _check_kind(option, JOB_OPTIONS[option], value, where)
    if option == "misfire" and value not in ("coalesce", "skip"):
        raise InvalidArgument(f"{where}: misfire={value!r} must be 'coalesce' (run the latest "
                              "missed period once) or 'skip'")
    return value


def _in_range(check: Any, where: str) -> None:
    try:
        check()
    except (InvalidArgument, InvalidArgumentType) as exc:
        raise type(exc)(f"{where}: {exc}") from None


def _quote(job: str) -> str:
    return '"' + job.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- applying ----------------------------------------------------------------------------------

def apply_config(worker: Any, config: Config, *, app: str = "the worker") -> dict[str, Any]:
    """Apply `config` to a tenure.Worker or tenure.aio.AsyncWorker before it runs: its grace period
    and every job's options. Returns the effective settings and their sources (what
    `tenure run --check` prints).

    Example::

        apply_config(worker, load_config("tenure.toml", os.environ), app="myapp.jobs:worker")
    """
    _check_job_names(worker, config, app)
    grace = config.worker_value("grace")
    if grace is not None:
        worker.grace = grace.value
    jobs: dict[str, Any] = {}
    for name in list(worker.jobs):
        values = config.job_values(name)
        if values:
            _reconfigure(worker, name, values)
        spec = worker.jobs[name]
        jobs[name] = {option: {"value": getattr(spec, option),
                               "source": values[option].source if option in values else "code"}
                      for option in JOB_OPTIONS}
        jobs[name]["schedule"] = spec.schedule.describe()
    settings: dict[str, Any] = {
        "grace": {"value": worker.grace, "source": grace.source if grace else "code"}}
    for option in ("store", "health_port", "health_host", "log_level"):
        configured = config.worker_value(option)
        if configured is not None:
            settings[option] = {"value": configured.value, "source": configured.source}
    settings["jobs"] = jobs
    return settings


def _check_job_names(worker: Any, config: Config, app: str) -> None:
    names = list(worker.jobs)
    known = ", ".join(repr(name) for name in names) or "none (no @every or @cron job)"
    for job, values in config.toml.jobs.items():
        if job not in worker.jobs:
            source = next(iter(values.values())).source if values else "the TOML file"
            raise InvalidArgument(f"{source}: {app} has no job named {job!r}; its jobs: {known}")
    by_key: dict[str, list[str]] = {}
    for name in names:
        by_key.setdefault(env_key(name), []).append(name)
    for key, values in config.env.jobs.items():
        variable = next(iter(values.values())).source
        matches = by_key.get(key, [])
        if not matches:
            keys = ", ".join(f"{env_key(name)} ({name})" for name in names) or "none"
            raise InvalidArgument(f"{variable}: {app} has no job whose variable key is {key!r}; "
                                  f"its jobs: {keys}")
        if len(matches) > 1:
            raise InvalidArgument(f"{variable}: {key!r} matches the jobs "
                                  f"{', '.join(map(repr, matches))}; give them names that "
                                  "differ in letters or digits, or use the TOML file")


def _reconfigure(worker: Any, name: str, values: dict[str, Value]) -> None:
    """Change job `name`'s options through Worker.configure, so configuration obeys exactly the
    ranges the decorators enforce."""
    # One at a time, so an error names its source; ttl first, as other bounds derive from it.
    applied: list[str] = []
    for option, value in sorted(values.items(), key=lambda item: item[0] != "ttl"):
        try:
            worker.configure(name, **{option: value.value})
        except (InvalidArgument, InvalidArgumentType) as exc:
            after = f" (with {', '.join(applied)})" if applied else ""
            raise type(exc)(f"{value.source}: job {name!r}: {exc}{after}") from None
        applied.append(f"{option} from {value.source}")
