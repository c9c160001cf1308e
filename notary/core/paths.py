"""The notary's ``/v1/tool-calls`` URL paths, in one place (pure constants and builders).

The HTTP routes serve these paths, and the SDK, the verifier, ``notary mcp``, the gateway's audit
and the service (a receipt's URL) build them; one module keeps what is served and what is
fetched from drifting apart. The log's own paths are :mod:`ledger.core.paths`. The route
templates use aiohttp's ``{name}`` syntax, which is also RFC 6570's, so the same text is the
``receipt_uri_template`` the SCITT configuration publishes.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = [
    "COSE_RECEIPT_ROUTE",
    "RECEIPT_ROUTE",
    "TOOL_CALLS_PATH",
    "VERIFY_PATH",
    "receipt_path",
]

TOOL_CALLS_PATH = "/v1/tool-calls"
"""``POST``: notarize a digest; ``GET ?call_sha256=`` or ``?server=&tool=…``: look up, search."""

VERIFY_PATH = f"{TOOL_CALLS_PATH}/verify"
"""``POST {id, record}``: the notary's per-level verdict (no API key)."""

RECEIPT_ROUTE = f"{TOOL_CALLS_PATH}/{{id}}"
"""``GET``: a receipt with a proof to the newest checkpoint."""

COSE_RECEIPT_ROUTE = f"{RECEIPT_ROUTE}/receipt.cose"
"""``GET``: the call's RFC 9942 COSE receipt."""


def receipt_path(receipt_id: str) -> str:
    """:data:`RECEIPT_ROUTE` for one id, percent-encoded so that no id names another path."""
    return RECEIPT_ROUTE.replace("{id}", quote(receipt_id, safe=""))

