"""``tools/call`` through the gateway, in order:

1. the policy file is re-read if its mtime, size or inode changed, and the new policy's
   commitment is notarized (``policy.commit``) before it is used;
2. for a non-idempotent tool: the idempotency key is required, and a key seen before returns
   its recorded outcome here, without evaluating or forwarding anything;
3. **authorization** (:func:`notary.gateway.authorization.authorize`): the facts are extracted
   (path facts resolved through symlinks on this host when the upstream runs here), the
   policy evaluated, and the decision record (with a fresh salt) notarized
   (``policy.decision``) and saved with its facts, allowed or denied (an allowed keyed
   call's key claimed ``pending`` in the same fsync'ed transaction, before step 4);
4. only with the resulting :class:`Authorized` value can :func:`forward` be called, and it is
   the only code that sends ``tools/call`` upstream: no path reaches the upstream before
   step 3 succeeded (a denial, or a decision the ledger did not take, returns before it);
5. an ``input_required`` result goes back untouched and unnotarized (the retry with the
   client's input is a new call, authorized again); a final upstream result is projected
   onto the tool's output schema, gets the authorization receipt, the rs-tool-call/1
   notarization of the final result (the SDK's ``Notarizer``) and an AER-1 receipt
   (``result._receipt`` on the wire, mirrored in ``_meta``), and for a keyed call is stored
   durably before it is returned.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError

from notary.core import aer1
from notary.core.canonical import CanonicalizationError
from notary.core.errors import NotaryBaseError
from notary.core.ids import now_issued_at
from notary.core.meta import AER1_META_KEY
from notary.core.records import CallRecord, RecordError, name_problem, new_salt
from notary.gateway import codes
from notary.gateway.authorization import Authorized, authorize, check_grant
from notary.gateway.forwarding import Inbound, aside_upstream_meta
from notary.gateway.projection import project_result
from notary.gateway.replies import (
    DENIED,
    MAX_KEY_CHARS,
    meta_of,
    outcome,
    refusal,
    string_meta,
)
from notary.gateway.store import KeyClaim, KeyTaken
from notary.sdk import Notarized, received_wire, structured_for

if TYPE_CHECKING:
    from notary.gateway.runtime import GatewayRuntime, PolicyState

_log = structlog.get_logger("notary.gateway")


class UpstreamRpcError(NotaryBaseError):
    """The upstream answered a tools/call with a JSON-RPC error: it goes to the client as is.

    ``wire`` is the refusal the gateway notarized (and, for a keyed call, recorded) for it.
    """

    def __init__(self, error: types.ErrorData, wire: dict[str, object]) -> None:
        super().__init__(error.message)
        self.error = error
        self.wire = wire


_TRANSPORT_FAILURES: Final = frozenset({types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT})
"""MCPError codes the SDK raises for a lost upstream: not an answer from the upstream."""


def request_digest(tool: str, arguments: Mapping[str, object] | None, agent: str | None) -> str:
    """What an idempotency key is bound to (local only, so plain sorted JSON is enough)."""
    body = json.dumps({"tool": tool, "arguments": arguments or {}, "agent": agent},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _key_digest(key: str) -> str:
    """Idempotency keys may be meaningful to the caller; logs get a digest."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


async def call_tool(runtime: GatewayRuntime, tool: str, arguments: dict[str, object] | None,
                    meta: Mapping[str, object] | None, *, client_version: str | None = None,
                    inbound: Inbound | None = None) -> dict[str, object]:
    """One ``tools/call``: the wire result (see the module docstring for the order).

    ``client_version`` is the protocol version of the gateway's client: a 2025-era client
    gets a non-object ``structuredContent`` wrapped as ``{"result": …}`` (the only shape
    its schema allows), and the notarization is of that shape, the one it receives.
    """
    started = time.perf_counter()
    problem = name_problem(tool)
    if problem is not None:
        # Such a name cannot be in a ledger entry (or in any policy): refused unrecorded.
        await _log.ainfo("denied", reasons=[f"tool name {problem}"])
        return refusal(codes.AUTHORIZATION_DENIED, DENIED)
    state = await runtime.current_policy()
    policy = state.policy
    agent = runtime.agent_for(meta, policy)
    spec = policy.tools.get(tool)
    if spec is None or spec.idempotent:
        result = await _authorize_and_run(runtime, state, tool, arguments, meta, agent,
                                          client_version, inbound)
    else:
        key = string_meta(meta, codes.IDEMPOTENCY_META_KEY)
        if key is None:
            await _log.ainfo("tool_call", tool=tool, outcome=codes.IDEMPOTENCY_KEY_REQUIRED)
            return refusal(codes.IDEMPOTENCY_KEY_REQUIRED,
                           f"this tool is not idempotent: send a unique key (1-"
                           f"{MAX_KEY_CHARS} characters) in _meta"
                           f"[{codes.IDEMPOTENCY_META_KEY!r}] and reuse it to retry")
        async with runtime.key_lock(key):
            result = await _keyed_call(runtime, state, tool, arguments, meta, agent, key,
                                       client_version, inbound)
    _log.info("tool_call", tool=tool, ms=round((time.perf_counter() - started) * 1e3, 2),
              outcome=outcome(result))
    return result


