"""Running an aiohttp application from a command until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from aiohttp import web


async def serve_until_signalled(app: web.Application, host: str, port: int,
                                announce: Callable[[str], None]) -> None:
    """Serve ``app`` until SIGTERM or SIGINT, then clean up (cleanup_ctx included).

    ``announce`` gets the URL actually bound (port 0 becomes the real port), and only once the
    signal handlers are installed, so whoever reads the URL can already stop the server.
    ``OSError`` from binding propagates for the caller to word.
    """
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        announce(f"http://{shown}:{bound_port}")
        await stop.wait()
    finally:
        await runner.cleanup()
