"""Running an aiohttp application from a command until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
import sys
from collections.abc import Callable

import structlog
from aiohttp import web

from ledger.http.plain import PLAIN_ROUTES
from ledger.http.server import (
    Listener,
    ListenError,
    ServerLimits,
    connection_limit,
    install_loop_exception_handler,
)
from ledger.process.event_loop import loop_name
from ledger.process.structured_logs import capture_stdlib_logging

_log = structlog.get_logger("ledger.http.run")


SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits for it (Python's default: 0.005).

A server's threads (the database writer, the signing worker) give the GIL up inside SQLite
and libsodium, and need it back to return: with the default, each such return waits for the
event loop to block or for 5 ms, so their work hardly overlaps the loop's. At 0.5 ms the
notary spent 3-10% less CPU a receipt at 16 and 64 connections, in 8 of 8 alternating runs
on a 2-vCPU AMD EPYC (benchmarks/docs/http_notarize.md); at 0.2 ms, more."""


def freeze_startup_heap() -> None:
    """Move every object alive now (modules, the application, warm caches) out of the cyclic
    garbage collector's reach, for the life of the process.

    A full (generation 2) collection walks every tracked object, and at start those are
    several hundred thousand, nearly all permanent: each such collection stopped the event
    loop for ~50 ms under load, which was most of the p99 latency of notarization
    (benchmarks/docs/history.md, http_notarize). Frozen, they are never walked again;
    collections cover only what was allocated since (~2 ms).
    """
    gc.collect()
    gc.freeze()


async def serve_until_signalled(app: web.Application, host: str, port: int,
                                announce: Callable[[str], None], *,
                                limits: ServerLimits | None = None,
                                shutdown_timeout: float = 30.0,
                                sock: socket.socket | None = None) -> None:
    """Serve ``app`` until SIGTERM or SIGINT, then clean up (cleanup_ctx included).

    Connections are accepted by a :class:`~ledger.http.server.Listener` within ``limits``
    (connection limit, read and idle timeouts); the connection limit is computed once the
    application has started, so the descriptors its database holds are counted. On a signal
    the listener stops accepting, then requests in progress get ``shutdown_timeout`` seconds.

    ``announce`` gets the URL actually bound (port 0 becomes the real port), and only once the
    signal handlers are installed, so whoever reads the URL can already stop the server.
    A failure to bind, or a connection limit the descriptor limit cannot honour, raises
    :class:`~ledger.http.server.ListenError` (a usage error: the message says what to change).
    ``sock`` is a listening socket to accept on instead of binding ``host``:``port``.
    """
    limits = limits or ServerLimits()
    capture_stdlib_logging()
    install_loop_exception_handler()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    freeze_startup_heap()
    sys.setswitchinterval(SWITCH_INTERVAL)
    listener: Listener | None = None
    try:
        assert runner.server is not None
        listener = Listener(runner.server, limits, max_connections=connection_limit(limits),
                            plain=app.get(PLAIN_ROUTES))
        try:
            bound = await listener.start(host, port, sock=sock)
        except OSError as e:
            raise ListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        bound_host, bound_port = bound[0]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        _log.info("listening", url=f"http://{shown}:{bound_port}",
                  max_connections=listener.max_connections,
                  keepalive_timeout=limits.keepalive_timeout,
                  header_timeout=limits.header_timeout, body_timeout=limits.body_timeout,
                  loop=loop_name())
        announce(f"http://{shown}:{bound_port}")
        await stop.wait()
    finally:
        if listener is not None:
            await listener.close()
        await runner.cleanup()
