"""Deprecated path, kept for one release: import `tenure.claims`, the one public path (the
implementation is private, in tenure.exactly_once._claims).

Example::

    from tenure import claims
"""

from tenure._lazy import moved_module

__getattr__ = moved_module(__name__, "tenure.claims", "tenure.exactly_once._claims")
