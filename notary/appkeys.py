"""Application state keys shared by the route modules (aiohttp AppKey style)."""

from __future__ import annotations

from aiohttp import web

from .config import Settings
from .metrics import Metrics
from .service import Notary

SETTINGS = web.AppKey("notary.settings", Settings)
NOTARY = web.AppKey("notary.service", Notary)
METRICS = web.AppKey("notary.metrics", Metrics)
