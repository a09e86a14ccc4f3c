"""Names a public module serves on first use: lazily imported ones (so `import tenure` loads no
jobs engine, OpenTelemetry or cron parser) and deprecated old spellings that warn and forward
to their new name. The rules behind the names are in docs/contributing.md ("Public names").

Example::

    __getattr__ = module_getattr(__name__, lazy={"Worker": "tenure.jobs:Worker"},
                                 deprecated={"Message": "QueueMessage"})
    __dir__ = module_dir(__name__)
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import FrameType

# Deprecated names stay importable for one release after their replacement is published.
REMOVAL = "the next release"

# module name -> its lazy names, for its __dir__
_LAZY: dict[str, frozenset[str]] = {}
# module name -> old name -> (where the object served lives, "module:attribute"; what to use)
_DEPRECATED: dict[str, dict[str, tuple[str, str]]] = {}


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


def _in_star_import(frame: FrameType) -> bool:
    """Whether `frame` is executing `from module import *` (which reads each name of the
    module's __all__ in turn): IMPORT_STAR up to Python 3.11, CALL_INTRINSIC_1 with
    INTRINSIC_IMPORT_STAR (2) since 3.12. False when unsure: each name then warns."""
    import opcode

    code = frame.f_code.co_code
    if not 0 <= frame.f_lasti < len(code) - 1:
        return False
    op, arg = code[frame.f_lasti], code[frame.f_lasti + 1]
    if "IMPORT_STAR" in opcode.opmap:
        return op == opcode.opmap["IMPORT_STAR"]
    return op == opcode.opmap.get("CALL_INTRINSIC_1") and arg == 2


def _message(module_name: str, name: str, caller: FrameType, home: str,
             single: str) -> str | None:
    """The warning for the caller's read of an old `name`: `single`, except in a star import
    of the module, which warns once (on the first name of __all__; None for the others) and
    points at `home`, the module to import from instead. None for the import system's probe
    of a package's names (`from package import name` reads `name` again right after, at the
    user's line)."""
    if caller.f_code.co_name == "_handle_fromlist" and caller.f_globals.get(
            "__name__") == "importlib._bootstrap":
        return None
    if not _in_star_import(caller):
        return single
    names = getattr(sys.modules[module_name], "__all__", ())
    if names and name != names[0]:
        return None
    return (f"the module {module_name} is deprecated and will be removed in {REMOVAL}: "
            f"import from {home} instead of `from {module_name} import *`")


def module_getattr(module_name: str, *, lazy: Mapping[str, str] | None = None,
                   deprecated: Mapping[str, str] | None = None,
                   retired: Mapping[str, tuple[str, str]] | None = None,
                   ) -> Callable[[str], object]:
    """A module `__getattr__` (PEP 562) that serves `lazy` names and warns on old ones.

    `lazy` maps a name to "module:attribute" (or "module" for a submodule), imported on first
    access and then kept in the module's globals. `deprecated` maps an old name to the new name
    in the same module (or to "module:attribute" elsewhere); each access warns with
    DeprecationWarning at the caller's line and returns the new name's object. `retired` maps
    an old name whose object is not the new one (a class kept as it was for one release) to
    ("module:attribute" of that object, what to use instead); it warns the same way.

    Example::

        __getattr__ = module_getattr(__name__, lazy={"stores": "tenure.stores"},
                                     retired={"RelayCounts": ("tenure.exactly_once._outbox:"
                                              "RelayCounts", "relay.stats(), a RelayStats")})
    """
    lazy = dict(lazy or {})
    olds: dict[str, tuple[str, str]] = {}
    for old, new in (deprecated or {}).items():
        target = new if ":" in new else f"{module_name}:{new}"
        olds[old] = (target, target.replace(":", "."))
    olds.update(retired or {})
    _LAZY[module_name] = frozenset(lazy)
    _DEPRECATED[module_name] = olds

    def __getattr__(name: str) -> object:
        if name in olds:
            target, use = olds[name]
            message = _message(module_name, name, sys._getframe(1), target.partition(":")[0],
                               f"{module_name}.{name} is deprecated and will be removed in "
                               f"{REMOVAL}: use {use}")
            if message is not None:
                warnings.warn(message, DeprecationWarning, stacklevel=2)
            return _load(target)
        if name in lazy:
            value = _load(lazy[name])
            setattr(sys.modules[module_name], name, value)
            return value
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__


def module_dir(module_name: str) -> Callable[[], Iterable[str]]:
    """A module `__dir__` (PEP 562) that lists its lazy names (those of its `module_getattr`)
    next to the ones already loaded, so `dir(tenure)` shows `Worker` before its first use.
    Deprecated names are left out.

    Example::

        __getattr__ = module_getattr(__name__, lazy={"stores": "tenure.stores"})
        __dir__ = module_dir(__name__)
    """

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[module_name])
        public = set(namespace.get("__all__", namespace))
        # What the module offers: its __all__, its lazy names, its subpackages; not the names
        # it imported for itself (TYPE_CHECKING, this very helper).
        shown = {name for name, value in namespace.items()
                 if name.startswith("_") or name in public or (
                     isinstance(value, types.ModuleType)
                     and value.__name__.startswith(f"{module_name}."))}
        return sorted(shown | _LAZY.get(module_name, frozenset()))

    return __dir__


def moved_module(old_name: str, new_name: str, implementation: str) -> Callable[[str], object]:
    """A module `__getattr__` for a deprecated module path: every name read through `old_name`
    warns once, at the caller's line, and comes from `new_name` (an old spelling `new_name`
    deprecates too from what that spelling serves; a private helper from `implementation`).
    A star import of `old_name` (its `__all__`) warns once.

    Example::

        __getattr__ = moved_module(__name__, "tenure.claims", "tenure.exactly_once._claims")
    """

    def __getattr__(name: str) -> object:
        if name.startswith("__"):  # the import system's probes (__path__, ...), not a user's
            raise AttributeError(f"module {old_name!r} has no attribute {name!r}")
        new = importlib.import_module(new_name)
        old_there = _DEPRECATED.get(new_name, {}).get(name)
        here = old_there[1] if old_there else f"{new_name}.{name}"
        message = _message(old_name, name, sys._getframe(1), new_name,
                           f"the module {old_name} is deprecated and will be removed in "
                           f"{REMOVAL}: import {new_name} (here: {here})")
        if message is not None:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
        if name in getattr(new, "__all__", ()):
            return getattr(new, name)
        if old_there:  # served without the new module's own warning: one per use
            return _load(old_there[0])
        private = importlib.import_module(implementation)
        if hasattr(private, name):
            return getattr(private, name)
        return getattr(new, name)  # a name the new module still serves, or an error

    return __getattr__
