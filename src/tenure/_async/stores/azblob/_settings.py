"""The options of an azblob store, checked before any I/O: the bound of every call, the
container's URL for an account, the connection string for `azblob:///CONTAINER`.

Example:
    >>> checked_timeout(2)
    2.0
"""

from __future__ import annotations

import os

from tenure._async.stores._options import as_number
from tenure._errors import InvalidArgument, InvalidArgumentType

DEFAULT_BLOB_URL_FORMAT = "https://{account}.blob.core.windows.net/{container}"
DEFAULT_TIMEOUT = 5.0
# The options of open_store, taken as keywords only: a connection string is a secret, and a
# URL's query ends up in logs.
KEYWORDS = ("connection_string", "blob_url_format", "create_container", "fencing", "retain",
            "timeout")
# The options a URL's query may carry (nothing secret).
URL_OPTIONS = ("retain",)


def checked_timeout(timeout: object) -> float:
    """`timeout` (a number of seconds, 1 to 600) as a float, or InvalidArgument.

    Example:
        >>> checked_timeout(2)
        2.0
    """
    if isinstance(timeout, str):  # a keyword only, never text from a URL
        raise InvalidArgumentType("timeout must be a number of seconds, got str")
    return as_number("timeout", timeout, 1.0, 600.0, default=DEFAULT_TIMEOUT)


def check_flags(**flags: object) -> None:
    """Refuse a flag (`create_container=`, `fencing=`) that is not True or False.

    Example:
        >>> check_flags(fencing=True, create_container=False)
    """
    for option, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentType(
                f"{option} must be True or False, got {type(value).__name__}")


def connection_string_for(container: str, given: str | None) -> str:
    """The connection string of `azblob:///CONTAINER`: `given`, else the environment variable
    AZURE_STORAGE_CONNECTION_STRING; InvalidArgument when there is none.

    Example:
        >>> connection_string_for("locks", "UseDevelopmentStorage=true")
        'UseDevelopmentStorage=true'
    """
    secret = given or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if not secret:
        raise InvalidArgument(
            f"azblob:///{container} needs a connection string: pass connection_string=... "
            "or set AZURE_STORAGE_CONNECTION_STRING; or name the account: "
            f"azblob://ACCOUNT/{container} (signs in with DefaultAzureCredential)"
        )
    if not isinstance(secret, str):
        raise InvalidArgumentType(
            f"connection_string must be a str, got {type(secret).__name__}")
    return secret


def container_url(account: str, container: str, blob_url_format: str | None) -> str:
    """The URL of `container` of `account`, from `blob_url_format` (or the environment
    variable TENURE_AZURE_BLOB_URL_FORMAT, or DEFAULT_BLOB_URL_FORMAT).

    Example:
        >>> container_url("dev", "locks", "http://127.0.0.1:10000/{account}/{container}")
        'http://127.0.0.1:10000/dev/locks'
    """
    url_format = blob_url_format or os.environ.get("TENURE_AZURE_BLOB_URL_FORMAT") or (
        DEFAULT_BLOB_URL_FORMAT)
    try:
        return url_format.format(account=account, container=container)
    except (KeyError, IndexError, ValueError, AttributeError):
        raise InvalidArgument(
            f"blob_url_format {url_format!r} must be a format string with {{account}} and "
            f"{{container}}, e.g. {DEFAULT_BLOB_URL_FORMAT!r}"
        ) from None
