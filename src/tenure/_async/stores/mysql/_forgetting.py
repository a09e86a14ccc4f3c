"""Forgetting the names nobody holds, in both modes of the mysql:// store: the `retain`
sweeps that releases run now and then, retain=0's forgetting at the release, and `prune`.

The SQL is the mode's (Forgetful: _sql's CANDIDATES, FORGET_NAMES, COUNT_NAMES for the lease
table; _getlock_sql's for the counters table): the candidates come from an index range of
slot 0's rows, and each batch is forgotten in one transaction that locks the names' rows
first and decides on them while no grant can change them.

Example::

    forgetting = AsyncForgetting(url, retain, connections.call, Forgetful(...))
    forgotten = await forgetting.prune(idle=3600.0, dry_run=False)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenure._async import _shim
from tenure._async.stores.mysql._driver import CONFLICTS, ER, aiomysql, error_code
from tenure._errors import StoreRefused, StoreUnavailable

log = logging.getLogger("tenure")

SWEEP_EVERY = 60.0  # seconds: the longest gap between two sweeps of idle names by one store
SWEEP_BATCH = 500  # names a sweep (or one transaction of a prune) looks at


@dataclass(frozen=True)
class Forgetful:
    """A mode's statements for forgetting: `candidates` (parameters: idle_us
    `candidates_idle` times, then a position, then the batch size; answers a key (hex) and
    the position after it per name), the position `first` before every candidate,
    `forget(keys)` (the transaction's start, answering the idle ones: (key, has a record))
    and `count(keys)` (parameters: idle_us twice), `drop(idle, kept)` (the transaction's
    end: the deletes and COMMIT), and the indexes' check (`has_index`, parameters: the
    table's name twice; answers whether the table exists and how many of the mode's indexes
    it has) and addition (`add_index`, an ALTER per index).

    Example::

        Forgetful(table, candidates, 2, FIRST, statements.forget, statements.count_idle,
                  statements.drop, HAS_INDEX, (add_index,))
    """

    table: str
    candidates: str
    candidates_idle: int
    first: tuple[Any, ...]
    forget: Callable[[list[str]], str]
    count: Callable[[list[str]], str]
    drop: Callable[[list[str], list[str]], str]
    has_index: str
    add_index: tuple[str, ...]


async def _rows(connection: Any, statement: str,
                arguments: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The rows of the last answer of `statement` (one statement or several)."""
    try:
        async with connection.cursor() as cursor:
            await cursor.execute(statement, arguments)
            rows = list(await cursor.fetchall())
            while await cursor.nextset():
                rows = list(await cursor.fetchall())
            return rows
    except aiomysql.Error as exc:
        # A transaction cut short by the server's error must not stay open on a session
        # that serves other calls (getlock mode keeps such sessions).
        if "START TRANSACTION" in statement or "COMMIT" in statement:
            async with connection.cursor() as cursor:
                await cursor.execute("ROLLBACK")
        if error_code(exc) == ER.NO_SUCH_TABLE:
            return []  # nothing to forget yet (and a prune makes no table)
        raise


async def _forget_in(connection: Any, decide: str, arguments: tuple[Any, ...],
                     drop: Callable[[list[str], list[str]], str]) -> int:
    """The forgetting transaction: its start (`decide`, which locks the rows and answers the
    idle names), then `drop` of those; how many names it forgot."""
    rows = await _rows(connection, decide, arguments)
    idle = [str(key) for key, _ in rows]
    await _rows(connection, drop(idle, [str(key) for key, kept in rows if kept]), ())
    return len(idle)


