"""The server's plain path (ledger/http/server.py): which requests take it, and what holds when a
connection moves from it to aiohttp.

A tiny application serves ``POST /hot`` both ways: its plain handler answers ``plain:<body>``,
its aiohttp route ``aiohttp:<body>``, so each answer says which path served it. The server is the
real Listener on 127.0.0.1, in process (tests/ledger/http/plain_server.py), on asyncio's loop and
on uvloop.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ledger.http.server import ServerLimits
from tests.ledger.http.plain_server import Hot, chunked, connect, post, read_answers, run, serving

pytestmark = pytest.mark.usefixtures("event_loop_kind")  # every test on both loops


def test_plain_requests_take_the_plain_path_and_the_rest_go_to_aiohttp() -> None:
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            # Pipelined in one write: two plain, then one aiohttp must parse (chunked), then a
            # plain one that aiohttp now gets too, since the connection is its own from there.
            writer.write(post(b"a") + post(b"b") + chunked(b"c") + post(b"d")
                         + b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
            answers = await read_answers(reader, 5)
            assert [r.body for r in answers] == [b"plain:a", b"plain:b", b"aiohttp:c",
                                                 b"aiohttp:d", b"other"]
            assert all(r.status == 200 and r.keep_alive for r in answers)
            assert answers[0].headers[b"content-type"] == b"text/plain"
            assert set(answers[0].headers) == set(answers[2].headers)  # same header set
            writer.close()
            # Each of these goes to aiohttp from its first byte, and is answered as before.
            for data, want in ((post(b"e", "Content-Encoding: identity"), 200),
                               (post(b"x" * 2000), 413),
                               (post(b"h", "X-Big: " + "a" * 8100), 200),  # a long head
                               (post(b"f", "Connection: close"), 200),
                               (b"POST /hot HTTP/1.0\r\nContent-Length: 1\r\n\r\ng", 200)):
                reader, writer = await connect(listener)
                writer.write(data)
                (answer,) = await read_answers(reader, 1)
                assert answer.status == want
                assert want != 200 or answer.body.startswith(b"aiohttp:")
                writer.close()
            assert hot.started == [b"a", b"b"]

    run(main)


def test_expect_100_continue_is_answered_by_aiohttp() -> None:
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"") + post(b"xyz", "Expect: 100-continue")[:-3])
            raw = await asyncio.wait_for(reader.readuntil(b"HTTP/1.1 100 Continue\r\n\r\n"), 10)
            assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\n\r\nplain:HTTP/1.1 100 " in raw
            writer.write(b"xyz")
            assert [r.body for r in await read_answers(reader, 1)] == [b"aiohttp:xyz"]
            writer.close()

    run(main)


def test_answers_stay_in_request_order_while_a_plain_one_is_pending() -> None:
    async def main() -> None:
        hot = Hot()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"1") + b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.sleep(0.2)
            assert hot.started == [b"1"]  # aiohttp has not been given the GET yet
            hot.gate.set()
            assert [r.body for r in await read_answers(reader, 2)] == [b"plain:1", b"other"]
            writer.close()

    run(main)


def test_shutdown_waits_for_a_plain_request_in_progress() -> None:
    async def main() -> None:
        hot = Hot()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"late"))
            while not hot.started:
                await asyncio.sleep(0.01)
            asyncio.get_running_loop().call_later(0.3, hot.gate.set)
            answers = asyncio.create_task(read_answers(reader, 1))
        # The context's cleanup (listener close, runner cleanup) has run: the answer came.
        assert [r.body for r in await answers] == [b"plain:late"]

    run(main)


def test_a_body_that_never_arrives_is_told_to_the_route() -> None:
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        limits = ServerLimits(body_timeout=0.3)
        async with serving(hot, limits) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"0123456789")[:-4])  # head and part of the body, then nothing
            answer = await asyncio.wait_for(reader.read(65536), 10)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == (
                "request_timeout")
            assert await asyncio.wait_for(reader.read(65536), 10) == b""  # closed
            reader, writer = await connect(listener)
            writer.write(post(b"0123456789")[:-4])
            await asyncio.sleep(0.1)
            writer.close()  # the client leaves mid-body
            for _ in range(100):
                if len(hot.unfinished) == 2:
                    break
                await asyncio.sleep(0.01)
            assert hot.unfinished == [408, 499]
            assert listener.slow_clients == 1
            assert hot.started == []

    run(main)


def test_a_handler_that_raises_is_a_quiet_500(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        hot = Hot(fail=True)
        hot.gate.set()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"boom") + post(b"again"))
            answers = await read_answers(reader, 2)
            assert [r.status for r in answers] == [500, 500]
            assert json.loads(answers[0].body) == {
                "error": {"code": "internal", "message": "internal server error"}}
            writer.close()

    run(main)
    assert "secret-detail" not in capsys.readouterr().err


def test_pipelined_bytes_behind_a_pending_request_are_bounded() -> None:
    async def main() -> None:
        hot = Hot()
        async with serving(hot) as listener:
            reader, writer = await connect(listener)
            writer.write(post(b"held"))
            while not hot.started:
                await asyncio.sleep(0.01)
            more = post(b"next") * 20000  # ~1.2 MB of pipelined requests
            writer.write(more)
            await asyncio.sleep(0.5)
            (conn,) = listener._open
            # The server stopped reading: at most one more request's worth (plus one read).
            assert conn.buffered <= 8000 + 1024 + 256 * 1024
            hot.gate.set()
            answers = await read_answers(reader, 20001)
            assert len(answers) == 20001 and answers[-1].body == b"plain:next"
            writer.close()

    run(main)


def test_a_request_that_comes_whole_goes_from_idle_to_busy_at_once() -> None:
    """A keep-alive request read in one piece is handled at once: the connection is not told
    idle in its header phase first (a listener round trip and a timer per request), only once
    it is answered; one that comes in pieces has its header timeout as before."""
    async def main() -> None:
        hot = Hot()
        hot.gate.set()
        async with serving(hot, ServerLimits(header_timeout=0.3)) as listener:
            told: list[str] = []
            idle, busy = listener.idle, listener.busy
            listener.idle = lambda conn: (told.append("idle"), idle(conn))[1]  # type: ignore[method-assign]
            listener.busy = lambda conn: (told.append("busy"), busy(conn))[1]  # type: ignore[method-assign]
            reader, writer = await connect(listener)
            await asyncio.sleep(0.05)
            told.clear()
            for body in (b"a", b"b"):
                writer.write(post(body))
                (answer,) = await read_answers(reader, 1)
                assert answer.body == b"plain:" + body
            assert told == ["busy", "idle", "busy", "idle"]
            writer.write(post(b"c")[:10])  # a head begun: its timeout runs, and closes it
            (late,) = await read_answers(reader, 1)
            assert late.status == 408 and told[4:] == ["idle"]
            writer.close()

    run(main)
