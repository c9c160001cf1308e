"""ledger.http.http1: the plain connection never disagrees with aiohttp's parser, and its
phases decide the timeouts.

The server hands every request :class:`Http1Connection` does not call plain to aiohttp, so the
one thing that must hold is: whenever it *does* give a request, aiohttp's parsers (the C one
the server runs and the pure-Python one) read the same method, target, headers and body from
the same bytes, with no error. Requests are generated from a grammar that mixes plain ones with
every feature that must make them not plain. The rest: the same events however the bytes are
split, pipelining, keep-alive, and where a hand-over starts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from aiohttp import http_parser
from aiohttp.base_protocol import BaseProtocol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.http.http1 import (
    MAX_FIELDS,
    NEED_DATA,
    BodyPending,
    HandOver,
    Http1Connection,
    Phase,
    Request,
    Timeouts,
    error_response,
    format_response,
)

MAX_BODY = 4096
PARSERS = [http_parser.HttpRequestParserPy, http_parser.HttpRequestParserC]
METHODS = ["POST", "GET", "PUT", "post", "P0ST", "DELETE"]
TARGETS = ["/v1/tool-calls", "/v1/tool-calls?x=1", "/", "/a%20b", "*", "http://h/v1",
           "/v1//tool-calls", "/v1/tool-calls#f", "//x"]
# Every origin-form target the grammar makes is a route, so what decides is the other rules.
ROUTES = frozenset((m, t) for m in METHODS for t in TARGETS if t.startswith("/"))
HOT = frozenset({("POST", "/v1/tool-calls")})
TIMEOUTS = Timeouts(header=10.0, body=2.5, keepalive=5.0)


def connection(routes: frozenset[tuple[str, str]] = HOT, max_body: int = MAX_BODY,
               **kw: Any) -> Http1Connection:
    return Http1Connection(routes, max_body=max_body, timeouts=TIMEOUTS, **kw)


def aiohttp_reads(data: bytes) -> list[tuple[Any, bytes]]:
    """(message, body) per complete request aiohttp's parsers find in ``data``; the two must
    agree."""
    loop = asyncio.new_event_loop()
    try:
        results = []
        for cls in PARSERS:
            parser = cls(BaseProtocol(loop), loop, 2**16, max_line_size=8190,
                         max_field_size=8190)
            messages, _, _ = parser.feed_data(data)
            results.append([(m, b"".join(getattr(payload, "_buffer", ())))
                            for m, payload in messages if payload.is_eof()])
        py, c = ([(m.method, m.path, m.raw_headers, body) for m, body in r] for r in results)
        assert py == c
        return results[1]
    finally:
        loop.close()


def plain(method: str = "POST", target: str = "/v1/tool-calls", body: bytes = b"{}",
          headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1:8080",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def events(data: bytes, *, routes: frozenset[tuple[str, str]] = HOT, step: int = 0,
           max_body: int = MAX_BODY) -> list[Request | HandOver]:
    """Every event ``data`` gives, fed at once (``step`` 0) or ``step`` bytes at a time, each
    event taken as soon as it is there and answered at once (as the server does when it is not
    busy). A hand-over is shown with the bytes not fed yet, which the server passes on after
    it."""
    conn = connection(routes, max_body)
    out: list[Request | HandOver] = []
    step = step or max(len(data), 1)
    for i in range(0, len(data), step):
        conn.receive_data(data[i:i + step])
        while (event := conn.next_event()) is not NEED_DATA:
            assert not isinstance(event, type(NEED_DATA))
            if isinstance(event, HandOver):
                return [*out, HandOver(event.data + data[i + step:])]
            if isinstance(event, Request):
                out.append(event)
                conn.response_sent()
            else:
                assert isinstance(event, BodyPending) and conn.phase is Phase.BODY
    return out


def verdict(data: bytes, **kw: Any) -> Request | HandOver | None:
    """The first event ``data`` gives (None: it waits for more)."""
    got = events(data, **kw)
    return got[0] if got else None


_names = st.sampled_from([
    "Host", "host", "Content-Length", "content-length", "Transfer-Encoding",
    "Content-Encoding", "Connection", "Expect", "Upgrade", "Authorization", "Content-Type",
    "X-Request-Id", "Bad Name", "X\x00", "X(y)", "Accept-Encoding", " Host", "Host ", ""])
_edge_values = st.sampled_from(["chunked", "gzip", "close", "keep-alive", "Keep-Alive", "upgrade",
                     "100-continue", "h2c", "application/json", "Bearer nk_abc_def", "0",
                     "2", "5", "05", "+5", "-1", " 5", "5 ", "5,5", "1e3", "99999999999999",
                     "127.0.0.1:8080", "", " ", "\t", "a\x80b", "a\rb", "a\nb", "a\r\n b"])
_values = _edge_values | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7f),
                                 max_size=12)
_requests = st.builds(
    lambda method, target, version, headers, eol, body, tail: (
        f"{method} {target} {version}{eol}".encode()
        + b"".join(f"{n}:{v}{eol}".encode("latin-1", "replace") for n, v in headers)
        + eol.encode() + body + tail),
    st.sampled_from(METHODS),
    st.sampled_from(TARGETS),
    st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "http/1.1", "HTTP/1.1 "]),
    st.lists(st.tuples(_names, _values), max_size=6),
    st.sampled_from(["\r\n", "\r\n", "\r\n", "\n"]),
    st.binary(max_size=12),
    st.sampled_from([b"", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\r\n", b"0\r\n\r\n"]))


# Near-plain: a plain request with Host and the body's Content-Length, plus a few headers or
# changes from the grammar above, so that most examples sit right at the subset's edge.
_near_plain = st.builds(
    lambda body, extra, method, target: plain(method, target, body, tuple(extra)),
    st.binary(max_size=12),
    st.lists(st.tuples(st.sampled_from(["Transfer-Encoding", "Content-Encoding", "Connection",
                                        "Expect", "Upgrade", "Authorization", "X-A"]),
                       _edge_values), max_size=2),
    st.sampled_from(["POST", "POST", "GET", "DELETE"]),
    st.sampled_from(["/v1/tool-calls", "/v1/tool-calls", "/v1/tool-calls?x=1", "/a%20b"]))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests | _near_plain)
def test_a_plain_request_reads_the_same_to_aiohttp(data: bytes) -> None:
    event = verdict(data, routes=ROUTES)
    if not isinstance(event, Request):
        return
    head = event.head
    # aiohttp must not refuse it, and must find exactly this request, complete, in its bytes.
    (message, body), = aiohttp_reads(data[:head.size])
    assert (message.method, message.path, message.version) == (head.method, head.target,
                                                                 (1, 1))
    assert {k.decode().lower(): v.decode() for k, v in message.raw_headers} == head.headers
    assert body == event.body == data[head.head_size:head.size]
    assert not message.should_close and not message.upgrade and message.compression is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests | _near_plain, st.integers(1, 7))
def test_the_events_do_not_depend_on_how_the_bytes_are_split(data: bytes, step: int) -> None:
    assert events(data, routes=ROUTES, step=step) == events(data, routes=ROUTES)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40),
       st.lists(st.tuples(st.sampled_from(["Authorization", "Content-Type", "X-A"]),
                          st.text(alphabet=st.characters(min_codepoint=0x20,
                                                         max_codepoint=0x7e), max_size=20)),
                max_size=4, unique_by=lambda h: h[0]))
def test_every_split_of_a_plain_request_gives_it_once(body: bytes,
                                                      headers: list[tuple[str, str]]) -> None:
    data = plain(body=body, headers=tuple(headers))
    (whole,) = events(data)
    assert isinstance(whole, Request) and whole.head.size == len(data) and whole.body == body
    for cut in range(len(data) + 1):
        conn = connection()
        conn.receive_data(data[:cut])
        if cut < len(data):
            if cut < whole.head.head_size:
                assert conn.next_event() is NEED_DATA and conn.phase is Phase.HEAD, cut
            else:
                assert conn.next_event() == BodyPending(whole.head), cut
                assert conn.phase is Phase.BODY and conn.next_event() is NEED_DATA, cut
        conn.receive_data(data[cut:])
        assert conn.next_event() == whole and conn.phase is Phase.BUSY
        assert conn.next_event() is NEED_DATA
        conn.response_sent()
        assert conn.phase is Phase.IDLE and conn.buffered == 0


@pytest.mark.parametrize("data", [
    plain(headers=(("Transfer-Encoding", "chunked"),)),
    plain(headers=(("Content-Encoding", "gzip"),)),
    plain(headers=(("Expect", "100-continue"),)),
    plain(headers=(("Upgrade", "websocket"), ("Connection", "upgrade"))),
    plain(headers=(("Connection", "close"),)),
    plain(headers=(("content-length", "2"),)),  # a second Content-Length
    plain(headers=(("X-A", "caf\u00e9"),)).replace("é".encode(), b"\xe9"),  # obs-text
    plain(headers=(("X-A", "a"),)).replace(b"X-A: a\r\n", b"X-A: a\r\n b\r\n"),  # obs-fold
    plain().replace(b"HTTP/1.1", b"HTTP/1.0"),
    plain().replace(b"\r\n", b"\n"),  # bare LF line ends
    plain().replace(b"Host: 127.0.0.1:8080\r\n", b""),  # no Host
    plain().replace(b"Content-Length: 2", b"Content-Length: +2"),
    plain().replace(b"Content-Length: 2", b"Content-Length: 9999999"),  # over max_body
    b"\r\n" + plain(),  # leading empty line
    plain("post"),
    plain("GET"),  # not a route
    plain(target="/v1/tool-calls?x=1"),  # not a route either
    plain(target="http://127.0.0.1/v1/tool-calls"),
    b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n",
    b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    b"get /",  # no head end yet, but already not a request line
    b"POST  /v1/tool-calls HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1 HTTP/1.2",
    b"POST /v1 HTTP/1.1\r\nHost: x\r\n\x01",
    b"A" * 8192,  # the head limit without a head end
    b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 8000,  # the same, mid-head
])
def test_what_is_not_plain(data: bytes) -> None:
    assert events(data) == [HandOver(data)]
    assert events(data, step=1) == [HandOver(data)]


def test_a_head_aiohttp_would_refuse_for_its_size_is_not_plain() -> None:
    many = tuple((f"X-{i}", "1") for i in range(200))
    data = plain(headers=many)
    assert events(data) == [HandOver(data)]
    with pytest.raises(Exception, match=r"(?i)too many headers"):
        aiohttp_reads(data)
    allowed = plain(headers=many[:MAX_FIELDS - 2])  # with Host and Content-Length
    (event,) = events(allowed)
    assert isinstance(event, Request) and len(event.head.headers) == MAX_FIELDS
    assert len(aiohttp_reads(allowed)) == 1


def test_fields_and_sizes() -> None:
    data = (b"POST /v1/tool-calls HTTP/1.1\r\nHost: h\r\nAuthorization:   Bearer k \t\r\n"
            b"Connection: Keep-Alive\r\nContent-Length: 3\r\n\r\nabcGET")
    conn = connection()
    conn.receive_data(data)
    event = conn.next_event()
    assert isinstance(event, Request)
    assert event.head.headers == {"host": "h", "authorization": "Bearer k",
                                  "connection": "Keep-Alive", "content-length": "3"}
    assert event.body == b"abc" and event.head.size == len(data) - 3
    assert conn.next_event() is NEED_DATA and conn.phase is Phase.BUSY and conn.buffered == 3
    conn.response_sent()
    assert conn.phase is Phase.HEAD
    (no_body,) = events(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n", routes=frozenset({("GET", "/x")}),
                        max_body=0)
    assert isinstance(no_body, Request) and no_body.head.body_size == 0 and no_body.body == b""
    # The head limit counts the head's bytes.
    conn = connection(max_head=40)
    conn.receive_data(data)
    assert conn.next_event() == HandOver(data)


def test_pipelined_requests_then_a_hand_over_from_the_first_byte_not_plain() -> None:
    chunked = (b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"1\r\nc\r\n0\r\n\r\n")
    data = plain(body=b"a") + plain(body=b"b") + chunked + plain(body=b"d")
    for step in (0, 1, 5, 61):
        got = events(data, step=step)
        assert [e.body for e in got[:2] if isinstance(e, Request)] == [b"a", b"b"], step
        assert got[2:] == [HandOver(data[data.index(chunked):])], step


def test_a_request_waits_until_the_previous_one_is_taken() -> None:
    """Bytes of later requests are parsed as they come, but each request is given only once
    those before it were: the caller answers in order, and a hand-over includes nothing
    already given."""
    conn = connection()
    conn.receive_data(plain(body=b"1") + plain(body=b"2") + b"get / HTTP/1.1\r\n")
    assert conn.buffered == 2 * len(plain(body=b"1")) + 16
    first, second = conn.next_event(), conn.next_event()
    assert isinstance(first, Request) and isinstance(second, Request)
    assert (first.body, second.body) == (b"1", b"2")
    assert conn.next_event() == HandOver(b"get / HTTP/1.1\r\n")
    assert conn.handed_over and conn.buffered == 0 and conn.wants_read()
    conn.receive_data(b"Host: x\r\n\r\n")  # after a hand-over the bytes are aiohttp's
    assert conn.buffered == 0 and not conn.may_start()


def test_keep_alive_requests_one_after_another() -> None:
    conn = connection()
    for i in range(50):
        data = plain(body=str(i).encode(), headers=(("Connection", "keep-alive"),))
        conn.receive_data(data)
        event = conn.next_event()
        assert isinstance(event, Request) and event.body == str(i).encode()
        assert conn.next_event() is NEED_DATA and conn.phase is Phase.BUSY
        conn.response_sent()
        assert conn.phase is Phase.IDLE and conn.timeout == TIMEOUTS.keepalive
    conn.receive_data(plain(headers=(("Connection", "close"),)))
    assert isinstance(conn.next_event(), HandOver)


def test_an_oversized_body_and_expect_go_to_the_full_server() -> None:
    """The full server answers these (413; 100 Continue), so they are handed over whole."""
    big = plain(body=b"x" * (MAX_BODY + 1))
    assert events(big[:200]) == [HandOver(big[:200])]  # at its head, not after its body
    expect = plain(headers=(("Expect", "100-continue"),))
    head = expect[:expect.index(b"\r\n\r\n") + 4]
    assert events(head) == [HandOver(head)]  # without waiting for the body it announces


def test_expiry_answers_for_the_request_in_progress() -> None:
    conn = connection()
    assert conn.phase is Phase.HEAD and conn.timeout == TIMEOUTS.header and conn.idle
    assert conn.expire() == (True, b"", "", False)  # nothing begun: closed without a word
    conn.receive_data(b"POST /v1/tool-calls HTTP/1.1\r\nHo")
    expiry = conn.expire()
    assert expiry.close and expiry.slow == "header" and conn.abandon() is None
    assert json.loads(expiry.answer.split(b"\r\n\r\n", 1)[1]) == {"error": {
        "code": "request_timeout", "message": "the request head did not arrive within 10 s"}}
    conn = connection()
    conn.receive_data(plain(body=b"0123")[:-1])
    assert isinstance(conn.next_event(), BodyPending) and not conn.idle
    assert conn.timeout == TIMEOUTS.body
    expiry = conn.expire()
    assert expiry.close and expiry.slow == "body"
    assert b"the request body did not arrive within 2.5 s" in expiry.answer
    head = conn.abandon()
    assert head is not None and head.body_size == 4 and conn.abandon() is None  # told once


def test_a_request_being_handled_has_no_timeout_and_bounds_reading() -> None:
    conn = connection(max_body=100)
    conn.receive_data(plain(body=b"a"))
    assert isinstance(conn.next_event(), Request)
    assert conn.timeout is None and conn.expire() == (False, b"", "", False)
    assert not conn.idle and not conn.may_start() and conn.wants_read()
    conn.receive_data(plain(body=b"b" * 100) * 80)  # more than one more request's worth
    assert not conn.wants_read()
    conn.response_sent()
    assert conn.phase is Phase.HEAD and conn.may_start() and conn.wants_read()
    conn.writable = False  # the transport's buffer is full: neither read nor start
    assert not conn.wants_read() and not conn.may_start()


def test_a_handed_over_connection_keeps_its_phases() -> None:
    """aiohttp parses a handed-over connection; the state still decides the timeouts."""
    conn = Http1Connection((), max_body=MAX_BODY, timeouts=TIMEOUTS)
    assert conn.next_event() == HandOver(b"") and conn.handed_over
    conn.receive_data(b"GET / HTTP/1.1\r\n")
    assert conn.expire().answer  # a head begun and not finished: answered 408
    assert conn.request_parsed(body_pending=True) and conn.phase is Phase.BODY
    assert not conn.request_parsed(body_pending=False)  # told once per head
    assert conn.expire() == (False, b"", "body", True)
    conn.body_complete()
    assert conn.phase is Phase.BUSY and conn.timeout is None
    conn.aiohttp_response_sent(waiting=False, body_pending=False)
    assert conn.phase is Phase.IDLE and conn.expire() == (True, b"", "", False)
    conn.receive_data(b"G")
    assert conn.phase is Phase.HEAD
    conn.aiohttp_response_sent(waiting=True, body_pending=False)
    assert conn.phase is Phase.BUSY


def test_error_response_is_a_complete_closing_answer() -> None:
    data = error_response(408, "request_timeout", "late")
    head, body = data.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 408 Request Timeout", b"Content-Type: application/json",
        b"Content-Length: %d" % len(body), b"Cache-Control: no-store", b"Connection: close"]
    assert json.loads(body) == {"error": {"code": "request_timeout", "message": "late"}}


def test_format_response_reads_back() -> None:
    out = format_response(201, b'{"a":1}', content_type="application/json; charset=utf-8",
                          date="Tue, 01 Dec 2026 14:00:21 GMT", server="S/1",
                          headers=(("Cache-Control", "no-store"),), close=True)
    assert out == (b"HTTP/1.1 201 Created\r\nContent-Type: application/json; charset=utf-8\r\n"
                   b"Cache-Control: no-store\r\nContent-Length: 7\r\n"
                   b"Date: Tue, 01 Dec 2026 14:00:21 GMT\r\nServer: S/1\r\n"
                   b'Connection: close\r\n\r\n{"a":1}')
    assert format_response(499, b"", content_type="t", date="d", server="s",
                           reason="Client Closed Request").startswith(
        b"HTTP/1.1 499 Client Closed Request\r\n")
    # The framing made once per kind of answer is not mixed up between kinds.
    kinds = itertools.product((200, 201), ("a/b", "c/d"), ((), (("X", "1"),)), (None, "R"))
    for status, ctype, headers, reason in kinds:
        got = format_response(status, b"xy", content_type=ctype, date="D", server="S",
                              headers=headers, reason=reason)
        assert got.startswith(f"HTTP/1.1 {status} ".encode()) and got.endswith(b"\r\n\r\nxy")
        assert (f"Content-Type: {ctype}\r\n".encode() in got
                and (b"X: 1\r\n" in got) == bool(headers))
        assert b"Content-Length: 2\r\nDate: D\r\nServer: S\r\n\r\n" in got
        assert reason is None or b" 2%02d R\r\n" % (status % 100) in got


# A pool of whole requests in which heads repeat byte for byte (bodies of one length), differ
# only in case or spacing, or are not plain, for the connection's memory of its last head.
_POOL = [plain(body=b"ab"), plain(body=b"cd"), plain(body=b"abc"),
         plain(body=b"ab", headers=(("Authorization", "Bearer k"),)),
         plain(body=b"ab").replace(b"Host:", b"host:"),
         plain(body=b"ab", headers=(("X-A", "1 "),)), plain(body=b"ab", headers=(("X-A", "1"),)),
         plain(body=b"", headers=(("Connection", "close"),)), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]


def one_by_one(requests: list[bytes]) -> list[Request | HandOver]:
    """The events of ``requests`` sent in turn, each read by a connection of its own: what one
    connection must give whatever it remembers (the first not plain hands over the rest)."""
    out: list[Request | HandOver] = []
    for i, data in enumerate(requests):
        (event,) = events(data)
        if isinstance(event, HandOver):
            return [*out, HandOver(b"".join(requests[i:]))]
        out.append(event)
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=1, max_size=6), st.integers(0, 40))
def test_a_repeated_head_reads_as_if_parsed_again(requests: list[bytes], step: int) -> None:
    assert events(b"".join(requests), step=step) == one_by_one(requests)


class _CountingParser:
    def __init__(self, parser: Any) -> None:
        self.parser, self.fed = parser, 0

    def feed_data(self, data: bytes) -> None:
        self.fed += 1
        self.parser.feed_data(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


def test_a_repeated_head_is_not_parsed_again() -> None:
    """A keep-alive client's requests with the same head (wrk's, a gateway's) are taken from
    the remembered head; another head, or a body not complete yet, goes to llhttp."""
    conn = connection()
    counting = _CountingParser(conn._parser)
    conn._parser = counting  # type: ignore[assignment]
    got = []
    for data in (plain(body=b"ab"), plain(body=b"cd"), plain(body=b"ef") + plain(body=b"gh"),
                 plain(body=b"ijk"), plain(body=b"lmn"), plain(body=b"op")):
        conn.receive_data(data)
        while isinstance(event := conn.next_event(), Request):
            got.append(event.body)
            conn.response_sent()
    assert got == [b"ab", b"cd", b"ef", b"gh", b"ijk", b"lmn", b"op"]
    assert counting.fed == 3  # the first head, the first of length 3 and the next of length 2
    split = plain(body=b"qr")
    conn.receive_data(split[:-1])  # the head again, its body not complete: llhttp's
    assert isinstance(conn.next_event(), BodyPending) and counting.fed == 4
    conn.receive_data(split[-1:])
    event = conn.next_event()
    assert isinstance(event, Request) and event.body == b"qr" and counting.fed == 5
