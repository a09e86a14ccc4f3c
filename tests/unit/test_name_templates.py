"""Lock names made from a call's arguments (`@store.locked("invoice-{invoice_id}")`): what a
template may say, and that a wrong one fails at decoration, naming the placeholder."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import tenure
from tenure._name_templates import NameTemplate


def charge(invoice: Any, ids: list[int], *rest: Any, region: str = "eu", **options: Any) -> None:
    pass


@pytest.mark.parametrize(("template", "args", "kwargs", "name"), [
    ("invoice-{invoice.id}", (SimpleNamespace(id=7), []), {}, "invoice-7"),
    ("first-{ids[0]}", (None, [3, 4]), {}, "first-3"),
    ("{region}/{invoice:>4}", ("ab", []), {}, "eu/  ab"),
    ("{region:{region}}", ("ab", []), {"region": "<3"}, "<3 "),  # nested spec: a parameter too
    ("{rest}-{options}", (1, [], 2), {"dry": True}, "(2,)-{'dry': True}"),
    ("fixed {{braces}}", (1, []), {}, "fixed {braces}"),
])
def test_names_are_made_from_the_bound_call(template: str, args: tuple[Any, ...],
                                            kwargs: dict[str, Any], name: str) -> None:
    assert NameTemplate(template, charge).name_for(args, kwargs) == name


@pytest.mark.parametrize(("template", "message"), [
    ("invoice-{invoice_id}", r"placeholder \{invoice_id\} names no parameter of charge\(\) "
                             r"\(its parameters: invoice, ids, rest, region, options\)"),
    ("{invoices.id}", r"placeholder \{invoices.id\} names no parameter"),
    ("{region:{width}}", r"placeholder \{width\} names no parameter"),
    ("{}", "positional placeholder {}"),
    ("{0}", "positional placeholder {0}"),
    ("{1.real}", r"positional placeholder \{1.real\}"),
    ("a{b", "not a valid format template"),
    ("a}b", "not a valid format template"),
])
def test_a_wrong_template_fails_at_decoration(template: str, message: str) -> None:
    with pytest.raises(tenure.InvalidArgument, match=message):
        NameTemplate(template, charge)


def test_a_function_without_parameters_takes_only_a_fixed_name() -> None:
    def nightly() -> None:
        pass

    assert NameTemplate("nightly", nightly).name_for((), {}) == "nightly"
    with pytest.raises(tenure.InvalidArgument, match=r"its parameters: none\); use a fixed name"):
        NameTemplate("nightly-{day}", nightly)


def test_a_call_that_cannot_make_a_name_fails_naming_the_template() -> None:
    template = NameTemplate("invoice-{invoice.id}", charge)
    with pytest.raises(tenure.InvalidArgument,
                       match=r"'invoice-\{invoice.id\}' could not be made from this call of "
                             r"charge\(\): AttributeError"):
        template.name_for((5, []), {})
    with pytest.raises(TypeError, match="missing a required argument: 'ids'"):
        template.name_for((5,), {})  # as the function itself would refuse the call
    with pytest.raises(tenure.InvalidArgument, match="must not be empty"):
        NameTemplate("{region}", charge).name_for((1, []), {"region": ""})
    with pytest.raises(tenure.InvalidArgumentType, match="name must be a str"):
        NameTemplate(b"invoice", charge)
