"""Azure Queue Storage as a message source (azure-storage-queue's aio client; tenure[azure]).

The queue and its poison queue `<queue>-poison` are created on first use. A poisoned message is
sent there as a JSON envelope that keeps the reason next to the original text:
`{"reason": ..., "queue": ..., "id": ..., "dequeue_count": ..., "inserted_on": ...,
"poisoned_at": ..., "text": <the original message text>}` (an envelope over 48 KiB keeps the
first 6 KiB of the text, and `truncated_from` says how long it was).

Azure cannot lower a message's dequeue count, so a message released untried
(`abandon(..., failed=False)`, e.g. its scope lock stayed busy) is sent again as a new message
(new id, dequeue count 0) and the original deleted; failures before it are forgotten. Before
the copy is sent (to this queue, or the poison queue), the original's receipt is renewed: a
consumer whose receipt went stale (its visibility ran out while it was paused, and another
consumer received the message) gets MessageLost and sends no copy, so the message is not
duplicated. A consumer killed between the copy and the delete still leaves two (at least once).

Example::

    from tenure.queues import AzureQueue
    queue = AzureQueue("invoices", connection_string=os.environ["AZURE_STORAGE_CONNECTION_STRING"])
    await queue.send({"Invoice": {"Id": 42}})
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from tenure._errors import (
    InvalidArgument,
    InvalidArgumentType,
    MissingExtra,
    StoreRefused,
    StoreUnavailable,
)
from tenure.jobs.queues._source import COPY_GUARD, MessageLost, QueueMessage

try:
    from azure.core.exceptions import (
        AzureError,
        HttpResponseError,
        ResourceExistsError,
        ResourceNotFoundError,
    )
    from azure.storage.queue import TextBase64DecodePolicy, TextBase64EncodePolicy
    from azure.storage.queue.aio import QueueClient
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("AzureQueue needs azure-storage-queue: install tenure[azure] "
                       "(pip install 'tenure[azure]')") from exc

T = TypeVar("T")

# Azure's rules for queue names: 3 to 63 of [a-z0-9-], starting and ending with a letter or a
# digit, no "--"; 56 at most here so that "<queue>-poison" fits.
_QUEUE_NAME = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,54}[a-z0-9]")
POISON_SUFFIX = "-poison"
MAX_VISIBILITY = 7 * 24 * 3600  # seconds; Azure's limit
# Azure takes 64 KiB per message, 48 KiB of text once base64-encoded: a longer poison envelope
# keeps the start of the text only.
MAX_ENVELOPE = 48 * 1024
_GONE_CODES = {"MessageNotFound", "PopReceiptMismatch"}


class AzureQueue:
    """An Azure Storage queue; give `connection_string`, or `account_url` and `credential`.

    `encoding="base64"` reads and writes base64 text, as Azure Functions' queue trigger
    expects; the default is plain text. `time_to_live` (seconds, default Azure's 7 days, -1
    for never) applies to messages this object sends, poison copies included.

    Example::

        queue = AzureQueue("invoices", account_url="https://acct.queue.core.windows.net",
                           credential=azure.identity.aio.DefaultAzureCredential())
    """

    max_batch = 32  # Azure's limit per receive
    releases_count = False  # released messages are re-sent as new ones (see the module doc)

    def __init__(self, queue_name: str, *, connection_string: str | None = None,
                 account_url: str | None = None, credential: Any = None,
                 encoding: str = "text", time_to_live: int | None = None) -> None:
        if not isinstance(queue_name, str):
            raise InvalidArgumentType(
                f"queue_name must be a str, got {type(queue_name).__name__}")
        if not _QUEUE_NAME.fullmatch(queue_name):
            raise InvalidArgument(
                f"queue_name={queue_name!r} is not a valid Azure queue name: use 3 to 56 "
                "lowercase letters, digits and single hyphens, starting and ending with a "
                f"letter or digit (56 so that '{POISON_SUFFIX}' fits in Azure's 63)")
        if (connection_string is None) == (account_url is None):
            raise InvalidArgument(
                "give exactly one of connection_string=... or account_url=... (with credential=)")
        for argument, value in (("connection_string", connection_string),
                                ("account_url", account_url)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentType(f"{argument} must be a str, got {type(value).__name__}")
        if encoding not in ("text", "base64"):
            raise InvalidArgument(f"encoding={encoding!r} must be 'text' or 'base64'")
        if time_to_live is not None and (
                not isinstance(time_to_live, int) or isinstance(time_to_live, bool)
                or not (time_to_live == -1 or time_to_live >= 1)):
            raise InvalidArgument(
                f"time_to_live={time_to_live!r} must be whole seconds >= 1, or -1 for never")
        self.queue_name = queue_name
        self.poison_queue_name = queue_name + POISON_SUFFIX
        self.name = f"azure-queue:{queue_name}"
        self._time_to_live = time_to_live
        policies: dict[str, Any] = {}
        if encoding == "base64":
            policies = {"message_encode_policy": TextBase64EncodePolicy(),
                        "message_decode_policy": TextBase64DecodePolicy()}

        def client(name: str) -> QueueClient:
            if connection_string is not None:
                return QueueClient.from_connection_string(connection_string, name, **policies)
            assert account_url is not None
            return QueueClient(account_url, name, credential=credential, **policies)

        self._make_client = client
        self._clients: dict[str, QueueClient] = {}
        self._created: set[str] = set()

    def __repr__(self) -> str:
        return f"<AzureQueue {self.queue_name}>"

    # Clients are made on first use, so that a closed AzureQueue opens again when used.
    @property
    def _client(self) -> QueueClient:
        return self._client_of(self.queue_name)

    @property
    def _poison(self) -> QueueClient:
        return self._client_of(self.poison_queue_name)

    def _client_of(self, name: str) -> QueueClient:
        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = self._make_client(name)
        return client

    # -- the MessageSource protocol --------------------------------------------------------------

    async def receive(self, max_messages: int, visibility_timeout: float) -> list[QueueMessage]:
        """Up to `max_messages` (at most 32) messages, invisible for `visibility_timeout` s."""
        count = max(1, min(int(max_messages), self.max_batch))
        seconds = _whole_seconds(visibility_timeout, 1)

        async def receive() -> list[QueueMessage]:
            received = []
            async for item in self._client.receive_messages(
                    messages_per_page=count, max_messages=count, visibility_timeout=seconds):
                received.append(QueueMessage(item.id, _text(item.content), item.dequeue_count or 1,
                                        item.pop_receipt))
            return received

        return await self._call("receive messages", self._client, receive)

    async def extend(self, message: QueueMessage, seconds: float) -> None:
        """Keep `message` invisible `seconds` more; MessageLost when its pop receipt is stale."""
        updated = await self._call(
            "extend visibility", self._client, lambda: self._client.update_message(
                message.id, message.receipt, visibility_timeout=_whole_seconds(seconds, 0)),
            message)
        message.receipt = updated.pop_receipt

    async def complete(self, message: QueueMessage) -> None:
        """Delete `message`."""
        await self._call("delete message", self._client,
                         lambda: self._client.delete_message(message.id, message.receipt),
                         message)

    async def abandon(self, message: QueueMessage, delay: float, *, failed: bool = True) -> None:
        """Visible again after `delay` s; untried (`failed=False`): re-sent as a new message."""
        seconds = _whole_seconds(delay, 0)
        if failed:
            updated = await self._call(
                "abandon message", self._client, lambda: self._client.update_message(
                    message.id, message.receipt, visibility_timeout=seconds), message)
            message.receipt = updated.pop_receipt
            return
        await self._replace(message, self._client, message.text, seconds)

    async def dead_letter(self, message: QueueMessage, reason: str) -> None:
        """Send the envelope to `<queue>-poison`, then delete `message` here."""
        envelope = {
            "reason": reason, "queue": self.queue_name, "id": message.id,
            "dequeue_count": message.dequeue_count,
            "poisoned_at": datetime.now(timezone.utc).isoformat(), "text": message.text}
        text = json.dumps(envelope)
        if len(text.encode()) > MAX_ENVELOPE:  # else the poison send fails on every delivery
            envelope["text"] = message.text[:MAX_ENVELOPE // 8]
            envelope["truncated_from"] = len(message.text)
            text = json.dumps(envelope)
        await self._replace(message, self._poison, text, 0)

    async def close(self) -> None:
        """Close the HTTP clients; a later call opens new ones."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()

    # -- for producers and operators -------------------------------------------------------------

    async def send(self, body: Any, *, delay: float = 0) -> str:
        """Send `body` (JSON-encoded unless it is a str) visible after `delay` s; its id.

        Example::

            await queue.send({"Invoice": {"Id": 42}})
        """
        text = body if isinstance(body, str) else json.dumps(body)
        return await self._send_to(self._client, text, _whole_seconds(delay, 0))

    async def poisoned(self, max_messages: int = 32) -> list[dict[str, Any]]:
        """Peek at up to 32 poison envelopes (oldest first) without removing them.

        Example::

            for entry in await queue.poisoned():
                print(entry["reason"], entry["text"])
        """
        async def peek() -> list[dict[str, Any]]:
            items = await self._poison.peek_messages(max_messages=min(max_messages, 32))
            return [json.loads(_text(item.content)) for item in items]

        return await self._call("peek poison messages", self._poison, peek)

    # -- helpers ----------------------------------------------------------------------------------

    async def _replace(self, message: QueueMessage, client: QueueClient, text: str,
                       delay: int) -> None:
        """Send `text` through `client` in place of `message`, then delete `message`; first
        renew its receipt, so that a stale one raises MessageLost before any copy exists."""
        await self.extend(message, COPY_GUARD)
        await self._send_to(client, text, delay)
        await self.complete(message)

    async def _send_to(self, client: QueueClient, text: str, delay: int) -> str:
        async def send() -> str:
            sent = await client.send_message(text, visibility_timeout=delay or None,
                                             time_to_live=self._time_to_live)
            return str(sent.id)

        return await self._call("send message", client, send)

    async def _call(self, operation: str, client: QueueClient,
                    action: Callable[[], Awaitable[T]], message: QueueMessage | None = None) -> T:
        """Run `action`, creating the queue once when it is missing; Azure's errors become
        MessageLost (the message is gone or its receipt stale) or StoreUnavailable, naming the
        queue and the operation but never the URL (a SAS token may be in it)."""
        queue = client.queue_name
        for attempt in range(2):
            try:
                if queue not in self._created and message is None:
                    await self._create(client)
                return await action()
            except ResourceNotFoundError as exc:
                if message is not None and _code(exc) in _GONE_CODES | {None}:
                    raise MessageLost(f"message {message.id!r} of queue {queue!r} is gone or "
                                      f"received by another consumer ({operation})") from None
                if attempt == 0 and _code(exc) == "QueueNotFound":
                    self._created.discard(queue)
                    continue
                raise _unavailable(operation, queue, exc) from None
            except HttpResponseError as exc:
                if message is not None and _code(exc) in _GONE_CODES:
                    raise MessageLost(f"message {message.id!r} of queue {queue!r} was received "
                                      f"by another consumer ({operation})") from None
                raise _unavailable(operation, queue, exc) from None
            except AzureError as exc:
                raise _unavailable(operation, queue, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _create(self, client: QueueClient) -> None:
        with contextlib.suppress(ResourceExistsError):
            await client.create_queue()
        self._created.add(client.queue_name)


def _whole_seconds(seconds: float, low: int) -> int:
    """Azure takes whole seconds: round up, within [low, 7 days]."""
    return max(low, min(MAX_VISIBILITY, math.ceil(seconds)))


def _text(content: Any) -> str:
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)


def _code(exc: Exception) -> str | None:
    code = getattr(exc, "error_code", None)
    # The SDK gives a StorageErrorCode (a str enum, whose str() is "StorageErrorCode.X" on
    # Python 3.11) or a plain str: compare by value.
    code = getattr(code, "value", code)
    return str(code) if code is not None else None


def _unavailable(operation: str, queue: str, exc: Exception) -> StoreUnavailable:
    """StoreRefused for what retrying cannot clear (the credential refused: HTTP 401 or 403),
    else StoreUnavailable."""
    status = getattr(exc, "status_code", None)
    detail = f"HTTP {status} {_code(exc) or ''}".strip() if status else type(exc).__name__
    if status in (401, 403):
        return StoreRefused(
            f"Azure queue {queue!r}: {operation} refused ({detail}); check the account key, "
            "SAS token or credential and its permissions on the account's queues")
    return StoreUnavailable(
        f"Azure queue {queue!r}: {operation} failed ({detail}); check that the storage account "
        "is reachable and the credential may use its queues")
