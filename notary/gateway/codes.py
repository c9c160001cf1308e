"""Public codes and ``_meta`` keys of the gateway (the wire contract in one place).

Every refusal of a ``tools/call`` is an ``isError: true`` tool result whose
``_meta["io.zkmcp/authorization-error"]`` is ``{"code": <one of these>}`` and nothing else:
the detailed reason goes to the operator's log only. The codes say *what kind* of refusal it
is, never which rule failed, so a caller cannot probe the policy with near-boundary requests.
A refused prompt or resource request (which has
no ``isError`` result) gets a JSON-RPC error, ``-32602`` with ``data`` holding the same
``{"io.zkmcp/authorization-error": {"code": ...}}`` and nothing else.
"""

from __future__ import annotations

from typing import Final

from notary.core.meta import (  # the gateway's keys, re-exported beside its codes
    AGENT_META_KEY,
    AUTH_ERROR_META_KEY,
    AUTH_RECEIPT_META_KEY,
    IDEMPOTENCY_META_KEY,
    REPLAY_META_KEY,
    SERVER_INFO_META_KEY,
    UPSTREAM_AER1_META_KEY,
    UPSTREAM_AUTH_RECEIPT_META_KEY,
    UPSTREAM_SERVER_INFO_META_KEY,
    UPSTREAM_TOOL_CALL_META_KEY,
)

__all__ = [
    "AGENT_META_KEY",
    "AUTHORIZATION_DENIED",
    "AUTHORIZATION_UNAVAILABLE",
    "AUTH_ERROR_META_KEY",
    "AUTH_RECEIPT_META_KEY",
    "DECISION_SPEC",
    "IDEMPOTENCY_KEY_CONFLICT",
    "IDEMPOTENCY_KEY_REQUIRED",
    "IDEMPOTENCY_META_KEY",
    "IDEMPOTENCY_OUTCOME_UNKNOWN",
    "POLICY_COMMIT_TOOL",
    "POLICY_DECISION_TOOL",
    "REPLAY_META_KEY",
    "SERVER_INFO_META_KEY",
    "UPSTREAM_AER1_META_KEY",
    "UPSTREAM_AUTH_RECEIPT_META_KEY",
    "UPSTREAM_INPUT_UNAVAILABLE",
    "UPSTREAM_SERVER_INFO_META_KEY",
    "UPSTREAM_TOOL_CALL_META_KEY",
    "UPSTREAM_TOOL_FAILED",
]

# Refusal codes ------------------------------------------------------------------------------

AUTHORIZATION_DENIED: Final = "policy.AUTHORIZATION_DENIED"
"""The policy does not allow this call (any rule, an unknown tool, unreadable facts)."""

UPSTREAM_TOOL_FAILED: Final = "gateway.UPSTREAM_TOOL_FAILED"
"""The call was authorized and forwarded, and the upstream failed (an ``isError`` result, a
protocol error, a timeout, or a result that breaks the tool's own output schema). The
authorization receipt is attached and stays valid: the authorization really happened."""

UPSTREAM_INPUT_UNAVAILABLE: Final = "gateway.UPSTREAM_INPUT_UNAVAILABLE"
"""The call was authorized and forwarded, and the upstream asked the client for input
(sampling, elicitation, roots) that the gateway could not relay to the client that made the
call (a 2026-07-28 client on a connection shared with others, or no back channel): the
upstream's answer is not the tool's result and is never notarized as a success."""

IDEMPOTENCY_KEY_REQUIRED: Final = "gateway.IDEMPOTENCY_KEY_REQUIRED"
"""The tool is marked ``idempotent = false`` and the request carries no usable
``_meta["io.zkmcp/idempotency-key"]`` (a string of 1-255 characters). Nothing was evaluated
or forwarded."""

IDEMPOTENCY_KEY_CONFLICT: Final = "gateway.IDEMPOTENCY_KEY_CONFLICT"
"""The idempotency key was used before for a different request (tool, arguments or agent)."""

IDEMPOTENCY_OUTCOME_UNKNOWN: Final = "gateway.IDEMPOTENCY_OUTCOME_UNKNOWN"
"""The key's first call was forwarded but the gateway stopped before recording its outcome:
the upstream may or may not have acted, and it is not called again. Reconcile by hand."""

AUTHORIZATION_UNAVAILABLE: Final = "gateway.AUTHORIZATION_UNAVAILABLE"
"""The policy allows the call, but the decision could not be recorded in the ledger (the
notary is unreachable): the gateway fails closed and forwards nothing."""

# Ledger entries -----------------------------------------------------------------------------

POLICY_COMMIT_TOOL: Final = "policy.commit"
POLICY_DECISION_TOOL: Final = "policy.decision"
DECISION_SPEC: Final = "notary-gateway-decision/1"
"""``spec`` of the authorization receipt block: the decision record is the block's
``decision``, ``tool``, ``facts_sha256``, ``policy_commitment``, ``time`` and ``salt`` (a fresh
random salt per decision; records made before it was added have none)."""
