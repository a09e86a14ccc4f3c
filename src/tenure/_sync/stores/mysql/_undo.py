# GENERATED from src/tenure/_async/stores/mysql/_undo.py by scripts/unasync.py: do not edit.
"""The undo of an acquire whose answer never came in (cancelled, timed out, cut off: a try
sent behind a wait, or try_acquire's own): what it may have taken is freed by its lease id,
in the background, once nothing it sent can still run.

Example::

    undos = Undos(connections)
    undos.later(Undo(name, key, lease_id, connection.thread_id()))
    undos.finish()  # on close: the undos not done yet
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from tenure._sync import _shim
from tenure._sync.stores.mysql._connections import Connections
from tenure._sync.stores.mysql._driver import ER, pymysql, error_code
from tenure._errors import StoreUnavailable

log = logging.getLogger("tenure")


class Undo(NamedTuple):
    """An acquire to undo: its name (for errors), the name's key, its lease id, and the
    connection it went out on (`thread_id`, the server's connection id).

    Example:
        >>> Undo("jobs", "00ff", 7, 12).lease_id
        7
    """

    name: str
    key: str
    lease_id: int
    thread_id: int


class Undos:
    """The undos of a store, run in the background; close() finishes those not done yet, so
    that a process that closes its store and exits right after an acquire was cut off leaves
    no lease behind.

    Example::

        undos.later(Undo("jobs", key, lease_id, thread_id))
    """

    def __init__(self, connections: Connections) -> None:
        self._connections = connections
        self.running: set[Undo] = set()

    def later(self, undo: Undo) -> None:
        """Run `forget(undo)` in the background: the caller's cancellation is never delayed."""
        self.running.add(undo)
        _shim.start_soon(self.forget, undo)

    def finish(self) -> None:
        """Run the undos started and not done yet, and wait for them (close)."""
        for undo in list(self.running):
            self.forget(undo)

    def forget(self, undo: Undo) -> None:
        """Free what the acquire of `undo` took. Best effort: a lease left behind expires
        after its ttl.

        The order matters. The server runs a query it received even after the client closed
        the connection, and a query still on its way (a slow path) arrives after the client
        gave up: an undo that overtook it would leave the lease it takes behind. So nothing is
        freed while the acquire's connection (`thread_id`) is still on the server's process
        list (see FORGET): once it is gone, nothing it sent can take a lease any more. While
        it is there, KILL CONNECTION ends it, which also drops whatever still arrives on it;
        KILL returns before the killed thread has ended (a statement past its last check for
        the kill still completes), so the undo asks again until the thread is gone. The
        common case, a connection that ended when this side closed it, costs one round trip
        (on a new connection, when the acquire's was the only one)."""
        try:
            self._connections.call("freeing an abandoned try", undo.name, self._forget_in,
                                         undo)
        except StoreUnavailable as exc:
            log.debug("tenure: %s: %s", self._connections.settings.url, exc)
        finally:
            self.running.discard(undo)

    def _forget_in(self, connection: Any, undo: Undo) -> None:
        forget = self._connections.statements.text["forget"]
        with connection.cursor() as cursor:
            pause, give_up = 0.001, _shim.monotonic() + self._connections.settings.timeout
            while True:
                # Frees the lease only once that connection is gone, and says if it was.
                cursor.execute(forget, (int(undo.thread_id), undo.key, undo.lease_id))
                cursor.nextset()
                cursor.nextset()
                [(alive,)] = cursor.fetchall()
                if not alive or _shim.monotonic() > give_up:
                    return
                try:
                    cursor.execute(f"KILL CONNECTION {int(undo.thread_id)}")
                except pymysql.OperationalError as exc:
                    if error_code(exc) != ER.NO_SUCH_THREAD:  # gone meanwhile: forget now
                        raise
                _shim.sleep(pause)
                pause = min(pause * 2, 0.05)

    def start_afresh(self) -> None:
        """In a child after fork(): the parent's undos are the parent's."""
        self.running = set()
