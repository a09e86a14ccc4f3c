"""tenure.outbox on SQLite, PostgreSQL and MariaDB: a message commits or rolls back with the
business change; a crash (SIGKILL) between the business commit and the delivery loses nothing;
failing handlers are retried with backoff, then dead-lettered with the last error; order per key
holds with retries and with competing relays; the inbox drops duplicates, also under concurrent
deliveries. The relay lives through its database restarting, refusing it or answering errors:
one WARNING when an outage starts, one INFO when it ends, an ERROR per interval for what
retrying cannot clear."""

from __future__ import annotations

import itertools
import logging
import random
import signal
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from exactly_once_support import Child, children, db_url, engine
from exactly_once_tables import create_all
from waiting import wait_until

import tenure
from tenure import outbox
from tenure.exactly_once import _relay as relay_module
from tenure.outbox import Inbox, OutboxMessage, Relay

__all__ = ["children", "db_url", "engine"]  # fixtures used by the tests below

FAST = {"backoff": 0.001, "max_backoff": 0.005}


def test_a_message_commits_or_rolls_back_with_the_business_change(engine: sa.Engine) -> None:
    invoices, _ = create_all(engine, rows=2)
    outbox.create_tables(engine)
    with engine.begin() as conn:
        conn.execute(sa.update(invoices).where(invoices.c.id == 0).values(paid_by="a"))
        kept = outbox.add(conn, "invoice.paid", {"invoice": 0})
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(sa.update(invoices).where(invoices.c.id == 1).values(paid_by="a"))
        outbox.add(conn, "invoice.paid", {"invoice": 1})
        raise RuntimeError("the business change failed")
    delivered: list[OutboxMessage] = []
    relay = Relay(engine, delivered.append)
    assert relay.run_once() == 1
    assert [(m.id, m.topic, m.payload, m.attempt) for m in delivered] == [
        (kept, "invoice.paid", {"invoice": 0}, 1)]
    summary = outbox.summary(engine)
    assert (summary.pending, summary.delivered, summary.dead) == (0, 1, 0)
    assert relay.run_once() == 0


def test_a_crash_between_commit_and_delivery_loses_nothing(db_url: str, engine: sa.Engine,
                                                           children: list[Child]) -> None:
    count = 6
    invoices, _ = create_all(engine, rows=count)
    outbox.create_tables(engine)
    crashing = Child("outbox-crash", db_url, str(count))
    children.append(crashing)
    crashing.expect(f"committed {count - 1}")
    crashing.expect("delivering")      # its relay claimed a batch and is mid-delivery
    crashing.signal(signal.SIGKILL)
    assert crashing.wait() == -signal.SIGKILL
    assert outbox.summary(engine).pending == count

    delivered: list[int] = []
    relay = Relay(engine, lambda message: delivered.append(message.payload["invoice"]))

    def all_delivered() -> bool:  # the dead relay's claims expire after its claim_ttl (0.5 s)
        relay.run_once()
        return outbox.summary(engine).pending == 0

    wait_until(all_delivered, timeout=20, what="every committed message to be delivered")
    assert sorted(delivered) == list(range(count))
    with engine.connect() as conn:
        paid = conn.execute(sa.select(invoices.c.id).where(invoices.c.paid_by == "child"))
        assert sorted(paid.scalars()) == list(range(count))


