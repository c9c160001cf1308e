"""The HTTP server for the open internet: bounded connections and read times, quiet errors.

aiohttp's defaults suit a trusted network: every connection is accepted (until the process runs
out of file descriptors, when asyncio's accept loop spins and logs a traceback per attempt),
a connection may sit idle or send its head and body as slowly as it likes, and a request that
fails to parse is logged with its raw bytes (Bearer key and body included) and answered in
plain text. This module keeps aiohttp's request handling and replaces the parts around it:

- :class:`Listener` accepts connections itself, at most ``max_connections`` at a time. That
  number is derived from ``RLIMIT_NOFILE`` with a reserve for the database and files, so the
  process never runs out of descriptors because of clients. At the limit, the connection that
  has been idle longest (no request in progress) is closed to make room, as nginx does, so
  idle or stalled connections cannot lock out a client that has a request to send. An accept
  that fails anyway (``EMFILE`` from elsewhere) backs off and is logged once per interval.
- :class:`GuardedHandler` (an aiohttp ``RequestHandler``) closes a connection whose request
  head takes longer than ``header_timeout``, whose body takes longer than ``body_timeout``
  (the handler reading it gets :class:`RequestBodyTimeout`, answered 408), or that stays idle
  between requests longer than ``keepalive_timeout``. Protocol errors are answered with the
  usual JSON error and logged as one structured line: never a request byte, at most one line
  per interval.
- Hot routes (:class:`PlainRoutes`, registered by the application under :data:`PLAIN_ROUTES`)
  are served without aiohttp's request machinery while a connection sends only plain requests
  to them (:mod:`ledger.core.http1`): the handler gets the head and body and returns the whole
  response. The first request that is not such is handed, with every byte after it, to
  aiohttp, which keeps the connection from then on; so aiohttp still parses, rejects and
  answers everything unusual, and responses stay in request order.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from enum import Enum
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from ledger.core.http1 import INCOMPLETE, Head, format_response, parse_head
from ledger.http.errors import RequestBodyTimeout, json_error
from ledger.process.exitcodes import UsageError
from ledger.process.structured_logs import LogThrottle, safe_message, safe_traceback

__all__ = ["PLAIN_ROUTES", "GuardedHandler", "ListenError", "Listener", "PlainHandler",
           "PlainRoutes", "ServerLimits", "close_unread", "connection_limit",
           "install_loop_exception_handler", "plain_from_response", "plain_response"]

_log = structlog.get_logger("ledger.http.server")

#: Accept errors that mean "out of resources, try again later" rather than "this one failed".
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_NOFILE_CAP = 1 << 20


class ListenError(UsageError):
    """The server cannot start as configured (the message says what to change)."""


@dataclass(frozen=True)
class ServerLimits:
    """Connection limits. Times are in seconds; ``max_connections`` 0 derives the limit."""

    max_connections: int = 0
    keepalive_timeout: float = 5.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    fd_reserve: int = 64
    backlog: int = 128


PlainHandler = Callable[[Head, bytes], Awaitable[bytes]]
"""A hot route's handler: a plain request's head and body in, the complete response out.

