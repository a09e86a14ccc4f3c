"""Store options, checked the same way for every store before any I/O: the unknown ones
refused with one wording, and booleans, numbers, counts and SQL identifiers read from the
URL's query (text) or from keywords (Python values).

Example:
    >>> options = merged({"timeout": "2"}, {"table": "app_leases"})
    >>> as_number("timeout", options["timeout"], 0.1, 600.0)
    2.0
    >>> as_identifier("table", options["table"], 64)
    'app_leases'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from tenure._errors import InvalidArgument, InvalidArgumentType

T = TypeVar("T")

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A SQL identifier that needs no quoting: ASCII letters, digits and underscores, not starting
with a digit (each store also caps its length)."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def refuse_unknown(given: Iterable[str], accepted: Iterable[str], store: str,
                   note: str = "") -> None:
    """Raise InvalidArgument naming the options of `given` that `store` does not take, in the
    one wording of every store: the options, the kind of store, the accepted ones.

    `store` says which stores, e.g. "sqlite:// stores"; `note` adds what the reader needs
    (e.g. where a driver's own parameters go).

    Example:
        >>> refuse_unknown(["table"], ["table", "timeout"], "mysql:// stores")
        >>> refuse_unknown(["fsync"], [], "file:// stores")
        Traceback (most recent call last):
        ...
        tenure.InvalidArgument: unknown option 'fsync' for file:// stores; accepted: none
    """
    allowed = list(accepted)
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise InvalidArgument(
            f"unknown option{'s' if len(unknown) > 1 else ''} {names} for {store}; accepted: "
            f"{', '.join(allowed) or 'none'}{f' ({note})' if note else ''}")


def only(options: dict[str, T], *accepted: str, store: str) -> dict[str, T]:
    """`options` itself, once refuse_unknown found none that `store` does not take.

    Example:
        >>> only({"synchronous": "full"}, "synchronous", store="sqlite:// stores")
        {'synchronous': 'full'}
    """
    refuse_unknown(options, accepted, store)
    return options


def merged(in_url: Mapping[str, T], keywords: Mapping[str, T]) -> dict[str, T]:
    """The options given in the URL's query and as keywords; one given both ways must agree
    (compared as text, case-insensitively: the URL's are text).

    Example:
        >>> merged({"synchronous": "FULL"}, {"synchronous": "full", "timeout": 2})
        {'synchronous': 'full', 'timeout': 2}
    """
    for name in sorted(set(in_url) & set(keywords)):
        if str(keywords[name]).lower() != str(in_url[name]).lower():
            raise InvalidArgument(f"{name} is {in_url[name]!r} in the URL but {keywords[name]!r} "
                                  "as a keyword; give it once")
    return {**in_url, **keywords}


def as_bool(option: str, value: object) -> bool:
    """A boolean option: a bool, or its text (true/false, yes/no, on/off, 1/0).

    Example:
        >>> as_bool("notify", "Yes"), as_bool("notify", False)
        (True, False)
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidArgument(f"{option}={value!r} is not a boolean; use {option}=true or "
                          f"{option}=false")


def as_number(option: str, value: object, low: float, high: float, *, unit: str = "seconds",
              above: bool = False, default: float | None = None, why: str = "") -> float:
    """A number option from `low` to `high` (more than `low` when `above`): an int, a float or
    their text. `unit` and `default` go into the message of a bad value, and so does `why` (what
    the option does, or what a limit means).

    Example:
        >>> as_number("timeout", "2.5", 0.1, 600.0)
        2.5
        >>> try:
        ...     as_number("timeout", 0, 0, 600.0, above=True, default=5)
        ... except InvalidArgument as exc:
        ...     print(exc)
        timeout=0 is out of range: give seconds, more than 0 and at most 600 (default 5)
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidArgumentType(
            f"{option} must be a number of {unit}, got {type(value).__name__}")
    bounds = (f"more than {low:g} and at most {high:g}" if above
              else f"from {low:g} to {high:g}")
    said = (f" (default {default:g})" if default is not None else "") + (
        f"; {why}" if why else "")
    try:
        number = float(value)
    except ValueError:
        raise InvalidArgument(
            f"{option}={value!r} is not a number: give {unit}, {bounds}{said}") from None
    in_range = (low < number if above else low <= number) and number <= high
    if not (math.isfinite(number) and in_range):
        raise InvalidArgument(f"{option}={value!r} is out of range: give {unit}, {bounds}{said}")
    return number


def as_count(option: str, value: object, low: int, high: int, *,
             default: int | None = None) -> int:
    """A whole-number option from `low` to `high`: an int, or its text ("10", "10.0").

    Example:
        >>> as_count("pool_size", "10", 1, 1000)
        10
    """
    number = as_number(option, value, low, high, unit="a whole number", default=default)
    if number != int(number):
        raise InvalidArgument(f"{option}={value!r} is not a whole number: give one from {low} "
                              f"to {high}" + (f" (default {default})" if default is not None
                                              else ""))
    return int(number)


def as_identifier(option: str, value: object, longest: int, *,
                  default: str | None = None) -> str:
    """A SQL identifier option (a table or schema name): 1 to `longest` characters of
    IDENTIFIER, so it can be put in statements without quoting.

    Example:
        >>> as_identifier("table", "app_leases", 64)
        'app_leases'
    """
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{option} must be a str, got {type(value).__name__}")
    if not IDENTIFIER.fullmatch(value) or len(value) > longest:
        example = default or "locks"
        raise InvalidArgument(
            f"{option}={value!r} is not a usable SQL identifier: use 1 to {longest} ASCII "
            f"letters, digits and underscores, not starting with a digit (e.g. "
            f"{option}={example}" + (", the default)" if default else ")"))
    return value


DEFAULT_RETAIN = 3600.0
"""Seconds a store keeps the state of a name nobody holds (see retain_seconds)."""


def retain_seconds(value: object) -> float:
    """The `retain` option: how long a store keeps the state (the fencing counter, the row or
    file) of a name that is free, has no waiter and was not granted meanwhile, in seconds from
    0 (forget it at release) to "inf" (keep it forever, as before there was an option). A name
    taken again after being forgotten gets a token from the store's clock in microseconds,
    larger than every earlier one unless that clock stepped back by more than `retain`.

    Example:
        >>> retain_seconds("inf"), retain_seconds(0), retain_seconds("600")
        (inf, 0.0, 600.0)
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidArgumentType(f"retain must be a number of seconds, got {type(value).__name__}")
    hint = ("give seconds from 0 (forget a name at its release), or inf to keep every name "
            f"(default {DEFAULT_RETAIN:g})")
    try:
        number = float(value)
    except ValueError:
        raise InvalidArgument(f"retain={value!r} is not a number: {hint}") from None
    if math.isnan(number) or number < 0:
        raise InvalidArgument(f"retain={value!r} is out of range: {hint}")
    return number
