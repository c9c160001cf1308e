"""Damage to the store while ``notary serve`` runs: the background scrub, and requests that hit
a damaged database page.

Either way the outcome is the same: writes stop (the sequencer is halted, so
``POST /v1/tool-calls`` answers 503 ``store_corrupt``), ``/healthz`` reports ``failing`` with the
reason, and the finding is recorded in the data directory (:mod:`notary.operator.damage_marker`)
so that a restart does not resume writing on the same store. Reads go on being served.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from ledger.http.errors import ApiError
from ledger.http.routes import LOG
from ledger.jobs.scrub import Scrubber
from ledger.log.sequencer import WriterState
from ledger.storage.damage import corruption_in
from notary.http.appkeys import METRICS, SCRUB, SETTINGS
from notary.operator.damage_marker import read_damage, record_damage
from notary.serving.commands import store_command
from notary.serving.config import Settings

__all__ = ["damage_middleware", "damage_refusal", "integrity_context", "stop_writes"]

_log = structlog.get_logger("notary.operator.damage_marker")

STORE_CORRUPT = "store_corrupt"


def stop_writes(app: web.Application, reason: str) -> None:
    """Halt the log's writer and record why (the first reason recorded is kept)."""
    seq = app[LOG].sequencer
    if seq is not None and seq.status.state is not WriterState.HALTED:
        seq.halt(reason)
        _log.error("writes_stopped", reason=reason)
    settings = app[SETTINGS]
    record_damage(settings.data, reason, check=store_command(settings, "check"))


def integrity_context(settings: Settings) -> Callable[[web.Application], AsyncIterator[None]]:
    """The aiohttp cleanup_ctx that starts the scrub (after the log is open) and honours a
    damage finding recorded by an earlier run."""
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        log = app[LOG]
        recorded = read_damage(settings.data)
        if recorded is not None and log.sequencer is not None:
            log.sequencer.halt(recorded)
            _log.error("writes_stopped", reason=recorded,
                       why="damage recorded by an earlier run; restore the newest backup, "
                           f"then run `{store_command(settings, 'check')}`")
        scrubber: Scrubber | None = None
        if settings.scrub_rate > 0 and recorded is None:
            scrubber = Scrubber(log, rate=settings.scrub_rate,
                                on_damage=lambda reason: stop_writes(app, reason),
                                registry=app[METRICS].registry)
            app[SCRUB] = scrubber
            await scrubber.start()
        try:
            yield
        finally:
            if scrubber is not None:
                await scrubber.close()

    return ctx


@web.middleware
async def damage_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A request that hits a damaged database page gets a 503 that says so, not a 500, and
    writes stop; the error middleware around this one renders it."""
    try:
        return await handler(request)
    except Exception as e:
        refusal = damage_refusal(request.app, e)
        if refusal is None:
            raise
        raise refusal from None


def damage_refusal(app: web.Application, exc: BaseException) -> ApiError | None:
    """The 503 for an error that shows a damaged database page (and writes stop), else None."""
    found = corruption_in(exc)
    if found is None:
        return None
    stop_writes(app, f"the database is damaged: {found}")
    return ApiError(503, STORE_CORRUPT, "the notary's database is damaged; writes are "
                    "stopped until the operator restores a backup (see /healthz)")
