"""The "adding a store" recipe (docs/contributing.md), checked: every store module has a
registry entry (stores/_registry.py), a conformance fixture (a StoreKind in conftest.py) and a
docs page (docs/stores/<name>.md) with the sections every store's page has; and every registry
entry has a module. A store module is a module or a package under tenure/_async/stores/ whose
name does not start with '_'."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import STORE_KINDS

import tenure
from tenure._async.stores import _registry

STORES = Path(tenure.__file__).parent / "_async" / "stores"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "stores"
# The sections every store's page has, in this order (others may come between them).
SECTIONS = ["URL and options", "Guarantees", "Clocks", "Errors: what is retried and what is not",
            "Implementation notes"]


def store_modules() -> set[str]:
    """The store modules on disk: modules, and packages (a folder with __init__.py)."""
    found = {path.stem for path in STORES.glob("*.py")}
    found |= {path.parent.name for path in STORES.glob("*/__init__.py")}
    return {name for name in found if not name.startswith("_")}


def test_every_store_module_has_a_registry_entry_and_every_entry_a_module() -> None:
    assert store_modules() == {entry.module for entry in _registry.STORES}


def test_every_store_module_has_a_fixture() -> None:
    assert store_modules() == {kind.module for kind in STORE_KINDS}


@pytest.mark.parametrize("entry", _registry.STORES, ids=lambda entry: entry.module)
def test_every_store_has_a_docs_page_with_the_common_sections(entry: _registry.Entry) -> None:
    page = DOCS / f"{entry.docs}.md"
    assert page.is_file(), f"{entry.module}: no docs page {page.name} in docs/stores/"
    headings = re.findall(r"^## (.+?)\s*$", page.read_text(), flags=re.MULTILINE)
    common = [heading for heading in headings if heading in SECTIONS]
    assert common == SECTIONS, f"{page.name}: sections {headings}"
