"""tenure.claims: claim/complete/release, stale takeover and fencing, checked by a model under
random schedules (hypothesis), and with real processes on SQLite and PostgreSQL: a paused
holder's late write is rejected, and racing claimers never both win a row."""

from __future__ import annotations

import doctest
import importlib
import inspect
import logging
import signal
import subprocess
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from exactly_once_support import Child, children, db_url, engine, make_engine, wait_stopped
from exactly_once_tables import create_all, invoices_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

import tenure
from tenure import claims

__all__ = ["children", "db_url", "engine"]  # fixtures used by the tests below


def backdate(engine: sa.Engine, table: sa.Table, key: int, seconds: float) -> None:
    """Make a claim look `seconds` older (a stand-in for waiting, where the test is about
    order, not time)."""
    with engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.id == key)
                     .values(claimed_at=table.c.claimed_at - seconds))


def row(engine: sa.Engine, table: sa.Table, key: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.select(table).where(table.c.id == key)).one()


def test_claim_complete_and_stale_takeover(engine: sa.Engine,
                                           caplog: pytest.LogCaptureFixture) -> None:
    invoices, _ = create_all(engine, rows=2)
    first = claims.claim(engine, invoices, 0, holder="a", token=5, stale_after=60)
    assert first and not first.stale_takeover
    assert not claims.claim(engine, invoices, 0, holder="b", token=6, stale_after=60)
    assert [r.id for r in claims.pending_or_stale(engine, invoices, stale_after=60)] == [1]

    backdate(engine, invoices, 0, 120)
    assert [r.id for r in claims.pending_or_stale(engine, invoices, stale_after=60)] == [0, 1]
    assert not claims.claim(engine, invoices, 0, holder="old", token=4, stale_after=60)
    second = claims.claim(engine, invoices, 0, holder="b", token=6, stale_after=60)
    assert second and second.stale_takeover

    before = claims.stats().rejected
    with caplog.at_level(logging.WARNING, logger="tenure.claims"):
        assert not claims.complete(engine, invoices, 0, 5, {"paid_by": "a"})
    assert claims.stats().rejected == before + 1
    assert "stale write rejected" in caplog.text and "fence 6" in caplog.text
    assert claims.complete(engine, invoices, 0, 6, {"paid_by": "b"})
    done = row(engine, invoices, 0)
    assert (done.status, done.fence, done.paid_by) == ("done", 6, "b")
    assert not claims.claim(engine, invoices, 0, holder="c", token=7, stale_after=60)


def test_complete_in_the_callers_transaction_rolls_back_with_it(engine: sa.Engine) -> None:
    invoices, ledger = create_all(engine, rows=1)
    assert claims.claim(engine, invoices, 0, holder="a", token=1, stale_after=60)
    assert claims.claim(engine, invoices, 0, holder="a", token=1, stale_after=60) .won is False
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(sa.insert(ledger).values(reference="0", writer="a"))
        assert claims.complete(conn, invoices, 0, 1, {"paid_by": "a"})
        raise RuntimeError("the business write failed")
    assert row(engine, invoices, 0).status == "processing"
    assert claims.release(engine, invoices, 0, 1)
    assert row(engine, invoices, 0).status == "pending"
    assert not claims.release(engine, invoices, 0, 1)


def test_bad_arguments_fail_before_any_io(engine: sa.Engine) -> None:
    invoices = invoices_table()
    plain = sa.Table("plain", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    with pytest.raises(tenure.InvalidArgument, match="claim_columns"):
        claims.claim(engine, plain, 1, holder="a", token=1, stale_after=1)
    with pytest.raises(tenure.InvalidArgumentType, match="token must be an int"):
        claims.claim(engine, invoices, 1, holder="a", token="7", stale_after=1)  # type: ignore[arg-type]
    with pytest.raises(tenure.InvalidArgument, match="stale_after"):
        claims.claim(engine, invoices, 1, holder="a", token=1, stale_after=0)
    with pytest.raises(tenure.InvalidArgument, match="holder"):
        claims.claim(engine, invoices, 1, holder="", token=1, stale_after=1)
    with pytest.raises(tenure.InvalidArgument, match="nope"):
        claims.complete(engine, invoices, 1, 1, {"nope": 1})
    with pytest.raises(tenure.InvalidArgumentType, match="Engine, Connection or Session"):
        claims.claim("sqlite://", invoices, 1, holder="a", token=1, stale_after=1)


def test_migration_ddl_adds_the_columns_to_an_existing_table(tmp_path: Any) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)"))
        conn.execute(sa.text("INSERT INTO orders (id, total) VALUES (1, 10)"))
        for statement in claims.migration_ddl("orders", "sqlite"):
            conn.execute(sa.text(statement))
    orders = sa.Table("orders", sa.MetaData(), autoload_with=engine)
    assert claims.claim(engine, orders, 1, holder="a", token=1, stale_after=5)
    assert claims.complete(engine, orders, 1, 1, {"total": 11})


# -- a model of one row under random schedules -----------------------------------------------

operations = st.lists(st.tuples(st.sampled_from(["claim", "complete", "release", "age"]),
                                st.integers(0, 3)), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=operations)
