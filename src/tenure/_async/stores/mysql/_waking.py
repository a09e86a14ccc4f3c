"""Waking waiters without notifications (MySQL has no LISTEN/NOTIFY): a waiter sleeps on the
server (SELECT SLEEP, see WAIT) with its next try sent right behind the sleep, and a release
ends the sleep of the first waiter in its name's queue with KILL QUERY (see wake_in), so
that the server runs that try at once. Here: the sleep and the try behind it on the wire, the
wake-up, and the connections that sleep.

Example::

    wait = statements.wait(key, 1, 0.5, queued_at())
    outcome, found = await sleep_then_try(connection, wait, then, 1)
    if outcome is Outcome.TOOK:
        slot, token = found
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from tenure._async import _shim
from tenure._async.stores.mysql._driver import (
    COMMAND,
    ER,
    acquired,
    aiomysql,
    error_code,
    forsake,
)
from tenure._async.stores.mysql._sql import Statements
from tenure._errors import StoreUnavailable
from tenure._types import Grant

# Waits of one name that sleep on the server at once, per store: the others poll with their
# backoff. Each release wakes one sleeper, and a crowd of sleeping statements costs the server
# more than it gains: with 3 processes x 20 tasks on one name, all asleep, the hand-off
# throughput fell to a tenth of what 1 sleeper per process gives.
MOST_ASLEEP = 1
# How long a wait with a try behind it sleeps on the server at least, whatever its backoff
# step (less only when its caller's patience, the store's timeout or the lease's freshness say
# so). A sleep that ends by itself is a try that contends for the row for nothing, and,
# before waiters kept a place in the queue (see queued_at), lost its place: with the
# backoff's full-jitter steps (10 ms and up), 8 processes' waiters had a p99 wait of 61 ms and
# per-process min/max 0.82; sleeping at least 0.5 s, 29 ms and 0.94 (measured here). A sleeper
# that a release misses (the flag race UNFLAG describes) waits at most this long for its try.
LEAST_SLEEP = 0.5
# How long before the end of its caller's patience a sleep on the server ends, so that the try
# sent behind it is answered in time (a loopback round trip is about 0.1 ms), and how late
# that answer may come before the wait is cut off (and what the try took is undone).
TRY_ALLOWANCE = 0.01
# After a release woke a waiter, this store's next try of the name within this many seconds
# does not race it for the lease (see HeadStart).
WAKE_HEAD_START = 0.005


class Outcome(enum.Enum):
    """What became of the try sent behind a sleep on the server.

    Example:
        >>> Outcome.UNKNOWN.value
        'cut off by a kill meant for the sleep'
    """

    NONE_SENT = "a plain wait: no try behind the sleep"
    TOOK = "took a slot"
    BUSY = "every slot was still held"
    UNKNOWN = "cut off by a kill meant for the sleep"


class Tried(NamedTuple):
    """The try sent behind a sleep: its outcome, the grant it took (Outcome.TOOK), its lease
    id (an UNKNOWN one is made again with it, or undone) and the connection it went out on.

    Example:
        >>> Tried(Outcome.BUSY, None, 7, 12).grant is None
        True
    """

    outcome: Outcome
    grant: Grant | None
    lease_id: int
    sent_on: int


async def sleep_then_try(connection: Any, wait: str, then: str | None,
                         limit: int) -> tuple[Outcome, tuple[int, int] | None]:
    """Send the statements of a wait (see WAIT) and, right behind them before any answer,
    an acquire (`then`, if any), and read both answers: the outcome of the acquire, and
    (slot, token) when it took one (see `acquired`).

    When a release ends the sleep with KILL QUERY, the server runs the acquire at once,
    instead of after the wait's answer reached this process and a new query came back: a
    hand-off in about one round trip. Only the wait is killed (MariaDB aborts the whole
    multi-statement with error 1317); the acquire behind it is a query of its own. A kill
    that comes just after the sleep ended reaches the acquire instead: Outcome.UNKNOWN.

    Neither driver sends a query before the answer to the previous one is read (no
    pipelining), so this writes both with their internals, which the asyncio driver and
    PyMySQL share: `_execute_command`, `_read_query_result` and the packet sequence number
    `_next_seq_id`, which restarts at 1 for each query's answer.

    Example::

        outcome, found = await sleep_then_try(connection, wait, acquire, 1)
    """
    await connection._execute_command(COMMAND.COM_QUERY, wait)
    if then is not None:
        await connection._execute_command(COMMAND.COM_QUERY, then)
    try:
        await connection._read_query_result()
        while connection._result.has_next:
            await connection._read_query_result()
    except aiomysql.OperationalError as exc:
        if error_code(exc) != ER.QUERY_INTERRUPTED:  # woken: the rest of the wait is skipped
            raise
    if then is None:
        return Outcome.NONE_SENT, None
    connection._next_seq_id = 1
    try:
        await connection._read_query_result()
    except aiomysql.OperationalError as exc:
        if error_code(exc) != ER.QUERY_INTERRUPTED:
            raise
        return Outcome.UNKNOWN, None
    found = await acquired(connection, limit)
    return (Outcome.BUSY if found is None else Outcome.TOOK), found


async def woke(next_answer: Callable[[], Any]) -> bool:
    """Read the answers to WAKE_NEXT (sent behind a release) with `next_answer` (the
    connection's or the cursor's next-result call): True when its KILL QUERY ended a sleep.

    Example::

        woken = await woke(connection.next_result)
    """
    await next_answer()  # the SET that found the sleeper
    try:
        await next_answer()
    except aiomysql.OperationalError as exc:
        # 1094: no such thread (none slept: KILL QUERY 0, or it is gone); 1095: not ours
        if error_code(exc) not in (ER.NO_SUCH_THREAD, ER.KILL_DENIED_ERROR):
            raise
        return False
    return True


async def wake_in(connection: Any, statements: Statements, key: str) -> bool:
    """End the sleep of the first sleeping waiter of the name of `key` (see SLEEPER), or
    clear the name's waiters' flag when none sleeps (see UNFLAG); True when one was woken.

    Example::

        woken = await connections.call("wake", name, wake_in, statements, key)
    """
    async with connection.cursor() as cursor:
        await cursor.execute(statements.text["sleeper"], (key,))
        [(sleeper,)] = await cursor.fetchall()
        if sleeper is None:
            await cursor.execute(statements.text["unflag"], (key,))
            return False
        try:
            await cursor.execute(f"KILL QUERY {int(sleeper)}")
        except aiomysql.OperationalError as exc:
            # Gone meanwhile (1094: it woke by itself), or another user's (1095)
            if error_code(exc) not in (ER.NO_SUCH_THREAD, ER.KILL_DENIED_ERROR):
                raise
            return False
        return True


async def kill_in(connection: Any, ids: list[int]) -> None:
    """End the connections `ids` (KILL CONNECTION; one gone meanwhile is skipped).

    Example::

        await connections.call("closing", "waits", kill_in, [41, 42])
    """
    async with connection.cursor() as cursor:
        for thread_id in ids:
            try:
                await cursor.execute(f"KILL CONNECTION {int(thread_id)}")
            except aiomysql.OperationalError as exc:
                if error_code(exc) != ER.NO_SUCH_THREAD:  # gone meanwhile
                    raise


def queued_at() -> str:
    """A waiter's place in the queue of its name, written into the tag of each of its sleeps
    (see WAIT) and kept by all the sleeps of one wait: the wall clock in nanoseconds, 20
    digits, so that the releaser wakes the smallest (SLEEPER) by comparing text. The wall
    clock, because waiters on several machines share the queue: their clocks' offsets shift
    their places by as much (a matter of fairness only; which lease is live is the server's
    clock's business).

    Example:
        >>> len(queued_at())
        20
    """
    return f"{time.time_ns():020d}"


class AsyncSleepers:
    """The connections waits sleep on, and who sleeps.

    Kept apart from the lease statements' connections, so that a KILL QUERY that comes after
    its sleep ended can only cut another sleep (or the try behind it) short, never a lease
    statement; not counted in `pool_size` (the most connections lease calls use): one per
    wait that sleeps on the server, at most `pool_size` of them kept idle. `sleeping`: those
    in use by a wait right now, which close() ends.

    Example::

        if not sleepers.crowded(key):
            with sleepers.asleep(key):
                connection = sleepers.take()
    """

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size
        self.idle: list[Any] = []
        self.sleeping: set[Any] = set()
        self._asleep: dict[str, set[object]] = {}  # key -> the waits sleeping on the server

    def crowded(self, key: str) -> bool:
        """Enough waits of the name of `key` sleep on the server already (MOST_ASLEEP)."""
        return len(self._asleep.get(key, ())) >= MOST_ASLEEP

    @contextlib.contextmanager
    def asleep(self, key: str) -> Iterator[None]:
        """Count a wait of the name of `key` as sleeping on the server while the block runs."""
        asleep = self._asleep.setdefault(key, set())
        marker = object()
        asleep.add(marker)
        try:
            yield
        finally:
            asleep.discard(marker)
            if not asleep:
                self._asleep.pop(key, None)

    def take(self) -> Any:
        """An idle sleeper connection, or None (then the wait opens one)."""
        try:
            return self.idle.pop()
        except IndexError:
            return None

    def keep(self, connection: Any) -> bool:
        """Keep `connection` idle for the next wait; False when enough are kept (then the
        caller closes it)."""
        if len(self.idle) >= self.pool_size:
            return False
        self.idle.append(connection)
        return True

    async def end_waits(self, kill: Callable[[list[int]], Any],
                        timeout: float) -> None:
        """End the connections of waits sleeping now with `kill(ids)` (KILL CONNECTION: the
        try sent behind a sleep then never runs, or its undo frees what it took), and wait, up
        to `timeout`, until those waits let go of them."""
        give_up, pause = _shim.monotonic() + timeout, 0.005
        killed: set[int] = set()
        while self.sleeping and _shim.monotonic() < give_up:
            ids = {connection.thread_id() for connection in list(self.sleeping)} - killed
            if ids:
                with contextlib.suppress(StoreUnavailable):
                    await kill(sorted(ids))
                killed |= ids
            await _shim.sleep(pause)  # the waits run meanwhile, in their threads or tasks
            pause = min(pause * 2, 0.05)

    def drain(self) -> list[Any]:
        """The idle connections, taken out (for close)."""
        idle, self.idle = self.idle, []
        return idle

    def start_afresh(self) -> None:
        """In a child after fork(): the parent's connections are let go without a byte on
        them (see `forsake`)."""
        for connection in self.drain():
            forsake(connection)
        self.sleeping, self._asleep = set(), {}


class HeadStart:
    """The names whose waiter a release of this store just woke, and until when that waiter
    goes first: this store's next try of such a name fails at once, without a statement (its
    acquire then waits), and its waits sleep out the rest of the head start even when they
    find the name free, instead of racing the waiter it woke. The woken waiter's try is on
    the server already, but the server may run it after a try sent one round trip later (a
    killed sleep takes a while to end on a busy server): without the head start, a process
    that releases and acquires in a loop took the lease back from its waiter about half the
    time (hand-offs between 8 processes fell from ~185/s to ~100/s, measured); with it on
    the try only, its wait's first sleep (which does not sleep while the name is free) still
    did, 6 to 17 times in 100 hand-offs between 4 processes. It holds no grant: only when the
    head start ends.

    Example:
        >>> head_start = HeadStart()
        >>> head_start.give("00ff")
        >>> head_start.taken_by_woken("00ff"), head_start.taken_by_woken("00ff")
        (True, False)
        >>> head_start.left("11ee")
        0.0
    """

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._untried: set[str] = set()  # no try of the name was skipped since the wake-up

    def give(self, key: str) -> None:
        """A release here woke a waiter of the name of `key`: it goes first for a while."""
        if len(self._until) > 10_000:  # names never tried again here
            self._until.clear()
            self._untried.clear()
        self._until[key] = _shim.monotonic() + WAKE_HEAD_START
        self._untried.add(key)

    def left(self, key: str) -> float:
        """Seconds of the head start of the waiter this store woke for `key` left (0.0:
        none)."""
        until = self._until.get(key)
        if until is None:
            return 0.0
        left = until - _shim.monotonic()
        if left <= 0:
            del self._until[key]
            self._untried.discard(key)
            return 0.0
        return left

    def taken_by_woken(self, key: str) -> bool:
        """True (once) while a waiter this store woke for `key` goes first: skip this try."""
        if key not in self._untried:
            return False
        self._untried.discard(key)
        return self.left(key) > 0

    def start_afresh(self) -> None:
        """In a child after fork(): the parent's wake-ups are the parent's."""
        self._until, self._untried = {}, set()
