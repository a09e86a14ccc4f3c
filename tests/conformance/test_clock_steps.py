"""Tokens when the store's wall clock steps back (docs: "a token is at least the store's clock
in microseconds at the grant and greater than any token the store remembers for the name").

- A name the store still remembers gets a larger token however far the clock stepped back.
- A name the store forgot (`store.prune(0)`, or `retain=0` at its release), or never saw, gets a
  token that is at least the store's clock at the grant: after a step back longer than the
  name's quiet time, that token is smaller than the name's earlier ones, by at most the step.
  This is the documented bound. (A forgotten name taken again with no step gets a larger token:
  test_pruning.py.)

The clock stepped is the one the store's tokens come from: the server's (Redis TIME, PostgreSQL
now(), MariaDB UTC_TIMESTAMP(6)) for a server store, a server of its own started for this module
on a clock the test steps (tests/support/faketime.py: the preload shim wallclock_shift.c); the
client's for sqlite, file, memory and azblob (a blob created afresh
starts its sequence number at the client's clock; Azurite only increments it), so the grants
run in a client process on a stepped clock (clock_worker.py).
Each runs through both APIs: the token is computed by the same server script or the same
generated code for both, and running both costs little here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import STORE_KINDS, StoreKind, call
from faketime import (
    FakedMariaDBServer,
    FakedPostgresServer,
    FakedRedisServer,
    SteppedClock,
    real_us,
    stop_all,
)
from servers import ServiceMissing, service_missing
from waiting import eventually, wait_until

from tenure._async.stores._protocol import prunes

pytestmark = pytest.mark.anyio

# Seconds the clock steps back: far more than a test's quiet time (so a forgotten name's token
# goes back), less than the default retain (an hour), and more than this module's servers have
# been up (a step back longer than its uptime makes Redis's INFO uptime negative, which the
# restart grace must not trust).
STEP = 600
WORKER = Path(__file__).parents[1] / "support" / "clock_worker.py"

@dataclass
class ClockServer:
    """Servers of one store on a SteppedClock, the environment their URLs are made from, and
    how to read the clock the tokens come from."""

    clock: SteppedClock
    servers: list[Any]
    environ: dict[str, str]

    def clock_us(self) -> int:
        return min(server.clock_us() for server in self.servers)


def _clock_server(factory: pytest.TempPathFactory, make: Any, count: int, variable: str,
                  address: Any) -> Iterator[ClockServer]:
    clock, servers = None, []
    try:
        try:
            clock = SteppedClock()
            for _ in range(count):
                servers.append(make(factory.mktemp(f"{make.name}-"), clock))
                servers[-1].start()
        except ServiceMissing as exc:
            service_missing(str(exc))
        yield ClockServer(clock, servers, {variable: address(servers)})
    finally:
        stop_all(*servers, *([clock] if clock else []))


def _redis_ready(servers: list[FakedRedisServer]) -> None:
    for server in servers:
        server.wait_past_restart_grace()


@pytest.fixture(scope="module")
def faked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClockServer]:
    for served in _clock_server(tmp_path_factory, FakedRedisServer, 1, "TENURE_TEST_REDIS_URL",
                                lambda servers: servers[0].url):
        _redis_ready(served.servers)
        yield served


@pytest.fixture(scope="module")
def faked_redis_masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClockServer]:
    for served in _clock_server(
            tmp_path_factory, FakedRedisServer, 3, "TENURE_TEST_REDIS_QUORUM_URL",
            lambda servers: "redis://" + ",".join(f"127.0.0.1:{s.port}" for s in servers) + "/0"):
        _redis_ready(served.servers)
        yield served


@pytest.fixture(scope="module")
def faked_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClockServer]:
    yield from _clock_server(tmp_path_factory, FakedPostgresServer, 1, "TENURE_TEST_POSTGRES_URL",
                             lambda servers: servers[0].url)


@pytest.fixture(scope="module")
def faked_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClockServer]:
    yield from _clock_server(tmp_path_factory, FakedMariaDBServer, 1, "TENURE_TEST_MYSQL_URL",
                             lambda servers: servers[0].url)


@dataclass
class Grant:
    token: int
    before: int  # the store's clock (µs) just before the grant was asked for
    after: int  # ... and just after it was answered


class ServerClocked:
    """A store on a server of its own on a stepped clock, used from this process."""

    def __init__(self, kind: StoreKind, api: str, served: ClockServer, tmp: Path,
                 monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> None:
        import tenure
        import tenure.aio

        with monkeypatch.context() as patched:
            for variable, value in served.environ.items():
                patched.setenv(variable, value)
            self.url = kind.make_url(tmp)
        self.kind, self.served, self.clock = kind, served, served.clock
        self.held: dict[str, Any] = {}
        try:
            self.store = (tenure.aio if api == "async" else tenure).connect(self.url, **options)
        except tenure.InvalidArgument as exc:
            raise Refused(str(exc)) from exc

    def clock_us(self) -> int:
        return self.served.clock_us()

    async def take(self, name: str) -> Grant:
        before = self.clock_us()
        lease = await call(self.store.lock(name, ttl=15.0).try_acquire())
        after = self.clock_us()
        assert lease is not None, f"the free name {name!r} was refused"
        self.held[name] = lease
        return Grant(lease.token, before, after)

    async def release(self, name: str) -> None:
        assert await call(self.held.pop(name).release()) is True
        # The quorum store's release returns at its quorum and goes on at the other masters:
        # a step of the clock before one of them ran the release would make that master keep
        # the name (its counter is then ahead of its clock, see the Redis scripts' KEEP).
        masters = getattr(self.store.backend, "_masters", None)
        if masters is not None:
            await eventually(lambda: masters.unfinished() == 0, 10, "the release at every master")

    def prunes(self) -> bool:
        return prunes(self.store.backend) is not None

    async def prune(self, idle: float) -> int:
        return int(await call(self.store.prune(idle)))

    async def close(self) -> None:
        for lease in self.held.values():
            await call(lease.release())
        await call(self.store.close())


class ClientClocked:
    """A store whose clock is its client's, used from a client process on a stepped clock."""

    def __init__(self, kind: StoreKind, api: str, tmp: Path, options: dict[str, Any]) -> None:
        self.kind, self.clock = kind, SteppedClock()
        try:
            stepped = self.clock.environment()
        except ServiceMissing:
            self.clock.cleanup()
            raise
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), kind.make_url(tmp), api, json.dumps(options)],
            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, **stepped})
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        started: dict[str, Any] = json.loads(line) if line else {"error": "no answer"}
        if "refused" in started:
            self.close()
            raise Refused(started["refused"])
        assert started.get("ready") is True, f"the client process did not start: {started}"

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the client process died at {command!r} ({self.process.poll()})"
        answer: dict[str, Any] = json.loads(line)
        assert "error" not in answer, f"{command}: {answer['error']}"
        return answer

    def clock_us(self) -> int:
        return int(self.ask("now")["now"])

    async def take(self, name: str) -> Grant:
        answer = self.ask(f"take {name}")
        assert answer["token"] is not None, f"the free name {name!r} was refused"
        return Grant(answer["token"], answer["before"], answer["after"])

    async def release(self, name: str) -> None:
        assert self.ask(f"release {name}")["released"] is True

    def prunes(self) -> bool:
        return bool(self.ask("prunes")["prunes"])

    async def prune(self, idle: float) -> int:
        return int(self.ask(f"prune {idle}")["forgotten"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.clock.cleanup()


Clocked = ServerClocked | ClientClocked


class Refused(Exception):
    """The store refused an option of connect() (tenure.InvalidArgument, maybe in the client)."""


@pytest.fixture(params=STORE_KINDS, ids=lambda kind: kind.name)
def clock_kind(request: pytest.FixtureRequest) -> StoreKind:
    kind: StoreKind = request.param
    if kind.clock_server is None:
        kind.start_service(request)  # its server (Azurite) keeps the real clock
    return kind


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[Any, ClientClocked]]:
    """The client processes of this module, one per store and API (each test uses names of its
    own): starting one costs seconds on a loaded machine."""
    started: dict[Any, ClientClocked] = {}
    yield started
    for client in started.values():
        client.close()


@pytest.fixture(params=["sync", "async"])
async def open_clocked(request: pytest.FixtureRequest, clock_kind: StoreKind, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch,
                       clients: dict[Any, ClientClocked]) -> AsyncIterator[Any]:
    """`open(**options)`: the store of `clock_kind`, connected with `options` through one API,
    on a clock the test can step (Refused when the store refuses an option)."""
    opened: list[Clocked] = []

    def open_store(**options: Any) -> Clocked:
        tmp = tmp_path / str(len(opened))  # a store of its own for each open
        tmp.mkdir()
        if clock_kind.clock_server is None:
            key = (clock_kind.name, request.param, json.dumps(options, sort_keys=True))
            if key not in clients:
                try:
                    clients[key] = ClientClocked(clock_kind, request.param, tmp, options)
                except ServiceMissing as exc:  # no C compiler for the shim
                    service_missing(str(exc))
            opened.append(clients[key])
        else:
            served = request.getfixturevalue(clock_kind.clock_server)
            opened.append(ServerClocked(clock_kind, request.param, served, tmp, monkeypatch,
                                        options))
        return opened[-1]

    try:
        yield open_store
    finally:
        for used in opened:
            used.clock.reset()
            if isinstance(used, ServerClocked):  # client processes last the module
                await used.close()


@pytest.fixture
def clocked(open_clocked: Any) -> Clocked:
    """The store of `clock_kind` through one API, on a clock the test can step."""
    store: Clocked = open_clocked()
    return store


def step_back(clocked: Clocked, seconds: int) -> None:
    """Step the store's clock back, and wait until the store reads it (never assume it did)."""
    clocked.clock.step_back(seconds)
    wait_until(lambda: clocked.clock_us() < real_us() - (seconds - 5) * 1_000_000, timeout=10,
               what=f"the store's clock to read {seconds} s behind")




async def test_a_remembered_name_gets_a_larger_token_after_the_clock_steps_back(
        clocked: Clocked) -> None:
    first = await clocked.take("invoice-1")
    await clocked.release("invoice-1")
    step_back(clocked, STEP)
    again = await clocked.take("invoice-1")
    assert again.before < first.token, (
        f"the clock at the grant ({again.before}) is not behind the first token ({first.token}):"
        " the step did not reach the store (or the first token was not from its clock)")
    assert again.token > first.token, (
        f"token {again.token} after token {first.token}: the store forgot its counter, or did "
        f"not use it, when its clock stepped back {STEP} s")


async def test_a_forgotten_name_gets_at_least_the_clock_after_it_steps_back(
        clocked: Clocked) -> None:
    assert clocked.prunes(), "every store can forget names (prune)"
    first = await clocked.take("invoice-2")
    await clocked.release("invoice-2")
    assert await clocked.prune(0) >= 1, "prune(0) forgot nothing, yet invoice-2 was free"
    step_back(clocked, STEP)
    again = await clocked.take("invoice-2")
    unstepped = real_us()
    assert again.token >= again.before, (
        f"token {again.token} is below the store's clock at the grant ({again.before} µs): after "
        "forgetting, a token is at least the store's clock in µs at the grant")
    # The bound is all there is: the clock stepped back further than the name was quiet, so the
    # token went back, and by no more than the step.
    assert again.token < unstepped, f"token {again.token} is not from the stepped clock"
    assert first.token - STEP * 1_000_000 < again.token < first.token, (
        f"first token {first.token}, after forgetting and a {STEP} s step back {again.token}")


async def test_a_name_never_seen_gets_at_least_the_clock_after_it_steps_back(
        clocked: Clocked) -> None:
    step_back(clocked, STEP)
    grant = await clocked.take("never-seen")
    assert grant.token >= grant.before, (
        f"token {grant.token} is below the store's clock at the grant ({grant.before} µs)")
    assert grant.token < real_us(), f"token {grant.token} is not from the stepped clock"


async def test_a_name_forgotten_at_release_gets_at_least_the_clock_after_it_steps_back(
        open_clocked: Any) -> None:
    clocked = open_clocked(retain=0)  # forget a name at its release
    first = await clocked.take("invoice-3")
    await clocked.release("invoice-3")
    step_back(clocked, STEP)
    again = await clocked.take("invoice-3")
    unstepped = real_us()
    assert again.token >= again.before, (
        f"token {again.token} is below the store's clock at the grant ({again.before} µs)")
    assert again.token < unstepped, f"token {again.token} is not from the stepped clock"
    assert first.token - STEP * 1_000_000 < again.token < first.token, (
        f"first token {first.token}, after retain=0 and a {STEP} s step back {again.token}: "
        "a token above the first means the name was not forgotten at its release")
