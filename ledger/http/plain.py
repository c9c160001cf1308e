"""The plain path's API: what an application registers to serve a hot route itself.

An application (``notary serve``'s) puts a :class:`PlainRoutes` under :data:`PLAIN_ROUTES` in
its aiohttp app; the server (:mod:`ledger.http.server`) then serves each plain request to one
of those routes by calling its :data:`PlainHandler` with the parsed head and the body
(:mod:`ledger.http.http1`), and writes back the bytes it returns. :func:`plain_response` and
:func:`plain_from_response` make those bytes with the headers aiohttp would send, so a client
cannot tell which of the two paths answered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate

from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE

from ledger.http.http1 import RequestHead, format_response

__all__ = ["PLAIN_ROUTES", "PlainHandler", "PlainRoutes", "plain_from_response",
           "plain_response"]


PlainHandler = Callable[[RequestHead, bytes], Awaitable[bytes]]
"""A hot route's handler: a plain request's head and body in, the complete response out.

It answers everything itself, errors included (it must not raise), exactly as the route's
aiohttp handler and middlewares would: the two serve the same route."""

@dataclass(frozen=True)
class PlainRoutes:
    """Hot routes by (method, exact target), and the body limit the application enforces
    (a larger declared body goes to aiohttp, which answers 413).

    ``unfinished(head, status, seconds)`` is told of a request whose body never arrived: 499
    when the client left, 408 when the body timeout closed the connection (aiohttp's path
    counts both in its metrics, as a handler reading the body sees them)."""

    routes: Mapping[tuple[str, str], PlainHandler] = field(default_factory=dict)
    max_body: int = 1024 * 1024
    unfinished: Callable[[RequestHead, int, float], None] | None = None


PLAIN_ROUTES = web.AppKey("plain_routes", PlainRoutes)


class _Clock:
    """The ``Date`` header's text, formatted once a second (as aiohttp does)."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def date(self) -> str:
        now = int(time.time())
        if now != self._second:
            self._second, self._text = now, formatdate(now, usegmt=True)
        return self._text


_clock = _Clock()


def plain_response(status: int, body: bytes, *, content_type: str = "application/json",
                   headers: tuple[tuple[str, str], ...] = (), close: bool = False,
                   reason: str | None = None) -> bytes:
    """A response for a :data:`PlainHandler`, with the headers aiohttp would send."""
    if content_type.startswith("application/json") and "charset" not in content_type:
        content_type += "; charset=utf-8"
    return format_response(status, body, content_type=content_type, date=_clock.date(),
                           server=SERVER_SOFTWARE, headers=headers, close=close, reason=reason)


def plain_from_response(resp: web.Response) -> bytes:
    """An aiohttp response (an error built by the shared error code) as plain response bytes."""
    body = resp.body
    assert isinstance(body, bytes)
    headers = tuple((k, v) for k, v in resp.headers.items()
                    if k not in ("Content-Type", "Content-Length"))
    return format_response(resp.status, body, content_type=resp.headers["Content-Type"],
                           date=_clock.date(), server=SERVER_SOFTWARE, headers=headers,
                           close=resp.keep_alive is False, reason=resp.reason)
