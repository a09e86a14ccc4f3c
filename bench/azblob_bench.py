"""The azblob:// part of the benchmark: Azurite, and the bare-SDK floors of a blob-lease cycle.

Azurite is started with the test suite's own launcher (tests/servers.py: in-memory, telemetry
off, a free loopback port) and stopped with the caller's ExitStack. The floors use the official
azure-storage-blob SDK only, no tenure code: `BlobLeaseClient(blob)` (the SDK's own uuid4 lease
id) acquire + release, optionally with `set_sequence_number("increment")` under the lease in
between: the same requests tenure's azblob store makes, without fencing and with it.

Example::

    with ExitStack() as stack:
        emulator = start_azurite(Path("/tmp/azurite"), stack)
        if isinstance(emulator, Emulator):
            run = sdk_floor(emulator.connection_string, "bench", "x/lock", increment=True,
                            stack=stack)
            seconds = run(100)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from timing import Runner, timed_loop

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
LEASE_SECONDS = 30  # what tenure asks for with its default ttl of 30 s
ASYNC_WARMUP_CYCLES = 5  # per asyncio.run: opens the aiohttp session and its connection



@dataclass
class Emulator:
    """A running Azurite: how to reach it and the versions that explain its figures."""

    connection_string: str
    facts: list[tuple[str, str]] = field(default_factory=list)


def container_name() -> str:
    """A fresh container name for this run (Azure: 3 to 63 of [a-z0-9-]).

    Example:
        >>> len(container_name())
        24
    """
    return "bench-" + uuid.uuid4().hex[:18]


def start_azurite(workdir: Path, stack: ExitStack) -> Emulator | str:
    """Start Azurite with tests/servers.py; the running emulator, or why it is not running.

    Never raises: a missing node, npm package, SDK or launcher is a reason, not a crash.

    Example::

        emulator = start_azurite(Path(tmp) / "azurite", stack)
    """
    try:
        import azure.storage.blob as sdk
    except ImportError:
        return "the Azure SDK is not installed (pip install 'tenure[azure]')"
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    try:
        import servers  # the test suite's launcher
    except Exception as exc:
        return f"cannot import the test suite's Azurite launcher tests/servers.py ({exc!r})"
    workdir.mkdir(parents=True, exist_ok=True)
    server = servers.Azurite(workdir)
    try:
        server.start()
    except BaseException as exc:  # ServiceMissing, or a launcher that changed under us
        server.stop()
        if not isinstance(exc, Exception):
            raise
        return " ".join(str(exc).split()) or type(exc).__name__
    stack.callback(server.stop)
    facts = [("Azure SDK (azure-storage-blob)", sdk.__version__),
             ("Azurite", _azurite_version()), ("Node.js", _node_version())]
    return Emulator(server.connection_string, facts)


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


def sdk_floor(connection_string: str, container: str, blob: str, *, increment: bool,
              stack: ExitStack) -> Runner:
    """The sync SDK's own cycle on `blob`: lease acquire (+ increment under it) + release.

    One ContainerClient (SDK defaults) reused for every cycle, a new `BlobLeaseClient(blob)` per
    cycle (the SDK proposes a uuid4 lease id, as tenure does).

    Example::

        run = sdk_floor(connection_string, "bench", "tenure/x/lock", increment=False, stack=stack)
    """
    from azure.storage.blob import BlobLeaseClient, ContainerClient

    client = ContainerClient.from_connection_string(connection_string, container)
    stack.callback(client.close)
    target = client.get_blob_client(blob)

    def cycle() -> None:
        lease = BlobLeaseClient(target)
        lease.acquire(LEASE_SECONDS)
        if increment:
            target.set_sequence_number("increment", lease=lease.id)
        lease.release()

    return timed_loop(cycle)


def async_sdk_floor(connection_string: str, container: str, blob: str, *,
                    increment: bool) -> Runner:
    """The async SDK's cycle (aiohttp), one asyncio.run per round like tenure's async rows.

    The client is opened and warmed up inside each asyncio.run; only the cycles are timed.

    Example::

        run = async_sdk_floor(connection_string, "bench", "tenure/x/lock", increment=True)
    """
    from azure.storage.blob.aio import BlobLeaseClient, ContainerClient

    async def cycles(count: int) -> float:
        async with ContainerClient.from_connection_string(connection_string, container) as client:
            target = client.get_blob_client(blob)

            async def cycle() -> None:
                lease = BlobLeaseClient(target)
                await lease.acquire(LEASE_SECONDS)
                if increment:
                    await target.set_sequence_number("increment", lease=lease.id)
                await lease.release()

            for _ in range(ASYNC_WARMUP_CYCLES):
                await cycle()
            start = time.perf_counter()
            for _ in range(count):
                await cycle()
            return time.perf_counter() - start

    def run(count: int) -> float:
        return asyncio.run(cycles(count))

    return run


def lock_blob(connection_string: str, container: str) -> str | None:
    """The one lock blob tenure created in `container` (the floors reuse it), if any.

    Example::

        lock_blob(connection_string, "bench-1234")  # 'tenure/bench-…/lock'
    """
    from azure.storage.blob import ContainerClient

    with ContainerClient.from_connection_string(connection_string, container) as client:
        names = [blob.name for blob in client.list_blobs(name_starts_with="tenure/")
                 if blob.name.endswith("/lock")]
    return names[0] if len(names) == 1 else None


def create_blob(connection_string: str, container: str, blob: str) -> None:
    """An empty page blob for the floors, when tenure's lock blob cannot be found.

    Example::

        create_blob(connection_string, "bench-1234", "floor/lock")
    """
    from azure.storage.blob import ContainerClient

    with ContainerClient.from_connection_string(connection_string, container) as client:
        client.get_blob_client(blob).create_page_blob(0, sequence_number=1)


def requests_per_cycle(run: Runner, cycles: int = 10) -> float:
    """HTTP requests the sync SDK sends per cycle of `run`, counted over `cycles` untimed ones.

    Two cycles run uncounted first. Counts every `requests` adapter send in the process (the
    background threads' too) while `run(cycles)` runs; SDK retries would count as well.

    Example::

        requests_per_cycle(sdk_floor(secret, "bench", "x/lock", increment=True, stack=stack))
    """
    import threading

    from requests.adapters import HTTPAdapter

    original = HTTPAdapter.send
    sent = [0]
    mutex = threading.Lock()

    def counting_send(self: HTTPAdapter, *args: object, **kwargs: object) -> object:
        with mutex:
            sent[0] += 1
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    run(2)  # not counted: a first cycle may create the container or the blob
    HTTPAdapter.send = counting_send  # type: ignore[assignment,method-assign]
    try:
        run(cycles)
    finally:
        HTTPAdapter.send = original  # type: ignore[method-assign]
    return sent[0] / cycles
