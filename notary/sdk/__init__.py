"""The notary SDK: an HTTP client for the notary and notarization for mcp 2.x servers.

``NotaryClient`` talks to the notary (retries, typed errors); ``Notarizer`` and
``notarize_server`` attach rs-tool-call/1 receipts to MCP tool results; ``record_for`` and
``verify_tool_result`` check them on the client side (its :class:`Verdict` reports each
level). See ``examples/README.md`` and docs/sdks.md.
"""

from __future__ import annotations

from notary.core.verification import Verdict
from notary.sdk.client import (
    NotaryClient,
    NotaryError,
    NotaryHTTPError,
    NotaryResponseError,
    NotaryUnavailableError,
)
from notary.sdk.mcp import (
    TOOL_CALL_META_KEY,
    NotarizationFailedError,
    Notarized,
    Notarizer,
    OnUnavailable,
    notarization_of,
    notarize_server,
    received_wire,
    record_for,
    result_to_wire,
    structured_for,
    verify_tool_result,
)

__all__ = [
    "TOOL_CALL_META_KEY",
    "NotarizationFailedError",
    "Notarized",
    "Notarizer",
    "NotaryClient",
    "NotaryError",
    "NotaryHTTPError",
    "NotaryResponseError",
    "NotaryUnavailableError",
    "OnUnavailable",
    "Verdict",
    "notarization_of",
    "notarize_server",
    "received_wire",
    "record_for",
    "result_to_wire",
    "structured_for",
    "verify_tool_result",
]