It answers everything itself, errors included (it must not raise), exactly as the route's
aiohttp handler and middlewares would: the two serve the same route."""

_MAX_PLAIN_HEAD = 8000  # below aiohttp's 8,190 bytes per line


@dataclass(frozen=True)
class PlainRoutes:
    """Hot routes by (method, exact target), and the body limit the application enforces
    (a larger declared body goes to aiohttp, which answers 413).

    ``unfinished(head, status, seconds)`` is told of a request whose body never arrived: 499
    when the client left, 408 when the body timeout closed the connection (aiohttp's path
    counts both in its metrics, as a handler reading the body sees them)."""

    routes: Mapping[tuple[str, str], PlainHandler] = field(default_factory=dict)
    max_body: int = 1024 * 1024
    unfinished: Callable[[Head, int, float], None] | None = None


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


def raise_nofile_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (as Go's runtime does); the soft one.

    The soft limit is often 1024 for historical reasons (``select``), which asyncio does not
    use; the hard limit is what the operator allowed.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard if hard != resource.RLIM_INFINITY else _NOFILE_CAP, _NOFILE_CAP)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return soft if soft != resource.RLIM_INFINITY else _NOFILE_CAP


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def connection_limit(limits: ServerLimits) -> int:
    """The connections this process can hold: descriptors left after those open now (the
    database, the listening sockets) and a reserve for files, pools and outgoing requests.

    An explicit ``max_connections`` above that is refused rather than trusted: the server
    would fail later, under attack, instead of now.
    """
    nofile = raise_nofile_limit()
    room = nofile - _open_fds() - limits.fd_reserve - 1  # - 1: the socket being accepted
    if limits.max_connections > 0:
        if limits.max_connections > room:
            raise ListenError(
                f"max_connections {limits.max_connections} needs more file descriptors than "
                f"RLIMIT_NOFILE {nofile} leaves (at most {max(room, 0)} after the descriptors "
                f"open now and a reserve of {limits.fd_reserve}); raise `ulimit -n` or lower "
                "max_connections")
        return limits.max_connections
    if room < 8:
        raise ListenError(
            f"RLIMIT_NOFILE {nofile} leaves room for only {max(room, 0)} connections; raise "
            "`ulimit -n`")
    return room


def _describe(exc: BaseException | None) -> str:
    """aiohttp's own words for a parse error, without the request bytes it quotes."""
    text = str(getattr(exc, "message", "") or "") if exc is not None else ""
    head = text.split("\n\n", 1)[0]
    words = " ".join(line.strip() for line in head.splitlines() if line.strip())
    return safe_message(words, 160).rstrip(" :") or "malformed HTTP request"


_TIMER_SLACK = 0.001
"""A timer that fires this close to its deadline counts as on time (the loop may run timers
up to its clock resolution early)."""


class _Phase(Enum):
    HEAD = "header"  # waiting for (the rest of) a request head
    BODY = "body"  # a request is in progress and its body is still arriving
    BUSY = "busy"  # a request is being handled, its body complete
    IDLE = "idle"  # between requests on a keep-alive connection