def test_failures_are_retried_then_dead_lettered(engine: sa.Engine,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    outbox.create_tables(engine)
    with engine.begin() as conn:
        flaky = outbox.add(conn, "t", {"name": "flaky"})
        broken = outbox.add(conn, "t", {"name": "broken"})
    tries: dict[str, int] = defaultdict(int)

    def handler(message: OutboxMessage) -> None:
        tries[message.payload["name"]] += 1
        assert message.attempt == tries[message.payload["name"]]
        if message.payload["name"] == "broken" or message.attempt < 3:
            raise ConnectionError(f"broker refused attempt {message.attempt}")

    relay = Relay(engine, handler, max_attempts=4, **FAST)

    def settled() -> bool:
        relay.run_once()
        summary = outbox.summary(engine)
        return summary.pending == 0

    wait_until(settled, timeout=20, what="both messages to be delivered or dead")
    assert dict(tries) == {"flaky": 3, "broken": 4}
    done = relay.stats()
    assert (done.delivered, done.retried, done.dead_lettered) == (1, 5, 1)
    [dead] = outbox.DEFAULT.dead_letters(engine)
    assert (dead.id, dead.attempts) == (broken, 4)
    assert dead.last_error == "ConnectionError: broker refused attempt 4"
    assert "dead-lettered after 4 attempts" in caplog.text
    assert flaky != broken
    assert outbox.DEFAULT.redeliver(engine, broken)
    assert outbox.summary(engine).pending == 1


def test_backoff_grows_exponentially_with_jitter(engine: sa.Engine) -> None:
    relay = Relay(engine, print, backoff=1.0, max_backoff=10.0)
    assert 0.5 <= relay.delay(1) <= 1.0
    assert 4.0 <= relay.delay(4) <= 8.0
    assert 5.0 <= relay.delay(30) <= 10.0


def add_interleaved(engine: sa.Engine, keys: int, per_key: int) -> dict[str, list[int]]:
    order: dict[str, list[int]] = defaultdict(list)
    with engine.begin() as conn:
        for number in range(per_key):
            for key in range(keys):
                outbox.add(conn, "t", {"key": f"k{key}", "n": number}, key=f"k{key}")
                order[f"k{key}"].append(number)
    return order


def test_order_per_key_holds_with_retries(engine: sa.Engine) -> None:
    outbox.create_tables(engine)
    expected = add_interleaved(engine, keys=4, per_key=6)
    chance = random.Random(7)
    seen: dict[str, list[int]] = defaultdict(list)

    def handler(message: OutboxMessage) -> None:
        if chance.random() < 0.3:
            raise TimeoutError("broker slow")
        seen[message.key or ""].append(message.payload["n"])

    relay = Relay(engine, handler, max_attempts=100, **FAST)
    wait_until(lambda: relay.run_once() == 0 and outbox.summary(engine).pending == 0,
               timeout=30, what="every message to be delivered")
    assert dict(seen) == dict(expected)
    assert relay.stats().retried > 0


def test_competing_relays_keep_order_per_key_and_deliver_once(engine: sa.Engine) -> None:
    """Three relays at once (FOR UPDATE SKIP LOCKED on PostgreSQL and MariaDB, conditional
    claims on SQLite): every message delivered exactly once, in order per key."""
    compete(engine)


@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)
def test_competing_relays_without_skip_locked(engine: sa.Engine,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """MySQL before 8.0.1 and MariaDB before 10.6 have no SKIP LOCKED: the relays' FOR UPDATE
    then waits for each other's claims, and the outcome is the same."""
    monkeypatch.setattr(relay_module, "_skip_locked", lambda dialect: False)
    compete(engine)



def test_a_claim_takes_at_most_a_batch(engine: sa.Engine) -> None:
    """On PostgreSQL `seq IN (SELECT ... LIMIT 10 FOR UPDATE SKIP LOCKED)` claimed all 40
    heads: the subquery ran again per row and skipped the rows the UPDATE had taken."""
    outbox.create_tables(engine)
    add_interleaved(engine, keys=40, per_key=2)
    delivered: list[OutboxMessage] = []
    relay = Relay(engine, delivered.append, batch=10)
    assert relay.deliver_batch() == 10
    assert len(delivered) == 10 and {m.payload["n"] for m in delivered} == {0}

@pytest.mark.parametrize("db_url", ["postgres", "mariadb"], indirect=True)
def test_a_claim_that_overlaps_another_takes_the_next_heads(engine: sa.Engine) -> None:
    """While one relay's claim is open (not committed), another claims the next heads (on
    PostgreSQL the first took all 40 heads; on MariaDB the second reads the first one's heads
    too, and skips them when it locks by key)."""
    outbox.create_tables(engine)
    add_interleaved(engine, keys=40, per_key=2)
    firsts: list[OutboxMessage] = []
    seconds: list[OutboxMessage] = []
    first = Relay(engine, firsts.append, batch=10)
    second = Relay(engine, seconds.append, batch=10)
    with claim_held_open(engine, first):
        assert second.deliver_batch() == 10
    assert len(firsts) == 10
    assert {m.key for m in firsts}.isdisjoint({m.key for m in seconds})
    assert {m.payload["n"] for m in firsts + seconds} == {0}  # heads only: order per key



@pytest.mark.parametrize("db_url", ["postgres", "mariadb"], indirect=True)
def test_an_open_claim_does_not_hold_up_new_messages(engine: sa.Engine) -> None:
    """A claim locks the rows it takes, not every row it read: on MariaDB the claim's locking
    read scanned the table (20,095 row locks with 20,000 pending messages of 50 keys) and held
    the locks to its commit, so an `add` in the application's transaction waited for it."""
    outbox.create_tables(engine)
    add_interleaved(engine, keys=3, per_key=30)  # few heads: the claim reads every row
    relay = Relay(engine, print, batch=10)
    with claim_held_open(engine, relay), engine.begin() as conn:
        if conn.dialect.name == "mysql":
            conn.execute(sa.text("SET SESSION innodb_lock_wait_timeout = 2"))
        outbox.add(conn, "t", {"n": "new"}, key="k9")  # lock wait timeout before the fix


@contextmanager
def claim_held_open(engine: sa.Engine, relay: Relay) -> Iterator[None]:
    """`relay.deliver_batch()` on a thread, held inside its claim's transaction (the claim's
    UPDATE done, not committed) for the block."""
    holding, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=relay.deliver_batch)

    def hold(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread() is holder and statement.lstrip().startswith(
                ("UPDATE", "WITH")) and not release.is_set():
            holding.set()
            release.wait(30)

    sa.event.listen(engine, "after_cursor_execute", hold)
    try:
        holder.start()
        assert holding.wait(30), "the claim did not run"
        yield
    finally:
        release.set()
        holder.join(30)
        sa.event.remove(engine, "after_cursor_execute", hold)


def compete(engine: sa.Engine) -> None:
    outbox.create_tables(engine)
    expected = add_interleaved(engine, keys=5, per_key=8)
    lock = threading.Lock()
    seen: dict[str, list[int]] = defaultdict(list)
    busy: set[str] = set()
    overlaps: list[str] = []

    def handler(message: OutboxMessage) -> None:
        key = message.key or ""
        with lock:
            if key in busy:
                overlaps.append(key)
            busy.add(key)
        try:
            if random.random() < 0.2:
                raise TimeoutError("broker slow")
            with lock:
                seen[key].append(message.payload["n"])
        finally:
            with lock:
                busy.discard(key)

    stop = threading.Event()
    relays = [Relay(engine, handler, batch=3, max_attempts=100, **FAST) for _ in range(3)]
    threads = [threading.Thread(target=relay.run_forever, kwargs={"poll": 0.01, "stop": stop})
               for relay in relays]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: sum(len(v) for v in seen.values()) == 40, timeout=30,
                   what="every message to be delivered")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert dict(seen) == dict(expected) and overlaps == []
    assert sum(relay.stats().delivered for relay in relays) == 40
    assert [relay.stats().errors for relay in relays] == [0, 0, 0]
    assert outbox.summary(engine).pending == 0


