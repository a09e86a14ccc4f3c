"""redact_url(): a string known to be one store URL, redacted in redact()'s form (user kept,
password hidden) even when the password holds spaces, '/' or '@'."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._urls import redact, redact_url


@pytest.mark.parametrize(("url", "shown"), [
    ("mysql://root:hunter2@db:3306/app", "mysql://root:***@db:3306/app"),
    ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
    ("redis://app:two words@cache:6379/0", "redis://app:***@cache:6379/0"),
    ("postgresql://app:a/b@c d@db/app?sslpassword=x", "postgresql://app:***@db/app?sslpassword=***"),
    ("postgresql://app@db/app", "postgresql://app@db/app"),
    ("sqlite:////var/lib/app/locks.db", "sqlite:////var/lib/app/locks.db"),
    ("memory://", "memory://"),
])
def test_redact_url_keeps_the_user_and_hides_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_redact_url_never_shows_a_password(password: str) -> None:
    url = f"redis://app:{password}@cache:6379/0"

    assert redact_url(url) == "redis://app:***@cache:6379/0"


@pytest.mark.parametrize("url", ["mysql://root:hunter2@db/app", "redis://:e@127.0.0.1:1/0",
                                 "postgresql://app:p%40ss@db/app"])
def test_redact_url_and_redact_agree_on_ordinary_urls(url: str) -> None:
    assert redact_url(url) == redact(url)
