"""tenure.idempotency: replay, request mismatch, a key in progress elsewhere, stale takeover,
recovery points (a retry resumes after the last recorded phase), the reaper, and the reference
payment provider; random schedules of crashing, abandoning and late-returning holders
(hypothesis); a paused holder in a real process losing its key (SQLite and PostgreSQL)."""

from __future__ import annotations

import signal
from typing import Any

import pytest
import sqlalchemy as sa
from exactly_once_support import Child, children, db_url, engine, make_engine, wait_stopped
from exactly_once_tables import create_all
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

import tenure
from tenure.idempotency import (
    Idempotency,
    KeyInProgress,
    KeyLockLost,
    PaymentProvider,
    ProviderError,
    ProviderTimeout,
    RequestMismatch,
    Step,
)

__all__ = ["children", "db_url", "engine"]  # fixtures used by the tests below


def setup(engine: sa.Engine, **options: Any) -> tuple[Idempotency, PaymentProvider, sa.Table]:
    _, ledger = create_all(engine)
    idem = Idempotency(engine, **options)
    idem.create_tables()
    provider = PaymentProvider(engine)
    provider.create_tables()
    return idem, provider, ledger


def pay(step: Step, provider: PaymentProvider, ledger: sa.Table, writer: str = "w") -> Any:
    charge = step.call("charged", lambda: provider.charge(
        100, reference=step.key, idempotency_key=step.key).as_dict())
    step.atomic("recorded", lambda conn: conn.execute(
        sa.insert(ledger).values(reference=step.key, writer=writer)))
    step.finish({"charge": charge["id"]})
    return step.response


def ledger_rows(engine: sa.Engine, ledger: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(ledger)).scalar_one())


def age_locks(engine: sa.Engine, idem: Idempotency, seconds: float) -> None:
    t = idem.table
    with engine.begin() as conn:
        conn.execute(sa.update(t).values(locked_at=t.c.locked_at - seconds))


def test_a_finished_key_replays_its_response(engine: sa.Engine) -> None:
    idem, provider, ledger = setup(engine)
    with idem.begin("inv-1", request={"amount": 100}) as step:
        assert not step.finished and step.recovery_point == "started"
        first = pay(step, provider, ledger)
    with idem.begin("inv-1", request={"amount": 100}) as again:
        assert again.finished and again.replayed and again.response == first
        with pytest.raises(tenure.InvalidArgument, match="finished"):
            again.call("charged", lambda: None)
    assert idem.run("inv-1", lambda step: pytest.fail("ran twice"),
                    request={"amount": 100}) == first
    assert idem.stats().new == 1 and idem.stats().replayed == 2
    assert provider.summary().charges == 1 and ledger_rows(engine, ledger) == 1


def test_a_different_request_under_the_same_key_is_refused(engine: sa.Engine) -> None:
    idem, _, _ = setup(engine)
    idem.run("k", lambda step: "ok", request={"amount": 100})
    with pytest.raises(RequestMismatch, match="different request"):
        idem.begin("k", request={"amount": 999}).__enter__()


def test_a_key_in_progress_is_refused_until_stale_then_taken_over(engine: sa.Engine) -> None:
    idem, provider, ledger = setup(engine, stale_after=30)
    slow = idem.begin("k", request=1).__enter__()
    slow.call("charged", lambda: provider.charge(100, reference="k",
                                                 idempotency_key="k").as_dict())
    with pytest.raises(KeyInProgress, match="another holder") as refused:
        idem.begin("k", request=1).__enter__()
    assert 0 < refused.value.retry_after <= 30
    age_locks(engine, idem, 60)
    with idem.begin("k", request=1) as fresh:
        assert fresh.passed("charged") and fresh.recovery_point == "charged"
        pay(fresh, provider, ledger, writer="fresh")
    with pytest.raises(KeyLockLost, match="taken over"):
        slow.atomic("recorded", lambda conn: conn.execute(
            sa.insert(ledger).values(reference="k", writer="slow")))
    assert idem.stats().taken_over == 1 and idem.stats().refused == 1
    assert ledger_rows(engine, ledger) == 1 and provider.summary().charges == 1


