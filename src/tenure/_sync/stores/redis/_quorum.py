# GENERATED from src/tenure/_async/stores/redis/_quorum.py by scripts/unasync.py: do not edit.
"""`redis://A:6379,B:6379,C:6379/0?quorum=2`: leases granted by a quorum of independent Redis
masters (the scheme of Redlock), with fencing tokens.

One RedisStore per master does the work (its scripts, its batched renewal, its signal list,
its restart detection; the quorum's own needs are its methods with a leading underscore); this
module only counts answers (_fan_out.py asks the masters):

- every operation goes to the masters at once and returns as soon as their answers decide it
  (a quorum agreed, or a quorum became impossible), without waiting for the others; each
  master gets at most min(timeout, ttl x MASTER_SHARE) for an acquire or renewal (the timeout
  for the rest), and counts as down when it has not answered by then. Calls still running
  then go on in the background: a grant that comes late joins the lease it was asked for
  when that lease is still held (else it is released), so one slow master costs nothing.
- acquire runs the ACQUIRE script on every master at once, with one lease id for all. The lease
  counts when at least `quorum` masters granted the same slot and the answers came back before
  the holder's local deadline (ttl x 0.99 minus a margin, from when the requests were sent). Its
  token is the largest of their tokens, and every granting master whose counter is behind is
  raised to it, its part of the lease retokened, in a second round trip before the lease is
  handed out: so every later quorum, which shares a master with this one, issues a larger
  token, and a quorum lists the lease with the holder's token. Otherwise every master that
  granted is released at once (in the background when the acquire was cancelled).
- renewal is each master's batched renewal (one round trip per master per tick, all at once);
  a lease survives where at least `quorum` masters renewed it.
- release and break go to every master; waiters block on one master's signal list (every
  master's release pushes one) and move to the next when it fails or is silent, else poll.

See "Several masters (quorum)" in docs/stores/redis.md for what this does and does not
guarantee.

Example::

    store = tenure.connect("redis://r1:6379,r2:6379,r3:6379/0?quorum=2&prefix=myapp:")
"""

from __future__ import annotations

import functools
import itertools
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from redis.exceptions import RedisError

from tenure._sync import _shim
from tenure._sync.stores._protocol import (
    Backend,
    RecordKeeper,
    closed_store,
    subject,
)
from tenure._sync.stores.redis._fan_out import (
    Down,
    Masters,
    Silent,
    Skipped,
    downs,
    never,
    reason,
    settled,
)
from tenure._sync.stores.redis._quorum_records import QuorumRecords
from tenure._sync.stores.redis._settings import in_effect, parse_quorum, with_retain
from tenure._sync.stores.redis._single import RedisStore
from tenure._errors import InvalidArgumentType, StoreRefused, StoreUnavailable
from tenure._forks import in_child_after_fork
from tenure._timing import local_deadline
from tenure._types import Grant, LeaseInfo, LostReason
from tenure._urls import redact

