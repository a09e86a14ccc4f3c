"""One exception hierarchy under TenureError.

Backend errors (sqlite3.OperationalError, OSError, driver errors) are translated at the
store boundary into StoreUnavailable, with the store URL already redacted.

Example:
    >>> try:
    ...     raise LockTimeout("lock 'jobs' not acquired within 1.0 s")
    ... except TenureError as exc:
    ...     print(type(exc).__name__)
    LockTimeout
"""

from __future__ import annotations


class TenureError(Exception):
    """Base class of every error tenure raises.

    Example:
        >>> issubclass(LeaseLost, TenureError)
        True
    """


class LockTimeout(TenureError, TimeoutError):
    """`acquire(timeout=...)` waited the whole timeout without getting the lease.

    Example:
        >>> isinstance(LockTimeout("busy"), TimeoutError)
        True
    """


class LeaseLost(TenureError):
    """The lease is no longer held: it expired, was broken by an admin, or taken over (or, as
    the subclass LeaseReleased, was released).

    Raised by `lease.check()`, and out of an `async with` block whose body was cancelled.

    Example:
        >>> LeaseLost("lease on 'jobs' lost: broken").args[0]
        "lease on 'jobs' lost: broken"
    """


class LeaseReleased(LeaseLost):
    """The lease was released (by `release()`, or on leaving its `with` block): it is no longer
    held here, though it was not lost. Raised by `lease.check()`, `run.check()` and
    `msg.check()` after the release. A LeaseLost, so `except tenure.LeaseLost` stops the
    protected work either way; `lease.lost` stays False and `lease.released` is True.

    Example:
        >>> isinstance(LeaseReleased("lease on 'jobs' was released"), LeaseLost)
        True
    """


class StoreUnavailable(TenureError, ConnectionError):
    """The store could not be reached or answered with an error; the operation may be retried.

    `transient` tells the two kinds apart: True (this class) for what clears by itself (a
    timeout, a refused or reset connection, a 5xx, a server loading or failing over), retried
    by `acquire` until its timeout and by runners for as long as it lasts; False for a
    `StoreRefused`, which retrying cannot clear.

    Example:
        >>> error = StoreUnavailable("sqlite:////tmp/x.db: database is locked")
        >>> isinstance(error, ConnectionError), error.transient
        (True, True)
    """

    transient: bool = True


class StoreRefused(StoreUnavailable):
    """The store refused the request for a reason retrying cannot clear: authentication or
    authorization refused, the store object closed, a database, schema or container that is
    missing and may not be created, a bad option.

    `acquire()` raises it at once, whatever its timeout; a worker that meets it at start-up
    exits (status 2 from `tenure run`), and one that meets it while running reports unhealthy
    and keeps retrying, so fixing the credentials recovers it without a restart. The message
    names the cause and the fix, never a secret.

    Example:
        >>> error = StoreRefused("redis://:***@db:6379/0: authentication refused; check the "
        ...                      "password in the URL")
        >>> isinstance(error, StoreUnavailable), error.transient
        (True, False)
    """

    transient = False


class InvalidArgument(TenureError, ValueError):
    """An argument has the right type but a value outside what is allowed.

    Example:
        >>> isinstance(InvalidArgument("ttl must be > 0"), ValueError)
        True
    """


class InvalidArgumentType(TenureError, TypeError):
    """An argument has the wrong type.

    Example:
        >>> isinstance(InvalidArgumentType("name must be a str"), TypeError)
        True
    """


class MissingExtra(TenureError, ImportError):
    """A store needs an optional dependency that is not installed.

    Example:
        >>> MissingExtra("install tenure[redis] to use redis:// stores").args[0]
        'install tenure[redis] to use redis:// stores'
    """


# Tracebacks and reprs name these by their public path (tenure.StoreRefused), where users
# import and catch them, not by this private module; pickle finds them there too. doctest
# looks for a class's examples in the module it names, so __test__ points it here.
_PUBLIC = (TenureError, LockTimeout, LeaseLost, LeaseReleased, StoreUnavailable, StoreRefused,
           InvalidArgument, InvalidArgumentType, MissingExtra)
for _error in _PUBLIC:
    _error.__module__ = "tenure"
__test__ = {error.__name__: error for error in _PUBLIC}