def test_a_retry_resumes_after_the_last_recovery_point(engine: sa.Engine) -> None:
    idem, provider, ledger = setup(engine)
    calls: list[str] = []

    def charge(step: Step) -> Any:
        calls.append("charge")
        return provider.charge(100, reference=step.key, idempotency_key=step.key).as_dict()

    with pytest.raises(ZeroDivisionError), idem.begin("k") as step:
        step.call("charged", lambda: charge(step))
        step.atomic("recorded", lambda conn: (conn.execute(
            sa.insert(ledger).values(reference="k", writer="a")), 1 / 0))
    assert ledger_rows(engine, ledger) == 0  # the atomic phase rolled back whole
    with idem.begin("k") as retry:  # the failure released the lock: no wait
        assert retry.recovery_point == "charged" and retry.result("charged")["amount"] == 100
        pay(retry, provider, ledger)
    assert calls == ["charge"] and idem.stats().resumed == 1
    assert ledger_rows(engine, ledger) == 1


def test_a_lost_provider_response_is_retried_with_the_same_key(engine: sa.Engine) -> None:
    idem, _, ledger = setup(engine)
    flaky = PaymentProvider(engine, lose_responses=1.0)
    with pytest.raises(ProviderTimeout), idem.begin("k") as step:
        step.call("charged", lambda: flaky.charge(100, reference="k",
                                                  idempotency_key=step.key).as_dict())
    steady = PaymentProvider(engine)
    with idem.begin("k") as retry:
        response = pay(retry, steady, ledger)
    assert steady.summary().charges == 1 and steady.summary().replays == 1
    assert response["charge"] == steady.charges_for("k")[0].id


def test_the_reaper_deletes_finished_keys_after_the_retention(engine: sa.Engine) -> None:
    idem, _, _ = setup(engine, retention=3600)
    idem.run("done", lambda step: 1)
    idem.begin("running").__enter__()
    assert idem.reap() == 0
    with engine.begin() as conn:
        conn.execute(sa.update(idem.table).values(created_at=idem.table.c.created_at - 7200))
    assert idem.reap() == 1
    with engine.connect() as conn:
        assert conn.execute(sa.select(idem.table.c.key)).scalars().all() == ["running"]
    with idem.begin("done") as again:
        assert not again.finished  # reaped: runs anew


def test_the_provider_honours_idempotency_keys(engine: sa.Engine) -> None:
    provider = PaymentProvider(engine)
    provider.create_tables()
    first = provider.charge(500, reference="inv-7", idempotency_key="pay-7")
    again = provider.charge(500, reference="inv-7", idempotency_key="pay-7")
    assert again.id == first.id and again.replayed and not first.replayed
    with pytest.raises(ProviderError, match="different parameters"):
        provider.charge(600, reference="inv-7", idempotency_key="pay-7")
    provider.charge(500, reference="inv-7")  # no key: a second, duplicate charge
    assert provider.duplicates() == {"inv-7": 2}
    summary = provider.summary()
    assert (summary.charges, summary.duplicate_charges, summary.replays) == (2, 1, 1)


def test_bad_arguments_fail_before_any_io(engine: sa.Engine) -> None:
    with pytest.raises(tenure.InvalidArgumentType, match="Engine"):
        Idempotency("sqlite://")  # type: ignore[arg-type]
    idem = Idempotency(engine)
    with pytest.raises(tenure.InvalidArgument, match="key"):
        idem.begin("")
    with pytest.raises(tenure.InvalidArgumentType, match="JSON"):
        idem.begin("k", request={"when": object()})
    with pytest.raises(tenure.InvalidArgument, match="stale_after"):
        Idempotency(engine, stale_after=-1)


# -- random schedules -------------------------------------------------------------------------

