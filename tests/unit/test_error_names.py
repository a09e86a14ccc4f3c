"""tenure's exceptions are named by their public path in tracebacks and reprs (where users
import and catch them), not by the private module that defines them."""

from __future__ import annotations

import pickle
import traceback

import pytest

import tenure

ERRORS = [tenure.TenureError, tenure.LockTimeout, tenure.LeaseLost, tenure.LeaseReleased,
          tenure.StoreUnavailable, tenure.StoreRefused, tenure.InvalidArgument,
          tenure.InvalidArgumentType, tenure.MissingExtra]


@pytest.mark.parametrize("error", ERRORS, ids=[error.__name__ for error in ERRORS])
def test_an_error_shows_its_public_path_and_pickles(error: type[Exception]) -> None:
    shown = "".join(traceback.format_exception_only(error("the message")))
    assert shown.startswith(f"tenure.{error.__name__}: the message"), shown
    copy = pickle.loads(pickle.dumps(error("the message")))
    assert type(copy) is error and copy.args == ("the message",)


def test_a_bad_url_s_traceback_names_tenure_invalid_argument() -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        tenure.connect("ftp://x")
    assert "".join(traceback.format_exception_only(caught.value)).startswith(
        "tenure.InvalidArgument: ")
