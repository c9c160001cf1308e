"""Application state keys shared by the route modules (aiohttp AppKey style)."""

from __future__ import annotations

from aiohttp import web

from ledger.jobs.scrub import Scrubber
from ledger.jobs.witnessing import Witnessing
from ledger.log.cose_roots import CoseRoots
from notary.http.metrics import Metrics
from notary.http.verify_pool import VerifyPool
from notary.serving.config import Settings
from notary.serving.service import Notary
from notary.store.base import NotaryStore

SETTINGS = web.AppKey("notary.settings", Settings)
NOTARY = web.AppKey("notary.serving.service", Notary)
METRICS = web.AppKey("notary.http.metrics", Metrics)
VERIFIER = web.AppKey("notary.http.verify_pool", VerifyPool)
STORE = web.AppKey("notary.store", NotaryStore)
SCRUB = web.AppKey("notary.scrub", Scrubber)  # absent when the scrub is off (scrub_rate 0)
COSE_ROOTS = web.AppKey("ledger.log.cose_roots", CoseRoots)  # absent when cose_receipts is off
WITNESSING = web.AppKey("notary.witnessing", Witnessing)  # absent without witnesses
