"""Queue-message jobs: `QueueConsumer` receives messages from a `MessageSource` and runs a handler
on each, one at a time per scope key across every instance.

Per message: too many deliveries or a body that is not JSON or lacks the scope property go to
the poison queue at once, with the reason. Otherwise the message's visibility is extended while
it waits and runs; the scope lock `queue:<name>:<scope key>` is tried up to `max_lock_retries`
times with backoff (same-key messages of this process queue behind one another first), then the
message is released back untried. The handler runs under the lease: async handlers on the loop,
cancelled when the lease or the visibility is lost; sync handlers in a thread, told through
`msg.check()`. Success deletes the message; a failure makes it visible again after a backoff,
and the failure of delivery `max_dequeue_count` poisons it with the error as the reason.

Outages (see tenure.jobs._outage): a queue source that fails is retried with a capped backoff
(receiving resumes within RETRY_CAP of it answering again); a lock store that fails while a
message waits for its scope lock is retried the same way, without counting as a busy try, while
the keeper extends the message's visibility. Each outage is logged once when it starts and once
when it ends.

Example::

    consumer = QueueConsumer(AzureQueue("invoices", connection_string=conn), handle,
                             locks=LockPort(store), name="billing.handle", scope="Invoice:Id")
    await consumer.run(stopping)  # until `stopping` is set and in-flight handlers finished
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from tenure._errors import InvalidArgument, InvalidArgumentType, LeaseLost
from tenure._names import MAX_NAME_LENGTH
from tenure._timing import Backoff, check_range, check_ttl, jittered, margin_for, to_seconds
from tenure.jobs import _metrics
from tenure.jobs._config import did_you_mean
from tenure.jobs._locks import AnyLease, LockPort
from tenure.jobs._outage import READ, WRITE, Outage, Retry, describe
from tenure.jobs._signatures import is_async, refuse_unfinished
from tenure.jobs._tracebacks import from_user_code
from tenure.jobs.queues._source import MessageLost, MessageSource, QueueMessage

log = logging.getLogger("tenure.jobs.queue")

MAX_CONCURRENCY = 10_000
MAX_VISIBILITY = 7 * 24 * 3600.0
# Settling a message or releasing a lease runs shielded from cancellation, for at most this long.
SETTLE_TIMEOUT = 10.0
# A receive that hangs longer is given up (its messages come back after their visibility timeout).
RECEIVE_TIMEOUT = 60.0
MAX_REASON = 2_000

# Option: (default, lowest, highest); durations in seconds, counts as ints.
_DURATIONS: dict[str, tuple[float, float, float]] = {
    "min_poll": (0.1, 0.001, 3600.0),
    "max_poll": (10.0, 0.001, 3600.0),
    "visibility_timeout": (30.0, 1.0, MAX_VISIBILITY),
    "lock_retry_delay": (0.05, 0.001, 60.0),
    "max_lock_retry_delay": (2.0, 0.001, 3600.0),
    "retry_backoff": (1.0, 0.0, 3600.0),
    "max_retry_backoff": (300.0, 0.0, MAX_VISIBILITY),
    "release_delay": (1.0, 0.0, 3600.0),
}
_COUNTS: dict[str, tuple[int, int, int]] = {
    "max_dequeue_count": (5, 1, 1000),
    "max_lock_retries": (10, 0, 100_000),
}
_PAIRS = (("min_poll", "max_poll"), ("lock_retry_delay", "max_lock_retry_delay"),
          ("retry_backoff", "max_retry_backoff"))


class QueueConsumer:
    """Consumes `source`, running `handler(message)` once per message; see the module docstring.

    `name` names the job (lock names `queue:<name>:<scope key>`); `scope` is a JSON property
    path of the body, ':' between nested properties (case-sensitive; a list index is a number),
    or None for no per-key lock. Options (seconds unless said): `lock_ttl` (30),
    `min_poll`/`max_poll` (0.1/10: randomized exponential backoff while the queue is empty),
    `visibility_timeout` (30, extended every third of it), `max_dequeue_count` (5 deliveries),
    `max_lock_retries` (10), `lock_retry_delay`/`max_lock_retry_delay` (0.05/2),
    `retry_backoff`/`max_retry_backoff` (1/300: a failed message is visible again after
    retry_backoff x 2^(delivery-1), capped), `release_delay` (1: a message released untried).

    Example::

        consumer = QueueConsumer(queue, handle, locks=LockPort(store), name="billing.handle",
                                 scope="Invoice:Id", concurrency=16, max_dequeue_count=3)
    """

    def __init__(self, source: MessageSource, handler: Callable[[QueueMessage], Any], *,
                 locks: LockPort, name: str, scope: str | None = None, concurrency: int = 16,
                 **options: Any) -> None:
        if not isinstance(source, MessageSource):
            raise InvalidArgumentType(
                "source must be a message source such as tenure.queues.AzureQueue(...) or "
                f"tenure.queues.PostgresQueue(...), got {type(source).__name__}")
        if not callable(handler):
            raise InvalidArgumentType(
                f"handler must be a function taking the message, got {type(handler).__name__}")
        if not isinstance(locks, LockPort):
            raise InvalidArgumentType(f"locks must be a LockPort, got {type(locks).__name__}")
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"name must be a non-empty str, got {name!r}")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or \
                not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidArgument(
                f"concurrency={concurrency!r} is out of range: it must be an int from 1 to "
                f"{MAX_CONCURRENCY}")
        self.source = source
        self.handler = handler
        self.locks = locks
        self.name = name
        self.scope = scope
        self.concurrency = concurrency
        self._path = _parse_scope(scope)
        self._is_async = is_async(handler)
        self._set_options(options)
        self._inflight = 0
        self._local: dict[str, _LocalKey] = {}
        self.outage = Outage(f"queue source {source.name}")
        self._receive_retry = Retry(self.outage, f"queue job {name!r}")
        self._lock_retry = Retry(locks.outage, f"queue job {name!r}")
        self._fatal: Exception | None = None

    def __repr__(self) -> str:
        return f"<QueueConsumer {self.name} on {self.source.name}>"

    def _set_options(self, options: dict[str, Any]) -> None:
        known = {"lock_ttl", *_DURATIONS, *_COUNTS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InvalidArgument(
                f"unknown queue option {unknown[0]!r}{did_you_mean(unknown[0], known)}; the "
                f"options are: {', '.join(sorted(known))}")
        self.lock_ttl = check_ttl(options.get("lock_ttl", 30.0),
                                  self.locks.store.backend.capabilities, "lock_ttl")
        seconds = {option: check_range(to_seconds(options.get(option, default), option), option,
                                       low, high)
                   for option, (default, low, high) in _DURATIONS.items()}
        for low_option, high_option in _PAIRS:
            if seconds[low_option] > seconds[high_option]:
                raise InvalidArgument(
                    f"{high_option}={seconds[high_option]:g} must not be below "
                    f"{low_option}={seconds[low_option]:g}")
        counts = {option: _count(options.get(option, default), option, low, high)
                  for option, (default, low, high) in _COUNTS.items()}
        self.min_poll, self.max_poll = seconds["min_poll"], seconds["max_poll"]
        self.visibility_timeout = seconds["visibility_timeout"]
        self.lock_retry_delay = seconds["lock_retry_delay"]
        self.max_lock_retry_delay = seconds["max_lock_retry_delay"]
        self.retry_backoff = seconds["retry_backoff"]
        self.max_retry_backoff = seconds["max_retry_backoff"]
        self.release_delay = seconds["release_delay"]
        self.max_dequeue_count = counts["max_dequeue_count"]
        self.max_lock_retries = counts["max_lock_retries"]

    # -- the receive loop ---------------------------------------------------------------------

    async def run(self, stopping: anyio.Event) -> None:
        """Consume until `stopping` is set, then return once in-flight handlers finished.

        Cancelled (a hard stop): in-flight async handlers are cancelled, sync ones told through
        `msg.check()` and awaited, and their messages released back to the queue.

        Example::

            stopping = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.run, stopping)
                ...
                stopping.set()
        """
        self._slot_freed = anyio.Event()
        self._threads = anyio.CapacityLimiter(self.concurrency)
        self._fatal = None
        idle = Backoff(self.min_poll, self.max_poll)
        try:
            # Nothing may escape the task group (it would raise an ExceptionGroup): what stops
            # the worker is kept in self._fatal and raised after it.
            async with anyio.create_task_group() as tasks:
                while not stopping.is_set():
                    free = self.concurrency - self._inflight
                    if free <= 0:
                        self._slot_freed = anyio.Event()
                        await _first_of(self._slot_freed, stopping)
                        continue
                    received_at = anyio.current_time()
                    started = time.monotonic()
                    try:
                        with anyio.fail_after(RECEIVE_TIMEOUT):
                            messages = await self.source.receive(
                                min(free, self.source.max_batch), self.visibility_timeout)
                    except Exception as exc:  # a source outage: retry with a capped backoff
                        if not self._failed(self._receive_retry, exc, started, stopping):
                            break
                        with anyio.move_on_after(self._receive_retry.delay()):
                            await stopping.wait()
                        continue
                    self._receive_retry.succeeded()
                    if not messages:
                        with anyio.move_on_after(idle.next_delay()):
                            await stopping.wait()
                        continue
                    idle = Backoff(self.min_poll, self.max_poll)
                    for message in messages:
                        self._inflight += 1
                        tasks.start_soon(self._process, message, received_at, stopping)
        finally:
            with anyio.move_on_after(SETTLE_TIMEOUT, shield=True):
                try:
                    await self.source.close()  # a source opens again when used after this
                except Exception as exc:
                    log.info("%s: closing the source failed: %s", self, describe(exc))
        if self._fatal is not None:
            raise self._fatal

    def _failed(self, retry: Retry, exc: Exception, started: float,
                stopping: anyio.Event) -> bool:
        """Report a failed call; False (and the worker asked to stop) when the error stops it:
        a setup error, or a permanent one before the store or source ever answered."""
        try:
            retry.failed(exc, started)
        except Exception as fatal:
            if self._fatal is None:
                self._fatal = fatal
            stopping.set()
            return False
        return True

    async def _process(self, message: QueueMessage, received_at: float,
                       stopping: anyio.Event) -> None:
        delivery = _Delivery(message, received_at)
        try:
            delivery.result = await self._consume(delivery, stopping)
        finally:
            self._inflight -= 1
            self._slot_freed.set()
            self._record(delivery, anyio.current_time() - received_at)

    def _record(self, delivery: _Delivery, seconds: float) -> None:
        # METRICS: the one place queue jobs report to tenure.jobs._metrics (OpenTelemetry).
        # Outcomes: ok, failed, poisoned, lost, cancelled (handler runs); busy, released (not).
        outcome = delivery.result
        if delivery.message.lease is not None:
            _metrics.record_acquired(self.name, delivery.lock_wait)
        if outcome == "busy":
            _metrics.record_skipped(self.name, "busy")
        elif outcome != "released":
            _metrics.record_run(self.name, outcome, seconds)
            lease = delivery.message.lease
            if lease is not None and lease.lost:
                _metrics.record_lost(self.name)

    # -- one message --------------------------------------------------------------------------

    async def _consume(self, delivery: _Delivery, stopping: anyio.Event) -> str:
        message = delivery.message
        # Where releases count as deliveries, a high count may be busy scopes, not crashes.
        if message.dequeue_count > self.max_dequeue_count and not self.source.releases_count:
            return await self._poison(message, (
                f"received {message.dequeue_count} times, more than max_dequeue_count="
                f"{self.max_dequeue_count} without completing; the consumer "
                "handling it may have stopped or lost it each time"))
        problem = self._parse(message)
        if problem is not None:
            return await self._poison(message, problem)
        keeper = _Keeper(self.source, delivery, self.visibility_timeout, self.outage)
        try:
            try:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(keeper.run)
                    try:
                        with delivery.work:
                            await self._attempt(delivery, stopping)
                    finally:
                        keeper.done.set()  # it stops after an extension in flight, not in it
            except anyio.get_cancelled_exc_class():
                delivery.cancelled = True
                delivery.result = await self._settle(delivery, keeper)
                raise
            return await self._settle(delivery, keeper)
        finally:
            await self._unlock(delivery)

    def _parse(self, message: QueueMessage) -> str | None:
        """The reason to poison `message` at once, or None; sets its scope key."""
        try:
            body = message.body
        except ValueError as exc:
            return f"body is not JSON ({exc}); it starts with {message.text[:80]!r}"
        if self._path is None:
            return None
        key, problem = scope_key(body, self._path)
        message.scope_key = key
        return problem

    async def _attempt(self, delivery: _Delivery, stopping: anyio.Event) -> None:
        """Take the scope lock and run the handler; the outcome is left in `delivery`."""
        state = await self._lock(delivery, stopping)
        if state != "acquired":
            delivery.outcome = state
            return
        lease = delivery.lease
        try:
            if lease is None:
                await self._invoke(delivery)
            else:
                async with self.locks.guard(lease):
                    await self._invoke(delivery)
        except LeaseLost:
            delivery.message._stop("the scope lock was lost")

    async def _invoke(self, delivery: _Delivery) -> None:
        message = delivery.message
        delivery.outcome = "running"
        try:
            if self._is_async:
                refuse_unfinished(await self.handler(message), "the queue handler")
            else:
                refuse_unfinished(await self._invoke_sync(message), "the queue handler")
        except Exception as exc:
            delivery.error = exc
        else:
            delivery.returned = True

    async def _invoke_sync(self, message: QueueMessage) -> Any:
        """Run a sync handler in a thread. A thread cannot be cancelled: on cancellation the
        message says so (`msg.check()` raises) and the thread is awaited. Returns what the
        handler returned."""
        returned = False
        result: Any = None

        async def tell_on_cancel() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                if not returned:
                    message._stop("the consumer cancelled the handler")

        error: Exception | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tell_on_cancel)
            try:  # anyio shields the wait for the thread from cancellation until it returns
                result = await anyio.to_thread.run_sync(self.handler, message,
                                                        limiter=self._threads)
            except Exception as exc:  # raised out of the group, it would come wrapped
                error = exc
            finally:
                returned = True
                tasks.cancel_scope.cancel()
        if error is not None:
            raise error
        return result

    # -- the scope lock -----------------------------------------------------------------------

    def lock_name(self, key: str) -> str:
        """The lock name for scope key `key` (hashed when it would be too long).

        Example::

            consumer.lock_name("42")  # 'queue:billing.handle:42'
        """
        name = f"queue:{self.name}:{key}"
        if len(name) > MAX_NAME_LENGTH:
            name = f"queue:{self.name}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"
        return name

    async def _lock(self, delivery: _Delivery, stopping: anyio.Event) -> str:
        """'acquired' (lease in `delivery`, or no scope), 'busy' or 'stopping'."""
        key = delivery.message.scope_key
        if key is None:
            return "stopping" if stopping.is_set() else "acquired"
        local = self._local.get(key)
        if local is None:
            local = self._local[key] = _LocalKey()
        local.users += 1
        delivery.local_key = key
        delays = Backoff(self.lock_retry_delay, self.max_lock_retry_delay)
        attempt = 0
        while True:
            if stopping.is_set():
                return "stopping"
            if not delivery.holds_local:
                try:
                    local.lock.acquire_nowait()
                    delivery.holds_local = True
                except anyio.WouldBlock:
                    pass
            if delivery.holds_local:
                started = time.monotonic()
                try:
                    delivery.lease = await self.locks.try_acquire(self.lock_name(key),
                                                                  self.lock_ttl)
                except Exception as exc:  # the lock store failed: not busy, try again
                    if not self._failed(self._lock_retry, exc, started, stopping):
                        return "stopping"
                    with anyio.move_on_after(self._lock_retry.delay()):
                        await stopping.wait()
                    continue
                # Busy wrote nothing: it does not end an outage of writes (see Outage).
                self._lock_retry.succeeded(READ if delivery.lease is None else WRITE)
                if delivery.lease is not None:
                    delivery.message.lease = delivery.lease
                    delivery.lock_wait = anyio.current_time() - delivery.received_at
                    return "acquired"
            if attempt == self.max_lock_retries:
                break
            attempt += 1
            with anyio.move_on_after(delays.next_delay()):
                if delivery.holds_local:
                    await stopping.wait()
                else:  # woken at once when this process's same-key message is done
                    await local.lock.acquire()
                    delivery.holds_local = True
        return "busy"

    async def _unlock(self, delivery: _Delivery) -> None:
        lease, delivery.lease = delivery.lease, None
        if lease is not None:
            with anyio.move_on_after(SETTLE_TIMEOUT, shield=True):
                try:
                    await self.locks.release(lease)
                except Exception as exc:  # left to expire
                    log.info("%s: releasing %r failed; it expires by itself: %s", self,
                             lease.name, describe(exc))
        key, delivery.local_key = delivery.local_key, None
        if key is not None:
            local = self._local[key]
            if delivery.holds_local:
                delivery.holds_local = False
                local.lock.release()
            local.users -= 1
            if local.users == 0:
                del self._local[key]

    # -- settling -----------------------------------------------------------------------------

    async def _settle(self, delivery: _Delivery, keeper: _Keeper) -> str:
        """Complete, retry, poison or release the message after an attempt."""
        message = delivery.message
        if delivery.returned:
            done = await self._call("complete", self.source.complete, message)
            return "ok" if done else "lost"
        if keeper.lost is not None:
            log.warning("%s: message %r: %s", self, message.id, keeper.lost)
            return "lost"
        error = delivery.error
        if error is not None and not (isinstance(error, LeaseLost) and message.stopped):
            return await self._fail(message, error)
        if delivery.outcome == "busy":
            log.info("%s: scope %r of message %r stayed busy after %d tries: released",
                     self, message.scope_key, message.id, self.max_lock_retries + 1)
            result, delay = "busy", self.release_delay
        elif delivery.outcome == "running":  # the handler was stopped before it returned
            result = "cancelled" if delivery.cancelled else "lost"
            delay = 0.0 if delivery.cancelled else self.release_delay
        else:  # not started: the consumer is stopping
            result, delay = "released", 0.0
        await self._call("release", self.source.abandon, message, delay, failed=False)
        return result

    async def _fail(self, message: QueueMessage, error: Exception) -> str:
        attempts = f"delivery {message.dequeue_count} of max_dequeue_count={self.max_dequeue_count}"
        log.warning("%s: handler failed on message %r (%s)", self, message.id, attempts,
                    exc_info=from_user_code(error))
        if message.dequeue_count >= self.max_dequeue_count:
            return await self._poison(message, f"handler failed on {attempts}: "
                                               f"{type(error).__name__}: {error}")
        backoff = min(self.max_retry_backoff,
                      self.retry_backoff * 2 ** min(message.dequeue_count - 1, 60))
        await self._call("retry later", self.source.abandon, message, jittered(backoff))
        return "failed"

    async def _poison(self, message: QueueMessage, reason: str) -> str:
        reason = reason[:MAX_REASON]
        log.warning("%s: message %r goes to the poison queue: %s", self, message.id, reason)
        done = await self._call("poison", self.source.dead_letter, message, reason)
        return "poisoned" if done else "lost"

    async def _call(self, what: str, action: Callable[..., Any], message: QueueMessage,
                    *args: Any, **kwargs: Any) -> bool:
        """Settle `message`, shielded from cancellation; False (logged) when it failed.

        A source that fails is an outage (logged once, see tenure.jobs._outage); the message
        comes back after its visibility timeout, which this logs at INFO."""
        started = time.monotonic()
        with anyio.move_on_after(SETTLE_TIMEOUT, shield=True):
            try:
                await action(message, *args, **kwargs)
                self.outage.succeeded(f"queue job {self.name!r}")
                return True
            except MessageLost as exc:
                log.warning("%s: %s: %s", self, what, exc)
                return False
            except Exception as exc:  # it comes back after its visibility timeout
                self.outage.failed(f"queue job {self.name!r}", exc, started)
                log.info("%s: %s of message %r failed; it comes back after its visibility "
                         "timeout: %s", self, what, message.id, describe(exc))
                return False
        self.outage.failed(f"queue job {self.name!r}", TimeoutError(
            f"{what} of message {message.id!r}: no answer within {SETTLE_TIMEOUT:g} s"), started)
        log.info("%s: %s of message %r timed out", self, what, message.id)
        return False


class _Delivery:
    """One received message's state while the consumer holds it."""

    __slots__ = ("cancelled", "error", "holds_local", "lease", "local_key", "lock_wait",
                 "message", "outcome", "received_at", "result", "returned", "work")

    def __init__(self, message: QueueMessage, received_at: float) -> None:
        self.message = message
        self.received_at = received_at
        self.work = anyio.CancelScope()  # cancelled when the visibility is lost
        self.lease: AnyLease | None = None
        self.local_key: str | None = None
        self.holds_local = False
        self.outcome = "waiting"  # then: busy, stopping, running
        self.returned = False
        self.error: Exception | None = None
        self.cancelled = False
        self.lock_wait = 0.0
        self.result = "released"  # what the metrics report, see QueueConsumer._record


