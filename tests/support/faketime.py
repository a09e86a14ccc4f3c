"""A wall clock the tests can step back, for processes started under a preload shim: a server
of its own (redis-server, postgres, mariadbd) or a client process (the local stores' clock is
their client's), while the test process and the ordinary servers keep the real clock.

The shim, wallclock_shift.c in this directory (built here with the C compiler on first use), is
preloaded with LD_PRELOAD; TENURE_CLOCK_OFFSET_FILE names a file holding the offset from the
real time ("-60" is a minute behind), read again at every clock call, so rewriting the file
steps a running process's clock at once. Only the wall clock steps (CLOCK_MONOTONIC is left
alone), as when NTP or an operator sets a host's time back (the stores' expiry and the leases'
deadlines run on monotonic clocks). Why not libfaketime: see the shim's header.

Example::

    clock = SteppedClock()
    server = FakedRedisServer(tmp_path, clock); server.start()
    clock.step_back(60)          # the server's TIME is now a minute behind the real time
    wait_until(lambda: server.clock_us() < real_us() - 59_000_000, 10, "the step")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from servers import LocalServer, MariaDBServer, PostgresServer, RedisServer, ServiceMissing

SHIM_SOURCE = Path(__file__).with_name("wallclock_shift.c")

def real_us() -> int:
    """The real wall clock in microseconds (the test process is never faked)."""
    return time.time_ns() // 1000


class SteppedClock:
    """An offset from the real wall clock, in whole seconds, that every process started with
    `environment()` follows from its next clock call on.

    The offset file lives in a directory of its own that any user can read (postgres runs as
    the `postgres` user); it is replaced atomically, so a reader never sees it half written.

    Example::

        clock = SteppedClock()
        subprocess.Popen(command, env={**os.environ, **clock.environment()})
        clock.step_back(60); ...; clock.reset()
    """

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="tenure-faketime-"))
        self.directory.chmod(0o755)
        self.path = self.directory / "offset"
        self.offset = 0
        self._write()

    def environment(self) -> dict[str, str]:
        """The variables that put a process on this clock through wallclock_shift.c (built on
        the first call; ServiceMissing without a C compiler)."""
        shim = self.directory / "wallclock_shift.so"
        if not shim.exists():
            compiler = shutil.which("cc") or shutil.which("gcc")
            if compiler is None:
                raise ServiceMissing("no C compiler (cc) to build tests/support/wallclock_shift.c")
            built = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(shim),
                                    str(SHIM_SOURCE)], capture_output=True, text=True)
            if built.returncode != 0:
                raise ServiceMissing(f"cannot build wallclock_shift.c: {built.stderr[-800:]}")
            shim.chmod(0o755)
        return {"LD_PRELOAD": str(shim), "TENURE_CLOCK_OFFSET_FILE": str(self.path)}

    def step_back(self, seconds: int) -> None:
        """Set the clock `seconds` further back (it keeps running from there)."""
        self.offset -= seconds
        self._write()

    def reset(self) -> None:
        """Back to the real time."""
        self.offset = 0
        self._write()

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _write(self) -> None:
        temporary = self.directory / "offset.new"
        temporary.write_text(f"{self.offset:+d}\n")
        temporary.chmod(0o644)
        os.replace(temporary, self.path)


class _Faked(LocalServer):
    """A LocalServer started under a SteppedClock; `clock_us()` reads the server's own clock."""

    clock: SteppedClock

    def clock_environment(self) -> dict[str, str]:
        return self.clock.environment()

    def run_as(self) -> dict[str, object]:
        return {**super().run_as(), "env": {**os.environ, **self.clock_environment()}}

    def clock_us(self) -> int:
        raise NotImplementedError


class FakedRedisServer(_Faked, RedisServer):
    """redis-server on a SteppedClock.

    Example::

        server = FakedRedisServer(tmp_path, clock); server.start(); server.clock_us()
    """

    name = "redis-faked"

    def __init__(self, workdir: Path, clock: SteppedClock) -> None:
        super().__init__(workdir)
        self.clock = clock

    def clock_us(self) -> int:
        import redis

        with redis.Redis(port=self.port) as client:
            seconds, micros = client.time()
            return int(seconds) * 1_000_000 + int(micros)


class FakedPostgresServer(_Faked, PostgresServer):
    """A PostgreSQL cluster on a SteppedClock (initdb runs on the real clock).

    Example::

        server = FakedPostgresServer(tmp_path, clock); server.start(); server.clock_us()
    """

    name = "postgres-faked"

    def __init__(self, workdir: Path, clock: SteppedClock) -> None:
        super().__init__(workdir)
        self.clock = clock

    def clock_us(self) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            row = connection.execute(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").fetchone()
        assert row is not None
        return int(row[0])


class FakedMariaDBServer(_Faked, MariaDBServer):
    """A MariaDB server on a SteppedClock (mariadb-install-db runs on the real clock).

    Example::

        server = FakedMariaDBServer(tmp_path, clock); server.start(); server.clock_us()
    """

    name = "mariadb-faked"

    def __init__(self, workdir: Path, clock: SteppedClock) -> None:
        super().__init__(workdir)
        self.clock = clock

    def clock_us(self) -> int:
        import pymysql

        connection = pymysql.connect(unix_socket=str(self.socket_path), user="root")
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', "
                           "UTC_TIMESTAMP(6))")
            row: Any = cursor.fetchone()
        return int(row[0])


def stop_all(*things: Any) -> None:
    """Stop servers and remove clocks, whatever failed before."""
    for thing in things:
        with contextlib.suppress(Exception):
            if isinstance(thing, SteppedClock):
                thing.cleanup()
            else:
                thing.stop()
                cleanup = getattr(thing, "cleanup", None)
                if cleanup is not None:
                    cleanup()
