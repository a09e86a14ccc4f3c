"""Chaos histories written by hand, for testing the checkers: the events the workers and the
nemesis would write, in the history's format (see tenure.chaos._history).

Example::

    history = HandWrittenHistory(name="J")
    history.nemesis(0.0, "phase", name="J", until=20.0)
    history.add(1.0, 2, "invoke", "run", token=10)
"""

from __future__ import annotations

from typing import Any


class HandWrittenHistory:
    """The events of a run, in order of writing: workers' (`worker-<pid>`) and the nemesis'.
    `every` holds the fields each worker event carries (e.g. the workload's name).

    Example::

        history = HandWrittenHistory()
        history.add(1.0, 2, "ok", "complete", n=1, message="1")
        history.nemesis(1.5, "heal", name="Q", bound=5.0)
    """

    def __init__(self, **every: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.every = every

    def add(self, t: float, pid: int, type_: str, f: str, **fields: Any) -> None:
        """An event of worker `pid` at `t` (seconds into the run).

        Example::

            history.add(1.0, 2, "invoke", "handle", n=1)
        """
        self.events.append({"t": t, "process": f"worker-{pid}", "pid": pid, "type": type_,
                            "f": f, **self.every, **fields})

    def nemesis(self, t: float, f: str, **fields: Any) -> None:
        """An event of the nemesis (the orchestrator) at `t`: a phase, a fault, a heal...

        Example::

            history.nemesis(2.1, "fault", kind="kill", target_pid=3)
        """
        self.events.append({"t": t, "process": "nemesis", "pid": 1, "type": "info", "f": f,
                            **fields})
