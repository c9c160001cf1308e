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
- :class:`Connection` (an ``asyncio.Protocol``) owns each accepted connection. It closes one
  whose request head takes longer than ``header_timeout``, whose body takes longer than
  ``body_timeout`` (answered 408), or that stays idle between requests longer than
  ``keepalive_timeout``.
- Hot routes (:class:`PlainRoutes`, registered by the application under :data:`PLAIN_ROUTES`)
  are served by the connection itself while it sends only plain requests to them
  (:mod:`ledger.core.http1`, sans I/O on llhttp): the handler gets the head and body and
  returns the whole response. The first request that is not such is handed, with every byte
  after it, to aiohttp (:mod:`ledger.http.aiohttp_adapter`), which keeps the connection from
  then on; so aiohttp still parses, rejects and answers everything unusual (protocol errors
  as the usual JSON error and one structured log line without a request byte), and responses
  stay in request order. Without hot routes (``ledger serve``, ``notary serve`` with
  ``fast_path = "off"``), every connection is aiohttp's from its first byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from enum import Enum
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE

from ledger.core.http1 import (
    MAX_HEAD,
    NEED_DATA,
    HandOver,
    Head,
    Phase,
    PlainConnection,
    Request,
    error_response,
    format_response,
)
from ledger.http.aiohttp_adapter import AiohttpConnection, Body
from ledger.http.errors import CLIENT_CLOSED, RequestBodyTimeout, json_error
from ledger.process.exitcodes import UsageError
from ledger.process.structured_logs import LogThrottle, safe_message, safe_traceback

__all__ = ["PLAIN_ROUTES", "Connection", "ListenError", "Listener", "PlainHandler",
           "PlainRoutes", "ServerLimits", "connection_limit", "install_loop_exception_handler",
           "plain_from_response", "plain_response"]

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


_TIMER_SLACK = 0.001
"""A timer that fires this close to its deadline counts as on time (the loop may run timers
up to its clock resolution early)."""


class _Phase(Enum):
    HEAD = "header"  # waiting for (the rest of) a request head
    BODY = "body"  # a request is in progress and its body is still arriving
    BUSY = "busy"  # a request is being handled, its body complete
    IDLE = "idle"  # between requests on a keep-alive connection


