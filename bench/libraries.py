"""One adapter per lock library, so every multi-process benchmark drives tenure and the peers
through the same two calls: `lock.acquire(timeout) -> bool` and `lock.release()`.

`open_library` opens one client (store, Redis client, tooz coordinator, Azure container) and
makes locks on it; each library waits its own default way (tenure's backoff and notifications,
redis-py's 0.1 s polling, tooz's server-side waits...). Where a library's blocking form has no
timeout (tooz's `blocking=True`), `timeout` is ignored and the caller bounds the wait.

Libraries: "tenure", "filelock", "portalocker-file", "portalocker-redis", "redis-py",
"python-redis-lock", "pottery", "tooz", "azure-sdk"; two server floors, no library at all:
"pg-advisory-lock" (a blocking `pg_advisory_lock` on one psycopg connection), "get-lock"
(a blocking `GET_LOCK` on one PyMySQL connection), the servers' own lock waits; "flock" (a
blocking `flock` on a file per name: the kernel's own lock wait, the floor of a hand-off
between the processes of one host), "redis-blpop" (SET NX, a waiter's BLPOP with a SET NX
pipelined behind it, a release's DEL + LPUSH: a notified Redis hand-off, bare); and two floors
of a hand-off on a lease row, the least a lease table can do per hand-off (no expiry check
beyond the row's, no fencing, no timeouts): "pg-notify-handover" (tenure's PostgreSQL design
bare: the release hands the row to the first queued waiter and NOTIFYs that waiter alone) and
"get-lock-bell" (a MySQL lease row whose holder keeps a `GET_LOCK` as a doorbell; a waiter's
`GET_LOCK` and its try go in one round trip, the release frees the row and then the doorbell).
The fair floors (`open_ring`, RINGS) are no lock at all: the contending processes sit in a ring
and pass one token on, each to the next, which is the order a FIFO queue serves a crowd in when
every process asks again at once: "ring-pipe" through FIFOs, "ring-flock" the same with a
`flock` taken and freed around each hold, "ring-redis" by `PUBLISH` to the next one's channel.

Example::

    library = open_library("redis-py", "redis://127.0.0.1:6399/0", ttl=2.0)
    lock = library.lock("jobs")
    if lock.acquire(timeout=5.0):
        lock.release()
    library.close()
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

AZURE_POLL_SECONDS = 0.25  # the bare SDK has no waiting: the adapter retries a refused lease


class PeerLock(Protocol):
    """One lock of one library."""

    def acquire(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds (the library's way); False when it gave up."""

    def release(self) -> None:
        """Free the lock."""


@dataclass
class Row:
    """One row of a benchmark's table: its `label`, and the library (one of open_library's)
    it runs on the store at `url`.

    Example::

        Row("redis-py `Lock` (polls every 0.1 s)", "redis-py", "redis://127.0.0.1:6379/0")
    """

    label: str
    library: str
    url: str


@dataclass
class Library:
    """An opened library: `lock(name)` makes a lock on its one client, `close()` closes it.

    Example::

        library = open_library("tenure", "memory://", ttl=2.0)
    """

    lock: Callable[[str], PeerLock]
    close: Callable[[], None]


class _Calls:
    """A PeerLock from an acquire function (taking the timeout) and a release function."""

    def __init__(self, acquire: Callable[[float], Any], release: Callable[[], Any]) -> None:
        self._acquire, self._release = acquire, release

    def acquire(self, timeout: float) -> bool:
        return self._acquire(timeout) is not False

    def release(self) -> None:
        self._release()


def _by_name(acquire: Callable[[str, float], Any], release: Callable[[str], Any]
             ) -> Callable[[str], PeerLock]:
    """`Library.lock` from an acquire function (taking the name and the timeout) and a release
    function (taking the name)."""
    return lambda name: _Calls(lambda timeout: acquire(name, timeout), lambda: release(name))


