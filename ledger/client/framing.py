"""Sans-I/O parser of pipelined HTTP/1.1 answers to GET requests (RFC 9112), for
:mod:`ledger.client.pipeline`.

Feed it the bytes a connection delivers (:meth:`ResponseParser.feed`), take complete answers
out in order (:meth:`ResponseParser.next`), and tell it when the connection ends
(:meth:`ResponseParser.eof`). It does no I/O, so it is tested by feeding it arbitrary bytes
(tests/ledger/client/test_http_framing.py fuzzes it with hypothesis).

It accepts only what an honest tile server sends and refuses the rest with
:class:`FramingError`, on which the caller falls back to a general HTTP client:

- a status line ``HTTP/1.0`` or ``HTTP/1.1``, a three-digit status from 100; interim 1xx answers are
  skipped (101 is refused); 204 and 304 have no body;
- header lines ``name: value`` with a token name, no obs-fold, no bare CR or LF, no NUL;
- a body framed by ``Transfer-Encoding: chunked`` (alone), by ``Content-Length`` (digits;
  repeated equal values allowed), or by the end of the connection; both framings at once are
  refused (RFC 9112 §6.3: a sign of response splitting);
- no ``Content-Encoding`` other than identity.

Sizes are bounded: the head (``max_head``), each chunk-size line, and the body (``max_body``,
:class:`BodyTooLarge` as soon as a length says so or the bytes exceed it), so a hostile server
cannot make it hold more than about ``max_head + max_body`` bytes per answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from ledger.core.errors import LedgerError

__all__ = ["BodyTooLarge", "FramingError", "Response", "ResponseParser"]

MAX_HEAD = 64 * 1024
_MAX_CHUNK_LINE = 1024
_MAX_LENGTH_DIGITS = 18

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9]{2})(?: [\t\x20-\x7e\x80-\xff]*)?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A whole head in one C-level match: status line, then fields "token:value" whose values hold
# no CR, LF, NUL or DEL (so no obs-fold, no bare line ends).
_HEAD_RE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9]{2})(?: [\t\x20-\x7e\x80-\xff]*)?"
                      rb"((?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*)")
_DIGITS = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class FramingError(LedgerError, ValueError):
    """The bytes are not an HTTP/1.1 answer this parser accepts."""


class BodyTooLarge(LedgerError, ValueError):
    """The answer's body is larger than the limit (by its declared length or its bytes)."""


@dataclass(frozen=True)
class Response:
    """One complete answer. ``headers`` has lower-case names; repeated fields are joined with
    ``", "``. ``keep_alive`` is False when the server will close the connection after it."""

    status: int
    headers: dict[bytes, bytes]
    body: bytes
    keep_alive: bool


# Parser states.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILERS, _UNTIL_EOF, _CLOSED = range(7)


def _tokens(value: bytes) -> list[bytes]:
    return [t.strip(b" \t").lower() for t in value.split(b",") if t.strip(b" \t")]


def _explain(head: bytes) -> NoReturn:
    """Raise the FramingError that says what is wrong with a head that did not match."""
    lines = head.split(b"\r\n")
    if not _STATUS_LINE.fullmatch(lines[0]):
        raise FramingError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise FramingError(f"malformed header line {line[:80]!r}")
        if _BAD_VALUE.search(value):
            raise FramingError(f"a control character in header {name[:40]!r}")
    raise FramingError("malformed answer head")


