"""AsyncMySQLStore: the operations of the mysql:// store, and its side of the core's one
waiting path (wait_and_acquire). See the package's docstring for the design.

Example::

    backend = AsyncMySQLStore("mysql://app:secret@db/locks?table=app_leases", timeout=2)
    store = tenure.aio.connect(backend)
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from tenure import _forks
from tenure._async import _shim
from tenure._async.stores._protocol import (
    AsyncBackend,
    AsyncRecordKeeper,
    closed_store,
    record_bytes,
)
from tenure._async.stores.mysql._connections import AsyncConnections
from tenure._async.stores.mysql._driver import (
    CONFLICTS,
    DRIVER_ERRORS,
    acquired,
    deadline,
    error_code,
)
from tenure._async.stores.mysql._forgetting import AsyncForgetting, Forgetful
from tenure._async.stores.mysql._options import Settings
from tenure._async.stores.mysql._sql import FIRST, HAS_INDEX, Statements
from tenure._async.stores.mysql._undo import AsyncUndos, Undo
from tenure._async.stores.mysql._waking import (
    LEAST_SLEEP,
    TRY_ALLOWANCE,
    AsyncSleepers,
    HeadStart,
    Outcome,
    Tried,
    kill_in,
    queued_at,
    sleep_then_try,
    wake_in,
    woke,
)
from tenure._errors import InvalidArgument, StoreUnavailable
from tenure._names import name_digest
from tenure._timing import fresh_for
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason

log = logging.getLogger("tenure")


class _Attempt(NamedTuple):
    """What an acquire asks for (a wait sends it behind its sleep)."""

    holder: str
    ttl: float
    limit: int


def number_of(grant: Grant) -> int:
    """The lease id of a grant of this store as the integer stored in the table (-1, which no
    row holds, for an id this store did not make).

    Example:
        >>> number_of(Grant("jobs", 0, "me", "42", 1, "jobs")), number_of(
        ...     Grant("jobs", 0, "me", "other", 1, "jobs"))
        (42, -1)
    """
    return int(grant.lease_id) if grant.lease_id.isdecimal() else -1


class AsyncMySQLStore(AsyncBackend, AsyncRecordKeeper):
    """Leases in a table of a MySQL 8 or MariaDB 10.5+ database. Needs tenure[mysql].

    URL: `mysql://[user[:password]@]host[:port]/database` or `mariadb://...`; the database must
    exist. Options, in the URL's query or as keywords (keywords win): `table` (default
    "tenure_leases"), `timeout` (seconds for connecting and for every call, default 5),
    `pool_size` (the most connections opened for lease calls, default 10; waits have their
    own, at most as many kept idle), `unix_socket` (a socket path, used instead of host and
    port), `mode` ("table", the default; "getlock" is AsyncMySQLGetLockStore's), `retain`
    (seconds the rows of a name nobody holds are kept, default 3600, 0 to inf: see `prune`;
    with 0 a release deletes them, otherwise releases sweep the names idle that long, at most
    SWEEP_BATCH of them once per min(retain / 4, SWEEP_EVERY) seconds).

    Example::

        backend = AsyncMySQLStore("mysql://app:secret@db/locks?table=app_leases", timeout=2)
        store = tenure.aio.connect(backend)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, url: str, **options: Any) -> None:
        settings = Settings.parse(url, options)
        if settings.mode != "table":
            raise InvalidArgument(f"mode={settings.mode} is AsyncMySQLGetLockStore's; "
                                  "tenure.connect(url) picks the store of the URL's mode")
        self.url, self.table, self.database = settings.url, settings.table, settings.database
        self.timeout, self.pool_size = settings.timeout, settings.pool_size
        self._statements = Statements(settings.table)
        self._connections = AsyncConnections(settings, self._statements)
        self._sleepers = AsyncSleepers(settings.pool_size)
        self._undos = AsyncUndos(self._connections)
        self._contended: set[str] = set()  # keys whose releases here wake the next sleeper
        self._head_start = HeadStart()
        self._closing = False  # close() began: waits end, and what they take is freed
        # reading: a missing table is no names to forget (and a prune makes no table)
        self._forgetting = AsyncForgetting(settings.url, settings.retain, functools.partial(
            self._connections.call, reading=True), Forgetful(
            settings.table, self._statements.text["candidates"], 2, FIRST,
            self._statements.forget, self._statements.count_idle, self._statements.drop,
            HAS_INDEX, (self._statements.text["add index"],)))
        _forks.in_child_after_fork(self, AsyncMySQLStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a child after fork(): the parent's connections and what they took stay the
        parent's; the child opens its own on first use."""
        self._connections.start_afresh()
        self._sleepers.start_afresh()
        self._undos.start_afresh()
        self._contended = set()
        self._head_start.start_afresh()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} table={self.table}>"

    # -- acquire, renew, release -----------------------------------------------------------

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        key = name_digest(name)
        if self._head_start.taken_by_woken(key):
            return None  # the waiter a release here just woke goes first
        return await self._try(name, key, _Attempt(holder, ttl, limit))

    async def _try(self, name: str, key: str, attempt: _Attempt,
                   lease_id: int | None = None) -> Grant | None:
        """One acquire (a new lease id unless given: a retry of a try whose outcome is unknown
        takes back what that try took); a try cut short is undone in the background."""
        parameters = self._parameters(key, name, attempt, lease_id)
        sent_at = _shim.monotonic()
        try:
            found: tuple[int, int] | None = await self._connections.call(
                "acquire", name, self._acquire_in, parameters)
        except BaseException:
            if "sent_on" in parameters:  # the server may run it, or ran it: undo in background
                self._undos.later(Undo(name, key, parameters["lease_id"], parameters["sent_on"]))
            raise
        if found is None:
            self._note_contended(key)
            return None
        slot, token = found
        return Grant(name, slot, attempt.holder, str(parameters["lease_id"]), token, name,
                     parameters.get("sent_at", sent_at))

    @staticmethod
    def _parameters(key: str, name: str, attempt: _Attempt,
                    lease_id: int | None = None) -> dict[str, Any]:
        """The parameters of an acquire statement, with a new lease id unless given: random 62
        bits, never 0 (a freed row's). An integer compares faster than text, and a stale
        holder's id matches a later grant of the same row with odds of 2**-62."""
        return {"key": key, "name": name, "holder": attempt.holder,
                "lease_id": lease_id or secrets.randbits(62) + 1,
                "ttl_us": round(attempt.ttl * 1_000_000), "limit": attempt.limit}

    def _acquire_statement(self, parameters: dict[str, Any]) -> str:
        return self._statements.acquire(parameters, self._connections.prepared)

    async def _acquire_in(self, connection: Any,
                          parameters: dict[str, Any]) -> tuple[int, int] | None:
        statement = self._acquire_statement(parameters)
        parameters["sent_on"] = connection.thread_id()  # from here on, undone if cut short
        # The lease counts from this statement, not from connecting or creating the table.
        parameters["sent_at"] = _shim.monotonic()
        await connection.query(statement)
        found = await acquired(connection, parameters["limit"])
        if self._closing:  # close() began meanwhile: nobody could release this grant later
            if found is not None:
                await self._release_in(connection, parameters["key"], found[0],
                                       parameters["lease_id"])
            del parameters["sent_on"]  # answered, and freed: nothing to undo
            raise closed_store(self.url, "acquire", parameters["name"])
        return found

    async def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        label = grants[0].name if len(grants) == 1 else f"{len(grants)} leases"
        results: list[Grant | LostReason] = await self._connections.call(
            "renewal", label, self._renew_in, grants, round(ttl * 1_000_000))
        return results

    async def _renew_in(self, connection: Any, grants: Sequence[Grant],
                        ttl_us: int) -> list[Grant | LostReason]:
        async with connection.cursor() as cursor:
            arguments: list[Any] = [ttl_us]
            for grant in grants:
                arguments += (name_digest(grant.name), grant.slot, number_of(grant))
            renewed = await cursor.execute(self._statements.renew(len(grants)), arguments)
            if renewed == len(grants):
                return list(grants)
            # Some were not renewed (or renewed to the same µs, which counts as no change):
            # one more query tells which, and why.
            arguments = []
            for grant in grants:
                arguments += (name_digest(grant.name), grant.slot)
            await cursor.execute(self._statements.why_lost(len(grants)), arguments)
            found = {(bytes(name).decode(), slot): (lease_id, live)
                     for name, slot, lease_id, live in await cursor.fetchall()}
        results: list[Grant | LostReason] = []
        for grant in grants:
            lease_id, live = found.get((grant.name, grant.slot), (0, 0))
            if lease_id == number_of(grant):
                results.append(grant if live else LostReason.EXPIRED)
            else:
                results.append(LostReason.BROKEN if lease_id == 0 else LostReason.TAKEN)
        return results

    async def release(self, grant: Grant) -> bool:
        key = name_digest(grant.name)
        contended = key in self._contended
        released: int
        flagged: bool
        woken: bool
        released, flagged, woken = await self._connections.call(
            "release", grant.name, self._release_in, key, grant.slot, number_of(grant),
            contended)
        if flagged:  # someone waits for the name, here or elsewhere
            self._note_contended(key)
            if not woken:  # the KILL was not sent with the release, or nobody slept
                woken = await self._wake(grant.name, key)
            if woken:
                self._head_start.give(key)
        elif contended:
            self._contended.discard(key)
        if released and not flagged:
            await self._forgetting.after_release(key)
        return bool(released)

    async def _release_in(self, connection: Any, key: str, slot: int, lease_id: int,
                          wake: bool = False) -> tuple[int, bool, bool]:
        """Release (slot >= 0) or break (slot -1): (rows changed, whether slot 0's waiters'
        flag was set, whether a sleeper was woken). With `wake`, the KILL QUERY that wakes
        the first sleeper in the queue goes in the same round trip (see WAKE_NEXT)."""
        text = self._statements.text
        then = text["wake next"] % (f"'{key}'",) if wake else ""
        if slot == 0:
            changed = await connection.query(self._statements.cycle(
                "release", {"key": f"'{key}'", "lease_id": str(lease_id)},
                self._connections.prepared) + then)
            flagged = bool(connection.insert_id())
            return changed, flagged, wake and await woke(connection.next_result)
        async with connection.cursor() as cursor:  # (its close would read the KILL's answer)
            if slot < 0:
                changed = await cursor.execute(text["break"], (key,))
            else:
                changed = await cursor.execute(text["release slot"] + then,
                                               (key, slot, lease_id, key))
                await cursor.nextset()  # the read of slot 0's flag: its LAST_INSERT_ID
            return changed, bool(cursor.lastrowid), wake and await woke(cursor.nextset)

    def _note_contended(self, key: str) -> None:
        """Someone waits for this name: its releases here send the wake-up along (WAKE_NEXT)."""
        if len(self._contended) > 10_000:  # names never released here
            self._contended.clear()
        self._contended.add(key)

    async def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names idle for `idle` seconds (their rows; a record stays, see
        _sql.CANDIDATES), or with `dry_run` only count them; the number of names. Runs in
        transactions of SWEEP_BATCH names, each atomic against the grants of its names.

        Example::

            forgotten = await backend.prune(idle=3600.0)
        """
        return await self._forgetting.prune(idle, dry_run)

    async def break_lease(self, name: str) -> int:
        key = name_digest(name)
        broken: int
        flagged: bool
        broken, flagged, _ = await self._connections.call("break", name, self._release_in, key,
                                                          -1, 0)
        if flagged:
            await self._wake(name, key)
        return int(broken)

    async def _wake(self, name: str, key: str) -> bool:
        """End the sleep of the first sleeping waiter in this name's queue (see wake_in); True
        when one was woken. Best effort: a waiter not woken wakes at the end of its sleep, so
        errors are only logged."""
        try:
            woken: bool = await self._connections.call("wake", name, wake_in, self._statements,
                                                       key)
            return woken
        except StoreUnavailable as exc:
            log.debug("tenure: %s: waking the waiters of %r failed: %s", self.url, name, exc)
            return False

    # -- listing and records -----------------------------------------------------------------

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        await self._forgetting.ensure_index()
        encoded = prefix.encode()
        rows: list[tuple[Any, ...]] = await self._connections.call(
            "listing", prefix, self._query, "list", (len(encoded), encoded.hex()),
            reading=True)
        now = datetime.now(timezone.utc)
        return [
            LeaseInfo(bytes(name).decode(), bytes(holder).decode(), int(token),
                      now + timedelta(microseconds=int(remaining)), int(slot))
            for name, slot, holder, token, remaining in rows
        ]

    async def read_record(self, name: str) -> str | None:
        rows: list[tuple[Any, ...]] = await self._connections.call(
            "reading the record", name, self._query, "read record", (name_digest(name),),
            reading=True)
        return None if not rows or rows[0][0] is None else bytes(rows[0][0]).decode()

    async def write_record(self, grant: Grant, record: str) -> bool:
        encoded = record_bytes(record)
        written: int = await self._connections.call(
            "writing the record", grant.name, self._execute, "write record",
            (grant.slot, number_of(grant), encoded.hex(), name_digest(grant.name)))
        return written == 1

    async def records(self, prefix: str = "") -> dict[str, str]:
        encoded = prefix.encode()
        rows: list[tuple[Any, ...]] = await self._connections.call(
            "listing the records", prefix, self._query, "records",
            (len(encoded), encoded.hex()), reading=True)
        return {bytes(name).decode(): bytes(record).decode() for name, record in rows}

    async def _query(self, connection: Any, statement: str,
                     arguments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with connection.cursor() as cursor:
            await cursor.execute(self._statements.text[statement], arguments)
            return list(await cursor.fetchall())

    async def _execute(self, connection: Any, statement: str, arguments: tuple[Any, ...]) -> int:
        async with connection.cursor() as cursor:
            changed: int = await cursor.execute(self._statements.text[statement], arguments)
        return changed

    # -- waiting -----------------------------------------------------------------------------

    async def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Sleep on the server until a release of `name` wakes this waiter, or `timeout`
        passed (polling instead when enough waiters of the name sleep there, see
        MOST_ASLEEP). Takes nothing: the caller tries afterwards."""
        await self._wait(name, name_digest(name), None, timeout, patience, queued_at())

    async def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Sleep on the server until a release of `name` wakes this waiter, with the try sent
        right behind the sleep: the server runs it at the wake-up, and this returns the grant
        it took (its `sent_at` from before the sleep). A sleep that ends without a grant (it
        lasted its time, at least LEAST_SLEEP, or the woken try found the name taken again)
        is followed by the next, with the same place in the name's queue (see SLEEPER),
        until the `patience` ends: then None. When enough waiters of the name sleep there
        already (see MOST_ASLEEP), polls: sleeps `timeout` here, then tries once.

        Example::

            grant = await backend.wait_and_acquire("jobs", "me", 30.0, 1, 0.5, 10.0)
        """
        key = name_digest(name)
        attempt = _Attempt(holder, ttl, limit)
        since, give_up = queued_at(), _shim.monotonic() + max(timeout, patience)
        while True:
            tried = await self._wait(name, key, attempt, timeout, patience, since)
            if tried is None:  # polled here, or the sleep failed: one try, then the core's
                if self._closing:  # backoff
                    raise closed_store(self.url, "acquire", name)
                return await self._try(name, key, attempt)
            if tried.outcome is Outcome.UNKNOWN:
                # A KILL QUERY meant for the sleep cut the try behind it off: its outcome is
                # unknown, so it is made again with its lease id (which takes back what it took).
                try:
                    grant = await self._try(name, key, attempt, tried.lease_id)
                except BaseException:
                    self._undos.later(Undo(name, key, tried.lease_id, tried.sent_on))
                    raise
            else:
                grant = tried.grant
            patience = give_up - _shim.monotonic()
            if grant is not None or patience < 2 * TRY_ALLOWANCE:
                return grant
            timeout = min(timeout, patience)

    async def _wait(self, name: str, key: str, attempt: _Attempt | None, timeout: float,
                    patience: float | None, since: str) -> Tried | None:
        """The wait of wait_released (`attempt` None) and wait_and_acquire: on the server when
        few enough waits of the name sleep there, else here; what the try sent behind a sleep
        on the server found, if one was sent and answered (None: the caller tries). `since`:
        the waiter's place in the name's queue (see queued_at)."""
        if self._closing:
            raise closed_store(self.url, "acquire", name)
        # A sleep stays well inside the driver's read timeout, and short enough that a lease
        # the try behind it takes has most of its ttl left: its deadline counts from before
        # the sleep. The try behind the sleep gets its answer back before the caller's
        # acquire gives up.
        wanted = timeout if attempt is None else max(timeout, LEAST_SLEEP)
        seconds = min(wanted, self.timeout * 0.8,
                      (timeout if patience is None else patience) - TRY_ALLOWANCE)
        if attempt is not None:
            seconds = min(seconds, fresh_for(attempt.ttl) / 2)
        if seconds < 0.001 or self._sleepers.crowded(key):
            await _shim.sleep(timeout)  # enough asleep: poll
            return None
        with self._sleepers.asleep(key):
            return await self._sleep_on_server(name, key, attempt, seconds, timeout, patience,
                                               since)

    async def _sleep_on_server(self, name: str, key: str, attempt: _Attempt | None,
                               seconds: float, timeout: float, patience: float | None,
                               since: str) -> Tried | None:
        """The sleep on the server, with `attempt`'s try sent behind it when given."""
        started = _shim.monotonic()
        connection = self._sleepers.take()
        parameters = None if attempt is None else self._parameters(key, name, attempt)
        sent_at: float | None = None
        # Bounded by the caller's patience too: a wait that would outlast its acquire's
        # timeout is cut there (what the try behind it took is undone, see AsyncUndos).
        bound = min(self.timeout, (timeout if patience is None else patience) + TRY_ALLOWANCE)
        limit = 1 if attempt is None else attempt.limit
        try:
            with deadline(bound):
                if connection is None:
                    connection = await self._connections.open()
                self._sleepers.sleeping.add(connection)
                if self._closing:  # after the add: close() ends it, or this sees the flag
                    raise closed_store(self.url, "acquire", name)
                wait = self._statements.wait(key, limit, seconds, since,
                                             min(seconds, self._head_start.left(key)))
                then = None if parameters is None else self._acquire_statement(parameters)
                sent_at = _shim.monotonic()
                outcome, found = await sleep_then_try(connection, wait, then, limit)
        except BaseException as exc:
            if connection is not None:
                self._connections.discard(connection)
                if sent_at is not None and parameters is not None:
                    # the try behind the wait may still run, or it ran
                    self._undos.later(Undo(name, key, parameters["lease_id"],
                                           connection.thread_id()))
                self._sleepers.sleeping.discard(connection)
            if self._closing:  # ended by close() (KILL CONNECTION), or refused above
                raise closed_store(self.url, "acquire", name) from None
            if not isinstance(exc, DRIVER_ERRORS):
                raise
            log.debug("tenure: %s: waiting on the server failed: %s", self.url, exc)
            if error_code(exc) not in CONFLICTS:  # a conflict: the try behind lost a lock
                await _shim.sleep(max(0.0, timeout - (_shim.monotonic() - started)))
            return None
        assert sent_at is not None
        tried = None
        if parameters is not None and attempt is not None:
            lease_id = parameters["lease_id"]
            grant = None if found is None else Grant(
                name, found[0], attempt.holder, str(lease_id), found[1], name, sent_at)
            tried = Tried(outcome, grant, lease_id, connection.thread_id())
        if self._closing:  # close() began during the wait: free what its try took, here
            await self._let_go(connection, name, key, tried)
            raise closed_store(self.url, "acquire", name)
        self._sleepers.sleeping.discard(connection)
        # An acquire cut short may leave a transaction open (a semaphore's): closing the
        # connection rolls it back.
        if outcome is Outcome.UNKNOWN or self._connections.closed or \
                not self._sleepers.keep(connection):
            self._connections.discard(connection)
        return tried

    async def _let_go(self, connection: Any, name: str, key: str, tried: Tried | None) -> None:
        """A wait that ended after close() began: free the grant its try took, on the wait's
        own connection (close() refuses new ones); undo a try whose outcome is unknown, or
        whose release failed (close() ended the connection: close() runs the undo). The
        connection is closed either way."""
        undo = tried is not None and tried.outcome is Outcome.UNKNOWN
        try:
            if tried is not None and tried.grant is not None:
                try:
                    with deadline(self.timeout):
                        await self._release_in(connection, key, tried.grant.slot, tried.lease_id)
                except DRIVER_ERRORS:
                    undo = True
        finally:
            self._connections.discard(connection)
            if undo:
                assert tried is not None
                self._undos.later(Undo(name, key, tried.lease_id, tried.sent_on))
            self._sleepers.sleeping.discard(connection)  # last: close() then sees the undo

    # -- closing -----------------------------------------------------------------------------

    async def close(self) -> None:
        """End the waits sleeping on the server now (their callers get the closed-store
        error, and what their tries took is freed), finish the undos still running, then
        close every connection."""
        self._closing = True
        await self._sleepers.end_waits(self._kill, self.timeout)
        await self._undos.finish()
        self._connections.close()
        for connection in self._sleepers.drain():
            self._connections.discard(connection)

    async def _kill(self, ids: list[int]) -> None:
        await self._connections.call("closing", "waits", kill_in, ids)