def test_the_inbox_drops_duplicates_atomically(engine: sa.Engine) -> None:
    _, ledger = create_all(engine)
    inbox = Inbox()
    inbox.create_tables(engine)

    def apply(message_id: str) -> bool:
        return inbox.process(engine, message_id, lambda conn: conn.execute(
            sa.insert(ledger).values(reference=message_id, writer="consumer")),
            consumer="billing")

    assert apply("m1") and not apply("m1") and apply("m2")
    with pytest.raises(RuntimeError), engine.begin() as conn:  # the consumer's write failed:
        assert inbox.accept(conn, "m3", consumer="billing")     # the id is not kept either
        raise RuntimeError("consumer failed")
    assert apply("m3")
    with engine.begin() as conn:
        assert inbox.accept(conn, "m1", consumer="another-consumer")
    with engine.connect() as conn:
        references = conn.execute(sa.select(ledger.c.reference)).scalars().all()
    assert sorted(references) == ["m1", "m2", "m3"]
    assert inbox.purge(engine) == 0


def test_concurrent_duplicate_deliveries_are_processed_once(engine: sa.Engine) -> None:
    _, ledger = create_all(engine)
    inbox = Inbox()
    inbox.create_tables(engine)
    barrier = threading.Barrier(4)
    results: list[bool] = []

    def deliver() -> None:
        barrier.wait(10)
        results.append(inbox.process(engine, "same-id", lambda conn: conn.execute(
            sa.insert(ledger).values(reference="same-id", writer="consumer"))))

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [False, False, False, True]
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(ledger)).scalar_one() == 1


