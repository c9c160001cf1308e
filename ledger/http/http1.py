"""One HTTP/1.1 server connection's state, sans I/O: bytes in, events and decisions out.

:class:`Http1Connection` owns everything a connection is in (h11's rule: the protocol object
owns the state, the I/O around it is a thin shell): which phase it is in and so which timeout
applies, what a timeout means, whether to read the socket, and, while the connection is on the
plain path, the parsing of its requests. The shell (:mod:`ledger.http.server`) moves bytes,
runs timers and tasks and tells it what happened; it reads no clock and opens no socket here.

The server's full request handling (aiohttp's parser, request and response objects, routing,
middlewares) costs several times the work of a small JSON request itself. Most requests to a
hot route are all alike: ``POST /path HTTP/1.1``, a handful of headers, a ``Content-Length``
body. :class:`Http1Connection` serves a connection while every request on it is exactly such
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

A keep-alive client usually sends the same head again and again (its API key, its content
type, bodies of one length), and parsing it again cost about as much as the rest of the
framework's work for a request (~5 µs of ~20 on an AMD EPYC). So the connection remembers the
last head llhttp parsed as plain, byte for byte, with what it parsed to; bytes that start at a
request boundary with that head, followed by its whole body, are that request again, taken
without llhttp. That is exact, not a guess: llhttp is back in its start state after each plain
request (keep-alive, a body of ``Content-Length`` bytes, whose content it does not read), so
the same bytes would give the same request and leave it in the same state; anything else
(another head, a body not complete yet) is fed to llhttp as before, from the first byte not
taken.
"""

from __future__ import annotations

import json
from collections import deque
from enum import Enum
from functools import lru_cache
from http import HTTPStatus
from typing import NamedTuple

from httptools import HttpParserError, HttpParserUpgrade, HttpRequestParser

__all__ = ["MAX_FIELDS", "MAX_HEAD", "NEED_DATA", "BodyPending", "Expiry", "HandOver",
           "Http1Connection", "Phase", "Request", "RequestHead", "Timeouts", "error_response",
           "format_response"]

MAX_FIELDS = 64
"""At most this many header fields (aiohttp refuses more than 127)."""

MAX_HEAD = 8000
"""At most this many bytes of request head (aiohttp refuses a line of more than 8,190)."""


class RequestHead(NamedTuple):
    """A plain request's head: ``headers`` by lower-case name. (A named tuple: one is made per
    head parsed; requests on a connection that repeat a head byte for byte share it, so nobody
    may change ``headers``.)"""

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
    """A complete plain request: serve it, send :func:`format_response`'s bytes, then tell the
    connection (:meth:`Http1Connection.response_sent`)."""

    head: RequestHead
    body: bytes


class HandOver(NamedTuple):
    """This connection is not plain from here on: the full server takes it, starting with
    ``data`` (every byte from the first one of the request that is not plain)."""

    data: bytes


class BodyPending(NamedTuple):
    """A plain request's head is in and its body is still arriving: the body timeout runs from
    now. (Told once per request; until the body is complete, :data:`NEED_DATA`.)"""

    head: RequestHead


class Phase(Enum):
    """What the connection is waiting for, which decides the timeout that applies."""

    IDLE = "idle"  # between requests: no byte of the next one yet (keep-alive timeout)
    HEAD = "header"  # (the rest of) a request head (header timeout)
    BODY = "body"  # (the rest of) a request body (body timeout)
    BUSY = "busy"  # a request is being handled, its body complete (no limit)


class Timeouts(NamedTuple):
    """Seconds each phase may last."""

    header: float
    body: float
    keepalive: float


class Expiry(NamedTuple):
    """What the timeout of the current phase running out means to the shell.

    ``close``: close the connection, after writing ``answer`` if there is one; ``slow``: the
    phase to count a slow client in (empty: none); ``end_body`` (a handed-over connection in
    :attr:`Phase.BODY`): fail the body aiohttp is waiting for, unless it completed meanwhile
    (then :meth:`Http1Connection.body_complete`).
    """

    close: bool
    answer: bytes = b""
    slow: str = ""
    end_body: bool = False


_WAIT = Expiry(close=False)
_CLOSE = Expiry(close=True)
_END_BODY = Expiry(close=False, slow="body", end_body=True)


class _NeedData(Enum):
    NEED_DATA = "need data"


NEED_DATA = _NeedData.NEED_DATA
"""No event until more bytes are received."""

Event = Request | HandOver | BodyPending | _NeedData

