"""The notary application: small route modules, state in app keys, lifetime in cleanup_ctx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import structlog
from aiohttp import web

from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.http.errors import error_middleware
from ledger.http.plain import PLAIN_ROUTES, PlainRoutes
from ledger.http.routes import LOG, PQ_CHECKPOINTS, add_ledger_routes
from ledger.http.tracing import middlewares as tracing_middlewares
from ledger.log.cose_roots import CoseRoots
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.log.seen import SeenCheckpoint
from notary.core.paths import TOOL_CALLS_PATH
from notary.http.appkeys import COSE_ROOTS, METRICS, NOTARY, SETTINGS, STORE, VERIFIER
from notary.http.log_jobs import log_jobs_context
from notary.http.logs import serve_logs
from notary.http.metrics import Metrics
from notary.http.publishing import publish_context
from notary.http.routes.explorer import add_explorer_routes
from notary.http.routes.meta import add_meta_routes
from notary.http.routes.scitt import add_scitt_routes
from notary.http.routes.tool_calls import add_tool_call_routes, plain_issue
from notary.http.store_damage import damage_middleware, integrity_context
from notary.http.verify_pool import VerifyPool
from notary.http.witnessing import witnessing_context
from notary.serving.config import ConfigError, Settings
from notary.serving.cose import cose_signers
from notary.serving.startup import open_notary
from notary.store import store_kind

_log = structlog.get_logger("notary")

SEEN_FILE = "seen-checkpoint.json"  # the newest checkpoint this notary saw committed


def create_app(settings: Settings, *, shared_metrics: Path | None = None) -> web.Application:
    """The application; ``shared_metrics``: a worker's metrics directory (``--workers``)."""
    metrics = Metrics(shared_metrics)
    app = web.Application(
        client_max_size=settings.max_body,
        middlewares=[*tracing_middlewares(), metrics.middleware(), error_middleware,
                     damage_middleware],
    )
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app.cleanup_ctx.append(_notary_ctx)
    app.cleanup_ctx.append(metrics.refreshing)
    app.cleanup_ctx.append(_verify_pool_ctx)
    app.cleanup_ctx.append(witnessing_context(settings))  # after the log is open
    app.cleanup_ctx.append(log_jobs_context)  # after witnessing: it follows a roll
    if settings.publish:
        app.cleanup_ctx.append(publish_context)  # after witnessing: it publishes what it serves
    app.cleanup_ctx.append(integrity_context(settings))
    add_ledger_routes(app)
    add_tool_call_routes(app)
    if settings.fast_path == "on":
        app[PLAIN_ROUTES] = PlainRoutes(
            {("POST", TOOL_CALLS_PATH): plain_issue(app)}, max_body=settings.max_body,
            unfinished=lambda head, status, seconds: metrics.observe_request(
                TOOL_CALLS_PATH, head.method, status, seconds))
    add_meta_routes(app)
    add_scitt_routes(app)
    add_explorer_routes(app)
    return app


async def _verify_pool_ctx(app: web.Application) -> AsyncIterator[None]:
    """The verification workers start on the first verify, and stop with the application."""
    s = app[SETTINGS]
    pool = VerifyPool(workers=s.verify_workers, queue=s.verify_queue,
                      per_client=s.verify_per_client, budget=s.verify_budget)
    app[VERIFIER] = pool
    yield
    await pool.close()


async def _notary_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    seen = SeenCheckpoint(settings.data / SEEN_FILE)
    try:
        trusted = await asyncio.to_thread(seen.load)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    notary = await open_notary(settings, observer=app[METRICS].observe_batch, trusted=trusted)
    log, sequencer = notary.log, notary.sequencer
    app[LOG] = log
    app[NOTARY] = notary
    app[STORE] = notary.store
    if settings.pq_checkpoints == "on":
        pq = PostQuantumCheckpoints(SubtreeCosignatureSigner.derived_from(sequencer.signer),
                                    log.origin)
        app[PQ_CHECKPOINTS] = pq
        notary.published_checkpoints.append(pq.latest)
    serve_logs(app, notary, settings.base_url)
    if settings.cose_receipts == "on":  # signs roots when receipts ask, off the write path
        roots = CoseRoots(cose_signers(sequencer.signer), log.origin)
        # After a roll, the next log's keys sign its roots (docs/lifecycle.md).
        notary.on_log_switch.append(lambda s: roots.switch(cose_signers(s), s.name))
        signed = app[METRICS].cose_roots_signed
        for key in roots.keys:  # each algorithm's series from 0, before its first signature
            signed.labels(key.alg_name)
        roots.on_signed = lambda alg_name: signed.labels(alg_name).inc()
        app[COSE_ROOTS] = roots
    app[METRICS].watch_writer(lambda: sequencer.status.state)
    notary.on_clock_refusal = app[METRICS].clock_refusals.inc
    remember = asyncio.create_task(seen.keep(lambda: sequencer.checkpoint), name="seen")
    head = await log.head(0)
    _log.info("notary_started", origin=log.origin, size=head.size if head else 0,
              url=settings.base_url, database=store_kind(settings.database))
    yield
    # Draining: the sequencer commits everything already pending before it stops.
    await sequencer.close()
    remember.cancel()  # after the last commit: it saves what the writer saw last
    await asyncio.gather(remember, return_exceptions=True)
    await log.close()
    _log.info("notary_stopped")
