# GENERATED from src/tenure/_async/stores/redis/_waiting.py by scripts/unasync.py: do not edit.
"""How a Redis store's waiters wait for a release, and the hand-over: the wake-up takes the
lease in the release's server turn and the wait returns it.

A release pushes one item onto the name's signal list (it stays 2 s, so a release just before
the wait is not missed), and one blocked waiter wakes. A waiter blocks in BLMOVE of that list
into its store's own list, with an acquire pipelined right behind: Redis runs the acquire as
soon as the BLMOVE returns, on the same connection, so the woken waiter holds the lease one
round trip after the release, and the wait returns the Grant (nothing is kept for later).

Example::

    waits = Waits(store)
    grant = waits.wait_and_acquire("jobs", "web-1", 30.0, 1, 0.5, 10.0)
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from tenure._sync import _shim
from tenure._sync.stores.redis._connections import Undo
from tenure._sync.stores.redis._scripts import SCRIPTS, packed
from tenure._timing import fresh_for, local_deadline
from tenure._types import Grant

if TYPE_CHECKING:
    from tenure._sync.stores.redis._single import RedisStore

from redis.exceptions import NoScriptError, RedisError, ResponseError

# Redis ends a blocking command whose time ran out up to 1/hz late (hz is 10 by default): the
# last wait before an acquire's deadline blocks this much less, and not at all when it has less.
SERVER_TIMER_SLACK = 0.1


class Blocking(enum.Enum):
    """How a store's waiters block on its server."""

    MOVE = "BLMOVE, with the acquire behind it"  # Redis 6.2 and later
    POP = "BLPOP, then a try"  # the server turned BLMOVE down


class Waits:
    """The waiting of one store (see the module docstring).

    Example::

        woken = Waits(store).wait_signal("jobs", time.monotonic() + 1.0)
    """

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self.blocking = Blocking.MOVE

    def wait_released(self, name: str, timeout: float) -> None:
        """Block on the name's signal list for up to `timeout` seconds; a release wakes one
        waiter at once. When the server cannot be reached, the wait is slept out (the next
        try says why).

        Example::

            waits.wait_released("jobs", 1.0)
        """
        deadline = _shim.monotonic() + timeout
        try:
            self.wait_signal(name, deadline)
        except (RedisError, OSError):  # e.g. the server is down: poll like other stores
            self._sleep_until(deadline)

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """Wait up to `timeout` seconds for a release of `name`, take a free slot in the same
        server turn as the wake-up (or at the end of the wait), and return the Grant taken, or
        None when every slot was still held. With BLPOP, or when the server cannot be reached,
        it waits, then tries.

        Example::

            grant = waits.wait_and_acquire("jobs", "web-1", 30.0, 1, 0.5, 10.0)
        """
        deadline = _shim.monotonic() + timeout
        try:
            if self.blocking is Blocking.MOVE:
                tried, grant = self._take_at_wake_up(name, holder, ttl, limit, deadline,
                                                           timeout >= patience)
                if tried:
                    return grant
            if self.blocking is Blocking.POP:  # (maybe learned just now)
                self.wait_signal(name, deadline)
        except (RedisError, OSError):  # e.g. the server is down: poll like other stores
            self._sleep_until(deadline)
        sent_at = _shim.monotonic()  # the lease's deadline counts from this request
        grant = self._store.try_acquire(name, holder, ttl, limit)
        return None if grant is None else grant._replace(sent_at=sent_at)

    def _take_at_wake_up(self, name: str, holder: str, ttl: float, limit: int,
                               deadline: float, final: bool) -> tuple[bool, Grant | None]:
        """BLMOVE with WAKE_ACQUIRE pipelined right behind it (LAST_ACQUIRE behind the last
        BLMOVE: a wait ends with a try). (True, what the acquire took) once one ran; (False,
        None) when none did (the server has no BLMOVE, or the store closed). Each block lasts
        at most half the store's timeout, and short enough that a grant is still fresh
        (tenure._timing.fresh_for): the lease's deadline counts from when the BLMOVE was sent.
        The `final` wait of an acquire (its caller gives up at its end) ends on time: its
        blocks end SERVER_TIMER_SLACK early, and its last moment is slept out (the caller's
        try follows)."""
        store, connections = self._store, self._store._connections
        keys = store._keys(name)
        lease_id = store._new_lease_id()
        head = f'["{lease_id}",'.encode()
        longest = min(connections.timeout / 2, fresh_for(ttl) / 2)
        slack = SERVER_TIMER_SLACK if final else 0.0
        while not connections.closed:
            left = deadline - slack - _shim.monotonic()  # the blocks must end by then
            if left <= 0:
                self._sleep_until(deadline)
                return False, None
            script = SCRIPTS.last_acquire if left <= longest else SCRIPTS.wake_acquire
            acquire = store._acquire_command(name, holder, ttl, limit, head, script)
            seconds = max(0.001, min(left, longest))
            sent_at = _shim.monotonic()
            try:
                moved, granted = connections.call(packed(
                    b"BLMOVE", keys.signal.encode(), store._wake_key(name), b"LEFT", b"RIGHT",
                    b"%.3f" % seconds) + acquire, replies=2)
                if isinstance(granted, NoScriptError):  # a new server: load them, run it again
                    connections.call(
                        packed(b"SCRIPT", b"LOAD", SCRIPTS.wake_acquire.text)
                        + packed(b"SCRIPT", b"LOAD", SCRIPTS.last_acquire.text), replies=2)
                    granted = connections.call(acquire)
            except BaseException:
                # Cancelled or failed: the wake-up may have taken the lease. Not on the same
                # connection (see Connections._finish): a BLMOVE still blocked would hold the
                # undo up, and dropping the connection ends it at once.
                connections.undo_soon(Undo(name, keys.slot0.encode(), head, ttl, limit,
                                           store._retain_ms))
                raise
            if isinstance(granted, ResponseError):
                raise granted
            if isinstance(moved, ResponseError):  # no BLMOVE here: BLPOP from now on
                self.blocking = Blocking.POP
                if granted in (-1, None):
                    return False, None
            elif granted == -1:  # not woken: block again
                continue
            grant = store._granted(granted, sent_at, lease_id, name, holder, ttl, limit)
            if grant is not None and _shim.monotonic() >= local_deadline(sent_at, ttl):
                # Answered past the lease's deadline (this process was stopped, or the path
                # stalled): of no use to the caller, and maybe granted to another by now.
                _shim.start_soon(store._release_quietly, grant)
                return True, None
            return True, None if grant is None else grant._replace(sent_at=sent_at)
        return False, None

    def wait_signal(self, name: str, deadline: float) -> bool:
        """BLPOP on the name's signal list until `deadline` (monotonic); True when a release
        signalled. Driver errors are raised as they are.

        Example::

            woken = waits.wait_signal("jobs", time.monotonic() + 1.0)
        """
        connections = self._store._connections
        key = self._store._keys(name).signal.encode()
        while not connections.closed:
            left = deadline - _shim.monotonic()
            if left <= 0:
                return False
            seconds = max(0.001, min(left, connections.timeout / 2))
            if connections.call(packed(b"BLPOP", key, b"%.3f" % seconds)) is not None:
                return True
        return False

    def _sleep_until(self, deadline: float) -> None:
        if not self._store._connections.closed:
            _shim.sleep(max(0.0, deadline - _shim.monotonic()))
