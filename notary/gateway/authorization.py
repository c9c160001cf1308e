"""Authorization: the policy's decision on one request, notarized and saved, and the
:class:`Authorized` ticket that is the only way to the upstream.

Every decision goes to the ledger (tool ``policy.decision``), denials included, under a fresh
salt, and is saved with its facts in the state file (``gateway audit`` re-checks it). An
allowed decision the ledger did not take is refused (``gateway.AUTHORIZATION_UNAVAILABLE``):
an authorization nobody can later audit is not one. Only :func:`authorize` makes an
:class:`Authorized` (with this module's private grant), and the code that sends a request
upstream checks it (:func:`check_grant`) before anything else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, cast

import structlog

from ledger.process import tracing
from notary.core.ids import now_issued_at
from notary.core.receipts import Receipt
from notary.core.records import new_salt
from notary.gateway import codes
from notary.gateway.forwarding import Inbound
from notary.gateway.hostpaths import has_path_facts, resolve_path_facts
from notary.gateway.policy import Decision, Kind, sha256_jcs
from notary.gateway.policy.commitment import DecisionRecord, decision_record
from notary.gateway.replies import DENIED, UNRECORDED, auth_error, denial_error, refusal
from notary.gateway.store import DecisionEvidence, KeyClaim
from notary.sdk import NotaryError

if TYPE_CHECKING:
    from notary.gateway.runtime import GatewayRuntime, PolicyState

_log = structlog.get_logger("notary.gateway")

_GRANT: Final = object()


@dataclass(frozen=True)
class Authorized:
    """A successful authorization, the only ticket to the upstream.

    Made only by :func:`authorize` (with this module's private grant) after the policy allowed
    the call and the ledger took the decision; consumed only by the code that forwards it
    (:func:`notary.gateway.toolcalls.forward`, :func:`notary.gateway.handlers.forward_authorized`),
    which refuses anything else.
    """

    tool: str
    decision: Decision
    block: dict[str, object]
    grant: object = field(repr=False, compare=False)


def check_grant(auth: object) -> None:
    """Raise unless ``auth`` is an :class:`Authorized` this module made."""
    if not isinstance(auth, Authorized) or auth.grant is not _GRANT:
        raise PermissionError("the upstream is only called with an authorization")


def not_ours(receipt: Receipt, server: str, tool: str, digest: str) -> str | None:
    """Why ``receipt`` is not the ledger's entry for the record hashing to ``digest`` made by
    this gateway, or None.

    ``digest`` is the hash of the record (with its salt) the gateway keeps: a receipt counts as
    the gateway's only if it commits to exactly that record, under its own server name and the
    decision tool. Anything else (an entry another tenant made, a receipt for another call) is
    not an authorization.
    """
    if receipt.call_sha256 != digest:
        return f"the receipt commits to {receipt.call_sha256}, the record hashes to {digest}"
    if (receipt.server, receipt.tool) != (server, tool):
        return f"the receipt is a {receipt.tool!r} entry of {receipt.server!r}"
    return None


async def decide(runtime: GatewayRuntime, state: PolicyState, tool: str,
                 arguments: dict[str, object] | None, agent: str | None, kind: Kind,
                 prepared: tuple[dict[str, object], list[str]] | None = None) -> Decision:
    """The policy's decision: the facts extracted (``prepared`` when the caller has them),
    path facts resolved on this host when configured, and the rules applied."""
    policy = state.policy
    facts, problems = (prepared if prepared is not None
                       else policy.facts_for(tool, arguments, agent, kind))
    spec = policy.spec(tool, kind) if kind != "resource" else None
    if runtime.resolve_paths and has_path_facts(spec):
        # On this host's file system, as the upstream running here will see it (a thread:
        # realpath may wait on a slow disk or network mount).
        facts, more = await asyncio.to_thread(resolve_path_facts, spec, facts)
        problems += more
    return policy.judge(tool, facts, problems, kind)


async def _notarize(runtime: GatewayRuntime, tool: str, record: DecisionRecord
                    ) -> dict[str, object] | None:
    """The decision record's receipt as the notary signed it, or None when the ledger did
    not take it (or answered a receipt that is not for it)."""
    digest = sha256_jcs(record)  # hashed once: what is sent is what the receipt is checked for
    try:
        got = await runtime.notary.notarize(runtime.name, codes.POLICY_DECISION_TOOL, digest)
    except NotaryError as e:
        await _log.aerror("decision_not_notarized", tool=tool, error=str(e))
        return None
    problem = not_ours(got, runtime.name, codes.POLICY_DECISION_TOOL, digest)
    if problem is not None:
        await _log.aerror("decision_not_notarized", tool=tool, error=problem, receipt=got.id)
        return None
    return got.to_json()


async def authorize(runtime: GatewayRuntime, state: PolicyState, tool: str,
                    arguments: dict[str, object] | None, agent: str | None, *,
                    kind: str = "tool",
                    prepared: tuple[dict[str, object], list[str]] | None = None,
                    claim: KeyClaim | None = None) -> Authorized | dict[str, object]:
    """Evaluate, notarize and save the decision; an :class:`Authorized` or a refusal.

    ``claim`` (a non-idempotent call's key) is claimed ``pending`` in the transaction that
    saves an allowed, notarized decision, durably, before this returns; it raises
    :class:`notary.gateway.store.KeyTaken` when the key was claimed already.
    """
    k = cast(Kind, kind)
    decision = await decide(runtime, state, tool, arguments, agent, k, prepared)
    record = decision_record(decision.value, tool, decision.facts_sha256, state.commitment,
                             now_issued_at(), new_salt(), kind)
    receipt = await _notarize(runtime, tool, record)
    # On the span of the MCP request (the mcp SDK's, in the caller's trace).
    tracing.annotate({"notary.policy.decision": decision.value,
                      "notary.policy.receipt_id": str((receipt or {}).get("id", ""))})
    # Saved before anything is forwarded. Written while the request is forwarded instead, the
    # write (on the store's thread) competes with the busy event loop for the GIL and made
    # calls slower, not faster (gateway_bench, 2026-12-07).
    await runtime.store.save_decision(
        DecisionEvidence(record, decision.facts, receipt),
        claim if decision.allowed and receipt is not None else None)
    if not decision.allowed:
        # The reason is the operator's alone: the caller gets the generic code.
        _log.info("denied", kind=kind, tool=tool, agent=agent, reasons=list(decision.reasons),
                  facts_sha256=decision.facts_sha256,
                  receipt=receipt.get("id") if receipt else None)
        return refusal(codes.AUTHORIZATION_DENIED, DENIED)
    if receipt is None:
        return refusal(codes.AUTHORIZATION_UNAVAILABLE, UNRECORDED)
    block = {"spec": codes.DECISION_SPEC, **record, "receipt": receipt}
    return Authorized(tool, decision, block, _GRANT)


async def authorize_request(runtime: GatewayRuntime, kind: str, name: str,
                            arguments: Mapping[str, object] | None, inbound: Inbound,
                            uri: object = None) -> Authorized:
    """Decide (and notarize the decision of) a prompt or resource request, or raise the
    generic denial. Nothing is forwarded before this returns."""
    state = await runtime.current_policy()
    agent = runtime.agent_for(inbound.meta, state.policy)
    prepared = (state.policy.resource_facts(name, uri, agent) if kind == "resource"
                else None)
    auth = await authorize(runtime, state, name, dict(arguments) if arguments else None,
                           agent, kind=kind, prepared=prepared)
    if isinstance(auth, Authorized):
        return auth
    err = auth_error(auth)
    raise denial_error(str((err.get("code") if err else None) or codes.AUTHORIZATION_DENIED))