class ResponseParser:
    """One connection's answers, in order. ``max_body`` may be changed between answers."""

    def __init__(self, *, max_body: int, max_head: int = MAX_HEAD) -> None:
        self.max_body = max_body
        self.max_head = max_head
        self._buf = bytearray()
        self._pos = 0  # bytes of _buf already consumed (dropped in bulk, not one answer at a time)
        self._state = _HEAD
        self._status = 0
        self._headers: dict[bytes, bytes] = {}
        self._keep_alive = True
        self._remaining = 0  # bytes left in a Content-Length body or the current chunk
        self._body = bytearray()

    @property
    def idle(self) -> bool:
        """Between answers with nothing buffered: a close now loses nothing."""
        return self._state in (_HEAD, _CLOSED) and self._pos == len(self._buf)

    def feed(self, data: bytes) -> None:
        """Add bytes received from the connection. Bytes after a ``Connection: close`` answer
        are dropped: the server said it would send nothing more."""
        if self._state == _CLOSED:
            return
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def _available(self) -> int:
        return len(self._buf) - self._pos

    def _take(self, n: int) -> bytes:
        start = self._pos
        self._pos = start + n
        with memoryview(self._buf) as view:  # one copy, not two (answers are ~40 kB)
            return view[start : start + n].tobytes()

    def next(self) -> Response | None:
        """The next complete answer, or None until more bytes are fed."""
        while True:
            state = self._state
            if state == _HEAD:
                if not self._head():
                    return None
            elif state == _LENGTH:
                if self._available() < self._remaining:
                    return None
                return self._done(self._take(self._remaining))
            elif state == _CHUNK_SIZE:
                if not self._chunk_size():
                    return None
            elif state == _CHUNK_DATA:
                n = self._remaining
                if self._available() < n + 2:
                    return None
                end = self._pos + n
                if self._buf[end : end + 2] != b"\r\n":
                    raise FramingError("a chunk does not end with CRLF")
                self._body += self._buf[self._pos : end]
                self._pos = end + 2
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                if not self._trailers():
                    return None
                body = bytes(self._body)
                self._body.clear()
                return self._done(body)
            elif state == _UNTIL_EOF:
                if self._available() > self.max_body:
                    raise BodyTooLarge(f"the answer is larger than {self.max_body} bytes")
                return None
            else:  # _CLOSED
                return None

    def eof(self) -> Response | None:
        """The connection ended: the answer it delimited, if one was being read; None when it
        ended between answers or part way through one (the caller asks again elsewhere)."""
        state, self._state = self._state, _CLOSED
        if state == _UNTIL_EOF:
            if self._available() > self.max_body:
                raise BodyTooLarge(f"the answer is larger than {self.max_body} bytes")
            body = self._take(self._available())
            self._clear()
            return Response(self._status, self._headers, body, False)
        self._clear()
        return None

    # Internals ----------------------------------------------------------------------------------

    def _clear(self) -> None:
        self._buf.clear()
        self._pos = 0

    def _done(self, body: bytes) -> Response:
        resp = Response(self._status, self._headers, body, self._keep_alive)
        self._state = _HEAD if self._keep_alive else _CLOSED
        if not self._keep_alive:
            self._clear()
        return resp

    def _line(self, limit: int) -> bytes | None:
        """The next CRLF-terminated line (without it) if buffered within ``limit`` bytes."""
        end = self._buf.find(b"\r\n", self._pos, self._pos + limit + 2)
        if end < 0:
            return None
        line = bytes(self._buf[self._pos : end])
        self._pos = end + 2
        return line

    def _head(self) -> bool:
        """Parse a head if a whole one is buffered; set up reading its body."""
        start = self._pos
        end = self._buf.find(b"\r\n\r\n", start, start + self.max_head + 4)
        if end < 0:
            if self._available() > self.max_head:
                raise FramingError(f"an answer's head is larger than {self.max_head} bytes")
            return False
        head = bytes(self._buf[start:end])
        self._pos = end + 4
        match = _HEAD_RE.fullmatch(head)
        if match is None:
            _explain(head)
        minor, status = match.group(1), int(match.group(2))
        headers: dict[bytes, bytes] = {}
        for line in match.group(3).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            key = name.lower()
            value = value.strip(b" \t")
            headers[key] = headers[key] + b", " + value if key in headers else value
        if 100 <= status < 200:
            if status == 101:
                raise FramingError("the server switched protocols")
            return True  # interim answer: the final one follows
        self._status, self._headers = status, headers
        connection = _tokens(headers.get(b"connection", b""))
        self._keep_alive = minor == b"1" and b"close" not in connection
        encoding = _tokens(headers.get(b"content-encoding", b""))
        if any(e != b"identity" for e in encoding):
            raise FramingError(f"compressed answer ({b', '.join(encoding).decode('latin-1')})")
        transfer = headers.get(b"transfer-encoding")
        length = headers.get(b"content-length")
        if status in (204, 304):
            self._state, self._remaining = _LENGTH, 0
        elif transfer is not None:
            if length is not None:
                raise FramingError("both Transfer-Encoding and Content-Length")
            if _tokens(transfer) != [b"chunked"]:
                raise FramingError(f"unsupported Transfer-Encoding {transfer[:40]!r}")
            self._body.clear()
            self._state = _CHUNK_SIZE
        elif length is not None:
            values = set(_tokens(length))
            value = values.pop() if len(values) == 1 else b""
            if not _DIGITS.fullmatch(value) or len(value) > _MAX_LENGTH_DIGITS:
                raise FramingError(f"bad Content-Length {length[:40]!r}")
            self._remaining = int(value)
            if self._remaining > self.max_body:
                raise BodyTooLarge(f"the answer is {self._remaining} bytes, larger than the "
                                   f"limit of {self.max_body}")
            self._state = _LENGTH
        else:  # delimited by the end of the connection
            self._keep_alive = False
            self._state = _UNTIL_EOF
        return True

    def _chunk_size(self) -> bool:
        line = self._line(_MAX_CHUNK_LINE)
        if line is None:
            if self._available() > _MAX_CHUNK_LINE:
                raise FramingError("a chunk-size line is too long")
            return False
        digits = line.split(b";", 1)[0].rstrip(b" \t")
        if not _HEX.fullmatch(digits) or len(digits) > 16:
            raise FramingError(f"bad chunk size {line[:40]!r}")
        if _BAD_VALUE.search(line):
            raise FramingError("a control character in a chunk-size line")
        size = int(digits, 16)
        if size == 0:
            self._state, self._remaining = _TRAILERS, 0
            return True
        if len(self._body) + size > self.max_body:
            raise BodyTooLarge(f"the answer is larger than {self.max_body} bytes")
        self._state, self._remaining = _CHUNK_DATA, size
        return True

    def _trailers(self) -> bool:
        """Skip the trailer section (bounded like a head); True once its empty line is read."""
        while True:
            line = self._line(self.max_head)
            if line is None:
                if self._available() > self.max_head:
                    raise FramingError("the trailer section is too large")
                return False
            if not line:
                return True
            self._remaining += len(line) + 2
            if self._remaining > self.max_head:
                raise FramingError("the trailer section is too large")
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
                raise FramingError(f"malformed trailer line {line[:80]!r}")