_FORBIDDEN = frozenset({"transfer-encoding", "content-encoding", "expect", "upgrade"})
_FIELD_BYTES = bytes([9, *range(0x20, 0x7F)])  # HTAB, SP and visible ASCII


class _NotPlain(Exception):
    """Raised in a parser callback: stops llhttp at a request that is not plain."""


class Http1Connection:
    """One server connection: its phase and timeouts, its flow, and its plain requests.

    On the plain path (routes given), feed it what the peer sends (:meth:`receive_data`) and
    take what that means (:meth:`next_event`), one request at a time: answer a
    :class:`Request`, then :meth:`response_sent`, before the next event. After a
    :class:`HandOver` (or from the start, with no routes) aiohttp parses the connection, and
    the shell reports its progress (:meth:`request_parsed`, :meth:`aiohttp_response_sent`),
    so that phases and timeouts stay this object's either way.

    The shell arms a timer for :attr:`timeout` whenever the phase changes (a lazy one:
    re-arming in the same phase moves the deadline), asks :meth:`expire` what a timer that ran
    out means, reads the socket while :meth:`wants_read`, and lets the listener evict the
    connection while :attr:`idle`.
    """

    __slots__ = ("_body", "_buf", "_done", "_fields", "_handling", "_handover", "_head",
                 "_head_started", "_lines", "_max_body", "_max_head", "_memo", "_parser",
                 "_read_limit", "_start", "_unfinished", "_url", "handed_over", "phase", "timeouts",
                 "writable")

    def __init__(self, routes: tuple[tuple[str, str], ...] | frozenset[tuple[str, str]], *,
                 max_body: int, timeouts: Timeouts, max_head: int = MAX_HEAD) -> None:
        self._max_body = max_body
        self._max_head = max_head
        self._read_limit = max_head + max_body
        # The request line each route's requests start with, by the parser's (method, target).
        self._lines = {(m.encode(), t.encode()): (m, t, f"{m} {t} HTTP/1.1\r\n".encode())
                       for m, t in routes}
        self._parser = HttpRequestParser(self)
        self._buf = bytearray()  # from the first byte of the first request not yet taken
        self._done: deque[RequestHead] = deque()  # complete requests, not yet taken, in order
        self._start = 0  # where the request being parsed starts in _buf
        self._handover = not routes  # the request at _start is not plain
        self._url = b""
        self._fields: dict[str, str] = {}
        self._head: RequestHead | None = None  # the request being parsed, once its head is
        self._body = False  # its body is still arriving
        self._unfinished: RequestHead | None = None  # told as BodyPending, not yet complete
        self._handling = False  # a Request was taken and not yet answered
        self._head_started = False  # a byte of the awaited head has arrived
        self._memo: tuple[bytes, RequestHead] | None = None  # the last plain head, and its bytes
        self.handed_over = False
        """Whether aiohttp has the connection (from the :class:`HandOver` on)."""
        self.phase = Phase.HEAD  # a new connection waits for its first head
        self.timeouts = timeouts
        self.writable = True
        """Whether the transport takes writes (the shell sets it from pause/resume_writing)."""

    # Phases and timeouts -----------------------------------------------------------------

    @property
    def timeout(self) -> float | None:
        """Seconds the current phase may last (None: no limit)."""
        phase, t = self.phase, self.timeouts
        if phase is Phase.BUSY:
            return None
        return (t.header if phase is Phase.HEAD else t.body if phase is Phase.BODY
                else t.keepalive)

    @property
    def idle(self) -> bool:
        """No request is in progress: the listener may close it to make room."""
        return self.phase is Phase.HEAD or self.phase is Phase.IDLE

    def expire(self) -> Expiry:
        """The current phase's timeout ran out: what to do."""
        phase = self.phase
        if phase is Phase.BUSY:
            return _WAIT
        if phase is Phase.BODY and self.handed_over:
            return _END_BODY
        if phase is Phase.IDLE or not self._head_started:
            return _CLOSE  # no byte of a request: nothing to answer
        if phase is Phase.HEAD:
            what, seconds = "head", self.timeouts.header
        else:
            what, seconds = "body", self.timeouts.body
        return Expiry(close=True, slow=phase.value, answer=error_response(
            408, "request_timeout", f"the request {what} did not arrive within {seconds:g} s"))

    def body_complete(self) -> None:
        """(Handed over) the body whose timeout ran out had arrived: the request is busy."""
        self.phase = Phase.BUSY

    # Flow ----------------------------------------------------------------------------------

    def wants_read(self) -> bool:
        """Whether to read the socket: on the plain path, while writes are taken and no
        request is being handled or at most one more request's worth is buffered; aiohttp's
        connections read as aiohttp decides."""
        if self.handed_over:
            return True
        return self.writable and (not self._handling or len(self._buf) <= self._read_limit)

    def may_start(self) -> bool:
        """Whether to ask for the next plain request now."""
        return not self._handling and self.writable and not self.handed_over

    def abandon(self) -> RequestHead | None:
        """The plain request whose body was awaited is over unanswered (the peer left or the
        body timed out): that request, once."""
        head, self._unfinished = self._unfinished, None
        return head

    # The plain path ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer, in order (an empty ``data``: nothing). On a handed-over
        connection only the phase is kept: the bytes are aiohttp's."""
        if self.phase is Phase.IDLE:
            self.phase = Phase.HEAD
        if self.phase is Phase.HEAD:
            self._head_started = True
        if self.handed_over:
            return
        buf = self._buf
        at = len(buf)
        buf += data
        if self._handover:
            return
        if at == self._start and self._memo is not None:  # at a request boundary
            taken = self._recall(at)
            if taken == len(buf):
                return
            if taken != at:
                data = bytes(buf[taken:])
        try:
            self._parser.feed_data(data)
        except (HttpParserError, HttpParserUpgrade):  # malformed, or found not plain
            self._handover = True
            return
        if self._head is None and len(self._buf) - self._start >= self._max_head:
            self._handover = True  # the full parser applies its own limits and answers

    def _recall(self, at: int) -> int:
        """Take the requests from ``at`` on that are the remembered head and a whole body; where
        the first byte not taken is (llhttp's next one)."""
        assert self._memo is not None
        line, head = self._memo
        size, buf, done = head.head_size + head.body_size, self._buf, self._done
        while len(buf) - at >= size and buf.startswith(line, at):
            done.append(head)
            at += size
        self._start = at
        return at

    def next_event(self) -> Event:
        """The next complete request, a body that began to arrive, the hand-over, or
        :data:`NEED_DATA`."""
        if self._done:
            head = self._done.popleft()
            size = head.head_size + head.body_size
            buf = self._buf
            body = bytes(buf[head.head_size:size])
            del buf[:size]
            self._start -= size
            self.phase, self._handling = Phase.BUSY, True
            self._head_started = False
            self._unfinished = None
            return Request(head, body)
        if self._handover:
            self.handed_over = True
            data = bytes(self._buf)
            self._buf.clear()
            return HandOver(data)
        if self._body and self.phase is not Phase.BODY:
            assert self._head is not None
            self.phase, self._unfinished = Phase.BODY, self._head
            return BodyPending(self._head)
        return NEED_DATA

    def response_sent(self) -> None:
        """The answer to the request taken last is written."""
        self._handling = False
        if self._buf:  # pipelined: the next head has (begun to) arrive
            self.phase, self._head_started = Phase.HEAD, True
        else:
            self.phase = Phase.IDLE

    @property
    def buffered(self) -> int:
        """Bytes received and not yet taken as a request (0 once handed over)."""
        return len(self._buf)

    # aiohttp's side, once handed over ------------------------------------------------------

    def request_parsed(self, body_pending: bool) -> bool:
        """aiohttp parsed a request's head (``body_pending``: its body is still arriving);
        whether the phase changed."""
        if self.phase is not Phase.HEAD:
            return False
        self._head_started = False
        self.phase = Phase.BODY if body_pending else Phase.BUSY
        return True

    def aiohttp_response_sent(self, waiting: bool, body_pending: bool) -> None:
        """aiohttp wrote a response; ``waiting``: another request is parsed already."""
        if waiting:
            self.phase = Phase.BODY if body_pending else Phase.BUSY
        else:
            self.phase = Phase.IDLE

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
        self._head = RequestHead(method, target, fields, end - start, body_size)
        self._body = True

    def on_message_complete(self) -> None:
        head = self._head
        assert head is not None  # llhttp completes no message whose head it did not
        self._done.append(head)
        start = self._start
        self._memo = bytes(self._buf[start:start + head.head_size]), head
        self._start = start + head.head_size + head.body_size
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
    made once per kind of answer, those after it once per ``date``."""
    return b"".join((_framing(status, content_type, headers, reason), b"%d" % len(body),
                     _tail(date, server, close), body))


@lru_cache(maxsize=8)
def _tail(date: str, server: str, close: bool) -> bytes:
    end = "\r\nConnection: close\r\n\r\n" if close else "\r\n\r\n"
    return f"\r\nDate: {date}\r\nServer: {server}{end}".encode("latin-1")
