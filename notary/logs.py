"""structlog set-up: JSON lines for machines, readable lines on a terminal.

Access logs carry method, route, status and duration only; never bodies, queries or headers,
which may hold API keys, call records or digests a user would not want in a log.
"""

from __future__ import annotations

import logging
import sys
import time

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler


def configure(fmt: str = "auto", level: str = "info") -> None:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelName(level.upper()) if isinstance(
                logging.getLevelName(level.upper()), int) else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


_access = structlog.get_logger("notary.access")


@web.middleware
async def access_log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    status = 500
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except web.HTTPException as e:
        status = e.status
        raise
    finally:
        resource = request.match_info.route.resource
        await _access.adebug(
            "request", method=request.method,
            route=resource.canonical if resource is not None else "unmatched",
            status=status, ms=round((time.perf_counter() - started) * 1000, 2),
        )
