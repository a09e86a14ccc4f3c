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
    """The lease is no longer held: it expired, was broken by an admin, or taken over.

    Raised by `lease.check()`, and out of an `async with` block whose body was cancelled.

    Example:
        >>> LeaseLost("lease on 'jobs' lost: broken").args[0]
        "lease on 'jobs' lost: broken"
    """


class StoreUnavailable(TenureError, ConnectionError):
    """The store could not be reached or answered with an error; the operation may be retried.

    Example:
        >>> isinstance(StoreUnavailable("sqlite:///x.db: database is locked"), ConnectionError)
        True
    """


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
