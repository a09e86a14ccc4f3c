"""A tiny HTTP endpoint for container probes, on the standard library's http.server in a
background thread (no web framework needed).

GET /health answers the worker's health report as JSON: 200 when healthy, 503 when a job has
not succeeded for `unhealthy_after` periods or the store refuses the worker (a permanent error
such as a wrong password). A store that is merely unreachable does not make it 503 by itself:
the report says since when (`store.reachable`, `store.since`) and the jobs turn unhealthy once
they miss their allowed periods. GET /ready answers 200 while the worker runs and its store
answers, 503 otherwise. Anything else is 404.

Example::

    with serve_health(worker, port=8080):       # 127.0.0.1 unless host= says otherwise
        worker.run()
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tenure._errors import InvalidArgument, InvalidArgumentType
from tenure._urls import redact

log = logging.getLogger("tenure.jobs.health")
TIMEOUT = 10.0  # seconds a probe waits for the store before answering 503


class HealthServer:
    """Serves `health()` (a dict with a "healthy" key) on GET /health and `ready()` on GET
    /ready, from a daemon thread, until `close()`.

    Example::

        server = HealthServer(worker.health, port=0).start()
        print(server.url)          # http://127.0.0.1:PORT
        server.close()
    """

    def __init__(self, health: Callable[[], dict[str, Any]], *, host: str = "127.0.0.1",
                 port: int = 0, ready: Callable[[], bool] | None = None) -> None:
        if not callable(health):
            raise InvalidArgumentType(f"health must be callable, got {type(health).__name__}")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise InvalidArgument(f"port={port!r} must be an int from 0 to 65535 (0: any free "
                                  "port)")
        if not isinstance(host, str) or not host:
            raise InvalidArgument(f"host={host!r} must be an address such as '127.0.0.1' or "
                                  "'0.0.0.0' (every interface)")
        self._health = health
        self._ready = ready or (lambda: True)
        self._host = host
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the free port chosen when 0 was asked)."""
        return self._server.server_address[1] if self._server else self._port

    @property
    def url(self) -> str:
        """The base URL, e.g. http://127.0.0.1:8080."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def start(self) -> HealthServer:
        """Bind and serve in a daemon thread; raises OSError when the port is taken."""
        server_class = _IPv6Server if ":" in self._host else ThreadingHTTPServer
        self._server = server_class((self._host, self._port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="tenure-health", daemon=True)
        self._thread.start()
        log.info("tenure: health endpoint on %s/health and %s/ready", self.url, self.url)
        return self

    def close(self) -> None:
        """Stop serving and free the port. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> HealthServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        health, ready = self._health, self._ready

        class Handler(BaseHTTPRequestHandler):
            server_version = "tenure-health"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/health":
                    self._answer(*_health_answer(health))
                elif path == "/ready":
                    is_ready = _ready_answer(health, ready)
                    self._answer(200 if is_ready else 503, {"ready": is_ready})
                else:
                    self._answer(404, {"error": "not found; try /health or /ready"})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body, indent=2).encode() + b"\n"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("tenure: health request: " + format, *args)

        return Handler


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _health_answer(health: Callable[[], dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    try:
        report = health()
    except Exception as exc:
        log.warning("tenure: health check could not read the store: %s", exc)
        return 503, {"healthy": False, "error": redact(f"{type(exc).__name__}: {exc}")}
    return (200 if report.get("healthy") else 503), report


def _ready_answer(health: Callable[[], dict[str, Any]], ready: Callable[[], bool]) -> bool:
    if not ready():
        return False
    try:
        report = health()
    except Exception:
        return False
    store = report.get("store")
    return not isinstance(store, dict) or bool(store.get("reachable", True))


def worker_health(worker: Any, loop: asyncio.AbstractEventLoop | None = None
                  ) -> Callable[[], dict[str, Any]]:
    """A blocking health() for a tenure.Worker, or for a tenure.aio.AsyncWorker whose event loop is
    `loop` (the call runs on that loop, from the server's thread).

    Example::

        HealthServer(worker_health(worker, asyncio.get_running_loop()), port=8080)
    """
    if loop is None:
        health: Callable[[], dict[str, Any]] = worker.health
        return health

    def call() -> dict[str, Any]:
        report: dict[str, Any] = asyncio.run_coroutine_threadsafe(
            worker.health(), loop).result(TIMEOUT)
        return report

    return call


def worker_running(worker: Any) -> bool:
    """True while `worker` runs and is not stopping (the /ready answer).

    Example::

        worker_running(worker)
    """
    return bool(worker.running)


def serve_health(worker: Any, *, port: int = 0, host: str = "127.0.0.1",
                 loop: asyncio.AbstractEventLoop | None = None) -> HealthServer:
    """A HealthServer for `worker` (not started: use `with` or `.start()`). For a
    tenure.aio.AsyncWorker pass the event loop it runs on.

    Example::

        with serve_health(worker, port=8080):
            worker.run()
    """
    return HealthServer(worker_health(worker, loop), host=host, port=port,
                        ready=lambda: worker_running(worker))
