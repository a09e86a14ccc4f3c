"""Calls to several Redis masters at once, for the quorum store: each call's answer counted
as it comes, the caller going on as soon as the answers decide, and the calls still running
then finishing in the background (their outcomes to a `late` callback).

Example::

    masters = Masters(nodes)
    answers = await masters.first(on, [0, 1, 2], enough, bound=0.5)
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tenure._async import _shim
from tenure._async.stores.redis._single import AsyncRedisStore
from tenure._errors import StoreUnavailable
from tenure._types import LostReason

# When masters disagree on why a lease is gone, the reason most of them gave; on a tie, this.
_REASON_ORDER = (LostReason.BROKEN, LostReason.TAKEN, LostReason.EXPIRED)
# A master that has this many calls unanswered past their bound is skipped (counted as down)
# until some of them end: a silent master must not pile up stalled calls, and threads in the
# sync API, at every operation.
MAX_OVERDUE = 4


class Down(NamedTuple):
    """A master's failure, as one answer among the others' (not raised)."""

    error: StoreUnavailable


class Silent(Down):
    """A master that had not answered when its caller went on (its call goes on)."""


class Skipped(Silent):
    """A Silent master not waited for: the others' answers had decided the call before its
    bound (e.g. enough of them refused that no quorum could be reached)."""


class Masters:
    """One store per master, and the calls running on each (see `first`).

    Example::

        masters = Masters([AsyncRedisStore(url) for url in urls])
    """

    def __init__(self, nodes: list[AsyncRedisStore]) -> None:
        self.nodes = nodes
        self.start_afresh()

    def start_afresh(self) -> None:
        """Forget the calls running (a forked child runs none of its parent's).

        Example::

            masters.start_afresh()
        """
        # Calls running on each master: call number -> when its caller stops waiting for it.
        self._running: list[dict[int, float]] = [{} for _ in self.nodes]
        self._calls = itertools.count()
        # This store's calls of a name that a master had not answered when their caller went
        # on, and its work on a name left to the background (see in_background): the next
        # call of that name to that master waits (within its bound) for them.
        self._lagging: dict[tuple[int, str], list[_shim.Event]] = {}
        self._lagging_lock = threading.Lock()  # the sync API's calls end on threads

    def unfinished(self) -> int:
        """Calls still running, or whose late outcome is still being handled (a release that
        returned at its quorum goes on at the slower masters).

        Example::

            masters.unfinished()  # 0 once every master answered every call
        """
        return sum(map(len, self._running)) + sum(map(len, list(self._lagging.values())))

    async def first(self, on: Callable[[int], Any], masters: Sequence[int],
                     enough: Callable[[dict[int, Any]], bool], bound: float,
                     late: Callable[[int, Any], Any] | None = None,
                     name: str | None = None, prefix: str | None = None) -> list[Any]:
        """`on(master)` for each master at once; the answers in order, as soon as
        `enough(answers so far, by master)` holds, all answered, or `bound` seconds passed.
        A master that has not answered by then, or that has MAX_OVERDUE calls overdue already
        (it is not asked), answers Down. `late(master, outcome)` gets the outcome of each call
        that ends after that (typed loosely: coroutines in tenure.aio, plain calls in tenure).

        With `name`: a call of the name to a master first waits (within `bound`) for this
        store's earlier calls of the name that master had not answered in time, so that a
        master serves one store's calls of a name in order (a release that returned at its
        quorum is not overtaken there by the next acquire, which it would refuse).
        With `prefix` (listings): a call to a master first waits the same way for this
        store's earlier calls of every name that starts with `prefix` (a listing does not see
        a write that missed its quorum before the write is taken back)."""
        now = _shim.monotonic()
        answers: dict[int, Any] = {}
        for index in masters:
            if sum(due < now for due in list(self._running[index].values())) >= MAX_OVERDUE:
                answers[index] = Down(StoreUnavailable(
                    f"{self.nodes[index].url}: {MAX_OVERDUE} earlier calls are still "
                    "unanswered; check that the master is running and reachable"))
        asked = [index for index in masters if index not in answers]
        done = {index: _shim.Event() for index in asked} if name is not None else {}

        async def tracked(index: int) -> Any:
            call, running = next(self._calls), self._running[index]
            running[call] = now + bound
            try:
                for earlier in self._earlier(index, name, prefix):
                    await _shim.wait_event(earlier, max(0.0, now + bound - _shim.monotonic()))
                return await on(index)
            finally:
                running.pop(call, None)

        async def on_late(index: int, outcome: Any) -> None:
            try:
                if late is not None and not isinstance(outcome, BaseException):
                    await late(index, outcome)
            finally:
                if name is not None:
                    done[index].set()
                    self._forget((index, name), done[index])

        def by_master(got: dict[int, Any]) -> dict[int, Any]:  # run_first counts by position
            return {asked[position]: answer for position, answer in got.items()}

        if asked:
            try:
                answers.update(by_master(await _shim.run_first(
                    tracked, asked, lambda got: enough({**answers, **by_master(got)}), bound,
                    on_late)))
            except RuntimeError as exc:  # sync API at interpreter exit: no new threads
                if "shutdown" not in str(exc):
                    raise
                for index in asked:
                    answers[index] = await on(index)
        if name is not None:
            for index in asked:
                if index not in answers and not done[index].is_set():
                    self._lag((index, name), done[index])
        # Not answered: waited for until `bound`, or not waited for at all when the answers
        # that came decided the call first (saying "no answer within" then would be false).
        decided = enough(answers)

        def unanswered(index: int) -> Silent:
            url = self.nodes[index].url
            if decided:
                # Said once the others' answers are told: they decided the call.
                return Skipped(StoreUnavailable(f"{url} was not waited for"))
            return Silent(StoreUnavailable(f"{url}: no answer within {bound:g} s"))

        return [answers[index] if index in answers else unanswered(index) for index in masters]


    def _earlier(self, index: int, name: str | None, prefix: str | None) -> list[_shim.Event]:
        """This store's calls that master `index` had not answered in time and that a call
        of `name`, or a listing of `prefix`, waits for."""
        if name is not None:
            return list(self._lagging.get((index, name), ()))
        if prefix is None:
            return []
        return [event for (master, lagging), events in list(self._lagging.items())
                if master == index and lagging.startswith(prefix) for event in list(events)]

    def _lag(self, key: tuple[int, str], event: _shim.Event) -> None:
        with self._lagging_lock:
            self._lagging.setdefault(key, []).append(event)

    def _forget(self, key: tuple[int, str], event: _shim.Event) -> None:
        with self._lagging_lock:
            events = self._lagging.get(key, [])
            if event in events:
                events.remove(event)
            if not events:
                self._lagging.pop(key, None)

    def in_background(self, name: str, masters: Sequence[int],
                      work: Callable[[], Any]) -> None:
        """Run `work` (a late grant joining its lease, or a release of what an acquire did
        not count) in the background, and have this store's next calls of `name` to each of
        `masters` wait for it first (within their bound), as for a call a master had not
        answered in time: the next acquire must not overtake a release on its way there,
        which it would find still held.

        Example::

            masters.in_background("jobs", [2], lambda: node.release(grant))
        """
        finished = _shim.Event()
        keys = [(index, name) for index in masters]
        for key in keys:
            self._lag(key, finished)

        async def run() -> None:
            try:
                await work()
            finally:
                finished.set()
                for key in keys:
                    self._forget(key, finished)

        _shim.start_soon(run)


def downs(answers: dict[int, Any]) -> int:
    """How many of `answers` are Down.

    Example:
        >>> downs({0: None, 1: Down(StoreUnavailable("down"))})
        1
    """
    return sum(isinstance(answer, Down) for answer in answers.values())


def settled(answers: dict[int, Any], waiting: int, quorum: int) -> bool:
    """No quorum can agree any more: settled once `quorum` masters answered (the answer is
    theirs), or once too few can answer (the store is unavailable).

    Example:
        >>> settled({0: True, 1: True}, 1, 2)
        True
    """
    answered = len(answers) - downs(answers)
    return answered >= quorum or answered + waiting < quorum


def never(answers: dict[int, Any]) -> bool:
    """Wait for every master (within the bound).

    Example:
        >>> never({0: True})
        False
    """
    return False


def reason(reasons: list[LostReason]) -> LostReason:
    """Why a lease is lost, when the masters that answered gave `reasons`.

    Example:
        >>> reason([LostReason.TAKEN, LostReason.EXPIRED, LostReason.TAKEN]).value
        'taken'
    """
    if not reasons:
        return LostReason.EXPIRED
    counts = Counter(reasons)
    return min(counts, key=lambda reason: (-counts[reason], _REASON_ORDER.index(reason)))
