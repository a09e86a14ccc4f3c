"""The hand-over of a lock to a waiter (table mode): a waiter registers in the queue of the
name's slot-0 row (_ENQUEUE), a release grants the lease to the first registration still valid
in the same statement and NOTIFYs that waiter's store alone (_HAND_OVER), and the waiter takes
it without a further round trip (see _table_sql for the statements). A registration lasts one
wait_and_acquire call at most; its turn is a _Turn.

Example::

    registration = await handover.register("jobs", "me", 30.0, event, until)
    if registration is not None:
        grant = await handover.wait(registration, 0.05)
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING

from tenure._async import _shim
from tenure._errors import StoreUnavailable
from tenure._types import Grant

if TYPE_CHECKING:
    from tenure._async.stores.postgres._connection import _Session
    from tenure._async.stores.postgres._table import AsyncPostgresTableStore

log = logging.getLogger("tenure")

# A registration lasts at most this share of the ttl (a lease handed over keeps at least 90 %
# of its ttl, less the usual margin).
_HANDOVER_SHARE = 0.1
# A registration with this much time left or less is withdrawn by the try after a wait rather
# than kept for a further wait (its last try starts then), and none is made for less.
_KEEP_AT_LEAST = 0.01
# A registered waiter tries every `timeout` (the core's backoff), doubling up to this (or the
# first `timeout` when longer): a release hands it the lease or wakes it, so the tries only
# find a lease that expired unreleased.
_REGISTERED_POLL = 1.0


class _Turn(enum.Enum):
    """Where a registered wait stands (see _ENQUEUE); moved by the wait and by the listener."""

    WAITING = "waiting"  # queued; nothing handed over yet
    HANDED = "handed"  # a release handed the lease over: `token` is set, the waiter takes it
    OVER = "over"  # taken, withdrawn, or interrupted: a later notice about it is ignored


class _Registration:
    """A waiter's registration for a hand-over (see _ENQUEUE), for the length of one
    wait_and_acquire call."""

    __slots__ = ("ends", "event", "holder", "lease_id", "name", "sent", "sent_at", "token",
                 "ttl", "turn")

    def __init__(self, name: str, lease_id: str, holder: str, ttl: float, sent_at: float,
                 event: _shim.Event, ends: float) -> None:
        self.name, self.lease_id, self.holder, self.ttl = name, lease_id, holder, ttl
        self.sent_at = sent_at  # when the registering statement was sent (monotonic)
        self.event = event  # set when the lease is handed over (or the name released)
        self.ends = ends  # the registration is good until then (monotonic; the server's later)
        self.token: int | None = None  # set once the lease is ours
        self.turn = _Turn.WAITING
        self.sent: list[_Session] = []  # the sessions its statements went out on (see _undo)

    def grant(self) -> Grant:
        assert self.token is not None
        return Grant(self.name, 0, self.holder, self.lease_id, self.token, self.name,
                     self.sent_at)


class _HandOver:
    """The registered waits of one store under way: by lease id (for the listener's notices,
    see handed) and by name (one registered wait per name and store)."""

    def __init__(self, store: AsyncPostgresTableStore) -> None:
        self.store = store
        self.registered: dict[str, _Registration] = {}
        self.registering: set[str] = set()

    async def register(self, name: str, holder: str, ttl: float, event: _shim.Event,
                        until: float) -> _Registration | None:
        """Register for a hand-over of lock `name` until `until` at most (see _ENQUEUE),
        unless another wait of this store is registered for it. The statement grants the
        lease at once when it is free by now (the registration then has its token). None:
        wait without one."""
        sent_at = _shim.monotonic()
        wait = min(until - sent_at, _HANDOVER_SHARE * ttl)
        if wait < _KEEP_AT_LEAST:
            return None  # not worth a statement: the acquire is about to give up
        lease_id = f"{self.store._id_prefix}{next(self.store._ids)}"
        registration = _Registration(name, lease_id, holder, ttl, sent_at, event, sent_at + wait)
        with self.store._mutex:
            if name in self.registering:
                return None
            self.registering.add(name)
            self.registered[lease_id] = registration  # its hand-over may beat our answer
        try:
            result = await self.store._execute("waiting", name, self.store._enqueue_sql, {
                "name": name.encode(), "holder": holder.encode(), "lease_id": lease_id,
                "ttl": ttl, "wait": wait}, sent=registration.sent)
        except BaseException as exc:
            self.end(registration)
            self.store._undo_later(name, lease_id, 0, registration.sent)  # and what it took
            if isinstance(exc, StoreUnavailable):  # wait without it
                log.debug("tenure: %s: waiting without a hand-over: %s", self.store.url, exc)
                return None
            raise
        if not result.ntuples:  # the queue is full: wait without it
            self.end(registration)
            return None
        if result.get_value(0, 0) == b"t":  # free by now: granted
            with self.store._mutex:
                registration.token = int(result.get_value(0, 1))
                registration.turn = _Turn.HANDED
        return registration

    async def wait(self, registration: _Registration,
                               timeout: float) -> Grant | None:
        """Wait while registered: the lease handed over (see _handed), or taken by a try
        after each `timeout` (doubling) or a release notice (_ACQUIRE_QUEUED, by the
        registration's lease id: a hand-over that came first is "already ours"); the last try
        withdraws the registration. Interrupted: the registration is withdrawn and what it
        was handed freed, in the background."""
        name, lease_id = registration.name, registration.lease_id
        try:
            while True:
                # The last try starts a little before the registration (and the acquire's
                # patience) ends, so that it withdraws the registration within the acquire.
                left = registration.ends - _KEEP_AT_LEAST - _shim.monotonic()
                if registration.token is None:
                    await _shim.wait_event(registration.event, max(0.0, min(timeout, left)))
                with self.store._mutex:
                    if registration.token is not None:
                        registration.turn = _Turn.OVER
                        return registration.grant()
                    registration.event.clear()
                started = _shim.monotonic()
                leave = registration.ends - started <= _KEEP_AT_LEAST
                result = await self.store._execute(
                    "acquire", name, self.store._acquire_queued_sql, {
                    "name": name.encode(), "holder": registration.holder.encode(),
                    "lease_id": lease_id, "ttl": registration.ttl, "leave": leave},
                    sent=registration.sent)
                if result.ntuples and result.get_value(0, 0) == b"t":
                    return Grant(name, 0, registration.holder, lease_id,
                                 int(result.get_value(0, 1)), name, started)
                if leave:
                    self.store._listener.note_missed(name, started)
                    return None
                timeout = max(timeout, min(2 * timeout, _REGISTERED_POLL))
        except BaseException:
            self.store._undo_later(name, lease_id, 0, registration.sent)
            raise
        finally:
            self.end(registration)

    def end(self, registration: _Registration) -> None:
        """The registered wait is over: a later notice about it is ignored (what it was
        handed and nobody took, its undo frees)."""
        with self.store._mutex:
            registration.turn = _Turn.OVER
            self.registered.pop(registration.lease_id, None)
            self.registering.discard(registration.name)

    def handed(self, payload: str) -> None:
        """A release handed a lease to one of our registrations ("key lease_id token")."""
        _, lease_id, token = payload.split(" ")
        with self.store._mutex:
            registration = self.registered.get(lease_id)
            if registration is None or registration.turn is not _Turn.WAITING:
                return  # over: taken by its try ("already ours"), or freed by its undo
            registration.token = int(token)
            registration.turn = _Turn.HANDED
        registration.event.set()
