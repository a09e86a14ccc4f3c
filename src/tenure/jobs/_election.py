"""Leader election: one instance holds a named lease for as long as it lives; the others wait
and one of them takes over within ttl plus one poll interval after the leader is gone.

Example::

    election = worker.election("primary", on_elected=start_consumers, on_lost=stop_consumers)
    ...
    print(election.leader())   # sync Worker: the holder id of the current leader, or None
    print(await election.leader())   # AsyncWorker
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from tenure._errors import InvalidArgumentType, LeaseLost
from tenure._sync._store import Store
from tenure._types import LeaseInfo
from tenure.jobs._locks import AnyLease, LockPort
from tenure.jobs._outage import Retry, describe
from tenure.jobs._periodic import sleep_unless_stopped, until_stopped
from tenure.jobs._signatures import is_async, refuse_unfinished
from tenure.jobs._tracebacks import from_user_code

log = logging.getLogger("tenure.jobs")

ELECTION_PREFIX = "election:"


async def _notify(callback: Callable[[], Any] | None) -> None:
    if callback is None:
        return
    try:
        if is_async(callback):
            result = await callback()
        else:
            result = await anyio.to_thread.run_sync(callback)
        refuse_unfinished(result, "the callback")
    except Exception as exc:
        log.error("tenure: election callback %r raised", callback, exc_info=from_user_code(exc))


class _Campaign:
    """What both elections share: campaigning while the worker runs, and `is_leader`."""

    def __init__(self, name: str, locks: LockPort, *, ttl: float, poll: float,
                 on_elected: Callable[[], Any] | None, on_lost: Callable[[], Any] | None) -> None:
        self.name = name
        self.ttl = ttl
        self.poll = poll
        self.on_elected = on_elected
        self.on_lost = on_lost
        self._locks = locks
        self._lease: AnyLease | None = None  # while this instance campaigns with a lease
        self._retry = Retry(locks.outage, f"election {name!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} leading={self.is_leader}>"

    @property
    def lock_name(self) -> str:
        """The name of the election's lease in the store."""
        return ELECTION_PREFIX + self.name

    @property
    def is_leader(self) -> bool:
        """True while this instance leads: False as soon as its lease is lost or released,
        even before `on_lost` runs, so a sync `on_elected` doing work can poll it.

        Example::

            while election.is_leader:
                step()
        """
        lease = self._lease
        return lease is not None and not lease.lost and not lease.released

    def _holder(self, leases: list[LeaseInfo]) -> str | None:
        for info in leases:
            if info.name == self.lock_name:
                return info.holder
        return None

    async def run(self, stopping: anyio.Event) -> None:
        """Campaign until `stopping` is set. A store that fails is retried, never fatal (see
        tenure.jobs._outage); a leader keeps leading through an outage its lease outlives."""
        while not stopping.is_set():
            try:
                await self._campaign(stopping)
            except Exception as exc:
                self._retry.failed(exc)
                await sleep_unless_stopped(stopping, self._retry.delay())

    async def _campaign(self, stopping: anyio.Event) -> None:
        while not stopping.is_set():
            lease = await until_stopped(stopping, lambda: self._locks.acquire(
                self.lock_name, self.ttl, timeout=float("inf"), max_wait=self.poll,
                retry=self._retry))
            if lease is None:
                return
            self._retry.succeeded()
            if stopping.is_set():  # a sync store's acquire ran on in its thread after a stop
                with anyio.CancelScope(shield=True):
                    await self._release(lease)
                return
            self._lease = lease
            log.info("tenure: %s leads election %r (token %d)", self._locks.holder, self.name,
                     lease.token)
            try:
                async with self._locks.guard(lease):
                    await _notify(self.on_elected)
                    await stopping.wait()
            except LeaseLost as lost:
                log.warning("tenure: leadership of %r lost: %s", self.name, lost)
            finally:
                self._lease = None
                with anyio.CancelScope(shield=True):
                    await _notify(self.on_lost)
                    await self._release(lease)

    async def _release(self, lease: AnyLease) -> None:
        try:
            await self._locks.release(lease)
        except Exception as exc:  # shielded and best effort: the lease expires by itself
            log.info("tenure: releasing election %r failed; it expires by itself: %s",
                     self.name, describe(exc))


class Election(_Campaign):
    """One named election of a sync `tenure.Worker`; made by `worker.election(...)`.

    Example::

        election = worker.election("primary")
        if election.is_leader:
            ...
        print(election.leader())   # the holder id of the current leader, or None
    """

    def leader(self) -> str | None:
        """The holder id of whoever leads now (from the store), or None.

        Example::

            who = election.leader()
        """
        store = self._locks.store
        if not isinstance(store, Store):
            raise InvalidArgumentType("Election.leader() reads a sync store; an AsyncWorker's "
                                      "election is an AsyncElection: await election.leader()")
        return self._holder(store.leases(self.lock_name))


class AsyncElection(_Campaign):
    """One named election of a `tenure.aio.AsyncWorker`; made by `worker.election(...)`.

    Example::

        election = worker.election("primary")
        if election.is_leader:
            ...
        print(await election.leader())   # the holder id of the current leader, or None
    """

    async def leader(self) -> str | None:
        """The holder id of whoever leads now (from the store), or None.

        Example::

            who = await election.leader()
        """
        return self._holder(await self._locks.leases(self.lock_name))
