"""The application tables the exactly-once tests (and their child processes) share."""

from __future__ import annotations

import sqlalchemy as sa

from tenure import claims


def invoices_table(metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table("invoices", metadata or sa.MetaData(),
                    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("amount", sa.Integer, nullable=False, default=100),
                    sa.Column("paid_by", sa.String(64), nullable=True),
                    *claims.claim_columns())


def ledger_table(metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table("ledger", metadata or sa.MetaData(),
                    sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("reference", sa.String(64), nullable=False),
                    sa.Column("writer", sa.String(64), nullable=False))


def create_all(engine: sa.Engine, rows: int = 0) -> tuple[sa.Table, sa.Table]:
    metadata = sa.MetaData()
    invoices, ledger = invoices_table(metadata), ledger_table(metadata)
    metadata.create_all(engine)
    if rows:
        with engine.begin() as conn:
            conn.execute(sa.insert(invoices), [{"id": key, "amount": 100}
                                               for key in range(rows)])
    return invoices, ledger
