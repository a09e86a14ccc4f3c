"""The package's own promises: curated public API, docstrings with examples, generated sync code
up to date, doctests of the pure modules."""

from __future__ import annotations

import doctest
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.claims
import tenure.demo
import tenure.idempotency
import tenure.jobs
import tenure.outbox
import tenure.queues
import tenure.stores

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = [tenure, tenure.aio, tenure.stores, tenure.aio.stores, tenure.jobs,
                  tenure.queues, tenure.claims, tenure.idempotency, tenure.outbox, tenure.demo]
PURE_MODULES = ["tenure._timing", "tenure._names", "tenure._urls", "tenure._errors",
                "tenure._types", "tenure._hostclock", "tenure._async._shim", "tenure._sync._shim",
                "tenure.jobs._schedule", "tenure.jobs._run"]


def test_public_names_exist_and_are_sorted() -> None:
    for module in PUBLIC_MODULES:
        assert sorted(module.__all__) == list(module.__all__), module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def _public_callables() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            value = getattr(module, name)
            if not callable(value) or name.startswith("_"):
                continue
            found.append((f"{module.__name__}.{name}", value))
            if inspect.isclass(value) and not issubclass(value, BaseException):
                # Inherited members too (a store's methods may live on a base class of its
                # package); each as lookup finds it, tenure's own classes only.
                seen: set[str] = set()
                for klass in value.__mro__:
                    if not klass.__module__.startswith("tenure"):
                        continue
                    for attribute, member in vars(klass).items():
                        if attribute in seen or attribute.startswith("_") or not (
                                callable(member) or isinstance(member, property)):
                            continue
                        seen.add(attribute)
                        found.append((f"{module.__name__}.{name}.{attribute}", member))
    return found


@pytest.mark.parametrize(("qualified", "value"), _public_callables(),
                         ids=[item[0] for item in _public_callables()])
def test_every_public_callable_has_a_docstring(qualified: str, value: object) -> None:
    doc = inspect.getdoc(value)
    assert doc, f"{qualified} has no docstring"


@pytest.mark.parametrize("name", ["tenure.connect", "tenure.Store.lock", "tenure.Store.semaphore",
                                  "tenure.Store.leases", "tenure.Store.break_lease",
                                  "tenure.Store.close", "tenure.Lock.try_acquire",
                                  "tenure.Lock.acquire", "tenure.Lease.release",
                                  "tenure.Lease.check", "tenure.aio.connect"])
def test_main_entry_points_show_an_example(name: str) -> None:
    target: object = importlib.import_module(name.split(".")[0])
    for part in name.split(".")[1:]:
        target = getattr(target, part)
    assert "Example" in (inspect.getdoc(target) or ""), name


@pytest.mark.parametrize("module_name", PURE_MODULES)
def test_doctests(module_name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(module_name))
    assert failures == 0


def test_generated_sync_code_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_sync_api_mirrors_async_api() -> None:
    pairs = [(tenure.Store, tenure.aio.AsyncStore), (tenure.Lock, tenure.aio.AsyncLock),
             (tenure.Lease, tenure.aio.AsyncLease)]
    for sync_class, async_class in pairs:
        public = {name for name in dir(async_class) if not name.startswith("_")}
        assert public == {name for name in dir(sync_class) if not name.startswith("_")}
