# GENERATED from src/tenure/_async/stores/memory.py by scripts/unasync.py: do not edit.
"""`memory://`: leases in this process's memory, for tests and examples.

Expiry uses this process's monotonic clock; release wakes waiters at once. Records live in a
dict next to the leases, like the counters. Nothing is shared with other processes, and
everything is gone when the process exits. The counter of a name nobody holds is forgotten
after `retain` seconds (default 3600; 0: at its release; inf: never), as on every store.

Example::

    store = tenure.connect("memory://?retain=0")
"""

from __future__ import annotations

import math
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

from tenure._sync import _shim
from tenure._sync.stores._options import DEFAULT_RETAIN, merged, only, retain_seconds
from tenure._sync.stores._protocol import Backend, RecordKeeper, record_bytes
from tenure._errors import InvalidArgument
from tenure._hostclock import wall_us
from tenure._timing import next_token
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason
from tenure._urls import parse_store_url, redact

SCHEMES: tuple[str, ...] = ("memory",)


def from_url(url: str, **options: Any) -> Backend:
    """The store of a `memory://` URL, as `tenure.connect` builds it: its one option is
    `retain` (seconds the counter of a name nobody holds is kept).

    Example::

        backend = from_url("memory://?retain=0")
    """
    given = only(merged(parse_store_url(url, SCHEMES).options, options), "retain",
                 store="memory:// stores")
    parts = urlsplit(url)
    if parts.netloc or parts.path or parts.fragment:
        # A host or path would read as a name or place of a shared store, which this is not.
        raise InvalidArgument(
            f"url {redact(url)!r}: memory:// takes no host and no path (its leases live in "
            "this process only, one store per connect()); write memory://")
    return MemoryStore(retain=given.get("retain", DEFAULT_RETAIN))


SWEEP_EVERY = 60.0  # seconds: the longest gap between two sweeps of idle names by one store


@dataclass
class _Held:
    grant: Grant
    expires_at: float


