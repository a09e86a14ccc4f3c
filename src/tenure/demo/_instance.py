"""One instance of the demo's invoice app, as its own OS process:

    python -m tenure.demo._instance SETTINGS_JSON

It runs a tenure Worker with a singleton job, every second, that pays pending (or stale)
invoices through the four layers, each of which the demo can switch off:

1. lease: the job's lock, with a fencing token (`run.token`);
2. fencing: a fenced claim on each invoice row, and a final write only under that token;
3. idempotency: an idempotency key for the charge, which the provider honours;
4. outbox: the "invoice paid" mail is written in the same transaction as the payment and
   delivered by a relay (a leader job); without it the mail is sent after the commit.

Events go to the shared events file, one JSON line each. The demo aims each fault at the
moment a layer is there for: on SIGUSR1 the instance reads its request file (`fault-PID` in
the run's directory) and then, at its next invoice,

- "freeze": stops itself (SIGSTOP) after claiming the invoice and before charging it, the worst
  moment for a GC pause; the demo wakes it (SIGCONT) well after its lease has expired, once
  another instance has paid that invoice (or after a longer wait);
- "kill": dies (SIGKILL) right after the payment's commit and before the mail is sent, the
  worst moment for a dual write; the demo restarts it.

SIGUSR2 withdraws a request that has not taken effect.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import tenure
from tenure import claims, outbox
from tenure.chaos._lifeline import watch_parent
from tenure.demo._world import World, invoices


class Events:
    """Appends this instance's events to the shared file (one write per line, O_APPEND)."""

    def __init__(self, path: Path, instance: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.instance = instance

    def emit(self, event: str, **fields: Any) -> None:
        line = {"t": time.monotonic(), "instance": self.instance, "pid": os.getpid(),
                "event": event, **fields}
        os.write(self._fd, (json.dumps(line) + "\n").encode())


class Transactions:
    """This process's connections to an engine that are in use, so that a freeze can wait
    until none is and keep new ones back: the freeze is aimed between the claim and the
    charge, and stopping this process inside another thread's transaction on the app's
    SQLite database (the outbox relay's, say) would hold its write lock, and so every other
    instance, until the thaw.

    Example::

        transactions = Transactions(world.app)
        with transactions.none_open():
            os.kill(os.getpid(), signal.SIGSTOP)
    """

    def __init__(self, engine: sa.Engine) -> None:
        self._open = 0
        self._changed = threading.Condition()
        sa.event.listen(engine, "checkout", lambda *_: self._count(+1))
        sa.event.listen(engine, "checkin", lambda *_: self._count(-1))

    def _count(self, change: int) -> None:
        with self._changed:
            self._open += change
            self._changed.notify_all()

    @contextlib.contextmanager
    def none_open(self, timeout: float = 5.0) -> Iterator[None]:
        """Hold new connections back once none is in use (or after `timeout`)."""
        with self._changed:
            self._changed.wait_for(lambda: self._open <= 0, timeout)
            yield


class InvoiceApp:
    """The app's invoice job, with the layers `settings` switches on."""

    def __init__(self, world: World, events: Events, settings: dict[str, Any]) -> None:
        self.world, self.events = world, events
        self.transactions = Transactions(world.app)
        self.layers: set[str] = set(settings["layers"])
        self.stale = float(settings["stale"])
        self.batch = int(settings["batch"])
        self.latency = float(settings["latency"])
        self.fault_requested: str | None = None  # "freeze" or "kill", see the module's docstring

    def process_invoices(self, run: tenure.Run) -> None:
        """Pay what is pending or stale, a batch per period."""
        rows = claims.pending_or_stale(self.world.app, invoices, stale_after=self.stale,
                                       limit=self.batch)
        for row in rows:
            if run.stopping:
                return
            run.check()  # a lost lease stops here, between invoices
            if not self._claim(row.id, run.token):
                # Another instance claimed it first: with the lease on, only after a takeover.
                self.events.emit("claim_lost", invoice=row.id, token=run.token)
                continue
            self.events.emit("claimed", invoice=row.id, token=run.token)
            if self.fault_requested == "freeze":
                self.fault_requested = None
                self.events.emit("frozen", invoice=row.id, token=run.token)
                # The GC pause; the demo sends SIGCONT. Sent to this thread, not the process: a
                # process-wide SIGSTOP may be taken by another thread while this one runs on.
                with self.transactions.none_open():
                    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                self.events.emit("thawed", invoice=row.id, token=run.token)
            charge_id, replayed = self._pay(row.id, row.amount)
            if replayed:
                self.events.emit("replayed", invoice=row.id)
            if self._record_payment(row.id, run.token, charge_id):
                self.events.emit("paid", invoice=row.id, token=run.token)
            else:
                self.events.emit("rejected", invoice=row.id, token=run.token)

    def _claim(self, invoice: int, token: int) -> bool:
        if "fencing" in self.layers:
            return bool(claims.claim(self.world.app, invoices, invoice,
                                     holder=self.events_holder, token=token,
                                     stale_after=self.stale))
        # Without fencing: the same conditional claim, but blind to tokens.
        with self.world.app.begin() as conn:
            now = time.time()
            taken = conn.execute(
                sa.update(invoices)
                .where(invoices.c.id == invoice,
                       sa.or_(invoices.c.status == claims.PENDING,
                              sa.and_(invoices.c.status == claims.PROCESSING,
                                      invoices.c.claimed_at < now - self.stale)))
                .values(status=claims.PROCESSING, claimed_at=now)).rowcount
        return bool(taken == 1)

    @property
    def events_holder(self) -> str:
        return f"instance-{self.events.instance}:{os.getpid()}"

    def _pay(self, invoice: int, amount: int) -> tuple[int, bool]:
        """Charge the invoice; (charge id, whether the provider's answer was a replay)."""
        if "idempotency" not in self.layers:
            charge = self.world.charge(invoice, amount, None, self.latency)
            return charge.id, False
        key = f"pay-invoice-{invoice}"
        with self.world.idempotency.begin(key, request={"amount": amount}) as step:
            if step.finished:
                return int(step.response["charge"]), True
            charge = step.call("charged", lambda: self.world.charge(
                invoice, amount, key, self.latency).as_dict())
            step.finish({"charge": charge["id"]})
            return int(charge["id"]), bool(charge["replayed"])

    def _record_payment(self, invoice: int, token: int, charge_id: int) -> bool:
        with self.world.app.begin() as conn:
            if "fencing" in self.layers:
                written = claims.complete(conn, invoices, invoice, token,
                                          {"charge_id": charge_id})
            else:
                written = conn.execute(
                    sa.update(invoices).where(invoices.c.id == invoice)
                    .values(status=claims.DONE, charge_id=charge_id)).rowcount == 1
            if written and "outbox" in self.layers:
                outbox.add(conn, "invoice.paid", {"invoice": invoice, "charge": charge_id},
                           key=str(invoice))
        if written and self.fault_requested == "kill":
            self.events.emit("killed", invoice=invoice, token=token)
            os.kill(os.getpid(), signal.SIGKILL)  # the crash between commit and mail
        if written and "outbox" not in self.layers:
            self.world.notify(invoice, None)  # a dual write: lost if we die right before it
        return bool(written)


def main(argv: list[str]) -> int:
    watch_parent()  # exit soon after the demo, even one killed with SIGKILL
    settings = json.loads(argv[0])
    directory = Path(settings["directory"])
    world = World(directory)
    events = Events(directory / "events.jsonl", settings["instance"])
    app = InvoiceApp(world, events, settings)
    request = directory / f"fault-{os.getpid()}"
    signal.signal(signal.SIGUSR1, lambda *_: setattr(app, "fault_requested",
                                                     request.read_text().strip()))
    signal.signal(signal.SIGUSR2, lambda *_: setattr(app, "fault_requested", None))

    store = tenure.connect(settings["store"])
    worker = tenure.Worker(store, grace=1.0)
    ttl = float(settings["ttl"])
    # Without the lease layer, each instance has a lock of its own: nothing keeps them apart.
    job = "invoices" if "lease" in app.layers else f"invoices-{settings['instance']}"
    worker.every(timedelta(seconds=1), name=job, ttl=ttl, poll=0.1, jitter=0.05)(
        app.process_invoices)
    if "outbox" in app.layers:
        relay = outbox.Relay(world.app, world.deliver, backoff=0.2, max_backoff=1.0,
                             claim_ttl=2 * ttl)
        relay.register(worker, every=timedelta(seconds=0.5), ttl=ttl)
    events.emit("started")
    try:
        worker.run()  # until SIGTERM
    finally:
        store.close()
        world.dispose()
    events.emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
