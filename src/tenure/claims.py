"""Fenced claims on your own rows (SQLAlchemy 2 Core; install tenure[sql]).

A row moves from 'pending' (or from 'processing' claimed longer ago than `stale_after`) to
'processing', stamped with the claiming lease's fencing token; the final write is applied only
while the row still carries that token, so a paused old holder's late write is rejected, counted
and logged. See docs/exactly_once.md.

Example::

    import sqlalchemy as sa
    from tenure import claims

    invoices = sa.Table("invoices", metadata, sa.Column("id", sa.Integer, primary_key=True),
                        *claims.claim_columns())

    with store.lock("invoices", ttl=30).acquire() as lease:
        for row in claims.pending_or_stale(engine, invoices, stale_after=60):
            if claims.claim(engine, invoices, row.id, holder=store.holder, token=lease.token,
                            stale_after=60):
                with engine.begin() as conn:
                    claims.complete(conn, invoices, row.id, lease.token, {"paid": True})
"""

from tenure.exactly_once._claims import (
    CLAIM_COLUMNS,
    DONE,
    PENDING,
    PROCESSING,
    Claim,
    ClaimStats,
    claim,
    claim_columns,
    complete,
    migration_ddl,
    pending_or_stale,
    release,
    reset_stats,
    stats,
)

__all__ = [
    "CLAIM_COLUMNS",
    "Claim",
    "ClaimStats",
    "DONE",
    "PENDING",
    "PROCESSING",
    "claim",
    "claim_columns",
    "complete",
    "migration_ddl",
    "pending_or_stale",
    "release",
    "reset_stats",
    "stats",
]