def open_library(library: str, url: str, ttl: float, options: dict[str, Any] | None = None,
                 connect: dict[str, Any] | None = None) -> Library:
    """Open `library` on `url`; its locks expire after `ttl` seconds where the library has an
    expiry. `options` go to each lock (tenure: `store.lock`; tooz: `acquire`), `connect` to the
    client (tenure: `tenure.connect`; tooz: {"start_heart": True}; azure-sdk: the connection
    string and container).

    Example::

        library = open_library("filelock", "file:///tmp/locks", ttl=2.0)
    """
    options, connect = dict(options or {}), dict(connect or {})
    if library == "tenure":
        return _tenure(url, ttl, options, connect)
    if library in ("filelock", "portalocker-file"):
        return _file(library, url)
    if library == "flock":
        return _flock(url)
    if library == "redis-blpop":
        return _redis_blpop(url)
    if library == "tooz":
        return _tooz(url, options, connect)
    if library == "azure-sdk":
        return _azure(ttl, connect)
    if library in ("pg-advisory-lock", "get-lock"):
        return _server_lock(library, url)
    if library == "pg-notify-handover":
        return _notify_handover(url)
    if library == "get-lock-bell":
        return _get_lock_bell(url)
    return _redis(library, url, ttl, options)


def _tenure(url: str, ttl: float, options: dict[str, Any], connect: dict[str, Any]) -> Library:
    import tenure

    store = tenure.connect(url, **connect)

    def lock(name: str) -> PeerLock:
        one = store.lock(name, ttl=ttl, **options)
        held: list[Any] = []

        def acquire(timeout: float) -> bool:
            try:
                held.append(one.acquire(timeout=timeout))
            except tenure.LockTimeout:
                return False
            return True

        return _Calls(acquire, lambda: held.pop().release())

    return Library(lock, store.close)


def _file(library: str, url: str) -> Library:
    directory = Path(urlsplit(url).path)
    directory.mkdir(parents=True, exist_ok=True)

    def lock(name: str) -> PeerLock:
        path = str(directory / f"{name}.lock")
        if library == "filelock":
            import filelock

            peer = filelock.FileLock(path)

            def acquire(timeout: float) -> bool:
                try:
                    peer.acquire(timeout=timeout)
                except filelock.Timeout:
                    return False
                return True

            return _Calls(acquire, peer.release)
        import portalocker

        portalock = portalocker.Lock(path, fail_when_locked=False)

        def take(timeout: float) -> bool:
            try:
                portalock.acquire(timeout=timeout)
            except portalocker.LockException:
                return False
            return True

        return _Calls(take, portalock.release)

    return Library(lock, lambda: None)


