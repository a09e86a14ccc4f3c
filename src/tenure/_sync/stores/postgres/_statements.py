# GENERATED from src/tenure/_async/stores/postgres/_statements.py by scripts/unasync.py: do not edit.
"""Statement text made ready to run: the table's name and the shared fragments put in
(render), and the hot statements that libpq runs itself (_Statement) or in one round trip
(_Script).

Example::

    text = _render(_RENEW, sql.Identifier("public", "tenure_leases"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from psycopg import sql

from tenure._sync.stores.postgres._advisory_sql import _HELD, _HELD_LOCKS
from tenure._sync.stores.postgres._table_sql import (
    _ALIVE,
    _FREE,
    _HANDOVER_CHANNEL,
    _MINE,
    _MOST_WAITERS,
    _QUEUE,
    _SEED,
)


def _render(template: str, table: sql.Identifier) -> bytes:
    """The statement with the quoted table name in place, rendered once per store."""
    position = "array_position(l.q_ids, %(lease_id)s)"
    withdraw = ",\n    ".join(
        f"{column} = CASE WHEN {position} IS NULL THEN l.{column} "
        f"WHEN cardinality(l.q_ids) = 1 THEN NULL "
        f"ELSE l.{column}[:{position} - 1] || l.{column}[{position} + 1:] END"
        for column in _QUEUE)
    return sql.SQL(template.strip()).format(
        t=table, seed=sql.SQL(_SEED), seed_of_w=sql.SQL(_SEED.replace("%(name)s", "w.name")),
        free=sql.SQL(_FREE), mine=sql.SQL(_MINE),
        held=sql.SQL(_HELD.format(row="l")), held_locks=sql.SQL(_HELD_LOCKS),
        pop=sql.SQL(",\n    ".join(
            f"{column} = CASE WHEN cardinality(l.q_ids) > 1 THEN l.{column}[2:] END"
            for column in _QUEUE)),
        head=sql.SQL("(l.q_ids IS NOT NULL AND l.q_until[1] > now() AND "
                     + _ALIVE.format(id="l.q_ids[1]") + ")"),
        withdraw=sql.SQL(withdraw), most=sql.SQL(str(_MOST_WAITERS)),
        handover=sql.SQL(_HANDOVER_CHANNEL)).as_bytes(None)


# Parameter types (OIDs) of the statements that libpq runs directly (see _Statement).
_BOOL, _BYTEA, _INT4, _TEXT, _FLOAT8 = 16, 17, 23, 25, 701


class _Statement(NamedTuple):
    """A statement of the hot path (acquire, release), run by libpq itself: psycopg's cursor
    (adapting each parameter, describing and loading each result) costs as much client time as
    the server spends on a lease statement. The parameters are bytes: bytea ones in binary,
    the others as text; the types are fixed here, so nothing is inferred."""

    name: bytes  # of the prepared statement on each connection
    text: bytes  # with $1.. placeholders
    params: tuple[str, ...]  # which parameter is $1, $2, ...
    types: tuple[int, ...]
    formats: tuple[int, ...]  # 1 (binary) for bytea, else 0 (text)


class _Script(NamedTuple):
    """Statements run in one round trip (a simple query, the parameters bound by psycopg on the
    client), each with its own snapshot; the rows of the first answer."""

    text: bytes


def _statement(name: str, template: str, table: sql.Identifier,
               params: Sequence[tuple[str, int]]) -> _Statement:
    text = _render(template, table)
    for number, (param, _) in enumerate(params, 1):
        text = text.replace(f"%({param})s".encode(), f"${number}".encode())
    return _Statement(f"tenure_{name}".encode(), text, tuple(param for param, _ in params),
                      tuple(oid for _, oid in params),
                      tuple(int(oid == _BYTEA) for _, oid in params))


def _encode(value: object) -> bytes:
    """A parameter in the format _Statement says: bytes as they are, the rest as text."""
    return value if isinstance(value, bytes) else str(value).encode()
