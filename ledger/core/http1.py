"""A plain HTTP/1.1 server connection, sans I/O: bytes in, events out, response bytes out.

The server's full request handling (aiohttp's parser, request and response objects, routing,
middlewares) costs several times the work of a small JSON request itself. Most requests to a
hot route are all alike: ``POST /path HTTP/1.1``, a handful of headers, a ``Content-Length``
body. :class:`PlainConnection` serves a connection while every request on it is exactly such
a request to one of its routes, and says so only when it is certain; the first request that is
anything else is a :class:`HandOver` of every byte from that request's first one on, which the
full server then parses, accepts, rejects and answers as it always did. The connection is the
full server's from then on, so answers stay in request order.

Theory of operation. Bytes are parsed by llhttp (``httptools``), whose callbacks fill in the
request; a request is plain when its head is, byte for byte:

- the request line ``METHOD SP TARGET SP "HTTP/1.1" CRLF``, exactly one of the routes' method
  and target (so upper-case letters and an origin-form path of visible ASCII), at the start of
  the bytes (no empty line before it);
- header lines ``name ":" OWS value OWS CRLF``, the name an RFC 9110 token, the value visible
  ASCII, space and tab (no obs-fold, no obs-text, no bare CR or LF), each name at most once,
  at most :data:`MAX_FIELDS` of them, the whole head within ``max_head`` bytes;
- an empty line, then exactly ``Content-Length`` body bytes (absent: no body), at most
  ``max_body`` of them;
- a ``Host`` header (HTTP/1.1 requires one);

and it has none of the headers that change how the bytes are read or answered:
``Transfer-Encoding`` (framing), ``Content-Encoding`` (the body is not the bytes sent),
``Expect`` (an interim response), ``Upgrade``, and a ``Connection`` other than ``keep-alive``.
Anything llhttp refuses is not plain either. Any doubt is a hand-over, never a guess: the
subset is chosen so that the full parser, given the same bytes, sees the same method, target,
headers and body boundary (property-tested against aiohttp's parsers), so the two cannot
disagree about where a request ends.

llhttp reports no byte offsets, so the connection keeps the bytes of the requests not yet
taken and finds each boundary itself: a plain head ends at its first empty line, and its body
is ``Content-Length`` bytes long.
"""

from __future__ import annotations

import json
from collections import deque
from enum import Enum
from functools import lru_cache
from http import HTTPStatus
from typing import NamedTuple

from httptools import HttpParserError, HttpParserUpgrade, HttpRequestParser

__all__ = ["MAX_FIELDS", "MAX_HEAD", "NEED_DATA", "HandOver", "Head", "Phase",
           "PlainConnection", "Refusal", "Request", "error_response", "format_response"]

MAX_FIELDS = 64
"""At most this many header fields (aiohttp refuses more than 127)."""

MAX_HEAD = 8000
"""At most this many bytes of request head (aiohttp refuses a line of more than 8,190)."""


class Head(NamedTuple):
    """A plain request's head: ``headers`` by lower-case name. (A named tuple: one is made per
    request.)"""

    method: str
    target: str
    headers: dict[str, str]
    head_size: int
    body_size: int

    @property
    def size(self) -> int:
        """Bytes of the whole request, head and body."""
        return self.head_size + self.body_size


class Request(NamedTuple):
    """A complete plain request: serve it, then send :func:`format_response`'s bytes."""

    head: Head
    body: bytes


class HandOver(NamedTuple):
    """This connection is not plain from here on: the full server takes it, starting with
    ``data`` (every byte from the first one of the request that is not plain)."""

    data: bytes


class Refusal(NamedTuple):
    """Answer ``data`` (a complete response with ``status``), then close. ``head`` is the
    request whose body never came, if that is what was refused."""

    status: int
    data: bytes
    head: Head | None


class Phase(Enum):
    """Where the next request is: what the connection is waiting for."""

    IDLE = "idle"  # no byte of it yet
    HEAD = "header"  # (the rest of) its head
    BODY = "body"  # (the rest of) its body


class _Wait(Enum):
    NEED_DATA = "need data"


NEED_DATA = _Wait.NEED_DATA
"""No event until more bytes are received."""

Event = Request | HandOver | _Wait

_FORBIDDEN = frozenset({"transfer-encoding", "content-encoding", "expect", "upgrade"})
_FIELD_BYTES = bytes([9, *range(0x20, 0x7F)])  # HTAB, SP and visible ASCII


class _NotPlain(Exception):
    """Raised in a parser callback: stops llhttp at a request that is not plain."""


