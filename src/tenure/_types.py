"""Plain value types shared by the stores and the core: Grant, LeaseInfo, Capabilities, LostReason.

Example:
    >>> Grant("jobs", 0, "host:1:ab", "id1", 7, "jobs").token
    7
"""

from __future__ import annotations

import enum
import math
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple


class Grant(NamedTuple):
    """What a store hands back for one successful acquisition (or renewal).

    Example:
        >>> Grant("jobs", 0, "me", "lease-1", 3, "jobs").slot
        0
    """

    name: str
    slot: int
    holder: str
    lease_id: str
    token: int
    key: str
    # When the request that took this grant was sent (monotonic), if before try_acquire was
    # called: a lease handed over while its caller waited. The lease's deadline counts from it.
    sent_at: float = math.inf


class LostReason(str, enum.Enum):
    """Why a store refused to renew a lease.

    Example:
        >>> LostReason.TAKEN.value
        'taken'
    """

    EXPIRED = "expired"  # the store let it run out
    TAKEN = "taken"  # another holder has it now
    BROKEN = "broken"  # an admin called break_lease
    DEADLINE = "deadline"  # no renewal confirmed before the local deadline
    INHERITED = "inherited by a forked child"  # the parent process holds it, not this child
    WITH_ITS_SET = "another lease of its lock_all set was lost"  # lost as one (lock_all)


@dataclass(frozen=True)
class LeaseInfo:
    """One live lease as `store.leases()` reports it.

    `expires_at` is None where the kernel holds the lock until release (file store).

    Example:
        >>> LeaseInfo("jobs", "me", 3, None).token
        3
    """

    name: str
    holder: str
    token: int
    expires_at: datetime | None
    slot: int = 0


@dataclass(frozen=True)
class Member:
    """A live member of a group (`group.members()`): its id, the metadata it joined with (None
    while it cannot be read: azblob:// writes it a moment after the join), its lease's fencing
    token and when that lease ends unless renewed (None on the file store, whose kernel holds
    it until release).

    Example:
        >>> Member("instance-7", {"zone": "a"}, 12, None).metadata["zone"]
        'a'
    """

    id: str
    metadata: dict[str, Any] | None
    token: int
    expires_at: datetime | None


@dataclass(frozen=True)
class MembershipChange:
    """What one poll of `group.watch()` found: the members that joined and those that left
    since the last poll, and every live member now.

    Example:
        >>> MembershipChange((), (), ()).joined
        ()
    """

    joined: tuple[Member, ...]
    left: tuple[Member, ...]
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Capabilities:
    """What the core asks of a store before any I/O: the range of ttl it accepts (every ttl
    given to a lock, semaphore, job or queue is checked against it), and `ttl_hint`, added to
    the message of a ttl out of that range.

    Example:
        >>> Capabilities(min_ttl=0.1, max_ttl=86400.0).max_ttl
        86400.0
    """

    min_ttl: float
    max_ttl: float
    # Deprecated, read by nothing: the core learns what a store can do from the methods it has
    # (wait_and_acquire, report_losses_to), and renews every store in batches. Still accepted,
    # with a DeprecationWarning, for one release (no built-in store passes them).
    notifies_release: bool = False
    batched_renewal: bool = False
    expiry: str = "store clock"
    ttl_hint: str = ""

    def __post_init__(self) -> None:
        given = [name for name, default in _DEPRECATED_CAPABILITIES.items()
                 if getattr(self, name) != default]
        if given:
            warnings.warn(f"Capabilities({', '.join(f'{n}=...' for n in given)}) is deprecated "
                          "and will be removed in the next release: tenure reads only min_ttl, "
                          "max_ttl and ttl_hint", DeprecationWarning, stacklevel=3)


_DEPRECATED_CAPABILITIES = {"notifies_release": False, "batched_renewal": False,
                            "expiry": "store clock"}
