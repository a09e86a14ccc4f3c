"""A reference payment provider for demos and tests: it honours an Idempotency-Key the way card
processors do (the same key returns the first charge, never a second one) and records every
charge, so a run can count charges and duplicates per reference (e.g. per invoice).

Backed by tables in any SQLAlchemy database (a SQLite file lets several processes share one
provider). `lose_responses` makes it charge and then fail as if the response were lost on the
way back: the case idempotency keys exist for.

Example::

    provider = PaymentProvider(sa.create_engine("sqlite:///provider.db"))
    provider.create_tables()
    first = provider.charge(500, reference="inv-7", idempotency_key="pay-inv-7")
    again = provider.charge(500, reference="inv-7", idempotency_key="pay-inv-7")
    assert again.id == first.id and again.replayed
    assert provider.summary().duplicate_charges == 0
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from tenure._errors import InvalidArgument, InvalidArgumentType, TenureError
from tenure.exactly_once._sql import (
    Bind,
    Engine,
    db_now,
    epoch_column,
    insert_if_absent,
    sa,
    transaction,
)


class ProviderError(TenureError):
    """The provider refused the request (e.g. a key reused with other parameters).

    Example:
        >>> isinstance(ProviderError("key reused"), TenureError)
        True
    """


class ProviderTimeout(ProviderError, TimeoutError):
    """The charge may have happened but its response was lost: retry with the same key.

    Example:
        >>> isinstance(ProviderTimeout("lost"), TimeoutError)
        True
    """


@dataclass(frozen=True)
class Charge:
    """One charge at the provider; `replayed` when returned again for a repeated key.

    Example:
        >>> Charge(id=1, amount=500, reference="inv-7", idempotency_key="k",
        ...        replayed=False).as_dict()["amount"]
        500
    """

    id: int
    amount: int
    reference: str
    idempotency_key: str | None
    replayed: bool

    def as_dict(self) -> dict[str, Any]:
        """The charge as a JSON-friendly dict.

        Example::

            step.call("charged", lambda: provider.charge(...).as_dict())
        """
        return asdict(self)


@dataclass(frozen=True)
class ProviderSummary:
    """What the provider saw: charges made, references charged more than once and the extra
    charges they got, requests answered from an idempotency key (replays).

    Example:
        >>> ProviderSummary(charges=10, duplicate_references=0, duplicate_charges=0,
        ...                 replays=3).duplicate_charges
        0
    """

    charges: int
    duplicate_references: int
    duplicate_charges: int
    replays: int


class PaymentProvider:
    """A card processor stand-in over tables `<prefix>charges` and `<prefix>keys`.

    Example::

        provider = PaymentProvider(engine, lose_responses=0.2)
    """

    def __init__(self, engine: Engine, *, prefix: str = "provider_",
                 lose_responses: float = 0.0) -> None:
        if not isinstance(engine, Engine):
            raise InvalidArgumentType(f"engine must be a SQLAlchemy Engine, got "
                                      f"{type(engine).__name__}")
        if not isinstance(lose_responses, (int, float)) or not 0 <= lose_responses <= 1:
            raise InvalidArgument(f"lose_responses={lose_responses!r} must be a probability "
                                  "from 0 to 1")
        self.engine = engine
        self.lose_responses = float(lose_responses)
        metadata = sa.MetaData()
        self.charges = sa.Table(
            f"{prefix}charges", metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("amount", sa.BigInteger, nullable=False),
            sa.Column("reference", sa.String(255), nullable=False, index=True),
            sa.Column("idempotency_key", sa.String(255), nullable=True),
            epoch_column("created_at", nullable=False))
        self.keys = sa.Table(
            f"{prefix}keys", metadata,
            sa.Column("idempotency_key", sa.String(255), primary_key=True),
            sa.Column("charge_id", sa.Integer, nullable=True),
            sa.Column("amount", sa.BigInteger, nullable=False),
            sa.Column("reference", sa.String(255), nullable=False),
            sa.Column("replays", sa.Integer, nullable=False, default=0))
        self._metadata = metadata

    def create_tables(self, bind: Bind | None = None) -> None:
        """Create the provider's tables if missing, through `bind` (an Engine or Connection;
        default: this provider's engine).

        Example::

            provider.create_tables()
        """
        with transaction(self.engine if bind is None else bind, "bind") as conn:
            self._metadata.create_all(conn, checkfirst=True)

    def charge(self, amount: int, *, reference: str, idempotency_key: str | None = None) -> Charge:
        """Charge `amount` for `reference`. With an `idempotency_key` already seen, return the
        first charge (with the same amount and reference; else ProviderError) and charge
        nothing. May raise ProviderTimeout after charging (see `lose_responses`).

        Example::

            charge = provider.charge(500, reference="inv-7", idempotency_key="pay-inv-7")
        """
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise InvalidArgument(f"amount={amount!r} must be a positive int (minor units)")
        if not isinstance(reference, str) or not reference:
            raise InvalidArgument("reference must be a non-empty str (e.g. the invoice id)")
        if idempotency_key is not None and (not isinstance(idempotency_key, str)
                                            or not 0 < len(idempotency_key) <= 255):
            raise InvalidArgument("idempotency_key must be a non-empty str of at most 255 "
                                  "characters, or None")
        with self.engine.begin() as conn:
            if idempotency_key is not None and not insert_if_absent(conn, self.keys, {
                    "idempotency_key": idempotency_key, "amount": amount,
                    "reference": reference, "replays": 0}):
                return self._replay(conn, idempotency_key, amount, reference)
            # inserted_primary_key, not RETURNING: MySQL has no INSERT ... RETURNING.
            inserted = conn.execute(sa.insert(self.charges).values(
                amount=amount, reference=reference, idempotency_key=idempotency_key,
                created_at=db_now(conn))).inserted_primary_key
            assert inserted is not None  # a single-row insert has one
            charge_id = int(inserted[0])
            if idempotency_key is not None:
                conn.execute(sa.update(self.keys)
                             .where(self.keys.c.idempotency_key == idempotency_key)
                             .values(charge_id=charge_id))
        if self.lose_responses and random.random() < self.lose_responses:
            raise ProviderTimeout(f"charge for {reference!r} timed out (it may have happened): "
                                  "retry with the same idempotency key")
        return Charge(id=charge_id, amount=amount, reference=reference,
                      idempotency_key=idempotency_key, replayed=False)

    def _replay(self, conn: sa.Connection, key: str, amount: int, reference: str) -> Charge:
        k = self.keys.c
        row = conn.execute(sa.select(k.charge_id, k.amount, k.reference)
                           .where(k.idempotency_key == key)).one()
        if (row.amount, row.reference) != (amount, reference):
            raise ProviderError(f"idempotency key {key!r} was used with different parameters "
                                f"(amount {row.amount}, reference {row.reference!r})")
        conn.execute(sa.update(self.keys).where(k.idempotency_key == key)
                     .values(replays=k.replays + 1))
        return Charge(id=row.charge_id, amount=amount, reference=reference,
                      idempotency_key=key, replayed=True)

    def charges_for(self, reference: str) -> list[Charge]:
        """Every charge made for `reference`, oldest first.

        Example::

            assert len(provider.charges_for("inv-7")) == 1
        """
        c = self.charges.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(c.id, c.amount, c.reference, c.idempotency_key)
                                .where(c.reference == reference).order_by(c.id)).all()
        return [Charge(id=row.id, amount=row.amount, reference=row.reference,
                       idempotency_key=row.idempotency_key, replayed=False) for row in rows]

    def duplicates(self) -> dict[str, int]:
        """References charged more than once, with their number of charges.

        Example::

            assert provider.duplicates() == {}
        """
        c = self.charges.c
        count = sa.func.count().label("n")
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(c.reference, count).group_by(c.reference)
                                .having(sa.func.count() > 1)).all()
        return {row.reference: int(row.n) for row in rows}

    def summary(self) -> ProviderSummary:
        """Totals: charges, duplicate references and extra charges, idempotent replays.

        Example::

            print(provider.summary())
        """
        with self.engine.connect() as conn:
            charges = conn.execute(sa.select(sa.func.count()).select_from(self.charges))
            total = int(charges.scalar_one())
            replays = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(self.keys.c.replays),
                                                              0))).scalar_one()
        duplicates = self.duplicates()
        return ProviderSummary(charges=total, duplicate_references=len(duplicates),
                               duplicate_charges=sum(n - 1 for n in duplicates.values()),
                               replays=int(replays))