class _LocalKey:
    """This process's same-key messages take turns here before trying the scope lock."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.users = 0


class _Keeper:
    """Extends a message's visibility every third of the timeout while the consumer holds it;
    when it cannot before the visibility runs out, the message is stopped and its work
    cancelled."""

    def __init__(self, source: MessageSource, delivery: _Delivery, seconds: float,
                 outage: Outage) -> None:
        self.source = source
        self.delivery = delivery
        self.seconds = seconds
        self.outage = outage
        self.done = anyio.Event()
        self.lost: str | None = None

    async def run(self) -> None:
        every = self.seconds / 3
        deadline = self._deadline(self.delivery.received_at)
        wait = every
        while True:
            with anyio.move_on_after(jittered(wait)):
                await self.done.wait()
            if self.done.is_set():
                return
            sent_at = anyio.current_time()
            started = time.monotonic()
            try:
                with anyio.move_on_after(every, shield=True) as scope:
                    await self.source.extend(self.delivery.message, self.seconds)
                if scope.cancelled_caught:
                    raise TimeoutError(f"extending visibility: no answer within {every:g} s")
                deadline, wait = self._deadline(sent_at), every
                self.outage.succeeded("a queue message's keeper")
            except MessageLost as exc:
                return self._lose(f"its visibility was lost: {exc}")
            except Exception as exc:
                self.outage.failed("a queue message's keeper", exc, started)
                if anyio.current_time() + min(every, 1.0) >= deadline:
                    return self._lose(f"its visibility could not be extended: {describe(exc)}")
                wait = min(every, 1.0)  # retry sooner, before the visibility runs out

    def _deadline(self, sent_at: float) -> float:
        return sent_at + self.seconds * 0.99 - margin_for(self.seconds)

    def _lose(self, reason: str) -> None:
        self.lost = reason
        self.delivery.message._stop(reason)
        self.delivery.work.cancel()


async def _first_of(*events: anyio.Event) -> None:
    """Wait until any of `events` is set."""
    async with anyio.create_task_group() as tasks:
        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tasks.cancel_scope.cancel()

        for event in events:
            tasks.start_soon(wait, event)


def _count(value: object, option: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentType(f"{option} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgument(f"{option}={value} is out of range: it must be {low} to {high}")
    return value


def _parse_scope(scope: str | None) -> tuple[str, ...] | None:
    if scope is None:
        return None
    if not isinstance(scope, str):
        raise InvalidArgumentType(
            f"scope must be a str such as 'Invoice:Id', or None, got {type(scope).__name__}")
    parts = tuple(scope.split(":"))
    if not scope or any(not part for part in parts):
        raise InvalidArgument(
            f"scope={scope!r} must be JSON property names separated by ':' (e.g. 'Invoice:Id'), "
            "none of them empty")
    return parts


def scope_key(body: Any, path: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The scope key at `path` in a parsed body, or (None, the reason it has none).

    Strings are the key as they are; numbers and booleans their JSON text.

    Example:
        >>> scope_key({"Invoice": {"Id": 42}}, ("Invoice", "Id"))
        ('42', None)
        >>> scope_key({"invoice": {"Id": 42}}, ("Invoice", "Id"))[1]
        "body has no property 'Invoice' (scope 'Invoice:Id'; names are case-sensitive)"
    """
    scope = ":".join(path)
    value = body
    for depth, part in enumerate(path):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None, (f"body has no property {':'.join(path[:depth + 1])!r} (scope "
                          f"{scope!r}; names are case-sensitive)")
    if value is None or isinstance(value, (dict, list)):
        kind = "null" if value is None else "an object" if isinstance(value, dict) else "a list"
        return None, (f"scope property {scope!r} is {kind}; it must be a string, number or "
                      "boolean")
    if isinstance(value, str):
        return value, None
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"scope property {scope!r} is not a finite number"
    return json.dumps(value), None