# An acquire or renewal waits for a master at most this share of the ttl (and at most the
# store's timeout): a quorum goes on without a master that is late.
MASTER_SHARE = 0.25  # a tenth failed first acquires (new connections) of 0.3 s ttls under load
# A waiter gives a master this long past the end of its wait to answer, then tries the next.
# (Redis ends a blocking command's wait up to 1/hz = 100 ms late when it is idle.)
WAIT_SLACK = 0.25
# A prune waits this long at most for a master (its calls have the store's timeout each).
PRUNE_BOUND = 86400.0


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
        self.nodes = [RedisStore(node_url, **rest) for node_url in urls]
        self.url = redact(with_retain(in_effect(url, options), self.nodes[0].retain))
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
        self._masters = Masters(self.nodes)
        self._records = QuorumRecords(self)
        self._mutex = threading.Lock()  # _parts and a late grant's decision (sync: threads)
        self._closed = False
        in_child_after_fork(self, RedisQuorumStore._start_afresh)

    def _start_afresh(self) -> None:
        """In a forked child: the parent's leases are not this process's (each master's store
        forgets its connections itself)."""
        self._parts, self._freed = {}, {}
        self._masters.start_afresh()
        self._mutex = threading.Lock()
        self._id_prefix = "q" + secrets.token_hex(6)  # siblings must not share lease ids

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} quorum={self.quorum}>"

    def _failure(self, operation: str, name: str, errors: Sequence[Down],
                 answered: int) -> StoreUnavailable:
        """Too few masters answered. StoreRefused when the masters that refused for good (a
        wrong password, a closed store) leave too few to ever make a quorum; else transient."""
        failed = [down for down in errors if not isinstance(down, Skipped)]
        details = "; ".join(str(down.error) for down in failed)
        skipped = [str(down.error) for down in errors if isinstance(down, Skipped)]
        if skipped:  # the failures decided it at once: the others were never waited for
            details += f"; so the quorum cannot be reached, and {' and '.join(skipped)}"
        refused = sum(not down.error.transient for down in errors)
        kind = StoreRefused if len(self.nodes) - refused < self.quorum else StoreUnavailable
        return kind(
            f"{self.url}: {subject(operation, name)} needs {self.quorum} of {len(self.nodes)} "
            f"masters, {answered} answered: {details}")

    def _refuse_if_closed(self, operation: str, name: str) -> None:
        if self._closed:  # the masters' stores would say so too, each in its own words
            raise closed_store(self.url, operation, name)

    # -- fanning out ---------------------------------------------------------------------------

    def _answered(self, answers: dict[int, Any]) -> bool:
        """A quorum of masters answered (reads: any quorum shares a master with the quorum
        of a write that counted), or a quorum can no longer answer."""
        downs = sum(isinstance(answer, Down) for answer in answers.values())
        return len(answers) - downs >= self.quorum or len(self.nodes) - downs < self.quorum

    def _bound(self, ttl: float) -> float:
        """How long an acquire or a renewal waits for a master."""
        return min(self.timeout, ttl * MASTER_SHARE)

    # -- leases -------------------------------------------------------------------------------

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        self._refuse_if_closed("acquire", name)
        lease_id = f"{self._id_prefix}{next(self._ids)}"
        sent_at = _shim.monotonic()
        # Grants that come after the answers were counted: kept for the lease while it is
        # held, released when the acquire failed; parked here until it is decided.
        parked: dict[int, Grant] = {}
        decided = False

        def on(index: int) -> Grant | Down | None:
            try:
                return self.nodes[index]._acquire_as(lease_id, name, holder, ttl, limit)
            except StoreUnavailable as exc:
                return Down(exc)

        def enough(answers: dict[int, Any]) -> bool:  # granted; else held, or too few answer
            slots = Counter(a.slot for a in answers.values() if isinstance(a, Grant))
            most = max(slots.values(), default=0)
            waiting = len(self.nodes) - len(answers)
            if most >= self.quorum or most + waiting >= self.quorum:
                return most >= self.quorum
            return settled(answers, waiting, self.quorum)

        def late(index: int, answer: Any) -> None:
            if isinstance(answer, Grant):
                with self._mutex:
                    if not decided:
                        parked[index] = answer
                        return
                self._join_late(lease_id, index, answer)

        granted: dict[int, Grant] = {}
        too_late = False
        try:
            answers = self._masters.first(on, self._all, enough, self._bound(ttl), late, name)
            granted = {i: answer for i, answer in enumerate(answers) if isinstance(answer, Grant)}
            errors = [answer for answer in answers if isinstance(answer, Down)]
            # A semaphore's slot counts where a quorum granted that very slot.
            slots = Counter(grant.slot for grant in granted.values())
            slot = min(slots, key=lambda s: (-slots[s], s)) if slots else 0
            kept = {i: grant for i, grant in granted.items() if grant.slot == slot}
            if len(kept) >= self.quorum:
                token = max(grant.token for grant in kept.values())
                counted = kept

                def raised_late(index: int, outcome: Any) -> None:
                    if outcome is None:  # raised after all: a late grant, to join or release
                        late(index, counted[index])
                    else:
                        self._release_quietly(index, counted[index])

                raised = self._raise_counters(name, token, kept, self._bound(ttl),
                                                    raised_late)
                errors += [error for error in raised if error is not None]
                kept = {i: g for (i, g), error in zip(kept.items(), raised, strict=True)
                        if error is None}
                raising = {i for i, error in zip(counted, raised, strict=True)
                           if isinstance(error, Silent)}
                too_late = (len(kept) >= self.quorum
                            and _shim.monotonic() >= local_deadline(sent_at, ttl))
                if len(kept) >= self.quorum and not too_late:
                    with self._mutex:
                        self._parts[lease_id] = kept
                        decided = True
                        joining = dict(parked)
                    for index, grant in joining.items():  # no await: nothing to cancel here
                        self._masters.in_background(
                            name, [index], functools.partial(self._join_late, lease_id, index,
                                                             grant))
                    # Granted, but another slot, or its counter could not be raised: free it.
                    for index, grant in granted.items():
                        if index not in kept and index not in raising:
                            self._masters.in_background(
                                name, [index],
                                functools.partial(self._release_quietly, index, grant))
                    return Grant(name, slot, holder, lease_id, token,
                                 next(iter(kept.values())).key)
        except BaseException:  # cancelled or failed mid-way: free everything in the background
            with self._mutex:
                decided = True
                granted.update(parked)
            self._undo_later(granted)
            raise
        with self._mutex:
            decided = True
            granted.update(parked)
        self._undo(granted)
        if too_late:
            raise StoreUnavailable(
                f"{self.url}: acquire of {name!r}: the masters answered after the lease's "
                f"validity (ttl={ttl:g} s) ran out; check the masters' latency, or use a longer "
                "ttl")
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("acquire", name, errors, len(self.nodes) - len(errors))
        return None

    def _raise_counters(self, name: str, token: int, kept: dict[int, Grant],
                              bound: float,
                              late: Callable[[int, Any], Any]) -> list[Down | None]:
        """Raise the counter of each master in `kept` whose token is below `token`, and give
        its part of the lease that token (in `kept`), so that every later quorum issues a
        larger one and a quorum lists the lease with its holder's token."""
        def on(index: int) -> Down | None:
            if kept[index].token < token:
                try:
                    kept[index] = self.nodes[index]._raise_counter(kept[index], token)
                except StoreUnavailable as exc:
                    return Down(exc)
            return None

        if all(grant.token == token for grant in kept.values()):
            return [None] * len(kept)
        return self._masters.first(on, list(kept), never, bound, late, name)

    def _join_late(self, lease_id: str, index: int, grant: Grant) -> None:
        """A master's grant that came after its acquire counted: it joins the lease while
        that is held (so the lease lives on every master that granted it), with the lease's
        token when its own is above it; else it is released."""
        parts = self._parts.get(lease_id)
        token = max((part.token for part in parts.values()), default=0) if parts else 0
        if parts is not None and grant.token > token:
            try:
                retokened = self.nodes[index]._retoken(grant, token)
            except StoreUnavailable:
                retokened = None
            if retokened is None:  # gone, or unknown: make sure it is gone
                self._release_quietly(index, grant)
                return
            grant = retokened
        if not self._join(lease_id, index, grant):
            self._release_quietly(index, grant)

    def _join(self, lease_id: str, index: int, grant: Grant) -> bool:
        """Count a master's late grant in the lease it was asked for, if that is still held
        and has the same slot; False when it does not join (then release it)."""
        with self._mutex:
            parts = self._parts.get(lease_id)
            if parts is None or index in parts or next(iter(parts.values())).slot != grant.slot:
                return False
            self._parts[lease_id] = {**parts, index: grant}  # a new dict: renew may be reading
            return True

    def _release_quietly(self, index: int, grant: Grant) -> None:
        self.nodes[index]._release_quietly(grant)

    def _undo(self, grants: dict[int, Grant], after_lagging: bool = True) -> None:
        """Release what masters granted to an acquisition that did not count (best effort:
        what is left expires by itself); `after_lagging`: after this store's calls of the
        name that those masters had not answered in time."""
        def on(index: int) -> None:
            self._release_quietly(index, grants[index])

        if grants:
            name = next(iter(grants.values())).name
            with _shim.shielded():
                self._masters.first(on, list(grants), never, self.timeout,
                                          name=name if after_lagging else None)

    def _undo_later(self, grants: dict[int, Grant]) -> None:
        """_undo in the background, ahead of this store's next calls of the name there (so
        not after the calls lagging: it would wait for its own entry among them)."""
        if grants:
            self._masters.in_background(next(iter(grants.values())).name, list(grants),
                                        functools.partial(self._undo, grants,
                                                          after_lagging=False))

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        # Each lease's masters as they are now (a late grant may join while this runs).
        parts_of = {grant.lease_id: self._parts.get(grant.lease_id, {}) for grant in grants}

        def on(index: int) -> dict[str, Grant | LostReason] | Down:
            mine = [parts[index] for parts in parts_of.values() if index in parts]
            if not mine:
                return {}
            try:
                answers = self.nodes[index].renew(mine, ttl)
            except StoreUnavailable as exc:
                return Down(exc)
            return {grant.lease_id: answer for grant, answer in zip(mine, answers, strict=True)}

        def enough(answers: dict[int, Any]) -> bool:  # each lease renewed, lost, or unknown
            for grant in grants:
                renewed = waiting = down = 0
                for index in parts_of[grant.lease_id]:
                    answer = answers.get(index)
                    if index not in answers:
                        waiting += 1
                    elif isinstance(answer, Down):
                        down += 1
                    elif isinstance(answer.get(grant.lease_id), Grant):  # type: ignore[union-attr]
                        renewed += 1
                if renewed < self.quorum and waiting and renewed + waiting + down >= self.quorum:
                    return False
            return True

        by_node = self._masters.first(on, self._all, enough, self._bound(ttl))
        results: list[Grant | LostReason] = []
        errors = [answers for answers in by_node if isinstance(answers, Down)]
        lost: dict[str, dict[int, Grant]] = {}
        for grant in grants:
            parts = parts_of[grant.lease_id]
            renewed, unknown, reasons = 0, 0, list[LostReason]()
            for index in parts:
                answers = by_node[index]
                if isinstance(answers, Down):
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
                results.append(reason(reasons))
            else:
                raise self._failure("renewal", grant.name, errors, len(self.nodes) - len(errors))
        for lease_id, parts in lost.items():
            with self._mutex:
                parts = self._parts.pop(lease_id, parts)
            # Where a master still renewed it (or a late grant joined): free it there too.
            self._undo_later(parts)
        return results

    def release(self, grant: Grant) -> bool:
        self._refuse_if_closed("release", grant.name)
        with self._mutex:
            parts = self._parts.pop(grant.lease_id, None)
        if parts is None:
            return False
        freed_before = self._freed.pop(grant.lease_id, 0)

        def on(index: int) -> bool | Down:
            try:
                return self.nodes[index].release(parts[index])
            except StoreUnavailable as exc:
                return Down(exc)

        def enough(got: dict[int, Any]) -> bool:
            freed = freed_before + sum(answer is True for answer in got.values())
            if freed >= self.quorum:
                return True
            waiting = len(parts) - len(got)
            return not waiting or freed + waiting + downs(got) < self.quorum

        answers = dict(zip(parts, self._masters.first(on, list(parts), enough, self.timeout,
                                                    name=grant.name), strict=True))
        freed = freed_before + sum(answer is True for answer in answers.values())
        failed = {i: parts[i] for i, answer in answers.items()
                  if isinstance(answer, Down)}
        if freed >= self.quorum:
            return True
        if freed + len(failed) < self.quorum:
            return False
        self._parts[grant.lease_id], self._freed[grant.lease_id] = failed, freed
        errors = [answer for answer in answers.values() if isinstance(answer, Down)]
        raise self._failure("release", grant.name, errors, len(parts) - len(failed))

    def break_lease(self, name: str) -> int:
        self._refuse_if_closed("break", name)
        def on(index: int) -> int | Down:
            try:
                return self.nodes[index].break_lease(name)
            except StoreUnavailable as exc:
                return Down(exc)

        answers = self._masters.first(on, self._all, self._answered, self.timeout, name=name)
        errors = [answer for answer in answers if isinstance(answer, Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("break", name, errors, len(self.nodes) - len(errors))
        return max(answer for answer in answers if isinstance(answer, int))

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        """Leases that at least `quorum` masters list, with the token a quorum of them lists
        (the holder's: acquire gives it to every master it counts), and the expiry by which
        fewer than `quorum` masters would still hold the lease. A master whose grant came late
        may list another token until it joins the lease; while an acquire is still under way,
        the largest is shown."""
        def on(index: int) -> list[tuple[str, LeaseInfo]] | Down:
            try:
                return self.nodes[index]._listing(prefix)
            except StoreUnavailable as exc:
                return Down(exc)

        answers = self._masters.first(on, self._all, never, self.timeout, prefix=prefix)
        errors = [answer for answer in answers if isinstance(answer, Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("listing", prefix, errors, len(self.nodes) - len(errors))
        seen: dict[tuple[str, int], list[LeaseInfo]] = {}
        for answer in answers:
            if not isinstance(answer, Down):
                for lease_id, info in answer:
                    seen.setdefault((lease_id, info.slot), []).append(info)
        found = []
        for infos in seen.values():
            if len(infos) >= self.quorum:
                ends = sorted((info.expires_at for info in infos if info.expires_at), reverse=True)
                found.append(replace(infos[0], token=self._listed_token(infos),
                                     expires_at=ends[self.quorum - 1]))
        return sorted(found, key=lambda info: (info.name, info.slot))

    def _listed_token(self, infos: list[LeaseInfo]) -> int:
        token, count = Counter(info.token for info in infos).most_common(1)[0]
        return token if count >= self.quorum else max(info.token for info in infos)

    def prune(self, idle: float, dry_run: bool = False) -> int:
        """Prune every master (each forgets a name only once its own clock is past the
        name's counter by `idle`, see PRUNE); the number of names this call forgot on at least
        `quorum` masters (a master still freeing a slot in the background keeps the name until
        a later prune). Needs the answers of a quorum of masters.

        Every later grant's quorum shares a master with the quorum of each earlier grant of
        the name, which had raised its counter to that grant's token: that master still has
        the counter, or forgot it after its clock passed it; either way the later token, the
        largest of its quorum's, is larger.

        Example::

            forgotten = backend.prune(idle=3600.0)
        """
        self._refuse_if_closed("prune", "")

        def on(index: int) -> set[bytes] | Down:
            try:
                return self.nodes[index]._prune(idle, dry_run)
            except StoreUnavailable as exc:
                return Down(exc)

        # No bound of its own: a prune of many names takes one SCAN call per 1,000 keys, each
        # bounded by the store's timeout.
        answers = self._masters.first(on, self._all, never, PRUNE_BOUND)
        errors = [answer for answer in answers if isinstance(answer, Down)]
        if len(self.nodes) - len(errors) < self.quorum:
            raise self._failure("prune", "", errors, len(self.nodes) - len(errors))
        masters = Counter(key for answer in answers if not isinstance(answer, Down)
                          for key in answer)
        return sum(count >= self.quorum for count in masters.values())

    # -- records (_quorum_records.py) --------------------------------------------------------

    def read_record(self, name: str) -> str | None:
        """The newest record of `name` that a quorum of masters shows, or None.

        Example::

            last = backend.read_record("nightly-report")
        """
        return self._records.read(name)

    def write_record(self, grant: Grant, record: str) -> bool:
        """Replace the record of `grant.name` where the lease is held; True on a quorum.

        Example::

            written = backend.write_record(grant, '{"done": "2026-11-23"}')
        """
        return self._records.write(grant, record)

    def records(self, prefix: str = "") -> dict[str, str]:
        """Every record whose name starts with `prefix`, by name.

        Example::

            everything = backend.records("jobs/")
        """
        return self._records.all(prefix)

    # -- waiting ------------------------------------------------------------------------------

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        """Block on one master's signal list (each master's release pushes one); when that
        master fails, on the next one; when all failed, poll (sleep out the timeout)."""
        deadline = _shim.monotonic() + timeout

        def on(index: int) -> bool | Down:
            try:
                return self.nodes[index]._wait_signal(name, deadline)
            except (RedisError, OSError) as exc:
                return Down(StoreUnavailable(str(exc)))

        for _ in self._all:
            index = self._waiting_on
            bound = max(0.0, deadline - _shim.monotonic()) + WAIT_SLACK
            [answer] = self._masters.first(on, [index], never, bound)
            if not isinstance(answer, Down):
                return
            # Failed, or silent past the end of the wait: the next master's list from now on.
            self._waiting_on = (index + 1) % len(self.nodes)
            if _shim.monotonic() >= deadline:
                return
        _shim.sleep(max(0.0, deadline - _shim.monotonic()))

    def close(self) -> None:
        self._closed = True
        for node in self.nodes:
            node.close()
