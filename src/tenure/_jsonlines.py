"""Reading a JSON-lines file that other processes append to (the demo's events, the chaos
history): only complete lines, and where to continue next time.

Example::

    events, offset = read_appended(path)
    more, offset = read_appended(path, offset)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_appended(path: Path, start: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines of `path` from byte `start`, and the byte to read from next
    (a line still being written is left for the next call).

    Example::

        events, offset = read_appended(Path("events.jsonl"))
    """
    if not path.exists():
        return [], start
    with path.open("rb") as handle:
        handle.seek(start)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode().splitlines()
    return [json.loads(line) for line in lines if line], start + end