def _flock(url: str) -> Library:
    """The kernel's own blocking `flock` on a file per name in the directory of `url`: the
    waiter sleeps in the kernel, which wakes it at the unlock (no expiry, no fencing, no
    timeout: the caller bounds the wait)."""
    directory = Path(urlsplit(url).path)
    directory.mkdir(parents=True, exist_ok=True)
    held: dict[str, int] = {}

    def take(name: str, timeout: float) -> bool:
        fd = os.open(directory / f"{name}.flock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held[name] = fd
        return True

    def give(name: str) -> None:
        fd = held.pop(name)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    return Library(_by_name(take, give), lambda: None)


def _redis_blpop(url: str) -> Library:
    """The least a notified Redis hand-off does: a key taken with SET NX; a waiter blocks in
    BLPOP on the key's signal list with a SET NX pipelined behind it (the server runs it as
    the BLPOP returns, on the same connection), and the release deletes the key and pushes
    one signal. No expiry, no fencing, no timeout (the caller bounds the wait); a signal
    pushed while nobody waits only makes the next waiter's BLPOP return at once."""
    import redis

    client = redis.Redis.from_url(url)

    def take(name: str, timeout: float) -> bool:
        if client.set(name, b"1", nx=True):
            return True
        while True:
            pipe = client.pipeline(transaction=False)
            pipe.blpop([f"{name}:signal"], timeout=0)
            pipe.set(name, b"1", nx=True)
            if pipe.execute()[1]:
                return True

    def give(name: str) -> None:
        pipe = client.pipeline(transaction=False)
        pipe.delete(name)
        pipe.lpush(f"{name}:signal", b"1")
        pipe.execute()

    return Library(_by_name(take, give), client.close)


def _redis(library: str, url: str, ttl: float, options: dict[str, Any]) -> Library:
    import redis

    client = redis.Redis.from_url(url)

    def lock(name: str) -> PeerLock:
        if library == "redis-py":
            peer = client.lock(name, timeout=ttl, **options)
            return _Calls(lambda timeout: peer.acquire(blocking_timeout=timeout), peer.release)
        if library == "python-redis-lock":
            import redis_lock

            python_redis_lock = redis_lock.Lock(client, name, expire=max(1, round(ttl)),
                                                **options)
            # its timeout may not exceed expire: wait its default way (BLPOP up to expire)
            return _Calls(lambda timeout: python_redis_lock.acquire(), python_redis_lock.release)
        if library == "pottery":
            from pottery import Redlock

            redlock = Redlock(key=name, masters={client}, auto_release_time=ttl, **options)
            return _Calls(lambda timeout: redlock.acquire(timeout=timeout), redlock.release)
        if library == "portalocker-redis":
            import portalocker

            portalock = portalocker.RedisLock(name, connection=client, **options)
            return _Calls(lambda timeout: portalock.acquire(timeout=timeout), portalock.release)
        raise ValueError(f"unknown library {library!r}")

    return Library(lock, client.close)


def _tooz(url: str, options: dict[str, Any], connect: dict[str, Any]) -> Library:
    import warnings

    from tooz import coordination

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # tooz deprecates its SQL drivers
        coordinator = coordination.get_coordinator(url, f"m{os.getpid()}-{id(url)}".encode())
    coordinator.start(start_heart=bool(connect.get("start_heart")))
    waiting = options or {"blocking": True}  # tooz's default: wait forever, its own way

    def lock(name: str) -> PeerLock:
        peer = coordinator.get_lock(name.encode())
        return _Calls(lambda timeout: peer.acquire(**waiting), peer.release)

    return Library(lock, coordinator.stop)


def psycopg_connection(url: str) -> Any:
    """A psycopg connection like tenure's: autocommit, the same startup options.

    Example::

        connection = psycopg_connection("postgresql://postgres@127.0.0.1:5433/postgres")
    """
    import psycopg

    return psycopg.connect(url, autocommit=True,
                           options="-c statement_timeout=5000 -c synchronous_commit=on")


def pymysql_connection(url: str, client_flag: int = 0) -> Any:
    """A PyMySQL connection like tenure's: autocommit, utf8mb4, TCP to the URL's host;
    `client_flag` adds capabilities (e.g. CLIENT.MULTI_STATEMENTS).

    Example::

        connection = pymysql_connection("mysql://root@127.0.0.1:3307/tenure")
    """
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(host=parts.hostname, port=parts.port or 3306, user=parts.username,
                           password=parts.password or "", database=parts.path.lstrip("/"),
                           autocommit=True, charset="utf8mb4", client_flag=client_flag)


def _server_lock(library: str, url: str) -> Library:
    """The server's own blocking lock wait, with nothing around it: the floor of a hand-off on
    that server (no expiry, no fencing; the lock ends with its connection)."""
    if library == "pg-advisory-lock":
        connection = psycopg_connection(url)

        def take(name: str, timeout: float) -> bool:  # waits for as long as it takes
            # hashtext: 32 bits of the name, enough for a benchmark's few names
            connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
            return True

        def give(name: str) -> None:
            connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
    else:
        connection = pymysql_connection(url)

        def take(name: str, timeout: float) -> bool:
            with connection.cursor() as cursor:
                cursor.execute("SELECT GET_LOCK(%s, %s)", (name, timeout))
                return bool(cursor.fetchone()[0])

        def give(name: str) -> None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))

    return Library(_by_name(take, give), connection.close)


def _notify_handover(url: str) -> Library:
    """A bare lease row handed over by NOTIFY: one statement grants the row when it is free,
    else queues this process; the release's one statement hands the row to the first queued
    process and NOTIFYs its own channel. The waiter reads its listener in its own thread (no
    thread hop), and the notice itself says the row is its own: no try after the wake."""
    connection, listener = psycopg_connection(url), psycopg_connection(url)
    me = os.getpid()
    with connection.transaction():  # the processes start together: one creates the table
        connection.execute("SELECT pg_advisory_xact_lock(42)")
        connection.execute("CREATE TABLE IF NOT EXISTS bench_handover (name text PRIMARY KEY, "
                           "holder int NOT NULL, queue int[] NOT NULL)")
    listener.execute(f"LISTEN bench_handover_{me}")
    notices = listener.notifies()
    take = ("INSERT INTO bench_handover AS l VALUES (%(name)s, %(me)s, '{}') "
            "ON CONFLICT (name) DO UPDATE SET "
            "holder = CASE WHEN l.holder = 0 THEN %(me)s ELSE l.holder END, "
            "queue = CASE WHEN l.holder = 0 THEN l.queue ELSE l.queue || %(me)s END "
            "RETURNING l.holder = %(me)s")
    give = ("UPDATE bench_handover SET holder = coalesce(queue[1], 0), queue = queue[2:] "
            "WHERE name = %(name)s AND holder = %(me)s "
            "RETURNING CASE WHEN holder <> 0 THEN pg_notify('bench_handover_' || holder, '') END")

    def acquire(name: str, timeout: float) -> bool:  # queued: waits for as long as it takes
        row = connection.execute(take, {"name": name, "me": me}).fetchone()
        if not row[0]:
            next(notices)
        return True

    def release(name: str) -> None:
        connection.execute(give, {"name": name, "me": me})

    def close() -> None:
        listener.close()
        connection.close()

    return Library(_by_name(acquire, release), close)


