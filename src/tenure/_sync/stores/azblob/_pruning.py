# GENERATED from src/tenure/_async/stores/azblob/_pruning.py by scripts/unasync.py: do not edit.
"""Forgetting the names nobody holds on an azblob store: `prune(idle)`, the `retain` sweep and
the forgetting at release of `retain=0`.

A name's state is the blobs of its directory: `lock`, or `slot-<i>` and `counter`. It is
forgotten when none of them is leased (lease state available, expired or broken) and none was
written for `idle` seconds (Last-Modified: a grant writes the blob that gives its token, so the
youngest of them says when the name was last granted). Each blob is deleted If-Match the ETag
listed: a lease does not change a blob's ETag, but the service refuses to delete a leased blob
without its lease id (412), and a grant that came and went moved the sequence number (a new
ETag: 412 too). So a grant racing a prune either comes first (the name is kept) or finds the
blob gone and creates it anew with its sequence number at the wall clock in microseconds,
above every earlier token (see _tokens.py). A semaphore's counter goes last, once every slot
was deleted.

A lock blob that keeps a record (its pages) hands the record to the name's `record` blob
first (see _records.keep_record), so records outlive the forgetting; `record` blobs are never
pruned.

Example::

    forgotten = prune(container, idle=3600.0, dry_run=False)
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError

from tenure._sync import _shim
from tenure._sync.stores.azblob._container import Container
from tenure._sync.stores.azblob._failures import container_missing, status
from tenure._sync.stores.azblob._layout import ROOT, parse_record
from tenure._sync.stores.azblob._records import keep_record
from tenure._errors import StoreRefused, StoreUnavailable

log = logging.getLogger("tenure")

# Lease states of a blob that nobody holds (any other, "leased" or "breaking", keeps the name).
_FREE = frozenset({"available", "expired", "broken"})
# Names forgotten at once (their deletes run concurrently).
_BATCH = 32
# The longest gap between two sweep pages of one store, in seconds (see Sweeper).
SWEEP_EVERY = 60.0


@dataclass(frozen=True)
class Listed:
    """One blob of a name's state as listed: its name, ETag, Last-Modified (epoch s), whether
    it is leased, its size (a lock blob that kept a record is not empty) and sequence number.

    Example::

        Listed("tenure/jobs-0/lock", '"0x1"', 1.7e9, False, 0, 7)
    """

    key: str
    etag: str
    modified: float
    leased: bool
    size: int
    sequence_number: int | None

    @property
    def directory(self) -> str:
        """The name's directory (every blob of one name shares it)."""
        return self.key.rsplit("/", 1)[0]

    @property
    def kind(self) -> str:
        """`lock`, `counter` or `slot-<i>`."""
        return self.key.rsplit("/", 1)[-1]


def listed(blob: Any) -> Listed | None:
    """A listed blob as part of a name's state; None for a record blob or a foreign blob.

    Example::

        state = listed(blob_properties)
    """
    kind = blob.name.rsplit("/", 1)[-1]
    if not (kind in ("lock", "counter") or kind.startswith("slot-")) or "/" not in blob.name:
        return None
    modified = blob.last_modified.timestamp() if blob.last_modified is not None else math.inf
    return Listed(blob.name, blob.etag, modified, blob.lease.state not in _FREE,
                  blob.size or 0, blob.page_blob_sequence_number)


class Groups:
    """The blobs of a listing, fed in order, handed back name by name (a name's blobs are
    consecutive in a listing: they share a directory). Pending blobs carry over from one page
    to the next.

    Example::

        groups = Groups()
        for blob in blobs:
            done = groups.add(blob)  # the previous name's blobs once a new name starts
    """

    def __init__(self) -> None:
        self._pending: list[Listed] = []

    def add(self, blob: Any) -> list[Listed] | None:
        """Take `blob`; the previous name's blobs when `blob` starts another name."""
        state = listed(blob)
        if state is None:
            return None
        done = None
        if self._pending and self._pending[0].directory != state.directory:
            done, self._pending = self._pending, []
        self._pending.append(state)
        return done

    def rest(self) -> list[Listed] | None:
        """The last name's blobs (the listing is over)."""
        done, self._pending = self._pending or None, []
        return done


def idle_for(group: Sequence[Listed], idle: float, now: float) -> bool:
    """True when no blob of the name is leased and none was written in the last `idle` s.

    Example::

        idle_for([Listed("tenure/a-0/lock", "e", 0.0, False, 0, 1)], 60.0, time.time())  # True
    """
    # idle 0 skips the clocks: Last-Modified is the service's, `now` this machine's.
    return not any(blob.leased for blob in group) and (idle <= 0 or all(
        now - blob.modified >= idle for blob in group))


def forget(container: Container, group: Sequence[Listed]) -> bool:
    """Delete one name's blobs as listed (records handed over first); False when a grant
    came meanwhile (a blob leased or rewritten since it was listed: the name is kept).

    Example::

        forgotten = forget(container, group)
    """
    deleted = False
    for blob in sorted(group, key=lambda blob: blob.kind == "counter"):  # the counter last
        try:
            with container.bounded("pruning", blob.directory):
                if blob.kind == "lock" and blob.size:
                    _hand_record_over(container, blob)
                container.blob(blob.key).delete_blob(
                    etag=blob.etag, match_condition=MatchConditions.IfNotModified)
            deleted = True
        except HttpResponseError as exc:
            if status(exc) == 404:
                continue  # gone already (another pruner)
            if status(exc) in (409, 412):
                return False  # leased, or granted since it was listed: keep the name
            return _kept_after(container.failure("pruning", blob.directory, exc))
        except AzureError as exc:
            return _kept_after(container.failure("pruning", blob.directory, exc))
        except StoreUnavailable as exc:  # no answer within the bound
            return _kept_after(exc)
    return deleted