class Connection(asyncio.Protocol):
    """One accepted connection, from its first byte to its close.

    While the peer sends plain requests to hot routes, :class:`~ledger.core.http1.
    PlainConnection` reads them and their handlers answer, one at a time; the first request
    that is anything else is handed with every byte after it to aiohttp
    (:class:`~ledger.http.aiohttp_adapter.AiohttpConnection`), which keeps the connection. This
    object stays the transport's protocol either way: it applies the timeouts (see
    :meth:`_arm`) and tells the listener whether the connection is idle.

    Backpressure on the plain path: while a request is being handled, the socket is read until
    one more request's worth is buffered; while the transport's write buffer is full, it is
    not read and no further request is started.
    """

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._limits = listener.limits
        self._loop = asyncio.get_running_loop()
        plain = listener.plain or PlainRoutes()
        self._plain = plain
        self._core: PlainConnection | None = (
            PlainConnection(tuple(plain.routes), max_body=plain.max_body)
            if plain.routes else None)
        self._read_limit = MAX_HEAD + plain.max_body
        self._aiohttp: AiohttpConnection | None = None
        self._transport: asyncio.Transport | None = None
        self._phase = _Phase.HEAD
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None  # loop time the current phase must end by
        self._head_started = False
        self._body: Body | None = None  # aiohttp's: the request body being waited for
        self._task: asyncio.Task[None] | None = None  # the plain request being handled
        self._unfinished: Head | None = None  # plain: the request whose body is arriving
        self._unfinished_at = 0.0  # perf_counter() when its head was read
        self._reading = True
        self._writable = True
        self._closing = False

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
        if phase is _Phase.HEAD or phase is _Phase.IDLE:
            self._listener.idle(self)
        else:
            self._listener.busy(self)

    def _expired(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or self._deadline is None:
            return
        if self._deadline - self._loop.time() > _TIMER_SLACK:  # moved later since armed
            self._timer = self._loop.call_at(self._deadline, self._expired)
            return
        self._deadline = None
        phase = self._phase
        if self._core is not None:
            if phase is _Phase.BUSY:
                return
            limits = self._limits
            refusal = self._core.time_out(
                limits.body_timeout if phase is _Phase.BODY else limits.header_timeout)
            if refusal is not None:
                if refusal.head is not None:
                    self._abandon(408)
                self._listener.slow_client(phase.value)
                transport.write(refusal.data)
            self.force_close()
            return
        aio = self._aiohttp
        assert aio is not None
        if phase is _Phase.BODY:
            body = self._body
            if body is None or aio.body_done(body):
                self._phase = _Phase.BUSY
                return
            self._listener.slow_client("body")
            aio.end_body(body, RequestBodyTimeout(
                f"the request body did not arrive within {self._limits.body_timeout:g} s"))
            return
        if phase is _Phase.BUSY or aio.busy():
            return
        if phase is _Phase.HEAD and self._head_started:
            self._listener.slow_client("header")
            transport.write(error_response(
                408, "request_timeout",
                f"the request head did not arrive within {self._limits.header_timeout:g} s"))
        self.force_close()

    # asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass
        self._listener.opened(self)
        self._arm(_Phase.HEAD, self._limits.header_timeout)
        if self._core is None:
            self._hand_over(b"")
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # as aiohttp does: a peer that vanished is noticed eventually
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        if self._phase is _Phase.IDLE:
            self._arm(_Phase.HEAD, self._limits.header_timeout)
        if self._phase is _Phase.HEAD:
            self._head_started = True
        if self._aiohttp is not None:
            self._aiohttp.data_received(data)
            return
        assert self._core is not None
        self._core.receive_data(data)
        if self._task is None and self._writable:
            self._next()
        self._flow()

    def eof_received(self) -> bool | None:
        if self._aiohttp is not None:
            self._aiohttp.eof_received()
        return None  # the transport closes; a request in progress still finishes its work

    def pause_writing(self) -> None:
        if self._aiohttp is not None:
            self._aiohttp.pause_writing()
            return
        self._writable = False
        self._flow()

    def resume_writing(self) -> None:
        if self._aiohttp is not None:
            self._aiohttp.resume_writing()
            return
        self._writable = True
        if self._task is None and self._transport is not None:
            self._next()
        self._flow()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._transport = None
        self._abandon(CLIENT_CLOSED)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._listener.closed(self)
        if self._aiohttp is not None:
            self._aiohttp.connection_lost(exc)

    # aiohttp's side (ledger.http.aiohttp_adapter.Watcher) ----------------------------------

    def request_parsed(self, body: Body | None) -> None:
        if self._phase is _Phase.HEAD:
            self._head_started = False
            self._wait_for(body)

    def response_sent(self, waiting: bool, body: Body | None) -> None:
        if waiting:
            self._wait_for(body)
        else:
            self._body = None
            self._arm(_Phase.IDLE, self._limits.keepalive_timeout)

    def _wait_for(self, body: Body | None) -> None:
        self._body = body
        if body is None:
            self._arm(_Phase.BUSY, None)
        else:
            self._arm(_Phase.BODY, self._limits.body_timeout)

    def log(self, event: str, *, level: str = "warning", kind: str = "",
            **fields: Any) -> None:
        self._listener.log(event, level=level, kind=kind, **fields)

    # The plain path ------------------------------------------------------------------------

    def _next(self) -> None:
        """Start the next plain request, wait for (the rest of) it, or hand over."""
        core = self._core
        assert core is not None and self._task is None
        event = core.next_event()
        if event is NEED_DATA:
            if core.phase is Phase.BODY and self._unfinished is None:
                self._unfinished, self._unfinished_at = core.pending, time.perf_counter()
                self._arm(_Phase.BODY, self._limits.body_timeout)
        elif isinstance(event, Request):
            head = event.head
            self._unfinished = None
            self._head_started = False
            self._arm(_Phase.BUSY, None)
            handler = self._plain.routes[head.method, head.target]
            self._task = self._loop.create_task(self._serve(handler, head, event.body))
        else:
            assert isinstance(event, HandOver)
            self._hand_over(event.data)

    async def _serve(self, handler: PlainHandler, head: Head, body: bytes) -> None:
        try:
            response = await handler(head, body)
        except Exception as e:  # a handler's bug: answered as aiohttp's path would
            self._listener.log("http_unhandled_error", status=500,
                               exception_type=type(e).__name__, where=safe_traceback(e))
            response = plain_from_response(json_error(500, "internal", "internal server error"))
        self._task = None
        transport = self._transport
        if transport is None:  # the client left; the request's work is done anyway
            return
        transport.write(response)
        if self._closing:
            transport.close()
            return
        core = self._core
        assert core is not None
        if core.buffered:  # pipelined: the next head has (begun to) arrive
            self._arm(_Phase.HEAD, self._limits.header_timeout)
            self._head_started = True
        else:
            self._arm(_Phase.IDLE, self._limits.keepalive_timeout)
        if self._writable:
            self._next()
        self._flow()

    def _flow(self) -> None:
        """Read the socket or not (see the class docstring)."""
        core, transport = self._core, self._transport
        if core is None or transport is None:
            return
        read = self._writable and (self._task is None or core.buffered <= self._read_limit)
        if read != self._reading:
            self._reading = read
            if read:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _abandon(self, status: int) -> None:
        """The plain request whose body was awaited is over unanswered (``status``: why)."""
        head, self._unfinished = self._unfinished, None
        unfinished = self._plain.unfinished
        if head is not None and unfinished is not None:
            unfinished(head, status, time.perf_counter() - self._unfinished_at)

    def _hand_over(self, data: bytes) -> None:
        """aiohttp takes the connection from here on, starting with ``data``."""
        transport = self._transport
        assert transport is not None
        self._core = None
        if not self._reading:
            self._reading = True
            transport.resume_reading()
        self._aiohttp = AiohttpConnection(self._listener.server, self)
        self._aiohttp.take_over(transport, data)

    # What the listener does ----------------------------------------------------------------

    @property
    def handed_over(self) -> bool:
        """Whether aiohttp has this connection."""
        return self._aiohttp is not None

    @property
    def buffered(self) -> int:
        """Bytes read on the plain path and not yet answered (0 once handed over)."""
        return self._core.buffered if self._core is not None else 0

    def force_close(self) -> None:
        if self._aiohttp is not None:
            self._aiohttp.force_close()
        elif self._transport is not None:
            self._transport.close()

    def stop(self) -> asyncio.Task[None] | None:
        """Close a plain connection once the request in progress is answered (that task,
        if any); a handed-over one is aiohttp's to close (``runner.cleanup``)."""
        if self._aiohttp is not None:
            return None
        self._closing = True
        if self._task is None:
            self.force_close()
        return self._task


class Listener:
    """Accepts connections for an aiohttp server, within a connection limit.

    ``idle`` connections (no request in progress) are kept in the order they became idle, so
    the longest-idle one is the one closed when a new connection needs its place.
    """

    def __init__(self, server: web.Server, limits: ServerLimits, *, max_connections: int,
                 throttle: LogThrottle | None = None, plain: PlainRoutes | None = None
                 ) -> None:
        self.server = server
        self.limits = limits
        self.plain = plain
        self.max_connections = max_connections
        self._throttle = throttle or LogThrottle(10.0)
        self._open: set[Connection] = set()
        self._idle: OrderedDict[Connection, None] = OrderedDict()
        self._room = asyncio.Event()
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.evicted = 0
        self.slow_clients = 0
        self.accept_errors = 0

    # Bookkeeping (called by the connections) -----------------------------------------------

    def opened(self, conn: Connection) -> None:
        self._open.add(conn)

    def closed(self, conn: Connection) -> None:
        self._open.discard(conn)
        self._idle.pop(conn, None)
        self._room.set()

    def idle(self, conn: Connection) -> None:
        if conn in self._open:
            self._idle.pop(conn, None)
            self._idle[conn] = None
            self._room.set()

    def busy(self, conn: Connection) -> None:
        self._idle.pop(conn, None)

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

    def _factory(self) -> Connection:
        return Connection(self)

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

    async def close(self, timeout: float = 15.0) -> None:
        """Stop accepting, and close the plain connections, each once its request in progress
        is answered (within ``timeout`` seconds: the answer follows a commit); handed-over
        connections are aiohttp's to drain (``runner.cleanup``)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self.close_sockets()
        stopping = [conn.stop() for conn in list(self._open)]
        pending = [task for task in stopping if task is not None]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        for conn in list(self._open):
            if not conn.handed_over:
                conn.force_close()


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

