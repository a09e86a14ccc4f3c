"""The azblob:// section on Azurite: tenure next to the bare azure-storage-blob SDK's floors.

The floors use the official SDK only, no tenure code: `BlobLeaseClient(blob)` (the SDK's own
uuid4 lease id) acquire + release, optionally with `set_sequence_number("increment")` under the
lease in between: the same requests tenure's azblob store makes, without fencing and with it.
Rows: tenure sync `try_acquire().release()` and `with acquire()` with fencing on, next to the
3-request floor (acquire + increment + release) on the same lock blob; the same with fencing off
next to the 2-request floor (acquire + release), when the store takes `fencing=False`; an async
row next to the async SDK's 3-request floor. HTTP requests per sync cycle are counted too.

Example::

    rows = azblob_cases.cases(server, stack, extras)  # server: servers.start_azurite(...)
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import ExitStack

from cases import (
    LOCK_NAME,
    Case,
    Extras,
    ServerSection,
    async_case,
    kept_names_case,
    tenure_cases,
)
from handoff import Contender
from libraries import AZURE_POLL_SECONDS
from lineup import Entry, footprints, takers
from servers import Server
from timing import Runner, timed_async_cycles, timed_loop

import tenure

TITLE = "azblob:// (Azurite)"
LEASE_SECONDS = 30  # what tenure asks for with its default ttl of 30 s
ASYNC_WARMUP_CYCLES = 5  # per asyncio.run: opens the aiohttp session and its connection
SCALE = 2.0  # azblob rounds are this many times --seconds (a cycle is ~10 ms)
GOAL_VS_FLOOR = 1.1  # bare-SDK floor cycles/s / tenure cycles/s at most this
FENCING_ON_GOAL = (f"azblob fencing on: SDK acquire + increment + release ÷ tenure "
                   f"<= {GOAL_VS_FLOOR:g}")
FENCING_OFF_GOAL = f"azblob fencing off: SDK acquire + release ÷ tenure <= {GOAL_VS_FLOOR:g}"
MIN_TTL = 15.0  # the service's shortest blob lease
MEMORY_HOLD = 5.5  # past tenure's first renewal (ttl/3 = 5 s)
MEMORY_LEASES = 200  # scaled to 1,000: taking a lease costs ~3 requests of ~10 ms on Azurite


def cases(server: Server | str, stack: ExitStack, extras: Extras) -> list[Case]:
    """The azblob rows on a fresh container of `server`; none (and a note) when Azurite did not
    start (`server` is then the reason) or does not serve tenure.

    Example::

        rows = cases(servers.start_azurite(Path(tmp) / "azurite", stack), stack, extras)
    """
    if isinstance(server, Server):
        extras.facts += server.facts
        try:
            return _rows(server.details["connection_string"], stack, extras)
        except Exception as exc:  # the emulator started but does not serve tenure: say so
            why = f"setting up failed ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
    else:
        why = server.rstrip(".")
    extras.note(TITLE, f"**Not measured**: {why}.")
    extras.unmeasured(FENCING_ON_GOAL, TITLE, why)
    extras.unmeasured(FENCING_OFF_GOAL, TITLE, why)
    return []


def section(server: Server | str) -> ServerSection | None:
    """The multi-process benchmarks on Azurite (a container of their own): the contended
    hand-off, takeover after a SIGKILL and a clean release (ttl 15 s, the service's minimum),
    memory per 1,000 held leases; tenure next to the bare SDK's lease calls. None when Azurite
    did not start (`cases` says why).

    Example::

        more = section(servers.start_azurite(Path(tmp) / "azurite", stack))
    """
    if not isinstance(server, Server):
        return None
    secret = server.details["connection_string"]
    container = container_name()
    url = f"azblob:///{container}"
    entries = [
        Entry("tenure (a try every 0.19-0.25 s; after a refusal, behind the waiters)",
              "tenure", url, connect={"connection_string": secret}, tenure=True),
        Entry(f"bare SDK: `BlobLeaseClient.acquire`, retried every {AZURE_POLL_SECONDS:g} s "
              "while refused (409)", "azure-sdk", url,
              connect={"connection_string": secret, "container": container}),
    ]
    # issue 20: tenure's waiters no less fair than the SDK's fixed-interval retry
    contended = [Contender(entry.label, entry.library, entry.url, connect=entry.connect,
                           as_fair=entry.tenure) for entry in entries]
    memory = footprints(entries, MIN_TTL, MEMORY_HOLD)
    for run in memory:
        run.leases = MEMORY_LEASES
    return ServerSection(TITLE, url, [], contended, takers=takers(entries, MIN_TTL),
                         footprints=memory)


def _rows(secret: str, stack: ExitStack, extras: Extras) -> list[Case]:
    """cases' rows, on a running emulator reached with the connection string `secret`."""
    container = container_name()
    url = f"azblob:///{container}"
    store = tenure.connect(url, connection_string=secret)
    stack.callback(store.close)
    lock = store.lock(LOCK_NAME)
    lock.try_acquire().release()  # type: ignore[union-attr]  # creates the container and blob
    blob = lock_blob(secret, container)
    if blob is None:
        blob = "floor/lock"
        create_blob(secret, container, blob)
        note = (f"The floors use an empty page blob of their own, `{blob}` "
                "(tenure's lock blob was not found by listing the container).")
    else:
        note = f"The floors reuse tenure's lock blob `{blob}`."

    def floor(label: str, increment: bool, short: str) -> Case:
        run = sdk_floor(secret, container, blob, increment=increment, stack=stack)
        return Case(TITLE, "floor", label, run, short=short)

    three = floor('floor: bare SDK `BlobLeaseClient` acquire + `set_sequence_number'
                  '("increment")` + release (3 requests)', True, "3-request floor")
    two = floor("floor: bare SDK `BlobLeaseClient` acquire + release (2 requests)", False,
                "2-request floor")
    on_try, on_with = tenure_cases(TITLE, lock, ", fencing on")
    for row in (on_try, on_with):
        row.floor, row.also = three, [two]
        row.goal, row.goal_limit = FENCING_ON_GOAL, GOAL_VS_FLOOR
    rows = [on_try, three, on_with,
            kept_names_case(TITLE, on_try, url, stack, connection_string=secret)]
    try:
        unfenced = tenure.connect(url, connection_string=secret, fencing=False)
    except (TypeError, ValueError) as exc:  # InvalidArgument: the store has no such option
        why = f"the azblob store has no `fencing=False` option ({exc})"
        extras.unmeasured(FENCING_OFF_GOAL, TITLE, why)
        note += f" Fencing off is **not measured**: {why}."
        rows.append(two)
    else:
        stack.callback(unfenced.close)
        off_try, off_with = tenure_cases(TITLE, unfenced.lock(LOCK_NAME + "-unfenced"),
                                         ", fencing off (`fencing=False`)")
        for row in (off_try, off_with):
            row.floor, row.goal, row.goal_limit = two, FENCING_OFF_GOAL, GOAL_VS_FLOOR
        rows += [off_try, two, off_with]
    counted = "\n".join(f"- {case.label}: {requests_per_cycle(case.run):g}" for case in rows)
    extras.note(TITLE, f"{note}\n\nHTTP requests per sync cycle, counted at the `requests` "
                "adapter over 10 untimed cycles before the warm-up (background threads "
                f"included):\n\n{counted}")
    aio_floor = Case(TITLE, "floor", "floor: async SDK acquire + increment + release "
                     "(3 requests, aio)", async_sdk_floor(secret, container, blob, increment=True),
                     short="async 3-request floor")
    aio_row = async_case(TITLE, url, {"connection_string": secret}, warmup=ASYNC_WARMUP_CYCLES,
                         suffix=", fencing on")
    aio_row.floor = aio_floor
    rows += [aio_row, aio_floor]
    for case in rows:
        case.scale, case.fragile = SCALE, True
    return rows


def container_name() -> str:
    """A fresh container name for this run (Azure: 3 to 63 of [a-z0-9-]).

    Example:
        >>> len(container_name())
        24
    """
    return "bench-" + uuid.uuid4().hex[:18]


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

            return await timed_async_cycles(cycle, count, ASYNC_WARMUP_CYCLES)

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
