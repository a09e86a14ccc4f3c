"""Deprecated path, kept for one release: import `tenure.idempotency`, the one public path (the
implementation is private, in tenure.exactly_once._provider).

Example::

    from tenure import idempotency
"""

from tenure._lazy import moved_module

__getattr__ = moved_module(__name__, "tenure.idempotency", "tenure.exactly_once._provider")
