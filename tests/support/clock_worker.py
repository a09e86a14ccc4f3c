"""A client process on a stepped wall clock (see faketime.py), for the stores whose clock is
their client's (sqlite, file, memory, azblob): the test steps the clock of this process, not its
own, and drives it with one command a line on stdin, each answered by one JSON line:

    take NAME      {"token": T, "before": µs, "after": µs}  try_acquire (null token: refused);
                   before/after are this process's wall clock around the grant
    release NAME   {"released": true|false}
    prune IDLE     {"forgotten": N}    (`store.prune(IDLE)`; {"prunes": false} when it has none)
    now            {"now": µs}
    prunes         {"prunes": true|false}

    python clock_worker.py URL API [OPTIONS]   (API: sync or async; OPTIONS: JSON, for connect)

It first answers {"ready": true}, or {"refused": "..."} when connect() refused an option.

One store for the process's life, so memory:// keeps its names between commands. Errors are
answered as {"error": "..."} and the process goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import time
from typing import Any

import tenure
import tenure.aio
from tenure._async.stores._protocol import prunes


def wall_us() -> int:
    return time.time_ns() // 1000


def main() -> None:
    url, api = sys.argv[1], sys.argv[2]
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    loop = asyncio.new_event_loop()

    def run(value: Any) -> Any:
        return loop.run_until_complete(value) if inspect.isawaitable(value) else value

    try:
        store = (tenure.aio if api == "async" else tenure).connect(url, **options)
    except tenure.InvalidArgument as exc:
        print(json.dumps({"refused": str(exc)}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    held: dict[str, Any] = {}
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        answer: dict[str, Any]
        try:
            if command == "take":
                before = wall_us()
                lease = run(store.lock(argument, ttl=15.0).try_acquire())
                after = wall_us()
                if lease is not None:
                    held[argument] = lease
                answer = {"token": None if lease is None else lease.token, "before": before,
                          "after": after}
            elif command == "release":
                answer = {"released": run(held.pop(argument).release())}
            elif command == "prune":
                if prunes(store.backend) is None:
                    answer = {"prunes": False}
                else:
                    answer = {"forgotten": run(store.prune(float(argument)))}
            elif command == "now":
                answer = {"now": wall_us()}
            elif command == "prunes":
                answer = {"prunes": prunes(store.backend) is not None}
            else:
                answer = {"error": f"unknown command {command!r}"}
        except Exception as exc:  # reported to the test, which fails with it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    for lease in held.values():
        run(lease.release())
    run(store.close())
    loop.close()


if __name__ == "__main__":
    main()
