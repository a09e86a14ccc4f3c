# GENERATED from src/tenure/_async/stores/__init__.py by scripts/unasync.py: do not edit.
"""Store modules: one small class per store implementing the Backend protocol."""
