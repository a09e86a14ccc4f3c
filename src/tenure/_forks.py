"""The fork rule: leases, connections and open files belong to the process that made them.

After `os.fork()` the child holds copies of its parent's sockets, file descriptions and lease
objects. Using them would be wrong twice over: a socket shared by two processes interleaves
their requests, and a lease the child released (at exit, say) is the parent's lease. So every
object that owns such things registers a callback here, and the child runs it right after the
fork, before any of its own code: the object drops what it inherited (without closing sockets
in a way the server would notice, and without releasing anything) and starts afresh on next use.

Why `os.register_at_fork` and not a `os.getpid()` check on every call: the callback costs
nothing on the hot path (getpid is a system call on current glibc), and it runs before the child
can touch the inherited state at all.

Example:
    >>> class Pool:
    ...     def __init__(self):
    ...         self.connections = ["inherited"]
    ...         in_child_after_fork(self, Pool.start_afresh)
    ...     def start_afresh(self):
    ...         self.connections = []
    >>> pool = Pool()
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_callbacks: weakref.WeakKeyDictionary[Any, list[Callable[[Any], object]]] = (
    weakref.WeakKeyDictionary()
)
_mutex = threading.Lock()


def in_child_after_fork(owner: T, callback: Callable[[T], object]) -> None:
    """Call `callback(owner)` in a forked child right after `os.fork()`, while `owner` lives.

    The registration holds `owner` weakly: an object that is gone needs no cleanup.

    Example:
        >>> class Cache:
        ...     def clear(self):
        ...         pass
        >>> cache = Cache()
        >>> in_child_after_fork(cache, Cache.clear)
    """
    with _mutex:
        _callbacks.setdefault(owner, []).append(callback)


def _start_afresh_in_child() -> None:
    global _mutex
    # The parent may have held the mutex in another thread at the fork: the child has only
    # this thread, so it takes a new one instead of waiting forever on the copy.
    _mutex = threading.Lock()
    for owner, callbacks in list(_callbacks.items()):
        for callback in callbacks:
            try:
                callback(owner)
            except Exception:  # one owner's cleanup must not stop the others'
                logging.getLogger("tenure").exception(
                    "tenure: cleanup after fork failed for %r", type(owner).__name__)


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork()
    os.register_at_fork(after_in_child=_start_afresh_in_child)
