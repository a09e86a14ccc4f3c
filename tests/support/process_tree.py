"""The processes a test started and their descendants, read from /proc (Linux): to check that
nothing a command started outlives it."""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()


def descendants(pid: int) -> set[int]:
    """Every live process under `pid` (children, their children...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {child for child in found if alive(child)}


def alive(pid: int) -> bool:
    """Running or stopped; a zombie (dead, not yet reaped by whoever adopted it) is not."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def stopped(pid: int) -> bool:
    """Stopped by a signal (SIGSTOP)."""
    fields = _stat(pid)
    return fields is not None and fields[0] == "T"
