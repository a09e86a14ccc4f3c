# GENERATED from src/tenure/_async/stores/file/_failures.py by scripts/unasync.py: do not edit.
"""What a failure of the file system means for the file:// store: a StoreRefused naming what to
fix when retrying cannot clear it (the directory missing or not writable, the process out of
descriptors), else a StoreUnavailable (an I/O error, a full disk), which the core retries.

Example::

    raise file_failure(where, directory, "acquire", "job", exc, held=3, idle=1) from exc
"""

from __future__ import annotations

import errno
from pathlib import Path

from tenure._sync.stores._failures import failure, refusal
from tenure._sync.stores.file._handles import OUT_OF_FILES
from tenure._errors import StoreRefused, StoreUnavailable

try:
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]


def file_failure(where: str, directory: Path, operation: str, name: str, exc: OSError, *,
                 held: int, idle: int) -> StoreUnavailable:
    """One clear error for a file system failure of `operation` on `name` in the store at
    `where` (its URL, and the directory it means) holding `held` leases and keeping `idle`
    files open for reuse: StoreRefused for what retrying cannot clear, else StoreUnavailable.

    Example::

        raise file_failure(self._where, self.directory, "release", name, exc,
                           held=len(self._held), idle=self._idle_count) from exc
    """
    if exc.errno in OUT_OF_FILES:
        return _out_of_files(where, operation, name, exc, held, idle)
    fix = _refusal(directory, exc)
    if fix is not None:
        return failure(where, operation, name, fix, exc.strerror or exc, refused=True)
    return failure(where, operation, name, "check that the directory exists, is "
                   "writable and is on a local file system", exc.strerror or exc)


def _out_of_files(where: str, operation: str, name: str, exc: OSError, held: int,
                  idle: int) -> StoreRefused:
    """The process (EMFILE) or the system (ENFILE) has no descriptor left: what uses them,
    the limit and how to raise it.

    A StoreRefused although it may clear: the store has no outage, its host is configured
    for fewer open files than the application uses, and the descriptors are mostly this
    process's own leases, held for longer than a call waits. So `acquire(timeout)` says so
    at once instead of after its whole timeout as a LockTimeout, and a runner logs it at
    ERROR (not as an unreachable store), keeps retrying and recovers once files are freed.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    usage = (f"this store holds {held} leases, one open file each, and keeps "
             f"{idle} more open for reuse")
    if exc.errno == errno.ENFILE:
        return refusal(where, operation, name, f"{usage}; raise the system's limit "
                       "(sysctl fs.file-max on Linux, kern.maxfiles on macOS) or close files "
                       "in other processes", "the system's table of open files is full "
                       "(ENFILE)")
    suggested = max(65536, 4 * soft)
    if hard == resource.RLIM_INFINITY or hard > soft:
        allowed = suggested if hard == resource.RLIM_INFINITY else min(hard, suggested)
        in_process = (f", or resource.setrlimit(resource.RLIMIT_NOFILE, ({allowed}, hard)) "
                      "in it (up to the hard limit without privileges)")
    else:
        in_process = " (the hard limit too: as root, or in /etc/security/limits.conf)"
    return refusal(
        where, operation, name, f"raise the limit: `ulimit -n {suggested}` in the "
        f"shell that starts it or LimitNOFILE={suggested} in its systemd unit{in_process}; "
        "or hold fewer leases at once", f"too many open files in this process (EMFILE): "
        f"its limit is {_limit(soft)} (RLIMIT_NOFILE, hard limit {_limit(hard)}) and {usage}")


def _refusal(directory: Path, exc: OSError) -> str | None:
    """What to fix when `exc` is permanent (None: transient). A busy lock is no error
    here: it is a lock held by another, reported as such."""
    where = str(directory)
    if isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES,
                                                          errno.EPERM):
        return (f"this user may not write in the lock directory {where!r}; fix its "
                "permissions (or the mount), or point the URL elsewhere")
    if directory.exists() and not directory.is_dir():
        return (f"{where!r} is a file, not a directory; point the URL at a directory for "
                "the lock files")
    if isinstance(exc, (NotADirectoryError, FileExistsError)) or not directory.is_dir():
        return (f"the lock directory {where!r} is missing or not a directory; recreate it "
                "(connect() creates it) or fix the path in the URL")
    return None


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)
