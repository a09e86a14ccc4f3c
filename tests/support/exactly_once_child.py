"""Child processes of the exactly-once tests (see exactly_once_support.Child). Each mode prints
progress lines the test waits on, and reads a line from stdin where the test needs it paused.

    python exactly_once_child.py claim-late URL KEY TOKEN
    python exactly_once_child.py claim-race URL ROWS TOKEN HOLDER
    python exactly_once_child.py idem-late URL KEY
    python exactly_once_child.py outbox-crash URL COUNT
"""

from __future__ import annotations

import sys

import sqlalchemy as sa
from exactly_once_support import make_engine
from exactly_once_tables import invoices_table, ledger_table

from tenure import claims, outbox
from tenure.idempotency import Idempotency, KeyLockLost, PaymentProvider


def say(line: str) -> None:
    print(line, flush=True)


def claim_late(url: str, key: str, token: str) -> None:
    engine = make_engine(url)
    invoices = invoices_table()
    won = claims.claim(engine, invoices, int(key), holder="old", token=int(token),
                       stale_after=0.2)
    say(f"claimed {bool(won)}")
    sys.stdin.readline()  # the test pauses us (SIGSTOP) around here, then says go
    say(f"completed {claims.complete(engine, invoices, int(key), int(token), {'paid_by': 'old'})}")


def claim_race(url: str, rows: str, token: str, holder: str) -> None:
    engine = make_engine(url)
    invoices = invoices_table()
    wins = 0
    for key in range(int(rows)):
        if claims.claim(engine, invoices, key, holder=holder, token=int(token),
                        stale_after=3600):
            wins += 1
            assert claims.complete(engine, invoices, key, int(token), {"paid_by": holder})
    say(f"wins {wins}")


def idem_late(url: str, key: str) -> None:
    engine = make_engine(url)
    idem = Idempotency(engine, stale_after=0.2)
    provider = PaymentProvider(engine)
    ledger = ledger_table()
    with idem.begin(key, request={"amount": 100}) as step:
        step.call("charged", lambda: provider.charge(
            100, reference=key, idempotency_key=step.key).as_dict())
        say("charged")
        sys.stdin.readline()
        try:
            step.atomic("recorded", lambda conn: conn.execute(
                sa.insert(ledger).values(reference=key, writer="old")))
        except KeyLockLost:
            say("lost")
            return
        say("recorded")


def outbox_crash(url: str, count: str) -> None:
    engine = make_engine(url)
    invoices = invoices_table()
    for key in range(int(count)):
        with engine.begin() as conn:
            conn.execute(sa.update(invoices).where(invoices.c.id == key)
                         .values(paid_by="child"))
            outbox.add(conn, "invoice.paid", {"invoice": key}, key=f"customer-{key % 3}")
        say(f"committed {key}")

    def stuck(message: outbox.OutboxMessage) -> None:
        say(f"delivering {message.payload['invoice']}")
        sys.stdin.readline()  # killed here, mid-delivery

    outbox.Relay(engine, stuck, claim_ttl=0.5).run_once()


if __name__ == "__main__":
    modes = {"claim-late": claim_late, "claim-race": claim_race, "idem-late": idem_late,
             "outbox-crash": outbox_crash}
    modes[sys.argv[1]](*sys.argv[2:])
