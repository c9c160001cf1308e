"""Handing a connection to aiohttp: the one module that touches aiohttp's internals.

The server (:mod:`ledger.http.server`) owns every accepted connection as an
``asyncio.Protocol``; a connection that is not served on the plain path is handed, with the
bytes read so far, to aiohttp's ``RequestHandler``, which keeps it from then on. aiohttp's
public API ends at "a protocol factory for a whole connection"; what the server needs beyond
that is here, so that it is one small thing to check when aiohttp changes:

- when a request's head has been parsed, and whether its body is still arriving (for the
  body timeout): read from the handler's queue of parsed messages (``_messages``,
  ``_request_count``), and told to the server (:class:`Watcher`);
- whether a request is still in progress (``_request_in_progress``), so that an idle timer
  never closes a connection with work in it;
- ending a body that will not arrive with an error the handler reading it sees, and closing
  without reading the rest of a body (``_lingering_time``);
- protocol errors answered with the usual JSON error and one safe log line, and aiohttp's own
  log lines (which may quote requests) kept out (``handle_error``, ``log_exception`` and
  ``log_debug``, methods aiohttp calls).

pyproject.toml pins aiohttp to the minor versions tests/ledger/http/test_aiohttp_adapter.py covers.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from ledger.http.errors import json_error
from ledger.process.structured_logs import safe_message, safe_traceback

__all__ = ["AiohttpConnection", "Body", "Watcher", "close_unread"]

Body = StreamReader
"""A request body aiohttp is still reading (for :meth:`AiohttpConnection.body_done` and
:meth:`AiohttpConnection.end_body`)."""

_NEVER = 3600 * 24 * 365
"""aiohttp's own keep-alive timer, which would also close a connection whose next head is
arriving slowly at the keep-alive time, is left out: the server's timers tell the two apart."""


class Watcher(Protocol):
    """What the server is told about a handed-over connection."""

    def request_parsed(self, body: Body | None) -> None:
        """A request's head has been parsed; ``body`` is its body if still arriving."""

    def response_sent(self, waiting: bool, body: Body | None) -> None:
        """A response is out; ``waiting``: another request is already parsed (``body``: its
        body, if still arriving)."""

    def log(self, event: str, *, level: str = "warning", kind: str = "",
            **fields: Any) -> None:
        """One rate-limited structured log line."""


def _describe(exc: BaseException | None) -> str:
    """aiohttp's own words for a parse error, without the request bytes it quotes."""
    text = str(getattr(exc, "message", "") or "") if exc is not None else ""
    head = text.split("\n\n", 1)[0]
    words = " ".join(line.strip() for line in head.splitlines() if line.strip())
    return safe_message(words, 160).rstrip(" :") or "malformed HTTP request"


class AiohttpConnection(RequestHandler):
    """aiohttp's request handler for one connection handed over by the server."""

    def __init__(self, server: web.Server, watcher: Watcher) -> None:
        super().__init__(server, loop=asyncio.get_running_loop(), keepalive_timeout=_NEVER,
                         access_log=None)  # type: ignore[arg-type]  # None: no access log
        self._watcher = watcher

    # What the server does ------------------------------------------------------------------

    def take_over(self, transport: asyncio.Transport, data: bytes) -> None:
        """Serve ``transport`` from here on, starting with ``data`` (already read from it).

        The server stays the transport's protocol and passes on what it is told
        (``data_received``, ``eof_received``, ``pause_writing``, ``resume_writing``,
        ``connection_lost``)."""
        self.connection_made(transport)
        if data:
            self.data_received(data)

    def busy(self) -> bool:
        """Whether a request is being handled or waits to be."""
        return self._request_in_progress or bool(self._messages)

    @staticmethod
    def body_done(body: Body) -> bool:
        return body.is_eof()

    def end_body(self, body: Body, exc: BaseException) -> None:
        """``body`` will not arrive: the handler reading it gets ``exc``, and the connection
        closes after the response, without reading anything more."""
        self._lingering_time = 0.0
        body.set_exception(exc)
        self.close()

    def close_unread(self) -> None:
        """Close after the response without reading the rest of the request body."""
        self._lingering_time = 0.0
        self.close()

    # What aiohttp calls --------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed and self._messages:
            body = self._messages[-1][1]
            self._watcher.request_parsed(None if body.is_eof() else body)

    async def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        result = await super().finish_response(request, resp, start_time)
        if self._messages:  # a pipelined request is already waiting
            body = self._messages[0][1]
            self._watcher.response_sent(True, None if body.is_eof() else body)
        else:
            self._watcher.response_sent(False, None)
        return result

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None, message: str | None = None
                     ) -> web.StreamResponse:
        """A JSON error for what aiohttp could not parse or handle; one safe log line."""
        if request.writer.output_size > 0:
            raise ConnectionError("a response was already started; cannot send an error")
        log = self._watcher.log
        if status == 400:
            what = _describe(exc)
            log("http_protocol_error", level="info", status=status, error=what,
                exception_type=type(exc).__name__ if exc else None)
            resp = json_error(400, "bad_request", f"malformed HTTP request: {what}")
        elif status == 504:
            resp = json_error(504, "timeout", "the request handler timed out")
        else:
            fields: dict[str, Any] = {"status": status}
            if exc is not None:
                fields["exception_type"] = type(exc).__name__
                fields["where"] = safe_traceback(exc)
            log("http_unhandled_error", **fields)
            resp = json_error(status, "internal", "internal server error")
        resp.force_close()
        return resp

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        fields: dict[str, Any] = {"message": safe_message(str(args[0])) if args else ""}
        if isinstance(exc, BaseException):
            fields["exception_type"] = type(exc).__name__
            fields["where"] = safe_traceback(exc)
        self._watcher.log("http_handler_error", **fields)

    def log_debug(self, *args: Any, **kw: Any) -> None:
        """aiohttp's debug lines may quote requests; they are never written."""


def close_unread(request: web.BaseRequest) -> None:
    """Close the connection after this request's response without reading the rest of its
    body (aiohttp would otherwise read and discard it, up to its lingering time, to keep the
    connection usable).

    For refusals of clients that keep sending anyway: reading a large body only to throw it
    away is most of what such a client costs. The peer may then see a reset instead of the
    response, so this is for clients that were already told to wait.
    """
    proto = request.protocol
    if isinstance(proto, AiohttpConnection):
        proto.close_unread()
