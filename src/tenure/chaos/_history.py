"""The run's history: one JSON line per event, appended by every process of the run.

Each event has `t` (time.monotonic(): one clock for every process of the host), `process`
(worker-N, nemesis or oracle), `pid`, `type` (invoke, ok, fail or info) and `f` (acquire,
renew, release, lost, read, write, pause, fault, heal, ...), and where they apply `name`,
`slot` and `token`. The oracle's events also carry `by: "oracle"` and its sequence number
`seq`; their `process` is the worker that made the request.

Example::

    history = HistoryWriter(path, "worker-1")
    history.emit("invoke", "acquire", name="chaos")
    events, offset = read_history(path)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tenure._jsonlines import read_appended

Event = dict[str, Any]


class HistoryWriter:
    """Appends events to the history file: one write per line with O_APPEND, so lines of
    several processes never interleave."""

    def __init__(self, path: Path, process: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.process = process
        self.pid = os.getpid()

    def emit(self, type_: str, f: str, **fields: Any) -> Event:
        """Append one event, stamped now; `fields` may override `process` (the oracle records
        the worker that asked). Returns it.

        Example::

            history.emit("ok", "acquire", name="chaos", slot=0, token=17)
        """
        event: Event = {"t": time.monotonic(), "process": self.process, "pid": self.pid,
                        "type": type_, "f": f, **fields}
        os.write(self._fd, (json.dumps(event) + "\n").encode())
        return event

    def close(self) -> None:
        os.close(self._fd)


def read_history(path: Path, start: int = 0) -> tuple[list[Event], int]:
    """The complete lines of `path` from byte `start` as events, and where to read next.

    Example::

        events, offset = read_history(path)
        more, offset = read_history(path, offset)
    """
    return read_appended(path, start)
