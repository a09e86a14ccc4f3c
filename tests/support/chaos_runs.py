"""A chaos run from a test: the workers and the length the environment asks for (`make chaos`
sets TENURE_CHAOS_SECONDS and TENURE_CHAOS_WORKERS), its report kept next to its history.

Example::

    report = run_and_report("sqlite:///...", tmp_path, None, {"duration": 22.0, "seed": 149})
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from tenure.chaos import ChaosSettings, Report, print_report, run_chaos

LONG_RUN = float(os.environ.get("TENURE_CHAOS_SECONDS", "0"))
WORKERS = int(os.environ.get("TENURE_CHAOS_WORKERS", "4"))


def run_and_report(store: str, tmp_path: Path, restart: Callable[[], object] | None,
                   options: dict[str, Any], *, width: int = 130) -> Report:
    """run_chaos on `store` with `options` (WORKERS workers unless they say otherwise, in
    <tmp_path>/run; a `duration` of LONG_RUN at least); the printed report goes to
    <tmp_path>/run/summary.txt.

    Example::

        report = run_and_report(url, tmp_path, server.restart, {"duration": 22.0, "seed": 1,
                                                                "workload": "jobs"})
    """
    options = {"workers": WORKERS, "directory": tmp_path / "run", **options}
    options["duration"] = max(options["duration"], LONG_RUN)
    report = run_chaos(ChaosSettings(store, **options), restart_store=restart)
    with (tmp_path / "run" / "summary.txt").open("w") as summary:
        print_report(report, Console(file=summary, width=width))
    return report
