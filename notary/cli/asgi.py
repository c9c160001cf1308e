"""Serving an MCP server's streamable HTTP app (``notary gateway --http``, ``notary mcp --http``)
under uvicorn, on the loop :mod:`ledger.process.event_loop` chooses.

``uvicorn.run`` would pick a loop of its own (uvloop when importable, whatever
``LEDGER_EVENT_LOOP`` says), so the server is run here as a coroutine instead. Signals stay
uvicorn's: SIGTERM and SIGINT drain the connections, then the signal is raised again, so the
process ends as signalled.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import uvicorn
from starlette.types import ASGIApp

from ledger.process import event_loop

__all__ = ["serve_asgi"]


def serve_asgi(app: ASGIApp, host: str, port: int, banner: str,
               startup: Callable[[], AbstractAsyncContextManager[object]] | None = None) -> None:
    """Serve ``app`` on ``host``:``port`` until SIGTERM or SIGINT; ``banner`` (where it serves)
    goes to stderr once the loop runs, with the loop's name.

    ``startup`` is entered on the loop before uvicorn starts and held while it serves: what
    it raises ends the command as raised (uvicorn would print a traceback for a failed
    application startup and exit 3).
    """

    async def serve() -> None:
        async with startup() if startup is not None else contextlib.nullcontext():
            print(f"{banner} (event loop: {event_loop.loop_name()})", file=sys.stderr,
                  flush=True)
            config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                    loop="none")
            await uvicorn.Server(config).serve()

    event_loop.run(serve())
