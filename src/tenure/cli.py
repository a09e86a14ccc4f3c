"""The `tenure` command: run a worker's jobs, list the jobs of a store, list the live leases of
a store, or break one.

`--store` falls back to the TENURE_STORE environment variable. Every error is one line on
stderr, starting with "tenure: error: ", with exit code 2 for bad usage or input (for `tenure
run`, also a store that refuses the worker at start-up: a wrong password, a missing database)
and 1 when the store fails (or the application raised while it was imported). Secrets in store
URLs are never printed. A store that fails while `tenure run` runs stops nothing: the runners
retry until it answers again.

Example::

    $ tenure locks --store sqlite:////var/lib/app/locks.db
    leases in sqlite:////var/lib/app/locks.db (database file /var/lib/app/locks.db)
     name             holder                         token   expires in
    ────────────────────────────────────────────────────────────────────
     nightly-report   web-1:4121:3fa2c1   1795312747745980       29.8 s
    $ tenure locks --json --prefix nightly --store sqlite:////var/lib/app/locks.db
    $ TENURE_STORE=file:///var/lib/app/locks tenure locks break nightly-report
    broke 1 lease on 'nightly-report'
    $ tenure run myapp.jobs:worker --store sqlite:////var/lib/app/locks.db --health-port 8080
    $ tenure jobs myapp.jobs:worker --store sqlite:////var/lib/app/locks.db
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import inspect
import json
import logging
import math
import os
import select
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

import tenure
from tenure._urls import parse_store_url, redact, redact_url

if TYPE_CHECKING:
    import asyncio  # imported where a command needs it: it costs every command's start

ENV_VAR = "TENURE_STORE"
CONFIG_ENV_VAR = "TENURE_CONFIG"
USAGE_ERROR = 2
STORE_ERROR = 1
SIGPIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for `ls | head`'s ls
JOB_PREFIX = "job:"  # the job runner's lock and record names (tenure.jobs._periodic)
# A piped listing pads names to the longest up to this width; a longer name pushes only its own
# row's other cells to the right (a 1,024-character name would pad every row to 1,075 columns).
PIPED_NAME_WIDTH = 40

log = logging.getLogger("tenure.cli")


class _UsageError(Exception):
    """Bad command-line input (exit 2)."""


class _StoreError(Exception):
    """The store cannot be used, or the application failed (exit 1)."""


# The prog of the innermost command that met unknown arguments (`tenure locks break`), kept in
# the namespace: argparse reports them from the top-level parser, which knows only `tenure`.
_UNKNOWN_IN = "_tenure_unknown_in"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line like every other error, instead of argparse's usage block.
        raise _UsageError(f"{message}; see '{self.prog} --help'")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown and not hasattr(parsed, _UNKNOWN_IN):  # innermost parser returns first
            setattr(parsed, _UNKNOWN_IN, self.prog)
        return parsed, unknown


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tenure` command with `argv` (default: sys.argv[1:]); return the exit code.

    A reader that stops early (`tenure locks --json | head -2`) ends the command quietly with
    exit code 141, as a Unix tool killed by SIGPIPE reports.

    Example::

        >>> main(["locks", "--store", "memory://"])  # refused, and stderr says why
        2
    """
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: the last lines may only fail here
    except BrokenPipeError:
        return _reader_gone()
    except SystemExit:  # argparse's --help ignores a failed write: the same ending
        if _stdout_closed():
            return _reader_gone()
        raise
    return code


