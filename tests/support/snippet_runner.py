"""Runs documentation snippets in one namespace, in order: the subprocess side of
tests/first_hour/test_docs_snippets.py.

Reads a JSON list of parts from stdin, each {"path", "file", "line", "code", "role",
"drop_last"}: role "context" (an earlier block of the page), "setup" (hidden code from a
`<!-- snippet: setup -->` comment) or "subject" (the block under test; "START <path>:<line>"
is printed just before it runs, and "HANDLES SIGTERM" once something in it has set a handler
for SIGTERM, as a runs-forever block's `worker.run()` does). `drop_last` leaves out the last
top-level statement (a runs-forever block's `worker.run()` when the block is context for a later
one).
Each part is compiled with its own file name and line numbers, so a traceback points at the
markdown line. Top-level `await` / `async with` are allowed, as in `python -m asyncio`: such a
part runs in its own `asyncio.run`.

Example::

    echo '[{"path": "README.md", "line": 33, "code": "x = 1", "role": "subject"}]' \\
        | python tests/support/snippet_runner.py
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import linecache
import signal
import sys
import threading
import traceback
from typing import Any


def run_part(part: dict[str, Any], namespace: dict[str, Any]) -> None:
    path, line, code = part["path"], part["line"], part["code"]
    if path not in linecache.cache:  # tracebacks quote the markdown file's own lines
        with open(part["file"], encoding="utf-8") as file:
            text = file.read()
        linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    # Padded, so line numbers in tracebacks are the markdown file's (the code starts after
    # `line`).
    tree = compile("\n" * line + code, path, "exec",
                   flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if part.get("drop_last"):
        tree.body = tree.body[:-1]
    compiled = compile(tree, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


def say_when_sigterm_is_handled() -> None:
    """Print "HANDLES SIGTERM" once SIGTERM's handler is no longer the default (a daemon
    thread: the test sends SIGTERM only then, so it never races the block's start-up)."""
    def watch() -> None:
        while signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            threading.Event().wait(0.01)
        print("HANDLES SIGTERM", flush=True)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    parts = json.load(sys.stdin)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for part in parts:
        if part["role"] == "subject":
            print(f"START {part['path']}:{part['line']}", flush=True)
            say_when_sigterm_is_handled()
        try:
            run_part(part, namespace)
        except Exception as exc:
            # The traceback from the snippet's own frames on: this runner's say nothing.
            frames = exc.__traceback__
            while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
                frames = frames.tb_next
            traceback.print_exception(type(exc), exc, frames)
            print(f"in the {part['role']} part {part['path']}:{part['line']}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
