"""This host's clocks as the embedded stores use them: the monotonic clock shared by every
process on the host (for expiry), the boot id that tells a reboot apart (monotonic time restarts
then), and the wall clock in microseconds (to seed fencing counters).

Example:
    >>> len(BOOT_ID) > 0
    True
"""

from __future__ import annotations

import time
from pathlib import Path


def _read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        # No boot id outside Linux: the boot time rounded to a minute stands in. A spurious
        # change only reseeds counters forward and expires old leases, both safe.
        return f"boot@{round((time.time() - time.monotonic()) / 60)}"


BOOT_ID = _read_boot_id()


def wall_us() -> int:
    """Wall-clock time in microseconds since the epoch.

    Example:
        >>> wall_us() > 1_600_000_000_000_000
        True
    """
    return time.time_ns() // 1000
