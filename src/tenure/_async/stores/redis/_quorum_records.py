"""The records API of the quorum store: each record written, versioned, on the masters that
hold the writer's lease, and read as the newest version a quorum of masters shows.

Example::

    records = QuorumRecords(store)
    written = await records.write(grant, '{"done": "2026-11-23"}')
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from tenure._async.stores._protocol import record_bytes
from tenure._async.stores.redis._fan_out import Down, downs, never
from tenure._errors import StoreUnavailable
from tenure._types import Grant

if TYPE_CHECKING:
    from tenure._async.stores.redis._quorum import AsyncRedisQuorumStore


class QuorumRecords:
    """The records of one quorum store (see the module docstring).

    Example::

        last = await QuorumRecords(store).read("nightly")
    """

    def __init__(self, store: AsyncRedisQuorumStore) -> None:
        self._store = store

    async def read(self, name: str) -> str | None:
        """The record with the highest version among the masters (at least `quorum` must
        answer): a write that counted reached a quorum, and any quorum shares a master with it.
        A read waits (within the timeout) for this store's calls of the name a master has not
        answered yet (a write that missed its quorum is taken back first).

        Example::

            last = await records.read("nightly")
        """
        store = self._store
        async def on(index: int) -> tuple[tuple[int, int], str] | Down | None:
            try:
                return await store.nodes[index]._read_versioned_record(name)
            except StoreUnavailable as exc:
                return Down(exc)

        answers = await store._masters.first(on, store._all, store._answered, store.timeout,
                                             name=name)
        errors = [answer for answer in answers if isinstance(answer, Down)]
        if len(store.nodes) - len(errors) < store.quorum:
            raise store._failure("reading the record", name, errors,
                                len(store.nodes) - len(errors))
        found = [answer for answer in answers if answer is not None
                 and not isinstance(answer, Down)]
        return max(found)[1] if found else None

    async def write(self, grant: Grant, record: str) -> bool:
        """Written where the lease's masters still hold it; True when at least `quorum` did.
        A write that missed its quorum is taken back where it landed, so it never wins a read.

        Example::

            written = await records.write(grant, "2026-11-23")
        """
        store = self._store
        record_bytes(record)
        store._refuse_if_closed("writing the record", grant.name)
        parts = dict(store._parts.get(grant.lease_id, {}))
        version = (grant.token, next(store._writes))

        async def on(index: int) -> bytes | Down | None:
            try:
                return await store.nodes[index]._write_versioned_record(parts[index], record,
                                                                      version)
            except StoreUnavailable as exc:
                return Down(exc)

        indexes = list(parts)
        # Writes that land after the answers were counted: undone if the write failed.
        parked: dict[int, bytes] = {}
        decided = failed = False

        def enough(got: dict[int, Any]) -> bool:
            written = sum(isinstance(answer, bytes) for answer in got.values())
            if written >= store.quorum:
                return True
            waiting = len(indexes) - len(got)
            return not waiting or written + waiting + downs(got) < store.quorum

        async def undo(index: int, undo: bytes | None = None) -> None:
            with contextlib.suppress(StoreUnavailable):  # best effort: the master may be down
                await store.nodes[index]._undo_record(grant.name, undo or landed[index])

        async def late(index: int, answer: Any) -> None:
            with store._mutex:
                if not decided and isinstance(answer, bytes):
                    parked[index] = answer
                if not failed or not isinstance(answer, bytes):
                    return
            await undo(index, answer)

        answers = await store._masters.first(on, indexes, enough, store.timeout, late, grant.name)
        landed = {index: answer for index, answer in zip(indexes, answers, strict=True)
                  if isinstance(answer, bytes)}
        errors = [answer for answer in answers if isinstance(answer, Down)]
        with store._mutex:
            decided, failed = True, len(landed) < store.quorum
            landed.update(parked if failed else {})
        if not failed:
            return True
        if landed:
            await store._masters.first(undo, list(landed), never, store.timeout)
        if len(landed) + len(errors) < store.quorum:
            return False
        raise store._failure("writing the record", grant.name, errors, len(parts) - len(errors))

    async def all(self, prefix: str = "") -> dict[str, str]:
        """The newest record of each name that starts with `prefix` (at least `quorum` masters
        must answer).

        Example::

            everything = await records.all("jobs/")
        """
        store = self._store
        async def on(index: int) -> dict[str, tuple[tuple[int, int], str]] | Down:
            try:
                return await store.nodes[index]._versioned_records(prefix)
            except StoreUnavailable as exc:
                return Down(exc)

        answers = await store._masters.first(on, store._all, store._answered, store.timeout,
                                             prefix=prefix)
        errors = [answer for answer in answers if isinstance(answer, Down)]
        if len(store.nodes) - len(errors) < store.quorum:
            raise store._failure("listing the records", prefix, errors,
                                len(store.nodes) - len(errors))
        newest: dict[str, tuple[tuple[int, int], str]] = {}
        for answer in answers:
            if not isinstance(answer, Down):
                for name, entry in answer.items():
                    if name not in newest or entry > newest[name]:
                        newest[name] = entry
        return {name: record for name, (_, record) in newest.items()}
