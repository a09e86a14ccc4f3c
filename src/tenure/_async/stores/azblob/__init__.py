"""`azblob://ACCOUNT/CONTAINER`: leases on blobs of an Azure Storage container (blob leases).

Every name has its own virtual directory `tenure/<readable prefix>-<digest>/` (see
tenure._names.safe_key), so any name maps to a legal blob name and distinct names never share
one. A lock is the page blob `lock` there; a semaphore of `limit` has the blobs `slot-0` ..
`slot-<limit-1>`, tried in a random order, and a `counter` blob. Lock blobs are page blobs of
size 0 (until they keep a record) created when missing; the original name is kept in their
metadata (base64, since metadata is ASCII). The blobs of a name nobody holds are deleted by
`prune(idle)`, at the release with `retain=0`, or by a release's sweep once idle `retain`
seconds (default 3600; see _pruning.py); a name created again starts its counter at the wall
clock in microseconds, above every earlier token.

A lease is an Azure blob lease of 15 to 60 s with a lease id proposed by the client (see
_leases.py); the fencing token is the blob's sequence number, moved under the lease (see
_tokens.py). A record is kept in the pages of the lock blob, written under the grant's lease
(see _records.py).

The package, by concern:

    _layout.py     blob names, the metadata that says whose a blob is, record pages
    _failures.py   what an Azure answer means (transient or refused), the SDK's retries
    _settings.py   options: the bound of every call, the container's URL, connection string
    _container.py  the container as every operation reaches it: blob clients, the bound of
                   each call, the failure message, the container created on first use, fork()
    _tokens.py     fencing tokens: a blob's sequence number (a semaphore's counter blob)
    _leases.py     acquire, renew, release, break, list; the undo of a cut-short acquire
    _records.py    the records API (a record per name, in its lock blob's pages, moved to a
                   record blob of its own when the lock blob is pruned)
    _pruning.py    forgetting the names nobody holds: prune, the retain sweep, retain=0
    _waiting.py    how waiters wait: a try every quarter second or a little less
    _store.py      AsyncAzureBlobStore: the backend protocol on the above
    _opening.py    open_store and from_url: a store from its URL and keywords

See docs/stores/azblob.md.

Example::

    store = tenure.connect("azblob://myaccount/locks")  # DefaultAzureCredential
"""

from __future__ import annotations

try:  # the driver, once for the package: its modules import it plainly (they load after this)
    import azure.core
    import azure.storage.blob.aio  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from tenure._errors import MissingExtra

    raise MissingExtra(
        "the azblob:// store needs the Azure SDK: install tenure[azure] "
        "(pip install 'tenure[azure]')"
    ) from exc

from tenure._async.stores.azblob._failures import ROLE, per_attempt
from tenure._async.stores.azblob._layout import (
    RECORD_BLOB_SIZE,
    ROOT,
    blob_name,
    decode,
    directory,
    encode,
    parse_record,
    record_pages,
)
from tenure._async.stores.azblob._leases import DESCRIBE_AFTER
from tenure._async.stores.azblob._opening import SCHEMES, from_url, open_store
from tenure._async.stores.azblob._settings import (
    DEFAULT_BLOB_URL_FORMAT,
    DEFAULT_TIMEOUT,
    KEYWORDS,
)
from tenure._async.stores.azblob._store import AsyncAzureBlobStore

__all__ = [
    "DEFAULT_BLOB_URL_FORMAT", "DEFAULT_TIMEOUT", "DESCRIBE_AFTER", "KEYWORDS",
    "RECORD_BLOB_SIZE", "ROLE", "ROOT", "SCHEMES", "AsyncAzureBlobStore", "blob_name",
    "decode", "directory", "encode", "from_url", "open_store", "parse_record",
    "per_attempt", "record_pages",
]