# Each attempt: "ok", a crash at a point (an exception: the lock is released), or "abandon" at
# a point (the process dies holding the lock: later attempts must wait for it to go stale),
# after which the abandoned holder may come back late ("zombie").
POINTS = ["before_charge", "lost_response", "in_atomic", "before_finish"]
attempts = st.lists(st.tuples(st.sampled_from(["ok", "crash", "abandon", "zombie"]),
                              st.sampled_from(POINTS)), min_size=1, max_size=8)


class Crash(Exception):
    pass


def attempt(idem: Idempotency, provider: PaymentProvider, ledger: sa.Table, step: Step,
            kind: str, point: str, writer: str) -> None:
    def fault(here: str) -> None:
        if kind in ("crash", "abandon") and point == here:
            raise Crash(here)

    fault("before_charge")

    def charge() -> Any:
        result = provider.charge(100, reference="k", idempotency_key=step.key).as_dict()
        fault("lost_response")
        return result

    charge_result = step.call("charged", charge)

    def record(conn: sa.Connection) -> None:
        conn.execute(sa.insert(ledger).values(reference="k", writer=writer))
        fault("in_atomic")

    step.atomic("recorded", record)
    fault("before_finish")
    step.finish({"charge": charge_result["id"]})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=attempts)
def test_random_schedules_charge_and_record_exactly_once(schedule: list[Any]) -> None:
    engine = make_engine("sqlite://")
    idem, provider, ledger = setup(engine, stale_after=50)
    zombies: list[Step] = []
    responses = []
    for number, (kind, point) in enumerate(schedule):
        if kind == "zombie":
            for zombie in zombies:  # a holder thought dead comes back and carries on
                try:
                    attempt(idem, provider, ledger, zombie, "ok", point, f"zombie{number}")
                    responses.append(zombie.response)
                except KeyLockLost:
                    pass
            zombies.clear()
            continue
        try:
            step = idem.begin("k", request={"amount": 100}).__enter__()
        except KeyInProgress:
            age_locks(engine, idem, 100)  # wait out the stale bound
            step = idem.begin("k", request={"amount": 100}).__enter__()
        if step.finished:
            responses.append(step.response)
            continue
        try:
            attempt(idem, provider, ledger, step, kind, point, f"a{number}")
            responses.append(step.response)
        except Crash as crash:
            if kind == "abandon":
                zombies.append(step)  # never exits: its lock stays until stale
            else:
                step.__exit__(Crash, crash, None)
    final = idem.run("k", lambda step: pytest.fail("a finished key ran again"),
                     request={"amount": 100}) \
        if responses else None
    if final is not None:
        responses.append(final)
    assert provider.summary().charges <= 1 and provider.summary().duplicate_charges == 0
    assert ledger_rows(engine, ledger) <= 1
    if responses:
        assert all(response == responses[0] for response in responses)
        assert provider.summary().charges == 1 and ledger_rows(engine, ledger) == 1
    engine.dispose()


# -- real processes ---------------------------------------------------------------------------


def test_a_paused_holder_loses_its_key_and_nothing_runs_twice(
        db_url: str, engine: sa.Engine, children: list[Child]) -> None:
    idem, provider, ledger = setup(engine, stale_after=0.2)
    old = Child("idem-late", db_url, "inv-9")
    children.append(old)
    old.expect("charged")
    old.signal(signal.SIGSTOP)
    wait_stopped(old)

    def take_over() -> Step | None:
        try:
            return idem.begin("inv-9", request={"amount": 100}).__enter__()
        except KeyInProgress:
            return None

    taken: list[Step] = []
    wait_until(lambda: taken.append(step) or True if (step := take_over()) else False,
               timeout=10, what="the stale key to be taken over")
    fresh = taken[0]
    assert fresh.recovery_point == "charged"
    pay(fresh, provider, ledger, writer="fresh")
    old.signal(signal.SIGCONT)
    old.send("go")
    assert old.expect("lost", timeout=30) == "lost"
    assert old.wait() == 0
    assert provider.summary().charges == 1 and ledger_rows(engine, ledger) == 1
