"""Lock names made from a function call's arguments, for `store.locked("invoice-{invoice_id}")`.
Pure logic, no I/O: the template is checked against the function's parameters once, when the
function is decorated, and filled in on every call.

Example:
    >>> def charge(invoice_id, amount=0):
    ...     pass
    >>> NameTemplate("invoice-{invoice_id}", charge).name_for((7,), {})
    'invoice-7'
"""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable, Mapping
from typing import Any

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._names import validate_name


class NameTemplate:
    """A `str.format` template whose placeholders name parameters of `function`.

    A placeholder may reach into its argument (`{invoice.id}`, `{ids[0]}`) and carry a format
    spec (`{day:%Y-%m-%d}`); defaults apply. Positional placeholders (`{}`, `{0}`) and ones
    that name no parameter are refused here, naming the placeholder and the parameters.

    Example:
        >>> def sync_account(account, *, full=False):
        ...     pass
        >>> NameTemplate("sync-{account}-{full}", sync_account).name_for(("acme",), {})
        'sync-acme-False'
    """

    __slots__ = ("_function", "_signature", "_template")

    def __init__(self, template: object, function: Callable[..., Any]) -> None:
        if not isinstance(template, str):
            raise InvalidArgumentType(
                f"name must be a str such as 'invoice-{{invoice_id}}', got "
                f"{type(template).__name__}"
            )
        self._template = template
        self._function = function
        self._signature = inspect.signature(function)
        parameters = list(self._signature.parameters)
        for placeholder in _placeholders(template):
            root = placeholder.split(".", 1)[0].split("[", 1)[0]
            if root not in parameters:
                known = ", ".join(parameters) or "none"
                fix = ("name the parameter, e.g. {" + parameters[0] + "}" if parameters
                       else "use a fixed name")
                raise InvalidArgument(
                    f"name={template!r}: the placeholder {{{placeholder}}} names no parameter of "
                    f"{_qualname(function)}() (its parameters: {known}); {fix}"
                )

    def name_for(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """The lock name for one call (the call's arguments bound as the function binds them).

        Example:
            >>> def report(day, region="eu"):
            ...     pass
            >>> NameTemplate("report-{region}-{day}", report).name_for(("mon",), {})
            'report-eu-mon'
        """
        bound = self._signature.bind(*args, **kwargs)  # a wrong call fails as the function would
        bound.apply_defaults()
        try:
            name = self._template.format_map(bound.arguments)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise InvalidArgument(
                f"the lock name {self._template!r} could not be made from this call of "
                f"{_qualname(self._function)}(): {type(exc).__name__}: {exc}"
            ) from None
        return validate_name(name, f"the lock name made from {self._template!r}")


def _placeholders(template: str) -> list[str]:
    """The field names of `template`, refusing positional ones and a malformed template."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InvalidArgument(
            f"name={template!r} is not a valid format template ({exc}); write literal braces "
            "as {{ and }}"
        ) from None
    fields = []
    for _, field, spec, _ in parsed:
        if field is None:
            continue
        if field == "" or field.split(".", 1)[0].split("[", 1)[0].isdigit():
            raise InvalidArgument(
                f"name={template!r} has a positional placeholder {{{field}}}; name the "
                "parameter instead, e.g. 'invoice-{invoice_id}'"
            )
        fields.append(field)
        if spec and "{" in spec:  # nested fields in the format spec name parameters too
            fields.extend(_placeholders(spec))
    return fields


def _qualname(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or repr(function)
