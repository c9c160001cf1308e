"""Application state keys shared by the route modules (aiohttp AppKey style)."""

from __future__ import annotations

from aiohttp import web

from ledger.scrub import Scrubber
from notary.config import Settings
from notary.http.metrics import Metrics
from notary.service import Notary

SETTINGS = web.AppKey("notary.settings", Settings)
NOTARY = web.AppKey("notary.service", Notary)
METRICS = web.AppKey("notary.http.metrics", Metrics)
SCRUB = web.AppKey("notary.scrub", Scrubber)  # absent when the scrub is off (scrub_rate 0)