class GuardedHandler(RequestHandler):
    """aiohttp's request handler with read timeouts, JSON protocol errors and safe logging."""

    def __init__(self, manager: Server, *, loop: asyncio.AbstractEventLoop,
                 listener: Listener, **kwargs: Any) -> None:
        # aiohttp's keep-alive timer would also close a connection whose head is arriving
        # slowly, at the keep-alive time; our own timer below tells the two apart.
        super().__init__(manager, loop=loop, keepalive_timeout=3600 * 24 * 365,
                         access_log=None, **kwargs)  # type: ignore[arg-type]  # None: no log
        self._listener = listener
        self._limits = listener.limits
        self._phase = _Phase.HEAD
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None  # loop time the current phase must end by
        self._body: StreamReader | None = None
        self._head_started = False
        # The plain path (see the module docstring); None once aiohttp has the connection.
        self._plain_cfg = listener.plain or PlainRoutes()
        self._plain: Mapping[tuple[str, str], PlainHandler] | None = (
            self._plain_cfg.routes or None)
        self._plain_buf = bytearray()
        self._plain_paused = False
        self._plain_head: Head | None = None  # parsed; its body is still arriving
        self._plain_head_at = 0.0  # perf_counter() when it was
        self._plain_task: asyncio.Task[None] | None = None

    # Timers --------------------------------------------------------------------------------

    def _arm(self, phase: _Phase, seconds: float | None) -> None:
        """Enter ``phase``, which must end within ``seconds`` (None: no limit).

        The timer is lazy, as nginx's are: a new deadline later than the pending timer leaves
        the timer alone (when it fires, it sees the later deadline and re-arms for it), so a
        keep-alive connection in steady state schedules no timer per request, only one per
        timeout period; only an earlier deadline reschedules.
        """
        self._phase = phase
        if seconds is None:
            self._deadline = None
        else:
            deadline = self._deadline = self._loop.time() + seconds
            if self._timer is None or self._timer.when() > deadline:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = self._loop.call_at(deadline, self._expired)
        if phase in (_Phase.HEAD, _Phase.IDLE):
            self._listener.idle(self)
        else:
            self._listener.busy(self)

    def _expired(self) -> None:
        self._timer = None
        if self.transport is None or self._deadline is None:
            return
        if self._deadline - self._loop.time() > _TIMER_SLACK:  # moved later since armed
            self._timer = self._loop.call_at(self._deadline, self._expired)
            return
        self._deadline = None
        if self._phase is _Phase.BODY and self._plain_head is not None:
            self._plain_abandon(408)
            self._listener.slow_client("body")
            self._send_raw_error(408, "request_timeout", f"the request body did not arrive "
                                 f"within {self._limits.body_timeout:g} s")
            self.force_close()
            return
        if self._phase is _Phase.BODY:
            body = self._body
            if body is None or body.is_eof():
                self._phase = _Phase.BUSY
                return
            self._listener.slow_client("body")
            self._lingering_time = 0.0  # nothing more is read from this connection
            body.set_exception(RequestBodyTimeout(
                f"the request body did not arrive within {self._limits.body_timeout:g} s"))
            self.close()
            return
        if self._phase is _Phase.BUSY or self._request_in_progress or self._messages:
            return
        if self._phase is _Phase.HEAD and self._head_started:
            self._listener.slow_client("header")
            self._send_raw_error(408, "request_timeout",
                                 f"the request head did not arrive within "
                                 f"{self._limits.header_timeout:g} s")
        self.force_close()

    def _send_raw_error(self, status: int, code: str, message: str) -> None:
        """A complete JSON error written straight to the socket (no request exists yet)."""
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        reason = {408: "Request Timeout", 503: "Service Unavailable"}.get(status, "Error")
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\n").encode()
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.write(head + body)

    # aiohttp hooks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._listener.opened(self)
        self._arm(_Phase.HEAD, self._limits.header_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._plain_abandon(499)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._listener.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._plain is not None:
            self._plain_received(data)
            return
        if self._phase is _Phase.IDLE and data:
            self._arm(_Phase.HEAD, self._limits.header_timeout)
        if self._phase is _Phase.HEAD and data:
            self._head_started = True
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed and self._phase is _Phase.HEAD and self._messages:
            payload = self._messages[-1][1]
            self._head_started = False
            if payload.is_eof():
                self._arm(_Phase.BUSY, None)
            else:
                self._body = payload
                self._arm(_Phase.BODY, self._limits.body_timeout)

    async def shutdown(self, timeout: float | None = 15.0) -> None:
        """Let a plain request in progress finish (its answer follows a commit), then close."""
        if self._plain_task is not None:
            await asyncio.wait([self._plain_task], timeout=timeout)
        await super().shutdown(timeout)

    # The plain path ------------------------------------------------------------------------

    def _plain_received(self, data: bytes) -> None:
        if not data:
            return
        if self._phase is _Phase.IDLE:
            self._arm(_Phase.HEAD, self._limits.header_timeout)
        if self._phase is _Phase.HEAD:
            self._head_started = True
        self._plain_buf += data
        if self._plain_task is None:
            self._plain_next()
        elif (len(self._plain_buf) > _MAX_PLAIN_HEAD + self._plain_cfg.max_body
              and self.transport is not None):
            # Pipelined bytes while a request is in progress: one more request's worth is
            # kept, then the socket is not read until the answer is out (as aiohttp does).
            self._plain_paused = True
            self.transport.pause_reading()

    def _plain_next(self) -> None:
        """Start the request at the front of the buffer, wait for more of it, or hand the
        connection to aiohttp."""
        buf = self._plain_buf
        if not buf or self._plain is None or self.transport is None:
            return
        head = self._plain_head or parse_head(buf, max_head=_MAX_PLAIN_HEAD,
                                              max_body=self._plain_cfg.max_body)
        if head is INCOMPLETE:
            return
        handler = self._plain.get((head.method, head.target)) if isinstance(head, Head) else None
        if handler is None or not isinstance(head, Head):  # (the second test is for mypy)
            self._leave_plain()
            return
        if len(buf) < head.size:
            if self._plain_head is None:
                self._plain_head, self._plain_head_at = head, time.perf_counter()
                self._arm(_Phase.BODY, self._limits.body_timeout)
            return
        self._plain_head = None
        self._head_started = False
        body = bytes(buf[head.head_size:head.size])
        del buf[:head.size]
        self._arm(_Phase.BUSY, None)
        self._plain_task = self._loop.create_task(self._plain_serve(handler, head, body))

    async def _plain_serve(self, handler: PlainHandler, head: Head, body: bytes) -> None:
        try:
            response = await handler(head, body)
        except Exception as e:  # a handler's bug: answered as aiohttp's path would
            self._listener.log("http_unhandled_error", status=500,
                               exception_type=type(e).__name__, where=safe_traceback(e))
            response = plain_from_response(json_error(500, "internal", "internal server error"))
        self._plain_task = None
        if self.transport is None:  # the client left; the request's work is done anyway
            return
        self.transport.write(response)
        if self._plain_paused:
            self._plain_paused = False
            self.transport.resume_reading()
        if self._plain_buf:  # pipelined: the next head has (begun to) arrive
            self._arm(_Phase.HEAD, self._limits.header_timeout)
            self._head_started = True
            self._plain_next()
        else:
            self._arm(_Phase.IDLE, self._limits.keepalive_timeout)

    def _plain_abandon(self, status: int) -> None:
        """The request whose body was awaited is over unanswered (``status``: why)."""
        head, self._plain_head = self._plain_head, None
        unfinished = self._plain_cfg.unfinished
        if head is not None and unfinished is not None:
            unfinished(head, status, time.perf_counter() - self._plain_head_at)

    def _leave_plain(self) -> None:
        """aiohttp takes the connection from here on, starting with the buffered bytes."""
        self._plain = None
        self._plain_head = None
        data = bytes(self._plain_buf)
        self._plain_buf.clear()
        self.data_received(data)

    async def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        result = await super().finish_response(request, resp, start_time)
        self._body = None
        if self._messages:  # a pipelined request is already waiting
            payload = self._messages[0][1]
            if payload.is_eof():
                self._arm(_Phase.BUSY, None)
            else:
                self._body = payload
                self._arm(_Phase.BODY, self._limits.body_timeout)
        else:
            self._arm(_Phase.IDLE, self._limits.keepalive_timeout)
        return result

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None, message: str | None = None
                     ) -> web.StreamResponse:
        """A JSON error for what aiohttp could not parse or handle; one safe log line."""
        if request.writer.output_size > 0:
            raise ConnectionError("a response was already started; cannot send an error")
        if status == 400:
            what = _describe(exc)
            self._listener.log("http_protocol_error", level="info", status=status, error=what,
                               exception_type=type(exc).__name__ if exc else None)
            resp = json_error(400, "bad_request", f"malformed HTTP request: {what}")
        elif status == 504:
            resp = json_error(504, "timeout", "the request handler timed out")
        else:
            fields: dict[str, Any] = {"status": status}
            if exc is not None:
                fields["exception_type"] = type(exc).__name__
                fields["where"] = safe_traceback(exc)
            self._listener.log("http_unhandled_error", **fields)
            resp = json_error(status, "internal", "internal server error")
        resp.force_close()
        return resp

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        fields: dict[str, Any] = {"message": safe_message(str(args[0])) if args else ""}
        if isinstance(exc, BaseException):
            fields["exception_type"] = type(exc).__name__
            fields["where"] = safe_traceback(exc)
        self._listener.log("http_handler_error", **fields)

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
    if isinstance(proto, GuardedHandler):
        proto._lingering_time = 0.0
        proto.close()