def _get_lock_bell(url: str) -> Library:
    """A bare MySQL lease row with a doorbell: the holder's connection keeps `GET_LOCK(name)`
    while it holds the row; a waiter's `GET_LOCK` and its try of the row go in one round trip
    (the server runs the try as soon as the lock is granted), and the release frees the row and
    then the lock in one round trip."""
    from pymysql.constants import CLIENT

    connection = pymysql_connection(url, client_flag=CLIENT.MULTI_STATEMENTS)
    me = os.getpid()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_bell (name VARBINARY(255) PRIMARY KEY, "
                       "holder BIGINT NOT NULL) ENGINE=InnoDB")

    def acquire(name: str, timeout: float) -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, %s); INSERT INTO bench_bell VALUES (%s, %s) "
                           "ON DUPLICATE KEY UPDATE holder = IF(holder = 0, VALUES(holder), "
                           "holder)", (name, timeout, name, me))
            granted = cursor.fetchone()[0]
            cursor.nextset()
            if not granted:
                raise RuntimeError(f"GET_LOCK gave up after {timeout} s")
            if cursor.rowcount == 0:
                raise RuntimeError("the doorbell was granted but the row was still held")
        return True

    def release(name: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE bench_bell SET holder = 0 WHERE name = %s AND holder = %s; "
                           "DO RELEASE_LOCK(%s)", (name, me, name))
            while cursor.nextset():
                pass

    return Library(_by_name(acquire, release), connection.close)


