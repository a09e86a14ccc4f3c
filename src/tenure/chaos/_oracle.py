"""The oracle: the protected resource, a separate single-threaded process holding one counter per
lock name and slot. Every read and write is handled to completion one at a time and recorded in
the history with the oracle's clock, so the history's order of effects is the true one.

In fenced mode the oracle refuses a write whose token is lower than the highest token it has
seen for that counter (on a read or a write): what a fenced resource does. Without fencing it
accepts every write and only records.

    python -m tenure.chaos._oracle '{"history": PATH, "fencing": true}'

prints `{"port": N}` once it listens on 127.0.0.1:N. The protocol is one JSON object per line
each way: `read`, `write`, `state` (the counters) and `stop`.

Example::

    oracle = Oracle.start(history_path, fencing=True, log=log_path)
    client = OracleClient(oracle.port, "worker-1")
    value = client.read("chaos", slot=0, token=17)
    accepted = client.write("chaos", slot=0, token=17, value=value + 1)
    oracle.stop()
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tenure.chaos._history import HistoryWriter
from tenure.chaos._lifeline import Lifeline, watch_parent


@dataclass
class Counter:
    """One protected value: its lock name and slot, the value, and what the oracle saw."""

    name: str
    slot: int
    value: int = 0
    highest: int = 0  # the highest token seen on a read or a write
    accepted: int = 0
    rejected: int = 0


class OracleServer:
    """The oracle's state and its request handling (one event loop, one thread)."""

    def __init__(self, history: HistoryWriter, fencing: bool) -> None:
        self.history = history
        self.fencing = fencing
        self.counters: dict[tuple[str, int], Counter] = {}
        self.seq = 0
        self.stopped = asyncio.Event()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one request; nothing awaits in here, so requests never interleave."""
        op = request.get("op")
        if op == "state":
            return {"counters": [asdict(c) for c in self.counters.values()]}
        if op == "stop":
            for counter in self.counters.values():
                self._record("info", "final", "oracle", counter, None, value=counter.value,
                             accepted=counter.accepted, rejected=counter.rejected)
            self.stopped.set()
            return {"stopped": True}
        name, slot, token = str(request["name"]), int(request["slot"]), int(request["token"])
        process = str(request["process"])
        counter = self.counters.setdefault((name, slot), Counter(name, slot))
        if op == "read":
            counter.highest = max(counter.highest, token)
            self._record("ok", "read", process, counter, token, value=counter.value)
            return {"value": counter.value}
        if op == "write":
            if self.fencing and token < counter.highest:
                counter.rejected += 1
                self._record("fail", "write", process, counter, token,
                             value=int(request["value"]), error="stale token",
                             highest=counter.highest)
                return {"accepted": False}
            counter.highest = max(counter.highest, token)
            counter.value = int(request["value"])
            counter.accepted += 1
            self._record("ok", "write", process, counter, token, value=counter.value)
            return {"accepted": True}
        return {"error": f"unknown op {op!r}"}

    def _record(self, type_: str, f: str, process: str, counter: Counter, token: int | None,
                **fields: Any) -> None:
        self.seq += 1
        self.history.emit(type_, f, process=process, by="oracle", seq=self.seq,
                          name=counter.name, slot=counter.slot, token=token, **fields)

    async def serve_client(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                answer = self.handle(json.loads(line))
                writer.write((json.dumps(answer) + "\n").encode())
                await writer.drain()
        except (ConnectionError, json.JSONDecodeError):
            pass  # a killed worker; its effects so far are recorded
        finally:
            writer.close()


async def _serve(settings: dict[str, Any]) -> None:
    history = HistoryWriter(Path(settings["history"]), "oracle")
    oracle = OracleServer(history, bool(settings["fencing"]))
    server = await asyncio.start_server(oracle.serve_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"port": port}), flush=True)
    async with server:
        await oracle.stopped.wait()
    history.close()


@dataclass
class Oracle:
    """The oracle process, seen from the orchestrator."""

    process: subprocess.Popen[bytes]
    port: int

    @classmethod
    def start(cls, history: Path, fencing: bool, log: Path, timeout: float = 30.0,
              lifeline: Lifeline | None = None) -> Oracle:
        """Start the oracle process and wait until it listens (with a `lifeline`, it exits
        soon after this process, however this one ends)."""
        settings = json.dumps({"history": str(history), "fencing": fencing})
        options = {} if lifeline is None else lifeline.child_options()
        with log.open("ab") as errors:
            process = subprocess.Popen([sys.executable, "-m", "tenure.chaos._oracle", settings],
                                       stdout=subprocess.PIPE, stderr=errors,
                                       start_new_session=True, **options)
        if lifeline is not None:
            lifeline.adopt(process.pid)
        assert process.stdout is not None
        # Blocks until the first line (the port) or EOF: no polling needed.
        line = process.stdout.readline()
        if not line:
            process.wait(timeout)
            raise RuntimeError(f"the chaos oracle exited with {process.returncode}; see {log}")
        return cls(process, int(json.loads(line)["port"]))

    def counters(self) -> list[Counter]:
        """The oracle's counters now."""
        answer = OracleClient(self.port, "nemesis").call({"op": "state"})
        return [Counter(**fields) for fields in answer["counters"]]

    def stop(self, timeout: float = 10.0) -> None:
        """Record the final values in the history, then stop the process."""
        if self.process.poll() is None:
            try:
                OracleClient(self.port, "nemesis").call({"op": "stop"})
                self.process.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


class OracleClient:
    """A worker's blocking connection to the oracle."""

    def __init__(self, port: int, process: str) -> None:
        self.process = process
        self._socket = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._file = self._socket.makefile("rwb")

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        self._file.write((json.dumps(request) + "\n").encode())
        self._file.flush()
        line = self._file.readline()
        if not line:
            raise ConnectionError("the chaos oracle closed the connection")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def read(self, name: str, slot: int, token: int) -> int:
        """The counter's value (the oracle notes the token)."""
        answer = self.call({"op": "read", "name": name, "slot": slot, "token": token,
                            "process": self.process})
        return int(answer["value"])

    def write(self, name: str, slot: int, token: int, value: int) -> bool:
        """Set the counter; False when the oracle refused a stale token."""
        answer = self.call({"op": "write", "name": name, "slot": slot, "token": token,
                            "value": value, "process": self.process})
        return bool(answer["accepted"])

    def close(self) -> None:
        self._file.close()
        self._socket.close()


if __name__ == "__main__":
    watch_parent()  # exit soon after the chaos run, even one killed with SIGKILL
    asyncio.run(_serve(json.loads(sys.argv[1])))
