"""A store's line-up for the takeover and memory benchmarks: tenure and its peers, listed once
per store module and turned into takeover runs (bench/takeover.py) and memory runs
(bench/footprint.py) with the same settings for every store.

Example::

    entries = [Entry("tenure", "tenure", url, tenure=True),
               Entry("redis-py `Lock` (polls every 0.1 s)", "redis-py", url)]
    section.takers, section.footprints = takers(entries), footprints(entries)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from footprint import Footprint
from libraries import Row
from takeover import Taker

TAKEOVER_TTL = 2.0  # seconds; the store's minimum where that is higher (azblob: 15 s)
MEMORY_TTL = 1.5  # renewed every 0.5 s by tenure: two ticks during the hold
MEMORY_HOLD = 1.2  # seconds the leases are held once taken
NO_RENEWAL = "none built in: held without renewing"


@dataclass
class Entry(Row):
    """One library on one store: how it waits (in the label), whether its lock expires, who
    renews it while held, and options for the memory run only (`memory_options`, e.g. turning a
    peer's own renewal on).

    Example::

        Entry("python-redis-lock (BLPOP)", "python-redis-lock", url,
              renewal="its auto_renewal: a thread per lock",
              memory_options={"auto_renewal": True})
    """

    options: dict[str, Any] = field(default_factory=dict)
    connect: dict[str, Any] = field(default_factory=dict)
    expires: bool = True
    renewal: str = NO_RENEWAL
    memory_options: dict[str, Any] = field(default_factory=dict)
    memory_connect: dict[str, Any] = field(default_factory=dict)
    tenure: bool = False
    kill: bool = True  # False where no other process can reach the store (memory://)
    floor: bool = False  # the bare mechanism (takeover only: the floor of a single hand-off)
    release_only: bool = False  # no SIGKILL run (a lock its holder's death does not free)


def takers(entries: list[Entry], ttl: float = TAKEOVER_TTL) -> list[Taker]:
    """The takeover runs of `entries`, each lock with an expiry of `ttl` where it expires.

    Example::

        takers([Entry("tenure", "tenure", "sqlite:////tmp/x.db", tenure=True)])
    """
    return [Taker(entry.label, entry.library, entry.url, ttl, entry.options, entry.connect,
                  entry.expires,
                  ("kill", "release") if entry.kill and not entry.release_only else ("release",),
                  in_process=not entry.kill, tenure=entry.tenure, floor=entry.floor)
            for entry in entries]


def footprints(entries: list[Entry], ttl: float = MEMORY_TTL,
               hold: float = MEMORY_HOLD) -> list[Footprint]:
    """The memory runs of `entries`: locks with an expiry of `ttl`, held `hold` s once taken.

    Example::

        footprints([Entry("filelock", "filelock", "file:///tmp/l", expires=False)])
    """
    return [Footprint(entry.label, entry.library, entry.url, ttl, hold,
                      renewal=("tenure's lease monitor, every ttl/3" if entry.tenure
                               else entry.renewal),
                      options={**entry.options, **entry.memory_options},
                      connect={**entry.connect, **entry.memory_connect})
            for entry in entries if not entry.floor]
