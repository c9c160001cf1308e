"""structlog set-up: JSON lines for machines, readable lines on a terminal."""

from __future__ import annotations

import logging
import sys

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
