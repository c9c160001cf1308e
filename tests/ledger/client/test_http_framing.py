"""The pipelined fetcher's sans-I/O response parser (ledger.client.framing), fuzzed.

Three properties, on bytes split at arbitrary points (as a socket delivers them):

- well-formed answers (Content-Length, chunked with extensions and trailers, close-delimited,
  interim 1xx, 204/304, Connection: close) come out exactly as sent, in order;
- any bytes at all give answers, FramingError or BodyTooLarge, and nothing else: no other
  exception, no body over the limit, and no unbounded buffering;
- the framings RFC 9112 says to refuse (both Content-Length and Transfer-Encoding, obs-fold,
  bare LF, bad lengths, compression) are refused.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.client.framing import BodyTooLarge, FramingError, Response, ResponseParser

LIMIT = 4096


@dataclass(frozen=True)
class Sent:
    status: int
    body: bytes
    wire: bytes
    keep_alive: bool


def feed_all(parser: ResponseParser, data: bytes, cuts: list[int]) -> list[Response]:
    """Feed ``data`` in pieces cut at ``cuts``, collecting answers; then the end of the
    connection."""
    out: list[Response] = []
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in itertools.pairwise(points):
        parser.feed(data[a:b])
        while (resp := parser.next()) is not None:
            out.append(resp)
    last = parser.eof()
    if last is not None:
        out.append(last)
    return out


_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_value = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 ;=/,", max_size=20).map(
    str.strip)
_extra_headers = st.lists(st.tuples(_token, _value), max_size=4).map(
    lambda hs: [(n, v) for n, v in hs
                if n not in ("content-length", "transfer-encoding", "connection",
                             "content-encoding")])


@st.composite
def answers(draw: st.DrawFn, *, last: bool = False) -> Sent:
    """One well-formed answer, in one of the framings; ``last`` allows the ones that end the
    connection."""
    status = draw(st.sampled_from([200, 200, 200, 404, 500, 204, 304]))
    body = b"" if status in (204, 304) else draw(st.binary(max_size=600))
    framing = draw(st.sampled_from(["length", "chunked"] + (["close", "eof"] if last else [])))
    interim = draw(st.booleans())
    headers = draw(_extra_headers)
    head = b"".join(f"{n}: {v}\r\n".encode() for n, v in headers)
    pre = b"HTTP/1.1 100 Continue\r\n\r\n" if interim else b""
    reason = draw(st.sampled_from([b" OK", b" Whatever It Is", b" ", b""]))
    line = b"HTTP/1.1 %d%s\r\n" % (status, reason)
    keep = True
    if framing == "eof" and status not in (204, 304):
        return Sent(status, body, pre + line + head + b"\r\n" + body, False)
    if framing in ("close", "eof"):
        head += b"Connection: close\r\n"
        keep = False
    if framing == "chunked" and status not in (204, 304):
        sizes = draw(st.lists(st.integers(1, 200), max_size=8))
        chunks, pos = [], 0
        for n in sizes:
            if pos >= len(body):
                break
            piece = body[pos : pos + n]
            ext = draw(st.sampled_from([b"", b";x=1", b" ;name=\"v\""]))
            chunks.append(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
            pos += n
        if pos < len(body):
            chunks.append(b"%X\r\n%s\r\n" % (len(body) - pos, body[pos:]))
        trailer = draw(st.sampled_from([b"", b"X-Checksum: abc\r\n"]))
        wire = (line + head + b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(chunks) +
                b"0\r\n" + trailer + b"\r\n")
    else:
        wire = line + head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    return Sent(status, body, pre + wire, keep)


@st.composite
def conversations(draw: st.DrawFn) -> list[Sent]:
    first = draw(st.lists(answers(), max_size=5))
    return [*first, draw(answers(last=True))]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(st.integers(0, 10_000), max_size=12))
def test_well_formed_answers_come_out_exactly(sent: list[Sent], cuts: list[int]) -> None:
    wire = b"".join(s.wire for s in sent)
    got = feed_all(ResponseParser(max_body=LIMIT), wire, cuts)
    assert [(r.status, r.body) for r in got] == [(s.status, s.body) for s in sent]
    assert [r.keep_alive for r in got] == [s.keep_alive for s in sent]


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    for pos, byte in edits:
        if buf:
            buf[pos % len(buf)] = byte
    return bytes(buf)


@settings(max_examples=300, deadline=None)
@given(conversations(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                  min_size=1, max_size=6),
       st.lists(st.integers(0, 10_000), max_size=8), st.integers(0, 700))
def test_mutated_answers_fail_only_cleanly(sent: list[Sent], edits: list[tuple[int, int]],
                                           cuts: list[int], limit: int) -> None:
    wire = _mutate(b"".join(s.wire for s in sent), edits)
    parser = ResponseParser(max_body=limit, max_head=2048)
    try:
        got = feed_all(parser, wire, cuts)
    except (FramingError, BodyTooLarge):
        return
    assert all(len(r.body) <= limit for r in got)
    assert all(100 <= r.status <= 999 for r in got)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 10_000), max_size=8))
def test_arbitrary_bytes_fail_only_cleanly(data: bytes, cuts: list[int]) -> None:
    parser = ResponseParser(max_body=256, max_head=512)
    try:
        got = feed_all(parser, b"HTTP/1.1 " + data, cuts)
    except (FramingError, BodyTooLarge):
        return
    assert all(len(r.body) <= 256 for r in got)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 64))
def test_buffering_is_bounded_without_a_head_end(size_kib: int) -> None:
    parser = ResponseParser(max_body=100, max_head=4096)
    with pytest.raises(FramingError, match="head is larger"):
        for _ in range(size_kib):
            parser.feed(b"x" * 1024)
            parser.next()
        parser.feed(b"x" * 4096)
        parser.next()


@pytest.mark.parametrize("wire", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n folded\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nX: a\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: 3_0\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    b"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 000 OK\r\nContent-Length: 0\r\n\r\n",  # a status code is 100-999
    b"HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n",
    b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",
])
def test_refused_framings(wire: bytes) -> None:
    parser = ResponseParser(max_body=LIMIT)
    parser.feed(wire)
    with pytest.raises(FramingError):
        parser.next()


def test_limits() -> None:
    parser = ResponseParser(max_body=10)
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n")
    with pytest.raises(BodyTooLarge):  # refused from the length, before any body byte
        parser.next()
    parser = ResponseParser(max_body=10)
    parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n")
    assert parser.next() is None
    parser.feed(b"8\r\n")
    with pytest.raises(BodyTooLarge):
        parser.next()
    parser = ResponseParser(max_body=10)
    parser.feed(b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 11)
    with pytest.raises(BodyTooLarge):
        parser.next()


def test_close_drops_what_follows_and_eof_mid_answer_gives_nothing() -> None:
    parser = ResponseParser(max_body=LIMIT)
    parser.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nA"
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")
    first = parser.next()
    assert first is not None and first.body == b"A" and not first.keep_alive
    assert parser.next() is None and parser.idle
    parser = ResponseParser(max_body=LIMIT)
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc")
    assert parser.next() is None and not parser.idle
    assert parser.eof() is None  # cut short: the caller asks again on a new connection