def _main(argv: Sequence[str] | None) -> int:
    url: str | None = None
    args = argparse.Namespace()
    typed = list(sys.argv[1:] if argv is None else argv)
    try:
        args, unknown = _parser().parse_known_args(typed)
        if unknown:
            raise _UsageError(f"unrecognized arguments: {' '.join(unknown)}; see "
                              f"'{getattr(args, _UNKNOWN_IN, 'tenure')} --help'")
        if args.command == "run":
            return _run(args)
        if args.command == "demo":
            from tenure.demo import _command

            _check_demo_directory(args.dir)
            return _command.run(args)
        if args.command == "chaos":
            from tenure.chaos import _command as chaos_command

            return chaos_command.run(args)
        url = getattr(args, "store", None)
        if url is None:
            url = os.environ.get(ENV_VAR)
        if not url:
            raise _UsageError(
                f"no store given: pass --store URL or set {ENV_VAR} "
                "(e.g. sqlite:////var/lib/app/locks.db)"
            )
        args.store_url = url
        _refuse_private_store(url, args, from_flag=getattr(args, "store", None) is not None)
        if args.command == "jobs" and args.app and _missing_location(url):
            # As on a server store with no records yet: the app's jobs, none ran. Connecting
            # would create the file or directory; nothing is there to read anyway.
            _jobs(None, args)
            return 0
        with _connect(url) as store:
            args.run(store, args)
        return 0
    except (_UsageError, tenure.InvalidArgument, tenure.InvalidArgumentType) as exc:
        return _fail(str(exc), USAGE_ERROR, _urls_given(typed, url, args))
    except (_StoreError, tenure.TenureError) as exc:
        return _fail(str(exc), STORE_ERROR, _urls_given(typed, url, args))
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            return _reader_gone()
        url = url or getattr(args, "resolved_store", None)
        message = f"{redact_url(url)}: {exc}" if url else str(exc)
        return _fail(message, STORE_ERROR, _urls_given(typed, url, args))
    except KeyboardInterrupt:
        return _fail("interrupted", 130, _urls_given(typed, url, args))


def _urls_given(typed: Sequence[str], url: str | None, args: argparse.Namespace) -> list[str]:
    """Every store URL this command was given (on the command line, in TENURE_STORE or a
    configuration file): the strings whose password an error line must hide."""
    given = [url, getattr(args, "resolved_store", None), os.environ.get(ENV_VAR)]
    for word in typed:
        given += [word, word.partition("=")[2]]  # --store=URL
    return [text for text in given if text and "://" in text]


def _refuse_private_store(url: str, args: argparse.Namespace, *, from_flag: bool) -> None:
    """memory:// lives in the process that opens it: this command would only see its own,
    empty store (as `tenure demo` and `tenure chaos` say too)."""
    if parse_store_url(url).scheme != "memory":
        return
    given = f"--store {redact_url(url)}" if from_flag else f"{ENV_VAR}={redact_url(url)}"
    command = " ".join(["tenure", args.command, *([args.action] if getattr(
        args, "action", None) else [])])
    raise _UsageError(
        f"{given} is private to the process that opens it, so '{command}' would only see an "
        "empty store of its own; pass the store your applications use, e.g. "
        "sqlite:////var/lib/app/locks.db, file:///var/lib/app/locks or redis://HOST:6379/0")


def _check_demo_directory(chosen: Path | None) -> None:
    """--dir must be a directory or a path that can become one: not a file, nor below one."""
    if chosen is None:
        return
    for path in (chosen, *chosen.parents):
        if path.exists():
            if path.is_dir():
                return
            kind = "a file, not a directory" if path.is_file() else "not a directory"
            raise _UsageError(
                f"--dir {chosen}: {path} is {kind}; --dir wants a directory for the run's "
                "databases and logs (created if missing, kept afterwards)")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 itself; main() ends quietly with 141 as for any other output.
        self.quiet = True
        raise BrokenPipeError


