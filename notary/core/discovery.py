"""The receipt extension a notarized MCP server declares (pure).

MCP 2026-07-28 servers declare extensions in ``capabilities.extensions`` (ids
``{vendor-prefix}/{name}``); a 2025-11-25 client reads the same settings from
``capabilities.experimental``. A server whose tool results carry rs-tool-call/1 receipts
declares ``com.rightshold/tool-call`` with where to check them::

    {"spec": "rs-tool-call/1", "metaKey": "com.rightshold/tool-call",
     "notary": "https://notary.example", "jwks": "https://notary.example/.well-known/jwks.json",
     "logKeys": ["notary.example/log+1a2b3c4d+..."]}

This is discovery, not trust: the server that declares it could name any notary and any
key. A verifier takes keys from it only when its user says so (the keys it pins, or the
notary it chooses to trust, decide what a receipt proves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from notary.core.meta import TOOL_CALL_META_KEY

__all__ = ["RECEIPT_EXTENSION", "declare", "receipt_extension", "with_extension"]

RECEIPT_EXTENSION: Final = TOOL_CALL_META_KEY
"""The extension id: the same name as the ``_meta`` key the receipts travel under."""


def receipt_extension(notary_url: str, log_keys: Sequence[str] = ()) -> dict[str, object]:
    """The extension's settings for receipts from the notary at ``notary_url``."""
    base = notary_url.rstrip("/")
    return {"spec": "rs-tool-call/1", "metaKey": TOOL_CALL_META_KEY, "notary": base,
            "jwks": f"{base}/.well-known/jwks.json", "logKeys": list(log_keys)}


def with_extension(table: Mapping[str, Mapping[str, object]] | None,
                   settings: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """An ``extensions`` (or ``experimental``) table of capabilities with the receipt
    extension's ``settings`` added (a copy; None is an empty table)."""
    out = {name: dict(value) for name, value in (table or {}).items()}
    out[RECEIPT_EXTENSION] = dict(settings)
    return out


def declare(capabilities: Mapping[str, object], settings: Mapping[str, object], *, modern: bool
            ) -> dict[str, object]:
    """``capabilities`` (wire JSON) declaring the extension: under ``extensions`` for a
    2026-07-28 (``modern``) client, under ``experimental`` for an earlier one."""
    where = "extensions" if modern else "experimental"
    table = capabilities.get(where)
    return {**capabilities,
            where: with_extension(table if isinstance(table, Mapping) else None, settings)}
