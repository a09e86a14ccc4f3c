"""Group membership (`store.group(name)`): instances join with a member id and metadata, each
member a lease renewed and lost like any other, and list or watch the live members.

A member is a lock on `group:<length of name>:<name>:<member id>` (the length keeps groups
whose names prefix each other apart) whose holder is the member's id and metadata as JSON, so
that one `store.leases(prefix)` lists the whole group with no request per member, on every
store. It leaves by release (or the store's close), or by expiry when its instance died. The
watch polls the listing: no store notifies membership changes yet.

Example::

    group = store.group("invoice-workers", ttl=15)
    async with group.join("instance-7", metadata={"zone": "a"}) as member:
        print([m.id for m in await group.members()])
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tenure._async import _shim
from tenure._async._lease import AsyncLease
from tenure._async._shim import AsyncAcquiring
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._timing import to_seconds
from tenure._types import Member, MembershipChange

if TYPE_CHECKING:
    from tenure._async._store import AsyncStore

GROUP_PREFIX = "group:"
MAX_HOLDER = 256  # the store's limit on a holder, where the member's id and metadata travel


class AsyncGroup:
    """The members of one group; made by `store.group(name, ttl=...)`.

    Example::

        group = store.group("invoice-workers", ttl=15)
        member = await group.join("instance-7", metadata={"zone": "a"})
        await member.release()   # leaves the group
    """

    def __init__(self, store: AsyncStore, name: str, ttl: float) -> None:
        self.name = name
        self.ttl = ttl
        self._store = store
        self.prefix = f"{GROUP_PREFIX}{len(name)}:{name}:"

    def __repr__(self) -> str:
        return f"<Group {self.name!r} ttl={self.ttl:g}>"

    def join(self, member_id: str, metadata: Mapping[str, Any] | None = None, *,
             timeout: float | timedelta | None = None,
             on_lost: Callable[[AsyncLease], object] | None = None) -> AsyncAcquiring[AsyncLease]:
        """Join as `member_id` with `metadata` (a JSON object; id and metadata fit in 256
        characters of JSON): the member's lease, renewed in the background until released
        (leaving the group) or lost. An id held by a live member waits for it to leave or
        expire, up to `timeout` (None: a ttl and a second, the time a dead instance's member
        takes to expire; 0: once), then tenure.LockTimeout.

        Example::

            async with group.join("instance-7", metadata={"zone": "a"}) as member:
                await serve(fence=member.token)
        """
        if not isinstance(member_id, str):
            raise InvalidArgumentType(f"member_id must be a str, got {type(member_id).__name__}")
        if not member_id:
            raise InvalidArgument("member_id is empty: give each instance an id of its own, "
                                  "e.g. its host name and process id")
        holder = _holder(member_id, metadata)
        wait = self.ttl + 1.0 if timeout is None else timeout
        lock = self._store.lock(self.prefix + member_id, ttl=self.ttl, holder=holder,
                                on_lost=on_lost)
        return lock.acquire(timeout=wait)

    async def members(self) -> list[Member]:
        """The live members, sorted by id (a member's metadata is None while it cannot be
        read: on azblob:// another instance's member shows it within about a second).

        Example::

            for member in await group.members():
                print(member.id, member.metadata, member.token)
        """
        return [Member(info.name[len(self.prefix):], _metadata(info.holder), info.token,
                       info.expires_at)
                for info in await self._store.leases(self.prefix) if info.slot == 0]

    async def watch(self, every: float | timedelta = 1.0) -> AsyncIterator[MembershipChange]:
        """The group's changes, polled every `every` seconds: first every live member as
        joined, then each change (members that joined, members that left, by id and token: a
        member that left and joined again between two polls is in both).

        Example::

            async for change in group.watch(every=1.0):
                print("joined", [m.id for m in change.joined], "left", [m.id for m in change.left])
        """
        interval = to_seconds(every, "every")
        if not interval > 0:
            raise InvalidArgument(f"every={interval:g} must be more than 0 seconds")
        known: dict[tuple[str, int], Member] | None = None  # None: not polled yet
        while True:
            now = {(member.id, member.token): member for member in await self.members()}
            joined = tuple(member for key, member in now.items() if key not in (known or {}))
            left = tuple(member for key, member in (known or {}).items() if key not in now)
            if joined or left or known is None:
                yield MembershipChange(joined, left, tuple(now.values()))
            known = now
            await _shim.sleep(interval)


def _holder(member_id: str, metadata: Mapping[str, Any] | None) -> str:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentType(
            f"metadata must be a dict (a JSON object), got {type(metadata).__name__}")
    try:
        holder = json.dumps({"member": member_id, "metadata": dict(metadata or {})},
                            separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"metadata must be JSON-serializable: {exc}") from None
    if len(holder) > MAX_HOLDER:
        raise InvalidArgument(
            f"member_id and metadata take {len(holder)} characters as JSON, more than the "
            f"{MAX_HOLDER} a lease's holder keeps: keep metadata small (an address, a zone) "
            "and put the rest where the members can read it")
    return holder


def _metadata(holder: str) -> dict[str, Any] | None:
    """The metadata a member's holder carries; None when it cannot be read (yet: azblob://
    writes a holder into the blob a moment after the grant; or a lease under the group's
    names that no join() made)."""
    try:
        parsed = json.loads(holder)
    except ValueError:
        return None
    metadata = parsed.get("metadata") if isinstance(parsed, dict) else None
    return metadata if isinstance(metadata, dict) else None
