"""Renewal cost: what one tick of tenure's background renewal costs with N held leases.

One harness for every server store, one `Counter` per store (in its bench module): the counter
counts the driver's round trips (by wrapping the driver method that sends a request) and
snapshots the server's own statistics (commands, statements). The harness holds N leases
through one sync store and wraps the store's `renew`; a tick is one `renew` call of the lease
monitor (one wake-up that renews every lease then due):

1. the first call is left out (it may come while the leases are still being taken);
2. the server is snapshotted at the start of the second call, and again at the start of call
   `ticks` + 2, before it runs: the server's counts cover exactly `ticks` calls;
3. round trips are counted during those calls, and the time they span gives the ticks per
   renewal interval (ttl/3).

Example::

    rows = renewal_costs(url, RedisCounter(url), sizes=(1, 100, 1000))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import tenure

SIZES = (1, 100, 1000)
TICKS = 6


class Counter(Protocol):
    """A store's counting: client round trips (while installed) and server-side snapshots."""

    columns: tuple[str, ...]  # the server figures' column titles, in `snapshot`'s order

    def install(self) -> None:
        """Start counting the driver's requests (wrap its send method)."""

    def uninstall(self) -> None:
        """Undo install."""

    def sent(self) -> int:
        """Requests the driver sent since install."""

    def snapshot(self) -> tuple[float, ...]:
        """The server's counts now, one per column (its own queries left out)."""


@dataclass
class Renewal:
    """Per tick with `leases` held: leases renewed, round trips, server counts; and how many
    ticks one renewal interval (ttl/3) saw.

    Example::

        Renewal(1000, 1.5, 6, 1.0, 1000.0, 1.0, (1.0, 2000.0))
    """

    leases: int
    ttl: float
    ticks: int
    per_interval: float
    renewed: float
    round_trips: float
    server: tuple[float, ...]


def renewal_costs(url: str, counter: Counter, sizes: tuple[int, ...] = SIZES,
                  ttl: float = 1.5, ticks: int = TICKS,
                  options: Callable[[int], dict[str, Any]] | None = None) -> list[Renewal]:
    """Hold each size of leases in a store of its own (`options(size)` to `tenure.connect`)
    with `ttl` (renewed every ttl/3) and count `ticks` renewal ticks.

    Example::

        rows = renewal_costs(url, counter, sizes=(1, 100), ttl=0.6)
    """
    counter.install()
    try:
        return [_one_size(url, counter, size, ttl, ticks, options(size) if options else {})
                for size in sizes]
    finally:
        counter.uninstall()


def _one_size(url: str, counter: Counter, size: int, ttl: float, ticks: int,
              options: dict[str, Any]) -> Renewal:
    state: dict[str, Any] = {"calls": 0, "renewed": 0, "sent": 0, "started": [],
                             "before": None, "after": None}
    done = threading.Event()
    with tenure.connect(url, **options) as store:
        renew = store.backend.renew

        def counted(grants: Any, seconds: float) -> Any:
            calls = state["calls"]
            state["calls"] += 1
            if done.is_set() or calls == 0:
                return renew(grants, seconds)
            state["started"].append(time.monotonic())
            if calls == 1:
                state["before"] = counter.snapshot()
            elif calls == ticks + 1:
                state["after"] = counter.snapshot()
                try:
                    return renew(grants, seconds)
                finally:
                    done.set()  # after the call: the store closes only once it is over
            sent = counter.sent()
            try:
                return renew(grants, seconds)
            finally:
                state["sent"] += counter.sent() - sent
                state["renewed"] += len(grants)

        store.backend.renew = counted  # type: ignore[method-assign]
        lock = store.lock("renew-sample", ttl=30)
        lock.try_acquire().release()  # type: ignore[union-attr]  # creates tables, connects
        leases = [store.lock(f"renew-{size}-{index}", ttl=ttl).try_acquire()
                  for index in range(size)]
        try:
            if any(lease is None for lease in leases):
                raise RuntimeError(f"could not take {size} fresh leases")
            deadline = (ticks + 4) * ttl / 3 + 30.0
            if not done.wait(deadline):
                raise RuntimeError(f"no {ticks} renewal ticks of {size} leases in "
                                   f"{deadline:g} s")
        finally:
            store.backend.renew = renew  # type: ignore[method-assign]
            for lease in leases:
                if lease is not None:
                    lease.release()
    span = state["started"][-1] - state["started"][0]
    server = tuple((after - before) / ticks
                   for before, after in zip(state["before"], state["after"], strict=True))
    return Renewal(size, ttl, ticks, ticks / (span / (ttl / 3)), state["renewed"] / ticks,
                   state["sent"] / ticks, server)
