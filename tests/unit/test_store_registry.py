"""One registry of schemes (stores/_registry.py): each store module declares the schemes the
registry maps to it and one entry point, `from_url`; connect(), the URL parser and the store
classes of tenure.stores and tenure.aio.stores are all read from it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tenure
import tenure.aio
import tenure.aio.stores
import tenure.stores
from tenure import _urls
from tenure._async.stores import _registry as async_registry
from tenure._sync.stores import _registry as sync_registry

REGISTRIES = [pytest.param(async_registry, "tenure._async.stores", "Async", id="async"),
              pytest.param(sync_registry, "tenure._sync.stores", "", id="sync")]


@pytest.mark.parametrize(("registry", "package", "prefix"), REGISTRIES)
@pytest.mark.parametrize("index", range(len(async_registry.STORES)))
def test_every_module_declares_exactly_its_schemes_and_one_entry_point(
        registry: object, package: str, prefix: str, index: int) -> None:
    entry = async_registry.STORES[index]
    module = importlib.import_module(f"{package}.{entry.module}")
    assert tuple(getattr(module, "SCHEMES", ())) == entry.schemes, entry.module
    if entry.schemes:
        assert callable(module.from_url), entry.module
    for name in entry.classes:
        assert hasattr(module, prefix + name.removeprefix("Async")), (entry.module, name)


def test_a_scheme_belongs_to_one_store() -> None:
    schemes = [scheme for entry in async_registry.STORES for scheme in entry.schemes]
    assert len(schemes) == len(set(schemes))
    assert async_registry.schemes() == tuple(schemes)


def test_the_url_parser_knows_the_schemes_from_the_registry() -> None:
    assert _urls.SUPPORTED == async_registry.SUPPORTED
    served = {scheme: entry.module for entry in async_registry.STORES if entry.server
              for scheme in entry.schemes}
    assert served == _urls.SERVER_SCHEMES
    assert set(_urls.SERVER_SCHEMES) == {"redis", "rediss", "unix", "postgresql", "postgres",
                                         "mysql", "mariadb"}
    for form in ("memory://", "sqlite:////absolute/locks.db", "file:///path/to/dir",
                 "azblob://ACCOUNT/CONTAINER", "redis://HOST:PORT/DB", "mysql://USER@HOST:PORT/DB",
                 "postgresql://USER@HOST:PORT/DB", "unix:///path/to/redis.sock"):
        assert form in _urls.SUPPORTED
    with pytest.raises(tenure.InvalidArgument, match=r"'mongodb' is not supported.*memory://"):
        _urls.parse_store_url("mongodb://db/x")


@pytest.mark.parametrize("connect", [tenure.connect, tenure.aio.connect])
def test_an_unsupported_scheme_lists_every_scheme_of_the_registry(connect: object) -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        connect("ftp://x")  # type: ignore[operator]
    message = str(raised.value)
    for entry in async_registry.STORES:  # the Redis quorum form too, which has no scheme
        assert entry.forms in message, (entry.module, message)
        for scheme in entry.schemes:  # each scheme among its own store's forms
            assert f"{scheme}://" in entry.forms, (scheme, entry.forms)
    assert "redis://HOST1:PORT,HOST2:PORT,HOST3:PORT/DB" in message, message


def test_a_store_module_refuses_a_url_of_another_store() -> None:
    from tenure._async.stores import memory, sqlite

    with pytest.raises(tenure.InvalidArgument, match="is not a memory:// URL"):
        memory.from_url("sqlite:////tmp/x.db")
    with pytest.raises(tenure.InvalidArgument, match="is not a sqlite:// URL"):
        sqlite.from_url("memory://")


def test_the_store_classes_of_both_apis_come_from_the_registry() -> None:
    for entry in async_registry.STORES:
        for name in entry.classes:
            assert name in tenure.aio.stores.__all__
            assert name.removeprefix("Async") in tenure.stores.__all__
            assert getattr(tenure.aio.stores, name).__name__ == name
            assert getattr(tenure.stores, name.removeprefix("Async")).__name__ == (
                name.removeprefix("Async"))


def test_the_async_stores_module_exports_the_value_types_as_the_sync_one_does() -> None:
    for name in ("Capabilities", "Grant", "LostReason"):
        assert name in tenure.aio.stores.__all__ and name in tenure.stores.__all__
        assert getattr(tenure.aio.stores, name) is getattr(tenure.stores, name)


def test_the_old_entry_points_still_build_stores() -> None:
    from tenure._async.stores import azblob, redis_quorum
    from tenure._sync.stores import azblob as sync_azblob

    for open_store in (azblob.open_store, sync_azblob.open_store):
        store = open_store("", "locks", connection_string="UseDevelopmentStorage=true")
        assert store.url.startswith("azblob:")
    assert callable(redis_quorum.open_store)


def test_a_store_module_loads_only_when_its_scheme_is_used(tmp_path: object) -> None:
    code = f"""
