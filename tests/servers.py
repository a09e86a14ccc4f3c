"""Servers the test suite starts itself from local binaries, on free loopback ports: Azurite (the
Azure Storage emulator, npm package `azurite` pinned in package.json, installed by `make test`).

No Docker, no system services, no cloud account. A server that cannot start raises
ServiceMissing; the fixtures turn that into a skip, or a failure with TENURE_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AZURITE_BLOB = ROOT / "node_modules" / ".bin" / "azurite-blob"
# Azurite's published, well-known development account and key (not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
           "KBHBeksoGMGw==")


class ServiceMissing(RuntimeError):
    """A server the tests need could not be started here."""


def service_missing(reason: str) -> None:
    """Skip, or fail when the run requires every service (CI: TENURE_REQUIRE_SERVICES=1)."""
    if os.environ.get("TENURE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (TENURE_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def accepts_connections(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


class Azurite:
    """One Azurite blob service in memory; `restart()` loses everything it stored.

    Example::

        server = Azurite(tmp_path); server.start()
        tenure.connect("azblob:///locks", connection_string=server.connection_string)
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{DEV_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
                f"BlobEndpoint={self.endpoint};")

    def start(self, deadline: float = 30.0) -> None:
        """Start on a free port (a new one each try: another worker may grab the same)."""
        if not AZURITE_BLOB.exists():
            raise ServiceMissing(
                f"Azurite is not installed ({AZURITE_BLOB.relative_to(ROOT)} is missing): run "
                "`make test`, which runs `npm ci` (needs node and npm)")
        errors = []
        for _ in range(3):
            port = self.port or free_port()
            error = self._start_on(port, deadline)
            if error is None:
                return
            errors.append(error)
            self.port = 0
        raise ServiceMissing("Azurite did not start: " + " / ".join(errors))

    def _start_on(self, port: int, deadline: float) -> str | None:
        log = self.workdir / "azurite.log"
        with log.open("ab") as output:
            try:
                self.process = subprocess.Popen(
                    [str(AZURITE_BLOB), "--inMemoryPersistence", "--skipApiVersionCheck",
                     "--disableTelemetry", "--loose", "--blobHost", "127.0.0.1",
                     "--blobPort", str(port)],
                    cwd=self.workdir, stdout=output, stderr=subprocess.STDOUT,
                    start_new_session=True)
            except OSError as exc:  # node itself missing: the script's shebang fails
                return f"cannot run {AZURITE_BLOB.name}: {exc}"
        started = time.monotonic()
        while time.monotonic() - started < deadline:
            if self.process.poll() is not None:
                tail = log.read_text(errors="replace")[-500:]
                return f"exited with {self.process.returncode}: {tail}"
            if accepts_connections(port):
                self.port = port
                return None
            time.sleep(0.05)  # polling a condition with a deadline
        self.stop()
        return f"no connection on port {port} within {deadline:g} s"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        """Kill it and start a new one on the same port: every container and lease is gone."""
        self.stop()
        self.start()
