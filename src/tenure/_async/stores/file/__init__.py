"""`file:///path/to/dir`: one file per lock name, held with an OS advisory lock (flock).

The kernel frees the lock the moment its holder's process dies, so a crashed holder's lock is
free at once, without waiting for a ttl; ttl is accepted for a uniform API and paces the
holder's periodic check. Each lock file keeps the name's fencing counter, the boot id it was
written under, the holder and the name, at fixed offsets: through a shared memory mapping on
Python 3.13+ (no syscalls beyond the two flocks of a cycle), with pread and pwrite on the
descriptor before. The files of a name nobody holds are deleted once it has been idle for
`retain` seconds (default 3600; 0: at its release; inf: never), or by `prune(idle)`:
_forgetting.py says why the unlink is safe.

File names are a readable prefix of the lock name plus a 128-bit digest of it (see
tenure._names.safe_key), so no name can lead outside the directory. `break_lease` marks the
held file as replaced and renames a fresh copy into its place: the old holder sees the mark at
its next check, and nobody can newly take the old file; the mark is never cleared. Breaks of a
name take turns on a `.break` file's flock. Semaphores keep one file per slot and their counter in
a `.sem` file; do not use one name both as a lock and as a semaphore.

Open files belong to the process that opened them: a forked child closes its copies of them
(flock belongs to the open file description, which a child shares with its parent) and opens
its own (tenure._forks).

Capacity: one open file per held lease, one per name a waiting acquire tries (kept open between
tries, at most 256 kept per store and closed first when the process runs out), and up to four
for the moment of a call in flight (a semaphore's counter update, a break, a listing, a prune:
two, plus one per slot of a semaphore it forgets). A process
out of descriptors (EMFILE, ENFILE) gets a StoreRefused naming its limit, the leases held and how
to raise it.

Records (`write_record`) are `<key>.record` files next to the lock file, holding the name and
the record as JSON. A record is written to a temporary file, flushed to disk and renamed into
place (readers never see a torn record), and only by a holder whose lock file is not replaced.

Local file systems only: flock over NFS is not reliable. Linux and macOS (no Windows).

Where things are:

    _layout.py      the lock and counter files' layout: token, boot id, replaced flag, holder, name
    _forgetting.py  prune, the retain sweep, the unlink at release: forgetting names safely
    _paths.py       which files a name has in the directory
    _handles.py     flock, lock files read and written at fixed offsets, the open files kept
    _failures.py    what a failure means: what to fix, or a transient error to retry
    _directory.py   the directory, made when the store is built, and what its files share
    _records.py     the records API (a JSON file per name, written by its holder)
    _leases.py      AsyncFileStore: acquire, renew, release, break, listing

Example::

    store = tenure.connect("file:///var/lib/app/locks")
"""

from __future__ import annotations

from typing import Any

from tenure._async.stores._options import DEFAULT_RETAIN, merged, only
from tenure._async.stores._protocol import AsyncBackend
from tenure._async.stores.file._leases import AsyncFileStore
from tenure._urls import parse_store_url

__all__ = ["SCHEMES", "AsyncFileStore", "from_url"]

SCHEMES: tuple[str, ...] = ("file",)


def from_url(url: str, **options: Any) -> AsyncBackend:
    """The store of a `file:///abs/dir` (or `file:relative/dir`) URL, as `tenure.aio.connect`
    builds it: its one option is `retain` (seconds the files of a name nobody holds are kept,
    default 3600, 0 to inf), checked before the directory is created.

    Example::

        backend = from_url("file:///var/lib/app/locks?retain=600")
    """
    parsed = parse_store_url(url, SCHEMES)
    given = only(merged(parsed.options, options), "retain", store="file:// stores")
    return AsyncFileStore(parsed.location, retain=given.get("retain", DEFAULT_RETAIN))
