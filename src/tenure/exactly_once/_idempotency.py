"""Idempotency keys for work that calls the outside world, after Stripe's design (Brandur Leach,
"Implementing Stripe-like Idempotency Keys in Postgres"): a key row records the request's
fingerprint, who holds the key, the last recovery point passed and, once finished, the response.

Work under a key is a sequence of named phases. An atomic phase (`step.atomic`) runs your local
writes and records its recovery point in one transaction; a foreign call (`step.call`, e.g. a
charge at a payment provider that honours the same idempotency key) records its result right
after it returns. A retry of the same key skips every phase already recorded and resumes after
the last one; a retry after `finish` gets the stored response without running anything.

Example::

    idem = Idempotency(engine)
    idem.create_tables()

    with idem.begin(f"pay-invoice-{invoice.id}", request={"amount": invoice.amount}) as step:
        if step.finished:
            return step.response                       # replay: nothing runs twice
        charge = step.call("charged", lambda: provider.charge(
            invoice.amount, reference=str(invoice.id), idempotency_key=step.key).as_dict())
        step.atomic("recorded", lambda conn: conn.execute(
            sa.update(invoices).where(invoices.c.id == invoice.id)
            .values(charge_id=charge["id"])))
        step.finish({"charge": charge["id"]})
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any

from opentelemetry import metrics

from tenure._errors import InvalidArgument, InvalidArgumentType, TenureError
from tenure._lazy import warn_renamed
from tenure.exactly_once._sql import (
    Bind,
    Connection,
    Engine,
    db_now,
    epoch_column,
    insert_if_absent,
    positive_seconds,
    sa,
    transaction,
)

RUNNING = "running"
FINISHED = "finished"
STARTED = "started"  # the recovery point of a key no phase has passed yet
DEFAULT_RETENTION = timedelta(hours=72)

_meter = metrics.get_meter("tenure")
_begun = _meter.create_counter(
    "tenure.idempotency.begun", unit="{key}",
    description="Keys begun, by outcome: new, resumed, taken_over, replayed")


class IdempotencyError(TenureError):
    """Base of the errors an idempotency key raises.

    Example:
        >>> issubclass(RequestMismatch, IdempotencyError)
        True
    """


class RequestMismatch(IdempotencyError):
    """The key was first used with a different request: a client bug, never retried.

    Example:
        >>> RequestMismatch("key 'k' was used with a different request").args[0]
        "key 'k' was used with a different request"
    """


class KeyInProgress(IdempotencyError):
    """Another holder is running this key right now (its lock is younger than `stale_after`);
    retry later.

    Example:
        >>> KeyInProgress("key 'k' is running elsewhere", retry_after=12.0).retry_after
        12.0
    """

    def __init__(self, message: str, *, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class KeyLockLost(IdempotencyError):
    """This holder was too slow: its lock went stale and another holder took the key over. The
    phase that raised this was not recorded (an atomic phase was rolled back).

    Example:
        >>> isinstance(KeyLockLost("taken over"), IdempotencyError)
        True
    """


@dataclass(frozen=True)
class IdempotencyStats:
    """Counters of one Idempotency object: keys begun new, resumed after a failure, taken over
    from a stale holder, replayed (already finished), refused (in progress elsewhere).

    Example:
        >>> IdempotencyStats(new=3, replayed=1).replayed
        1
    """

    new: int = 0
    resumed: int = 0
    taken_over: int = 0
    replayed: int = 0
    refused: int = 0


class _StatsSnapshot(IdempotencyStats):
    """What reading `idem.stats` gives, for one release: the counters at that moment (the old
    property's snapshot: equality, hash, `dataclasses.asdict`, pickling as IdempotencyStats),
    and callable, so `idem.stats()`, the new spelling, returns the plain snapshot of now.
    Reading a field or comparing warns: call `idem.stats()` instead."""

    _read: Callable[[], IdempotencyStats] | None = None  # the object's live counters

    @classmethod
    def taken(cls, read: Callable[[], IdempotencyStats]) -> _StatsSnapshot:
        now = read()
        snapshot = cls(**{name: getattr(now, name) for name in _FIELDS})
        object.__setattr__(snapshot, "_read", read)
        return snapshot

    def __call__(self) -> IdempotencyStats:
        read = object.__getattribute__(self, "_read")
        return self._plain() if read is None else read()

    def _plain(self) -> IdempotencyStats:
        return IdempotencyStats(**{name: object.__getattribute__(self, name) for name in _FIELDS})

    def __getattribute__(self, name: str) -> Any:
        if name in _FIELDS:
            warn_renamed(f"Idempotency.stats.{name}", f"Idempotency.stats().{name}")
        return object.__getattribute__(self, name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IdempotencyStats):
            return NotImplemented
        warn_renamed("Idempotency.stats == ...", "Idempotency.stats() == ...")
        mine = self._plain()
        theirs = other._plain() if isinstance(other, _StatsSnapshot) else other
        return mine == theirs

    def __hash__(self) -> int:
        warn_renamed("hash(Idempotency.stats)", "hash(Idempotency.stats())")
        return hash(self._plain())

    def __repr__(self) -> str:
        return repr(self._plain())

    def __reduce__(self) -> tuple[type[IdempotencyStats], tuple[int, ...]]:
        plain = self._plain()
        return IdempotencyStats, tuple(getattr(plain, name) for name in _FIELDS)


_FIELDS = tuple(IdempotencyStats.__dataclass_fields__)


def fingerprint(request: Any) -> str:
    """The sha256 of a request: of bytes/str as given, else of its canonical JSON.

    Example:
        >>> fingerprint({"b": 1, "a": 2}) == fingerprint({"a": 2, "b": 1})
        True
    """
    if isinstance(request, bytes):
        data = request
    elif isinstance(request, str):
        data = request.encode()
    else:
        data = _dumps(request, "request").encode()
    return hashlib.sha256(data).hexdigest()


def _dumps(value: Any, argument: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentType(f"{argument} must be JSON-serializable (dicts, lists, str, "
                                  f"numbers, bools, None): {exc}") from None


def _text(value: object, argument: str, maximum: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{argument} must be a str, got {type(value).__name__}")
    if (not value and not allow_empty) or len(value) > maximum:
        raise InvalidArgument(f"{argument}={value[:40]!r} must be a "
                              f"{'' if allow_empty else 'non-empty '}str of at most {maximum} "
                              "characters")
    return value


class Idempotency:
    """Idempotency keys in table `table_name` of `engine`'s database.

    `stale_after`: a holder whose lock (refreshed at each phase) is older than this is presumed
    dead, and the key is taken over. `retention`: `reap` deletes finished keys older than this.

    Example::

        idem = Idempotency(engine, stale_after=timedelta(minutes=2))
        idem.create_tables()
    """

    def __init__(self, engine: Engine, *, table_name: str = "tenure_idempotency_keys",
                 scope: str = "", stale_after: float | timedelta = 60.0,
                 retention: float | timedelta = DEFAULT_RETENTION,
                 metadata: sa.MetaData | None = None, schema: str | None = None) -> None:
        if not isinstance(engine, Engine):
            raise InvalidArgumentType(
                f"engine must be a SQLAlchemy Engine (each phase runs in its own transaction), "
                f"got {type(engine).__name__}; e.g. sa.create_engine('sqlite:///app.db')")
        self.engine = engine
        self.scope = _text(scope, "scope", 255, allow_empty=True)
        self.stale_after = positive_seconds(stale_after, "stale_after")
        self.retention = positive_seconds(retention, "retention")
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.table = sa.Table(
            _text(table_name, "table_name", 63), metadata or sa.MetaData(),
            sa.Column("scope", sa.String(255), primary_key=True),
            sa.Column("key", sa.String(255), primary_key=True),
            sa.Column("fingerprint", sa.String(64), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("recovery_point", sa.String(255), nullable=False),
            sa.Column("phases", sa.Text, nullable=False),
            sa.Column("response", sa.Text, nullable=True),
            sa.Column("locked_by", sa.String(255), nullable=True),
            epoch_column("locked_at"),
            epoch_column("created_at", nullable=False),
            epoch_column("finished_at"),
            sa.Index(f"{table_name}_created", "created_at"),
            schema=schema,
        )
        self._stats = IdempotencyStats()
        self._stats_lock = threading.Lock()

    def create_tables(self, bind: Bind | None = None) -> None:
        """Create the key table if missing (or use your migrations: see docs/exactly_once.md),
        through `bind` (an Engine or Connection; default: this object's engine).

        Example::

            Idempotency(engine).create_tables()
        """
        with transaction(self.engine if bind is None else bind, "bind") as conn:
            self.table.create(conn, checkfirst=True)

    def create_table(self) -> None:
        """Deprecated spelling of `create_tables`.

        Example::

            idem.create_tables()   # instead of idem.create_table()
        """
        warn_renamed("Idempotency.create_table()", "Idempotency.create_tables()")
        self.create_tables()

    @property
    def stats(self) -> _StatsSnapshot:
        """How keys begun through this object went (this process only): call it,
        `idem.stats()`, for a snapshot. (`idem.stats` without the call, the old property, is
        still the snapshot taken when it is read, for one release; reading its fields warns.)

        Example::

            print(idem.stats().replayed)
        """
        return _StatsSnapshot.taken(lambda: self._stats)

    def _count(self, outcome: str) -> None:
        with self._stats_lock:
            values = {name: getattr(self._stats, name)
                      for name in IdempotencyStats.__dataclass_fields__}
            values[outcome] += 1
            self._stats = IdempotencyStats(**values)
        _begun.add(1, {"outcome": outcome, "table": self.table.name})

    def begin(self, key: str, *, request: Any = None, scope: str | None = None) -> Step:
        """Enter the work of `key` (with `with`): a new key starts, a finished one replays its
        response (`step.finished`), a failed or stale one resumes after its last recovery point.

        Raises RequestMismatch when `request` differs from the key's first request, and
        KeyInProgress while another holder runs it (unless its lock is older than stale_after).

        Example::

            with idem.begin("order-17", request=payload) as step:
                if step.finished:
                    return step.response
                ...
                step.finish({"ok": True})
        """
        _text(key, "key", 255)
        checked_scope = self.scope if scope is None else _text(scope, "scope", 255,
                                                               allow_empty=True)
        return Step(self, key, checked_scope, fingerprint(request))

    def run(self, key: str, work: Callable[[Step], Any], *, request: Any = None,
            scope: str | None = None) -> Any:
        """Run `work(step)` under `key` unless it already finished; its return value is stored as
        the response. Returns the response, stored or new.

        Example::

            receipt = idem.run("order-17", lambda step: place_order(step), request=payload)
        """
        if not callable(work):
            raise InvalidArgumentType(f"work must be callable with the Step, got "
                                      f"{type(work).__name__}")
        with self.begin(key, request=request, scope=scope) as step:
            if not step.finished:
                step.finish(work(step))
            return step.response

    def reap(self, *, retention: float | timedelta | None = None,
             limit: int = 10_000) -> int:
        """Delete finished keys created more than `retention` (default: the object's, 72 h)
        ago, at most `limit` per call; returns how many. A retry of a reaped key runs anew.

        Run it from a periodic job, e.g. `worker.every(timedelta(hours=1))(lambda run:
        idem.reap())`.

        Example::

            deleted = idem.reap(retention=timedelta(hours=24))
        """
        keep = self.retention if retention is None else positive_seconds(retention, "retention")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgument(f"limit={limit!r} must be an int >= 1")
        t = self.table
        with self.engine.begin() as conn:
            old = (sa.select(t.c.scope, t.c.key)
                   .where(t.c.status == FINISHED, t.c.created_at < db_now(conn) - keep)
                   .limit(limit))
            victims = conn.execute(old).all()
            deleted = 0
            for scope, key in victims:
                deleted += conn.execute(sa.delete(t).where(
                    t.c.scope == scope, t.c.key == key, t.c.status == FINISHED)).rowcount
        return deleted


class Step:
    """The work of one idempotency key while this holder runs it (from `Idempotency.begin`).

    `finished`/`response`: the key is done (a replay, or after `finish`). `recovery_point`: the
    last phase recorded. `passed(name)`: whether a phase is already recorded.

    Example::

        with idem.begin("k", request=req) as step:
            value = step.call("fetched", lambda: fetch_remote())
            step.finish(value)
    """

    def __init__(self, owner: Idempotency, key: str, scope: str, fingerprint: str) -> None:
        self._owner = owner
        self.key = key
        self.scope = scope
        self._fingerprint = fingerprint
        self._lock_id = f"{owner.holder}:{uuid.uuid4().hex[:12]}"
        self._phases: dict[str, Any] = {}
        self.finished = False
        self.response: Any = None
        self.replayed = False
        self._entered = False
        self._lost = False

    def __repr__(self) -> str:
        return (f"Step(key={self.key!r}, recovery_point={self.recovery_point!r}, "
                f"finished={self.finished})")

    @property
    def recovery_point(self) -> str:
        """The last phase recorded ('started' before any).

        Example::

            step.recovery_point   # 'charged'
        """
        return next(reversed(self._phases), STARTED)

    def passed(self, name: str) -> bool:
        """Whether phase `name` is already recorded for this key (by this or an earlier try).

        Example::

            if not step.passed("emailed"):
                ...
        """
        return name in self._phases

    def result(self, name: str) -> Any:
        """The recorded result of phase `name`.

        Example::

            charge_id = step.result("charged")["id"]
        """
        if name not in self._phases:
            raise InvalidArgument(f"phase {name!r} of key {self.key!r} is not recorded yet")
        return self._phases[name]

    # -- entering and leaving -------------------------------------------------------------------

    def __enter__(self) -> Step:
        if self._entered:
            raise InvalidArgument("a Step is entered once; call idem.begin() again to retry")
        self._entered = True
        owner, t = self._owner, self._owner.table
        where = (t.c.scope == self.scope, t.c.key == self.key)
        with owner.engine.begin() as conn:
            now = db_now(conn)
            outcome = "new"
            acquired = insert_if_absent(conn, t, {
                "scope": self.scope, "key": self.key, "fingerprint": self._fingerprint,
                "status": RUNNING, "recovery_point": STARTED, "phases": "{}",
                "locked_by": self._lock_id, "locked_at": now, "created_at": now})
            if not acquired:
                take = (sa.update(t).where(*where, t.c.status == RUNNING,
                                           t.c.fingerprint == self._fingerprint)
                        .values(locked_by=self._lock_id, locked_at=now))
                acquired = conn.execute(take.where(t.c.locked_at.is_(None))).rowcount == 1
                outcome = "resumed"
                if not acquired:
                    stale = t.c.locked_at < now - owner.stale_after
                    acquired = conn.execute(take.where(stale)).rowcount == 1
                    outcome = "taken_over"
            row = conn.execute(sa.select(t.c.fingerprint, t.c.status, t.c.phases,
                                         t.c.response, t.c.locked_by,
                                         (now - t.c.locked_at).label("age")).where(*where)).one()
        if row.fingerprint != self._fingerprint:
            raise RequestMismatch(
                f"idempotency key {self.key!r} was first used with a different request; a key "
                "identifies one request: use a new key for a new request")
        self._phases = json.loads(row.phases)
        if row.status == FINISHED:
            self.finished = self.replayed = True
            self.response = None if row.response is None else json.loads(row.response)
            owner._count("replayed")
            return self
        if not acquired:
            owner._count("refused")
            age = float(row.age or 0.0)
            retry_after = max(0.0, owner.stale_after - age)
            raise KeyInProgress(
                f"idempotency key {self.key!r} is being run by another holder (lock taken "
                f"{age:.1f} s ago; taken over once older than {owner.stale_after:g} s); retry "
                f"in {retry_after:.1f} s", retry_after=retry_after)
        owner._count(outcome)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.finished or self._lost:
            return
        if exc_type is None:
            self.finish(None)
            return
        t = self._owner.table
        with self._owner.engine.begin() as conn:  # let a retry resume at once
            conn.execute(sa.update(t).where(*self._mine()).values(locked_by=None,
                                                                  locked_at=None))

    def _mine(self) -> tuple[sa.ColumnElement[bool], ...]:
        t = self._owner.table
        return (t.c.scope == self.scope, t.c.key == self.key, t.c.status == RUNNING,
                t.c.locked_by == self._lock_id)

    def _check_live(self, name: str | None = None) -> None:
        if not self._entered:
            raise InvalidArgument("use the Step inside `with idem.begin(...) as step:`")
        if self._lost:
            raise KeyLockLost(f"idempotency key {self.key!r} was taken over by another holder")
        if self.finished:
            raise InvalidArgument(f"idempotency key {self.key!r} is finished; check "
                                  "step.finished and return step.response")
        if name is not None:
            _text(name, "name", 255)
            if name == STARTED:
                raise InvalidArgument(f"{STARTED!r} is the recovery point before any phase; "
                                      "name your phase otherwise")

    def _record(self, conn: Connection, name: str, result: Any) -> None:
        phases = {**self._phases, name: result}
        statement = (sa.update(self._owner.table).where(*self._mine())
                     .values(recovery_point=name, phases=_dumps(phases, "the phase's result"),
                             locked_at=db_now(conn)))
        if conn.execute(statement).rowcount != 1:
            self._lost = True
            raise KeyLockLost(
                f"idempotency key {self.key!r} was taken over by another holder (this one was "
                f"silent longer than stale_after={self._owner.stale_after:g} s); phase "
                f"{name!r} was not recorded")
        self._phases = phases

    # -- phases ---------------------------------------------------------------------------------

    def call(self, name: str, work: Callable[[], Any]) -> Any:
        """A foreign call (e.g. to a payment provider): unless phase `name` is recorded, run
        `work()` and record its JSON-serializable result as recovery point `name`; return the
        result, recorded or new. A crash between the call and the record runs `work` again on
        retry, so `work` must be idempotent itself: pass `step.key` as the provider's key.

        Example::

            charge = step.call("charged", lambda: provider.charge(
                500, reference="inv-7", idempotency_key=step.key).as_dict())
        """
        self._check_live(name)
        if name in self._phases:
            return self._phases[name]
        result = work()
        with self._owner.engine.begin() as conn:
            self._record(conn, name, result)
        return result

    def atomic(self, name: str, work: Callable[[Connection], Any]) -> Any:
        """An atomic phase: unless phase `name` is recorded, run `work(conn)` and record recovery
        point `name` in the same transaction, so both commit or neither does. Returns
        `work`'s (JSON-serializable) result, recorded or new.

        Example::

            step.atomic("recorded", lambda conn: conn.execute(
                sa.update(invoices).where(invoices.c.id == 7).values(paid=True)))
        """
        self._check_live(name)
        if name in self._phases:
            return self._phases[name]
        with self._owner.engine.begin() as conn:
            result = work(conn)
            if isinstance(result, sa.CursorResult):
                result = None  # conn.execute(...)'s result, returned by a lambda
            self._record(conn, name, result)
        return result

    def finish(self, response: Any = None, *, conn: Connection | None = None) -> None:
        """Store the response and mark the key finished: later begins of it replay `response`.
        With `conn` (your transaction), the finish commits atomically with your writes.

        Example::

            step.finish({"charge": charge["id"], "status": "paid"})
        """
        self._check_live()
        text = _dumps(response, "response")

        def store(connection: Connection) -> None:
            statement = (sa.update(self._owner.table).where(*self._mine())
                         .values(status=FINISHED, response=text, locked_by=None,
                                 locked_at=None, finished_at=db_now(connection)))
            if connection.execute(statement).rowcount != 1:
                self._lost = True
                raise KeyLockLost(f"idempotency key {self.key!r} was taken over by another "
                                  "holder before it finished here; the response was not stored")

        if conn is None:
            with self._owner.engine.begin() as connection:
                store(connection)
        else:
            store(conn)
        self.finished = True
        self.response = json.loads(text)

    def heartbeat(self) -> None:
        """Refresh this holder's lock during a long phase, so it is not taken over as stale.

        Example::

            for chunk in chunks:
                upload(chunk)
                step.heartbeat()
        """
        self._check_live()
        with self._owner.engine.begin() as conn:
            statement = sa.update(self._owner.table).where(*self._mine()).values(
                locked_at=db_now(conn))
            if conn.execute(statement).rowcount != 1:
                self._lost = True
                raise KeyLockLost(f"idempotency key {self.key!r} was taken over by another "
                                  "holder")
