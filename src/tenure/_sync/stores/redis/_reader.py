# GENERATED from src/tenure/_async/stores/redis/_reader.py by scripts/unasync.py: do not edit.
"""The Redis store's reader: a pub/sub connection that notices at once when the server went
away or restarted, so the leases held are written back before anyone else can be granted them.

Example::

    reader = Reader(connections, control_channel, on_connected=reclaim, on_tick=forget_old)
    reader.start()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from tenure._sync import _shim
from tenure._sync.stores.redis._connections import Connections
from tenure._errors import StoreUnavailable

log = logging.getLogger("tenure")

# The reader looks for dropped leases (and whether the store closed) this often at least.
TICK = 0.5
# The reader reconnects after a failure within this long (the restart grace must exceed it).
RECONNECT_MAX = 0.25


class Reader:
    """A pub/sub connection subscribed to a channel of its own (`control`), only to learn at
    once when the connection drops (and, by a PING when it has been quiet for half the
    timeout, when its path went silent: no answer within the timeout drops the connection).
    Each time it is (re)established, `on_connected()` runs (the store renews every lease it
    holds); `on_tick()` runs at least every TICK seconds.

    Example::

        reader = Reader(connections, "tenure:control:ab12", reclaim, forget_expired)
    """

    def __init__(self, connections: Connections, control: str,
                 on_connected: Callable[[], Any], on_tick: Callable[[], object]) -> None:
        self._connections = connections
        self._control = control
        # on_connected: a coroutine function in tenure.aio, a plain one in tenure
        self._on_connected, self._on_tick = on_connected, on_tick
        self._running: _shim.Background | None = None
        self._mutex = threading.Lock()

    def start(self) -> None:
        """Start the reader unless it runs (idempotent; cheap when it runs).

        Example::

            reader.start()
        """
        running = self._running
        if running is not None and running.alive():
            return
        with self._mutex:
            if not self._connections.closed and (self._running is None
                                                 or not self._running.alive()):
                self._running = _shim.spawn(self._listen, "tenure-redis-reader")

    def stop(self) -> None:
        """Stop the reader (the store closes).

        Example::

            reader.stop()
        """
        if self._running is not None:
            self._running.stop()

    def _listen(self) -> None:
        delay = 0.05
        connections = self._connections
        while not connections.closed:
            try:
                with connections.pubsub() as pubsub:
                    pubsub.subscribe(self._control)
                    heard, pinged = _shim.monotonic(), None
                    while not connections.closed:
                        message = pubsub.get_message(timeout=TICK)
                        now = _shim.monotonic()
                        if message is not None:
                            heard, pinged = now, None
                            if message["type"] == "subscribe":
                                self._on_connected()  # (re)connected, maybe a new server
                        elif pinged is not None and now - pinged > connections.timeout:
                            # A silent path ends no read: the PING's missing answer tells.
                            raise StoreUnavailable(f"{connections.url}: no answer to a PING")
                        elif pinged is None and now - heard > connections.timeout / 2:
                            pubsub.ping()
                            pinged = now
                        self._on_tick()
                        delay = 0.05
            except Exception as exc:  # the reader must outlive any failure
                if connections.closed:
                    return
                log.debug("tenure: redis reader interrupted: %s", exc)
            _shim.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)
