# GENERATED from src/tenure/_async/__init__.py by scripts/unasync.py: do not edit.
"""The async source of truth; _sync/ is generated from it by scripts/unasync.py."""
