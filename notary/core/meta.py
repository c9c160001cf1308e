"""Every ``_meta`` key the notary, its SDK, the verifier and the gateway read or write.

One table, so that a key has one spelling and one meaning across the code (and a reviewer can
see the whole wire surface of ``_meta`` at a glance). Request keys travel in a ``tools/call``
request's ``params._meta``; result keys in a ``CallToolResult``'s ``_meta``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AER1_AGENT_META_KEY",
    "AER1_META_KEY",
    "AGENT_META_KEY",
    "AUTH_ERROR_META_KEY",
    "AUTH_RECEIPT_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "REPLAY_META_KEY",
    "SERVER_INFO_META_KEY",
    "TOOL_CALL_META_KEY",
    "UPSTREAM_AER1_META_KEY",
    "UPSTREAM_AUTH_RECEIPT_META_KEY",
    "UPSTREAM_SERVER_INFO_META_KEY",
    "UPSTREAM_TOOL_CALL_META_KEY",
    "VERIFICATION_META_KEY",
]

TOOL_CALL_META_KEY: Final = "com.rightshold/tool-call"
"""Result: the rs-tool-call/1 block (spec, id, call_sha256, salt, URLs, receipt and proof)."""

VERIFICATION_META_KEY: Final = "com.rightshold/verification"
"""Result, client side only: what a verifying client (``notary.verifier.mcp_client``, the JS
``verifyingClient``) found, ``{status, reason, id?, levels?}``; never sent by a server."""

AER1_META_KEY: Final = "io.zkmcp/aer-1-receipt"
"""Result: the ``_meta`` mirror of AER-1's ``result._receipt`` (SDKs drop unknown top-level
members of a result, but keep ``_meta``)."""

AER1_AGENT_META_KEY: Final = "io.zkmcp/aer-1-agent-receipt"
"""Result: the AER-1 receipt an agent adds for what it received (``LOGGED BY AGENT``)."""

AUTH_ERROR_META_KEY: Final = "io.zkmcp/authorization-error"
"""Result: the gateway's public refusal code and message (on an ``isError`` result)."""

AUTH_RECEIPT_META_KEY: Final = "io.zkmcp/authorization-receipt"
"""Result: the receipt of the gateway's authorization decision."""

IDEMPOTENCY_META_KEY: Final = "io.zkmcp/idempotency-key"
"""Request: the caller's idempotency key (a string of 1-255 characters)."""

AGENT_META_KEY: Final = "io.zkmcp/agent"
"""Request: the agent's name, used by the gateway when the operator configured none."""

REPLAY_META_KEY: Final = "io.zkmcp/idempotent-replay"
"""Result: true on the recorded outcome of an earlier call with the same idempotency key."""

SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
"""Result: the serverInfo stamp the MCP 2026-07-28 SDKs put on results."""

UPSTREAM_SERVER_INFO_META_KEY: Final = "io.zkmcp/upstream-server-info"
"""Result: where the gateway moves an upstream's serverInfo (never passed off as its own)."""

UPSTREAM_TOOL_CALL_META_KEY: Final = "io.zkmcp/upstream-tool-call"
"""Result: where the gateway keeps an upstream's own rs-tool-call/1 block (receipt and salt),
which it would otherwise replace with its own notarization."""

UPSTREAM_AER1_META_KEY: Final = "io.zkmcp/upstream-aer-1-receipt"
"""Result: where the gateway keeps an upstream's own AER-1 receipt."""

UPSTREAM_AUTH_RECEIPT_META_KEY: Final = "io.zkmcp/upstream-authorization-receipt"
"""Result: where a gateway keeps the authorization receipt of a gateway it fronts."""
