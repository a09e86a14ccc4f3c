"""The async source of truth; _sync/ is generated from it by scripts/unasync.py."""
