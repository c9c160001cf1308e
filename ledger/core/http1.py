"""Plain HTTP/1.1 requests: the narrow, strict subset a hot route can take without a framework.

The server's full request handling (aiohttp's parser, request and response objects, routing,
middlewares) costs several times the work of a small JSON request itself. Most requests to a
hot route are all alike: ``POST /path HTTP/1.1``, a handful of headers, a ``Content-Length``
body. This module recognizes exactly those, sans I/O, and says so only when it is certain;
anything else is :data:`NOT_PLAIN` and goes to the full parser, which accepts, rejects and
answers it as it always did.

Theory of operation. A request is plain when its head is, byte for byte:

- the request line ``METHOD SP TARGET SP "HTTP/1.1" CRLF``, the method upper-case letters and
  the target an origin-form path of visible ASCII;
- header lines ``name ":" OWS value OWS CRLF``, the name an RFC 9110 token, the value visible
  ASCII, space and tab (no obs-fold, no obs-text, no bare CR or LF), each name at most once,
  at most :data:`MAX_FIELDS` of them, the whole head within the caller's ``max_head``;
- an empty line, then exactly ``Content-Length`` body bytes (absent: no body);
- a ``Host`` header (HTTP/1.1 requires one);

and it has none of the headers that change how the bytes are read or answered:
``Transfer-Encoding`` (framing), ``Content-Encoding`` (the body is not the bytes sent),
``Expect`` (an interim response), ``Upgrade``, and a ``Connection`` other than ``keep-alive``.
Any doubt is :data:`NOT_PLAIN`, never a guess: the subset is chosen so that the full parser,
given the same bytes, sees the same method, target, headers and body boundary (property-tested
against aiohttp's parser), so the two paths cannot disagree about where a request ends.
"""

from __future__ import annotations

import re
from enum import Enum
from http import HTTPStatus
from typing import NamedTuple

__all__ = ["INCOMPLETE", "MAX_FIELDS", "NOT_PLAIN", "Head", "Verdict", "format_response",
           "parse_head"]


class Verdict(Enum):
    """What :func:`parse_head` says when it has no request to give."""

    INCOMPLETE = "incomplete"  # plain so far: wait for more bytes
    NOT_PLAIN = "not plain"  # hand these bytes, as they are, to the full parser


INCOMPLETE = Verdict.INCOMPLETE
NOT_PLAIN = Verdict.NOT_PLAIN

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_HEAD = re.compile(
    rb"([A-Z]{1,16}) (/[!-~]*) HTTP/1\.1"
    rb"((?:\r\n" + _TOKEN + rb":[\t -~]*)*)\r\n\r\n")
_FIELD = re.compile(r"\r\n(" + _TOKEN.decode() + r"):[\t ]*([\t -~]*)")
_FORBIDDEN = frozenset({"transfer-encoding", "content-encoding", "expect", "upgrade"})
_DIGITS = re.compile(r"[0-9]{1,12}")

MAX_FIELDS = 64
"""At most this many header fields (aiohttp refuses more than 127)."""


class Head(NamedTuple):
    """A plain request's head: ``headers`` by lower-case name; the body is
    ``buf[head_size:head_size + body_size]``. (A named tuple: one is made per request.)"""

    method: str
    target: str
    headers: dict[str, str]
    head_size: int
    body_size: int

    @property
    def size(self) -> int:
        """Bytes of the whole request, head and body."""
        return self.head_size + self.body_size


def parse_head(buf: bytes | bytearray, *, max_head: int, max_body: int) -> Head | Verdict:
    """The head of the plain request ``buf`` starts with, or why there is none yet.

    ``max_head`` bounds the bytes searched for the head's end (a longer head is not plain, so
    the full parser applies its own limits and answers); a ``Content-Length`` above
    ``max_body`` is not plain either (the full path answers 413). Whether the body has arrived
    is the caller's to check against :attr:`Head.size`.
    """
    end = buf.find(b"\r\n\r\n", 0, max_head)
    if end < 0:
        if len(buf) >= max_head or not _could_be_plain(buf):
            return NOT_PLAIN
        return INCOMPLETE
    match = _HEAD.match(buf, 0, end + 4)
    if match is None:
        return NOT_PLAIN
    fields = _FIELD.findall(match.group(3).decode("ascii"))
    if len(fields) > MAX_FIELDS:
        return NOT_PLAIN
    headers = {name.lower(): value.rstrip(" \t") for name, value in fields}
    if len(headers) != len(fields) or not _FORBIDDEN.isdisjoint(headers):
        return NOT_PLAIN  # a repeated field, or one that changes how the bytes are read
    if "host" not in headers:  # HTTP/1.1 requires it (RFC 9112 §3.2); aiohttp answers 400
        return NOT_PLAIN
    connection = headers.get("connection")
    if connection is not None and connection.lower() != "keep-alive":
        return NOT_PLAIN
    length = headers.get("content-length")
    body_size = 0
    if length is not None:
        if not _DIGITS.fullmatch(length):
            return NOT_PLAIN
        body_size = int(length)
        if body_size > max_body:
            return NOT_PLAIN
    return Head(match.group(1).decode("ascii"), match.group(2).decode("ascii"), headers,
                end + 4, body_size)


_LINE_START = re.compile(rb"[A-Z]{0,16}(?: (?:/[!-~]*(?: ([!-~]{0,8}))?)?)?")
_REQUEST_LINE = re.compile(rb"[A-Z]{1,16} /[!-~]* HTTP/1\.1")
_HEADERISH = re.compile(rb"[\t\r\n -~]*")


def _could_be_plain(buf: bytes | bytearray) -> bool:
    """Whether ``buf``, which has no end of head yet, may still become a plain request: a
    client that sends a malformed request line is handed to the full parser (and answered)
    at once, not when the head timeout or ``max_head`` is reached."""
    line_end = buf.find(b"\r\n")
    if line_end >= 0:
        return (_REQUEST_LINE.fullmatch(buf, 0, line_end) is not None
                and _HEADERISH.fullmatch(buf, line_end) is not None)
    line = bytes(buf[:-1]) if buf.endswith(b"\r") else bytes(buf)
    match = _LINE_START.fullmatch(line)
    return match is not None and (match.group(1) is None
                                  or b"HTTP/1.1".startswith(match.group(1)))


def format_response(status: int, body: bytes, *, content_type: str, date: str, server: str,
                    headers: tuple[tuple[str, str], ...] = (), close: bool = False,
                    reason: str | None = None) -> bytes:
    """A complete HTTP/1.1 response, its headers in the order aiohttp writes them (so a client
    sees the same answer whichever path served it). ``headers`` must be valid field lines: they
    come from the server's code, never from a request."""
    lines = [f"HTTP/1.1 {status} {reason or HTTPStatus(status).phrase}",
             f"Content-Type: {content_type}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines += [f"Content-Length: {len(body)}", f"Date: {date}", f"Server: {server}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
