"""memory:// takes nothing: no host, no path, no option. Its leases live in the process that
made the store; a host or a path would read as the name of a shared store, which it is not."""

from __future__ import annotations

import pytest

import tenure
import tenure.aio


@pytest.mark.parametrize("url", ["memory://host", "memory:///path", "memory://host/path",
                                 "memory:relative"])
def test_a_host_or_a_path_is_refused(url: str) -> None:
    for module in (tenure, tenure.aio):
        with pytest.raises(tenure.InvalidArgument,
                           match=r"memory:// takes no host and no path.*write memory://"):
            module.connect(url)


def test_memory_url_alone_connects() -> None:
    with tenure.connect("memory://") as store:
        assert store.leases() == []
