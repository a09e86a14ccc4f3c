"""Names a public module serves on first use: lazily imported ones (so `import tenure` loads no
jobs engine, OpenTelemetry or cron parser) and deprecated old spellings that warn and forward
to their new name. The rules behind the names are in docs/contributing.md ("Public names").

Example::

    __getattr__ = module_getattr(__name__, lazy={"Worker": "tenure.jobs:Worker"},
                                 deprecated={"Message": "QueueMessage"})
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping

# Deprecated names stay importable for one release after their replacement is published.
REMOVAL = "the next release"


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that `old` is a deprecated spelling of `new` (both as the caller would write them).

    `stacklevel` 3 points at the caller of the function that calls this one.

    Example::

        def create_table(self) -> None:
            warn_renamed("Idempotency.create_table()", "Idempotency.create_tables()")
            self.create_tables()
    """
    warnings.warn(f"{old} is deprecated and will be removed in {REMOVAL}: use {new}",
                  DeprecationWarning, stacklevel=stacklevel)


def _load(target: str) -> object:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def module_getattr(module_name: str, *, lazy: Mapping[str, str] | None = None,
                   deprecated: Mapping[str, str] | None = None) -> Callable[[str], object]:
    """A module `__getattr__` (PEP 562) that serves `lazy` names and warns on `deprecated` ones.

    `lazy` maps a name to "module:attribute" (or "module" for a submodule), imported on first
    access and then kept in the module's globals. `deprecated` maps an old name to the new name
    in the same module (or to "module:attribute" elsewhere); each access warns with
    DeprecationWarning at the caller's line and returns the new name's object.

    Example::

        __getattr__ = module_getattr(__name__, lazy={"stores": "tenure.stores"})
    """
    lazy = dict(lazy or {})
    deprecated = dict(deprecated or {})

    def __getattr__(name: str) -> object:
        if name in deprecated:
            new = deprecated[name]
            spelled = new.replace(":", ".") if ":" in new else f"{module_name}.{new}"
            warnings.warn(f"{module_name}.{name} is deprecated and will be removed in {REMOVAL}:"
                          f" use {spelled}", DeprecationWarning, stacklevel=2)
            return _load(new) if ":" in new else getattr(sys.modules[module_name], new)
        if name in lazy:
            value = _load(lazy[name])
            setattr(sys.modules[module_name], name, value)
            return value
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__


def moved_module(old_name: str, new_name: str, implementation: str) -> Callable[[str], object]:
    """A module `__getattr__` for a deprecated module path: every name read through `old_name`
    warns and comes from `new_name` (or, for a private helper, from `implementation`).

    Example::

        __getattr__ = moved_module(__name__, "tenure.claims", "tenure.exactly_once._claims")
    """

    def __getattr__(name: str) -> object:
        if name.startswith("__"):  # the import system's probes (__path__, ...), not a user's
            raise AttributeError(f"module {old_name!r} has no attribute {name!r}")
        warnings.warn(f"the module {old_name} is deprecated and will be removed in {REMOVAL}: "
                      f"import {new_name} (here: {new_name}.{name})", DeprecationWarning,
                      stacklevel=2)
        new = importlib.import_module(new_name)
        if name in getattr(new, "__all__", ()):
            return getattr(new, name)
        private = importlib.import_module(implementation)
        if hasattr(private, name):
            return getattr(private, name)
        return getattr(new, name)  # an old spelling the new module still serves, or an error

    return __getattr__
