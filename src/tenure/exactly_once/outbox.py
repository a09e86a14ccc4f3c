"""Deprecated path, kept for one release: import `tenure.outbox`, the one public path (the
implementation is private, in tenure.exactly_once._outbox).

Example::

    from tenure import outbox
"""

from typing import TYPE_CHECKING

from tenure._lazy import moved_module

# ruff: noqa: F403, F405 (the old names are those of the star import that types them)
if TYPE_CHECKING:  # the old names, typed as what they are now (the warning is run time only)
    from tenure.exactly_once._outbox import MAX_ERROR_CHARS
    from tenure.outbox import *
    from tenure.outbox import Message, OutboxStats, RelayCounts, create_table, stats

__getattr__ = moved_module(__name__, "tenure.outbox", "tenure.exactly_once._outbox")

# The old module's public names, so a star import still binds them (and warns once).
__all__ = ["DEAD", "DEFAULT", "DELIVERED", "DeadLetter", "Inbox", "MAX_ERROR_CHARS", "Message",
           "Outbox", "OutboxStats", "PENDING", "Relay", "RelayCounts", "add", "create_table",
           "stats"]
