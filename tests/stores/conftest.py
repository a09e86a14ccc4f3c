"""Fixtures the store-specific tests share: the API under test, and a PostgreSQL schema of a
test's own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from servers import PostgresServer


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    """The API a test runs through: "sync" (tenure) or "async" (tenure.aio)."""
    return str(request.param)


@pytest.fixture
def schema(postgres_server: PostgresServer) -> Iterator[str]:
    """A PostgreSQL schema of this test's own, dropped afterwards."""
    name = "t" + uuid.uuid4().hex[:20]
    yield name
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
