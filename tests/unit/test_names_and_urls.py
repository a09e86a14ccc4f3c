"""Name validation and mapping; URL parsing and secret redaction."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure import InvalidArgument
from tenure._names import MAX_NAME_LENGTH, safe_key, safe_key_prefix, validate_name
from tenure._urls import parse_store_url, redact

SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*-[0-9a-f]{32}$")


@given(st.text(min_size=1, max_size=MAX_NAME_LENGTH))
def test_safe_keys_are_portable_file_names(name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return
    key = safe_key(name)
    assert SAFE.match(key), key
    assert len(key) <= 48 + 1 + 32
    assert "/" not in key and "\\" not in key and key not in (".", "..")


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_safe_keys_of_distinct_names_differ(first: str, second: str) -> None:
    try:
        first.encode(), second.encode()
    except UnicodeEncodeError:
        return
    assert (safe_key(first) == safe_key(second)) == (first == second)


@given(st.text(max_size=60), st.text(max_size=60))
def test_safe_key_prefix_prefixes_the_keys_of_every_name_with_that_prefix(prefix: str,
                                                                         rest: str) -> None:
    if prefix + rest:
        assert safe_key(prefix + rest).startswith(safe_key_prefix(prefix))


def test_validate_name_limits() -> None:
    assert validate_name("x" * MAX_NAME_LENGTH) == "x" * MAX_NAME_LENGTH
    with pytest.raises(InvalidArgument, match="1025 characters long; the limit is 1024"):
        validate_name("x" * (MAX_NAME_LENGTH + 1))


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://user:hunter2@cache:6379/0", "redis://user:***@cache:6379/0"),
    ("redis://:hunter2@cache", "redis://:***@cache"),
    ("redis://user:hun/ter2@cache/0", "redis://user:***@cache/0"),
    ("redis://user:hun@ter2@cache/0", "redis://user:***@cache/0"),
    ("postgresql://app:pa%40ss@db/locks?password=hunter2", "postgresql://app:***@db/locks?password=***"),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=hunter2==;",
     "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***;"),
    ("https://acct.blob.core.windows.net/c?sv=2024&sig=hunter2", "https://acct.blob.core.windows.net/c?sv=2024&sig=***"),
    ("sqlite:////var/lib/app/locks.db", "sqlite:////var/lib/app/locks.db"),
    ("BlobEndpoint=http://h/a;SharedAccessSignature=sv=1&sig=hunter2;",
     "BlobEndpoint=http://h/a;SharedAccessSignature=***;"),
])
def test_redact_hides_secrets(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert "hunter2" not in redact(url)


def test_redact_keeps_a_whole_message_readable() -> None:
    message = ("redis://:hunter2@127.0.0.1:6379/0: acquire of 'jobs' refused: the server "
               "requires a password: put it in the URL (redis://:PASSWORD@host)")
    assert redact(message) == message.replace("hunter2", "***").replace("PASSWORD", "***")
    unrelated = "redis://127.0.0.1:6379/0: listing failed; mail ops@example.com"
    assert redact(unrelated) == unrelated


@pytest.mark.parametrize(("url", "scheme", "location"), [
    ("sqlite:////var/lib/app/locks.db", "sqlite", "/var/lib/app/locks.db"),
    ("sqlite:/var/lib/app/locks.db", "sqlite", "/var/lib/app/locks.db"),
    ("file:///var/lib/app/locks", "file", "/var/lib/app/locks"),
    ("file:///tmp/with%20space", "file", "/tmp/with space"),
    ("memory://", "memory", ""),
    ("SQLITE:////x.db", "sqlite", "/x.db"),
    ("azblob://myaccount/locks", "azblob", "myaccount/locks"),
    ("azblob:///locks", "azblob", "/locks"),
    ("azblob:///my-locks-2/", "azblob", "/my-locks-2"),
])
def test_parse_store_url(url: str, scheme: str, location: str) -> None:
    parsed = parse_store_url(url)
    assert (parsed.scheme, parsed.location) == (scheme, location)


@pytest.mark.parametrize("url", ["postgresql://u@[::1/db", "redis://[::1/0", "mysql://u@[::1"])
def test_an_unparsable_url_is_invalid_argument_not_value_error(url: str) -> None:
    with pytest.raises(InvalidArgument, match=r"cannot be parsed \(Invalid IPv6 URL\); write "
                                              r"an IPv6 address in brackets"):
        parse_store_url(url)
