"""ledger/http/aiohttp_adapter.py: a connection handed over to aiohttp, and what the server
reads from aiohttp's internals to keep its limits on it.

pyproject.toml pins aiohttp to the minor versions these tests have passed on: the adapter reads
``RequestHandler`` attributes aiohttp does not promise to keep. Each test runs on asyncio's
loop and on uvloop, against the real Listener on 127.0.0.1 (tests/ledger/http/plain_server.py
has the application: ``POST /hot`` answered ``plain:<body>`` on the plain path and
``aiohttp:<body>`` by aiohttp).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import web

from ledger.http.aiohttp_adapter import AiohttpConnection, close_unread
from ledger.http.errors import RequestBodyTimeout, error_middleware
from ledger.http.server import ServerLimits
from tests.ledger.http.plain_server import Hot, chunked, connect, post, read_answers, run, serving

pytestmark = pytest.mark.usefixtures("event_loop_kind")  # every test on both loops

GET_OTHER = b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    out = b""
    while chunk := await asyncio.wait_for(reader.read(65536), 10):
        out += chunk
    return out


def test_a_hand_over_in_mid_pipeline_then_keep_alive() -> None:
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"1") + post(b"2") + GET_OTHER + post(b"3") + chunked(b"4"))
            answers = await read_answers(reader, 5)
            assert [r.body for r in answers] == [b"plain:1", b"plain:2", b"other",
                                                 b"aiohttp:3", b"aiohttp:4"]
            (conn,) = listener._open
            assert conn.handed_over
            for i in range(3):  # the connection stays open, and aiohttp's
                await asyncio.sleep(0.05)
                writer.write(post(str(i).encode()))
                (answer,) = await read_answers(reader, 1)
                assert answer.body == f"aiohttp:{i}".encode() and answer.keep_alive
            assert hot.started == [b"1", b"2"]
            writer.close()

    run(main)


def test_a_request_split_across_the_hand_over() -> None:
    """Whatever the reads look like, aiohttp gets every byte from the first request that is not
    plain, once and in order: the hand-over happens at a read that ends anywhere in that
    request, or in the plain one after it."""
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        data = post(b"a") + chunked(b"bcd") + post(b"e")
        async with serving(hot) as listener:
            for cut in range(len(post(b"a")), len(data)):
                reader, writer = await connect(listener)
                writer.write(data[:cut])
                await writer.drain()
                await asyncio.sleep(0.005)
                writer.write(data[cut:])
                answers = await read_answers(reader, 3)
                assert [r.body for r in answers] == [b"plain:a", b"aiohttp:bcd",
                                                     b"aiohttp:e"], cut
                writer.close()

    run(main)


def test_the_connection_limit_counts_both_kinds() -> None:
    """Three connections allowed: one held on the plain path and one by aiohttp, each with a
    request in progress, and one idle. At the limit the idle one is closed to make room, and
    neither busy one, whichever side has it."""
    gate = asyncio.Event()
    slow_started = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        slow_started.set()
        await gate.wait()
        return web.Response(text="slow")

    async def main() -> None:
        hot = Hot()
        async with serving(hot, max_connections=3,
                           extra=lambda app: app.router.add_get("/slow", slow)) as listener:
            plain_r, plain_w = await connect(listener)
            plain_w.write(post(b"p"))
            aio_r, aio_w = await connect(listener)
            aio_w.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.wait_for(slow_started.wait(), 10)
            while not hot.started:
                await asyncio.sleep(0.01)
            assert sorted(c.handed_over for c in listener._open) == [False, True]
            idle_r, idle_w = await connect(listener)
            assert await asyncio.wait_for(idle_r.read(), 10) == b""  # closed: the room
            assert listener.evicted == 1 and listener.open_connections == 2
            hot.gate.set()
            gate.set()
            assert [r.body for r in await read_answers(plain_r, 1)] == [b"plain:p"]
            assert [r.body for r in await read_answers(aio_r, 1)] == [b"slow"]
            for w in (plain_w, aio_w, idle_w):
                w.close()

    run(main)


def _reads_body(seen: list[str]) -> object:
    async def handler(request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except RequestBodyTimeout as e:
            seen.append(type(e).__name__)
            raise
        return web.Response(text=f"read {len(body)}")
    return handler


def test_timeouts_after_the_hand_over() -> None:
    """A handed-over connection keeps the server's timeouts: a body that never arrives ends
    the read with RequestBodyTimeout (answered 408 by the error middleware), a head that
    never ends is a 408, an idle connection is closed; a handler slower than the idle time is
    not cut short."""
    seen: list[str] = []

    async def sleepy(request: web.Request) -> web.Response:
        await asyncio.sleep(0.6)
        return web.Response(text="late")

    def extra(app: web.Application) -> None:
        app.middlewares.append(error_middleware)
        app.router.add_post("/read", _reads_body(seen))  # type: ignore[arg-type]
        app.router.add_get("/sleepy", sleepy)

    async def main() -> None:
        limits = ServerLimits(keepalive_timeout=0.3, header_timeout=0.3, body_timeout=0.3)
        async with serving(Hot(), limits, extra=extra) as listener:
            reader, writer = await connect(listener)
            writer.write(GET_OTHER + b"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n"
                         b"\r\nabc")
            raw = await _read_until_closed(reader)
            assert raw.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 408 " in raw
            assert json.loads(raw.rsplit(b"\r\n\r\n", 1)[1])["error"]["code"] == (
                "request_timeout")
            assert seen == ["RequestBodyTimeout"]

            reader, writer = await connect(listener)
            writer.write(GET_OTHER)
            await read_answers(reader, 1)
            writer.write(b"GET /other HTTP/1.1\r\nHost:")
            raw = await _read_until_closed(reader)
            assert raw.startswith(b"HTTP/1.1 408 Request Timeout")
            assert b"the request head did not arrive within 0.3 s" in raw

            reader, writer = await connect(listener)
            writer.write(b"GET /sleepy HTTP/1.1\r\nHost: x\r\n\r\n")
            started = time.monotonic()
            raw = await _read_until_closed(reader)  # answered, then closed once idle
            assert raw.startswith(b"HTTP/1.1 200 ") and raw.endswith(b"late")
            assert time.monotonic() - started >= 0.6
            assert listener.slow_clients == 2

    run(main)


def test_close_unread_and_protocol_errors() -> None:
    """close_unread closes after the answer without reading the rest of the body; a request
    aiohttp cannot parse is a JSON 400 that closes."""
    async def refuse(request: web.Request) -> web.Response:
        close_unread(request)
        assert isinstance(request.protocol, AiohttpConnection)
        return web.Response(status=429, text="wait")

    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        async with serving(hot, extra=lambda app: app.router.add_post("/refuse",
                                                                     refuse)) as listener:
            reader, writer = await connect(listener)
            writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\nab")
            raw = await _read_until_closed(reader)
            assert raw.startswith(b"HTTP/1.1 429 ") and raw.endswith(b"wait")

            reader, writer = await connect(listener)
            writer.write(post(b"1") + b"GET /other HTTP/1.1\nHost: x\n\n")  # bare LF
            raw = await _read_until_closed(reader)
            first, second = raw.split(b"HTTP/1.")[1:]
            assert first.startswith(b"1 200 ") and second.startswith(b"0 400 ")  # aiohttp's
            assert json.loads(second.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "bad_request"

    run(main)
