"""How a store's refusals and outages reach the caller: at once for what no retry clears, after
the caller's timeout for what one might.

Example::

    message = await refused_within_a_second(tenure.connect(url_with_a_wrong_password))
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from waiting import call

import tenure


async def refused_within_a_second(store: Any, timeout: float | None = None, *,
                                  close: bool = True) -> str:
    """acquire(timeout) on `store` raises StoreRefused (not transient) within 1 s, naming the
    lock on one line; its message. The store is closed after (unless `close` is False).

    Example::

        message = await refused_within_a_second(module.connect(url), timeout=30)
    """
    started = time.monotonic()
    try:
        with pytest.raises(tenure.StoreRefused) as raised:
            await call(store.lock("jobs", ttl=5).acquire(timeout=timeout))
    finally:
        if close:
            await call(store.close())
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"a permanent error took {elapsed:.2f} s to surface"
    assert raised.value.transient is False
    message = str(raised.value)
    assert "\n" not in message and "'jobs'" in message
    return message


def assert_password_hidden(message: str, url_start: str, wrong: str) -> None:
    """The refusal's `message` shows the URL as `url_start` (user:***@address), never the
    `wrong` password, and no address with the mask inside it.

    Example::

        assert_password_hidden(message, f"mysql://app:***@{address}", "not-the-password")
    """
    assert url_start in message, message
    assert f":{wrong}@" not in message
    if len(wrong) > 1:
        assert wrong not in message
    assert not re.search(r"[\d.]\*\*\*|\*\*\*[\d.]", message), "an address mangled: " + message


async def assert_retried_until_the_timeout(store: Any) -> None:
    """acquire(timeout=2) on `store`, whose server does not answer, raises a transient
    StoreUnavailable (not StoreRefused) after about those 2 s; the store is closed after.

    Example::

        await assert_retried_until_the_timeout(module.connect(url_of_a_closed_port, timeout=1))
    """
    started = time.monotonic()
    try:
        with pytest.raises(tenure.StoreUnavailable) as raised:
            await call(store.lock("jobs", ttl=5, max_wait=0.05).acquire(timeout=2))
    finally:
        await call(store.close())
    elapsed = time.monotonic() - started
    assert raised.value.transient and not isinstance(raised.value, tenure.StoreRefused)
    assert 1.9 <= elapsed < 6, elapsed