async def _keyed_call(runtime: GatewayRuntime, state: PolicyState, tool: str,
                      arguments: dict[str, object] | None,
                      meta: Mapping[str, object] | None, agent: str | None,
                      key: str, client_version: str | None = None,
                      inbound: Inbound | None = None) -> dict[str, object]:
    digest = request_digest(tool, arguments, agent)
    replay = await _replay(runtime, key, digest)
    if replay is not None:
        return replay
    try:
        # Claimed durably with the decision's evidence, before anything is forwarded.
        auth = await authorize(runtime, state, tool, arguments, agent,
                               claim=KeyClaim(key, tool, digest, now_issued_at()))
    except KeyTaken:
        replay = await _replay(runtime, key, digest)  # claimed by another gateway process
        assert replay is not None
        return replay
    if not isinstance(auth, Authorized):
        return auth  # denied: nothing is recorded under the key, a retry is re-evaluated
    try:
        result = await run(runtime, auth, arguments, meta, client_version=client_version,
                           inbound=inbound)
    except UpstreamRpcError as e:
        await runtime.store.finish(key, e.wire)
        raise
    if result.get("resultType") == "input_required":
        # Not an outcome: the upstream acted on nothing yet and asks for input. The
        # retry carrying it (same key) is authorized and run again.
        await runtime.store.release(key)
        return result
    await runtime.store.finish(key, result)
    return result


