"""Tracebacks of errors raised by the user's code that tenure called (a job, a handler, a
callback), logged from the user's first frame: the runner's frames above it (tenure's, anyio's
thread hop, asyncio's) say nothing the user can act on.

Example::

    log.error("job failed", exc_info=from_user_code(exc))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from types import TracebackType

import anyio

_PACKAGES = (asyncio, anyio, concurrent.futures)
_RUNNERS = (
    *(os.path.dirname(package.__file__ or "") + os.sep for package in _PACKAGES),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # tenure itself
    os.path.abspath(threading.__file__),
)


def from_user_code(exc: BaseException) -> tuple[type[BaseException], BaseException,
                                                  TracebackType | None]:
    """`exc` as exc_info for a log line, its traceback starting at the first frame outside
    tenure and the runners it uses (the frames below stay: the user's and their libraries').
    The whole traceback when every frame is tenure's (then it is tenure's error to show).

    Example::

        try:
            job(run)
        except Exception as exc:
            log.error("tenure: job failed", exc_info=from_user_code(exc))
    """
    traceback = exc.__traceback__
    while traceback is not None and traceback.tb_frame.f_code.co_filename.startswith(_RUNNERS):
        traceback = traceback.tb_next
    return type(exc), exc, traceback if traceback is not None else exc.__traceback__