def _console() -> Console:
    console = _Console(highlight=False)
    if not console.is_terminal:  # piped: the table's natural width, never wrap a name
        console.width = 100_000
    return console


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket nobody reads any more (not the store's connection,
    which raises the same BrokenPipeError)."""
    if not hasattr(select, "poll"):  # Windows: no poll; the error came from writing output
        return True
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # stdout replaced or closed
        return False


def _reader_gone() -> int:
    """The reader closed the pipe (`| head`): exit quietly, with 128 + SIGPIPE as a Unix tool
    killed by the signal would, so `set -o pipefail` scripts still see the output was cut."""
    # Output still buffered would fail again at interpreter exit, with a traceback on stderr.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return SIGPIPE_EXIT


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tenure", description="Run a worker's jobs, list the jobs and the live "
                     "leases of a tenure store, or break a lease.")
    parser.add_argument("--version", action="version", version=f"tenure {tenure.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store = _Parser(add_help=False)
    store.add_argument(
        "--store", metavar="URL", default=argparse.SUPPRESS,
        help=f"store URL, e.g. sqlite:////var/lib/app/locks.db (default: ${ENV_VAR})",
    )
    locks = commands.add_parser(
        "locks", parents=[store], help="list live leases ('locks break NAME' frees one)",
        usage="tenure locks [-h] [--store URL] [--prefix PREFIX] [--json]\n"
              "       tenure locks break [-h] NAME [--store URL]\n"
              "       tenure locks prune [-h] --idle DURATION [--dry-run] [--store URL]",
        description="List the live leases of a store, break one with 'tenure locks break "
                    "NAME', or forget the names nobody has held for a while with 'tenure "
                    "locks prune --idle DURATION' (see their --help).",
    )
    locks.add_argument("--prefix", default="", help="only names starting with PREFIX")
    locks.add_argument("--json", action="store_true", help="print a JSON list, not a table")
    locks.set_defaults(run=_list)
    # prog: argparse would otherwise build the subcommand's name from locks' two-line usage.
    # help=SUPPRESS: the usage lines show `break` as it is typed, the help no ACTION beside them.
    actions = locks.add_subparsers(dest="action", metavar="ACTION", prog="tenure locks",
                                   help=argparse.SUPPRESS)
    breaker = actions.add_parser(
        "break", parents=[store], help="free NAME now, whoever holds it",
        usage="tenure locks break [-h] NAME [--store URL]",
        description="Free every live lease of NAME now; its holder learns at its next check.",
    )
    breaker.add_argument("name", metavar="NAME",
                         help="the lock or semaphore name, as 'tenure locks' lists it")
    breaker.set_defaults(run=_break)
    pruner = actions.add_parser(
        "prune", parents=[store], help="forget the names nobody has held for DURATION",
        usage="tenure locks prune [-h] --idle DURATION [--dry-run] [--store URL]",
        description="Forget the state (lease and fencing counter; job records stay) of every "
                    "name nobody has held for DURATION. A name taken again gets a larger "
                    "token from the store's clock. Stores do this by themselves after their "
                    "retain option (default 1h).",
    )
    pruner.add_argument("--idle", metavar="DURATION", required=True, type=_duration,
                        help="e.g. 3600, 90s, 15m, 12h or 7d")
    pruner.add_argument("--dry-run", action="store_true",
                        help="count the names that would be forgotten; forget none")
    pruner.set_defaults(run=_prune)
    runner = commands.add_parser(
        "run", help="run a worker's jobs until SIGTERM/SIGINT",
        usage="tenure run [-h] APP [--store URL] [--config FILE] [--health-port N]\n"
              "                  [--health-host HOST] [--log-level LEVEL] [--check]",
        description="Import APP (module:attribute, the attribute a tenure.Worker or "
                    "tenure.aio.AsyncWorker, or a function returning one), apply the "
                    "configuration and run its jobs until SIGTERM or SIGINT. The store URL is "
                    f"exported to the application as ${ENV_VAR} before APP is imported.",
    )
    runner.add_argument("app", metavar="APP", help="e.g. myapp.jobs:worker")
    runner.add_argument("--store", metavar="URL", default=None,
                        help=f"store URL (default: ${ENV_VAR}, then the file's [tenure] store)")
    runner.add_argument("--config", metavar="FILE", default=None,
                        help=f"TOML file with a [tenure] table (default: ${CONFIG_ENV_VAR})")
    runner.add_argument("--health-port", metavar="N", type=int, default=None,
                        help="serve GET /health and /ready on port N (0: any free port)")
    runner.add_argument("--health-host", metavar="HOST", default=None,
                        help="address of the health endpoint (default: 127.0.0.1)")
    runner.add_argument("--log-level", metavar="LEVEL", default=None,
                        help="DEBUG, INFO (default), WARNING, ERROR or CRITICAL")
    runner.add_argument("--check", action="store_true",
                        help="validate APP and its configuration, print the effective settings "
                             "as JSON with where each came from, and exit")
    jobs = commands.add_parser(
        "jobs", parents=[store], help="list jobs: last period, outcome, holder, next due",
        usage="tenure jobs [-h] [APP] [--store URL] [--json]",
        description="List the jobs recorded in a store: last completed period, last outcome, "
                    "current holder, and each job's schedule and next due time once a run "
                    "recorded them. With APP (as for 'tenure run') the schedules come from its "
                    "code, and its jobs that never ran are listed too.",
    )
    jobs.add_argument("app", metavar="APP", nargs="?", default=None,
                      help="e.g. myapp.jobs:worker: schedules from its code, and its jobs that "
                           "never ran")
    jobs.add_argument("--json", action="store_true", help="print a JSON list, not a table")
    jobs.set_defaults(run=_jobs)
    from tenure.demo import _command

    _command.add_parser(commands)
    from tenure.chaos import _command as chaos_command

    chaos_command.add_parser(commands)
    return parser


def _missing_location(url: str) -> str | None:
    """The absolute path of a sqlite:// database or file:// directory that does not exist
    (yet), else None.

    Example::

        >>> _missing_location("sqlite:////nonexistent/locks.db")
        '/nonexistent/locks.db'
    """
    parsed = parse_store_url(url)
    local = parsed.scheme in ("sqlite", "file")
    if local and parsed.location and not os.path.exists(parsed.location):
        return os.path.abspath(parsed.location)
    return None


def _connect(url: str) -> tenure.Store:
    parsed = parse_store_url(url)
    # Connecting creates a missing file or directory: an admin typo should not.
    path = _missing_location(url)
    if path is not None:
        # '~/x' would read as the home directory; neither tenure nor SQLAlchemy expands it.
        tilde = any(part.startswith("~") for part in parsed.location.split(os.sep))
        hint = " (~ is not expanded: write the full path)" if tilde else ""
        raise _StoreError(
            f"{redact_url(url)}: {path} does not exist{hint}; check the path "
            "(a store is created by the applications that use it)"
        )
    return tenure.connect(url)


# -- tenure run --------------------------------------------------------------------------------

def _run(args: argparse.Namespace) -> int:
    from tenure.jobs._config import load_config

    config_path = args.config or os.environ.get(CONFIG_ENV_VAR) or None
    config = load_config(config_path, os.environ, cli={
        "store": args.store, "health_port": args.health_port, "health_host": args.health_host,
        "log_level": args.log_level})
    store = config.worker_value("store")
    if store is not None:
        args.resolved_store = store.value
        try:
            parse_store_url(store.value)
        except (tenure.InvalidArgument, tenure.InvalidArgumentType) as exc:
            raise type(exc)(f"{store.source}: {exc}") from None
        os.environ[ENV_VAR] = store.value  # how the application finds its store
    if not args.check:
        level = config.worker_value("log_level")
        logging.basicConfig(level=level.value if level else "INFO", stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        for warning in config.warnings:
            log.warning("tenure: %s", warning)
    worker = _load_worker(args.app)
    try:
        return _check(worker, config, args) if args.check else _serve(worker, config, args)
    except tenure.StoreRefused as exc:
        # Refused at start-up (the worker raises it only then): a setup error, like bad usage.
        return _fail(str(exc), USAGE_ERROR, _urls_given([], None, args))
    finally:
        _close_store(worker)


def _check(worker: Any, config: Any, args: argparse.Namespace) -> int:
    from tenure.jobs._config import apply_config

    settings = apply_config(worker, config, app=args.app)
    if "store" in settings:
        settings["store"]["value"] = redact_url(settings["store"]["value"])
    settings["app"] = args.app
    settings["worker"] = type(worker).__name__
    settings["warnings"] = [*config.warnings, *_store_warnings(worker, config, args.app)]
    print(json.dumps(settings, indent=2))
    return 0


def _serve(worker: Any, config: Any, args: argparse.Namespace) -> int:
    from tenure.jobs import AsyncWorker
    from tenure.jobs._config import apply_config

    apply_config(worker, config, app=args.app)
    for warning in _store_warnings(worker, config, args.app):
        log.warning("tenure: %s", warning)
    log.info("tenure: running %d job(s) of %s on %s as %s", len(worker.jobs), args.app,
             worker.store.url, worker.instance)
    if isinstance(worker, AsyncWorker):
        import asyncio

        async def main() -> None:
            with _health_server(worker, config, asyncio.get_running_loop()):
                await worker.run()

        asyncio.run(main())
    else:
        with _health_server(worker, config, None):
            worker.run()
    abandoned = list(getattr(worker, "abandoned", ()))
    if abandoned:  # each was logged by name when the grace period ended
        log.error("tenure: %s stopped with %d sync job(s) still running past the grace period "
                  "(%s): exit status 1", args.app, len(abandoned), ", ".join(abandoned))
        return 1
    log.info("tenure: %s stopped", args.app)
    return 0


@contextmanager
def _health_server(worker: Any, config: Any,
                   loop: asyncio.AbstractEventLoop | None) -> Iterator[None]:
    from tenure.jobs._health_http import serve_health

    port = config.worker_value("health_port")
    if port is None:
        yield
        return
    host = config.worker_value("health_host")
    server = serve_health(worker, port=port.value, host=host.value if host else "127.0.0.1",
                          loop=loop)
    try:
        server.start()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if host is not None and _bad_host(exc):  # a bad option, not a busy port
            raise _UsageError(
                f"cannot serve health on {server.url}: {host.source} {host.value!r} is not an "
                f"address of this machine ({reason}); choose one, e.g. 127.0.0.1 (this machine "
                "only) or 0.0.0.0 (every interface)") from None
        raise _StoreError(f"cannot serve health on {server.url} ({port.source}): {reason}; "
                          "choose another port") from None
    try:
        yield
    finally:
        server.close()


def _bad_host(exc: OSError) -> bool:
    """Whether binding failed because of the address (a name that does not resolve, an address
    of another machine, an IPv6 address without IPv6) rather than the port."""
    return isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRNOTAVAIL,
                                                              errno.EAFNOSUPPORT)


def _load_worker(app: str) -> Any:
    """Import `app` (module:attribute) with the working directory on sys.path, as uvicorn
    does, and return its Worker (calling the attribute when it is a function)."""
    from tenure.jobs import AsyncWorker, Worker
    from tenure.jobs._worker import runs_started

    module_name, _, attribute = app.partition(":")
    if not module_name or not attribute:
        raise _UsageError(f"APP {app!r} must be module:attribute, e.g. myapp.jobs:worker")
    if "/" in module_name or os.sep in module_name or (module_name.endswith(".py")
                                                       and os.path.isfile(module_name)):
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".")
        raise _UsageError(f"APP {app!r} names a file; give its module path, e.g. "
                          f"{dotted.strip('.')}:{attribute} (from the directory that holds "
                          f"{module_name.split('/')[0]})")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    runs_before = runs_started()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise _UsageError(f"cannot import {module_name!r}: {exc}; run tenure from the "
                              "directory that holds it, or set PYTHONPATH") from None
        raise _app_error(f"importing {module_name!r} failed") from None
    except (tenure.InvalidArgument, tenure.InvalidArgumentType, tenure.TenureError):
        raise
    except Exception:
        raise _app_error(f"importing {module_name!r} failed") from None
    if runs_started() != runs_before:  # its own run ended (Ctrl-C): do not start another
        raise _UsageError(f"importing {module_name} ran the worker (worker.run() at module "
                          "level): guard it with if __name__ == '__main__':")
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise _UsageError(f"{module_name!r} has no attribute {attribute!r}; APP is "
                              "module:attribute, the attribute a tenure.Worker or "
                              "tenure.aio.AsyncWorker, or a function returning one")
        found = getattr(found, part)
    called = False
    if not isinstance(found, (Worker, AsyncWorker)) and callable(found):
        needed = _required_parameters(found)
        if needed:  # e.g. a job function (it takes the Run): calling it would only fail
            what = "a class" if isinstance(found, type) else "a function"
            raise _UsageError(
                f"{app} is {what} that takes arguments ({', '.join(needed)}), not a "
                "tenure.Worker: pass the Worker its jobs are registered on, as module:worker "
                "(e.g. myapp.jobs:worker), or a function that takes no arguments and returns it")
        try:
            found = found()
        except (tenure.InvalidArgument, tenure.InvalidArgumentType, tenure.TenureError):
            raise
        except Exception:
            raise _app_error(f"calling {app} failed") from None
        called = True
    if not isinstance(found, (Worker, AsyncWorker)):
        kind = type(found).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        if called:
            raise _UsageError(f"{app} is a function that returned {article} {kind}, not a "
                              "tenure.Worker or tenure.aio.AsyncWorker")
        raise _UsageError(f"{app} is {article} {kind}, not a tenure.Worker or "
                          "tenure.aio.AsyncWorker (or a function returning one)")
    return found


def _required_parameters(function: Any) -> list[str]:
    """The names of the parameters a call of `function` must pass (none when its signature
    cannot be read: the call then tells).

    Example::

        >>> _required_parameters(lambda run, retries=3: None)
        ['run']
    """
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [parameter.name for parameter in parameters
            if parameter.default is inspect.Parameter.empty
            and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                       inspect.Parameter.VAR_KEYWORD)]


def _app_error(what: str) -> _StoreError:
    """The application raised: its traceback goes to the log, the summary to the error line."""
    exc = sys.exc_info()[1]
    log.error("tenure: %s", what, exc_info=True)
    return _StoreError(f"{what}: {type(exc).__name__}: {exc}")


def _store_warnings(worker: Any, config: Any, app: str) -> list[str]:
    configured = config.worker_value("store")
    if configured is None or _same_store(configured.value, worker.store.url):
        return []
    return [f"{app} uses the store {worker.store.url}, not {redact_url(configured.value)} from "
            f"{configured.source}; build the worker's store from os.environ[{ENV_VAR!r}]"]


def _same_store(configured: str, actual: str) -> bool:
    try:
        return parse_store_url(redact(configured)) == parse_store_url(actual)
    except (tenure.InvalidArgument, tenure.InvalidArgumentType):
        return False


def _close_store(worker: Any) -> None:
    store = worker.store
    try:
        if isinstance(store, tenure.Store):
            store.close()
        else:
            import asyncio

            asyncio.run(store.close())
    except Exception as exc:  # closing is best effort; leases were released by the worker
        log.debug("tenure: closing the store failed: %s", exc)


# -- tenure jobs -------------------------------------------------------------------------------

def _jobs(store: tenure.Store | None, args: argparse.Namespace) -> None:
    """The jobs of `store`, or (None: its database or directory does not exist yet) of APP,
    none of them run."""
    from tenure.jobs import JobRecord
    from tenure.jobs._schedule import parse_schedule

    schedules: dict[str, Any] = {}
    if args.app:
        os.environ[ENV_VAR] = args.store_url  # the application's store, as for 'tenure run'
        worker = _load_worker(args.app)
        schedules = {name: spec.schedule for name, spec in worker.jobs.items()}
        _close_store(worker)
    leases: dict[str, tenure.LeaseInfo] = {}
    records: dict[str, str] = {}
    if store is not None:
        leases = {info.name: info for info in store.leases(JOB_PREFIX)}
        if not hasattr(store.backend, "records"):
            raise _StoreError(f"{store.url}: this store does not keep job records yet")
        records = store.backend.records(JOB_PREFIX)
    names = sorted({name[len(JOB_PREFIX):] for name in [*records, *leases]} | set(schedules))
    now = datetime.now(timezone.utc)
    rows: list[dict[str, Any]] = []
    for name in names:
        text = records.get(JOB_PREFIX + name)
        record = None
        unreadable = False
        if text is not None:
            try:
                record = JobRecord.parse(text)
            except (ValueError, TypeError, KeyError):
                unreadable = True
        lease = leases.get(JOB_PREFIX + name)
        schedule = schedules.get(name)
        if schedule is None and record is not None and record.schedule:
            with contextlib.suppress(ValueError):  # written by a newer or older tenure
                schedule = parse_schedule(record.schedule)
        rows.append({
            "job": name,
            "schedule": schedule.describe() if schedule else None,
            "last_period": _iso(record.period if record else None),
            "last_outcome": "unreadable record" if unreadable else (
                record.outcome if record else None),
            "attempts": record.attempts if record else None,
            "last_success": _iso(record.last_success if record else None),
            "last_holder": record.holder if record else None,
            "last_error": record.error if record else None,
            "holder": lease.holder if lease else None,
            "token": lease.token if lease else None,
            "next_due": _iso(_next_due(schedule, record, now)) if schedule else None,
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        where = (_store_description(store) if store is not None else
                 f"{redact_url(args.store_url)} ({_missing_location(args.store_url)} does not "
                 "exist yet)")
        print(_printable(f"no jobs recorded in {where}"))
        return
    timed = any(row["schedule"] for row in rows)
    columns = ["job", *(["schedule"] if timed else []), "last period", "outcome",
               "last success", "holder", *(["next due"] if timed else [])]
    lines = []
    for row in rows:
        cells = [_printable(row["job"])]
        if timed:
            cells.append(_printable(row["schedule"] or "unknown"))
        cells += [_short_time(row["last_period"]), _printable(row["last_outcome"] or "never ran"),
                  _short_time(row["last_success"]), _printable(row["holder"] or "-")]
        if timed:
            cells.append(_short_time(row["next_due"]))
        lines.append(cells)
    console = _console()
    if console.is_terminal:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for column in columns:
            # The job's name whole while the other columns can give up room; one wider than
            # the terminal is cut, and said to be below.
            table.add_column(column, no_wrap=column == "job")
        for cells in lines:
            table.add_row(*(Text(cell) for cell in cells))
        console.print(table)
        if _cuts_a_cell(console, table, [cells[0] for cells in lines]):
            console.print(Text("names cut here are shown whole by --json", style="dim"))
    else:  # piped: plain columns, as `tenure locks` prints them
        for line in _plain_table(columns, lines, right=set()):
            console.print(Text(line), soft_wrap=True)
    if not timed:
        console.print(Text("next due times need the schedules: pass APP, e.g. 'tenure jobs "
                           "myapp.jobs:worker', or let a run record them", style="dim"))


def _next_due(schedule: Any, record: Any, now: datetime) -> datetime:
    """The current period when it is not recorded as done yet, else the next one."""
    current: datetime = schedule.period_at(now)
    if record is None or record.period < current:
        return current
    upcoming: datetime = schedule.next_after(now)
    return upcoming


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(timezone.utc).isoformat()


def _short_time(iso: str | None) -> str:
    if iso is None:
        return "-"
    moment = datetime.fromisoformat(iso)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def _list(store: tenure.Store, args: argparse.Namespace) -> None:
    leases = store.leases(args.prefix)
    if args.json:
        print(json.dumps([_as_json(info) for info in leases], indent=2))
        return
    if not leases:
        where = f" with prefix {args.prefix!r}" if args.prefix else ""
        print(_printable(f"no live leases{where} in {_store_description(store)}"))
        return
    now = datetime.now(timezone.utc)
    show_slot = any(info.slot > 0 for info in leases)
    columns = ["name", *(["slot"] if show_slot else []), "holder", "token", "expires in"]
    rows = [[_printable(info.name), *([str(info.slot)] if show_slot else []),
             _printable(info.holder), str(info.token), _expires_in(info, now)]
            for info in leases]
    console = _console()
    console.print(_text(_store_header(store)), soft_wrap=True)
    if not console.is_terminal:
        for line in _plain_table(columns, rows, right={"slot", "token", "expires in"}):
            console.print(Text(line), soft_wrap=True)
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in columns:
        right = column in ("slot", "token", "expires in")
        table.add_column(column, justify="right" if right else "left")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)
    if _cuts_a_cell(console, table, [row[0] for row in rows]):
        # A name cut with an ellipsis (or wrapped) cannot be copied for 'tenure locks break'.
        console.print(Text("names cut here are shown whole by --json", style="dim"))


def _plain_table(columns: list[str], rows: list[list[str]], right: set[str]) -> list[str]:
    """Lines of a table for a pipe: columns two spaces apart, the first (names) padded only up
    to PIPED_NAME_WIDTH, no trailing spaces; `right` columns are right-aligned.

    Example::

        >>> for line in _plain_table(["name", "token"], [["a", "7"], ["bb", "12"]], {"token"}):
        ...     print(line)
        name  token
        a         7
        bb       12
    """
    table = [columns, *rows]
    widths = [max(len(row[index]) for row in table) for index in range(len(columns))]
    widths[0] = min(widths[0], PIPED_NAME_WIDTH)
    lines = []
    for row in table:
        cells = [cell.rjust(width) if column in right else cell.ljust(width)
                 for column, cell, width in zip(columns, row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _cuts_a_cell(console: Console, table: Table, cells: list[str]) -> bool:
    """Whether the table, as the console renders it, shows any of `cells` only in part."""
    rendered = "\n".join("".join(segment.text for segment in line)
                         for line in console.render_lines(table, pad=False))
    return any(cell not in rendered for cell in cells)


def _store_header(store: tenure.Store) -> str:
    """The line above the table: which store, and for a local one the absolute path it
    resolved to (`sqlite:///locks.db` is relative to the working directory).

    Example::

        >>> with tenure.connect("sqlite:////tmp/locks.db") as store:
        ...     print(_store_header(store))
        leases in sqlite:////tmp/locks.db (database file /tmp/locks.db)
    """
    return f"leases in {_store_description(store)}"


def _store_description(store: tenure.Store) -> str:
    """The store's URL and, for a local one, the absolute path it resolved to."""
    backend = store.backend
    if isinstance(backend, tenure.stores.SQLiteStore):
        return f"{store.url} (database file {backend.path})"
    if isinstance(backend, tenure.stores.FileStore):
        return f"{store.url} (directory {os.path.abspath(backend.directory)})"
    return store.url