async def _replay(runtime: GatewayRuntime, key: str, digest: str) -> dict[str, object] | None:
    row = await runtime.store.lookup(key)
    if row is None:
        return None
    if row.request_sha256 != digest:
        await _log.awarning("idempotency_conflict", key_sha256=_key_digest(key))
        return refusal(codes.IDEMPOTENCY_KEY_CONFLICT,
                       "this idempotency key was used for a different request")
    if row.state != "done" or row.result is None:
        await _log.aerror("idempotency_outcome_unknown", key_sha256=_key_digest(key),
                          tool=row.tool)
        return refusal(codes.IDEMPOTENCY_OUTCOME_UNKNOWN,
                       "the first call with this key was forwarded but its outcome was "
                       "not recorded; it is not executed again")
    result = copy.deepcopy(row.result)
    meta = result.get("_meta")
    result["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                       codes.REPLAY_META_KEY: True}
    return result


async def _authorize_and_run(runtime: GatewayRuntime, state: PolicyState, tool: str,
                             arguments: dict[str, object] | None,
                             meta: Mapping[str, object] | None,
                             agent: str | None,
                             client_version: str | None = None,
                             inbound: Inbound | None = None) -> dict[str, object]:
    auth = await authorize(runtime, state, tool, arguments, agent)
    if not isinstance(auth, Authorized):
        return auth
    return await run(runtime, auth, arguments, meta, client_version=client_version,
                     inbound=inbound)


async def forward(runtime: GatewayRuntime, auth: Authorized,
                  arguments: dict[str, object] | None, meta: Mapping[str, object] | None,
                  inbound: Inbound | None = None) -> tuple[dict[str, object], bool]:
    """The one place that sends ``tools/call`` upstream; needs an :class:`Authorized`.

    The arguments go exactly as received, with the request's other parameters
    (``inputResponses``, ``requestState`` of a retry); the result comes back as the
    upstream's wire JSON, and whether the call was degraded (the upstream asked for input
    the gateway could not relay).
    """
    check_grant(auth)
    params: dict[str, object] = {k: v for k, v in ((inbound.params if inbound else None)
                                                    or {}).items()
                                  if k not in ("name", "arguments", "_meta")}
    params["name"] = auth.tool
    if arguments is not None:
        params["arguments"] = arguments
    return await runtime.send_upstream(inbound, "tools/call", params, meta)


async def run(runtime: GatewayRuntime, auth: Authorized, arguments: dict[str, object] | None,
              meta: Mapping[str, object] | None, *, client_version: str | None = None,
              inbound: Inbound | None = None) -> dict[str, object]:
    """Forward an authorized call and build the final result with its receipts.

    An ``input_required`` result is not final: it goes back untouched (the upstream's
    serverInfo aside) and is not notarized. A JSON-RPC error from the upstream is
    notarized as the refusal it stands for and then raised as :class:`UpstreamRpcError`
    (the client gets the upstream's code, message and data).
    """
    check_grant(auth)  # outside the try below: a forged ticket is an error, not a result
    tool = auth.tool
    record_arguments = copy.deepcopy(arguments) if arguments is not None else {}
    observed = True
    rpc_error: types.ErrorData | None = None
    try:
        raw, degraded = await forward(runtime, auth, arguments, meta, inbound)
        if raw.get("resultType") == "input_required" and not degraded:
            _log.info("input_required", tool=tool)
            return raw
        upstream = types.CallToolResult.model_validate(
            {k: v for k, v in raw.items() if k != "resultType"}, by_name=False)
    except MCPError as e:  # an upstream error answer, or a lost upstream
        observed = False
        if e.error.code not in _TRANSPORT_FAILURES:
            rpc_error = e.error
        await _log.awarning("upstream_failed", tool=tool, error=f"{type(e).__name__}: {e}")
        wire = refusal(codes.UPSTREAM_TOOL_FAILED, "the upstream tool failed after "
                       "authorization")
    except Exception as e:  # timeout, closed connection, bad result shape
        observed = False
        await _log.awarning("upstream_failed", tool=tool, error=f"{type(e).__name__}: {e}")
        wire = refusal(codes.UPSTREAM_TOOL_FAILED, "the upstream tool failed after "
                       "authorization")
    else:
        if degraded:
            # The upstream needed input from the client (sampling, elicitation, roots)
            # that could not be relayed: whatever it answered instead is not the tool's
            # result, and is never passed off (or notarized) as a success.
            await _log.awarning("upstream_degraded", tool=tool)
            wire = refusal(codes.UPSTREAM_INPUT_UNAVAILABLE, "the upstream needed input "
                           "from the client that the gateway could not relay")
        else:
            wire = _shape(runtime, tool, upstream, client_version)
    wire["_meta"] = {**meta_of(wire), codes.AUTH_RECEIPT_META_KEY: auth.block}
    notarized = await runtime.notarizer.notarized(tool, record_arguments, wire)
    wire = notarized.wire
    receipt = _aer1(runtime, tool, record_arguments, notarized, observed)
    wire["_meta"] = {**meta_of(wire), AER1_META_KEY: receipt}
    if rpc_error is not None:
        raise UpstreamRpcError(rpc_error, wire)
    return wire


def _shape(runtime: GatewayRuntime, tool: str, result: types.CallToolResult,
           client_version: str | None = None) -> dict[str, object]:
    """The upstream result as wire JSON: serverInfo renamed, projected, failures coded.

    Projected on the upstream's own output schema, then shaped for the client: a 2025-era
    client gets a non-object ``structuredContent`` as ``{"result": …}``.
    """
    wire = received_wire(result)  # structuredContent as sent, null included
    wire.pop("resultType", None)  # the gateway's own runner sets it for its client
    # The upstream's serverInfo, and any receipts it attached itself (an upstream that
    # notarizes its own results, or a gateway in front of a gateway), are kept under
    # upstream keys: the gateway's own receipts take the plain keys, and the upstream's
    # stay verifiable (its record hashes the same content, unless the projection below
    # had to change it).
    wire = aside_upstream_meta(wire)
    if wire.get("isError") is True:
        wire["_meta"] = {**meta_of(wire),
                         codes.AUTH_ERROR_META_KEY: {"code": codes.UPSTREAM_TOOL_FAILED}}
        return wire
    projected, problem = project_result(wire, runtime.schemas.validator(tool))
    if problem is None:
        if "structuredContent" in projected:
            projected["structuredContent"] = structured_for(
                client_version, projected["structuredContent"])
        return projected
    _log.warning("upstream_output_invalid", tool=tool, problem=problem)
    return refusal(codes.UPSTREAM_TOOL_FAILED, "the upstream tool returned a result that "
                   "does not match its declared output schema", meta_of(wire))


def _aer1(runtime: GatewayRuntime, tool: str, arguments: dict[str, object],
          notarized: Notarized, observed: bool) -> aer1.Aer1Receipt:
    """The AER-1 receipt of the final result: of the record the notarizer hashed, anchored
    to its receipt."""
    wire, record, receipt = notarized
    if record is None:
        # Not notarized (the notarizer refused the same record, or the notary was out of
        # reach). AER-1 still needs bytes: it describes the result, without the arguments
        # when they are what cannot be encoded, under a salt of its own.
        try:
            record = CallRecord(server=runtime.name, tool=tool, arguments=arguments,
                                result=wire, salt=new_salt())
        except (RecordError, CanonicalizationError):
            record = CallRecord(server=runtime.name, tool=tool, arguments={}, result=wire,
                                salt=new_salt())
        receipt = None
    build = functools.partial(
        aer1.build_aer1, record=record, provenance=aer1.PROVENANCE_GATEWAY,
        verification_status="execution_observed" if observed
        else "execution_not_observed",
        status="error" if wire.get("isError") else "success",
        tool_context={"name": tool, "version": runtime.upstream_version,
                      "scope": f"mcp:{runtime.upstream_name}"})
    try:
        return build(notary_receipt=receipt)
    except ValueError:
        # The receipt is for other bytes (cannot happen with the SDK's notarizer, which
        # hashed this very record): never anchor bytes to someone else's commitment.
        return build(notary_receipt=None)

