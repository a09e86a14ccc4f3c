"""Signing in to Azure Storage for `azblob://ACCOUNT/CONTAINER`, quietly: DefaultAzureCredential
logs a WARNING of some twenty lines each time its chain of credentials finds no token, which a
machine that was never signed in turns into a screenful before tenure's one-line error. While
the store's own requests ask for a token those records are demoted to DEBUG (still there for
whoever turns azure.identity's debug logging on); the store's error names what was tried and
how to sign in instead (`no_token_hint`).

Example::

    credential = QuietCredential(DefaultAzureCredential())
    client = ContainerClient.from_container_url(url, credential=credential)
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

# True while QuietCredential asks its chain for a token (in that task or thread only).
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("tenure_quiet_sign_in",
                                                               default=False)
# Short names of DefaultAzureCredential's members, for the one-line error.
_SHORT_NAMES = {
    "EnvironmentCredential": "environment variables (AZURE_CLIENT_ID...)",
    "WorkloadIdentityCredential": "workload identity",
    "ManagedIdentityCredential": "managed identity",
    "SharedTokenCacheCredential": "shared token cache",
    "VisualStudioCodeCredential": "VS Code",
    "AzureCliCredential": "az login",
    "AzurePowerShellCredential": "Connect-AzAccount",
    "AzureDeveloperCliCredential": "azd auth login",
    "BrokerCredential": "broker",
    "InteractiveBrowserBrokerCredential": "broker",
}


class _DemoteWhileQuiet(logging.Filter):
    """While `_QUIET` is set, WARNING and lower records go on as DEBUG ones, and only where
    their logger is enabled for DEBUG (the logger's level check has already let a WARNING
    through, and a handler without a level would print whatever follows)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _QUIET.get() or record.levelno > logging.WARNING:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_DEMOTE = _DemoteWhileQuiet()


def _demote_identity_logs() -> None:
    """Install the filter on every azure.identity logger (a logger's filters do not apply to
    its children's records, so each module's logger gets it; adding it twice is a no-op)."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == "azure.identity" or name.startswith("azure.identity.")) and isinstance(
                logger, logging.Logger):
            logger.addFilter(_DEMOTE)


class QuietCredential:
    """A token credential (DefaultAzureCredential) whose failures to find a token are logged at
    DEBUG, not WARNING, while the store asks for tokens; everything else is the chain's own.

    Example::

        credential = QuietCredential(DefaultAzureCredential())
        no_token_hint(credential)  # "tried environment variables ..., az login, ...; ..."
    """

    def __init__(self, chain: Any) -> None:
        self.chain = chain
        _demote_identity_logs()  # azure.identity's modules, and so their loggers, exist now

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        quiet = _QUIET.set(True)
        try:
            return await self.chain.get_token(*scopes, **kwargs)
        finally:
            _QUIET.reset(quiet)

    async def get_token_info(self, *scopes: str, **kwargs: Any) -> Any:
        quiet = _QUIET.set(True)
        try:
            return await self.chain.get_token_info(*scopes, **kwargs)
        finally:
            _QUIET.reset(quiet)

    async def close(self) -> None:
        await self.chain.close()

    async def __aenter__(self) -> QuietCredential:
        await self.chain.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.chain.__aexit__(*exc_info)


def no_token_hint(credential: object) -> str:
    """What to fix when `credential` found no token: what it tried and how to sign in.

    Example:
        >>> no_token_hint(None)[:37]
        'no credential could get a token; sign'
    """
    members = getattr(getattr(credential, "chain", None), "credentials", ())
    # A member that could not be set up stands in under another class, with the name it has.
    names = [(getattr(member, "_credential_name", None) or type(member).__name__).removeprefix(
        "Async") for member in members]
    tried = list(dict.fromkeys(_SHORT_NAMES.get(name, name) for name in names))
    what = f" (DefaultAzureCredential tried {', '.join(tried)})" if tried else ""
    return (f"no credential could get a token{what}; sign in with 'az login', run where a "
            "managed identity has access, or use azblob:///CONTAINER with a connection string "
            "(AZURE_STORAGE_CONNECTION_STRING)")
