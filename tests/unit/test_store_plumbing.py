"""The plumbing every store shares, written once: option parsing (stores/_options.py), the
failure message (stores/_failures.py) and the ttl check (_timing.check_ttl)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

import tenure
from tenure._async.stores._failures import cleaned, failure
from tenure._async.stores._options import (
    as_bool,
    as_count,
    as_identifier,
    as_number,
    merged,
    only,
    refuse_unknown,
)
from tenure._timing import check_ttl
from tenure._types import Capabilities

# -- unknown options -------------------------------------------------------------------------


def test_an_unknown_option_names_the_option_the_store_and_the_accepted_ones() -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        refuse_unknown({"tabel": "x", "timeout": 2}, ["table", "timeout"], "mysql:// stores")
    assert str(raised.value) == ("unknown option 'tabel' for mysql:// stores; accepted: table, "
                                 "timeout")


def test_several_unknown_options_are_named_in_order_and_a_note_is_added() -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        refuse_unknown(["zeta", "alpha"], ["schema"], "postgresql:// stores",
                       note="libpq parameters such as sslmode go in the URL's query")
    assert str(raised.value) == (
        "unknown options 'alpha', 'zeta' for postgresql:// stores; accepted: schema (libpq "
        "parameters such as sslmode go in the URL's query)")


def test_a_store_without_options_says_none_are_accepted() -> None:
    with pytest.raises(tenure.InvalidArgument, match=r"for example:// stores; accepted: none$"):
        only({"bogus": "1"}, store="example:// stores")
    assert only({}, store="example:// stores") == {}


def test_options_given_in_the_url_and_as_keywords_must_agree() -> None:
    assert merged({"synchronous": "FULL"}, {"synchronous": "full"}) == {"synchronous": "full"}
    with pytest.raises(tenure.InvalidArgument,
                       match="synchronous is 'full' in the URL but 'normal' as a keyword"):
        merged({"synchronous": "full"}, {"synchronous": "normal"})


# -- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    (True, True), (False, False), ("1", True), ("on", True), (" Yes ", True), ("TRUE", True),
    ("0", False), ("off", False), ("no", False), ("false", False), (1, True), (0, False),
])
def test_booleans_read_from_text_or_python(given: object, expected: bool) -> None:
    assert as_bool("notify", given) is expected


def test_a_bad_boolean_says_how_to_write_one() -> None:
    with pytest.raises(tenure.InvalidArgument,
                       match=r"notify='maybe' is not a boolean; use notify=true or notify=false"):
        as_bool("notify", "maybe")


def test_numbers_read_from_text_or_python_within_their_range() -> None:
    assert as_number("timeout", "2.5", 0.1, 600.0) == 2.5
    assert as_number("timeout", 600, 0.1, 600.0) == 600.0
    assert as_number("timeout", 0.1, 0.1, 600.0) == 0.1
    assert as_number("restart_grace", 0, 0, 3600.0) == 0.0


@pytest.mark.parametrize(("value", "message"), [
    ("soon", "timeout='soon' is not a number: give seconds, from 0.1 to 600 (default 5)"),
    (0.05, "timeout=0.05 is out of range: give seconds, from 0.1 to 600 (default 5)"),
    (601, "timeout=601 is out of range"),
    ("nan", "timeout='nan' is out of range"),
    (math.inf, "timeout=inf is out of range"),
])
def test_a_bad_number_says_the_range_and_the_default(value: object, message: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        as_number("timeout", value, 0.1, 600.0, default=5)
    assert str(raised.value).startswith(message)


def test_a_number_that_must_be_above_its_low_bound_refuses_the_bound() -> None:
    assert as_number("timeout", 0.001, 0, 600.0, above=True) == 0.001
    with pytest.raises(tenure.InvalidArgument) as raised:
        as_number("timeout", "0", 0, 600.0, above=True, why="it bounds every reply")
    assert str(raised.value) == ("timeout='0' is out of range: give seconds, more than 0 and at "
                                 "most 600; it bounds every reply")


@pytest.mark.parametrize("value", [True, None, [5], b"5"])
def test_a_number_of_another_type_is_a_type_error(value: object) -> None:
    with pytest.raises(tenure.InvalidArgumentType,
                       match=f"timeout must be a number of seconds, got {type(value).__name__}"):
        as_number("timeout", value, 0.1, 600.0)


def test_counts_are_whole_numbers_within_their_range() -> None:
    assert as_count("pool_size", "10", 1, 1000) == 10
    assert as_count("pool_size", 10.0, 1, 1000) == 10
    with pytest.raises(tenure.InvalidArgument,
                       match=r"pool_size='1.5' is not a whole number: give one from 1 to 1000 "
                             r"\(default 10\)"):
        as_count("pool_size", "1.5", 1, 1000, default=10)
    with pytest.raises(tenure.InvalidArgument,
                       match="pool_size=0 is out of range: give a whole number, from 1 to 1000"):
        as_count("pool_size", 0, 1, 1000)


@pytest.mark.parametrize("value", ["1x", "bad-name", "x" * 65, "", "naïve", "a b"])
def test_identifiers_are_plain_sql_names_of_bounded_length(value: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as raised:
        as_identifier("table", value, 64, default="tenure_leases")
    assert str(raised.value) == (
        f"table={value!r} is not a usable SQL identifier: use 1 to 64 ASCII letters, digits "
        "and underscores, not starting with a digit (e.g. table=tenure_leases, the default)")


def test_a_good_identifier_is_returned_and_a_non_str_is_a_type_error() -> None:
    assert as_identifier("schema", "_app2", 63) == "_app2"
    assert as_identifier("table", "x" * 64, 64) == "x" * 64
    with pytest.raises(tenure.InvalidArgumentType, match="schema must be a str, got int"):
        as_identifier("schema", 5, 63)


# -- failures --------------------------------------------------------------------------------


def test_a_failure_says_the_store_the_call_the_name_what_happened_and_what_to_check() -> None:
    error = failure("redis://cache:6379/0", "acquire", "jobs",
                    "check that the server is running", ConnectionError("Connection refused."))
    assert type(error) is tenure.StoreUnavailable
    assert str(error) == ("redis://cache:6379/0: acquire of 'jobs' failed: Connection refused.; "
                          "check that the server is running")


def test_a_refusal_is_permanent_and_says_refused() -> None:
    error = failure("sqlite:////srv/locks.db", "renew", "jobs", "make the file writable",
                    "attempt to write a readonly database", refused=True)
    assert isinstance(error, tenure.StoreRefused)
    assert str(error) == ("sqlite:////srv/locks.db: renew of 'jobs' refused: attempt to write a "
                          "readonly database; make the file writable")


def test_a_failure_without_a_detail_and_a_listing_subject() -> None:
    error = failure("azblob://acct/locks", "listing", "job:", "the blob service answered 503")
    assert str(error) == ("azblob://acct/locks: listing of the leases named 'job:...' failed: "
                          "the blob service answered 503")


def test_secrets_in_the_detail_and_the_hint_are_hidden() -> None:
    detail = OSError("connection to app:hunter22@db failed:\n  bad conninfo password=hunter22 x")
    hint = "check AccountName=dev;AccountKey=c2VjcmV0;BlobEndpoint=http://h"
    message = str(failure("postgresql://app:***@db/x", "acquire", "jobs", hint, detail,
                          password="hunter22"))
    assert "hunter22" not in message and "c2VjcmV0" not in message
    assert "failed: connection to app:***@db failed: bad conninfo password=*** x;" in message
    assert "AccountKey=***" in message


@pytest.mark.parametrize(("password", "text"), [
    ("password", 'FATAL: password authentication failed for user "postgres"'),
    ("denied", "(1045, \"Access denied for user 'root'@'127.0.0.1' (using password: YES)\")"),
    ("root", "(1045, \"Access denied for user 'root'@'127.0.0.1' (using password: YES)\")"),
    ("127.0.0.1", 'connection to server at "127.0.0.1", port 54329 failed'),
    ("54329", 'connection to server at "127.0.0.1", port 54329 failed'),
    ("543", "port 5432 refused"),
])
def test_a_password_that_is_also_a_word_of_the_message_leaves_it_whole(password: str,
                                                                       text: str) -> None:
    """Masking every occurrence garbled such messages and, by the gaps, gave the password away
    (drivers never echo a password; it is hidden where it stands as one: `=pw`, `:pw@`)."""
    assert cleaned(text, password=password) == text


def test_an_empty_error_gives_its_type() -> None:
    assert cleaned(TimeoutError()) == "TimeoutError"


# -- the ttl check ---------------------------------------------------------------------------


def test_the_ttl_is_checked_against_the_stores_range_with_its_hint() -> None:
    azure = Capabilities(min_ttl=15.0, max_ttl=60.0, ttl_hint=" (Azure blob leases last 15 "
                                                               "to 60 s)")
    assert check_ttl(timedelta(seconds=20), azure) == 20.0
    with pytest.raises(tenure.InvalidArgument) as raised:
        check_ttl(5, azure)
    assert str(raised.value) == ("ttl=5 is out of range: it must be between 15 and 60 seconds "
                                 "(Azure blob leases last 15 to 60 s)")
    with pytest.raises(tenure.InvalidArgument, match="lock_ttl=61 is out of range"):
        check_ttl(61, azure, "lock_ttl")
    with pytest.raises(tenure.InvalidArgumentType, match="ttl must be seconds"):
        check_ttl("30", azure)