class Listener:
    """Accepts connections for an aiohttp server, within a connection limit.

    ``idle`` connections (no request in progress) are kept in the order they became idle, so
    the longest-idle one is the one closed when a new connection needs its place.
    """

    def __init__(self, server: Server, limits: ServerLimits, *, max_connections: int,
                 throttle: LogThrottle | None = None, plain: PlainRoutes | None = None
                 ) -> None:
        self.server = server
        self.limits = limits
        self.plain = plain
        self.max_connections = max_connections
        self._throttle = throttle or LogThrottle(10.0)
        self._open: set[GuardedHandler] = set()
        self._idle: OrderedDict[GuardedHandler, None] = OrderedDict()
        self._room = asyncio.Event()
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.evicted = 0
        self.slow_clients = 0
        self.accept_errors = 0

    # Bookkeeping (called by the handlers) --------------------------------------------------

    def opened(self, handler: GuardedHandler) -> None:
        self._open.add(handler)

    def closed(self, handler: GuardedHandler) -> None:
        self._open.discard(handler)
        self._idle.pop(handler, None)
        self._room.set()

    def idle(self, handler: GuardedHandler) -> None:
        if handler in self._open:
            self._idle.pop(handler, None)
            self._idle[handler] = None
            self._room.set()

    def busy(self, handler: GuardedHandler) -> None:
        self._idle.pop(handler, None)

    def slow_client(self, phase: str) -> None:
        self.slow_clients += 1
        self.log("slow_client_closed", level="info", kind=phase, phase=phase)

    def log(self, event: str, *, level: str = "warning", kind: str = "", **fields: Any) -> None:
        """One line per event (and ``kind`` of it) and interval; the next says how many were
        dropped."""
        dropped = self._throttle.allow(f"{event}:{kind}")
        if dropped is not None:
            if dropped:
                fields["suppressed"] = dropped
            getattr(_log, level)(event, **fields)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # Accepting -----------------------------------------------------------------------------

    def _factory(self) -> GuardedHandler:
        return GuardedHandler(self.server, loop=asyncio.get_running_loop(), listener=self)

    async def start(self, host: str, port: int, *, sock: socket.socket | None = None
                    ) -> list[tuple[str, int]]:
        """Bind and listen on every address of ``host``; the (host, port) pairs bound.

        With ``sock`` (a socket already listening, inherited from a supervisor that hands it
        to several worker processes: ``notary serve --workers``), accept on it instead."""
        if sock is not None:
            sock.setblocking(False)
            self._sockets.append(sock)
            self._tasks.append(asyncio.create_task(self._accept_loop(sock), name="accept"))
            return [sock.getsockname()[:2]]
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        bound: list[tuple[str, int]] = []
        try:
            for family, kind, proto, _, addr in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr if not bound else (addr[0], bound[0][1], *addr[2:]))
                sock.listen(self.limits.backlog)
                sock.setblocking(False)
                bound.append(sock.getsockname()[:2])
        except OSError:
            self.close_sockets()
            raise
        for sock in self._sockets:
            self._tasks.append(asyncio.create_task(self._accept_loop(sock), name="accept"))
        return bound

    async def _make_room(self) -> None:
        while len(self._open) >= self.max_connections:
            if self._idle:
                victim, _ = self._idle.popitem(last=False)
                self._open.discard(victim)  # its descriptor is released as it closes
                victim.force_close()
                self.evicted += 1
                self.log("connection_limit_reached", limit=self.max_connections,
                         action="closed the longest-idle connection")
                continue
            self.log("connection_limit_reached", limit=self.max_connections,
                     action="waiting: every connection has a request in progress")
            self._room.clear()
            await self._room.wait()

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while True:
            await self._make_room()
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as e:
                if e.errno in _RESOURCE_ERRNOS:
                    self.accept_errors += 1
                    self.log("accept_failed", errno=errno.errorcode.get(e.errno or 0, "?"),
                             open_connections=len(self._open), retry_in=backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                # Anything else concerns that one connection (aborted before it was accepted).
                continue
            backoff = 0.05
            try:
                conn.setblocking(False)
                await loop.connect_accepted_socket(self._factory, conn)
            except OSError:
                conn.close()

    def close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    async def close(self) -> None:
        """Stop accepting; open connections are aiohttp's to drain (``runner.cleanup``)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self.close_sockets()


def install_loop_exception_handler(throttle: LogThrottle | None = None) -> None:
    """Log what asyncio reports (callbacks that raised, unretrieved task errors) as one safe,
    rate-limited structured line, instead of a traceback that may quote arguments."""
    limiter = throttle or LogThrottle(10.0)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = safe_message(str(context.get("message", "")))
        dropped = limiter.allow(message)
        if dropped is None:
            return
        fields: dict[str, Any] = {"message": message}
        if isinstance(exc, BaseException):
            fields["exception_type"] = type(exc).__name__
            fields["where"] = safe_traceback(exc)
        if dropped:
            fields["suppressed"] = dropped
        _log.error("event_loop_error", **fields)

    asyncio.get_running_loop().set_exception_handler(handler)

