"""Deprecated path, kept for one release: import `tenure.outbox`, the one public path (the
implementation is private, in tenure.exactly_once._outbox).

Example::

    from tenure import outbox
"""

from tenure._lazy import moved_module

__getattr__ = moved_module(__name__, "tenure.outbox", "tenure.exactly_once._outbox")
