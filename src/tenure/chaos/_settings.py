"""What a chaos run does: the store, the workers, the faults, the seed, and the timing derived
from the store's ttl. Checked before anything starts.

Example::

    settings = ChaosSettings("sqlite:////tmp/chaos-locks.db", workers=4, duration=15,
                             faults=("kill", "pause"), seed=7)
    settings.check()
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import parse_store_url

FAULT_KINDS = ("kill", "pause", "proxy", "stall", "fork", "restart")
WORKLOADS = ("lock", "jobs", "queue")
QUEUE_VISIBILITY = 3.0  # the queue workload's visibility timeout (seconds)


def runner_retry_cap() -> float:
    """The job runner's longest wait between two tries after a store error (its retry
    interval, `tenure.jobs._outage.RETRY_CAP`): part of the jobs workload's liveness bound.

    Example::

        runner_retry_cap()   # 2.0
    """
    from tenure.jobs._outage import RETRY_CAP  # not at import: the CLI loads this module

    return float(RETRY_CAP)


# The GC-pause case: SIGSTOP for these multiples of the ttl, then SIGCONT.
PAUSE_FACTORS = (0.5, 1.5, 3.0)
DEFAULT_TTL = 2.0
# Azure blob leases last 15 to 60 s.
MIN_TTL = {"azblob": 15.0}


@dataclass
class ChaosSettings:
    """How to run `tenure chaos` (the defaults are the command's).

    `ttl` defaults to 2 s (15 s on azblob, its minimum). `retry` is the longest wait between
    two tries of a waiting acquire (the lock's `max_wait`): liveness allows a new holder
    within ttl + 2 x retry after the faults stop. `restart_store` is not here: it is a
    callable given to `run_chaos`; `restart_command` is the CLI's way (a shell command).

    Example::

        ChaosSettings("redis://127.0.0.1:6379/0", workers=8, duration=60, seed=1,
                      fencing=False)   # the positive control: overlaps must be found

    `late_signal` (seconds, default 0) makes every worker's `on_lost` wait that long before
    it records the loss: the positive control of the loss-signal checker, which must then find
    signals later than 100 ms after the deadline.

    `workload` is "lock" (the above), "jobs" (a periodic job every `period` seconds on every
    worker; `skip_record` is its positive control) or "queue" (keyed messages through the
    PostgreSQL queue at `queue_url`, default the store's own URL, over `keys` keys; `key_lock`
    False is its positive control). The lock-only options (`fencing`, `late_signal`,
    `semaphore_phase`, `lock_all_phase`, `group_phase`) are refused with another workload,
    and so are the others' options.

        ChaosSettings("sqlite:////tmp/chaos-locks.db", workload="queue",
                      queue_url="postgresql://app@db/app", key_lock=False)   # must fail
    """

    store: str
    workers: int = 8
    duration: float = 60.0
    faults: tuple[str, ...] = FAULT_KINDS
    seed: int | None = None
    fencing: bool = True
    semaphore_phase: bool = False
    semaphore_limit: int = 2
    lock_all_phase: bool = False  # lock: a phase of lock_all over overlapping name sets
    group_phase: bool = False  # lock: a phase of group members joining, listed and leaving
    ttl: float | None = None
    retry: float = 0.5
    pause_factors: tuple[float, ...] = PAUSE_FACTORS
    name: str = "chaos"
    directory: Path | None = None  # default: a new temporary directory, kept for the history
    restart_command: str | None = None
    late_signal: float = 0.0  # the positive control of the signal checker: each on_lost waits
    workload: str = "lock"  # lock, jobs (a periodic job) or queue (keyed queue messages)
    period: float = 1.0  # jobs: the job's period in seconds
    skip_record: bool = False  # jobs: the positive control (the period record is never read)
    key_lock: bool = True  # queue: False is the positive control (no per-key lock)
    queue_url: str | None = None  # queue: the PostgreSQL queue's database (default: the store)
    keys: int = 6  # queue: distinct message keys
    console: Console | None = field(default=None, repr=False)  # fault lines as they happen

    @property
    def scheme(self) -> str:
        return parse_store_url(self.store).scheme

    @property
    def lease_ttl(self) -> float:
        """The ttl the workers' locks use."""
        if self.ttl is not None:
            return self.ttl
        return max(DEFAULT_TTL, MIN_TTL.get(self.scheme, 0.0))

    @property
    def liveness_bound(self) -> float:
        """After the faults stop, a new holder must take over (lock), a period be recorded
        (jobs) or a message be completed (queue) within this many seconds."""
        if self.workload == "jobs":
            return self.lease_ttl + self.period + runner_retry_cap()
        if self.workload == "queue":
            return self.lease_ttl + QUEUE_VISIBILITY
        return self.lease_ttl + 2 * self.retry

    @property
    def queue_source(self) -> str | None:
        """The queue workload's PostgreSQL URL: `queue_url`, else the store's own URL."""
        if self.queue_url is not None:
            return self.queue_url
        return self.store if self.scheme in ("postgresql", "postgres") else None

    @property
    def phases(self) -> list[tuple[str, float]]:
        """(kind, seconds) of each phase, the duration shared evenly: a lock, then a
        semaphore, lock_all and group when asked; the jobs and queue workloads have one phase
        of their own kind."""
        if self.workload != "lock":
            return [(self.workload, self.duration)]
        kinds = ["lock", *(["semaphore"] if self.semaphore_phase else []),
                 *(["lock_all"] if self.lock_all_phase else []),
                 *(["group"] if self.group_phase else [])]
        return [(kind, self.duration / len(kinds)) for kind in kinds]

    def check(self) -> None:
        """Fail with a clear message on a bad setting, before anything starts.

        Example::

            ChaosSettings("memory://").check()   # InvalidArgument: private to one process
        """
        if not isinstance(self.store, str):
            raise InvalidArgumentType(f"store must be a URL str, got {type(self.store).__name__}")
        if self.workload not in WORKLOADS:
            raise InvalidArgument(f"--workload must be one of {', '.join(WORKLOADS)}, got "
                                  f"{self.workload!r}")
        self._check_workload_options()
        if self.scheme == "memory":
            raise InvalidArgument(
                "--store memory:// is private to one process and chaos workers are separate "
                "processes; use sqlite:////PATH or file:///PATH for a local run")
        for option, low, high in (("workers", 2, 64), ("semaphore_limit", 2, 16)):
            value = getattr(self, option)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise InvalidArgument(f"--{option.replace('_', '-')} must be {low} to {high}, "
                                      f"got {value!r}")
        seed = self.seed
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise InvalidArgumentType(f"seed must be an int, got {type(self.seed).__name__}")
        unknown = sorted(set(self.faults) - set(FAULT_KINDS))
        if unknown or isinstance(self.faults, str):
            raise InvalidArgument(f"unknown fault(s) {', '.join(unknown or [str(self.faults)])};"
                                  f" --faults takes a comma-separated subset of "
                                  f"{','.join(FAULT_KINDS)}")
        _seconds("retry", self.retry, 0.01, 60.0)
        _seconds("late_signal", self.late_signal, 0.0, 60.0)
        ttl = _seconds("ttl", self.lease_ttl, MIN_TTL.get(self.scheme, 0.1), 3600.0)
        if not self.pause_factors or any(not 0 < factor <= 100 for factor in self.pause_factors):
            raise InvalidArgument("pause_factors must be multiples of the ttl in (0, 100]")
        shortest = min(seconds for _, seconds in self.phases)
        needed = 1.0 + self.liveness_bound + 2.0
        _seconds("duration", self.duration, 1.0, 7 * 86400.0)
        if shortest < needed:
            each = " per phase" if len(self.phases) > 1 else ""
            raise InvalidArgument(
                f"--duration {self.duration:g} is too short: with ttl {ttl:g} s each phase needs "
                f"at least {needed:g} s (1 s warm-up, then liveness within ttl + 2 x retry "
                f"= {self.liveness_bound:g} s, plus 2 s){each}; pass a longer --duration")


    def _check_workload_options(self) -> None:
        workload = self.workload
        for option, applies, wrong in (("skip_record", "jobs", self.skip_record),
                                       ("no_key_lock", "queue", not self.key_lock),
                                       ("queue_url", "queue", self.queue_url is not None),
                                       ("no_fencing", "lock", not self.fencing),
                                       ("late_signal", "lock", bool(self.late_signal)),
                                       ("semaphore_phase", "lock", self.semaphore_phase),
                                       ("lock_all_phase", "lock", self.lock_all_phase),
                                       ("group_phase", "lock", self.group_phase)):
            if wrong and workload != applies:
                raise InvalidArgument(f"--{option.replace('_', '-')} belongs to --workload "
                                      f"{applies}, not {workload}")
        if workload == "jobs":
            _seconds("period", self.period, 0.2, 3600.0)
        if workload == "queue":
            source = self.queue_source
            if source is None:
                raise InvalidArgument(
                    "--workload queue needs a PostgreSQL database for its queue: pass "
                    "--queue-url postgresql://... (or a postgresql:// --store), or "
                    "--queue-url azqueue:// for Azure Queue Storage")
            if not isinstance(source, str) or not source.startswith(
                    ("postgresql://", "postgres://", "azqueue://")):
                raise InvalidArgument(
                    "--queue-url must be a postgresql:// URL or azqueue:// (Azure Queue Storage "
                    "through AZURE_STORAGE_QUEUE_CONNECTION_STRING)")
            if source.startswith("azqueue://") and \
                    not os.environ.get("AZURE_STORAGE_QUEUE_CONNECTION_STRING"):
                raise InvalidArgument(
                    "--queue-url azqueue:// reads AZURE_STORAGE_QUEUE_CONNECTION_STRING, which "
                    "is not set")
            if not isinstance(self.keys, int) or isinstance(self.keys, bool) or \
                    not 1 <= self.keys <= 1000:
                raise InvalidArgument(f"--keys must be 1 to 1000, got {self.keys!r}")


def _seconds(option: str, value: object, low: float, high: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidArgumentType(f"{option} must be a number of seconds, got "
                                  f"{type(value).__name__}")
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidArgument(f"--{option} must be {low:g} to {high:g} seconds, got {value!r}")
    return float(value)