class MemoryStore(Backend, RecordKeeper):
    """An in-process lease store.

    Example::

        backend = MemoryStore()
        grant = backend.try_acquire("jobs", "me", 5.0, 1)
    """

    capabilities = Capabilities(min_ttl=0.1, max_ttl=7 * 86400.0)

    def __init__(self, *, retain: float | str = DEFAULT_RETAIN) -> None:
        self._retain = retain_seconds(retain)
        self.url = "memory://" if self._retain == DEFAULT_RETAIN else (
            f"memory://?retain={self._retain:g}")
        self._next_sweep = 0.0  # monotonic time of the next sweep after a release
        self._mutex = threading.Lock()
        self._held: dict[tuple[str, int], _Held] = {}
        self._counters: dict[str, int] = {}
        self._freed_at: dict[str, float] = {}  # when a release or break last freed the name
        self._limits: dict[str, int] = {}  # the highest limit a name was taken with
        self._records: dict[str, str] = {}
        self._released: dict[str, _shim.Event] = {}

    def _live(self, name: str, slot: int, now: float) -> _Held | None:
        held = self._held.get((name, slot))
        return held if held is not None and held.expires_at > now else None

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        with self._mutex:
            now = _shim.monotonic()
            if limit > self._limits.get(name, 1):
                self._limits[name] = limit
            for slot in range(limit):
                if self._live(name, slot, now) is None:
                    token = next_token(self._counters.get(name), wall_us())
                    self._counters[name] = token
                    grant = Grant(name, slot, holder, secrets.token_hex(8), token, name)
                    self._held[(name, slot)] = _Held(grant, now + ttl)
                    return grant
            return None

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        results: list[Grant | LostReason] = []
        with self._mutex:
            now = _shim.monotonic()
            for grant in grants:
                held = self._held.get((grant.name, grant.slot))
                if held is None or held.grant.lease_id != grant.lease_id:
                    results.append(LostReason.TAKEN if held else LostReason.BROKEN)
                elif held.expires_at <= now:
                    results.append(LostReason.EXPIRED)
                else:
                    held.expires_at = now + ttl
                    results.append(grant)
        return results

    def release(self, grant: Grant) -> bool:
        with self._mutex:
            held = self._held.get((grant.name, grant.slot))
            if held is None or held.grant.lease_id != grant.lease_id:
                return False
            del self._held[(grant.name, grant.slot)]
            now = _shim.monotonic()
            was_live = held.expires_at > now
            self._freed_at[grant.name] = min(now, held.expires_at)
            self._forget_now_and_then(grant.name, now)
        self._notify(grant.name)
        return was_live

    def _forget_now_and_then(self, name: str, now: float) -> None:
        """After a release of `name` (the mutex held): with retain=0 forget it unless another
        slot of it is held; else forget the names idle for `retain`, at most once per
        min(max(retain / 4, 1 s), SWEEP_EVERY)."""
        if self._retain == 0:
            if all((name, slot) not in self._held for slot in range(self._limits.get(name, 1))):
                self._counters.pop(name, None)
                self._freed_at.pop(name, None)
                self._limits.pop(name, None)
        elif self._retain < math.inf and now >= self._next_sweep:
            self._next_sweep = now + min(max(self._retain / 4, 1.0), SWEEP_EVERY)
            self._forget(self._retain, dry_run=False)

    def break_lease(self, name: str) -> int:
        with self._mutex:
            now = _shim.monotonic()
            slots = [key for key in self._held if key[0] == name]
            freed = sum(1 for key in slots if self._held.pop(key).expires_at > now)
            if slots:
                self._freed_at[name] = now
        self._notify(name)
        return freed

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        with self._mutex:
            now = _shim.monotonic()
            wall_now = datetime.now(timezone.utc)
            found = [
                LeaseInfo(
                    held.grant.name,
                    held.grant.holder,
                    held.grant.token,
                    wall_now + timedelta(seconds=held.expires_at - now),
                    held.grant.slot,
                )
                for (name, _slot), held in self._held.items()
                if name.startswith(prefix) and held.expires_at > now
            ]
        return sorted(found, key=lambda info: (info.name, info.slot))

    def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the counters of the names free for `idle` seconds (records stay); how many.

        Example::

            forgotten = backend.prune(idle=0.0)
        """
        with self._mutex:
            return self._forget(idle, dry_run)

    def _forget(self, idle: float, dry_run: bool) -> int:
        """prune's work, the mutex held by the caller."""
        since = _shim.monotonic() - idle
        busy_until: dict[str, float] = {}  # the latest end of each name's holds
        for (name, _slot), held in self._held.items():
            busy_until[name] = max(busy_until.get(name, -math.inf), held.expires_at)
        idle_names = [name for name in self._counters
                      if max(busy_until.get(name, -math.inf),
                             self._freed_at.get(name, -math.inf)) <= since]
        if not dry_run:
            for name in idle_names:
                del self._counters[name]
                self._freed_at.pop(name, None)
                self._limits.pop(name, None)
            forgotten = set(idle_names)
            self._held = {key: held for key, held in self._held.items()
                          if key[0] not in forgotten}
        return len(idle_names)

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        with self._mutex:
            event = self._released.setdefault(name, _shim.Event())
        _shim.wait_event(event, timeout)

    def _notify(self, name: str) -> None:
        with self._mutex:
            event = self._released.pop(name, None)
        if event is not None:
            event.set()

    def read_record(self, name: str) -> str | None:
        with self._mutex:
            return self._records.get(name)

    def write_record(self, grant: Grant, record: str) -> bool:
        record_bytes(record)
        with self._mutex:
            held = self._live(grant.name, grant.slot, _shim.monotonic())
            if held is None or held.grant.lease_id != grant.lease_id:
                return False
            self._records[grant.name] = record
            return True

    def records(self, prefix: str = "") -> dict[str, str]:
        with self._mutex:
            return {name: self._records[name] for name in sorted(self._records)
                    if name.startswith(prefix)}

    def close(self) -> None:
        """Nothing to free. The Store being closed released its own leases; other Stores that
        share this object keep theirs (clearing them let a second holder in at once)."""
