"""A chaos worker's request state, in a process of its own: its request handlers installed as a
worker's are, the request signals blocked until the parent says `go` on stdin, so that every
signal the parent sent meanwhile is pending at once; then unblocked (Python runs the pending
handlers in signal-number order) and the resulting requests printed as JSON.

Example::

    python tests/support/chaos_requests_child.py /tmp/run/control.json
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

from tenure.chaos._requests import WAKE_SIGNALS, listen
from tenure.chaos._worker import WorkloadChaos


def main(control: str) -> None:
    chaos = WorkloadChaos({"seed": 0, "number": 0, "control": control}, None, None)  # type: ignore[arg-type]
    listen(chaos.requests)
    signal.pthread_sigmask(signal.SIG_BLOCK, WAKE_SIGNALS)
    print("ready", flush=True)
    sys.stdin.readline()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WAKE_SIGNALS)  # the pending handlers run here
    state: dict[str, Any] = {"hold": chaos.hold_requested, "pause": chaos.pause_requested}
    print(json.dumps(state), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
