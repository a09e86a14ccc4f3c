"""Checks, at registration, that a job, a handler or a callback can be called the way the
worker will call it, so a wrong signature fails at the decorator instead of being logged as a
TypeError every period.

Example:
    >>> def tick(run): ...
    >>> check_callable(tick, "a job", 1, "def tick(run: tenure.Run) -> None")
    >>> def no_arguments(): ...
    >>> try:
    ...     check_callable(no_arguments, "a job", 1, "def tick(run: tenure.Run) -> None")
    ... except TypeError as error:
    ...     print(error)
    a job is called with 1 argument, but no_arguments() cannot be called that way; write it \
as: def tick(run: tenure.Run) -> None
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from tenure._errors import InvalidArgumentType


def check_callable(function: Callable[..., Any], what: str, arguments: int,
                   example: str) -> None:
    """Raise InvalidArgumentType unless `function` accepts `arguments` positional arguments.

    A callable whose signature cannot be read (some builtins) is accepted as it is.

    Example:
        >>> check_callable(lambda: None, "on_elected", 0, "def on_elected() -> None")
    """
    if not callable(function):
        raise InvalidArgumentType(f"{what} must be a function; write it as: {example}")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * arguments))
    except TypeError:
        count = {0: "no arguments", 1: "1 argument"}.get(arguments, f"{arguments} arguments")
        shown = getattr(function, "__name__", type(function).__name__)
        raise InvalidArgumentType(
            f"{what} is called with {count}, but {shown}{_parameters(signature)} cannot be "
            f"called that "
            f"way; write it as: {example}") from None


def _parameters(signature: inspect.Signature) -> str:
    return str(signature.replace(return_annotation=inspect.Signature.empty))
