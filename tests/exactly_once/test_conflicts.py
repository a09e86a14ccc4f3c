"""A transaction the database rolls back to break a deadlock is run again when it is the
helpers' own (an Engine was passed), and raised when it is the caller's (a Connection): InnoDB
chose a racing claim as the victim once in a loaded test run, and the claim raised error 1213."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from exactly_once_support import mariadb_database

from tenure.exactly_once._sql import in_transaction, is_conflict, sa


@pytest.fixture
def engine(mariadb_server: object) -> Iterator[sa.Engine]:
    for url in mariadb_database(mariadb_server.url):  # type: ignore[attr-defined]
        engine = sa.create_engine(url, pool_size=4)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"))
            conn.execute(sa.text("INSERT INTO t VALUES " + ", ".join(
                f"({number}, 0)" for number in range(12))))
        yield engine
        engine.dispose()


def deadlocking_work(engine: sa.Engine, attempts: list[int]) -> tuple[
        threading.Thread, list[BaseException], object]:
    """A work function whose first run deadlocks with a heavier transaction (rows 1-11, then
    row 0) of another thread, so InnoDB rolls the lighter one, the work's, back."""
    errors: list[BaseException] = []
    holds_row_0, others_taken = threading.Event(), threading.Event()

    def heavier() -> None:
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("UPDATE t SET v = v + 1 WHERE id BETWEEN 1 AND 11"))
                others_taken.set()
                holds_row_0.wait(30)
                conn.execute(sa.text("UPDATE t SET v = v + 1 WHERE id = 0"))  # waits on the work
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def work(conn: sa.Connection) -> int:
        attempts.append(len(attempts) + 1)
        conn.execute(sa.text("UPDATE t SET v = v + 10 WHERE id = 0"))
        if len(attempts) == 1:
            assert others_taken.wait(30)
            holds_row_0.set()
            # The other transaction now waits for row 0; asking for row 1 closes the cycle.
        conn.execute(sa.text("UPDATE t SET v = v + 10 WHERE id = 1"))
        return int(conn.execute(sa.text("SELECT v FROM t WHERE id = 0")).scalar_one())

    return threading.Thread(target=heavier), errors, work


def test_the_helpers_own_transaction_is_run_again_after_a_deadlock(engine: sa.Engine) -> None:
    attempts: list[int] = []
    thread, errors, work = deadlocking_work(engine, attempts)
    thread.start()
    value = in_transaction(engine, work)  # type: ignore[arg-type]
    thread.join(30)
    assert errors == []
    assert attempts == [1, 2], "the deadlock victim was not run again"
    assert value == 11  # the other transaction's +1, then this one's +10 once


def test_the_callers_transaction_is_not_run_again(engine: sa.Engine) -> None:
    attempts: list[int] = []
    thread, errors, work = deadlocking_work(engine, attempts)
    thread.start()
    with pytest.raises(sa.exc.OperationalError) as raised, engine.connect() as conn:
        in_transaction(conn, work)  # type: ignore[arg-type]
    thread.join(30)
    assert is_conflict(raised.value)
    assert attempts == [1]
    assert errors == []  # the other transaction went on once this one was rolled back
