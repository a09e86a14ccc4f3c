"""Unknown options in a store URL's query are refused at connect(), before any I/O, on every
scheme, as unknown keyword options are (`memory://?x=1` was once accepted)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import tenure
import tenure.aio
from tenure._async.stores._registry import entry

# Every scheme, with a server nobody listens on: the refusal must come before any connection.
URLS = [
    "memory://",
    "sqlite:///{tmp}/locks.db",
    "file://{tmp}/locks",
    "azblob:///locks",
    "redis://127.0.0.1:1/0",
    "rediss://127.0.0.1:1/0",
    "unix:///nonexistent/redis.sock",
    "redis://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0",
    "postgresql://app@127.0.0.1:1/db",
    "postgres://app@127.0.0.1:1/db",
    "mysql://app@127.0.0.1:1/db",
    "mariadb://app@127.0.0.1:1/db",
]


def _with_bogus(template: str, tmp_path: Path) -> str:
    url = template.format(tmp=tmp_path)
    return f"{url}{'&' if '?' in url else '?'}bogus=1"


@pytest.mark.parametrize("template", URLS)
def test_an_unknown_url_option_is_refused_by_the_sync_connect(template: str,
                                                               tmp_path: Path) -> None:
    url = _with_bogus(template, tmp_path)
    with pytest.raises(tenure.InvalidArgument, match="bogus") as raised:
        tenure.connect(url, **_azure_credentials(template))
    assert "unknown" in str(raised.value)


@pytest.mark.parametrize("template", URLS)
def test_an_unknown_url_option_is_refused_by_the_async_connect(template: str,
                                                                tmp_path: Path) -> None:
    url = _with_bogus(template, tmp_path)

    async def connect() -> None:
        await tenure.aio.connect(url, **_azure_credentials(template)).close()

    with pytest.raises(tenure.InvalidArgument, match="bogus") as raised:
        anyio.run(connect)
    assert "unknown" in str(raised.value)


def test_known_memory_url_still_connects() -> None:
    with tenure.connect("memory://") as store, store.lock("jobs").acquire(timeout=1) as lease:
        assert lease.token >= 1


def _azure_credentials(template: str) -> dict[str, str]:
    # azblob:///CONTAINER needs a connection string; none is used before the refusal.
    return {"connection_string": "UseDevelopmentStorage=true"} if template.startswith(
        "azblob") else {}



@pytest.mark.parametrize("template", URLS)
def test_an_unknown_option_is_worded_the_same_for_every_store(template: str,
                                                              tmp_path: Path) -> None:
    """One wording for every store: the option, the kind of store (named by its first
    scheme in the registry), then the accepted options; in the URL or as a keyword alike."""
    url = template.format(tmp=tmp_path)
    kind = entry(url.partition(":")[0]).schemes[0]
    expected = f"unknown option 'bogus' for {kind}:// stores; accepted: "
    for given, options in ((_with_bogus(template, tmp_path), {}), (url, {"bogus": 1})):
        with pytest.raises(tenure.InvalidArgument) as raised:
            tenure.connect(given, **options, **_azure_credentials(template))
        assert str(raised.value).startswith(expected), str(raised.value)
