"""The core's modules depend on each other in one direction: store -> lock -> lease, with the
monitor beside them. No import cycle, not even one seen only by the type checker (an import
under TYPE_CHECKING): a lease is given what it needs, it does not reach back into its lock."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "src" / "tenure" / "_async"
MODULES = ["_lease", "_lock", "_monitor", "_store"]


def core_imports(module: str) -> set[str]:
    """The core modules (of MODULES) that `module` imports, at run time or for typing only."""
    tree = ast.parse((CORE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(name.rsplit(".", 1)[-1] for name in names
                     if name.startswith("tenure._async.") and name.count(".") == 2)
    return found & set(MODULES) - {module}


def cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start in `graph`, if there is one."""
    paths = [[start]]
    while paths:
        path = paths.pop()
        for following in sorted(graph[path[-1]]):
            if following == start:
                return [*path, start]
            if following not in path:
                paths.append([*path, following])
    return None


def test_the_core_modules_import_each_other_without_a_cycle() -> None:
    graph = {module: core_imports(module) for module in MODULES}
    assert graph["_lease"] == set(), "a lease is given its lock's terms, it imports no lock"
    cycles = [cycle for module in MODULES if (cycle := cycle_through(module, graph))]
    assert cycles == [], " ; ".join(" -> ".join(cycle) for cycle in cycles)


@pytest.mark.parametrize("package", ["_async", "_sync"])
@pytest.mark.parametrize("module", MODULES)
def test_each_core_module_imports_alone(package: str, module: str) -> None:
    """In a fresh interpreter, first of all tenure's modules (an import cycle shows up as an
    ImportError or AttributeError of a partly initialised module)."""
    result = subprocess.run([sys.executable, "-c", f"import tenure.{package}.{module}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
