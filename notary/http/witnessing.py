"""Witnessing in ``notary serve``: the notary's settings turned into a running
:class:`ledger.witnessing.Witnessing`, started and stopped with the application."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from ledger.http.routes import LOG, PUBLISHED_CHECKPOINT
from ledger.log import Log
from ledger.witnessing import (
    STATE_FILE,
    WitnessConfigError,
    WitnessEndpoint,
    Witnessing,
    parse_witness_spec,
)
from notary.config import ConfigError, Settings
from notary.http.appkeys import METRICS, NOTARY

_log = structlog.get_logger("notary.witnessing")


def _endpoints(settings: Settings) -> list[WitnessEndpoint]:
    try:
        return [parse_witness_spec(s) for s in settings.witnesses]
    except WitnessConfigError as e:
        raise ConfigError(str(e)) from None


def _quorum(settings: Settings, endpoints: Sequence[WitnessEndpoint]) -> int:
    quorum = settings.witness_quorum or len(endpoints) // 2 + 1
    if not 1 <= quorum <= len(endpoints):
        raise ConfigError(f"witness_quorum {quorum} must be 1..{len(endpoints)} (the number of "
                          "witnesses), or 0 for a majority")
    if settings.witness_interval <= 0 or settings.witness_timeout <= 0:
        raise ConfigError("witness_interval and witness_timeout must be positive")
    keys = [e.verifier.public_key for e in endpoints]
    if len(set(keys)) != len(keys):
        raise ConfigError("the same witness key is configured twice")
    return quorum


def witness_policy(settings: Settings) -> tuple[int, list[WitnessEndpoint]]:
    """(quorum, witnesses) as configured; (0, []) without witnesses. Checked at startup."""
    endpoints = _endpoints(settings)
    return (_quorum(settings, endpoints) if endpoints else 0), endpoints


def from_settings(log: Log, settings: Settings, registry: CollectorRegistry | None = None
                  ) -> Witnessing:
    """A :class:`Witnessing` for the notary's settings (quorum 0 means a majority)."""
    endpoints = _endpoints(settings)
    return Witnessing(log, endpoints, quorum=_quorum(settings, endpoints),
                      interval=settings.witness_interval,
                      timeout=settings.witness_timeout, state_path=settings.data / STATE_FILE,
                      registry=registry)


def witnessing_context(settings: Settings
                       ) -> Callable[[web.Application], AsyncIterator[None]]:
    """The aiohttp cleanup_ctx for witnessing, to run after the notary's own (which opens the
    log); a no-op without witnesses.

    The witness settings are checked here, when the application is built: a mistake then stops
    ``notary serve`` before it opens anything, with the ConfigError as the message.
    """
    endpoints = _endpoints(settings)
    if endpoints:
        _quorum(settings, endpoints)

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if not endpoints:
            yield
            return
        witnessing = from_settings(app[LOG], settings, app[METRICS].registry)
        await witnessing.start()
        app[PUBLISHED_CHECKPOINT] = witnessing.checkpoint_for
        app[NOTARY].published_checkpoint = witnessing.witnessed
        _log.info("witnessing_started", witnesses=[e.url for e in witnessing.endpoints],
                  quorum=witnessing.quorum, interval=witnessing.interval)
        try:
            yield
        finally:
            app[NOTARY].published_checkpoint = None
            await witnessing.close()

    return ctx
