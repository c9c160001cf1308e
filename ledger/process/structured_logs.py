"""structlog set-up: JSON lines for machines, readable lines on a terminal."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable

import structlog


def configure(fmt: str = "auto", level: str = "info") -> None:
    """configure sends every structlog logger to stderr, as JSON lines or (``console``, or
    ``auto`` on a terminal) readable lines, at ``level`` and above."""
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
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


class LogThrottle:
    """At most one line per ``interval`` seconds for each kind of event.

    Events a peer can trigger at will (malformed requests, slow clients, a full connection
    table, a full disk) would otherwise let that peer write the log at line rate, which fills
    disks and buries everything else; one line per interval, saying how many were dropped,
    keeps the operator informed at a bounded cost.
    """

    def __init__(self, interval: float = 10.0, *, clock: Callable[[], float] = time.monotonic,
                 max_kinds: int = 256) -> None:
        self.interval = interval
        self._clock = clock
        self._max_kinds = max_kinds
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    def allow(self, kind: str) -> int | None:
        """None: drop this line. Otherwise log it, with the returned count of dropped lines."""
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._dropped[kind] = self._dropped.get(kind, 0) + 1
            return None
        if last is None and len(self._last) >= self._max_kinds:
            self._last.clear()  # kinds are few in practice; never let them grow without bound
            self._dropped.clear()
        self._last[kind] = now
        return self._dropped.pop(kind, 0)


def safe_message(text: str, limit: int = 200) -> str:
    """The first line of a library's message without what it quotes from the call.

    asyncio and aiohttp build messages such as ``Exception in callback f(<args>)`` or
    ``Bad status line: b'<request bytes>'``; the argument lists and quoted bytes are where a
    peer's data (keys, bodies) would reach the log, so they are cut off.
    """
    first = text.split("\n", 1)[0]
    for i, ch in enumerate(first):
        if ch == "<" or (ch == "(" and first[i + 1 : i + 2] != ")") or first[i : i + 2] in (
                "b'", 'b"') or ch in "'\"":
            first = first[:i].rstrip(" :") + (" (…)" if i < len(first) else "")
            break
    return first[:limit]


def safe_traceback(exc: BaseException) -> list[str]:
    """Where an exception was raised (``file:line function`` per frame, innermost last),
    without its message, which may quote request data."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in frames[-12:]]


class _StdlibBridge(logging.Handler):
    """Sends records of standard-library loggers (aiohttp, asyncio, aiosqlite) to structlog.

    Only the record's format string and the exception's type are kept, never the arguments or
    the exception's message: aiohttp's parser errors quote raw request bytes, Bearer keys
    included, and must not reach a log in any form.
    """

    def emit(self, record: logging.LogRecord) -> None:
        fields: dict[str, object] = {"logger": record.name}
        if record.exc_info and record.exc_info[0] is not None:
            fields["exception_type"] = record.exc_info[0].__name__
        msg = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        structlog.get_logger(record.name).log(record.levelno, safe_message(msg), **fields)


def capture_stdlib_logging(level: int = logging.WARNING) -> None:
    """Route standard-library logging through structlog (JSON when configured so), sanitized.

    Idempotent. Servers call it so that nothing a library logs bypasses the structured,
    secret-free log.
    """
    root = logging.getLogger()
    if not any(isinstance(h, _StdlibBridge) for h in root.handlers):
        root.addHandler(_StdlibBridge())
    root.setLevel(level)
