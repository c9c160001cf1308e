"""The server under the plain-path tests: the real Listener on 127.0.0.1, in process.

A tiny application serves ``POST /hot`` both ways: its plain handler (:class:`Hot`) answers
``plain:<body>``, its aiohttp route ``aiohttp:<body>``, so each answer says which path served
it. :func:`run` runs a test's coroutine on the loop the ``event_loop_kind`` fixture chose.
The tests of the plain path and of the aiohttp adapter share it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvloop
from aiohttp import web

from ledger.client.framing import Response, ResponseParser
from ledger.http.http1 import RequestHead
from ledger.http.plain import PlainRoutes, plain_response
from ledger.http.server import Listener, ServerLimits
from ledger.process.event_loop import UVLOOP

__all__ = ["HOST", "Hot", "chunked", "connect", "on_loop", "port_of", "post", "read_answers",
           "run", "serving"]

HOST = "127.0.0.1"


@dataclass
class Hot:
    """The plain handler, with a gate that holds its answers while a test looks."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: list[bytes] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    fail: bool = False

    async def handle(self, head: RequestHead, body: bytes) -> bytes:
        self.started.append(body)
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("secret-detail")
        return plain_response(200, b"plain:" + body, content_type="text/plain")


async def _aiohttp_hot(request: web.Request) -> web.Response:
    return web.Response(text="aiohttp:" + (await request.read()).decode())


async def _other(request: web.Request) -> web.Response:
    return web.Response(text="other")


@asynccontextmanager
async def serving(hot: Hot, limits: ServerLimits | None = None, *, max_connections: int = 64,
                  extra: Callable[[web.Application], None] | None = None
                  ) -> AsyncIterator[Listener]:
    """The test server; ``extra`` adds routes or middlewares to its application."""
    app = web.Application(client_max_size=1024)
    app.router.add_post("/hot", _aiohttp_hot)
    app.router.add_get("/other", _other)
    if extra is not None:
        extra(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
    await runner.setup()
    assert runner.server is not None
    routes = PlainRoutes({("POST", "/hot"): hot.handle}, max_body=1024,
                         unfinished=lambda head, status, seconds: hot.unfinished.append(status))
    listener = Listener(runner.server, limits or ServerLimits(),
                        max_connections=max_connections, plain=routes)
    await listener.start(HOST, 0)
    try:
        yield listener
    finally:
        await listener.close()
        await runner.cleanup()


def port_of(listener: Listener) -> int:
    return int(listener._sockets[0].getsockname()[1])


def post(body: bytes, *extra: str) -> bytes:
    lines = ["POST /hot HTTP/1.1", "Host: x", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body: bytes) -> bytes:
    return (b"POST /hot HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[Response]:
    parser = ResponseParser(max_body=1 << 20)
    out: list[Response] = []
    while len(out) < count:
        data = await asyncio.wait_for(reader.read(65536), 10)
        if not data:
            break
        parser.feed(data)
        while (resp := parser.next()) is not None:
            out.append(resp)
    return out


async def connect(listener: Listener) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client connection to the test server."""
    return await asyncio.open_connection(HOST, port_of(listener))


_loop_factory: list[Callable[[], asyncio.AbstractEventLoop] | None] = [None]


@contextmanager
def on_loop(kind: str) -> Iterator[None]:
    """Meanwhile :func:`run` runs its test on ``kind``'s event loop: asyncio's or uvloop (the
    servers' own choice where it is installed). The ``event_loop_kind`` fixture takes both."""
    _loop_factory[0] = uvloop.new_event_loop if kind == UVLOOP else None
    try:
        yield
    finally:
        _loop_factory[0] = None


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=_loop_factory[0]) as runner:
        runner.run(test())
