# GENERATED from src/tenure/_async/stores/redis_quorum.py by scripts/unasync.py: do not edit.
"""`redis://A:6379,B:6379,C:6379/0?quorum=2`: leases granted by a quorum of independent Redis
masters (the scheme of Redlock), with fencing tokens.

One RedisStore per master does the work (its scripts, its batched renewal, its signal list,
its restart detection); this module only counts answers:

- acquire runs the ACQUIRE script on every master at once, with one lease id for all. The lease
  counts when at least `quorum` masters granted the same slot and the answers came back before
  the holder's local deadline (ttl x 0.99 minus a margin, from when the requests were sent). Its
  token is the largest of their tokens, and every granting master whose counter is behind is
  raised to it (a second round trip) before the lease is handed out: so every later quorum,
  which shares a master with this one, issues a larger token. Otherwise every master that
  granted is released at once.
- renewal is each master's batched renewal (one round trip per master per tick, all at once);
  a lease survives where at least `quorum` masters renewed it.
- release and break go to every master; waiters block on one master's signal list (every
  master's release pushes one) and move to the next when it fails, else poll.

See "Several masters (quorum)" in docs/stores/redis.md for what this does and does not
guarantee.

Example::

    store = tenure.connect("redis://r1:6379,r2:6379,r3:6379/0?quorum=2&prefix=myapp:")
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from redis.exceptions import RedisError

from tenure._sync import _shim
from tenure._sync.stores._protocol import Backend, RecordKeeper, record_bytes
from tenure._sync.stores.redis import RedisStore
from tenure._errors import InvalidArgument, InvalidArgumentType, StoreUnavailable
from tenure._timing import local_deadline
from tenure._types import Grant, LeaseInfo, LostReason
from tenure._urls import redact

# When masters disagree on why a lease is gone, the reason most of them gave; on a tie, this.
_REASON_ORDER = (LostReason.BROKEN, LostReason.TAKEN, LostReason.EXPIRED)


def open_store(url: str | None = None, **options: Any) -> Backend:
    """The Redis store for `url`: a quorum store when the URL names several masters.

    Example::

        backend = open_store("redis://r1,r2,r3/0")  # RedisQuorumStore, quorum 2
    """
    if isinstance(url, str) and "," in urlsplit(url).netloc:
        return RedisQuorumStore(url, **options)
    return RedisStore(url, **options)


def parse_quorum(url: str, options: dict[str, Any]) -> tuple[list[str], int, dict[str, Any]]:
    """The masters' URLs (credentials and database shared), the quorum (a majority unless
    given), and the options left for each master's store.

    Example:
        >>> urls, quorum, rest = parse_quorum("redis://a:1,b:2,c:3/0?prefix=x:", {})
        >>> urls, quorum, rest
        (['redis://a:1/0', 'redis://b:2/0', 'redis://c:3/0'], 2, {'prefix': 'x:'})
    """
    parts = urlsplit(url)
    shown = redact(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss"):
        raise InvalidArgument(
            f"url {shown!r}: several masters need redis:// or rediss://, e.g. "
            "redis://r1:6379,r2:6379,r3:6379/0")
    credentials, _, hosts = parts.netloc.rpartition("@")
    names = hosts.split(",")
    if any(not name.strip() for name in names):
        raise InvalidArgument(
            f"url {shown!r} has an empty host between commas; e.g. redis://r1:6379,r2:6379,"
            "r3:6379/0")
    if len(set(names)) < len(names):
        raise InvalidArgument(f"url {shown!r} names a master twice; name each master once")
    at = f"{credentials}@" if credentials else ""
    urls = [f"{scheme}://{at}{name}{parts.path}" for name in names]
    merged: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(options)
    if "client" in merged:
        raise InvalidArgument(
            "client= takes one client; several masters are named in the URL only")
    quorum = _quorum(merged.pop("quorum", len(names) // 2 + 1), len(names))
    return urls, quorum, merged


def _quorum(value: object, masters: int) -> int:
    majority = masters // 2 + 1
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).isdigit()):
        raise InvalidArgumentType(
            f"quorum must be a whole number of masters, got {value!r}; e.g. quorum={majority}")
    quorum = int(str(value))
    if not majority <= quorum <= masters:
        raise InvalidArgument(
            f"quorum={quorum} is out of range for {masters} masters: give {majority} to "
            f"{masters}. A quorum of half the masters or fewer would let two holders hold one "
            "lock at once (two groups of masters that share none could each grant it)")
    return quorum


class _Down(NamedTuple):
    """A master's failure, as one answer among the others' (not raised)."""

    error: StoreUnavailable


class RedisQuorumStore(Backend, RecordKeeper):
    """Leases granted by at least `quorum` of several independent Redis masters.

    The URL names the masters, comma-separated; user, password and database are the same on
    each. Options: `quorum` (default: a majority; at least a majority and at most the number of
    masters), and the options of one master's store (`prefix`, `timeout`, `restart_grace`,
    `db`, TLS settings), which apply to each.

    Example::

        backend = RedisQuorumStore("redis://r1:6379,r2:6379,r3:6379/0", quorum=2)
        store = tenure.connect(backend)
    """

    capabilities = RedisStore.capabilities

    def __init__(self, url: str, **options: Any) -> None:
        if not isinstance(url, str):
            raise InvalidArgumentType(f"url must be a str, got {type(url).__name__}")
        urls, self.quorum, rest = parse_quorum(url, options)
        self.url = redact(url)
        self.nodes = [RedisStore(node_url, **rest) for node_url in urls]
        self.prefix, self.timeout = self.nodes[0].prefix, self.nodes[0].timeout
        self._all = range(len(self.nodes))
        self._ids = itertools.count()
        self._writes = itertools.count()  # orders records written under one lease
        self._id_prefix = "q" + secrets.token_hex(6)
        # Each live lease's grants, by lease id: master index -> that master's grant (the
        # masters' tokens differ, and each compares its own value).
        self._parts: dict[str, dict[int, Grant]] = {}
        self._freed: dict[str, int] = {}  # masters a release failed part-way on had freed
        self._waiting_on = 0  # the master whose signal lists waiters block on

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} quorum={self.quorum}>"

    def _failure(self, operation: str, name: str, errors: Sequence[_Down],
                 answered: int) -> StoreUnavailable:
        details = "; ".join(str(down.error) for down in errors)
        return StoreUnavailable(
            f"{self.url}: {operation} of {name!r} needs {self.quorum} of {len(self.nodes)} "
            f"masters, {answered} answered: {details}")

    # -- leases -------------------------------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        sent_at = _shim.monotonic()

        def on(index: int) -> Grant | _Down | None:
            try:
                return self.nodes[index].acquire_as(lease_id, name, holder, ttl, limit)
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = _on_each(on, self._all)
        granted = {i: answer for i, answer in enumerate(answers) if isinstance(answer, Grant)}
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        # A semaphore's slot counts where a quorum granted that very slot.
        slots = Counter(grant.slot for grant in granted.values())
        slot = min(slots, key=lambda s: (-slots[s], s)) if slots else 0
        kept = {i: grant for i, grant in granted.items() if grant.slot == slot}
        late = False
        if len(kept) >= self.quorum:
            token = max(grant.token for grant in kept.values())
            raised = self._raise_counters(name, token, kept)
            errors += [error for error in raised if error is not None]
            kept = {i: g for (i, g), error in zip(kept.items(), raised, strict=True)
                    if error is None}
            late = len(kept) >= self.quorum and _shim.monotonic() >= local_deadline(sent_at, ttl)
            if len(kept) >= self.quorum and not late:
                self._parts[lease_id] = kept
                return Grant(name, slot, holder, lease_id, token, next(iter(kept.values())).key)
        self._undo(granted)
        if late:
            raise StoreUnavailable(
                f"{self.url}: acquire of {name!r}: the masters answered after the lease's "
                f"validity (ttl={ttl:g} s) ran out; check the masters' latency, or use a longer "
                "ttl")
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("acquire", name, errors, len(self.nodes) - len(errors))
        return None

    def _raise_counters(self, name: str, token: int,
                              kept: dict[int, Grant]) -> list[_Down | None]:
        """Raise the counter of each master in `kept` whose token is below `token`."""
        def on(index: int) -> _Down | None:
            if kept[index].token < token:
                try:
                    self.nodes[index].raise_counter(name, token)
                except StoreUnavailable as exc:
                    return _Down(exc)
            return None

        if all(grant.token == token for grant in kept.values()):
            return [None] * len(kept)
        return _on_each(on, list(kept))

    def _undo(self, grants: dict[int, Grant]) -> None:
        """Release what masters granted to an acquisition that did not count (best effort:
        what is left expires by itself)."""
        def on(index: int) -> None:
            with contextlib.suppress(StoreUnavailable):
                self.nodes[index].release(grants[index])

        if grants:
            with _shim.shielded():
                _on_each(on, list(grants))

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        def on(index: int) -> dict[str, Grant | LostReason] | _Down:
            mine = [self._parts[g.lease_id][index] for g in grants
                    if index in self._parts.get(g.lease_id, {})]
            if not mine:
                return {}
            try:
                answers = self.nodes[index].renew(mine, ttl)
            except StoreUnavailable as exc:
                return _Down(exc)
            return {grant.lease_id: answer for grant, answer in zip(mine, answers, strict=True)}

        by_node = _on_each(on, self._all)
        results: list[Grant | LostReason] = []
        errors = [answers for answers in by_node if isinstance(answers, _Down)]
        lost: dict[str, dict[int, Grant]] = {}
        for grant in grants:
            parts = self._parts.get(grant.lease_id, {})
            renewed, unknown, reasons = 0, 0, list[LostReason]()
            for index in parts:
                answers = by_node[index]
                if isinstance(answers, _Down):
                    unknown += 1
                else:
                    answer = answers[grant.lease_id]
                    if isinstance(answer, Grant):
                        renewed += 1
                    else:
                        reasons.append(answer)
            if renewed >= self.quorum:
                results.append(grant)
            elif renewed + unknown < self.quorum:
                lost[grant.lease_id] = parts
                results.append(_reason(reasons))
            else:
                raise self._failure("renewal", grant.name, errors, len(self.nodes) - len(errors))
        for lease_id, parts in lost.items():
            self._parts.pop(lease_id, None)
            self._undo(parts)  # where a master still renewed it: free it there too
        return results

    def release(self, grant: Grant) -> bool:
        parts = self._parts.pop(grant.lease_id, None)
        if parts is None:
            return False
        freed_before = self._freed.pop(grant.lease_id, 0)

        def on(index: int) -> bool | _Down:
            try:
                return self.nodes[index].release(parts[index])
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = dict(zip(parts, _on_each(on, list(parts)), strict=True))
        freed = freed_before + sum(answer is True for answer in answers.values())
        failed = {i: parts[i] for i, answer in answers.items()
                  if isinstance(answer, _Down)}
        if freed >= self.quorum:
            return True
        if freed + len(failed) < self.quorum:
            return False
        self._parts[grant.lease_id], self._freed[grant.lease_id] = failed, freed
        errors = [answer for answer in answers.values() if isinstance(answer, _Down)]
        raise self._failure("release", grant.name, errors, len(parts) - len(failed))

    def break_lease(self, name: str) -> int:
        def on(index: int) -> int | _Down:
            try:
                return self.nodes[index].break_lease(name)
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = _on_each(on, self._all)
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("break", name, errors, len(self.nodes) - len(errors))
        return max(answer for answer in answers if isinstance(answer, int))

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        """Leases that at least `quorum` masters list; the largest token among them, and the
        expiry by which fewer than `quorum` masters would still hold the lease."""
        def on(index: int) -> list[tuple[str, LeaseInfo]] | _Down:
            try:
                return self.nodes[index].listing(prefix)
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = _on_each(on, self._all)
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("listing", prefix, errors, len(self.nodes) - len(errors))
        seen: dict[tuple[str, int], list[LeaseInfo]] = {}
        for answer in answers:
            if not isinstance(answer, _Down):
                for lease_id, info in answer:
                    seen.setdefault((lease_id, info.slot), []).append(info)
        found = []
        for infos in seen.values():
            if len(infos) >= self.quorum:
                ends = sorted((info.expires_at for info in infos if info.expires_at), reverse=True)
                found.append(replace(infos[0], token=max(info.token for info in infos),
                                     expires_at=ends[self.quorum - 1]))
        return sorted(found, key=lambda info: (info.name, info.slot))

    # -- records ------------------------------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        """The record with the highest version among the masters (at least `quorum` must
        answer): a write that counted reached a quorum, and any quorum shares a master with it."""
        def on(index: int) -> tuple[tuple[int, int], str] | _Down | None:
            try:
                return self.nodes[index].read_versioned_record(name)
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = _on_each(on, self._all)
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("reading the record", name, errors,
                                len(self.nodes) - len(errors))
        found = [answer for answer in answers if answer is not None
                 and not isinstance(answer, _Down)]
        return max(found)[1] if found else None

    def write_record(self, grant: Grant, record: str) -> bool:
        """Written where the lease's masters still hold it; True when at least `quorum` did.
        A write that missed its quorum is taken back where it landed, so it never wins a read."""
        record_bytes(record)
        parts = dict(self._parts.get(grant.lease_id, {}))
        version = (grant.token, next(self._writes))

        def on(index: int) -> bytes | _Down | None:
            try:
                return self.nodes[index].write_versioned_record(parts[index], record,
                                                                      version)
            except StoreUnavailable as exc:
                return _Down(exc)

        indexes = list(parts)
        answers = _on_each(on, indexes)
        landed = {index: answer for index, answer in zip(indexes, answers, strict=True)
                  if isinstance(answer, bytes)}
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        if len(landed) >= self.quorum:
            return True

        def undo(index: int) -> None:
            with contextlib.suppress(StoreUnavailable):  # best effort: the master may be down
                self.nodes[index].undo_record(grant.name, landed[index])

        if landed:
            _on_each(undo, list(landed))
        if len(landed) + len(errors) < self.quorum:
            return False
        raise self._failure("writing the record", grant.name, errors, len(parts) - len(errors))

    def records(self, prefix: str = "") -> dict[str, str]:
        def on(index: int) -> dict[str, tuple[tuple[int, int], str]] | _Down:
            try:
                return self.nodes[index].versioned_records(prefix)
            except StoreUnavailable as exc:
                return _Down(exc)

        answers = _on_each(on, self._all)
        errors = [answer for answer in answers if isinstance(answer, _Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("listing the records", prefix, errors,
                                len(self.nodes) - len(errors))
        newest: dict[str, tuple[tuple[int, int], str]] = {}
        for answer in answers:
            if not isinstance(answer, _Down):
                for name, entry in answer.items():
                    if name not in newest or entry > newest[name]:
                        newest[name] = entry
        return {name: record for name, (_, record) in newest.items()}

    # -- waiting ------------------------------------------------------------------------------

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Block on one master's signal list (each master's release pushes one); when that
        master fails, on the next one; when all failed, poll (sleep out the timeout)."""
        deadline = _shim.monotonic() + timeout
        for _ in self._all:
            try:
                self.nodes[self._waiting_on].wait_signal(name, deadline)
                return
            except (RedisError, OSError):
                self._waiting_on = (self._waiting_on + 1) % len(self.nodes)
        _shim.sleep(max(0.0, deadline - _shim.monotonic()))

    def close(self) -> None:
        for node in self.nodes:
            node.close()


def _on_each(on: Callable[[int], Any], masters: Sequence[int]) -> list[Any]:
    """`on(master)` for each master at once, results in order (typed loosely: `on` is a
    coroutine function in tenure.aio and a plain one in tenure)."""
    try:
        return _shim.run_all(on, masters)
    except RuntimeError as exc:  # sync API at interpreter exit: no new threads, so in turn
        if "shutdown" not in str(exc):
            raise
        return [on(master) for master in masters]


def _reason(reasons: list[LostReason]) -> LostReason:
    """Why a lease is lost, when the masters that answered gave `reasons`."""
    if not reasons:
        return LostReason.EXPIRED
    counts = Counter(reasons)
    return min(counts, key=lambda reason: (-counts[reason], _REASON_ORDER.index(reason)))
