"""What an Azure answer means: which failures are permanent (a StoreRefused, with what to
fix) and which clear by themselves, what a lease answer says about a lease that is gone, and the
SDK's own retries of one request (quick ones: the lease core retries until each deadline).

Example:
    >>> per_attempt(5.0)
    2.35
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob.aio import LinearRetry

from tenure._async.stores._azure_sign_in import no_token_hint
from tenure._async.stores._failures import failure, refusal
from tenure._errors import StoreUnavailable
from tenure._types import LostReason

ROLE = "Storage Blob Data Contributor"
# Lease answers that say the lease is definitely not ours (any other error is transient).
_TAKEN = {"LeaseIdMismatchWithLeaseOperation", "LeaseAlreadyPresent", "LeaseIdMismatch"}
_BROKEN = {"LeaseIsBrokenAndCannotBeRenewed", "LeaseIsBreakingAndCannotBeAcquired",
           "BlobNotFound", "ContainerNotFound"}
# The SDK's retries of one request, quick ones (the lease core retries until each deadline).
_RETRIES, _BACKOFF, _JITTER = 1, 0.2, 0.1


def code(exc: AzureError) -> str:
    """The service's error code of `exc` ("" when it has none).

    Example:
        >>> code(AzureError("no answer"))
        ''
    """
    value = getattr(exc, "error_code", None)
    return str(getattr(value, "value", value) or "")


def status(exc: AzureError) -> int | None:
    """The HTTP status of `exc`, or None when no answer came.

    Example:
        >>> status(AzureError("no answer")) is None
        True
    """
    value = getattr(exc, "status_code", None)
    return value if isinstance(value, int) else None


def container_missing(exc: AzureError) -> bool:
    """True when the service answered that the store's container does not exist.

    Example:
        >>> container_missing(AzureError("no answer"))
        False
    """
    return isinstance(exc, HttpResponseError) and code(exc) == "ContainerNotFound"


def _token_service_blip(exc: AzureError) -> bool:
    """True when the token service (Entra ID, a managed-identity endpoint) answered HTTP 429
    or 5xx: busy, not a refused credential. A credential that is missing or unavailable stays
    permanent: on a machine with no credential at all, DefaultAzureCredential's message also
    says the managed-identity endpoint did not answer, so its words cannot tell a pod that
    has just started from a laptop that was never signed in."""
    answered = status(exc)
    return answered is not None and (answered == 429 or answered >= 500)


def no_token(exc: BaseException) -> bool:
    """True when the credential found no token and will not find one by trying again.

    Example:
        >>> no_token(ClientAuthenticationError("no credential"))
        True
    """
    return isinstance(exc, ClientAuthenticationError) and not _token_service_blip(exc)


def lost_reason(exc: HttpResponseError) -> LostReason | None:
    """Why a renewal's lease is gone, when the service's answer says it is; None when the
    answer says nothing about the lease (a transient failure).

    Example:
        >>> lost_reason(HttpResponseError("busy")) is None
        True
    """
    answer = code(exc)
    if answer in _BROKEN:
        return LostReason.BROKEN
    if answer in _TAKEN:
        return LostReason.TAKEN
    if status(exc) in (409, 412):
        return LostReason.EXPIRED  # e.g. LeaseNotPresentWithLeaseOperation
    return None


def refusal_fix(exc: AzureError, container: str, credential: Any) -> str | None:
    """What to fix when `exc` is permanent: access refused (401, 403: a wrong key or SAS,
    a missing role, a disabled account), no credential at all, or a missing container this
    store may not create. None when it is transient (5xx, 408, 429, a network error).

    Example:
        >>> refusal_fix(ServiceResponseError("timed out"), "locks", None) is None
        True
    """
    answered, answer = status(exc), code(exc)
    if answered in (401, 403):
        return (f"the service refused access (HTTP {answered} {answer}): check the account key "
                f"or SAS in the connection string, or give this identity the '{ROLE}' role "
                "on the account or container")
    if no_token(exc):
        return no_token_hint(credential)
    if answer == "ContainerNotFound":
        return (f"container {container!r} does not exist; create it or "
                "leave create_container=True (the default)")
    return None


def translated(exc: AzureError, url: str, operation: str, name: str, *, container: str,
               credential: Any) -> StoreUnavailable:
    """One clear error for an SDK failure: what was tried, what went wrong, what to check;
    StoreRefused when retrying cannot clear it (see `refusal_fix`).

    Example:
        >>> str(translated(ServiceResponseError("timed out"), "azblob:///locks", "acquire",
        ...                "jobs", container="locks", credential=None))
        "azblob:///locks: acquire of 'jobs' failed: the blob service did not answer in time"
    """
    answered, answer = status(exc), code(exc)
    fix = refusal_fix(exc, container, credential)
    if fix is not None:
        return refusal(url, operation, name, fix)
    if answered == 404:
        hint = f"not found (HTTP 404 {answer}): check the account, container and endpoint"
    elif isinstance(exc, ServiceRequestError):
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        hint = (f"cannot reach the blob service ({reason}): check the account name, the "
                "endpoint (blob_url_format) and the network")
    elif isinstance(exc, ServiceResponseError):
        hint = "the blob service did not answer in time"
    else:
        hint = f"the blob service answered HTTP {answered} {answer}".rstrip()
    return failure(url, operation, name, hint)


class _Retry(LinearRetry):
    """The SDK's linear retry, minus retrying a credential that found no token: the storage
    SDK retries every error of a request, and each retry ran the whole credential chain again
    (its probes, its log) to fail the same way."""

    def increment(self, settings: dict[str, Any], request: Any, response: Any = None,
                  error: AzureError | None = None) -> bool:
        if error is not None and no_token(error):
            return False
        return bool(super().increment(settings, request, response, error))


def per_attempt(timeout: float) -> float:
    """The connection and read timeout of each attempt of a request, so that every attempt
    and the backoffs between them end within `timeout` seconds on a path gone silent.

    Example:
        >>> per_attempt(5.0)
        2.35
    """
    return round((timeout - _RETRIES * (_BACKOFF + _JITTER)) / (_RETRIES + 1), 3)


def client_options(timeout: float) -> dict[str, Any]:
    """The keywords of a ContainerClient whose every call ends within `timeout` seconds: the
    SDK tries a request twice, each attempt bounded by `per_attempt(timeout)`.

    Example:
        >>> client_options(5.0)["read_timeout"]
        2.35
    """
    attempt = per_attempt(timeout)
    return {
        # Seconds as floats work; the SDK's stub says int.
        "retry_policy": _Retry(backoff=_BACKOFF, random_jitter_range=_JITTER,  # type: ignore[arg-type]
                               retry_total=_RETRIES),
        "connection_timeout": attempt, "read_timeout": attempt,
    }
