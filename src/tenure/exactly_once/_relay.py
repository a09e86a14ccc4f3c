"""The outbox's relay: it claims due messages (in order per key, skipping those another relay
holds), hands each to the handler, and marks it delivered, or schedules a retry with
exponential backoff, or dead-letters it; a leader job on a tenure.Worker runs it. Its counters
and the outbox's gauges are OpenTelemetry metrics.

Example::

    relay = Relay(engine, handler=lambda message: publish(message.topic, message.payload))
    relay.register(worker)                            # a leader job on a tenure.Worker
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from opentelemetry import metrics

from tenure._errors import InvalidArgument, InvalidArgumentType, TenureError
from tenure._lazy import warn_renamed
from tenure._timing import Backoff
from tenure._urls import redact
from tenure.exactly_once._outage import Outage
from tenure.exactly_once._outbox_table import (
    DEAD,
    DEFAULT,
    DELIVERED,
    MAX_ERROR_CHARS,
    PENDING,
    Outbox,
    OutboxMessage,
    OutboxSummary,
    checked_text,
)
from tenure.exactly_once._sql import (
    Connection,
    Engine,
    db_now,
    positive_seconds,
    sa,
)

__all__ = ["Relay", "RelayCounts", "RelayStats"]

log = logging.getLogger("tenure.outbox")

_meter = metrics.get_meter("tenure")
_delivered = _meter.create_counter("tenure.outbox.delivered", unit="{message}",
                                   description="Outbox messages delivered to the handler")
_retried = _meter.create_counter("tenure.outbox.retried", unit="{message}",
                                 description="Failed deliveries scheduled for a retry")
_dead = _meter.create_counter("tenure.outbox.dead_lettered", unit="{message}",
                              description="Messages moved to the dead-letter state")
# per outbox table, refreshed by the relays of this process
_latest: dict[str, OutboxSummary] = {}


def _observe(field: str) -> Callable[[Any], Iterable[metrics.Observation]]:
    def callback(_options: Any) -> Iterable[metrics.Observation]:
        return [metrics.Observation(getattr(summary, field), {"table": table})
                for table, summary in list(_latest.items())]
    return callback


_meter.create_observable_gauge("tenure.outbox.pending", [_observe("pending")],
                               unit="{message}", description="Messages not yet delivered")
_meter.create_observable_gauge("tenure.outbox.oldest_pending_age",
                               [_observe("oldest_pending_age")], unit="s",
                               description="Age of the oldest undelivered message")



@dataclass(frozen=True)
class RelayStats:
    """What one Relay did since it was made (this process): the snapshot `relay.stats()` returns.

    Example:
        >>> RelayStats(delivered=3).delivered
        3
    """

    delivered: int = 0
    retried: int = 0
    dead_lettered: int = 0
    errors: int = 0  # tries that failed with a database (or other) error, not a handler's


@dataclass
class RelayCounts:
    """Deprecated (tenure.outbox.RelayCounts warns): a relay's live counters, the fields of
    RelayStats, incremented as it works; `relay.counts` is this object. Read the snapshot
    `relay.stats()` instead.

    Example:
        >>> RelayCounts(delivered=3).delivered
        3
    """

    delivered: int = 0
    retried: int = 0
    dead_lettered: int = 0
    errors: int = 0  # tries that failed with a database (or other) error, not a handler's


class Relay:
    """Delivers outbox messages to `handler(message)`: a callable, or a publisher's bound
    method. A handler that returns delivered the message; one that raises gets it again after
    exponential backoff (`backoff` x 2^(attempt-1), jittered, at most `max_backoff`), and after
    `max_attempts` the message is dead-lettered with the last error.

    Delivery is at least once (a relay that dies mid-batch leaves its claimed messages to be
    claimed again after `claim_ttl`), so consumers dedupe with an `Inbox`. Per key, a message is
    delivered only once every earlier message of that key is delivered or dead.

    Run it as a leader job (`relay.register(worker)`: one relay at a time, the embedded default),
    or as N competing relays (`relay.run_forever()` in N processes): on PostgreSQL and
    MySQL 8 / MariaDB 10.6 they claim rows with FOR UPDATE SKIP LOCKED; elsewhere with a
    conditional UPDATE (and FOR UPDATE on older MySQL/MariaDB), correct too, just serialized by
    the database.

    Neither dies of the database: an unreachable, restarting or failing database is retried
    (`run_forever` every 0.1 s doubling to `retry_max` (2 s), jittered; the job at its next
    period), with one WARNING when the outage starts and one INFO when it ends; an error
    retrying cannot clear (authentication refused, a missing table) is logged at ERROR once per
    `relay.outage.error_every` (60 s) and retried too, so fixing it recovers the relay.
    `relay.outage.ongoing` tells whether the last try failed. As a job, a period the database
    failed raises StoreUnavailable (StoreRefused for what retrying cannot clear), so the worker
    records it as failed and `worker.health()` turns unhealthy after the job's
    `unhealthy_after` periods of outage.

    Example::

        relay = outbox.Relay(engine, handler=send_email, max_attempts=8)
        relay.register(worker, every=timedelta(seconds=1))
    """

    retry_min = 0.1  # run_forever's first wait after an error (s), doubling up to retry_max
    retry_max = 2.0

    def __init__(self, engine: Engine, handler: Callable[[OutboxMessage], Any], *,
                 outbox: Outbox | None = None, topics: Sequence[str] | None = None,
                 batch: int = 100, max_attempts: int = 10, backoff: float | timedelta = 1.0,
                 max_backoff: float | timedelta = 300.0,
                 claim_ttl: float | timedelta = 60.0) -> None:
        if not isinstance(engine, Engine):
            raise InvalidArgumentType(f"engine must be a SQLAlchemy Engine, got "
                                      f"{type(engine).__name__}")
        if not callable(handler):
            raise InvalidArgumentType(f"handler must be callable with an OutboxMessage, got "
                                      f"{type(handler).__name__}")
        for value, argument, top in ((batch, "batch", 10_000), (max_attempts, "max_attempts",
                                                                  1000)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise InvalidArgument(f"{argument}={value!r} must be an int from 1 to {top}")
        self.engine = engine
        self.handler = handler
        self.outbox = outbox or DEFAULT
        if not isinstance(self.outbox, Outbox):
            raise InvalidArgumentType("outbox must be a tenure.outbox.Outbox")
        self.topics = None if topics is None else [checked_text(topic, "topics[]")
                                                   for topic in topics]
        self.batch = batch
        self.max_attempts = max_attempts
        self.backoff = positive_seconds(backoff, "backoff")
        self.max_backoff = positive_seconds(max_backoff, "max_backoff")
        self.claim_ttl = positive_seconds(claim_ttl, "claim_ttl")
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._counters = RelayCounts()
        self.outage = Outage(log, "outbox relay",
                             redact(engine.url.render_as_string(hide_password=True)))

    def delay(self, attempts: int) -> float:
        """Seconds before attempt `attempts + 1`: exponential with jitter (50-100 %).

        Example::

            relay.delay(3)   # between 2 and 4 s with backoff=1
        """
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** max(0, min(attempts - 1, 60)))
        return ceiling * (0.5 + random.random() / 2)

    def _claim(self) -> tuple[str, list[sa.Row[Any]]]:
        t = self.outbox.table
        claim_id = f"{self.holder}:{uuid.uuid4().hex[:8]}"
        head = t.alias("head")
        earlier = t.alias("earlier")
        with self.engine.begin() as conn:
            now = db_now(conn)
            blocked = sa.exists().where(earlier.c.key == head.c.key,
                                        earlier.c.status == PENDING, earlier.c.seq < head.c.seq)
            free = sa.or_(head.c.claim_expires.is_(None), head.c.claim_expires < now)
            heads = (sa.select(head.c.seq)
                     .where(head.c.status == PENDING, head.c.available_at <= now, free, ~blocked)
                     .order_by(head.c.seq).limit(self.batch))
            if self.topics is not None:
                heads = heads.where(head.c.topic.in_(self.topics))
            still_free = (t.c.status == PENDING,
                          sa.or_(t.c.claim_expires.is_(None), t.c.claim_expires < now))
            claim = {"claimed_by": claim_id, "claim_expires": now + self.claim_ttl}
            dialect = conn.dialect.name
            if dialect not in ("postgresql", "sqlite"):
                # MySQL/MariaDB take neither LIMIT in an IN subquery nor UPDATE ... RETURNING.
                return claim_id, _claim_by_keys(conn, t, heads, self.batch, still_free,
                                                claim)
            if dialect == "postgresql":
                # A CTE, run once. As `seq IN (subquery)`, PostgreSQL may run the subquery
                # again for each row; each run skips the rows this statement has updated and
                # returns the next heads, so one claim took every head, not `batch` (40 of 40
                # with batch=10) and left nothing to competing relays.
                chosen = (heads.with_for_update(skip_locked=True, of=head).cte("chosen")
                          .prefix_with("MATERIALIZED"))
                mine: sa.ColumnElement[bool] = t.c.seq == chosen.c.seq
            else:
                mine = t.c.seq.in_(heads)
            statement = (sa.update(t).where(mine, *still_free).values(**claim)
                         .returning(*t.c))
            rows = sorted(conn.execute(statement).all(), key=lambda row: row.seq)
        return claim_id, rows

    def deliver_batch(self) -> int:
        """Claim the due messages (the oldest pending message of each key), deliver them in
        order, record the outcomes; returns how many were claimed (0: nothing due).

        Example::

            while relay.deliver_batch():
                pass
        """
        claim_id, rows = self._claim()
        claimed = len(rows)
        t = self.outbox.table
        try:
            while rows:
                row = rows[0]
                try:
                    # A payload that does not decode (written by hand) fails like a handler
                    # would: retried, then dead-lettered, never blocking the batch behind it.
                    message = OutboxMessage(id=row.id, seq=row.seq, topic=row.topic,
                                            key=row.key, payload=json.loads(row.payload),
                                            attempt=row.attempts + 1,
                                            created_at=row.created_at)
                    self.handler(message)
                except Exception as exc:  # the handler's failure is data: retry or dead-letter
                    self._failed(claim_id, row, exc)
                else:
                    with self.engine.begin() as conn:
                        # Delivered even if our claim expired meanwhile: it did happen.
                        conn.execute(sa.update(t).where(t.c.seq == row.seq,
                                                        t.c.status == PENDING)
                                     .values(status=DELIVERED, delivered_at=db_now(conn),
                                             attempts=t.c.attempts + 1, claimed_by=None,
                                             claim_expires=None))
                    self._counters.delivered += 1
                    _delivered.add(1, {"topic": message.topic})
                rows.pop(0)
        finally:
            if rows:  # interrupted: hand the rest back at once
                with self.engine.begin() as conn:
                    conn.execute(sa.update(t).where(t.c.seq.in_([row.seq for row in rows]),
                                                    t.c.claimed_by == claim_id)
                                 .values(claimed_by=None, claim_expires=None))
        return claimed

    def run_once(self, run: Any = None, *, max_batches: int = 100) -> int:
        """Deliver batches until nothing is due (or `max_batches`); returns messages claimed.
        Given a tenure.Run (as a job), checks the lease before each batch and stops early when
        the worker stops.

        Example::

            worker.every(timedelta(seconds=1), leader=True, name="outbox")(relay.run_once)
        """
        total = 0
        for _ in range(max_batches):
            if run is not None:
                if run.stopping:
                    break
                run.check()
            claimed = self.deliver_batch()
            total += claimed
            if claimed == 0:
                break
        self.refresh_metrics()
        return total

    def run_forever(self, *, poll: float | timedelta = 1.0,
                    stop: threading.Event | None = None) -> None:
        """A competing relay: deliver whatever is due, wait `poll` when idle, until `stop` is
        set. Run one per process, as many processes as you like.

        It returns only when `stop` is set: an error of a batch (the database unreachable,
        restarting or refusing, anything else) is logged as an outage (see the class) and the
        batch tried again after a jittered wait of 0.1 s doubling to `retry_max` (2 s), so the
        relay resumes within `retry_max` of the database coming back.

        Example::

            stop = threading.Event()
            threading.Thread(target=relay.run_forever, kwargs={"stop": stop}).start()
        """
        interval = positive_seconds(poll, "poll")
        stopping = stop or threading.Event()
        backoff = Backoff(self.retry_min, self.retry_max)
        retry = f"retrying every {self.retry_min:g} to {self.retry_max:g} s"
        while not stopping.is_set():
            try:
                claimed = self.deliver_batch()
                if claimed == 0:
                    self.refresh_metrics()
            except Exception as exc:  # a runner never dies of a batch: see the docstring
                self._counters.errors += 1
                self.outage.failed(exc, retry=retry)
                stopping.wait(backoff.next_delay())
                continue
            self.outage.ended()
            backoff = Backoff(self.retry_min, self.retry_max)
            if claimed == 0:
                stopping.wait(interval)

    def register(self, worker: Any, *, every: float | timedelta = 1.0,
                 name: str = "tenure.outbox.relay", **options: Any) -> Callable[[Any], int]:
        """Run this relay on `worker` as a leader job: one instance relays at a time and keeps
        its lease between periods. `options` go to `worker.every` (ttl, unhealthy_after, ...).

        A period whose database call fails raises StoreUnavailable, or StoreRefused for what
        retrying cannot clear (the outage is logged as the class says), so the worker records
        the period as failed and its health turns unhealthy after `unhealthy_after` periods.

        Example::

            relay.register(worker, every=timedelta(seconds=1), ttl=30)
        """
        seconds = positive_seconds(every, "every")
        retry = f"retrying at the job's next period (every {seconds:g} s)"

        def relay_outbox(run: Any) -> int:
            try:
                claimed = self.run_once(run)
            except TenureError:
                raise  # the job's own lease (LeaseLost, ...): the worker handles it
            except Exception as exc:  # the outbox's database: one line per outage, not per run
                self._counters.errors += 1
                self.outage.failed(exc, retry=retry)
                # Raised, not swallowed: the worker records the period as failed, so its
                # health turns unhealthy after `unhealthy_after` periods of outage. The cause
                # is left out: the outage logged it, and the worker logs what the job raises.
                raise self.outage.error(exc) from None
            self.outage.ended()
            return claimed

        worker.every(timedelta(seconds=seconds), leader=True, name=name, **options)(
            relay_outbox)
        return relay_outbox

    def stats(self) -> RelayStats:
        """What this relay did since it was made: deliveries, retries, dead letters, errors.

        Example::

            assert relay.stats().errors == 0
        """
        return RelayStats(**asdict(self._counters))

    @property
    def counts(self) -> RelayCounts:
        """Deprecated: the live counters (assignable, as before); read the snapshot
        `relay.stats()` instead.

        Example::

            relay.stats().delivered   # instead of relay.counts.delivered
        """
        warn_renamed("Relay.counts", "Relay.stats()")
        return self._counters

    @counts.setter
    def counts(self, counts: RelayCounts) -> None:
        warn_renamed("Relay.counts", "Relay.stats()")
        self._counters = counts

    def refresh_metrics(self) -> OutboxSummary:
        """Query the outbox's summary and publish it to the pending / oldest-age gauges.

        Example::

            print(relay.refresh_metrics().oldest_pending_age)
        """
        current = self.outbox.summary(self.engine)
        _latest[self.outbox.table.name] = current
        return current

    def _failed(self, claim_id: str, row: sa.Row[Any], exc: Exception) -> None:
        t = self.outbox.table
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        attempt = row.attempts + 1
        dead = attempt >= self.max_attempts
        with self.engine.begin() as conn:
            mine = (t.c.seq == row.seq, t.c.claimed_by == claim_id, t.c.status == PENDING)
            values: dict[str, Any] = {"attempts": attempt, "last_error": error,
                                      "claimed_by": None, "claim_expires": None}
            if dead:
                values["status"] = DEAD
            else:
                values["available_at"] = db_now(conn) + self.delay(attempt)
            updated = conn.execute(sa.update(t).where(*mine).values(**values)).rowcount
        if not updated:
            return
        if dead:
            self._counters.dead_lettered += 1
            _dead.add(1, {"topic": row.topic})
            log.error("outbox message %s (%s) dead-lettered after %d attempts: %s", row.id,
                      row.topic, attempt, error)
        else:
            self._counters.retried += 1
            _retried.add(1, {"topic": row.topic})
            log.warning("outbox message %s (%s) attempt %d failed, will retry: %s", row.id,
                        row.topic, attempt, error)


def _skip_locked(dialect: sa.Dialect) -> bool:
    """Whether this MySQL/MariaDB server takes FOR UPDATE SKIP LOCKED (MySQL 8.0.1, MariaDB
    10.6)."""
    version = dialect.server_version_info or ()
    if getattr(dialect, "is_mariadb", False):
        return version >= (10, 6)
    return version >= (8, 0, 1)


def _claim_by_keys(conn: Connection, t: sa.Table, heads: sa.Select[Any], batch: int,
                   still_free: tuple[sa.ColumnElement[bool], ...],
                   claim: dict[str, Any]) -> list[sa.Row[Any]]:
    """The claim in three statements of one transaction, for databases without UPDATE ...
    RETURNING or LIMIT in a subquery: read the heads, lock up to `batch` of those still free by
    key (skipping rows another relay holds, where the database can), claim them by key.

    The heads are a plain read, not a locking one: InnoDB keeps a lock on every row a locking
    read scans until the commit (REPEATABLE READ), and finding the heads of 50 keys among
    20,000 pending messages scans all of them (20,095 row locks on MariaDB 10.11, 50 now): an
    application's `add` waited for the claim. A plain read is safe for the order per key: an
    earlier message it saw delivered or dead stays so (the locking read re-checks the rest).
    """
    mysql = conn.dialect.name in ("mysql", "mariadb")
    # Twice the batch: a relay whose claim overlaps another's (whose claims it cannot see
    # yet) skips those rows and still finds the next heads.
    seqs = list(conn.execute(heads.limit(2 * batch) if mysql else heads).scalars())
    if not seqs:
        return []
    if mysql:
        locked = (sa.select(t).where(t.c.seq.in_(seqs), *still_free).order_by(t.c.seq)
                  .limit(batch).with_for_update(skip_locked=_skip_locked(conn.dialect)))
        rows = list(conn.execute(locked).all())
        if rows:  # locked by us: the update claims every one of them
            conn.execute(sa.update(t).where(t.c.seq.in_([row.seq for row in rows]))
                         .values(**claim))
        return rows
    # Elsewhere without row locks: the conditional update decides, then read what it took.
    conn.execute(sa.update(t).where(t.c.seq.in_(seqs), *still_free).values(**claim))
    mine = sa.select(t).where(t.c.seq.in_(seqs), t.c.claimed_by == claim["claimed_by"])
    return list(conn.execute(mine.order_by(t.c.seq)).all())

