"""One way to serve an aiohttp application in a test: on 127.0.0.1, on a port the OS picks.

The socket is bound before the server starts and stays bound, so the port is known in advance
(a notary must know its own URL before its app exists) and no other process can take it in
between, as it could with a port probed free and released. Use :func:`serving` for one server,
or the ``serve`` fixture (conftest.py), which stops every server it started at teardown.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

HOST = "127.0.0.1"

__all__ = ["HOST", "Serve", "Served", "bound_socket", "serving", "start_server"]


@dataclass
class Served:
    """A running server: its base URL, port and runner."""

    url: str
    port: int
    runner: web.AppRunner

    @property
    def app(self) -> web.Application:
        return self.runner.app

    async def stop(self) -> None:
        """Stop serving (idempotent)."""
        await self.runner.cleanup()


Serve = Callable[..., Awaitable[Served]]
"""The ``serve`` fixture: ``await serve(app, port=0)``."""


def bound_socket(port: int = 0) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: the OS picks), ready to listen on.

    A given port is for restarting a server where it was (SO_REUSEADDR, as aiohttp sets).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
    except BaseException:
        sock.close()
        raise
    return sock


async def start_server(app: web.Application, *, sock: socket.socket | None = None,
                       port: int = 0) -> Served:
    """Serve ``app`` on ``sock`` (or a socket bound now to ``port``) until ``stop()``."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        sock = sock if sock is not None else bound_socket(port)
        await web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = sock.getsockname()[1]
    return Served(f"http://{HOST}:{bound}", bound, runner)


@contextlib.asynccontextmanager
async def serving(app: web.Application, *, sock: socket.socket | None = None, port: int = 0
                  ) -> AsyncIterator[Served]:
    """``async with serving(app) as s:`` … ``s.url``; stopped on the way out."""
    served = await start_server(app, sock=sock, port=port)
    try:
        yield served
    finally:
        await served.stop()
