"""What a failure of SQLite or of the file system means for the sqlite:// store: a StoreRefused
naming what to fix when retrying cannot clear it, else a StoreUnavailable (a busy database, a
full disk, an I/O error), which the core retries.

Example::

    raise store_failure(url, path, "acquire", "job", exc) from exc
"""

from __future__ import annotations

import os
from pathlib import Path

from tenure._async.stores._failures import failure, refusal
from tenure._async.stores.sqlite._settings import URL_FORMS
from tenure._errors import StoreRefused, StoreUnavailable
from tenure._urls import local_url


def store_failure(url: str, path: Path, operation: str, name: str,
                  exc: Exception) -> StoreUnavailable:
    """One clear error for a failure of SQLite or the file system while `operation` ran on
    `name` in the database at `path`: StoreRefused for what retrying cannot clear (see
    `refusal_fix`), else StoreUnavailable.

    Example::

        raise store_failure(url, path, "release", grant.name, exc) from exc
    """
    if isinstance(exc, StoreRefused):
        return StoreRefused(str(exc))
    fix = refusal_fix(path, exc)
    if fix is not None:
        return refusal(url, operation, name, fix, exc)
    return failure(url, operation, name, "check that the database file and its "
                   "directory are writable and not on a network file system", exc)


def refusal_fix(path: Path, exc: Exception) -> str | None:
    """What to fix when `exc` is permanent (None: transient, such as a busy database).

    Example::

        refusal_fix(Path("/missing/locks.db"), exc)  # "the database's directory ... create it"
    """
    directory = path.parent
    message = str(exc).lower()
    opening = isinstance(exc, OSError) or "unable to open database file" in message
    if opening and path.is_dir():
        return (f"{str(path)!r} is a directory, not a database file; name a file in "
                f"it, e.g. {local_url('sqlite', str(path / 'locks.db'))}")
    if opening and not directory.exists():
        return (f"the database's directory {str(directory)!r} does not exist; create it, "
                f"or fix the path in the URL ({URL_FORMS})")
    if isinstance(exc, (PermissionError, NotADirectoryError, FileExistsError)):
        return (f"the database's directory {str(directory)!r} cannot be created or "
                "written by this user; fix the path in the URL or the permissions")
    if "readonly database" in message or "read-only" in message:
        if os.access(path, os.W_OK) and not os.access(directory, os.W_OK | os.X_OK):
            return (f"the database's directory {str(directory)!r} is read-only for this "
                    "process (the file is writable, but SQLite creates its -wal and -shm "
                    "files next to it); make the directory writable")
        return (f"the database file {str(path)!r} is read-only for this process; make "
                "it (and its directory, for the -wal and -shm files) writable")
    if "file is not a database" in message or "malformed" in message:
        return (f"the file {str(path)!r} is not a usable SQLite database; point the "
                "URL at another path")
    if "unable to open database file" in message and not _can_open(path):
        return (f"this user cannot create or open {str(path)!r}; fix the path in the "
                "URL or the permissions of the file and its directory")
    return None


def _can_open(path: Path) -> bool:
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return False
    return not path.exists() or os.access(path, os.R_OK | os.W_OK)