def test_random_schedules_match_the_model(tmp_path_factory: Any, schedule: list[Any]) -> None:
    """Holders 0..3 hold tokens 1..4 (a later lease, a larger token). Whatever the order of
    their claims, completions, releases and the passing of time: the database agrees with a
    model, there is at most one completion, and it is by the largest token that ever won."""
    engine = make_engine("sqlite://")
    invoices, _ = create_all(engine, rows=1)
    status, fence, stale = "pending", None, False
    won_tokens: list[int] = []
    completions: list[int] = []
    for operation, holder in schedule:
        token = holder + 1
        if operation == "age":
            if status == "processing":
                backdate(engine, invoices, 0, 100)
                stale = True
            continue
        fenced_ok = fence is None or fence <= token
        if operation == "claim":
            expected = fenced_ok and (status == "pending" or (status == "processing" and stale))
            result = claims.claim(engine, invoices, 0, holder=str(holder), token=token,
                                  stale_after=50)
            assert result.won == expected
            assert result.stale_takeover == (expected and status == "processing")
            if expected:
                status, fence, stale = "processing", token, False
                won_tokens.append(token)
        elif operation == "complete":
            expected = status == "processing" and fence == token
            assert claims.complete(engine, invoices, 0, token, {"paid_by": str(holder)}) \
                == expected
            if expected:
                status = "done"
                completions.append(token)
        else:
            expected = status == "processing" and fence == token
            assert claims.release(engine, invoices, 0, token) == expected
            if expected:
                status, stale = "pending", False
        stored = row(engine, invoices, 0)
        assert (stored.status, stored.fence) == (status, fence)
    assert len(completions) <= 1
    if completions:
        assert completions[0] == max(won_tokens)
        assert row(engine, invoices, 0).paid_by == str(completions[0] - 1)
    engine.dispose()


# -- real processes ---------------------------------------------------------------------------


def test_a_paused_holders_late_write_is_rejected(db_url: str, engine: sa.Engine,
                                                 children: list[Child]) -> None:
    invoices, _ = create_all(engine, rows=1)
    old = Child("claim-late", db_url, "0", "1")
    children.append(old)
    assert old.expect("claimed") == "claimed True"
    old.signal(signal.SIGSTOP)  # the GC pause: its claim goes stale while it is frozen
    wait_stopped(old)

    def taken_over() -> bool:
        return bool(claims.claim(engine, invoices, 0, holder="new", token=2, stale_after=0.2))

    wait_until(taken_over, timeout=10, what="the stale claim to be taken over")
    assert claims.complete(engine, invoices, 0, 2, {"paid_by": "new"})
    old.signal(signal.SIGCONT)
    old.send("go")
    assert old.expect("completed") == "completed False"
    assert old.wait() == 0
    final = row(engine, invoices, 0)
    assert (final.status, final.fence, final.paid_by) == ("done", 2, "new")


def test_racing_processes_never_both_win_a_row(db_url: str, engine: sa.Engine,
                                               children: list[Child]) -> None:
    rows = 30
    invoices, _ = create_all(engine, rows=rows)
    racers = [Child("claim-race", db_url, str(rows), str(token), f"p{token}")
              for token in (1, 2, 3)]
    children.extend(racers)
    wins = [int(racer.expect("wins").split()[1]) for racer in racers]
    assert all(racer.wait() == 0 for racer in racers)
    assert sum(wins) == rows
    with engine.connect() as conn:
        done = conn.execute(sa.select(sa.func.count()).select_from(invoices)
                            .where(invoices.c.status == "done",
                                   invoices.c.paid_by == sa.literal("p") +
                                   sa.cast(invoices.c.fence, sa.String))).scalar_one()
    assert done == rows


# -- the public modules -----------------------------------------------------------------------

EXACTLY_ONCE = ["tenure.claims", "tenure.idempotency", "tenure.outbox"]


@pytest.mark.parametrize("module_name", EXACTLY_ONCE)
def test_public_names_are_curated_and_show_an_example(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == list(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if not callable(value):
            continue
        members = [(name, value)]
        if inspect.isclass(value) and not issubclass(value, BaseException):
            members += [(f"{name}.{attribute}", member) for attribute, member
                        in vars(value).items() if not attribute.startswith("_")
                        and (callable(member) or isinstance(member, property))]
        for qualified, member in members:
            assert "Example" in (inspect.getdoc(member) or ""), f"{module_name}.{qualified}"


@pytest.mark.parametrize("module_name", ["_sql", "claims", "idempotency", "provider", "outbox"])
def test_doctests(module_name: str) -> None:
    module = importlib.import_module(f"tenure.exactly_once.{module_name}")
    assert doctest.testmod(module).failed == 0


def test_a_missing_sqlalchemy_names_the_extra() -> None:
    code = ("import sys; sys.modules['sqlalchemy'] = None\n"
            "try:\n    import tenure.claims\n"
            "except tenure.MissingExtra as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", "import tenure\n" + code],
                            capture_output=True, text=True, timeout=60)
    assert "install tenure[sql]" in result.stdout, result.stderr
