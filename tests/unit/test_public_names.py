"""The public vocabulary (docs/contributing.md, "Public names"): one meaning per name, one public
path per thing, the Async prefix on classes with a sync twin, one spelling of `stats`,
`summary` and `create_tables`; every old spelling still works for one release and warns; and
`import tenure` loads no jobs engine, OpenTelemetry or cron parser."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest
import sqlalchemy as sa
from mypy import api as mypy_api

import tenure
import tenure.aio
import tenure.claims
import tenure.idempotency
import tenure.jobs
import tenure.outbox
import tenure.queues
from tenure._lazy import module_dir, module_getattr
from tenure.idempotency import Idempotency, IdempotencyStats, PaymentProvider
from tenure.outbox import Inbox, Outbox, OutboxSummary, Relay, RelayStats

PUBLIC = ["tenure", "tenure.aio", "tenure.stores", "tenure.aio.stores", "tenure.jobs",
          "tenure.queues", "tenure.claims", "tenure.idempotency", "tenure.outbox"]
HEAVY = ("tenure.jobs", "opentelemetry", "cronsim")

# (module, old name, where the new name lives): each old spelling, its replacement.
RENAMED = [
    ("tenure", "Message", "tenure:QueueMessage"),
    ("tenure.aio", "Message", "tenure.aio:QueueMessage"),
    ("tenure.aio", "Worker", "tenure.aio:AsyncWorker"),
    ("tenure.queues", "Message", "tenure.queues:QueueMessage"),
    ("tenure.jobs.queues", "Message", "tenure.queues:QueueMessage"),
    ("tenure.jobs.queues", "QueueMessage", "tenure.queues:QueueMessage"),
    ("tenure.jobs.queues", "MessageLost", "tenure.queues:MessageLost"),
    ("tenure.jobs.queues", "MessageSource", "tenure.queues:MessageSource"),
    ("tenure.outbox", "Message", "tenure.outbox:OutboxMessage"),
    ("tenure.outbox", "OutboxStats", "tenure.outbox:OutboxSummary"),
    ("tenure.outbox", "create_table", "tenure.outbox:create_tables"),
    ("tenure.outbox", "stats", "tenure.outbox:summary"),
    ("tenure.exactly_once.claims", "claim", "tenure.claims:claim"),
    ("tenure.exactly_once.claims", "stats", "tenure.claims:stats"),
    ("tenure.exactly_once.idempotency", "Idempotency", "tenure.idempotency:Idempotency"),
    ("tenure.exactly_once.provider", "PaymentProvider", "tenure.idempotency:PaymentProvider"),
    ("tenure.exactly_once.outbox", "Relay", "tenure.outbox:Relay"),
    ("tenure.exactly_once.outbox", "OutboxMessage", "tenure.outbox:OutboxMessage"),
    # old spellings through an old path: one warning, not one per step
    ("tenure.exactly_once.outbox", "Message", "tenure.outbox:OutboxMessage"),
    ("tenure.exactly_once.outbox", "OutboxStats", "tenure.outbox:OutboxSummary"),
    ("tenure.exactly_once.outbox", "create_table", "tenure.outbox:create_tables"),
    ("tenure.exactly_once.outbox", "stats", "tenure.outbox:summary"),
    ("tenure.jobs.queues.azure", "AzureQueue", "tenure.queues:AzureQueue"),
    ("tenure.jobs.queues.postgres", "PostgresQueue", "tenure.queues:PostgresQueue"),
]


def _resolve(target: str) -> object:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("module", "old", "new"), RENAMED,
                         ids=[f"{module}.{old}" for module, old, _ in RENAMED])
def test_an_old_name_warns_at_the_callers_line_and_is_the_new_one(module: str, old: str,
                                                                  new: str) -> None:
    with pytest.warns(DeprecationWarning, match=new.replace(":", r"\.")) as caught:
        value = getattr(importlib.import_module(module), old)
    assert value is _resolve(new)
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_from_import_of_an_old_name_warns_once_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning, match="tenure.QueueMessage") as caught:
        from tenure import Message
    with pytest.warns(DeprecationWarning, match="tenure.aio.AsyncWorker") as caught_aio:
        from tenure.aio import Worker
    assert Message is tenure.QueueMessage and Worker is tenure.aio.AsyncWorker
    for warned in (caught, caught_aio):  # not a second one from the import system's probe
        assert [Path(w.filename).name for w in warned] == [Path(__file__).name]


@pytest.mark.parametrize("module", PUBLIC)
def test_no_old_name_is_in_all(module: str) -> None:
    olds = {old for owner, old, _ in RENAMED if owner == module}
    assert not olds & set(importlib.import_module(module).__all__)


def test_a_name_means_one_thing_across_the_public_modules() -> None:
    meanings: dict[str, dict[str, object]] = {}
    for module in PUBLIC:
        loaded = importlib.import_module(module)
        for name in loaded.__all__:
            meanings.setdefault(name, {})[module] = getattr(loaded, name)
    for name, where in meanings.items():
        values = list(where.values())
        if all(value is values[0] for value in values):
            continue
        # The one exception: a function of a sync module and of its async twin module (the
        # module path says which), e.g. tenure.connect and tenure.aio.connect.
        assert set(where) <= {"tenure", "tenure.aio"} or set(where) <= {
            "tenure.stores", "tenure.aio.stores"}, (name, sorted(where))
        assert all(inspect.isfunction(value) for value in values), (name, sorted(where))


def test_an_async_class_with_a_sync_twin_has_the_async_prefix() -> None:
    for name in tenure.aio.__all__:
        value = getattr(tenure.aio, name)
        if not inspect.isclass(value):
            continue
        if name.startswith("Async"):
            twin = name.removeprefix("Async")
            assert getattr(tenure, twin, None) is not value, name
        else:  # one name only for a class both APIs share
            assert getattr(tenure, name) is value, f"tenure.aio.{name} is not tenure.{name}"
    assert tenure.aio.AsyncWorker is tenure.jobs.AsyncWorker
    assert tenure.Worker is tenure.jobs.Worker


@pytest.mark.parametrize("package", ["tenure.exactly_once", "tenure.jobs.queues"])
def test_implementation_packages_publish_nothing(package: str) -> None:
    """Their things have one public path (tenure.claims, tenure.queues, ...); the only names
    they list are old ones, kept for one release (they warn)."""
    loaded = importlib.import_module(package)
    assert set(getattr(loaded, "__all__", [])) <= {old for owner, old, _ in RENAMED
                                                   if owner == package}
    assert not [name for name, value in vars(loaded).items()
                if not name.startswith("_") and not inspect.ismodule(value)]


@pytest.mark.parametrize("statement", ["import tenure", "import tenure.aio"])
def test_importing_tenure_loads_no_jobs_engine_opentelemetry_or_cron(statement: str) -> None:
    code = (f"{statement}\nimport json, sys\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert json.loads(result.stdout) == []


def test_lazy_names_load_on_first_use() -> None:
    code = ("import sys, tenure\nassert 'tenure.jobs' not in sys.modules\n"
            "worker_class = tenure.Worker\nassert 'tenure.jobs' in sys.modules\n"
            "print(worker_class.__name__)")
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "Worker"


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_create_tables_is_one_spelling_and_create_table_still_works(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'new.db'}")
    Idempotency(engine).create_tables()
    PaymentProvider(engine).create_tables()
    Outbox().create_tables(engine)
    Inbox().create_tables(engine)
    with engine.begin() as conn:  # a Connection works as well as an Engine
        Idempotency(engine, table_name="keys_in_tx").create_tables(conn)
    assert _tables(engine) == {"tenure_idempotency_keys", "provider_charges", "provider_keys",
                               "tenure_outbox", "tenure_inbox", "keys_in_tx"}

    old = sa.create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.create_tables\(\)"):
        Idempotency(old).create_table()
    with pytest.warns(DeprecationWarning, match=r"Outbox\.create_tables\(\)"):
        Outbox().create_table(old)
    with pytest.warns(DeprecationWarning, match=r"Inbox\.create_tables\(\)"):
        Inbox().create_table(old)
    with pytest.warns(DeprecationWarning, match=r"tenure\.outbox\.create_tables"):
        tenure.outbox.create_table(old)
    assert _tables(old) == {"tenure_idempotency_keys", "tenure_outbox", "tenure_inbox"}


def test_summary_queries_the_outbox_and_stats_still_answers(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'outbox.db'}")
    tenure.outbox.create_tables(engine)
    with engine.begin() as conn:
        tenure.outbox.add(conn, "invoice.paid", {"invoice": 7})
    summary = tenure.outbox.summary(engine)
    assert isinstance(summary, OutboxSummary)
    assert (summary.pending, summary.delivered, summary.dead) == (1, 0, 0)
    assert tenure.outbox.DEFAULT.summary(engine).pending == 1
    with pytest.warns(DeprecationWarning, match=r"Outbox\.summary\(\)"):
        assert tenure.outbox.DEFAULT.stats(engine).pending == 1
    with pytest.warns(DeprecationWarning, match=r"tenure\.outbox\.summary"):
        assert tenure.outbox.stats(engine).pending == 1


def test_stats_is_a_call_returning_this_process_counters(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'keys.db'}")
    idem = Idempotency(engine)
    idem.create_tables()
    idem.run("order-1", lambda step: {"ok": True})
    idem.run("order-1", lambda step: {"ok": True})
    assert idem.stats() == IdempotencyStats(new=1, replayed=1)
    assert isinstance(tenure.claims.stats(), tenure.claims.ClaimStats)

    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)\.replayed"):
        assert idem.stats.replayed == 1
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)"):
        assert idem.stats == IdempotencyStats(new=1, replayed=1)
    with pytest.raises(AttributeError):
        idem.stats.nonexistent  # noqa: B018


def test_relay_stats_is_a_snapshot_and_counts_still_answers(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'relay.db'}")
    tenure.outbox.create_tables(engine)
    with engine.begin() as conn:
        tenure.outbox.add(conn, "invoice.paid", {"invoice": 7})
    delivered: list[str] = []
    relay = Relay(engine, handler=lambda message: delivered.append(message.topic))
    relay.run_once()
    snapshot = relay.stats()
    assert snapshot == RelayStats(delivered=1) and delivered == ["invoice.paid"]
    with pytest.raises(AttributeError):  # a snapshot: frozen
        snapshot.delivered = 5  # type: ignore[misc]
    with pytest.warns(DeprecationWarning, match=r"Relay\.stats\(\)"):
        assert relay.counts.delivered == 1


def test_importing_the_package_reads_no_old_name() -> None:
    """With DeprecationWarning as an error, every public module, the demo, chaos and the CLI
    import cleanly: none of them reads an old name at import."""
    modules = [*PUBLIC, "tenure.demo", "tenure.chaos", "tenure.cli"]
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# A QueueMessage pickled by tenure before the rename (class tenure.jobs.queues._source.Message),
# made with the release before commit abc9b55.
_OLD_PICKLED_MESSAGE = (
    b'\x80\x04\x95\xcb\x00\x00\x00\x00\x00\x00\x00\x8c\x1atenure.jobs.queues._source\x94\x8c\x07'
    b'Message\x94\x93\x94)\x81\x94N}\x94(\x8c\x05_body\x94\x8c\x08builtins\x94\x8c\x06object\x94'
    b'\x93\x94)\x81\x94\x8c\x0c_stop_reason\x94N\x8c\rdequeue_count\x94K\x02\x8c\x02id\x94\x8c'
    b'\x02a1\x94\x8c\x05lease\x94N\x8c\x07receipt\x94\x8c\x03r-1\x94\x8c\tscope_key\x94\x8c\x017'
    b'\x94\x8c\x04text\x94\x8c\x16{"Invoice": {"Id": 7}}\x94u\x86\x94b.')


def test_a_queue_message_pickled_before_the_rename_unpickles() -> None:
    message = pickle.loads(_OLD_PICKLED_MESSAGE)
    assert isinstance(message, tenure.queues.QueueMessage)
    assert (message.id, message.text, message.dequeue_count, message.receipt,
            message.scope_key) == ("a1", '{"Invoice": {"Id": 7}}', 2, "r-1", "7")
    assert message.body == {"Invoice": {"Id": 7}}


def test_old_idem_stats_is_the_snapshot_taken_when_read(tmp_path: Path) -> None:
    """`idem.stats` without the call, the old property, kept its snapshot semantics: a value
    read before the work compares to one read after, and it is a frozen dataclass."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'keys.db'}")
    idem = Idempotency(engine)
    idem.create_tables()
    idem.run("order-1", lambda step: {"ok": True})
    before = idem.stats
    idem.run("order-2", lambda step: {"ok": True})
    after = idem.stats
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)\.new"):
        assert after.new - before.new == 1
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)"):
        assert before == IdempotencyStats(new=1) and before != after
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)"):
        assert dataclasses.asdict(before) == dataclasses.asdict(IdempotencyStats(new=1))
    with pytest.warns(DeprecationWarning, match=r"Idempotency\.stats\(\)"):
        assert hash(before) == hash(IdempotencyStats(new=1))
    assert isinstance(before, IdempotencyStats) and dataclasses.is_dataclass(before)
    assert pickle.loads(pickle.dumps(before)) == IdempotencyStats(new=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.new = 5  # type: ignore[misc]
    # The new spelling: a plain snapshot of now, no warning.
    assert type(idem.stats()) is IdempotencyStats and idem.stats() == IdempotencyStats(new=2)


def test_relay_counts_is_the_old_mutable_class_for_one_release(tmp_path: Path) -> None:
    """Old code comparing, checking, mutating or assigning `relay.counts` keeps working (and
    warns); `relay.stats()` reads the same counters."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'relay.db'}")
    tenure.outbox.create_tables(engine)
    with engine.begin() as conn:
        tenure.outbox.add(conn, "invoice.paid", {"invoice": 7})
    relay = Relay(engine, handler=lambda message: None)
    relay.run_once()
    with pytest.warns(DeprecationWarning, match=r"tenure\.outbox\.RelayStats") as caught:
        RelayCounts = tenure.outbox.RelayCounts
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]
    with pytest.warns(DeprecationWarning, match=r"Relay\.stats\(\)"):
        counts = relay.counts
    assert isinstance(counts, RelayCounts) and counts == RelayCounts(delivered=1)
    counts.errors += 1  # mutable, as it was
    assert relay.stats() == RelayStats(delivered=1, errors=1)
    with pytest.warns(DeprecationWarning, match=r"Relay\.stats\(\)"):
        relay.counts = RelayCounts()
    assert relay.stats() == RelayStats()
    with pytest.warns(DeprecationWarning, match=r"tenure\.outbox\.RelayStats") as caught:
        from tenure.exactly_once.outbox import RelayCounts as OldPath
    assert OldPath is RelayCounts and len(caught) == 1


# Each deprecated module path and the public names the module had before it moved.
OLD_PATHS = {
    "tenure.exactly_once.claims": [
        "CLAIM_COLUMNS", "Claim", "ClaimStats", "DONE", "PENDING", "PROCESSING", "claim",
        "claim_columns", "complete", "migration_ddl", "pending_or_stale", "release",
        "reset_stats", "stats"],
    "tenure.exactly_once.idempotency": [
        "DEFAULT_RETENTION", "FINISHED", "Idempotency", "IdempotencyError", "IdempotencyStats",
        "KeyInProgress", "KeyLockLost", "RUNNING", "RequestMismatch", "STARTED", "Step",
        "fingerprint"],
    "tenure.exactly_once.outbox": [
        "DEAD", "DEFAULT", "DELIVERED", "DeadLetter", "Inbox", "MAX_ERROR_CHARS", "Message",
        "Outbox", "OutboxStats", "PENDING", "Relay", "RelayCounts", "add", "create_table",
        "stats"],
    "tenure.exactly_once.provider": [
        "Charge", "PaymentProvider", "ProviderError", "ProviderSummary", "ProviderTimeout"],
    "tenure.jobs.queues": ["Message", "MessageLost", "MessageSource"],
    "tenure.jobs.queues.azure": ["AzureQueue", "MAX_ENVELOPE", "MAX_VISIBILITY",
                                 "POISON_SUFFIX"],
    "tenure.jobs.queues.postgres": ["MAX_QUEUE_NAME", "POISON_SUFFIX", "PostgresQueue"],
}


@pytest.mark.parametrize("module", sorted(OLD_PATHS))
def test_a_star_import_of_an_old_path_binds_its_old_names_and_warns_once(module: str) -> None:
    assert sorted(importlib.import_module(module).__all__) == sorted(OLD_PATHS[module])
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match=r"instead of `from .* import \*`") as caught:
        exec(f"from {module} import *", namespace)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert sorted(name for name in namespace if not name.startswith("__")) == sorted(
        OLD_PATHS[module])
    with pytest.warns(DeprecationWarning):
        expected = {name: getattr(importlib.import_module(module), name)
                    for name in OLD_PATHS[module]}
    assert all(namespace[name] is value for name, value in expected.items())


def test_old_paths_type_check_as_the_real_names(tmp_path: Path) -> None:
    """User code on an old path passes mypy --strict: the deprecation is a run-time warning."""
    lines = ["import sqlalchemy as sa"]
    for index, (module, names) in enumerate(sorted(OLD_PATHS.items())):
        lines.append(f"import {module} as old{index}")
        lines += [f"reveal_type(old{index}.{name})" for name in names]
    lines += [
        "from tenure.exactly_once.idempotency import Idempotency, IdempotencyStats",
        "from tenure.exactly_once.outbox import Message, Relay, RelayCounts",
        "from tenure.jobs.queues import Message as QueueMessage",
        "from tenure.jobs.queues.postgres import PostgresQueue",
        "def handle(message: Message) -> None:",
        "    print(message.topic)",
        "def on(message: QueueMessage) -> str:",
        "    return message.text",
        "engine = sa.create_engine('sqlite://')",
        "snapshot: IdempotencyStats = Idempotency(engine).stats()",
        "counts: RelayCounts = Relay(engine, handler=handle).counts",
        "queue: PostgresQueue = PostgresQueue('jobs', 'dbname=app')",
    ]
    snippet = tmp_path / "old_paths.py"
    snippet.write_text("\n".join(lines) + "\n")
    out, err, status = mypy_api.run(["--strict", "--cache-dir", str(tmp_path / "cache"),
                                     "--no-error-summary", str(snippet)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors == [] and status == 0, out + err
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == sum(len(names) for names in OLD_PATHS.values())
    assert not [line for line in revealed if '"builtins.object"' in line], out


def test_module_dir_lists_the_lazy_names() -> None:
    name = "tenure_test_lazy_dir"
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        module.__getattr__ = module_getattr(  # type: ignore[method-assign]
            name, lazy={"decoder": "json:JSONDecoder"}, deprecated={"Decoder": "decoder"})
        module.__dir__ = module_dir(name)  # type: ignore[method-assign]
        module.loaded = 1  # type: ignore[attr-defined]
        listed = dir(module)
        assert "decoder" in listed and "loaded" in listed and "Decoder" not in listed
        assert "decoder" not in vars(module)  # listing loads nothing
    finally:
        del sys.modules[name]


def test_dir_lists_the_lazy_names_and_not_the_deprecated_ones() -> None:
    import tenure.aio

    names = dir(tenure)
    assert {"Worker", "Run", "QueueMessage", "stores", "queues", "claims"} <= set(names)
    assert "Message" not in names
    assert "AsyncWorker" in dir(tenure.aio) and "Worker" not in dir(tenure.aio)
    for module in (tenure, tenure.aio):  # not the names a module imported for itself
        assert not {"TYPE_CHECKING", "module_dir", "module_getattr"} & set(dir(module))


@pytest.mark.parametrize("module_name", ["tenure.stores", "tenure.aio.stores"])
def test_dir_of_the_stores_modules_is_their_all(module_name: str) -> None:
    """The store classes loaded on first use are listed before it, and the modules' helpers
    (typing's names, the lazy machinery) are not: the public names of dir() are __all__."""
    code = (f"import json, {module_name} as m; print(json.dumps([dir(m), m.__all__, "
            "sorted(vars(m))]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    listed, public, loaded = json.loads(result.stdout)
    assert {name for name in listed if not name.startswith("_")} == set(public)
    assert {"RedisStore", "PostgresStore", "MySQLStore", "AzureBlobStore",
            "RedisQuorumStore"} <= {name.removeprefix("Async") for name in public
                                    if name not in loaded}  # listed, yet not imported


def test_capabilities_read_by_nothing_warn_and_the_stores_pass_none() -> None:
    from tenure.stores import Capabilities

    with pytest.warns(DeprecationWarning, match="batched_renewal"):
        Capabilities(min_ttl=1.0, max_ttl=2.0, batched_renewal=True)
    stores = ", ".join(f"tenure._{api}.stores.{module}" for api in ("sync", "async")
                       for module in ("memory", "sqlite", "file", "azblob", "redis", "postgres",
                                      "mysql"))
    imported = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                               f"import {stores}"], capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
