"""The `>>>` examples of every module under src/tenure run here, one test per module.

A module is found by its source containing `>>>`, without importing anything at collection.
Each test also checks that doctest found as many examples as the file has `>>>` lines, so an
example doctest cannot see (in a nested function, say) is not silently left out.
A module whose examples need a server would be listed in NEEDS_SERVER with the reason (none
does today: the store modules' examples are pure key and statement builders).

The `Example::` blocks (most docstrings' examples: fragments that need a store) cannot run, but
each must be valid Python read as the body of an async function (so `await` and `return` are
fine): a renamed keyword or an unbalanced bracket shows here. Blocks of shell commands (`$ `)
are left out.

Example::

    .venv/bin/python -m pytest -q tests/unit/test_doctests.py -k _timing
"""

from __future__ import annotations

import ast
import doctest
import importlib
import io
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# module -> why its examples cannot run without a server the suite starts
NEEDS_SERVER: dict[str, str] = {}

# module -> the defect, reported; strict: the test fails once it is fixed, to drop the entry
KNOWN_BROKEN: dict[str, str] = {}


def modules_with_examples() -> list[str]:
    found = []
    for path in sorted((SRC / "tenure").rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(SRC).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = modules_with_examples()


def params() -> list[object]:
    marks = {name: pytest.mark.xfail(reason=reason, strict=True)
             for name, reason in KNOWN_BROKEN.items()}
    marks.update({name: pytest.mark.skip(reason=f"needs a server: {reason}")
                  for name, reason in NEEDS_SERVER.items()})
    return [pytest.param(name, marks=marks[name]) if name in marks else name
            for name in MODULES]


def test_the_lists_name_modules_with_examples() -> None:
    assert len(MODULES) >= 30  # a sanity floor: the discovery works
    assert set(NEEDS_SERVER) | set(KNOWN_BROKEN) <= set(MODULES)


@pytest.mark.parametrize("module_name", params())
def test_doctests(module_name: str) -> None:
    module = importlib.import_module(module_name)
    tests = [test for test in doctest.DocTestFinder().find(module) if test.examples]
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    prompts = sum(line.lstrip().startswith(">>>") for line in source.splitlines())
    assert sum(len(test.examples) for test in tests) == prompts, (
        f"{module_name} has {prompts} `>>>` lines but doctest finds "
        f"{sum(len(test.examples) for test in tests)} examples")
    runner = doctest.DocTestRunner()
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def example_blocks(path: Path) -> list[tuple[int, str]]:
    """(line of the docstring's owner, code) of every `::` literal block in the file's
    docstrings, except shell commands and doctests."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
            continue
        lines = (ast.get_docstring(node) or "").splitlines()
        for index, text in enumerate(lines):
            if not text.rstrip().endswith("::"):
                continue
            body = []
            for line in lines[index + 1:]:
                if line.strip() and not line.startswith(" "):
                    break
                body.append(line)
            code = textwrap.dedent("\n".join(body)).strip("\n")
            if code and not code.startswith(("$ ", ">>>")):
                found.append((getattr(node, "lineno", 1), code))
    return found


def test_every_example_block_is_python() -> None:
    broken, count = [], 0
    for path in sorted((SRC / "tenure").rglob("*.py")):
        for line, code in example_blocks(path):
            count += 1
            try:
                compile("async def example():\n" + textwrap.indent(code, "    ") + "\n    pass\n",
                        f"{path.relative_to(SRC)}:{line}", "exec")
            except SyntaxError as error:
                broken.append(f"{path.relative_to(SRC)}:{line}: {error.msg}\n{code}")
    assert count >= 200  # a sanity floor: the blocks are found
    assert broken == []
