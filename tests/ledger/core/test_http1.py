"""ledger.core.http1: the plain-request recognizer never disagrees with aiohttp's parser.

The server hands every request :func:`parse_head` does not call plain to aiohttp, so the one
thing that must hold is: whenever it *does* call a request plain, aiohttp's parsers (the C one
the server runs and the pure-Python one) read the same method, target, headers and body from
the same bytes, with no error. Requests are generated from a grammar that mixes plain ones with
every feature that must make them not plain.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import http_parser
from aiohttp.base_protocol import BaseProtocol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.http1 import (
    INCOMPLETE,
    MAX_FIELDS,
    NOT_PLAIN,
    Head,
    format_response,
    parse_head,
)

MAX_BODY = 4096
PARSERS = [http_parser.HttpRequestParserPy, http_parser.HttpRequestParserC]


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
    st.sampled_from(["POST", "GET", "PUT", "post", "P0ST", "DELETE"]),
    st.sampled_from(["/v1/tool-calls", "/v1/tool-calls?x=1", "/", "/a%20b", "*",
                     "http://h/v1", "/v1//tool-calls", "/v1/tool-calls#f", "//x"]),
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
    head = parse_head(data, max_head=8192, max_body=MAX_BODY)
    if not isinstance(head, Head) or len(data) < head.size:
        return
    # aiohttp must not refuse it, and must find exactly this request, complete, in its bytes.
    (message, body), = aiohttp_reads(data[:head.size])
    assert (message.method, message.path, message.version) == (head.method, head.target,
                                                                 (1, 1))
    assert {k.decode().lower(): v.decode() for k, v in message.raw_headers} == head.headers
    assert body == data[head.head_size:head.size]
    assert not message.should_close and not message.upgrade and message.compression is None


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40), st.sampled_from(["POST", "GET"]),
       st.lists(st.tuples(st.sampled_from(["Authorization", "Content-Type", "X-A"]),
                          st.text(alphabet=st.characters(min_codepoint=0x20,
                                                         max_codepoint=0x7e), max_size=20)),
                max_size=4, unique_by=lambda h: h[0]))
def test_every_prefix_of_a_plain_request_waits_for_more(body: bytes, method: str,
                                                        headers: list[tuple[str, str]]) -> None:
    data = plain(method, body=body, headers=tuple(headers))
    whole = parse_head(data, max_head=8192, max_body=MAX_BODY)
    assert isinstance(whole, Head) and whole.size == len(data) and whole.method == method
    assert data[whole.head_size:] == body
    for cut in range(len(data)):
        got = parse_head(data[:cut], max_head=8192, max_body=MAX_BODY)
        assert got is INCOMPLETE or (isinstance(got, Head) and got == whole), (cut, got)


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
    plain(target="http://127.0.0.1/v1/tool-calls"),
    b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n",
    b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    b"get /",  # no head end yet, but already not a request line
    b"POST  /v1 HTTP/1.1\r\n",
    b"POST /v1 HTTP/1.2",
    b"POST /v1 HTTP/1.1\r\nHost: x\r\n\x01",
    b"A" * 8192,  # the head limit without a head end
])
def test_what_is_not_plain(data: bytes) -> None:
    assert parse_head(data, max_head=8192, max_body=MAX_BODY) is NOT_PLAIN


def test_a_head_aiohttp_would_refuse_for_its_size_is_not_plain() -> None:
    many = tuple((f"X-{i}", "1") for i in range(200))
    data = plain(headers=many)
    assert parse_head(data, max_head=8192, max_body=MAX_BODY) is NOT_PLAIN
    with pytest.raises(Exception, match=r"(?i)too many headers"):
        aiohttp_reads(data)
    allowed = plain(headers=many[:MAX_FIELDS - 2])  # with Host and Content-Length
    head = parse_head(allowed, max_head=8192, max_body=MAX_BODY)
    assert isinstance(head, Head) and len(head.headers) == MAX_FIELDS
    assert len(aiohttp_reads(allowed)) == 1


def test_fields_and_sizes() -> None:
    data = (b"POST /v1/tool-calls HTTP/1.1\r\nHost: h\r\nAuthorization:   Bearer k \t\r\n"
            b"Connection: Keep-Alive\r\nContent-Length: 3\r\n\r\nabcGET")
    head = parse_head(data, max_head=8192, max_body=MAX_BODY)
    assert isinstance(head, Head)
    assert head.headers == {"host": "h", "authorization": "Bearer k",
                            "connection": "Keep-Alive", "content-length": "3"}
    assert data[head.head_size:head.size] == b"abc" and data[head.size:] == b"GET"
    no_body = parse_head(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n", max_head=8192, max_body=0)
    assert isinstance(no_body, Head) and no_body.body_size == 0
    # The head limit counts the bytes searched for the head's end.
    assert parse_head(data, max_head=40, max_body=MAX_BODY) is NOT_PLAIN


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