import json, sys
import tenure, tenure.stores, tenure.aio.stores
with tenure.connect("sqlite:///{tmp_path}/locks.db") as store:
    store.lock("jobs").try_acquire()
print(json.dumps(sorted(name for name in sys.modules if name.startswith("tenure._")
                        and ".stores." in name)))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    loaded = {name.rpartition(".")[2] for name in json.loads(result.stdout)}
    assert loaded.isdisjoint({"azblob", "redis", "redis_quorum", "postgres", "mysql"}), loaded


def test_an_unknown_option_is_worded_the_same_for_every_local_store(tmp_path: object) -> None:
    cases = {
        "memory://?bogus=1": "unknown option 'bogus' for memory:// stores; accepted: retain",
        f"sqlite:///{tmp_path}/x.db?bogus=1": (
            "unknown option 'bogus' for sqlite:// stores; accepted: synchronous, busy_timeout, "
            "retain"),
        f"file://{tmp_path}/d?bogus=1": (
            "unknown option 'bogus' for file:// stores; accepted: retain"),
        "azblob:///locks?bogus=1": (
            "unknown option 'bogus' for azblob:// stores; accepted: retain (in the URL's query; as "
            "keywords: connection_string, blob_url_format, create_container, fencing, retain, "
            "timeout)"),
    }
    for url, message in cases.items():
        for connect in (tenure.connect, tenure.aio.connect):
            with pytest.raises(tenure.InvalidArgument) as raised:
                connect(url)
            assert str(raised.value) == message


def test_a_store_object_takes_no_options() -> None:
    backend = tenure.stores.MemoryStore()
    with pytest.raises(tenure.InvalidArgument) as raised:
        tenure.connect(backend, prefix="app:")
    assert str(raised.value) == ("unknown option 'prefix' for a store object; accepted: none "
                                 "(give a store object its options when you build it)")


def test_a_store_whose_driver_is_missing_names_the_pip_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store module that imports its driver bare still gives MissingExtra: the registry
    names the extra (the built-in stores raise their own, with the same pip command)."""
    package = tmp_path / "fake_stores"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "graph.py").write_text("import tenure_no_such_driver\n")
    (package / "broken.py").write_text("import fake_stores.no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(async_registry, "_PACKAGE", "fake_stores")
    graph = async_registry.Entry("graph", ("graph",), "graph://HOST/DB", extra="graph")
    with pytest.raises(tenure.MissingExtra) as raised:
        async_registry.load(graph)
    assert str(raised.value) == ("the graph store needs tenure_no_such_driver: install "
                                 "tenure[graph] (pip install 'tenure[graph]')")
    with pytest.raises(ModuleNotFoundError) as bug:  # not a driver: a module of its own
        async_registry.load(async_registry.Entry("broken", ("broken",), "", extra="graph"))
    assert not isinstance(bug.value, tenure.MissingExtra)
