# GENERATED from src/tenure/_async/stores/sqlite/_settings.py by scripts/unasync.py: do not edit.
"""What a sqlite:// URL and the store's options mean, checked before any file is opened: the
database path (made absolute now), `synchronous`, `busy_timeout`, and the warning for a URL
written for tenure 0.1.0's reading of `sqlite:///`.

Example::

    path = database_path("locks.db")  # Path('/current/directory/locks.db')
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tenure._sync.stores._options import as_number
from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import local_url

URL_FORMS = "sqlite:///path is relative to the working directory, sqlite:////path absolute"

DEFAULT_SYNCHRONOUS = "NORMAL"
DEFAULT_BUSY_TIMEOUT = 5.0
LONGEST_BUSY_TIMEOUT = 600.0

log = logging.getLogger("tenure")


def warn_of_the_old_reading(url: str, path: Path) -> bool:
    """Warn once when `url` is written `sqlite:///x` (relative after tenure 0.1.0, as in
    SQLAlchemy), `path` (what it means now) differs from `/x` (what it meant before), and a
    file `/x` exists: it may be the database the application's other instances still use,
    and two databases would split the leases. Returns whether it warned.

    Example:
        >>> warn_of_the_old_reading("sqlite:////tmp/locks.db", Path("/tmp/locks.db"))
        False
    """
    after_scheme = url.partition(":")[2]
    if not after_scheme.startswith("///") or after_scheme.startswith("////"):
        return False
    before = "/" + unquote(urlsplit(url, allow_fragments=False).path).lstrip("/")
    if before == str(path) or not os.path.isfile(before):
        return False
    log.warning("tenure: %s is %s (sqlite:/// is relative to the working directory, as in "
                "SQLAlchemy; in tenure 0.1.0 it meant %s, which exists): if %s is the lock "
                "database your other instances use, write sqlite:///%s", local_url(
                    "sqlite", str(path)), path, before, before, before)
    return True


def database_path(path: object) -> Path:
    """`path` made absolute against the working directory (as SQLAlchemy does), refusing what
    is no database file.

    Example:
        >>> database_path("/var/lib/app/locks.db")
        PosixPath('/var/lib/app/locks.db')
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentType(f"path must be a str or os.PathLike such as "
                                  f"'/var/lib/app/locks.db', got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgumentType(f"path must be a str path, got {type(text).__name__}")
    if text in ("", ":memory:"):
        # Each pooled connection would get a database of its own: no mutual exclusion.
        raise InvalidArgument(
            f"path {text!r} names no database file; give a file path such as "
            "'/var/lib/app/locks.db', or use tenure.connect('memory://') for leases within "
            "one process"
        )
    return Path(os.path.abspath(text))


def synchronous_pragma(synchronous: object) -> str:
    """The `PRAGMA synchronous` value of the `synchronous` option ("normal" or "full", in any
    case).

    Example:
        >>> synchronous_pragma("full")
        'FULL'
    """
    if not isinstance(synchronous, str):
        raise InvalidArgumentType(f"synchronous must be a str, 'normal' (default) or 'full', "
                                  f"got {type(synchronous).__name__}")
    if synchronous.lower() not in ("normal", "full"):
        raise InvalidArgument(
            f"synchronous={synchronous!r} is not supported; use 'normal' (default) or 'full'"
        )
    return synchronous.upper()


def busy_timeout_seconds(busy_timeout: object) -> float:
    """The `busy_timeout` option: how many seconds a call waits for another connection's
    write lock before the store answers busy (a transient error, which the core retries);
    more than 0 and at most 600.

    Example:
        >>> busy_timeout_seconds("2.5")
        2.5
    """
    return as_number("busy_timeout", busy_timeout, 0.0, LONGEST_BUSY_TIMEOUT, above=True,
                     default=DEFAULT_BUSY_TIMEOUT, why="how long a call waits for another "
                     "writer's lock before the store answers busy")


def store_url(path: Path, synchronous: str, busy_timeout: float) -> str:
    """The store's URL: its absolute path, and the options that differ from the defaults (as
    a server store's URL keeps its query), so it reads back as the same store.

    Example:
        >>> store_url(Path("/var/lib/app/locks.db"), "FULL", 5.0)
        'sqlite:////var/lib/app/locks.db?synchronous=full'
    """
    options = []
    if synchronous != DEFAULT_SYNCHRONOUS:
        options.append(f"synchronous={synchronous.lower()}")
    if busy_timeout != DEFAULT_BUSY_TIMEOUT:
        shown = int(busy_timeout) if busy_timeout.is_integer() else busy_timeout
        options.append(f"busy_timeout={shown}")
    url = local_url("sqlite", str(path))
    return f"{url}?{'&'.join(options)}" if options else url
