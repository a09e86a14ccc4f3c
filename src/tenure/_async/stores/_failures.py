"""The message of a failed store call, written once for every store: the store's URL (secrets
already redacted), what was tried (`subject`), what went wrong and what to check, with every
secret hidden by the one redaction of tenure._urls.

Example:
    >>> str(failure("redis://cache:6379/0", "acquire", "jobs", "check the server",
    ...             ConnectionError("Connection refused")))
    "redis://cache:6379/0: acquire of 'jobs' failed: Connection refused; check the server"
"""

from __future__ import annotations

import re

from tenure._async.stores._protocol import subject
from tenure._errors import StoreRefused, StoreUnavailable
from tenure._urls import redact


def cleaned(detail: object, password: str = "") -> str:
    """A driver's message fit for users: one line (an exception without text gives its type's
    name), `password` hidden where it stands as a secret (after `=`, or between `:` and `@`
    as in a URL), and the URL and connection-string secrets redacted.

    The password is not searched for elsewhere: drivers do not echo it, and a password that
    is also a word of the message ("password", "denied"), the user, the host or the port would
    garble the message and, by the gaps, give the password away.

    Example:
        >>> cleaned(OSError("FATAL:  password authentication failed\\n  for user app"))
        'FATAL: password authentication failed for user app'
        >>> cleaned("bad dsn user=app secret=s3cret-pw", password="s3cret-pw")
        'bad dsn user=app secret=***'
        >>> cleaned("FATAL: password authentication failed", password="password")
        'FATAL: password authentication failed'
    """
    text = " ".join(str(detail).split())
    if not text and isinstance(detail, BaseException):
        text = type(detail).__name__
    if password:
        text = _as_secret(password).sub("***", text)
    return redact(text)


def _as_secret(password: str) -> re.Pattern[str]:
    """Where `password` stands as a secret: a value after `=`, or a URL's `:password@`."""
    escaped = re.escape(password)
    return re.compile(rf"(?<==){escaped}(?=$|[\s;&,'\")])|(?<=:){escaped}(?=@)")


def failure(url: str, operation: str, name: str, hint: str, detail: object = "", *,
            password: str = "", refused: bool = False) -> StoreUnavailable:
    """The error of a failed store call: f"{url}: {operation} of {name!r} failed: {detail};
    {hint}", a StoreUnavailable (transient: the core retries); with `refused`, `refusal`'s.
    `detail` (the driver's error, or text) is cleaned (see `cleaned`); without it the message
    is f"{url}: ... failed: {hint}".

    Example:
        >>> str(failure("file:///srv/locks", "break", "jobs", "check it", OSError("I/O error")))
        "file:///srv/locks: break of 'jobs' failed: I/O error; check it"
    """
    if refused:
        return refusal(url, operation, name, hint, detail, password=password)
    return StoreUnavailable(_message(url, f"{subject(operation, name)} failed", hint, detail,
                                     password))


def refusal(url: str, operation: str, name: str, fix: str, detail: object = "", *,
            password: str = "") -> StoreRefused:
    """The error of a store call that retrying cannot clear (StoreRefused): as `failure`'s,
    "refused" instead of "failed", and `fix` says what to change.

    Example:
        >>> str(refusal("file:///srv/locks", "break", "jobs", "check it",
        ...             PermissionError(13, "Permission denied")))
        "file:///srv/locks: break of 'jobs' refused: [Errno 13] Permission denied; check it"
    """
    return StoreRefused(_message(url, f"{subject(operation, name)} refused", fix, detail,
                                 password))


def _message(url: str, what: str, hint: str, detail: object, password: str) -> str:
    said = cleaned(detail, password) if detail != "" else ""
    return f"{url}: {what}: {said}; {redact(hint)}" if said else f"{url}: {what}: {redact(hint)}"