def _break(store: tenure.Store, args: argparse.Namespace) -> None:
    freed = store.break_lease(args.name)
    if freed:
        print(f"broke {freed} lease{'s' if freed > 1 else ''} on {args.name!r}")
    else:
        print(f"no live lease on {args.name!r}")


def _prune(store: tenure.Store, args: argparse.Namespace) -> None:
    count = store.prune(args.idle, dry_run=args.dry_run)
    names = f"{count} name{'' if count == 1 else 's'}"
    idle = f"idle for {args.idle:g} s or more"
    print(f"would forget {names} {idle}" if args.dry_run else f"forgot {names} {idle}")


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(text: str) -> float:
    """Seconds from '3600', '90s', '15m', '12h' or '7d' (argparse shows the error as a usage
    error naming the option).

    Example:
        >>> _duration("15m"), _duration("3600")
        (900.0, 3600.0)
    """
    number, unit = (text[:-1], text[-1]) if text[-1:].lower() in _UNITS else (text, "s")
    try:
        seconds = float(number) * _UNITS[unit.lower()]
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give seconds (3600) or a number with s, m, h or d "
            "(15m, 12h), 0 or more")
    return seconds


def _text(data: str) -> Text:
    """A table cell of data from the store: never rich markup ('[bold]' stays as written),
    never raw control characters."""
    return Text(_printable(data))


