"""Checks, at registration, that a job, a handler or a callback can be called the way the
worker will call it, so a wrong signature fails at the decorator instead of being logged as a
TypeError every period; and, at run time, that what a sync function returned is not work left
undone (a coroutine or a generator whose body never ran).

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

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from tenure._errors import InvalidArgumentType


def check_callable(function: Callable[..., Any], what: str, arguments: int,
                   example: str) -> None:
    """Raise InvalidArgumentType unless `function` accepts `arguments` positional arguments
    and is no generator (calling one runs none of its body).

    A callable whose signature cannot be read (some builtins) is accepted as it is.

    Example:
        >>> check_callable(lambda: None, "on_elected", 0, "def on_elected() -> None")
    """
    if not callable(function):
        raise InvalidArgumentType(f"{what} must be a function; write it as: {example}")
    if example.startswith("def ") and is_async(function):  # the line to write keeps its async
        example = f"async {example}"
    for code in _codes(function):
        generator = _generator_kind(code)
        if generator is not None:
            raise InvalidArgumentType(
                f"{what} must not be a generator: {code.__qualname__}() is {generator}, so "
                "calling it runs none of its body; remove the yield, or iterate the generator "
                f"inside a plain function; write it as: {example}")
    shown = getattr(function, "__name__", type(function).__name__)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * arguments))
    except TypeError:
        count = {0: "no arguments", 1: "1 argument"}.get(arguments, f"{arguments} arguments")
        raise InvalidArgumentType(
            f"{what} is called with {count}, but {shown}{_parameters(signature)} cannot be "
            f"called that "
            f"way; write it as: {example}") from None


def is_async(function: Callable[..., Any]) -> bool:
    """Whether calling `function` gives a coroutine to await: an async def, a
    functools.partial of one, or an object whose __call__ is one.

    Example:
        >>> async def tick(run): ...
        >>> is_async(functools.partial(tick)), is_async(lambda run: None)
        (True, False)
    """
    return any(inspect.iscoroutinefunction(code) for code in _codes(function))


def refuse_unfinished(result: object, what: str) -> None:
    """Raise TypeError when `result`, what a job, handler or callback returned, is a coroutine
    or a generator: its body never ran. The coroutine is closed (no "never awaited" warning).

    Example:
        >>> async def inner(): ...
        >>> try:
        ...     refuse_unfinished(inner(), "the job")
        ... except TypeError as error:
        ...     print(str(error)[:35])
        the job returned a coroutine, which
    """
    if inspect.iscoroutine(result) or inspect.isgenerator(result):
        result.close()  # never started: closing runs nothing (an async generator needs no close)
    if inspect.iscoroutine(result):  # not any awaitable: a returned Task runs by itself
        raise TypeError(f"{what} returned a coroutine, which nothing awaits: its body did not "
                        "run. Define the function with async def (and await inside it), or "
                        "run the coroutine yourself, e.g. with asyncio.run()")
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        raise TypeError(f"{what} returned a generator, which nothing iterates: its body did "
                        "not run. Remove the yield, or iterate the generator inside the function")


def _codes(function: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """`function` (partials unwrapped) and, for an object that is no function, its __call__."""
    while isinstance(function, functools.partial):
        function = function.func
    yield function
    if not inspect.isroutine(function) and not inspect.isclass(function):
        call = getattr(type(function), "__call__", None)  # noqa: B004 - the method itself
        if call is not None:
            yield call


def _generator_kind(code: Callable[..., Any]) -> str | None:
    if inspect.isasyncgenfunction(code):
        return "an async generator function (an async def with yield)"
    if inspect.isgeneratorfunction(code):
        return "a generator function (a def with yield)"
    return None


def _parameters(signature: inspect.Signature) -> str:
    return str(signature.replace(return_annotation=inspect.Signature.empty))