def _kept_after(error: StoreUnavailable) -> bool:
    """A name left for the next prune after a transient failure (one slow answer does not end
    a prune of thousands); a refusal (access denied) ends it."""
    if isinstance(error, StoreRefused):
        raise error
    log.debug("tenure: a name is kept for the next prune: %s", error)
    return False


def _hand_record_over(container: Container, blob: Listed) -> None:
    """Copy the record kept in the lock blob's pages, as listed (If-Match), to the name's
    record blob: 412 when the blob changed since (the delete is then not tried)."""
    download = container.blob(blob.key).download_blob(
        etag=blob.etag, match_condition=MatchConditions.IfNotModified)
    record = parse_record(download.readall())
    if record is not None:
        keep_record(container, blob.directory, download.properties.metadata or {},
                          record, blob.sequence_number or 0)


def _forget_all(container: Container, groups: Sequence[Sequence[Listed]]) -> int:
    def one(group: Sequence[Listed]) -> bool:
        return forget(container, group)

    return sum(_shim.run_all(one, list(groups))) if groups else 0


def prune(container: Container, idle: float, dry_run: bool, prefix: str = ROOT) -> int:
    """Forget every name under `prefix` idle for `idle` s (see the module docstring); how many
    were forgotten (with `dry_run`, would be). Page by page: one page in memory at a time.

    Example::

        forgotten = prune(container, 86400.0, False)
    """
    container.refuse_if_closed("prune", "")
    now, token, count, groups = time.time(), None, 0, Groups()
    while True:
        try:
            blobs, token = container.page(prefix, token)
        except AzureError as exc:
            if container_missing(exc):
                return count
            raise container.failure("pruning", "", exc) from None
        ready: list[Sequence[Listed]] = []
        for blob in blobs:
            done = groups.add(blob)
            if done is not None and idle_for(done, idle, now):
                ready.append(done)
        if token is None:
            done = groups.rest()
            if done is not None and idle_for(done, idle, now):
                ready.append(done)
        if dry_run:
            count += len(ready)
        else:
            for start in range(0, len(ready), _BATCH):
                count += _forget_all(container, ready[start:start + _BATCH])
        if token is None:
            return count


class Sweeper:
    """The `retain` of a store that cannot expire blobs by itself: after a release, at most one
    listing page per interval (retain / 4, 1 s to SWEEP_EVERY), in the background, forgetting
    the names of that page idle for `retain`; the next sweep goes on from the next page, and
    starts over after the last. `retain=0` forgets the released name at once instead
    (`forget_now`); `retain=inf` never sweeps.

    Example::

        sweeper = Sweeper(container, retain=3600.0)
        sweeper.after_release()
    """

    def __init__(self, container: Container, retain: float) -> None:
        self._container = container
        self.retain = retain
        self._every = min(max(retain / 4, 1.0), SWEEP_EVERY)
        self._next = time.monotonic() + self._every
        self._token: str | None = None
        self._groups = Groups()
        self._sweeping = False

    def start_afresh(self) -> None:
        """In a child after fork(): no sweep of the parent's under way."""
        self._sweeping = False

    def after_release(self) -> None:
        """Start a sweep page in the background when one is due (never for retain 0 or inf)."""
        if not 0 < self.retain < math.inf or self._sweeping:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next, self._sweeping = now + self._every, True
        _shim.start_soon(self._sweep_page)

    def _sweep_page(self) -> None:
        try:
            self.sweep_page()
        except Exception as exc:  # best effort (closed meanwhile, service away): next time
            log.debug("tenure: %s: a retain sweep failed: %s", self._container.url, exc)
        finally:
            self._sweeping = False

    def sweep_page(self) -> int:
        """One page of the sweep (see the class docstring); the names it forgot.

        Example::

            forgotten = sweeper.sweep_page()
        """
        self._container.refuse_if_closed("sweep", "")
        now = time.time()
        try:
            blobs, self._token = self._container.page(ROOT, self._token)
        except AzureError as exc:
            self._token = None
            if container_missing(exc):
                return 0
            raise
        ready = [done for done in map(self._groups.add, blobs)
                 if done is not None and idle_for(done, self.retain, now)]
        if self._token is None:  # the last page: its last name too, and start over next time
            done = self._groups.rest()
            if done is not None and idle_for(done, self.retain, now):
                ready.append(done)
        count = 0
        for start in range(0, len(ready), _BATCH):
            count += _forget_all(self._container, ready[start:start + _BATCH])
        return count

    def forget_now(self, directory: str) -> None:
        """`retain=0`: forget the name of `directory` right after its release, unless one of
        its blobs is leased again or was rewritten since (best effort: a failure only leaves
        the name to `prune`).

        Example::

            sweeper.forget_now(directory("jobs"))
        """
        with contextlib.suppress(StoreUnavailable, AzureError):
            blobs, _ = self._container.page(directory, None)
            groups = Groups()
            found = [done for done in map(groups.add, blobs) if done is not None]
            rest = groups.rest()
            for group in [*found, *([rest] if rest else [])]:
                if idle_for(group, 0.0, 0.0):
                    forget(self._container, group)
