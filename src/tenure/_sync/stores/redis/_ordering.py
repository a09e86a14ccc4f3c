# GENERATED from src/tenure/_async/stores/redis/_ordering.py by scripts/unasync.py: do not edit.
"""The order of a lease's renewal and its release on a Redis store: no RENEW of a lease reaches
the server after its RELEASE.

A RENEW that finds its lease's key gone, with no counter left for the name, writes the lease
back (a restart that lost the data, see RENEW in _scripts.py); a release followed by a prune,
or a release with `retain=0`, leaves no counter either. So a renewal sent before the release
but answered after it, or one sent by the restart reclaim while the release is on its way, would
bring the released lease back: a free name refused for a round trip, until renew() frees it
again. Two rules close that: a release is sent once no renewal of its lease is on its way (it
waits for one, answered in a round trip, for at most RENEWAL_PATIENCE: a path that slow may
stall, and a release on it must not wait twice; a renewal given up on may still arrive late,
as any request on a stalled path), and a renewal leaves out the leases being released.

Example::

    order = RenewalOrder()
    releasing = order.start_renewal(on_its_way, ["lease-1", "lease-2"])
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from tenure._sync import _shim

RENEWAL_PATIENCE = 1.0  # seconds a release waits at most for a renewal of its lease on its way


class RenewalOrder:
    """Which leases have a renewal on its way, which a release; see the module.

    Example::

        order = RenewalOrder()
        order.start_release(["lease-1"], patience=5.0)
        try:
            ...  # send the RELEASE
        finally:
            order.end_release(["lease-1"])
    """

    def __init__(self) -> None:
        # Sync: the renewal thread and the releasing threads (async: held for no await).
        self._mutex = threading.Lock()
        self._renewing: dict[str, _shim.Event] = {}  # lease id: set once its renewal ended
        self._releasing: set[str] = set()

    def start_renewal(self, on_its_way: _shim.Event, lease_ids: Iterable[str]) -> set[str]:
        """Note a renewal of `lease_ids` (ended by setting `on_its_way`, see end_renewal);
        the ids among them being released, which it must leave out."""
        with self._mutex:
            releasing = {lease_id for lease_id in lease_ids if lease_id in self._releasing}
            for lease_id in lease_ids:
                if lease_id not in releasing:
                    self._renewing[lease_id] = on_its_way
        return releasing

    def end_renewal(self, on_its_way: _shim.Event, lease_ids: Iterable[str]) -> None:
        """The renewal started with `on_its_way` was answered or given up on."""
        with self._mutex:
            for lease_id in lease_ids:
                if self._renewing.get(lease_id) is on_its_way:
                    del self._renewing[lease_id]
        on_its_way.set()

    def start_release(self, lease_ids: Iterable[str], patience: float) -> None:
        """Return once no renewal of `lease_ids` is on its way (or `patience` seconds passed),
        the leases noted as being released: no renewal sends them until end_release."""
        lease_ids = list(lease_ids)
        deadline = _shim.monotonic() + patience
        while True:
            with self._mutex:
                pending = next((self._renewing[lease_id] for lease_id in lease_ids
                                if lease_id in self._renewing), None)
                left = deadline - _shim.monotonic()
                if pending is None or left <= 0:
                    self._releasing.update(lease_ids)
                    return
            _shim.wait_event(pending, left)

    def end_release(self, lease_ids: Iterable[str]) -> None:
        """The release of `lease_ids` was answered or given up on."""
        with self._mutex:
            self._releasing.difference_update(lease_ids)
