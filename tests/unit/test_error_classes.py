"""Which driver errors are permanent (StoreRefused) and which clear by themselves, for the
cases a live server cannot produce on demand."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import CredentialUnavailableError

from tenure.stores import AzureBlobStore, PostgresStore


class Response:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.reason = "test"
        self.headers: dict[str, str] = {}

    def text(self) -> str:
        return ""


def azure_refusal(exc: Exception) -> str | None:
    store = SimpleNamespace(container=SimpleNamespace(container_name="locks"), _credential=None)
    return AzureBlobStore._refusal(store, exc)  # type: ignore[arg-type]


def test_a_busy_token_service_is_transient_and_a_refused_or_missing_credential_is_not() -> None:
    busy = ClientAuthenticationError("token service busy", response=Response(503))
    throttled = ClientAuthenticationError("too many requests", response=Response(429))
    assert azure_refusal(busy) is None and azure_refusal(throttled) is None
    refused = ClientAuthenticationError("AADSTS7000215: Invalid client secret provided.",
                                        response=Response(401))
    missing = CredentialUnavailableError("DefaultAzureCredential failed to retrieve a token")
    assert azure_refusal(refused) is not None and azure_refusal(missing) is not None


def test_a_cached_plan_outliving_an_alter_table_is_retried_not_refused() -> None:
    store = SimpleNamespace(schema="public", table="tenure_leases")
    stale_plan = psycopg.errors.FeatureNotSupported("cached plan must not change result type")
    assert PostgresStore._refusal(store, stale_plan) is None  # type: ignore[arg-type]
    unsupported = psycopg.errors.FeatureNotSupported("this feature is not supported")
    assert PostgresStore._refusal(store, unsupported) is not None  # type: ignore[arg-type]
