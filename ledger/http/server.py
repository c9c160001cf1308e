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
- :class:`Connection` (an ``asyncio.Protocol``) is each accepted connection's shell. It
  closes one whose request head takes longer than ``header_timeout``, whose body takes
  longer than ``body_timeout`` (answered 408), or that stays idle between requests longer
  than ``keepalive_timeout``.
- Hot routes (:mod:`ledger.http.plain`: a ``PlainRoutes`` the application registers) are
  served by the connection itself while it sends only plain requests to them: the handler
  gets the head and body (parsed by :mod:`ledger.http.http1`, sans I/O on llhttp, which owns
  each connection's state) and returns the whole response. The first request that is not
  such is handed, with every byte after it, to aiohttp (:mod:`ledger.http.aiohttp_adapter`),
  which keeps the connection from then on; so aiohttp still parses, rejects and answers
  everything unusual (protocol errors as the usual JSON error and one structured log line
  without a request byte), and responses stay in request order. Without hot routes
  (``ledger serve``, ``notary serve`` with ``fast_path = "off"``), every connection is
  aiohttp's from its first byte.
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
from dataclasses import dataclass
from typing import Any, cast

import structlog
from aiohttp import web

from ledger.http.aiohttp_adapter import AiohttpConnection, Body
from ledger.http.errors import CLIENT_CLOSED, RequestBodyTimeout, json_error
from ledger.http.http1 import (
    NEED_DATA,
    BodyPending,
    HandOver,
    Http1Connection,
    Phase,
    Request,
    RequestHead,
    Timeouts,
)
from ledger.http.plain import PlainHandler, PlainRoutes, plain_from_response
from ledger.process.exitcodes import UsageError
from ledger.process.structured_logs import LogThrottle, safe_message, safe_traceback

__all__ = ["Connection", "ListenError", "Listener", "ServerLimits", "connection_limit",
           "install_loop_exception_handler"]

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


class Connection(asyncio.Protocol):
    """One accepted connection, from its first byte to its close: the I/O shell around its
    :class:`~ledger.http.http1.Http1Connection`, which owns its state.

    While the peer sends plain requests to hot routes, the state object parses them and their
    handlers answer, one at a time; the first request that is anything else is handed with
    every byte after it to aiohttp (:class:`~ledger.http.aiohttp_adapter.AiohttpConnection`),
    which keeps the connection. This object stays the transport's protocol either way: it
    runs the timer the state asks for (see :meth:`_arm`), reads the socket while the state
    wants it read, and tells the listener whether the connection is idle.
    """

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        limits = listener.limits
        self._loop = asyncio.get_running_loop()
        plain = listener.plain or PlainRoutes()
        self._plain = plain
        self._state = Http1Connection(
            tuple(plain.routes), max_body=plain.max_body,
            timeouts=Timeouts(limits.header_timeout, limits.body_timeout,
                              limits.keepalive_timeout))
        self._aiohttp: AiohttpConnection | None = None
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None  # loop time the current phase must end by
        self._body: Body | None = None  # aiohttp's: the request body being waited for
        self._task: asyncio.Task[None] | None = None  # the plain request being handled
        self._unfinished_at = 0.0  # perf_counter() when a pending body's head was read
        self._reading = True
        self._closing = False

    # Timers --------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Start the state's current phase, which must end within its timeout.

        The timer is lazy, as nginx's are: a new deadline later than the pending timer leaves
        the timer alone (when it fires, it sees the later deadline and re-arms for it), so a
        keep-alive connection in steady state schedules no timer per request, only one per
        timeout period; only an earlier deadline reschedules.
        """
        state = self._state
        seconds = state.timeout
        if seconds is None:
            self._deadline = None
        else:
            deadline = self._deadline = self._loop.time() + seconds
            if self._timer is None or self._timer.when() > deadline:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = self._loop.call_at(deadline, self._expired)
        if state.idle:
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
        expiry = self._state.expire()
        aio = self._aiohttp
        if expiry.end_body:
            assert aio is not None
            body = self._body
            if body is None or aio.body_done(body):
                self._state.body_complete()
                return
            self._listener.slow_client("body")
            aio.end_body(body, RequestBodyTimeout(
                f"the request body did not arrive within {self._state.timeouts.body:g} s"))
            return
        if not expiry.close or (aio is not None and aio.busy()):
            return
        if expiry.answer:
            self._abandon(408)
            self._listener.slow_client(expiry.slow)
            transport.write(expiry.answer)
        self.force_close()

    # asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass
        self._listener.opened(self)
        self._arm()
        if not self._plain.routes:
            self._next()  # the hand-over, at once
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # as aiohttp does: a peer that vanished is noticed eventually
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        state = self._state
        idle = state.phase is Phase.IDLE
        state.receive_data(data)
        if self._aiohttp is not None:
            if idle:
                self._arm()
            self._aiohttp.data_received(data)
            return
        if self._task is None and state.may_start():
            self._next()  # arms the phase of a request it takes (or of a body awaited)
        if idle and state.phase is Phase.HEAD:  # a head begun: the header timeout runs
            self._arm()  # (not for a request that came whole: no idle-then-busy round trip)
        self._flow()

    def eof_received(self) -> bool | None:
        if self._aiohttp is not None:
            self._aiohttp.eof_received()
        return None  # the transport closes; a request in progress still finishes its work

    def pause_writing(self) -> None:
        if self._aiohttp is not None:
            self._aiohttp.pause_writing()
            return
        self._state.writable = False
        self._flow()

    def resume_writing(self) -> None:
        if self._aiohttp is not None:
            self._aiohttp.resume_writing()
            return
        self._state.writable = True
        if self._task is None and self._transport is not None and self._state.may_start():
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
        if self._state.request_parsed(body is not None):
            self._body = body
            self._arm()

    def response_sent(self, waiting: bool, body: Body | None) -> None:
        self._state.aiohttp_response_sent(waiting, body is not None)
        self._body = body
        self._arm()

    def log(self, event: str, *, level: str = "warning", kind: str = "",
            **fields: Any) -> None:
        self._listener.log(event, level=level, kind=kind, **fields)

    # The plain path ------------------------------------------------------------------------

    def _next(self) -> None:
        """Start the next plain request, wait for (the rest of) it, or hand over."""
        event = self._state.next_event()
        if event is NEED_DATA:
            return
        if isinstance(event, Request):
            self._arm()
            head = event.head
            handler = self._plain.routes[head.method, head.target]
            self._task = self._loop.create_task(self._serve(handler, head, event.body))
        elif isinstance(event, BodyPending):
            self._unfinished_at = time.perf_counter()
            self._arm()
        else:
            assert isinstance(event, HandOver)
            self._hand_over(event.data)

    async def _serve(self, handler: PlainHandler, head: RequestHead, body: bytes) -> None:
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
        state = self._state
        state.response_sent()
        self._arm()
        if state.may_start():
            self._next()
        self._flow()

    def _flow(self) -> None:
        """Read the socket or not, as the state says."""
        transport = self._transport
        if transport is None:
            return
        read = self._state.wants_read()
        if read != self._reading:
            self._reading = read
            if read:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _abandon(self, status: int) -> None:
        """The plain request whose body was awaited is over unanswered (``status``: why)."""
        head = self._state.abandon()
        unfinished = self._plain.unfinished
        if head is not None and unfinished is not None:
            unfinished(head, status, time.perf_counter() - self._unfinished_at)

    def _hand_over(self, data: bytes) -> None:
        """aiohttp takes the connection from here on, starting with ``data``."""
        transport = self._transport
        assert transport is not None
        self._flow()  # aiohttp reads as it decides
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
        return self._state.buffered

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

