"""Start the servers the benchmark measures, with the test suite's own launcher.

tests/support/servers.py (loaded from its path under another module name, so it does not clash
with this module) starts redis-server, PostgreSQL, MariaDB and Azurite from local binaries on
free loopback ports in temporary directories. Each `start_*` here returns a `Server`, or the
reason it could not start (never raises for a missing binary, driver or launcher), and registers
the server's stop with the caller's ExitStack.

Example::

    with ExitStack() as stack:
        server = start_redis(Path("/tmp/redis-bench"), stack)
        if isinstance(server, Server):
            print(server.url, server.facts)
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "tests" / "support" / "servers.py"
REDIS_GRACE_SECONDS = 2  # a younger Redis grants no name it has not seen (docs/stores/redis.md)
_LOADING = threading.Lock()  # servers start in threads: one loads the launcher, the rest wait


@dataclass
class Server:
    """A running server: its URL, what else reaches it, and the versions behind its figures.

    Example::

        Server("redis://127.0.0.1:6399/0", [("Redis server", "7.0.15")])
    """

    url: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # socket, statements, secret...


def launcher() -> ModuleType:
    """tests/support/servers.py as a module named `tenure_test_servers`.

    Example::

        launcher().RedisServer
    """
    name = "tenure_test_servers"
    with _LOADING:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, LAUNCHER)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {LAUNCHER}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
        return module


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def _start(server: Any, stack: ExitStack) -> str | None:
    """Start a launcher server and stop it with `stack`; None, or why it did not start."""
    try:
        server.start()
    except Exception as exc:  # ServiceMissing, or a launcher that changed under us
        server.stop()
        getattr(server, "cleanup", lambda: None)()
        return _reason(exc)
    if hasattr(server, "cleanup"):
        stack.callback(server.cleanup)
    stack.callback(server.stop)
    return None


def start_redis(workdir: Path, stack: ExitStack) -> Server | str:
    """redis-server without persistence, once older than tenure's restart grace (2 s).

    Example::

        server = start_redis(Path(tmp) / "redis", stack)
    """
    try:
        import redis

        servers = launcher()
    except Exception as exc:
        return f"cannot import redis-py or the test suite's launcher ({_reason(exc)})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.RedisServer(workdir)
    if (why := _start(server, stack)) is not None:
        return why
    with redis.Redis(port=server.port) as client:
        info = client.info("server")
        while info["uptime_in_seconds"] < REDIS_GRACE_SECONDS:
            time.sleep(0.1)  # the server's own uptime is the condition polled
            info = client.info("server")
    facts = [("Redis server", f"{info['redis_version']} (no persistence, loopback TCP)"),
             ("redis-py", redis.__version__)]
    return Server(server.url, facts, {"port": server.port})


def start_postgres(workdir: Path, stack: ExitStack) -> Server | str:
    """PostgreSQL (fsync off, synchronous_commit on) with pg_stat_statements when it has it.

    `details["statements"]` says whether pg_stat_statements counts statements.

    Example::

        server = start_postgres(Path(tmp) / "postgres", stack)
    """
    try:
        import psycopg

        servers = launcher()
    except Exception as exc:
        return f"cannot import psycopg or the test suite's launcher ({_reason(exc)})"

    class BenchPostgres(servers.PostgresServer):  # type: ignore[misc, name-defined]
        preload = True

        def command(self, port: int) -> list[str]:
            command = [("synchronous_commit=on" if part == "synchronous_commit=off" else part)
                       for part in super().command(port)]
            if self.preload:
                command += ["-c", "shared_preload_libraries=pg_stat_statements"]
            return command

    workdir.mkdir(parents=True, exist_ok=True)
    server = BenchPostgres(workdir)
    try:
        server.start()
    except servers.ServiceMissing:
        server.stop()
        server.preload = False  # no pg_stat_statements here: count driver calls only
        if (why := _start(server, stack)) is not None:
            return why
    else:
        stack.callback(server.cleanup)
        stack.callback(server.stop)
    with psycopg.connect(server.url, autocommit=True) as admin:
        version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        if server.preload:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    facts = [("PostgreSQL", f"{version} (fsync off, synchronous_commit on, loopback TCP)"),
             ("psycopg", psycopg.__version__)]
    return Server(server.url, facts, {"statements": server.preload})


def start_mariadb(workdir: Path, stack: ExitStack) -> Server | str:
    """MariaDB with a database `tenure`; `details["socket"]` reaches it as root.

    Example::

        server = start_mariadb(Path(tmp) / "mariadb", stack)
    """
    try:
        import pymysql

        servers = launcher()
    except Exception as exc:
        return f"cannot import PyMySQL or the test suite's launcher ({_reason(exc)})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.MariaDBServer(workdir)
    if (why := _start(server, stack)) is not None:
        return why
    connection = pymysql.connect(unix_socket=str(server.socket_path), user="root")
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        (version,) = cursor.fetchone()
    facts = [("MariaDB", f"{version} (innodb_flush_log_at_trx_commit=2, loopback TCP)"),
             ("PyMySQL", pymysql.__version__)]
    return Server(server.url, facts, {"socket": str(server.socket_path)})


def start_azurite(workdir: Path, stack: ExitStack) -> Server | str:
    """Azurite in memory; `details["connection_string"]` reaches it (the well-known dev key).

    Example::

        server = start_azurite(Path(tmp) / "azurite", stack)
    """
    try:
        import azure.storage.blob as sdk
    except ImportError:
        return "the Azure SDK is not installed (pip install 'tenure[azure]')"
    try:
        servers = launcher()
    except Exception as exc:
        return f"cannot import the test suite's launcher ({_reason(exc)})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.Azurite(workdir)
    if (why := _start(server, stack)) is not None:
        return why
    facts = [("Azure SDK (azure-storage-blob)", sdk.__version__),
             ("Azurite", _azurite_version()), ("Node.js", _node_version())]
    return Server(server.endpoint, facts, {"connection_string": server.connection_string})


def _azurite_version() -> str:
    try:
        manifest = json.loads((ROOT / "node_modules" / "azurite" / "package.json").read_text())
        return f"{manifest['version']} (in-memory persistence, loopback)"
    except (OSError, ValueError, KeyError):
        return "unknown"


def _node_version() -> str:
    node = shutil.which("node")
    if node is None:
        return "unknown"
    try:
        answer = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return answer.stdout.strip() or "unknown"
