"""This host's clocks as the embedded stores use them: the monotonic clock shared by every
process on the host (for expiry), the boot id that tells a reboot apart (monotonic time restarts
then), and the wall clock in microseconds (to seed fencing counters).

A Linux time namespace (`unshare --time`, some container runtimes) shifts CLOCK_MONOTONIC by a
fixed offset for the processes inside it, while the boot id stays the host's. `host_monotonic`
subtracts that offset (from /proc/self/timens_offsets), so every process on the host reads the
same clock whichever namespace it runs in.

Example:
    >>> len(BOOT_ID) > 0
    True
    >>> host_monotonic() > 0
    True
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tenure._errors import StoreRefused

_OFFSETS = Path("/proc/self/timens_offsets")
_NAMESPACES = Path("/proc/self/ns")


def _read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        # No boot id outside Linux: the boot time rounded to a minute stands in. A spurious
        # change only reseeds counters forward and expires old leases, both safe.
        return f"boot@{round((time.time() - time.monotonic()) / 60)}"


BOOT_ID = _read_boot_id()


def monotonic_offset() -> float:
    """Seconds this process's CLOCK_MONOTONIC runs ahead of the host's (its time namespace's
    offset; 0.0 outside Linux and on kernels without time namespaces).

    Raises StoreRefused when the offset cannot be known: this process called
    unshare(CLONE_NEWTIME) itself, and /proc then shows the offset of its children, not its own.

    Example:
        >>> isinstance(monotonic_offset(), float)
        True
    """
    try:
        lines = _OFFSETS.read_text().splitlines()
    except OSError:
        return 0.0
    try:
        own = os.readlink(_NAMESPACES / "time")
        children = os.readlink(_NAMESPACES / "time_for_children")
    except OSError:
        own = children = ""
    if own != children:
        raise StoreRefused(
            "this process called unshare(CLONE_NEWTIME) and has not forked since, so its own "
            "monotonic clock offset is unknown (/proc/self/timens_offsets shows its children's); "
            "open the SQLite store in a child process (fork or exec) in the namespace instead"
        )
    for line in lines:
        clock, seconds, nanoseconds = line.split()
        if clock == "monotonic":
            return int(seconds) + int(nanoseconds) / 1e9
    return 0.0


_offset: float | None = None  # read on first use, and again in a child after fork()


def _forget_offset() -> None:
    global _offset
    _offset = None  # a child of fork() lives in its parent's namespace for children


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_offset)


def host_monotonic() -> float:
    """The host's monotonic clock in seconds: the same in every process on the host, whatever
    time namespace it runs in; immune to wall-clock steps.

    Example:
        >>> abs(host_monotonic() - (time.monotonic() - monotonic_offset())) < 1.0
        True
    """
    global _offset
    if _offset is None:
        _offset = monotonic_offset()
    return time.monotonic() - _offset


def wall_us() -> int:
    """Wall-clock time in microseconds since the epoch.

    Example:
        >>> wall_us() > 1_600_000_000_000_000
        True
    """
    return time.time_ns() // 1000