class PlainConnection:
    """One connection's plain requests to ``routes`` ((method, target) pairs).

    Feed it what the peer sends (:meth:`receive_data`) and take what that means
    (:meth:`next_event`), one request at a time: the caller answers a :class:`Request` before
    asking for the next event, and stops using the connection after a :class:`HandOver` or a
    :class:`Refusal`.
    """

    __slots__ = ("_body", "_buf", "_done", "_fields", "_handover", "_head", "_lines",
                 "_max_body", "_max_head", "_parser", "_start", "_url")

    def __init__(self, routes: tuple[tuple[str, str], ...] | frozenset[tuple[str, str]], *,
                 max_body: int, max_head: int = MAX_HEAD) -> None:
        self._max_body = max_body
        self._max_head = max_head
        # The request line each route's requests start with, by the parser's (method, target).
        self._lines = {(m.encode(), t.encode()): (m, t, f"{m} {t} HTTP/1.1\r\n".encode())
                       for m, t in routes}
        self._parser = HttpRequestParser(self)
        self._buf = bytearray()  # from the first byte of the first request not yet taken
        self._done: deque[Head] = deque()  # complete requests, not yet taken, in order
        self._start = 0  # where the request being parsed starts in _buf
        self._handover = False  # the request at _start is not plain
        self._url = b""
        self._fields: dict[str, str] = {}
        self._head: Head | None = None  # the request being parsed, once its head is
        self._body = False  # its body is still arriving

    # What the caller does ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer, in order (an empty ``data``: nothing)."""
        self._buf += data
        if self._handover or not data:
            return
        try:
            self._parser.feed_data(data)
        except (HttpParserError, HttpParserUpgrade):  # malformed, or found not plain
            self._handover = True
            return
        if self._head is None and len(self._buf) - self._start >= self._max_head:
            self._handover = True  # the full parser applies its own limits and answers

    def next_event(self) -> Event:
        """The next complete request, the hand-over, or :data:`NEED_DATA`."""
        if self._done:
            head = self._done.popleft()
            size = head.head_size + head.body_size
            buf = self._buf
            body = bytes(buf[head.head_size:size])
            del buf[:size]
            self._start -= size
            return Request(head, body)
        if self._handover:
            return HandOver(bytes(self._buf))
        return NEED_DATA

    @property
    def phase(self) -> Phase:
        """What the next request is waiting for (once the requests received are taken)."""
        if self._body:
            return Phase.BODY
        return Phase.HEAD if len(self._buf) > self._start else Phase.IDLE

    @property
    def pending(self) -> Head | None:
        """The request whose body is arriving (in :attr:`Phase.BODY`)."""
        return self._head

    @property
    def buffered(self) -> int:
        """Bytes received and not yet taken as a request."""
        return len(self._buf)

    def time_out(self, seconds: float) -> Refusal | None:
        """The peer took longer than ``seconds`` over its next request: the answer to send
        before closing (None: it had not begun one; close without a word)."""
        phase = self.phase
        if phase is Phase.IDLE:
            return None
        what = "head" if phase is Phase.HEAD else "body"
        data = error_response(408, "request_timeout",
                              f"the request {what} did not arrive within {seconds:g} s")
        return Refusal(408, data, self._head)

    # llhttp's callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._fields = {}

    def on_url(self, url: bytes) -> None:
        self._url += url  # in parts when it spans two reads

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self._fields
        key = name.decode("ascii").lower()  # llhttp allows only token characters
        if key in fields or len(fields) >= MAX_FIELDS or value.translate(None, _FIELD_BYTES):
            raise _NotPlain  # a repeated field, too many, or a byte outside the subset
        fields[key] = value.decode("ascii").rstrip(" \t")

    def on_headers_complete(self) -> None:
        route = self._lines.get((self._parser.get_method(), self._url))
        if route is None:
            raise _NotPlain
        method, target, line = route
        buf, start, fields = self._buf, self._start, self._fields
        end = buf.find(b"\r\n\r\n", start) + 4  # 3: none (a head llhttp ended otherwise)
        if (end < 4 or not buf.startswith(line, start) or end - start > self._max_head
                or "host" not in fields or not _FORBIDDEN.isdisjoint(fields)):
            raise _NotPlain  # HTTP/1.0 or a malformed line; too long; no Host; framing
        connection = fields.get("connection")
        if connection is not None and connection.lower() != "keep-alive":
            raise _NotPlain
        length = fields.get("content-length")
        body_size = 0
        if length is not None:
            if not (length.isdigit() and length.isascii() and len(length) <= 12):
                raise _NotPlain
            body_size = int(length)
            if body_size > self._max_body:
                raise _NotPlain  # the full server answers 413
        self._head = Head(method, target, fields, end - start, body_size)
        self._body = True

    def on_message_complete(self) -> None:
        head = self._head
        assert head is not None  # llhttp completes no message whose head it did not
        self._done.append(head)
        self._start += head.head_size + head.body_size
        self._head = None
        self._body = False


def error_response(status: int, code: str, message: str) -> bytes:
    """A complete JSON error response that closes the connection, for a refusal no request
    object exists for (a head or body that never arrived)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n").encode() + body


@lru_cache(maxsize=128)
def _framing(status: int, content_type: str, headers: tuple[tuple[str, str], ...],
             reason: str | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason or HTTPStatus(status).phrase}",
             f"Content-Type: {content_type}", *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


def format_response(status: int, body: bytes, *, content_type: str, date: str, server: str,
                    headers: tuple[tuple[str, str], ...] = (), close: bool = False,
                    reason: str | None = None) -> bytes:
    """A complete HTTP/1.1 response, its headers in the order aiohttp writes them (so a client
    sees the same answer whichever server sent it). ``headers`` must be valid field lines: they
    come from the server's code, never from a request. The lines before ``Content-Length`` are
    made once per kind of answer."""
    end = "\r\nConnection: close\r\n\r\n" if close else "\r\n\r\n"
    tail = f"{len(body)}\r\nDate: {date}\r\nServer: {server}{end}".encode("latin-1")
    return b"".join((_framing(status, content_type, headers, reason), tail, body))
