"""What a queue-message job needs from a queue: the `MessageSource` protocol and the `QueueMessage`
a handler receives.

A source hands out messages that stay invisible to other consumers for a while (a visibility
timeout), and settles each one: `complete` deletes it, `abandon` makes it visible again after a
delay, `dead_letter` moves it to the source's poison queue with a reason. Every call that names a
message fails with `MessageLost` once the source no longer lets this consumer settle it (its
visibility ran out and another consumer received it, or it was deleted).

Example::

    messages = await source.receive(max_messages=16, visibility_timeout=30)
    for message in messages:
        await source.extend(message, 30)
        await source.complete(message)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tenure._errors import LeaseLost, LeaseReleased, TenureError

if TYPE_CHECKING:
    from tenure.jobs._locks import AnyLease

_NOT_PARSED = object()
# Seconds an Azure queue message stays invisible while its copy is sent and it is deleted
# (dead-lettered, or released untried): long enough for both calls on a slow link, else another
# consumer could receive the original meanwhile. A consumer killed in between hides it so long.
COPY_GUARD = 30


class MessageLost(TenureError):
    """The source no longer lets this consumer settle the message: its visibility timeout ran
    out (another consumer may hold it now) or it was deleted.

    Example:
        >>> MessageLost("message 'a1' of queue 'invoices' is gone").args[0]
        "message 'a1' of queue 'invoices' is gone"
    """


class QueueMessage:
    """One queue message, as a handler sees it.

    `body` is the parsed JSON (raises ValueError when the text is not JSON), `text` the raw
    text, `id` the source's message id, `dequeue_count` how often it was received (1 the first
    time), `scope_key` the value of the consumer's scope property (None without a scope),
    `lease` the scope lock's lease while the handler runs (for its fencing `lease.token`; see
    the property). `receipt` belongs to the source (e.g. Azure's pop receipt) and changes as
    it extends.

    Example::

        async def handle(msg: tenure.queues.QueueMessage) -> None:
            invoice = msg.body["Invoice"]["Id"]
            msg.check()  # raises tenure.LeaseLost when the handler should stop
    """

    __slots__ = ("_body", "_lease", "_stop_reason", "dequeue_count", "id", "receipt",
                 "scope_key", "text")

    def __init__(self, id: str, text: str, dequeue_count: int, receipt: Any = None) -> None:
        self.id = id
        self.text = text
        self.dequeue_count = dequeue_count
        self.receipt = receipt
        self.scope_key: str | None = None
        self._lease: AnyLease | None = None
        self._body: Any = _NOT_PARSED
        self._stop_reason: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        # What travels: the text, ids and scope. The parsed body is parsed again, and the lease
        # stays with the process that holds it (it cannot act for another one).
        return {"id": self.id, "text": self.text, "dequeue_count": self.dequeue_count,
                "receipt": self.receipt, "scope_key": self.scope_key}

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple):  # pickled before __getstate__: (None, slot values)
            state = state[1]
        self.__init__(state["id"], state["text"], state["dequeue_count"],  # type: ignore[misc]
                      state.get("receipt"))
        self.scope_key = state.get("scope_key")

    def __repr__(self) -> str:
        return (f"<QueueMessage id={self.id!r} dequeue_count={self.dequeue_count} "
                f"scope_key={self.scope_key!r}>")

    @property
    def lease(self) -> AnyLease:
        """The scope lock's lease, held while the handler runs: `msg.lease.token` fences the
        handler's writes.

        Typed as always there, so that a handler's `msg.lease.token` type-checks: a consumer
        with a scope runs a handler only once it holds the message's lock. It is None only
        where no lock was taken: before the consumer locked the message (the consumer checks
        `msg.lease is None`, and such code keeps working) and under `scope=None`, where a
        handler has no lease to fence with (use idempotency instead).

        Example::

            async def handle(msg: tenure.queues.QueueMessage) -> None:
                await post_invoice(msg.body["Invoice"], fence=msg.lease.token)
        """
        # Not a raise when unlocked: the consumer and existing handlers test `is None`. The
        # static type is the handler's view (always locked), the run-time value the truth.
        return self._lease  # type: ignore[return-value]

    @lease.setter
    def lease(self, lease: AnyLease | None) -> None:
        self._lease = lease

    @property
    def body(self) -> Any:
        """The text parsed as JSON (parsed once); ValueError when it is not JSON."""
        if self._body is _NOT_PARSED:
            import json

            self._body = json.loads(self.text)
        return self._body

    @property
    def stopped(self) -> bool:
        """True once the handler should stop: the scope lock was lost or released, the
        message's visibility was lost, or the consumer is shutting down. Async handlers are
        cancelled instead."""
        lease = self._lease
        return self._stop_reason is not None or (
            lease is not None and (lease.lost or lease.released))

    def check(self) -> None:
        """Raise tenure.LeaseLost when the handler should stop (see `stopped`); sync handlers
        call this between steps, since a thread cannot be cancelled.

        Example::

            for line in invoice_lines:
                msg.check()
                post(line)
        """
        lease = self._lease
        if lease is not None and lease.lost:
            lease.check()  # raises LeaseLost with the reason
        if self._stop_reason is not None:
            raise LeaseLost(f"message {self.id!r}: {self._stop_reason}")
        if lease is not None and lease.released:
            raise LeaseReleased(f"message {self.id!r}: the scope lock was released")

    def _stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason


# The class's name before it became QueueMessage: pickle finds a class by module and name, so a
# message pickled under the old name still loads (kept one release, like the other old names).
Message = QueueMessage


@runtime_checkable
class MessageSource(Protocol):
    """A queue the consumer can receive from and settle messages in; see the module docstring.

    `name` is a short description for logs (no secrets). `max_batch` is the most messages one
    `receive` returns. `releases_count` says whether `abandon(..., failed=False)` still counts
    as a delivery in `dequeue_count` (a source that can undo the count sets it False).

    Example::

        class MyQueue:
            name = "myqueue:jobs"; max_batch = 32; releases_count = False
            async def receive(self, max_messages, visibility_timeout): ...
            ...
    """

    name: str
    max_batch: int
    releases_count: bool

    async def receive(self, max_messages: int, visibility_timeout: float) -> list[QueueMessage]:
        """Up to `max_messages` visible messages, each now invisible for `visibility_timeout`
        seconds; an empty list when there are none."""
        ...

    async def extend(self, message: QueueMessage, seconds: float) -> None:
        """Keep `message` invisible for `seconds` more from now; MessageLost when too late."""
        ...

    async def complete(self, message: QueueMessage) -> None:
        """Delete `message`: it was handled."""
        ...

    async def abandon(self, message: QueueMessage, delay: float, *, failed: bool = True) -> None:
        """Make `message` visible again after `delay` seconds. `failed=False`: it was not tried
        (e.g. its scope was busy), so the source does not count this delivery if it can."""
        ...

    async def dead_letter(self, message: QueueMessage, reason: str) -> None:
        """Move `message` to the poison queue, keeping `reason`, and delete it here."""
        ...

    async def close(self) -> None:
        """Free connections."""
        ...
