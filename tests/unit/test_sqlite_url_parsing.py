"""SQLite URLs mean what they mean in SQLAlchemy: `sqlite:///locks.db` is relative
to the working directory, `sqlite:////var/lib/locks.db` absolute. Each case is checked against
SQLAlchemy's own reading of the URL, so the two cannot drift apart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from tenure import InvalidArgument
from tenure._urls import local_url, parse_store_url


def sqlalchemy_file(url: str) -> str:
    """The absolute file SQLAlchemy's SQLite dialect opens for `url` (without its query:
    tenure's options are no driver arguments)."""
    engine = sa.create_engine(url.partition("?")[0])
    arguments, _ = engine.dialect.create_connect_args(engine.url)
    engine.dispose()
    return str(arguments[0])


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("url", "relative"), [
    ("sqlite:///locks.db", "locks.db"),
    ("sqlite:///data/locks.db", "data/locks.db"),
    ("sqlite:///var/lib/app/locks.db", "var/lib/app/locks.db"),  # what 0.1.0 read as absolute
    ("sqlite:///../locks.db", "../locks.db"),
    ("sqlite:///~/locks.db", "~/locks.db"),  # no home directory: SQLAlchemy does not expand ~
    ("sqlite:///my%20locks.db", "my locks.db"),
    ("sqlite:///a%3Fb%25c.db", "a?b%c.db"),
    ("sqlite:///a#b.db", "a#b.db"),  # no fragment: '#' is part of the name
    ("sqlite:///locks.db?synchronous=full", "locks.db"),
])
def test_three_slashes_are_relative_to_the_working_directory(in_tmp: Path, url: str,
                                                             relative: str) -> None:
    expected = os.path.abspath(relative)
    assert parse_store_url(url).location == expected
    assert sqlalchemy_file(url) == expected


@pytest.mark.parametrize(("url", "absolute"), [
    ("sqlite:////var/lib/app/locks.db", "/var/lib/app/locks.db"),
    ("sqlite:////tmp/with%20space/x.db", "/tmp/with space/x.db"),
])
def test_four_slashes_are_absolute(in_tmp: Path, url: str, absolute: str) -> None:
    assert parse_store_url(url).location == absolute
    assert sqlalchemy_file(url) == absolute


def test_the_scheme_is_case_insensitive(in_tmp: Path) -> None:
    assert parse_store_url("SQLite:///x.db").location == str(in_tmp / "x.db")


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:locks.db", "locks.db"),  # no '//': kept from 0.1.0, which SQLAlchemy cannot parse
    ("sqlite:/var/lib/app/locks.db", "/var/lib/app/locks.db"),
])
def test_without_slashes_the_path_is_taken_as_written(in_tmp: Path, url: str, path: str) -> None:
    assert parse_store_url(url).location == os.path.abspath(path)


def test_a_relative_path_is_resolved_when_parsed(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    parsed = parse_store_url("sqlite:///locks.db")
    monkeypatch.chdir("/")
    assert parsed.location == str(tmp_path / "locks.db")


@pytest.mark.parametrize(("url", "path"), [("sqlite:////tmp/x.db?synchronous=full", "/tmp/x.db"),
                                         ("sqlite:////tmp/a#b.db?synchronous=full", "/tmp/a#b.db")])
def test_options_come_from_the_query(url: str, path: str) -> None:
    parsed = parse_store_url(url)
    assert (parsed.location, parsed.options) == (path, {"synchronous": "full"})


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:",
                                 "sqlite://?synchronous=full"])
def test_sqlalchemys_in_memory_database_is_refused_with_the_alternatives(url: str) -> None:
    assert url == "sqlite:" or sqlalchemy_file(url) == ":memory:"
    with pytest.raises(InvalidArgument) as raised:
        parse_store_url(url)
    message = str(raised.value)
    assert "memory://" in message and "sqlite:////absolute/path.db" in message, message


@pytest.mark.parametrize("url", ["sqlite://localhost/tmp/x.db", "sqlite://db/x.db",
                                 "sqlite://app:hunter2@db/x.db", "sqlite://app:hunter2@/x.db"])
def test_a_host_or_user_is_refused_without_the_password(url: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        parse_store_url(url)
    message = str(raised.value)
    assert "stores are local" in message and "sqlite:////absolute" in message, message
    assert "hunter2" not in message


def test_a_path_ending_in_a_slash_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="names a directory"):
        parse_store_url("sqlite:////var/lib/app/")


@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=40).filter(lambda part: "/" not in part))
def test_local_url_reads_back_as_the_same_file(name: str) -> None:
    path = f"/tmp/dir {name}/{name}.db"
    url = local_url("sqlite", path)
    assert url.startswith("sqlite:////tmp/")
    assert parse_store_url(url).location == os.path.abspath(path)
    assert sqlalchemy_file(url) == os.path.abspath(path)
