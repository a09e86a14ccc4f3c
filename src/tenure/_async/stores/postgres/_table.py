"""Table mode (`mode=table`, the default): one row per (name, slot) in a lease table, expiry by
the server's clock; a lock's release hands the lease to a registered waiter (_handover).

Example::

    backend = AsyncPostgresStore("postgresql://app@db/app")  # an AsyncPostgresTableStore
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone

from tenure._async import _shim
from tenure._async.stores._protocol import closed_store
from tenure._async.stores.postgres._base import AsyncPostgresStore
from tenure._async.stores.postgres._connection import _Session
from tenure._async.stores.postgres._handover import _HandOver
from tenure._async.stores.postgres._statements import (
    _BOOL,
    _BYTEA,
    _FLOAT8,
    _INT4,
    _TEXT,
    _render,
    _Script,
    _statement,
)
from tenure._async.stores.postgres._table_sql import (
    _ACQUIRE_ALL,
    _ACQUIRE_LOCK,
    _ACQUIRE_QUEUED,
    _ACQUIRE_SLOT,
    _BREAK,
    _DDL,
    _ENQUEUE,
    _FORGET,
    _HAND_OVER,
    _HAND_OVER_ALL,
    _LIST,
    _RELEASE_FORGET,
    _RENEW,
    _RUNNING,
    _TABLE_SHAPE,
    _UNDO_SLOTS,
    _UPGRADE,
    _WITHDRAW,
    _WRITE_RECORD,
)
from tenure._errors import StoreUnavailable
from tenure._names import name_digest
from tenure._types import Grant, LeaseInfo

log = logging.getLogger("tenure")

# Two acquirers of a semaphore may pick the same free slot; the loser tries again this often.
_SLOT_RETRIES = 4
# The undo of a cancelled acquire looks this often whether the request's backend is gone.
_UNDO_POLL = 0.01


class AsyncPostgresTableStore(AsyncPostgresStore):
    """Leases as rows of a table (see the package's docstring); built by AsyncPostgresStore.

    Example::

        backend = AsyncPostgresStore("postgresql://app@db/app", schema="locks")
    """

    _ddl_template = _DDL
    _upgrade_template = _UPGRADE
    _forget_template = _FORGET
    _shape = _TABLE_SHAPE
    _write_record_template = _WRITE_RECORD
    _record_slot = 0

    def __init__(self, url: str, **options: object) -> None:
        super().__init__(url, **options)
        table = self._sql_table
        lease = [("name", _BYTEA), ("holder", _BYTEA), ("lease_id", _TEXT), ("ttl", _FLOAT8)]
        self._acquire_lock_sql = _statement("acquire_lock", _ACQUIRE_LOCK, table, lease)
        self._acquire_slot_sql = _statement("acquire_slot", _ACQUIRE_SLOT, table,
                                            [*lease, ("limit", _INT4)])
        self._acquire_all_sql = _statement("acquire_all", _ACQUIRE_ALL, table, [
            ("names", _TEXT), ("lease_ids", _TEXT), ("holder", _BYTEA), ("ttl", _FLOAT8)])
        self._renew_sql = _render(_RENEW, table)
        self._enqueue_sql = _statement("enqueue", _ENQUEUE, table, [
            *lease, ("wait", _FLOAT8)])
        self._acquire_queued_sql = _statement("acquire_queued", _ACQUIRE_QUEUED, table,
                                              [*lease, ("leave", _BOOL)])
        release = [("name", _BYTEA), ("slot", _INT4), ("lease_id", _TEXT), ("channel", _TEXT),
                   ("key", _TEXT)]
        # retain=0: a release first tries to delete the lease's row (see _RELEASE_FORGET)
        self._release_forget_sql = (_statement("release_forget", _RELEASE_FORGET, table, release)
                                    if self.retain == 0 else None)
        self._release_sql = _statement("release", _HAND_OVER, table, release)  # frees or hands over
        self._release_all_sql = _statement("release_all", _HAND_OVER_ALL, table, [
            ("names", _TEXT), ("slots", _TEXT), ("lease_ids", _TEXT), ("keys", _TEXT),
            ("channel", _TEXT)])
        self._break_sql = _render(_BREAK, table)
        self._list_sql = _render(_LIST, table)
        self._running = _RUNNING.encode()
        # The undo of an acquire (by limit; 0: of a registered wait, see _WITHDRAW).
        self._undo_sql = {0: _render(_WITHDRAW, table) + b";\n" + _render(_HAND_OVER, table),
                          1: _render(_HAND_OVER, table), 2: _render(_UNDO_SLOTS, table)}
        self._handover = _HandOver(self)

    def _start_afresh_in_child(self) -> None:
        super()._start_afresh_in_child()
        self._handover = _HandOver(self)  # the parent's waits stay the parent's

    def _handed(self, payload: str) -> None:
        self._handover.handed(payload)

    async def _wait_taking(self, name: str, holder: str, ttl: float, limit: int,
                           event: _shim.Event, timeout: float,
                           until: float) -> tuple[bool, Grant | None]:
        """A lock's waiter registers for a hand-over (see _ENQUEUE) for the acquire's patience,
        at most _HANDOVER_SHARE of the ttl, and goes on waiting, with a try every `timeout`
        (doubling up to a second), until it is handed the lease (no further round trip) or
        its registration ends: one place in the queue across its tries. Others (a semaphore,
        a full queue, a listener whose liveness lock another session has) wait as the base
        class does."""
        if limit == 1 and self._listener.alive:
            registration = await self._handover.register(name, holder, ttl, event, until)
            if registration is not None:
                return True, await self._handover.wait(registration, timeout)
        return await super()._wait_taking(name, holder, ttl, limit, event, timeout, until)

    async def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        params = {"name": name.encode(), "limit": limit, "holder": holder.encode(),
                  "lease_id": lease_id, "ttl": ttl}
        started = _shim.monotonic()
        sent: list[_Session] = []
        try:
            if limit == 1:
                result = await self._execute("acquire", name, self._acquire_lock_sql,
                                             params, sent=sent)
                # (granted, token); (false, _) when it only marked the name wanted
                if result.ntuples and result.get_value(0, 0) == b"t":
                    return Grant(name, 0, holder, lease_id, int(result.get_value(0, 1)),
                                 name)
            else:
                for _ in range(_SLOT_RETRIES):
                    result = await self._execute("acquire", name, self._acquire_slot_sql,
                                                 params, sent=sent)
                    if not result.ntuples:
                        break  # no slot was free
                    slot = int(result.get_value(0, 0))
                    if slot >= 0:
                        return Grant(name, slot, holder, lease_id,
                                     int(result.get_value(0, 1)), name)
                    # Another acquirer took the slot we picked at the same moment;
                    # another may still be free.
        except BaseException:  # cancelled, or failed: the server may have granted it
            self._undo_later(name, lease_id, limit, sent)
            raise
        if self._notify:  # see wait_and_acquire
            self._listener.note_missed(name, started)
        return None

    async def try_acquire_all(self, names: Sequence[str], holder: str,
                              ttl: float) -> list[Grant] | None:
        """Locks on every one of `names` in ONE statement (_ACQUIRE_ALL), or on none (see
        tenure._async.stores._protocol.AsyncTryAcquireAll); a name taken between the
        statement's look and its write costs a release of the others.

        Example::

            grants = await backend.try_acquire_all(["a", "b"], "worker-1", 30.0)
        """
        lease_ids = [f"{self._id_prefix}{next(self._ids)}" for _ in names]
        params = {"names": _array(name.encode().hex() for name in names),
                  "lease_ids": _array(lease_ids), "holder": holder.encode(),
                  "ttl": ttl}
        sent: list[_Session] = []
        try:
            result = await self._execute("acquire", names[0], self._acquire_all_sql, params,
                                         sent=sent)
        except BaseException:  # cancelled, or failed: the server may have granted them
            for name, lease_id in zip(names, lease_ids, strict=True):
                self._undo_later(name, lease_id, 1, sent)
            raise
        tokens = {result.get_value(row, 0).decode(): int(result.get_value(row, 1))
                  for row in range(result.ntuples)}
        grants = [Grant(name, 0, holder, lease_id, tokens[lease_id], name)
                  for name, lease_id in zip(names, lease_ids, strict=True)
                  if lease_id in tokens]
        if len(grants) == len(names):
            return grants
        try:  # a name was taken meanwhile: none, then
            for grant in grants:
                await self.release(grant)
        except BaseException:
            for grant in grants:
                self._undo_later(grant.name, grant.lease_id, 1, sent)
            raise
        return None

    def _undo_later(self, name: str, lease_id: str, limit: int,
                    sent: list[_Session]) -> None:
        """An acquire by `lease_id` was cancelled, or failed, after `sent` got its request: free
        in the background what it may have taken, so that the caller's cancellation or error
        is not delayed by a round trip (a stalled path would hold it for `timeout`). `limit`
        0: a registered wait (see _WITHDRAW)."""
        if sent:
            pids = [session.pid for session in sent if session.connection.closed]
            _shim.start_soon(self._undo, name, lease_id, limit, pids)

    async def _undo(self, name: str, lease_id: str, limit: int, pids: list[int]) -> None:
        """Free whatever the requests of an interrupted acquire took, by their lease id,
        best-effort (else it expires by itself).

        The release must not overtake those requests on the server, and closing a request's
        connection does not stop it: the server runs what it has received, and what is still
        on its way, before it reads the end of the connection (a running statement does not
        watch its socket). A request whose connection stayed open was answered (the answer was
        read, then dropped): it is over. For those whose connection was closed unanswered,
        the release runs, on another connection, right behind a look at whether the backends
        that served them (`pids`) are still there, in one round trip: each statement of it
        has its own snapshot, so when the look finds them gone, no request of this acquire can
        still run and the release saw what they took. Else it looks and releases again until
        they are gone (up to `timeout`). Through PgBouncer the pids are not the server's: the
        release runs once, and frees what the requests took by then."""
        release = _Script(self._undo_sql[min(limit, 2)])
        params = {"name": name.encode(), "slot": 0, "lease_id": lease_id, "pids": pids,
                  "channel": self.channel, "key": name_digest(name)}
        try:
            if self._pgbouncer or not pids:
                await self._execute("undo", name, release, params)
                return
            until = _shim.monotonic() + self._timeout
            script = _Script(self._running + b";\n" + release.text)
            while (await self._execute("undo", name, script, params)
                   and _shim.monotonic() < until):
                await _shim.sleep(_UNDO_POLL)
        except StoreUnavailable as exc:
            log.debug("tenure: %s: could not free what an interrupted acquire of %r took "
                      "(it expires by itself): %s", self.url, name, exc)

    async def release(self, grant: Grant) -> bool:
        if self._pool.closed:
            raise closed_store(self.url, "release", grant.name)
        params = {"name": grant.name.encode(), "slot": grant.slot, "lease_id": grant.lease_id,
                  "channel": self.channel, "key": name_digest(grant.name)}
        self._sweep_soon()
        # One statement frees the row or hands it to the first registered waiter: a plain
        # release that refused when waiters were registered cost the hand-off to a single
        # waiter a round trip (on a connection idle since the acquire, the slowest one), and
        # the hand-over's expressions cost the server ~3 µs more than the plain UPDATE.
        if self._release_forget_sql is not None and grant.sent_at == math.inf:  # not handed over
            result = await self._execute("release", grant.name, self._release_forget_sql, params)
            if result.ntuples:
                return True
        result = await self._execute("release", grant.name, self._release_sql, params)
        return bool(result.ntuples)

    async def release_all(self, grants: Sequence[Grant]) -> list[bool]:
        """release() of each of `grants` in ONE statement (_HAND_OVER_ALL): each freed or
        handed to its first waiter. With retain=0 one release per lease (each deletes its row).

        Example::

            freed = await backend.release_all(grants)
        """
        if self._release_forget_sql is not None:
            return [await self.release(grant) for grant in grants]
        if self._pool.closed:
            raise closed_store(self.url, "release", grants[0].name)
        params = {"names": _array(grant.name.encode().hex() for grant in grants),
                  "slots": _array(str(grant.slot) for grant in grants),
                  "lease_ids": _array(grant.lease_id for grant in grants),
                  "keys": _array(name_digest(grant.name) for grant in grants),
                  "channel": self.channel}
        self._sweep_soon()
        result = await self._execute("release", grants[0].name, self._release_all_sql, params)
        freed = {int(result.get_value(row, 0)) for row in range(result.ntuples)}
        return [number in freed for number in range(1, len(grants) + 1)]

    async def break_lease(self, name: str) -> int:
        rows = await self._execute("break", name, self._break_sql, {
            "name": name.encode(), "channel": self.channel, "key": name_digest(name)})
        return len(rows)

    async def leases(self, prefix: str = "") -> list[LeaseInfo]:
        encoded = prefix.encode()
        rows = await self._execute("listing", prefix, self._list_sql,
                                   {"prefix": encoded, "length": len(encoded)}, reading=True)
        now = datetime.now(timezone.utc)
        return [LeaseInfo(bytes(name).decode(), bytes(holder).decode(), token,
                          now + timedelta(seconds=left), slot)
                for name, slot, holder, token, left in rows]


def _array(items: Iterable[str]) -> str:
    """A text[] literal of items that need no quoting (hex, digits, lease ids).

    Example:
        >>> _array(["61", "62"])
        '{61,62}'
    """
    return "{" + ",".join(items) + "}"