def test_the_relay_registers_as_a_leader_job(engine: sa.Engine, tmp_path: Any) -> None:
    outbox.create_tables(engine)
    with engine.begin() as conn:
        outbox.add(conn, "t", {"n": 1})
    delivered: list[OutboxMessage] = []
    store = tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}")
    worker = tenure.Worker(store)
    Relay(engine, delivered.append).register(worker, every=0.2)
    assert worker.jobs["tenure.outbox.relay"].leader
    with worker:
        wait_until(lambda: delivered, timeout=20, what="the leader job to relay the message")
    store.close()
    assert [m.payload for m in delivered] == [{"n": 1}]


def test_bad_arguments_fail_before_any_io(engine: sa.Engine) -> None:
    with pytest.raises(tenure.InvalidArgumentType, match="not an Engine"):
        outbox.add(engine, "t", {})
    with engine.connect() as conn:
        with pytest.raises(tenure.InvalidArgumentType, match="JSON"):
            outbox.add(conn, "t", {"x": object()})
        with pytest.raises(tenure.InvalidArgument, match="topic"):
            outbox.add(conn, "", {})
    with pytest.raises(tenure.InvalidArgument, match="max_attempts"):
        Relay(engine, print, max_attempts=0)
    with pytest.raises(tenure.InvalidArgumentType, match="handler"):
        Relay(engine, "print")  # type: ignore[arg-type]


def test_the_relay_claims_and_delivers_with_its_own_table(engine: sa.Engine) -> None:
    """On MySQL/MariaDB the claim was
    one UPDATE ... WHERE seq IN (SELECT ... LIMIT n) RETURNING, which they refuse
    (NotSupportedError), and run_forever died of it."""
    box = outbox.Outbox(table_name="tenure_outbox_repro")
    box.create_tables(engine)
    with engine.begin() as conn:
        box.add(conn, "invoice.paid", {"invoice": 7}, key="customer-3")
    delivered: list[OutboxMessage] = []
    relay = Relay(engine, delivered.append, outbox=box)
    assert relay.run_once() == 1
    with engine.begin() as conn:
        box.add(conn, "invoice.paid", {"invoice": 8}, key="customer-3")
    with relaying(relay, poll=0.05):
        wait_until(lambda: len(delivered) == 2, timeout=20, what="run_forever to deliver")
    assert [m.payload for m in delivered] == [{"invoice": 7}, {"invoice": 8}]
    assert relay.stats().errors == 0 and box.summary(engine).pending == 0


def test_a_payload_that_does_not_decode_is_dead_lettered(engine: sa.Engine) -> None:
    outbox.create_tables(engine)
    with engine.begin() as conn:
        broken = outbox.add(conn, "t", {"n": 1})
        outbox.add(conn, "t", {"n": 2})
        conn.execute(sa.update(outbox.DEFAULT.table).where(outbox.DEFAULT.table.c.id == broken)
                     .values(payload="{not json"))
    delivered: list[OutboxMessage] = []
    relay = Relay(engine, delivered.append, max_attempts=1)
    assert relay.run_once() == 2
    assert [m.payload for m in delivered] == [{"n": 2}]
    [dead] = outbox.DEFAULT.dead_letters(engine)
    assert (dead.id, dead.payload) == (broken, "{not json")
    assert dead.last_error is not None and dead.last_error.startswith("JSONDecodeError")


# -- outages -----------------------------------------------------------------------------------

SERVERS = {"postgres": "postgres_server", "mariadb": "mariadb_server"}


