"""store.group(name): membership (issue 22, part 3) on every store through both APIs: members
join with an id and metadata, are listed, leave by release, cannot join twice under one id
while the first lives, and a watch reports joins and departures."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from conftest import Target, call, eventually

import tenure

pytestmark = pytest.mark.anyio


async def ids(group: Any) -> list[str]:
    return [member.id for member in await call(group.members())]


async def next_change(watch: Any, is_async: bool) -> tenure.MembershipChange:
    change: tenure.MembershipChange = await watch.__anext__() if is_async else next(watch)
    return change


async def test_members_join_with_metadata_are_listed_and_leave(target: Target) -> None:
    ttl = target.ttl(5)
    group, elsewhere = target.connect().group("workers", ttl=ttl), target.connect()
    first = await call(group.join("instance-a", {"zone": "eu", "port": 8080}))
    second = await call(elsewhere.group("workers", ttl=ttl).join("instance-b"))
    # A group whose name the first's prefixes is another group.
    other_group = await call(elsewhere.group("workers:x", ttl=ttl).join("instance-c"))
    members = await call(group.members())
    assert [(m.id, m.token) for m in members] == [
        ("instance-a", first.token), ("instance-b", second.token)]
    # Where a holder is written after the grant (azblob://), another instance's member shows
    # its metadata a moment later.
    await eventually(lambda: has_metadata(group, "instance-b"), 5, "instance-b's metadata")
    assert await metadata(group, "instance-b") == {}
    assert await metadata(group, "instance-a") == {"port": 8080, "zone": "eu"}
    assert await ids(elsewhere.group("workers:x", ttl=ttl)) == ["instance-c"]
    assert await call(first.release()) is True  # leaves the group
    assert await ids(group) == ["instance-b"]
    for lease in (second, other_group):
        assert await call(lease.release()) is True
    assert await ids(group) == []


async def has_metadata(group: Any, member_id: str) -> bool:
    return await metadata(group, member_id) is not None


async def metadata(group: Any, member_id: str) -> dict[str, Any] | None:
    found = {m.id: m.metadata for m in await call(group.members())}
    return found[member_id]


async def test_an_id_held_by_a_live_member_does_not_join_again(target: Target) -> None:
    ttl = target.ttl(5)
    group = target.connect().group("workers", ttl=ttl)
    first = await call(group.join("instance-a"))
    with pytest.raises(tenure.LockTimeout):
        await call(target.connect().group("workers", ttl=ttl).join("instance-a", timeout=0))
    assert await call(first.release()) is True
    again = await call(target.connect().group("workers", ttl=ttl).join("instance-a", timeout=0))
    assert again.token > first.token
    assert await call(again.release()) is True


async def test_the_watch_reports_who_joined_and_who_left(target: Target) -> None:
    ttl = target.ttl(5)
    group = target.connect().group("workers", ttl=ttl)
    watch = group.watch(every=0.02)
    try:
        assert await next_change(watch, target.is_async) == tenure.MembershipChange((), (), ())
        member = await call(target.connect().group("workers", ttl=ttl).join("instance-a", {"n": 1}))
        joined = await next_change(watch, target.is_async)
        assert [(m.id, m.token) for m in joined.joined] == [("instance-a", member.token)]
        assert joined.left == () and joined.members == joined.joined
        assert await call(member.release()) is True
        left = await next_change(watch, target.is_async)
        assert [m.id for m in left.left] == ["instance-a"] and left.joined == ()
        assert left.members == ()
    finally:
        await call(watch.aclose() if target.is_async else watch.close())


@pytest.mark.parametrize(("member_id", "metadata", "error", "message"), [
    ("", None, tenure.InvalidArgument, "member_id is empty"),
    (7, None, tenure.InvalidArgumentType, "member_id must be a str, got int"),
    ("a", ["zone"], tenure.InvalidArgumentType, r"metadata must be a dict \(a JSON object\)"),
    ("a", {"at": object()}, tenure.InvalidArgument, "metadata must be JSON-serializable"),
    ("a", {"notes": "x" * 300}, tenure.InvalidArgument,
     r"member_id and metadata take 3\d\d characters as JSON, more than the 256"),
])
async def test_bad_input_is_refused_at_the_call_and_writes_nothing(
        target: Target, member_id: Any, metadata: Any, error: type[Exception],
        message: str) -> None:
    store = target.connect()
    group = store.group("workers", ttl=target.ttl(5))
    with pytest.raises(error, match=message):
        await call(group.join(member_id, metadata))
    assert await call(store.leases()) == []


async def test_a_bad_group_is_refused_where_it_is_made(target: Target) -> None:
    store = target.connect()
    with pytest.raises(tenure.InvalidArgument, match="ttl"):
        store.group("workers", ttl=-1)
    with pytest.raises(tenure.InvalidArgument, match="give the group a name"):
        store.group("", ttl=target.ttl(5))
    with pytest.raises(tenure.InvalidArgument, match="every"):
        await next_change(store.group("workers", ttl=target.ttl(5)).watch(every=0),
                          target.is_async)


async def test_a_killed_instance_s_member_leaves_by_expiry(
        target: Target, processes: list[subprocess.Popen[str]]) -> None:
    if not target.kind.shared_between_processes:
        pytest.skip(f"{target.kind.name}:// lives inside one process")
    ttl = target.ttl(1.0)
    group = target.connect().group("workers", ttl=ttl)
    # A process holding the member's lease (as join() takes it), then SIGKILLed.
    holder, token = target.hold_in_process(group.prefix + "instance-a", ttl)
    processes.append(holder)
    assert [(m.id, m.token) for m in await call(group.members())] == [("instance-a", token)]
    holder.kill()
    holder.wait()

    async def gone() -> bool:
        return await ids(group) == []

    await eventually(gone, ttl + 2, "the killed instance's member to expire")
