"""A small asyncio TCP proxy per worker and store host, in front of the store, for network
faults: latency on the way to the store, a blackhole (bytes read and held in both directions
until it heals, as in a partition), resets (every open connection closed with RST, new ones
refused with RST) and a stall (nothing is read or forwarded any more, connections stay open: the
kernel still acknowledges what the client sends, which piles up unread, and no answer comes
back; a frozen pooler or a dropped route does that). No Docker, no root: it runs on a thread of
the chaos orchestrator.

`proxied_store` says whether a store is reached over TCP in a way a proxy can sit in front of
(redis://, postgresql://, mysql://, also with several hosts for the Redis quorum; azblob with a
connection string's http BlobEndpoint), and rewrites a worker's URL or connection string to
point at its proxies.

Example::

    host = ProxyHost()
    proxy = host.add("127.0.0.1", 6379)
    host.set_mode(proxy, "latency", latency=1.0)
    host.set_mode(proxy, "stall")
    host.set_mode(proxy, "normal")
    host.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from tenure._urls import parse_store_url

MODES = ("normal", "latency", "blackhole", "reset", "stall")
DEFAULT_PORTS = {"redis": 6379, "postgresql": 5432, "postgres": 5432, "mysql": 3306,
                 "mariadb": 3306}
CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
_BLOB_ENDPOINT = re.compile(r"(?i)(BlobEndpoint=)(http://)([^/;]+)")


@dataclass(frozen=True)
class ProxyTarget:
    """Where the store listens (one or more host:port, one proxy each), and how to point a
    worker at proxies on `ports` instead (in the same order): the store URL and the environment
    variables to give the worker."""

    addresses: tuple[tuple[str, int], ...]
    rewrite: Callable[[Sequence[int]], tuple[str, dict[str, str]]]

    @property
    def host(self) -> str:
        return self.addresses[0][0]

    @property
    def port(self) -> int:
        return self.addresses[0][1]


def proxied_store(url: str, environ: dict[str, str]) -> ProxyTarget | str:
    """The store's TCP target, or why a proxy cannot sit in front of it.

    Example::

        target = proxied_store("redis://127.0.0.1:6379/0", {})
        target.rewrite([40001])   # ("redis://127.0.0.1:40001/0", {})
    """
    scheme = parse_store_url(url).scheme
    if scheme in ("file", "sqlite", "memory"):
        return f"{scheme}:// is not reached over the network"
    if scheme == "azblob":
        return _azblob_target(url, environ)
    if scheme not in DEFAULT_PORTS:
        return f"{scheme}:// (TLS or a unix socket) cannot be proxied: hostnames are verified"
    parts = urlsplit(url)
    if "host=" in parts.query:
        return "a host given in the URL's query is not proxied"
    userinfo, _, hosts = parts.netloc.rpartition("@")
    if "," in hosts and scheme != "redis":
        return "several hosts in one URL are proxied for the Redis quorum only"
    addresses = []
    for host_port in hosts.split(","):
        try:
            one = urlsplit(f"//{host_port}")
            host, port = one.hostname, one.port or DEFAULT_PORTS[scheme]
        except ValueError:
            return "the URL's port is not a number"
        if not host:
            return f"{scheme}:// without a host (a unix socket) is not reached over TCP"
        addresses.append((host, port))

    def rewrite(proxy_ports: Sequence[int]) -> tuple[str, dict[str, str]]:
        netloc = (f"{userinfo}@" if userinfo else "") + ",".join(
            f"127.0.0.1:{port}" for port in proxy_ports)
        return urlunsplit(parts._replace(netloc=netloc)), {}

    return ProxyTarget(tuple(addresses), rewrite)


def _azblob_target(url: str, environ: dict[str, str]) -> ProxyTarget | str:
    account = parse_store_url(url).location.split("/")[0]
    connection_string = environ.get(CONNECTION_STRING, "")
    match = _BLOB_ENDPOINT.search(connection_string)
    if account or match is None:
        return ("azblob is proxied only with a connection string whose BlobEndpoint is "
                "http://HOST:PORT (Azurite); https endpoints verify their hostname")
    host, _, port = match.group(3).partition(":")

    def rewrite(proxy_ports: Sequence[int]) -> tuple[str, dict[str, str]]:
        rewritten = _BLOB_ENDPOINT.sub(rf"\g<1>\g<2>127.0.0.1:{proxy_ports[0]}",
                                       connection_string, count=1)
        return url, {CONNECTION_STRING: rewritten}

    return ProxyTarget(((host, int(port or 80)),), rewrite)


class Proxy:
    """One listening port forwarding to the store; lives on the ProxyHost's event loop."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.mode = "normal"
        self.latency = 0.0
        self.port = 0
        self._flowing = asyncio.Event()  # cleared: a blackhole reads and holds
        self._flowing.set()
        self._reading = asyncio.Event()  # cleared: a stall reads nothing any more
        self._reading.set()
        self._sockets: set[asyncio.StreamWriter] = set()
        self._connections: set[asyncio.Task[None]] = set()  # the _accept tasks still running
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def set_mode(self, mode: str, latency: float = 0.0) -> None:
        self.mode, self.latency = mode, latency
        for event, stopped in ((self._flowing, mode == "blackhole"),
                               (self._reading, mode == "stall")):
            if stopped:
                event.clear()
            else:
                event.set()
        if mode == "reset":
            for writer in list(self._sockets):
                _reset(writer)

    async def _accept(self, client_reader: asyncio.StreamReader,
                      client_writer: asyncio.StreamWriter) -> None:
        if self.mode == "reset":
            _reset(client_writer)
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
        try:
            store_reader, store_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(client_writer)
            return
        pair = {client_writer, store_writer}
        self._sockets |= pair
        try:
            await asyncio.gather(self._pump(client_reader, store_writer, to_store=True),
                                 self._pump(store_reader, client_writer, to_store=False))
        except asyncio.CancelledError:
            # close() ends it: return quietly (asyncio's server logs a connection task that
            # ended cancelled as an error)
            pass
        finally:
            self._sockets -= pair
            for writer in pair:
                writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    to_store: bool) -> None:
        try:
            while True:
                await self._reading.wait()  # a stall leaves the bytes in the kernel's buffers
                data = await reader.read(65536)
                if not data:
                    break
                await self._reading.wait()  # nor forwards what was read when it began
                await self._flowing.wait()  # a blackhole holds the bytes until it heals
                if to_store and self.mode == "latency":
                    await asyncio.sleep(self.latency)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for end in (writer,):
                with contextlib.suppress(OSError, RuntimeError):
                    if end.can_write_eof():
                        end.write_eof()

    async def close(self) -> None:
        """Stop listening and end every connection, its pumps included (a pump held by a
        blackhole or a stall would otherwise be destroyed pending when the loop stops)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._sockets):
            writer.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a middlebox resetting the connection does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ProxyHost:
    """An event loop on a daemon thread that runs every proxy of a run.

    Example::

        host = ProxyHost()
        proxy = host.add("127.0.0.1", 5432)   # proxy.port: where the worker connects
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxies",
                                        daemon=True)
        self._thread.start()
        self.proxies: list[Proxy] = []

    def add(self, host: str, port: int) -> Proxy:
        """A new proxy to host:port, listening on a free loopback port."""

        async def start() -> Proxy:
            proxy = Proxy(host, port)
            await proxy.start()
            return proxy

        proxy = asyncio.run_coroutine_threadsafe(start(), self._loop).result(timeout=10)
        self.proxies.append(proxy)
        return proxy

    def set_mode(self, proxy: Proxy, mode: str, latency: float = 0.0) -> None:
        """Switch a proxy to normal, latency (seconds per chunk to the store), blackhole, reset
        (open connections are reset now, new ones until the mode changes) or stall (nothing read
        or forwarded; connections stay open, new ones are accepted and wait too)."""
        if mode not in MODES:
            raise ValueError(f"proxy mode must be one of {', '.join(MODES)}, got {mode!r}")

        async def switch() -> None:
            proxy.set_mode(mode, latency)

        asyncio.run_coroutine_threadsafe(switch(), self._loop).result(timeout=10)

    def close(self) -> None:
        """Close every proxy and stop the loop (again: nothing)."""

        async def close_all() -> None:
            for proxy in self.proxies:
                await proxy.close()

        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
