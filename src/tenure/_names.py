"""Lock names: validation, and the readable-prefix-plus-hash key used where a store cannot
take an arbitrary string (file names). Pure logic, no I/O.

Example:
    >>> validate_name("invoices/2026")
    'invoices/2026'
    >>> safe_key("../etc/passwd")[:12]
    '_etc_passwd-'
"""

from __future__ import annotations

import hashlib
import re

from tenure._errors import InvalidArgument, InvalidArgumentType

MAX_NAME_LENGTH = 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_READABLE_PREFIX = 48


def validate_name(name: object, argument: str = "name") -> str:
    """Check that `name` is a usable lock name and return it.

    Any non-empty str up to 1,024 characters is allowed, including '/', '..', spaces and
    non-ASCII. Lone surrogates are refused because no store can encode them.

    Example:
        >>> validate_name("résumé jobs")
        'résumé jobs'
    """
    if not isinstance(name, str):
        raise InvalidArgumentType(
            f"{argument} must be a str, got {type(name).__name__}; pass the lock's name as text"
        )
    if not name:
        raise InvalidArgument(f"{argument} must not be empty; give the lock a name such as 'jobs'")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"{argument} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}, "
            "use a shorter name or a hash of it"
        )
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"{argument} contains a lone surrogate and cannot be stored; pass valid Unicode text"
        ) from None
    return name


def name_digest(name: str) -> str:
    """A 128-bit hex digest of the name, used to keep mapped keys distinct.

    Example:
        >>> len(name_digest("jobs"))
        32
    """
    return hashlib.blake2b(name.encode("utf-8"), digest_size=16).hexdigest()


def safe_key(name: str) -> str:
    """Map any name to a short, portable file-name stem: readable prefix + digest.

    The prefix keeps only [A-Za-z0-9_.-], never starts with "." or "-", and is cut to 48 characters;
    the digest of the full name makes the mapping injective in practice (128 bits).

    Example:
        >>> safe_key("a/b") != safe_key("a_b")
        True
    """
    readable = _UNSAFE.sub("_", name).lstrip(".-")[:_READABLE_PREFIX] or "_"
    return f"{readable}-{name_digest(name)}"


def safe_key_prefix(prefix: str) -> str:
    """A prefix of `safe_key(name)` for every name that starts with `prefix`, so a store can
    list the keys of a name prefix without reading all of them ("" when no such prefix exists).

    Unsafe characters map by runs to one "_", so a run cut by the end of `prefix` still maps to
    the same "_"; a leading run of "." and "-" is stripped from every key, so a prefix made only
    of those gives "".

    Example:
        >>> safe_key_prefix("jobs/")
        'jobs_'
        >>> safe_key("jobs/nightly").startswith(safe_key_prefix("jobs/"))
        True
    """
    return _UNSAFE.sub("_", prefix).lstrip(".-")[:_READABLE_PREFIX]
