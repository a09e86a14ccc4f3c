# GENERATED from src/tenure/_async/__init__.py by scripts/unasync.py: do not edit.
"""The core: written once as async code here; tenure/_sync/ is generated from it by
scripts/unasync.py, with only _shim.py written by hand on each side."""
