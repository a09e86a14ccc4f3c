# GENERATED from src/tenure/_async/stores/azblob/_store.py by scripts/unasync.py: do not edit.
"""AzureBlobStore: leases on blobs of one Azure Storage container, through a
ContainerClient; the leases (_leases.py) and the records (_records.py) of its container
(_container.py) behind the backend protocol.

Example::

    store = tenure.connect(AzureBlobStore(client))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from azure.core.exceptions import AzureError
from azure.storage.blob import ContainerClient

from tenure import _forks
from tenure._sync import _shim
from tenure._sync.stores._options import DEFAULT_RETAIN, retain_seconds
from tenure._sync.stores._protocol import Backend, RecordKeeper
from tenure._sync.stores.azblob._container import Container
from tenure._sync.stores.azblob._failures import refusal_fix
from tenure._sync.stores.azblob._layout import directory
from tenure._sync.stores.azblob._leases import Leases
from tenure._sync.stores.azblob._pruning import Sweeper, prune
from tenure._sync.stores.azblob._records import Records
from tenure._sync.stores.azblob._settings import DEFAULT_TIMEOUT, checked_timeout
from tenure._sync.stores.azblob._waiting import Contention, poll_pause, wait_and_acquire
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._types import Capabilities, Grant, LeaseInfo, LostReason


class AzureBlobStore(Backend, RecordKeeper):
    """Leases on blobs of one Azure Storage container, through a ContainerClient you configured
    (credentials, retries, proxies are then yours). Needs tenure[azure].

    Example::

        from azure.identity import DefaultAzureCredential
        from azure.storage.blob import ContainerClient

        client = ContainerClient("https://myaccount.blob.core.windows.net", "locks",
                                 credential=DefaultAzureCredential())
        store = tenure.connect(AzureBlobStore(client))
    """

    capabilities = Capabilities(min_ttl=15.0, max_ttl=60.0,
                                ttl_hint=" (Azure blob leases last 15 to 60 s)")

    def __init__(self, container: ContainerClient, *, create_container: bool = True,
                 fencing: bool = True, close_client: bool = False,
                 credential: Any = None, timeout: float = DEFAULT_TIMEOUT,
                 retain: float | str = DEFAULT_RETAIN) -> None:
        if not isinstance(container, ContainerClient):
            raise InvalidArgumentType(
                f"container must be an azure.storage.blob.ContainerClient, got "
                f"{type(container).__module__}.{type(container).__qualname__}"
            )
        self.timeout = checked_timeout(timeout)
        self.retain = retain_seconds(retain)
        self.container = container  # the SDK's client, as given
        self.url = f"azblob://{container.account_name}/{container.container_name}"
        if self.retain != DEFAULT_RETAIN:  # the URL reads back as the same store
            self.url += f"?retain={self.retain:g}"
        # The container as every operation reaches it (bounds, blob clients, failures).
        self._container = Container(container, url=self.url, timeout=self.timeout,
                                    create_container=create_container,
                                    close_client=close_client, credential=credential)
        self._credential = credential
        self._leases = Leases(self._container, fencing=fencing)
        self._records = Records(self._container, self._leases)
        self._sweeper = Sweeper(self._container, self.retain)
        self._contention = Contention()  # names refused lately: see waits_its_turn
        _forks.in_child_after_fork(self, AzureBlobStore._start_afresh)

    def _refusal(self, exc: AzureError) -> str | None:
        """What to fix when `exc` is permanent (see `refusal_fix`); None when it is transient."""
        return refusal_fix(exc, self.container.container_name, self._credential)

    def _start_afresh(self) -> None:
        """In a child after fork(): a new HTTP session (see Container.start_afresh), and none
        of the parent's holder writes, under the parent's leases."""
        self._container.start_afresh()
        self._leases.start_afresh()
        self._sweeper.start_afresh()

    def try_acquire(self, name: str, holder: str, ttl: float, limit: int) -> Grant | None:
        grant = self._leases.try_acquire(name, holder, ttl, limit)
        if grant is None:
            self._contention.refused(name)
        return grant

    def renew(self, grants: Sequence[Grant], ttl: float) -> list[Grant | LostReason]:
        return self._leases.renew(grants, ttl)

    def release(self, grant: Grant) -> bool:
        released = self._leases.release(grant)
        if self.retain == 0:  # forget the name now, unless it was taken again meanwhile
            self._sweeper.forget_now(directory(grant.name))
        else:
            self._sweeper.after_release()
        return released

    def prune(self, idle: float, dry_run: bool = False) -> int:
        """Forget the names nobody has held for `idle` seconds: delete their blobs (never a
        leased one; records move to a blob of their own and stay); how many names were
        forgotten, or with `dry_run` would be. One listing request per 5,000 blobs, one delete
        per blob forgotten (see _pruning.py).

        Example::

            forgotten = backend.prune(idle=86400.0)
        """
        if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not idle >= 0:
            raise InvalidArgument(f"idle={idle!r} is out of range: give seconds from 0")
        return prune(self._container, float(idle), dry_run)

    def break_lease(self, name: str) -> int:
        return self._leases.break_lease(name)

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        return self._leases.listing(prefix)

    def wait_released(self, name: str, timeout: float,
                            patience: float | None = None) -> None:
        _shim.sleep(timeout)  # the core's acquires wait in wait_and_acquire

    def wait_and_acquire(self, name: str, holder: str, ttl: float, limit: int,
                               timeout: float, patience: float) -> Grant | None:
        """One pause (a quarter second or a little less, whatever `timeout` is; never past
        `patience`), then one try: blob leases cannot wake a waiter, so every waiter polls at
        the same pace (see _waiting.py).

        Example::

            grant = backend.wait_and_acquire("jobs", "worker-1", 30.0, 1, 0.5, 10.0)
        """
        grant = wait_and_acquire(self._leases, name, holder, ttl, limit, timeout,
                                       patience)
        if grant is None:
            self._contention.refused(name)
        return grant

    def waits_its_turn(self, name: str) -> float:
        """How long an acquire of `name` pauses before its first try: a waiter's pause when
        this store was refused the name in the last second (others are likely polling for
        it), else 0 (see _waiting.py).

        Example::

            pause = backend.waits_its_turn("jobs")  # 0.0 for a name nobody else wants
        """
        return poll_pause() if self._contention.waits_its_turn(name) else 0.0

    def read_record(self, name: str) -> str | None:
        return self._records.read(name)

    def write_record(self, grant: Grant, record: str) -> bool:
        return self._records.write(grant, record)

    def records(self, prefix: str = "") -> dict[str, str]:
        return self._records.listing(prefix)

    def close(self) -> None:
        self._container.closed = True
        self._leases.cancel_descriptions()
        self._container.close()