def _azure(ttl: float, connect: dict[str, Any]) -> Library:
    from azure.core.exceptions import HttpResponseError, ResourceExistsError
    from azure.storage.blob import BlobLeaseClient, ContainerClient

    client = ContainerClient.from_connection_string(connect["connection_string"],
                                                    connect["container"])
    if not client.exists():
        with contextlib.suppress(ResourceExistsError):  # another process created it first
            client.create_container()
    seconds = int(ttl)

    def lock(name: str) -> PeerLock:
        blob = client.get_blob_client(f"sdk/{name}")
        try:
            blob.upload_blob(b"", overwrite=False)
        except HttpResponseError as exc:
            if exc.status_code not in (409, 412):  # exists already, or leased by another
                raise
        held: list[Any] = []

        def acquire(timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            while True:
                lease = BlobLeaseClient(blob)
                try:
                    lease.acquire(lease_duration=seconds)
                except HttpResponseError as exc:
                    if exc.status_code != 409:  # 409: leased by someone else
                        raise
                    if time.monotonic() + AZURE_POLL_SECONDS > deadline:
                        return False
                    time.sleep(AZURE_POLL_SECONDS)
                    continue
                held.append(lease)
                return True

        return _Calls(acquire, lambda: held.pop().release())

    return Library(lock, client.close)


RINGS = ("ring-pipe", "ring-flock", "ring-redis")  # the fair floors: a token passed in a ring
_TOKEN, _QUIT = b"t", b"q"


@dataclass
class Seat:
    """One process's place in a ring of `processes` (see `open_ring`): its `index` (0 starts
    with the token) and the `directory` the ring's FIFOs and marks live in, shared by all.

    Example::

        Seat(0, 8, Path("/tmp/ring"))
    """

    index: int
    processes: int
    directory: Path

    def done(self, index: int) -> Path:
        """The mark a process leaves once it stopped asking (it then only passes the token on)."""
        return self.directory / f"ring-done-{index}"


def open_ring(library: str, url: str, seat: Seat) -> Library:
    """A fair floor (one of RINGS): `lock(name).acquire` waits until the token arrives from
    the previous process of the ring, `release` passes it to the next; nothing else (no lock
    table, no expiry, no fencing, no timeout: `timeout` is ignored). Under the contended loop,
    where every process asks again right after its release, this is the hand-off order of any
    first-come-first-served queue, done with one wake-up per hand-off and nothing more.
    "ring-pipe": the token is a byte in the next process's FIFO; "ring-flock": the same, and the
    woken process takes a `flock(LOCK_EX | LOCK_NB)` on one file of the ring, freed before it
    rings the next (file://'s mechanism bare: a FIFO doorbell and a kernel lock); "ring-redis":
    the token is a `PUBLISH` to the next process's pub/sub channel on the Redis at `url`.

    `close()` marks the process done, then keeps passing the token on until every process is
    done, so that the others' last acquires still return. Every process of the ring must open
    it before any acquires (the contended harness's warm-up does that: the token goes round
    once).

    Example::

        library = open_ring("ring-pipe", "", Seat(0, 8, Path("/tmp/ring")))
        lock = library.lock("x")
        if lock.acquire(60.0):
            lock.release()
        library.close()
    """
    if library == "ring-redis":
        take, give, finish = _redis_ring(url, seat)
    else:
        take, give, finish = _pipe_ring(seat, library == "ring-flock")

    def close() -> None:
        seat.done(seat.index).touch()
        while True:
            token = take()
            everyone = all(seat.done(index).exists() for index in range(seat.processes))
            if token == _QUIT or everyone:
                give(_QUIT)  # the last one passes "quit" round: each passes it on and leaves
                break
            give(token)
        finish()

    def acquire(timeout: float) -> bool:
        if take() != _TOKEN:
            raise RuntimeError("the ring was told to quit while a process still asked")
        return True

    return Library(lambda name: _Calls(acquire, lambda: give(_TOKEN)), close)


Take = Callable[[], bytes]


def _pipe_ring(seat: Seat, with_flock: bool) -> tuple[Take, Callable[[bytes], None],
                                                        Callable[[], None]]:
    """The ring through FIFOs: each process reads its own and writes the next one's (both
    opened O_RDWR: the open does not wait for the other end, and a write to a process that has
    left does not fail)."""
    import fcntl

    paths = [seat.directory / f"ring-{index}" for index in range(seat.processes)]
    for path in paths:  # every process makes every FIFO: none waits for another to start
        with contextlib.suppress(FileExistsError):
            os.mkfifo(path)
    mine = os.open(paths[seat.index], os.O_RDWR)
    after = os.open(paths[(seat.index + 1) % seat.processes], os.O_RDWR)
    held = os.open(seat.directory / "ring.lock", os.O_RDWR | os.O_CREAT, 0o644) \
        if with_flock else -1
    if seat.index == 0:
        os.write(mine, _TOKEN)

    def take() -> bytes:
        token = os.read(mine, 1)
        if held >= 0 and token == _TOKEN:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # must be free: we have the token
        return token

    def give(token: bytes) -> None:
        if held >= 0 and token == _TOKEN:
            fcntl.flock(held, fcntl.LOCK_UN)
        os.write(after, token)

    def finish() -> None:
        for fd in (mine, after, held):
            if fd >= 0:
                os.close(fd)

    return take, give, finish


def _redis_ring(url: str, seat: Seat) -> tuple[Take, Callable[[bytes], None],
                                               Callable[[], None]]:
    """The ring through Redis pub/sub: each process subscribes to its own channel and
    publishes to the next one's (one `PUBLISH` round trip, then the server pushes the message
    to the subscriber). A message to a channel nobody listens on is lost, so every process
    waits (once, before the first hand-off) until every channel has its subscriber."""
    import redis

    client = redis.Redis.from_url(url)
    channels = [f"bench-ring-{seat.directory.name}-{index}" for index in range(seat.processes)]
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channels[seat.index])
    messages = pubsub.listen()
    deadline = time.monotonic() + 60.0
    while any(count < 1 for _, count in client.pubsub_numsub(*channels)):
        if time.monotonic() > deadline:
            raise RuntimeError("the ring's processes did not all subscribe within 60 s")
        time.sleep(0.005)  # start-up only, before any timing
    if seat.index == 0:
        client.publish(channels[0], _TOKEN)
    after = channels[(seat.index + 1) % seat.processes]

    def take() -> bytes:
        while True:
            message = next(messages)
            if message["type"] == "message":
                return bytes(message["data"])

    def finish() -> None:
        pubsub.close()
        client.close()

    return take, lambda token: client.publish(after, token), finish