@contextmanager
def relaying(relay: Relay, poll: float = 0.05) -> Iterator[threading.Thread]:
    """`relay.run_forever` on a thread; it must still run when the block ends, and stop."""
    stop = threading.Event()
    thread = threading.Thread(target=relay.run_forever, kwargs={"poll": poll, "stop": stop})
    thread.start()
    try:
        yield thread
        assert thread.is_alive(), "run_forever returned before its stop signal"
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tenure.outbox" and r.levelno == level]


def collector() -> tuple[list[int], Callable[[OutboxMessage], None]]:
    seen: list[int] = []
    lock = threading.Lock()

    def handler(message: OutboxMessage) -> None:
        with lock:
            seen.append(message.payload["n"])

    return seen, handler


def add_numbers(engine: sa.Engine, numbers: range) -> None:
    with engine.begin() as conn:
        for n in numbers:
            outbox.add(conn, "t", {"n": n}, key=f"k{n % 3}")


@pytest.mark.parametrize("db_url", ["postgres", "mariadb"], indirect=True)
def test_run_forever_delivers_through_a_database_restart(
        request: pytest.FixtureRequest, engine: sa.Engine,
        caplog: pytest.LogCaptureFixture) -> None:
    server = request.getfixturevalue(SERVERS[request.node.callspec.params["db_url"]])
    caplog.set_level(logging.DEBUG, logger="tenure.outbox")
    outbox.create_tables(engine)
    seen, handler = collector()
    relay = Relay(engine, handler, claim_ttl=1.0)  # a claim cut by the restart comes back soon
    add_numbers(engine, range(10))
    with relaying(relay):
        wait_until(lambda: set(seen) == set(range(10)), timeout=20, what="the first ten")
        server.stop()
        # Down long enough for the backoff to grow towards its cap (0.1 s doubling to 2 s).
        wait_until(lambda: relay.stats().errors >= 5, timeout=30, what="five failed tries")
        server.start()
        resumed = wait_until(lambda: not relay.outage.ongoing, timeout=30,
                             what="the relay to resume")
        add_numbers(engine, range(10, 20))
        wait_until(lambda: set(seen) == set(range(20)), timeout=30, what="the next ten")
    print(f"resumed {resumed:.2f} s after the server was back ({relay.stats().errors} failed "
          "tries)")
    assert resumed <= relay.retry_max + 5.0  # one retry interval, and a generous slack
    [warning] = records(caplog, logging.WARNING)
    assert "is unavailable" in warning.getMessage()
    [info] = records(caplog, logging.INFO)
    assert "answers again" in info.getMessage()
    assert records(caplog, logging.ERROR) == [] and relay.stats().errors >= 1


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_relay_job_keeps_running_through_a_database_restart(
        request: pytest.FixtureRequest, engine: sa.Engine, tmp_path: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    server = request.getfixturevalue("postgres_server")
    caplog.set_level(logging.DEBUG, logger="tenure.outbox")
    outbox.create_tables(engine)
    seen, handler = collector()
    relay = Relay(engine, handler, claim_ttl=1.0)
    store = tenure.connect(f"sqlite:///{tmp_path / 'locks.db'}")
    worker = tenure.Worker(store)
    relay.register(worker, every=0.1, unhealthy_after=3)
    add_numbers(engine, range(5))
    try:
        with worker:
            wait_until(lambda: set(seen) == set(range(5)), timeout=20, what="the first five")
            assert worker.health()["healthy"]
            server.stop()
            try:
                wait_until(lambda: relay.outage.ongoing, timeout=20, what="the job to see it")
                wait_until(lambda: not worker.health()["healthy"], timeout=20,
                           what="the worker to report the relay unhealthy")
                job = worker.health()["jobs"]["tenure.outbox.relay"]
                assert job["last_outcome"] == "failed" and job["periods_without_success"] > 3
                assert "StoreUnavailable: outbox relay" in job["last_error"]
            finally:  # also when it failed: the next tests need the server
                server.start()
            wait_until(lambda: not relay.outage.ongoing, timeout=30, what="the job to resume")
            add_numbers(engine, range(5, 10))
            wait_until(lambda: set(seen) == set(range(10)), timeout=30, what="the next five")
            wait_until(lambda: worker.health()["healthy"], timeout=20,
                       what="the worker to report the relay healthy again")
    finally:
        store.close()
    assert len(records(caplog, logging.WARNING)) == 1
    assert len(records(caplog, logging.INFO)) == 1
    assert records(caplog, logging.ERROR) == []  # transient: the relay logs no ERROR
    # The worker records each period of the outage as failed without a line of its own: the
    # relay's WARNING and INFO are the outage's only lines.
    assert [r for r in caplog.records if r.name.startswith("tenure") and
            r.levelno >= logging.ERROR] == []


def test_the_relay_job_reports_unhealthy_while_its_sqlite_file_is_gone(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The relay's database unreachable (its SQLite file's directory moved away): each period
    is recorded as failed, so the worker turns unhealthy after `unhealthy_after` periods, and
    healthy again once the file is back."""
    caplog.set_level(logging.DEBUG, logger="tenure.outbox")
    home, away = tmp_path / "db", tmp_path / "away"
    home.mkdir()
    # No pool: every period opens the file anew (an open connection would outlive the move).
    relay_engine = sa.create_engine(f"sqlite:///{home / 'app.db'}", poolclass=sa.pool.NullPool)
    outbox.create_tables(relay_engine)
    seen, handler = collector()
    relay = Relay(relay_engine, handler)
    worker = tenure.Worker(tenure.connect("memory://"))
    relay.register(worker, every=0.1, unhealthy_after=2)
    add_numbers(relay_engine, range(3))
    with worker:
        wait_until(lambda: set(seen) == {0, 1, 2}, timeout=20, what="the first three")
        assert worker.health()["healthy"]
        home.rename(away)
        wait_until(lambda: not worker.health()["healthy"], timeout=20,
                   what="the worker to report the relay unhealthy")
        job = worker.health()["jobs"]["tenure.outbox.relay"]
        assert relay.outage.ongoing and job["last_outcome"] == "failed"
        assert job["unhealthy"] and job["periods_without_success"] > 2
        assert "unable to open database file" in job["last_error"]
        away.rename(home)
        add_numbers(relay_engine, range(3, 5))
        wait_until(lambda: set(seen) == set(range(5)), timeout=20, what="the relay to resume")
        wait_until(lambda: worker.health()["healthy"], timeout=20,
                   what="the worker to report the relay healthy again")
    assert not relay.outage.ongoing
    [warning] = records(caplog, logging.WARNING)
    assert "is unavailable" in warning.getMessage()
    relay_engine.dispose()


@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)
def test_a_refused_login_is_logged_at_error_once_per_interval_and_retried(
        db_url: str, engine: sa.Engine, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure.outbox")
    outbox.create_tables(engine)
    add_numbers(engine, range(3))
    user, password = f"relay{uuid.uuid4().hex[:8]}", f"s3cret{uuid.uuid4().hex[:8]}"
    database = db_url.rsplit("/", 1)[1]
    base = db_url.split("@", 1)[1]
    refused = sa.create_engine(f"mysql+pymysql://{user}:{password}@{base}")
    seen, handler = collector()
    relay = Relay(refused, handler)
    relay.retry_min, relay.retry_max = 0.01, 0.05  # many tries per logged ERROR
    relay.outage.error_every = 0.5
    try:
        with relaying(relay):
            wait_until(lambda: len(records(caplog, logging.ERROR)) >= 3, timeout=30,
                       what="three ERROR lines")
            with engine.begin() as conn:  # the fix: the account exists now
                conn.execute(sa.text(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY "
                                     f"'{password}'"))
                conn.execute(sa.text(f"GRANT ALL ON {database}.* TO '{user}'@'127.0.0.1'"))
            wait_until(lambda: set(seen) == {0, 1, 2}, timeout=30, what="the relay to recover")
    finally:
        refused.dispose()
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'"))
    errors = records(caplog, logging.ERROR)
    gaps = [later.created - earlier.created for earlier, later in itertools.pairwise(errors)]
    assert min(gaps) >= 0.5 - 0.05, gaps  # once per interval, not once per try
    assert relay.stats().errors > len(errors)
    assert "Access denied" in errors[0].getMessage()
    assert records(caplog, logging.WARNING) == []
    [info] = records(caplog, logging.INFO)
    assert "answers again" in info.getMessage()
    assert password not in caplog.text


def test_run_forever_survives_a_table_that_is_gone(engine: sa.Engine,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """An error retrying cannot clear (here: no such table) is logged at ERROR once (the
    interval is 60 s) and retried; recreating the table recovers the relay."""
    caplog.set_level(logging.DEBUG, logger="tenure.outbox")
    outbox.create_tables(engine)
    seen, handler = collector()
    relay = Relay(engine, handler)
    relay.retry_min, relay.retry_max = 0.01, 0.05
    with relaying(relay):
        with engine.begin() as conn:
            outbox.DEFAULT.table.drop(conn)
        wait_until(lambda: relay.stats().errors >= 5, timeout=30, what="five failed tries")
        outbox.create_tables(engine)
        add_numbers(engine, range(2))
        wait_until(lambda: set(seen) == {0, 1}, timeout=30, what="the relay to recover")
    [error] = records(caplog, logging.ERROR)
    assert "retrying cannot clear" in error.getMessage()
    assert records(caplog, logging.WARNING) == []
    assert len(records(caplog, logging.INFO)) == 1


def test_the_outage_module_doctests() -> None:
    import doctest

    from tenure.exactly_once import _outage

    assert doctest.testmod(_outage).failed == 0


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_sqlstate_decides_alone_whatever_its_words(engine: sa.Engine) -> None:
    """26000 (a prepared statement the server forgot, e.g. behind pgbouncer) says "does not
    exist" and clears on the next try; 0A000 "cached plan must not change result type" (a
    prepared statement after ALTER TABLE) too; a missing table (42P01) stays permanent."""
    from tenure.exactly_once._outage import is_transient

    def error_of(*statements: str) -> sa.exc.DBAPIError:
        with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError) as caught:
            for statement in statements:
                conn.exec_driver_sql(statement)
        return caught.value

    forgotten = error_of("DEALLOCATE tenure_never_prepared")
    assert getattr(forgotten.orig, "sqlstate", None) == "26000"
    assert "does not exist" in str(forgotten.orig) and is_transient(forgotten)
    replanned = error_of("CREATE TABLE replanned (a int)", "PREPARE q AS SELECT * FROM replanned",
                         "EXECUTE q", "ALTER TABLE replanned ADD COLUMN b int", "EXECUTE q")
    assert getattr(replanned.orig, "sqlstate", None) == "0A000"
    assert "cached plan must not change result type" in str(replanned.orig)
    assert is_transient(replanned)
    missing = error_of("SELECT * FROM tenure_no_such_table")
    assert getattr(missing.orig, "sqlstate", None) == "42P01" and not is_transient(missing)


def test_a_mysql_code_decides_alone_and_words_only_without_a_code() -> None:
    import sqlite3

    import pymysql

    from tenure.exactly_once._outage import is_transient

    def wrapped(orig: Exception) -> sa.exc.DBAPIError:
        return sa.exc.DBAPIError.instance("SELECT 1", {}, orig, Exception)

    # MariaDB's 1305 says "does not exist" of a savepoint: its code is not a permanent one.
    assert is_transient(wrapped(pymysql.err.OperationalError(
        1305, "SAVEPOINT sp does not exist")))
    assert not is_transient(wrapped(pymysql.err.ProgrammingError(
        1146, "Table 'app.outbox' doesn't exist")))
    assert not is_transient(wrapped(sqlite3.OperationalError("no such table: tenure_outbox")))
    assert is_transient(wrapped(sqlite3.OperationalError("database is locked")))


def test_outage_lines_and_errors_are_redacted() -> None:
    from tenure.exactly_once._outage import Outage, describe

    leaked = OSError("could not reach postgresql://app:s3cretpw@db:5432/app")
    assert "s3cretpw" not in describe(leaked) and "app:***@db" in describe(leaked)
    error = Outage(logging.getLogger("tenure.outbox"), "outbox relay", "db").error(leaked)
    assert isinstance(error, tenure.StoreUnavailable) and error.transient
    assert "s3cretpw" not in str(error) and getattr(error, "_tenure_logged", False)
    refused = Outage(logging.getLogger("tenure.outbox"), "outbox relay", "db").error(KeyError("x"))
    assert isinstance(refused, tenure.StoreRefused) and not refused.transient