def _printable(text: str) -> str:
    r"""`text` with every character a terminal would act on (escape sequences, bell, newline,
    bidirectional overrides) escaped as repr() does, e.g. '\x1b'; --json gives the exact
    names.

    Example::

        >>> print(_printable("jobs/\x1b[31mred\u202e"))
        jobs/\x1b[31mred\u202e
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _expires_in(info: tenure.LeaseInfo, now: datetime) -> str:
    if info.expires_at is None:
        return "held until released"
    return f"{max(0.0, (info.expires_at - now).total_seconds()):.1f} s"


def _as_json(info: tenure.LeaseInfo) -> dict[str, object]:
    expires = None if info.expires_at is None else info.expires_at.isoformat()
    return {"name": info.name, "slot": info.slot, "holder": info.holder, "token": info.token,
            "expires_at": expires}


def _fail(message: str, code: int, urls: Sequence[str]) -> int:
    """Print the one error line. The library's messages name a store by its redacted URL
    already; a URL the user typed (echoed by argparse, or by the CLI's own messages) is hidden
    here, structurally: each URL given is replaced whole by its redacted form. Redacting the
    message's free text instead cut text out of it (a query's `password=` ran to the next ';')
    and, replacing the password's text, garbled words and spelled a short password out."""
    for url in sorted(urls, key=len, reverse=True):  # '--store=URL' before the URL in it
        message = message.replace(url, redact_url(url))
    print(f"tenure: error: {_printable(' '.join(message.split()))}", file=sys.stderr)
    return code