class AsyncForgetting:
    """One store's forgetting: `call(operation, label, work, *args)` runs
    `work(connection, *args)` on one of the store's connections (with its retries and
    errors). `retain` is the store's option (see retain_seconds).

    Example::

        await forgetting.after_release(key)   # retain=0: forget it; else sweep now and then
    """

    def __init__(self, url: str, retain: float, call: Callable[..., Any],
                 statements: Forgetful) -> None:
        self.url, self.retain, self._call, self._sql = url, retain, call, statements
        # monotonic time of the next sweep after a release: one interval after the start
        self._next_sweep = _shim.monotonic() + self._interval()
        self._resume = statements.first  # where the next sweep starts (see _sweep_now_and_then)
        self._indexed = False  # the table's index was checked (see ensure_index)

    def _interval(self) -> float:
        return min(max(self.retain / 4, 1.0), SWEEP_EVERY)

    async def after_release(self, key: str) -> None:
        """After a release of the name of `key` (a hex digest) that nobody waits for: with
        retain=0 forget that name now, with a finite retain sweep now and then; best effort
        (errors are logged: a later sweep or prune forgets what this left)."""
        try:
            if self.retain == 0:
                await self._forget([key], 0.0)
            elif self.retain < math.inf:
                await self._sweep_now_and_then()
        except StoreUnavailable as exc:
            log.debug("tenure: %s: forgetting idle names failed: %s", self.url, exc)

    async def _sweep_now_and_then(self) -> None:
        """Forget up to SWEEP_BATCH names idle for `retain`, at most once per min(retain / 4,
        SWEEP_EVERY) seconds; after a full batch, the next release's sweep goes on from where
        this one stopped (past names it could not forget, e.g. a semaphore with a slot held)."""
        now = _shim.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._interval()
        await self.ensure_index()
        keys, after = await self._candidates(self.retain, self._resume)
        if keys:
            await self._forget(keys, self.retain)
        if len(keys) == SWEEP_BATCH:
            self._resume, self._next_sweep = after, now
        else:
            self._resume = self._sql.first

    async def prune(self, idle: float, dry_run: bool) -> int:
        """Forget the names idle for `idle` seconds, or with `dry_run` count them, in batches
        of SWEEP_BATCH names in the index's order (each forgotten in one transaction); the
        number of names."""
        await self.ensure_index()
        total, after = 0, self._sql.first
        while True:
            keys, after = await self._candidates(idle, after)
            if keys:
                total += await (self._count(keys, idle) if dry_run else self._forget(keys, idle))
            if len(keys) < SWEEP_BATCH:
                return total

    async def _candidates(self, idle: float,
                          after: tuple[Any, ...]) -> tuple[list[str], tuple[Any, ...]]:
        """Up to SWEEP_BATCH keys (hex) of names that may be idle for `idle`, past the
        position `after`; and the position after them."""
        idle_us = round(idle * 1_000_000)
        position = [value for value in after[:-1] for _ in (0, 1)] + [after[-1]]
        rows = await self._call("prune", "", _rows, self._sql.candidates,
                                (*(idle_us,) * self._sql.candidates_idle, *position,
                                 SWEEP_BATCH))
        if not rows:
            return [], after
        return [str(row[0]) for row in rows], (*rows[-1][1:], str(rows[-1][0]))

    async def _count(self, keys: list[str], idle: float) -> int:
        """How many of `keys` are idle for `idle` (without locks)."""
        idle_us = round(idle * 1_000_000)
        rows = await self._call("prune", f"{len(keys)} names", _rows, self._sql.count(keys),
                                (idle_us, idle_us))
        return int(rows[0][0]) if rows else 0

    async def _forget(self, keys: list[str], idle: float) -> int:
        """Forget those of `keys` idle for `idle` (one transaction); how many."""
        idle_us = round(idle * 1_000_000)
        for attempt in range(3):
            try:
                forgotten: int = await self._call(
                    "prune", f"{len(keys)} names", _forget_in, self._sql.forget(keys),
                    (idle_us, idle_us), self._sql.drop)
                return forgotten
            except StoreUnavailable as exc:  # a deadlock with a grant: its rows are busy
                cause = exc.__context__
                if attempt == 2 or cause is None or error_code(cause) not in CONFLICTS:
                    raise
                await _shim.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def ensure_index(self) -> None:
        """Add the mode's indexes to a table made before them, once per store (a missing
        table is left missing: it is made with them). Without them (no ALTER privilege)
        listings and sweeps still work, reading every row."""
        if self._indexed:
            return
        table = self._sql.table
        try:
            rows = await self._call("checking the index", table, _rows, self._sql.has_index,
                                    (table, table))
            exists, indexed = rows[0] if rows else (0, 0)  # no rows: the table is missing
            if exists and indexed < len(self._sql.add_index):
                for alter in self._sql.add_index:  # one present already fails (1061): next
                    try:
                        await self._call("adding the index", table, _rows, alter, ())
                    except StoreUnavailable as exc:
                        log.debug("tenure: %s: adding an index to %s: %s", self.url, table,
                                  exc)
            self._indexed = bool(exists)
        except StoreRefused as exc:
            self._indexed = True  # not again: everything works without it, only slower
            log.warning("tenure: %s: table %s has no index for listings and sweeps and it "
                        "could not be added (%s): they read every row", self.url, table, exc)
        except StoreUnavailable as exc:  # e.g. another store added it meanwhile (1061)
            log.debug("tenure: %s: checking the index of %s failed: %s", self.url, table, exc)
