"""A store's bounded pool of connections: at most `size` open for the store's calls, idle ones
reused last in, first out, and a caller that finds all of them busy waits up to the store's
`timeout` for one. What a store's connection is, how one is opened, checked and closed, is the
store's (a subclass overrides open_one, alive and close_one).

Example::

    class Connections(BoundedPool[Connection]):
        async def open_one(self) -> Connection:
            return await connect(url)

        async def close_one(self, connection: Connection) -> None:
            await connection.close()

    pool = Connections(url, size=10, timeout=5.0, mutex=threading.Lock())
    connection = await pool.take()
    try:
        ...
    finally:
        await pool.give_back(connection)
"""

from __future__ import annotations

import math
import threading
from typing import Generic, TypeVar

from tenure._async import _shim
from tenure._async.stores._protocol import closed_store
from tenure._errors import StoreUnavailable

C = TypeVar("C")


class BoundedPool(Generic[C]):
    """At most `size` connections of type C open at once for a store's calls; connections a
    store opens for anything else (a listener, a wait's own) are not counted here.

    `mutex` guards the counts and lists, and is never held across I/O: the sync twin's calls
    run on several threads. It is the store's own lock where the store needs one for more
    than the pool, and is replaced after fork() (see start_afresh).

    Example::

        connection, reused = await pool.take_one()
    """

    def __init__(self, url: str, size: int, timeout: float, mutex: threading.Lock) -> None:
        self.url, self.size, self.timeout = url, size, timeout
        self.mutex = mutex
        self.closed = False
        self.idle: list[C] = []  # last in, first out
        self.opened = 0  # how many exist, idle or in use
        self.room: list[_shim.Event] = []  # who waits for one

    # -- the store's steps ---------------------------------------------------------------------

    async def open_one(self) -> C:
        """A new connection (the pool has counted it already; it forgets it if this raises)."""
        raise NotImplementedError

    def alive(self, connection: C) -> bool:
        """Whether an idle `connection` may be used, judged without a round trip."""
        return True

    async def close_one(self, connection: C) -> None:
        """Close `connection`, best effort (the pool has forgotten it already)."""
        raise NotImplementedError

    def claimed(self, connection: C) -> _shim.Event | None:
        """Called with the mutex held as `connection` is given back: the event of a caller it
        is handed to directly instead of going idle, or None (the default: nobody)."""
        return None

    # -- taking and giving back -----------------------------------------------------------------

    async def take(self) -> C:
        """An idle connection, or a new one; waits up to `timeout` while `size` are busy.

        Example::

            connection = await pool.take()
        """
        connection, _ = await self.take_one()
        return connection

    async def take_one(self) -> tuple[C, bool]:
        """A connection and whether it was idle in the pool (False: opened for this call).
        Raises StoreUnavailable when all `size` connections stayed busy for `timeout`, and the
        closed-store error once the pool is closed.

        Example::

            connection, reused = await pool.take_one()
        """
        deadline = -math.inf
        while True:
            room: _shim.Event | None = None
            with self.mutex:
                if self.closed:
                    raise closed_store(self.url)
                connection = self.idle.pop() if self.idle else None
                opening = connection is None and self.opened < self.size
                if opening:
                    self.opened += 1
                elif connection is None:
                    room = _shim.Event()
                    self.room.append(room)
            if connection is not None:
                if self.alive(connection):
                    return connection, True
                await self.discard(connection)  # dropped by the server: open another
            elif opening:
                try:
                    return await self.open_one(), False
                except BaseException:
                    self.forget_one()
                    raise
            elif room is not None:
                if deadline == -math.inf:
                    deadline = _shim.monotonic() + self.timeout
                left = deadline - _shim.monotonic()
                if left <= 0 or not await _shim.wait_event(room, left):
                    raise StoreUnavailable(
                        f"{self.url}: all {self.size} connections stayed busy for "
                        f"{self.timeout:g} s; raise pool_size or lower the concurrency")

    async def give_back(self, connection: C) -> None:
        """Keep `connection` idle for the next call (or hand it to whoever claimed it); closed
        when the pool is.

        Example::

            await pool.give_back(connection)
        """
        room: list[_shim.Event] = []
        with self.mutex:
            keep = not self.closed
            handed_to = self.claimed(connection) if keep else None
            if handed_to is not None:
                room = [handed_to]
            elif keep:
                self.idle.append(connection)
                room, self.room = self.room, []
        if not keep:
            await self.discard(connection)
            return
        for event in room:
            event.set()

    async def discard(self, connection: C) -> None:
        """Close a connection taken from the pool, making room for another.

        Example::

            await pool.discard(connection)  # it saw an error
        """
        self.forget_one()
        await self.close_one(connection)

    async def discard_idle(self) -> None:
        """Close the idle connections (one of them turned out dead: so may the others).

        Example::

            await pool.discard_idle()
        """
        with self.mutex:
            idle, self.idle = self.idle, []
        for connection in idle:
            await self.discard(connection)

    def forget_one(self) -> None:
        """One connection fewer exists: wake the callers waiting for room."""
        with self.mutex:
            self.opened -= 1
            room, self.room = self.room, []
        for event in room:
            event.set()

    # -- closing and forking -----------------------------------------------------------------

    def close(self) -> list[C]:
        """Take no more calls; the idle connections, for the caller to close.

        Example::

            for connection in pool.close():
                await pool.close_one(connection)
        """
        with self.mutex:
            self.closed = True
            idle, self.idle = self.idle, []
            room, self.room = self.room, []
        for event in room:
            event.set()
        return idle

    def start_afresh(self, mutex: threading.Lock) -> list[C]:
        """In a child after fork(): count none open, with a new `mutex` (another thread of the
        parent may have held the old one); the parent's idle connections, for the caller to
        let go of without a byte on them.

        Example::

            for connection in pool.start_afresh(threading.Lock()):
                forsake(connection)
        """
        inherited = self.idle
        self.mutex = mutex
        self.idle, self.opened, self.room = [], 0, []
        return inherited
