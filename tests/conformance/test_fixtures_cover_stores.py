"""Every store module must have a conformance fixture: adding a store = adding a StoreKind."""

from __future__ import annotations

from pathlib import Path

from conftest import STORE_KINDS

import tenure

STORES = Path(tenure.__file__).parent / "_async" / "stores"


def test_every_store_module_has_a_fixture() -> None:
    modules = {path.stem for path in STORES.glob("*.py") if not path.stem.startswith("_")}
    assert modules == {kind.module for kind in STORE_KINDS}
