"""Fixtures shared by every test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from servers import Azurite, ServiceMissing, service_missing


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """One Azurite per test process, in memory on a free loopback port; stopped at the end.

    Its connection string is also put in AZURE_STORAGE_CONNECTION_STRING, so `azblob:///C`
    URLs work here and in the worker processes that the tests start.
    """
    server = Azurite(tmp_path_factory.mktemp("azurite"))
    try:
        server.start()
    except ServiceMissing as exc:
        service_missing(str(exc))
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
    yield server
    server.stop()
