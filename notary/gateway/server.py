"""The authorization gateway: an MCP server in front of one upstream MCP server.

Shape (the ``mcp`` 2.x SDK has no proxy helper): a low-level :class:`mcp.server.Server` whose
lifespan holds a :class:`GatewayRuntime`, which owns the upstream connections
(:mod:`notary.gateway.upstreams`: one shared, one per 2025-era client session), a
:class:`~notary.sdk.NotaryClient`, the gateway's SQLite state and the committed policy. Every
method the upstream offers is forwarded as the client sent it (params, ``_meta``, progress),
and its answer or JSON-RPC error comes back as the upstream sent it, except where the policy
decides: list results are filtered to what it could allow; ``resources/read``,
``resources/subscribe``/``unsubscribe`` (and each URI of a ``subscriptions/listen``) and
``prompts/get`` are decided and their decisions
notarized before forwarding (a denial is one generic error); ``completion/complete`` follows
the prompt or resource it completes; ``tools/call`` goes through
:meth:`GatewayRuntime.call_tool`.

Order of a ``tools/call`` (see :meth:`GatewayRuntime.call_tool`):

1. the policy file is re-read if its mtime, size or inode changed, and the new policy's
   commitment is notarized (``policy.commit``) before it is used;
2. for a non-idempotent tool: the idempotency key is required, and a key seen before returns
   its recorded outcome here, without evaluating or forwarding anything;
3. **authorization**: the facts are extracted (path facts resolved through symlinks on this
   host when the upstream runs here), the policy evaluated, and the decision record (with a
   fresh salt) notarized (``policy.decision``) and saved with its facts, allowed or denied;
4. only with the resulting :class:`Authorized` value can :meth:`GatewayRuntime._forward` be
   called, and it is the only code that sends ``tools/call`` upstream: no path reaches the
   upstream before step 3 succeeded (a denial, or a decision the ledger did not take, returns
   before it);
5. an ``input_required`` result goes back untouched and unnotarized (the retry with the
   client's input is a new call, authorized again); a final upstream result is projected
   onto the tool's output schema, gets the authorization
   receipt, the rs-tool-call/1 notarization of the final result (the SDK's ``Notarizer``) and
   an AER-1 receipt (``result._receipt`` on the wire, mirrored in ``_meta``), and for a keyed
   call is stored durably before it is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast, get_args

import anyio
import mcp_types as types
import structlog
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import NotificationOptions, Server
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_dual_era_loop
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ledger.process import tracing
from ledger.process.structured_logs import configure
from notary.core import aer1
from notary.core.canonical import CanonicalizationError
from notary.core.discovery import RECEIPT_EXTENSION, receipt_extension, with_extension
from notary.core.errors import NotaryBaseError
from notary.core.ids import now_issued_at
from notary.core.meta import AER1_META_KEY, TOOL_CALL_META_KEY
from notary.core.receipts import Receipt, ReceiptFormatError
from notary.core.records import CallRecord, RecordError, name_problem, new_salt, record_from_json
from notary.core.toolcall import RebuildError, notarization_block, rebuild_record
from notary.gateway import codes
from notary.gateway.hostpaths import has_path_facts, resolve_path_facts, symlinked_rule_paths
from notary.gateway.policy import (
    Decision,
    Kind,
    Policy,
    PolicyError,
    decision_record,
    load_policy_text,
    sha256_jcs,
)
from notary.gateway.policy.commitment import DecisionRecord
from notary.gateway.projection import OutputSchemas, project_result
from notary.gateway.salt import read_salt
from notary.gateway.store import DecisionEvidence, GatewayStore
from notary.gateway.upstreams import RAW, Link, Upstreams, forwarding_capabilities, raw_request
from notary.sdk import (
    Notarizer,
    NotaryClient,
    NotaryError,
    NotaryResponseError,
    received_wire,
    structured_for,
)

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream  # the SDK's own hints

__all__ = [
    "DEFAULT_NAME",
    "Authorized",
    "GatewayConfig",
    "GatewayRuntime",
    "GatewayServer",
    "GatewayStartError",
    "Inbound",
    "UpstreamTarget",
    "build_gateway",
]

DEFAULT_NAME: Final = "notary-gateway"
MAX_KEY_CHARS: Final = 255

UpstreamTarget = str | StdioServerParameters | Server[Any] | MCPServer[Any]
"""A streamable HTTP URL, a stdio command, or an in-process server (tests, benchmarks)."""

_log = structlog.get_logger("notary.gateway")


@dataclass
class GatewayConfig:
    """Everything a gateway needs; the CLI builds one from its flags.

    ``name`` (default: the policy's ``gateway.name``, else ``notary-gateway``) is the MCP
    server name and the ``server`` of every ledger entry the gateway makes. ``agent`` fixes the
    ``agent`` fact (else the policy's ``gateway.agent``, else the request's
    ``_meta["io.zkmcp/agent"]``, a claim the gateway cannot authenticate).
    ``list_all_tools`` makes ``tools/list`` forward every upstream tool; by default it lists
    only the tools the policy could allow (:meth:`Policy.could_allow`), so a client is not
    offered tools every call of which is denied. ``resolve_paths`` resolves ``path`` facts
    through symlinks on this host before the rules apply (:mod:`notary.gateway.hostpaths`);
    None means: when the upstream runs on this host (a command, or in process), not for a URL.
    """

    upstream: UpstreamTarget
    policy_path: Path
    salt_path: Path
    state_path: Path
    notary_url: str
    api_key: str
    name: str | None = None
    agent: str | None = None
    upstream_mode: str = "auto"
    notary_public_url: str | None = None
    notary_timeout: float = 5.0
    upstream_timeout: float | None = 120.0
    list_all_tools: bool = False
    resolve_paths: bool | None = None


@dataclass(frozen=True)
class PolicyState:
    """The policy in force, its commitment, and the file stamp it was read at."""

    policy: Policy
    commitment: str
    stamp: tuple[int, int, int]
    receipt: dict[str, object] | None


_GRANT: Final = object()


@dataclass(frozen=True)
class Authorized:
    """A successful authorization, the only ticket to the upstream.

    Made only by :meth:`GatewayRuntime._authorize` (with this module's private grant) after
    the policy allowed the call and the ledger took the decision; consumed only by
    :meth:`GatewayRuntime._forward`, which refuses anything else.
    """

    tool: str
    decision: Decision
    block: dict[str, object]
    grant: object = field(repr=False, compare=False)


def _check_grant(auth: object) -> None:
    if not isinstance(auth, Authorized) or auth.grant is not _GRANT:
        raise PermissionError("the upstream is only called with an authorization")


@dataclass(frozen=True)
class Inbound:
    """The client request being served: where relayed messages and progress go."""

    session: ServerSession
    request_id: types.RequestId | None
    protocol_version: str
    params: Mapping[str, object] | None
    meta: Mapping[str, object] | None

    @classmethod
    def of(cls, ctx: ServerRequestContext[GatewayRuntime]) -> Inbound:
        # The wire form of _meta (progressToken, not the SDK's progress_token).
        raw = (ctx.params or {}).get("_meta")
        meta = dict(raw) if isinstance(raw, Mapping) else (
            dict(ctx.meta) if ctx.meta is not None else None)
        return cls(ctx.session, ctx.request_id, ctx.protocol_version, ctx.params, meta)

    @property
    def progress_token(self) -> str | int | None:
        token = self.meta.get("progressToken") if self.meta else None
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class GatewayStartError(NotaryBaseError):
    """The gateway could not start: one line saying what failed and what to do.

    ``usage`` is True for a problem with what the operator gave (the policy), False for a
    party that did not answer (the notary, the upstream).
    """

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _one_line(error: BaseException, limit: int | None = 300) -> str:
    """The innermost cause of ``error`` (through exception groups), on one line, cut at
    ``limit`` characters (what another party says may be long; the operator's own policy
    errors are given whole, None: their point may come after a long path)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split()) or type(error).__name__
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def _upstream_name(upstream: UpstreamTarget) -> str:
    if isinstance(upstream, StdioServerParameters):
        return f"command {upstream.command!r}"
    return f"at {upstream}" if isinstance(upstream, str) else "(in process)"


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


def denial_error(code: str = codes.AUTHORIZATION_DENIED) -> MCPError:
    """The one error a denied (or unrecordable) non-tool request gets: the code, no reason."""
    message = ("this request is not authorized by the gateway's policy"
               if code == codes.AUTHORIZATION_DENIED
               else "the authorization could not be recorded; nothing was forwarded")
    return MCPError(code=types.INVALID_PARAMS, message=f"{code}: {message}",
                    data={codes.AUTH_ERROR_META_KEY: {"code": code}})


def _aside_upstream_meta(result: dict[str, object]) -> dict[str, object]:
    """``result`` with the upstream's own serverInfo and receipts under upstream keys."""
    meta = result.get("_meta")
    if isinstance(meta, dict) and any(k in meta for k in _UPSTREAM_KEYS):
        meta = dict(meta)
        for key, aside in _UPSTREAM_KEYS.items():
            if key in meta:
                meta[aside] = meta.pop(key)
        result = {**result, "_meta": meta}
    return result


def _file_stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def _meta_of(result: Mapping[str, object]) -> Mapping[str, object]:
    """``result``'s ``_meta`` object ({} when it has none)."""
    meta = result.get("_meta")
    return meta if isinstance(meta, Mapping) else {}


def _items(value: object) -> list[object]:
    """A list member of an upstream answer (anything else, null or absent: no items)."""
    return value if isinstance(value, list) else []


def refusal(code: str, message: str, extra_meta: Mapping[str, object] | None = None
            ) -> dict[str, object]:
    """An ``isError`` result carrying only ``code`` in ``_meta[authorization-error]``."""
    meta: dict[str, object] = dict(extra_meta or {})
    meta[codes.AUTH_ERROR_META_KEY] = {"code": code}
    return {"content": _text(f"{code}: {message}"), "isError": True, "_meta": meta}


def _string_meta(meta: Mapping[str, object] | None, key: str) -> str | None:
    value = meta.get(key) if meta is not None else None
    if isinstance(value, str) and 0 < len(value) <= MAX_KEY_CHARS and value.isprintable():
        return value
    return None


def _forwarded_meta(meta: Mapping[str, object] | None) -> dict[str, object] | None:
    """Request ``_meta`` for the upstream: the caller's own keys only.

    Protocol keys (``io.modelcontextprotocol/*``, the progress token) belong to the client's
    connection with the gateway; the upstream client sets its own. The gateway's keys
    (``io.zkmcp/*``, e.g. the idempotency key) are for the gateway.
    """
    if not meta:
        return None
    out = {k: v for k, v in meta.items()
           if not k.startswith(("io.modelcontextprotocol/", "io.zkmcp/"))
           and k not in ("progressToken", "progress_token")}
    return out or None


def _not_ours(receipt: Receipt, server: str, tool: str, record: DecisionRecord) -> str | None:
    """Why ``receipt`` is not the ledger's entry for ``record`` made by this gateway, or None.

    The digest is rebuilt from the record (with its salt) rather than taken from the request
    that was sent: a receipt counts as the gateway's only if it commits to exactly the record
    the gateway keeps, under its own server name and the decision tool. Anything else (an
    entry another tenant made, a receipt for another call) is not an authorization.
    """
    digest = sha256_jcs(dict(record))
    if receipt.call_sha256 != digest:
        return f"the receipt commits to {receipt.call_sha256}, the record hashes to {digest}"
    if (receipt.server, receipt.tool) != (server, tool):
        return f"the receipt is a {receipt.tool!r} entry of {receipt.server!r}"
    return None


def _request_digest(tool: str, arguments: Mapping[str, object] | None, agent: str | None) -> str:
    """What an idempotency key is bound to (local only, so plain sorted JSON is enough)."""
    body = json.dumps({"tool": tool, "arguments": arguments or {}, "agent": agent},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


class GatewayRuntime:
    """The gateway's state for the lifetime of its server (the lifespan context)."""

    def __init__(self, config: GatewayConfig, name: str, store: GatewayStore,
                 notary: NotaryClient) -> None:
        self.config = config
        self.name = name
        self.store = store
        self.notary = notary
        self.notarizer = Notarizer(notary, name, embed_receipt=True, on_unavailable="mark",
                                   public_url=config.notary_public_url)
        self.schemas = OutputSchemas()
        self.salt = read_salt(config.salt_path)
        self.resolve_paths = (config.resolve_paths if config.resolve_paths is not None
                              else not isinstance(config.upstream, str))
        self._policy: PolicyState | None = None
        self._bad_stamp: tuple[int, int, int] | None = None
        self._reload_lock = asyncio.Lock()
        self._upstream: Client | None = None
        self.upstreams: Upstreams | None = None
        self._key_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self.upstream_name = "upstream"
        self.upstream_version = "unknown"

    # Policy -----------------------------------------------------------------------------

    @property
    def policy(self) -> PolicyState:
        if self._policy is None:
            raise RuntimeError("no policy loaded")
        return self._policy

    async def load_policy(self) -> PolicyState:
        """Read, commit (notarize ``policy.commit``) and install the policy file.

        Raises :class:`PolicyError` for a malformed file (or, when path facts are resolved on
        this host, a path prefix written through a symlink) and :class:`NotaryError` when the
        commitment cannot be notarized: a policy the ledger has not taken is never used.
        """
        path = self.config.policy_path
        stamp = _file_stamp(path)
        policy = load_policy_text(path.read_text("utf-8"))
        if self.resolve_paths:
            symlinked = symlinked_rule_paths(policy)
            if symlinked:
                raise PolicyError("", "; ".join(symlinked))
        commitment = policy.commitment(self.salt)
        receipt = await self.notary.notarize(self.name, codes.POLICY_COMMIT_TOOL, commitment)
        if receipt.call_sha256 != commitment or receipt.server != self.name \
                or receipt.tool != codes.POLICY_COMMIT_TOOL:
            raise NotaryResponseError("the notary answered a receipt for another entry than "
                                      "the policy commitment")
        evidence = receipt.to_json()  # kept as the notary signed it, with its proof
        await self.store.save_policy(commitment, now_issued_at(), evidence)
        state = PolicyState(policy, commitment, stamp, evidence)
        self._policy = state
        await _log.ainfo("policy_committed", policy=str(path), commitment=commitment,
                         receipt=receipt.id, tools=sorted(policy.tools))
        return state

    async def _current_policy(self) -> PolicyState:
        """The policy in force, reloading it first when the file changed (mtime/size/inode).

        Reloading on change rather than on SIGHUP works the same under every transport, in
        process and on every platform, and costs one ``stat`` per call. A new file that does
        not parse leaves the previous (committed) policy in force until the file changes
        again; one whose commitment the notary does not take (yet) is retried on the next
        call, the previous policy staying in force meanwhile.
        """
        state = self.policy
        try:
            stamp = _file_stamp(self.config.policy_path)
        except OSError as e:
            await _log.aerror("policy_unreadable", error=str(e), keeping=state.commitment)
            return state
        if stamp == state.stamp or stamp == self._bad_stamp:
            return state
        async with self._reload_lock:
            if self.policy.stamp != stamp and stamp != self._bad_stamp:
                try:
                    await self.load_policy()
                except (OSError, PolicyError, UnicodeDecodeError) as e:
                    # Not retried until the file changes again (no error per call).
                    self._bad_stamp = stamp
                    await _log.aerror("policy_reload_failed", error=str(e),
                                      keeping=self.policy.commitment)
                except NotaryError as e:  # retried on the next call
                    await _log.aerror("policy_commit_failed", error=str(e),
                                      keeping=self.policy.commitment)
        return self.policy

    # Upstream ---------------------------------------------------------------------------

    def attach_upstream(self, client: Client) -> None:
        self._upstream = client
        if self.upstreams is not None:
            self.upstreams.attach_shared(client)
        info = client.server_info
        if info is not None:
            self.upstream_name = info.name or self.upstream_name
            self.upstream_version = info.version or self.upstream_version

    @property
    def upstream(self) -> Client:
        if self._upstream is None:
            raise RuntimeError("the upstream is not connected")
        return self._upstream

    @property
    def upstream_capabilities(self) -> types.ServerCapabilities | None:
        return self._upstream.server_capabilities if self._upstream is not None else None

    async def link_for(self, inbound: Inbound | None) -> Link:
        """The upstream link serving ``inbound`` (the client's own session for a 2025-era
        client; the shared connection otherwise, or without an inbound request)."""
        if inbound is not None and self.upstreams is not None:
            link = await self.upstreams.for_request(inbound.session, inbound.protocol_version)
            if link.client is not None:
                return link
        if self.upstreams is not None and self.upstreams.shared.client is not None:
            return self.upstreams.shared
        shared = Link(relay=False)
        shared.client = self.upstream
        return shared

    async def send_upstream(self, inbound: Inbound | None, method: str,
                            params: Mapping[str, object] | None,
                            meta: Mapping[str, object] | None = None
                            ) -> tuple[dict[str, object], bool]:
        """Send one request upstream on the right link: (raw result, degraded).

        ``params`` go as given except ``_meta``, which keeps only the caller's own keys; the
        client's progress token is mapped onto the upstream's, and progress, log messages and
        server-to-client requests come back to this client (:mod:`notary.gateway.upstreams`).
        Upstream JSON-RPC errors propagate as :class:`MCPError` (code, message, data).
        """
        link = await self.link_for(inbound)
        client = link.client
        assert client is not None
        out = {k: v for k, v in (params or {}).items() if k != "_meta"}
        forwarded = _forwarded_meta(meta if meta is not None
                                    else inbound.meta if inbound is not None else None)
        if forwarded:
            out["_meta"] = forwarded
        on_progress: ProgressFnT | None = None
        token = inbound.progress_token if inbound is not None else None
        if inbound is not None and token is not None:
            session, rid = inbound.session, inbound.request_id

            async def relay_progress(progress: float, total: float | None, message: str | None
                                     ) -> None:
                with contextlib.suppress(Exception):  # the client may be gone: not ours to fix
                    await session.send_progress_notification(
                        token, progress, total, message,
                        related_request_id=str(rid) if rid is not None else None)

            on_progress = relay_progress

        caps = inbound.session.client_capabilities if inbound is not None else None
        async with contextlib.AsyncExitStack() as stack:
            call = None
            if inbound is not None:
                call = await stack.enter_async_context(link.call(inbound.session,
                                                                 inbound.request_id))
            await stack.enter_async_context(forwarding_capabilities(caps))
            # RAW keeps the answer as the upstream sent it; the SDK's hint asks for a model.
            raw: dict[str, object] = await client.session.send_request(
                raw_request(method, out), cast(Any, RAW),
                request_read_timeout_seconds=self.config.upstream_timeout,
                progress_callback=on_progress)
            degraded = bool(call is not None and call.degraded)
            result = _aside_upstream_meta(raw)
            if inbound is not None and inbound.protocol_version in MODERN_PROTOCOL_VERSIONS:
                # An upstream on the 2025 era (the SDK fell back) sends no resultType; the
                # cache hints it did not send are filled by the server (cache_hints).
                result.setdefault("resultType", "complete")
            return result, degraded
        raise AssertionError("unreachable")  # pragma: no cover

    # Resources, prompts, completions -----------------------------------------------------

    async def authorize_request(self, kind: str, name: str,
                                arguments: Mapping[str, object] | None,
                                inbound: Inbound, uri: object = None) -> Authorized:
        """Decide (and notarize the decision of) a prompt or resource request, or raise the
        generic denial. Nothing is forwarded before this returns."""
        state = await self._current_policy()
        agent = self.agent_for(inbound.meta, state.policy)
        prepared = (state.policy.resource_facts(name, uri, agent) if kind == "resource"
                    else None)
        auth = await self._authorize(state, name, dict(arguments) if arguments else None,
                                     agent, kind=kind, prepared=prepared)
        if isinstance(auth, Authorized):
            return auth
        err = _auth_error(auth)
        raise denial_error(str((err.get("code") if err else None) or codes.AUTHORIZATION_DENIED))

    async def forward_authorized(self, auth: Authorized, inbound: Inbound, method: str
                                 ) -> dict[str, object]:
        """Forward an authorized prompt or resource request as the client sent it."""
        _check_grant(auth)
        started = time.perf_counter()
        result, _ = await self.send_upstream(inbound, method, inbound.params)
        await _log.ainfo("request", method=method,
                         ms=round((time.perf_counter() - started) * 1e3, 2), outcome="ok")
        return result

    async def filtered_list(self, inbound: Inbound, method: str) -> dict[str, object]:
        """``resources/list``, ``resources/templates/list`` or ``prompts/list``, forwarded and
        filtered to what the policy could allow for this caller."""
        result, _ = await self.send_upstream(inbound, method, inbound.params)
        policy = (await self._current_policy()).policy
        agent = self.agent_for(inbound.meta, policy)
        if method == "resources/list":
            result["resources"] = [r for r in _items(result.get("resources"))
                                   if isinstance(r, dict)
                                   and policy.allows_resource(r.get("uri"), agent)]
        elif method == "resources/templates/list":
            keep = policy.could_allow_resources(agent)
            result["resourceTemplates"] = [
                t for t in _items(result.get("resourceTemplates")) if keep and isinstance(t, dict)
                and policy.allows_resource(t.get("uriTemplate"), agent)]
        elif method == "prompts/list":
            result["prompts"] = [p for p in _items(result.get("prompts")) if isinstance(p, dict)
                                 and policy.could_allow_prompt(str(p.get("name")), agent)]
        return result

    async def complete(self, inbound: Inbound) -> dict[str, object]:
        """``completion/complete``: allowed when the prompt or resource it completes could
        be, and answered with only the values the policy could allow
        (:meth:`Policy.completion_values`); judged without a ledger entry (a completion reads
        no resource and runs nothing)."""
        policy = (await self._current_policy()).policy
        agent = self.agent_for(inbound.meta, policy)
        ref = (inbound.params or {}).get("ref")
        allowed = False
        if isinstance(ref, Mapping) and ref.get("type") == "ref/prompt":
            allowed = policy.could_allow_prompt(str(ref.get("name")), agent)
        elif isinstance(ref, Mapping) and ref.get("type") == "ref/resource":
            facts, problems = policy.resource_facts("completion/complete", ref.get("uri"), agent)
            allowed = policy.judge("completion/complete", facts, problems, "resource").allowed
        if not allowed:
            await _log.ainfo("denied", method="completion/complete")
            raise denial_error()
        result, _ = await self.send_upstream(inbound, "completion/complete", inbound.params)
        # Only values the policy could allow are offered (none under a denied prefix).
        completion = result.get("completion")
        if isinstance(completion, dict) and isinstance(ref, Mapping):
            params = inbound.params or {}
            argument, context = params.get("argument"), params.get("context")
            arguments = context.get("arguments") if isinstance(context, Mapping) else None
            offered = _items(completion.get("values"))
            values = policy.completion_values(
                ref, argument if isinstance(argument, Mapping) else {},
                arguments if isinstance(arguments, Mapping) else {}, offered, agent)
            if len(values) != len(offered):
                # total counted what was filtered out; it is optional, so it goes
                completion = {k: v for k, v in completion.items() if k != "total"}
                result["completion"] = {**completion, "values": values}
        return result

    @property
    def upstream_listens(self) -> bool:
        """Whether the shared upstream speaks 2026-07-28 (and so serves a listen stream)."""
        return (self._upstream is not None
                and self._upstream.protocol_version in MODERN_PROTOCOL_VERSIONS)

    async def listen(self, ctx: ServerRequestContext[GatewayRuntime],
                     params: types.SubscriptionsListenRequestParams
                     ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): one upstream listen per client stream,
        its events relayed. Each resource URI to watch is decided like
        ``resources/subscribe`` (and the decision notarized); one the policy does not allow
        is left out of the acknowledged (honored) set."""
        if not self.upstream_listens:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found",
                           data="subscriptions/listen")
        wanted = params.notifications
        inbound = Inbound.of(ctx)
        uris: list[str] = []
        for uri in wanted.resource_subscriptions or ():
            with contextlib.suppress(MCPError):  # denied: not honored
                await self.authorize_request("resource", "resources/subscribe", None, inbound,
                                             uri=uri)
                uris.append(uri)
        relayed = params.model_copy(update={"notifications": wanted.model_copy(
            update={"resource_subscriptions": uris or None})})
        bus = InMemorySubscriptionBus()
        handler = ListenHandler(bus)
        client = self.upstream

        async def pump() -> None:
            try:
                async with client.listen(
                        tools_list_changed=bool(wanted.tools_list_changed),
                        prompts_list_changed=bool(wanted.prompts_list_changed),
                        resources_list_changed=bool(wanted.resources_list_changed),
                        resource_subscriptions=uris) as subscription:
                    async for event in subscription:
                        await bus.publish(event)
            except Exception as e:  # the upstream stream ended: so does the client's
                await _log.awarning("upstream_listen_ended", error=f"{type(e).__name__}: {e}")
            handler.close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                result = await handler(ctx, relayed)
            finally:
                tg.cancel_scope.cancel()
        return result

    def _record_tools(self, tools: list[types.Tool]) -> None:
        for tool in tools:
            self.schemas.record(tool.name, tool.input_schema, tool.output_schema)

    async def refresh_tools(self) -> None:
        """List every upstream tool (all pages) to learn their input and output schemas."""
        cursor: str | None = None
        for _ in range(100):
            page = await self.upstream.list_tools(cursor=cursor, cache_mode="refresh")
            self._record_tools(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return

    async def list_tools(self, inbound: Inbound) -> dict[str, object]:
        """``tools/list`` as the upstream answered it (caching hints and all), the schemas
        seen recorded for projection. Only the tools the policy could allow for this
        caller's agent are listed, unless the gateway was started with ``list_all_tools``:
        every other tool is denied on every call, and offering it would only invite the
        client to try. A 2025-era client gets non-object output schemas wrapped."""
        result, _ = await self.send_upstream(inbound, "tools/list", inbound.params)
        tools = [types.Tool.model_validate(t, by_name=False) for t in _items(result.get("tools"))]
        self._record_tools(tools)
        if not self.config.list_all_tools:
            policy = (await self._current_policy()).policy
            agent = self.agent_for(inbound.meta, policy)
            tools = [t for t in tools if policy.could_allow(t.name, agent)]
        if inbound.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            tools = [_legacy_tool(t) for t in tools]
        result["tools"] = [t.model_dump(by_alias=True, mode="json", exclude_none=True)
                           for t in tools]
        return result

    # tools/call -------------------------------------------------------------------------

    def agent_for(self, meta: Mapping[str, object] | None, policy: Policy) -> str | None:
        """The ``agent`` fact: configured (flag, then policy) or else claimed in ``_meta``."""
        configured = self.config.agent or policy.agent
        if configured is not None:
            return configured
        return _string_meta(meta, codes.AGENT_META_KEY)

    async def call_tool(self, tool: str, arguments: dict[str, object] | None,
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
            return refusal(codes.AUTHORIZATION_DENIED,
                           "this call is not authorized by the gateway's policy")
        state = await self._current_policy()
        policy = state.policy
        agent = self.agent_for(meta, policy)
        spec = policy.tools.get(tool)
        if spec is None or spec.idempotent:
            result = await self._authorize_and_run(state, tool, arguments, meta, agent,
                                                   client_version, inbound)
        else:
            key = _string_meta(meta, codes.IDEMPOTENCY_META_KEY)
            if key is None:
                await _log.ainfo("tool_call", tool=tool, outcome=codes.IDEMPOTENCY_KEY_REQUIRED)
                return refusal(codes.IDEMPOTENCY_KEY_REQUIRED,
                               f"this tool is not idempotent: send a unique key (1-"
                               f"{MAX_KEY_CHARS} characters) in _meta"
                               f"[{codes.IDEMPOTENCY_META_KEY!r}] and reuse it to retry")
            async with self._key_lock(key):
                result = await self._keyed_call(state, tool, arguments, meta, agent, key,
                                                client_version, inbound)
        await _log.ainfo("tool_call", tool=tool, ms=round((time.perf_counter() - started) * 1e3, 2),
                         outcome=_outcome(result))
        return result

    @asynccontextmanager
    async def _key_lock(self, key: str) -> AsyncIterator[None]:
        """Serialize calls sharing an idempotency key inside this process."""
        lock, users = self._key_locks.get(key, (asyncio.Lock(), 0))
        self._key_locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._key_locks[key]
            if users <= 1:
                del self._key_locks[key]
            else:
                self._key_locks[key] = (lock, users - 1)

    async def _keyed_call(self, state: PolicyState, tool: str,
                          arguments: dict[str, object] | None,
                          meta: Mapping[str, object] | None, agent: str | None,
                          key: str, client_version: str | None = None,
                          inbound: Inbound | None = None) -> dict[str, object]:
        digest = _request_digest(tool, arguments, agent)
        replay = await self._replay(key, digest)
        if replay is not None:
            return replay
        auth = await self._authorize(state, tool, arguments, agent)
        if not isinstance(auth, Authorized):
            return auth  # denied: nothing is recorded under the key, a retry is re-evaluated
        if not await self.store.begin(key, tool, digest, now_issued_at()):
            replay = await self._replay(key, digest)  # claimed by another gateway process
            assert replay is not None
            return replay
        try:
            result = await self._run(auth, arguments, meta, client_version=client_version,
                                     inbound=inbound)
        except UpstreamRpcError as e:
            await self.store.finish(key, e.wire)
            raise
        if result.get("resultType") == "input_required":
            # Not an outcome: the upstream acted on nothing yet and asks for input. The
            # retry carrying it (same key) is authorized and run again.
            await self.store.release(key)
            return result
        await self.store.finish(key, result)
        return result

    async def _replay(self, key: str, digest: str) -> dict[str, object] | None:
        row = await self.store.lookup(key)
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

    async def _authorize_and_run(self, state: PolicyState, tool: str,
                                 arguments: dict[str, object] | None,
                                 meta: Mapping[str, object] | None,
                                 agent: str | None,
                                 client_version: str | None = None,
                                 inbound: Inbound | None = None) -> dict[str, object]:
        auth = await self._authorize(state, tool, arguments, agent)
        if not isinstance(auth, Authorized):
            return auth
        return await self._run(auth, arguments, meta, client_version=client_version,
                               inbound=inbound)

    async def _authorize(self, state: PolicyState, tool: str,
                         arguments: dict[str, object] | None,
                         agent: str | None, *, kind: str = "tool",
                         prepared: tuple[dict[str, object], list[str]] | None = None
                         ) -> Authorized | dict[str, object]:
        """Evaluate, notarize and save the decision; an :class:`Authorized` or a refusal.

        Every decision goes to the ledger, denials included. An allowed decision the ledger
        did not take is refused (``gateway.AUTHORIZATION_UNAVAILABLE``): an authorization
        nobody can later audit is not one.
        """
        policy = state.policy
        k = cast(Kind, kind)
        facts, problems = (prepared if prepared is not None
                           else policy.facts_for(tool, arguments, agent, k))
        spec = policy.spec(tool, k) if k != "resource" else None
        if self.resolve_paths and has_path_facts(spec):
            # On this host's file system, as the upstream running here will see it (a
            # thread: realpath may wait on a slow disk or network mount).
            facts, more = await asyncio.to_thread(resolve_path_facts, spec, facts)
            problems += more
        decision = policy.judge(tool, facts, problems, k)
        record = decision_record(decision.value, tool, decision.facts_sha256,
                                 state.commitment, now_issued_at(), new_salt(), kind)
        receipt: dict[str, object] | None = None
        try:
            got = await self.notary.notarize(self.name, codes.POLICY_DECISION_TOOL,
                                             sha256_jcs(record))
        except NotaryError as e:
            await _log.aerror("decision_not_notarized", tool=tool, error=str(e))
        else:
            problem = _not_ours(got, self.name, codes.POLICY_DECISION_TOOL, record)
            if problem is None:
                receipt = got.to_json()
            else:
                await _log.aerror("decision_not_notarized", tool=tool, error=problem,
                                  receipt=got.id)
        await self.store.save_decision(DecisionEvidence(record, decision.facts, receipt))
        # On the span of the MCP request (the mcp SDK's, in the caller's trace).
        tracing.annotate({"notary.policy.decision": decision.value,
                          "notary.policy.receipt_id": str((receipt or {}).get("id", ""))})
        if not decision.allowed:
            # The reason is the operator's alone: the caller gets the generic code.
            await _log.ainfo("denied", kind=kind, tool=tool, agent=agent,
                             reasons=list(decision.reasons),
                             facts_sha256=decision.facts_sha256,
                             receipt=receipt.get("id") if receipt else None)
            return refusal(codes.AUTHORIZATION_DENIED,
                           "this call is not authorized by the gateway's policy")
        if receipt is None:
            return refusal(codes.AUTHORIZATION_UNAVAILABLE,
                           "the authorization could not be recorded; nothing was forwarded")
        block = {"spec": codes.DECISION_SPEC, **record, "receipt": receipt}
        return Authorized(tool, decision, block, _GRANT)

    async def _forward(self, auth: Authorized, arguments: dict[str, object] | None,
                       meta: Mapping[str, object] | None, inbound: Inbound | None = None
                       ) -> tuple[dict[str, object], bool]:
        """The one place that sends ``tools/call`` upstream; needs an :class:`Authorized`.

        The arguments go exactly as received, with the request's other parameters
        (``inputResponses``, ``requestState`` of a retry); the result comes back as the
        upstream's wire JSON, and whether the call was degraded (the upstream asked for input
        the gateway could not relay).
        """
        _check_grant(auth)
        params: dict[str, object] = {k: v for k, v in ((inbound.params if inbound else None)
                                                    or {}).items()
                                  if k not in ("name", "arguments", "_meta")}
        params["name"] = auth.tool
        if arguments is not None:
            params["arguments"] = arguments
        return await self.send_upstream(inbound, "tools/call", params, meta)

    async def _run(self, auth: Authorized, arguments: dict[str, object] | None,
                   meta: Mapping[str, object] | None, *, client_version: str | None = None,
                   inbound: Inbound | None = None) -> dict[str, object]:
        """Forward an authorized call and build the final result with its receipts.

        An ``input_required`` result is not final: it goes back untouched (the upstream's
        serverInfo aside) and is not notarized. A JSON-RPC error from the upstream is
        notarized as the refusal it stands for and then raised as :class:`UpstreamRpcError`
        (the client gets the upstream's code, message and data).
        """
        _check_grant(auth)  # outside the try below: a forged ticket is an error, not a result
        tool = auth.tool
        record_arguments = copy.deepcopy(arguments) if arguments is not None else {}
        observed = True
        rpc_error: types.ErrorData | None = None
        try:
            raw, degraded = await self._forward(auth, arguments, meta, inbound)
            if raw.get("resultType") == "input_required" and not degraded:
                await _log.ainfo("input_required", tool=tool)
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
                wire = self._shape(tool, upstream, client_version)
        wire["_meta"] = {**_meta_of(wire), codes.AUTH_RECEIPT_META_KEY: auth.block}
        wire = await self.notarizer.notarize_wire(tool, record_arguments, wire)
        receipt = self._aer1(tool, record_arguments, wire, observed)
        wire["_meta"] = {**_meta_of(wire), AER1_META_KEY: receipt}
        if rpc_error is not None:
            raise UpstreamRpcError(rpc_error, wire)
        return wire

    def _shape(self, tool: str, result: types.CallToolResult,
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
        wire = _aside_upstream_meta(wire)
        if wire.get("isError") is True:
            wire["_meta"] = {**_meta_of(wire),
                             codes.AUTH_ERROR_META_KEY: {"code": codes.UPSTREAM_TOOL_FAILED}}
            return wire
        projected, problem = project_result(wire, self.schemas.validator(tool))
        if problem is None:
            if "structuredContent" in projected:
                projected["structuredContent"] = structured_for(
                    client_version, projected["structuredContent"])
            return projected
        _log.warning("upstream_output_invalid", tool=tool, problem=problem)
        return refusal(codes.UPSTREAM_TOOL_FAILED, "the upstream tool returned a result that "
                       "does not match its declared output schema", _meta_of(wire))

    def _aer1(self, tool: str, arguments: dict[str, object], wire: dict[str, object],
              observed: bool) -> aer1.Aer1Receipt:
        """The AER-1 receipt of the final result, from the SDK's notarization block."""
        block = notarization_block(wire) or {}
        receipt: Receipt | None = None
        try:
            # The record the notarizer hashed, rebuilt as every verifier rebuilds it.
            record = record_from_json(rebuild_record(tool, arguments, wire, server=self.name))
            with contextlib.suppress(KeyError, ReceiptFormatError):
                receipt = Receipt.from_json(block["receipt"])
        except (RebuildError, RecordError, CanonicalizationError):
            # Not notarized (the notarizer refused the same record, or the notary was out of
            # reach). AER-1 still needs bytes: it describes the result, without the arguments
            # when they are what cannot be encoded, under a salt of its own.
            try:
                record = CallRecord(server=self.name, tool=tool, arguments=arguments,
                                    result=wire, salt=new_salt())
            except (RecordError, CanonicalizationError):
                record = CallRecord(server=self.name, tool=tool, arguments={}, result=wire,
                                    salt=new_salt())
            receipt = None
        build = functools.partial(
            aer1.build_aer1, record=record, provenance=aer1.PROVENANCE_GATEWAY,
            verification_status="execution_observed" if observed
            else "execution_not_observed",
            status="error" if wire.get("isError") else "success",
            tool_context={"name": tool, "version": self.upstream_version,
                          "scope": f"mcp:{self.upstream_name}"})
        try:
            return build(notary_receipt=receipt)
        except ValueError:
            # The receipt is for other bytes (cannot happen with the SDK's notarizer, which
            # hashed this very record): never anchor bytes to someone else's commitment.
            return build(notary_receipt=None)


_UPSTREAM_KEYS: Final = {
    codes.SERVER_INFO_META_KEY: codes.UPSTREAM_SERVER_INFO_META_KEY,
    TOOL_CALL_META_KEY: codes.UPSTREAM_TOOL_CALL_META_KEY,
    AER1_META_KEY: codes.UPSTREAM_AER1_META_KEY,
    codes.AUTH_RECEIPT_META_KEY: codes.UPSTREAM_AUTH_RECEIPT_META_KEY,
}
"""``_meta`` keys of an upstream result that the gateway moves aside, and where to."""


def _legacy_tool(tool: types.Tool) -> types.Tool:
    """A tool as a 2025-era client may see it: an output schema for an object.

    Those clients (and the SDK's sieve for them) take only object schemas; an upstream's
    schema for another root is wrapped as ``{"result": <schema>}``, matching the wrapped
    ``structuredContent`` such a client gets.
    """
    schema = tool.output_schema
    if schema is None or schema.get("type") == "object":
        return tool
    wrapped = {"type": "object", "properties": {"result": dict(schema)}, "required": ["result"]}
    return tool.model_copy(update={"output_schema": wrapped})


def _auth_error(result: Mapping[str, object]) -> Mapping[str, object] | None:
    """A refusal's ``_meta[authorization-error]`` (None in any other result)."""
    err = _meta_of(result).get(codes.AUTH_ERROR_META_KEY)
    return err if isinstance(err, Mapping) else None


def _outcome(result: Mapping[str, object]) -> str:
    if _meta_of(result).get(codes.REPLAY_META_KEY):
        return "replayed"
    err = _auth_error(result)
    return str(err.get("code")) if err is not None else "ok"


def _key_digest(key: str) -> str:
    """Idempotency keys may be meaningful to the caller; logs get a digest."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# The MCP server


async def _on_list_tools(ctx: ServerRequestContext[GatewayRuntime],
                         params: types.PaginatedRequestParams | None) -> HandlerResult:
    return await ctx.lifespan_context.list_tools(Inbound.of(ctx))


async def _on_call_tool(ctx: ServerRequestContext[GatewayRuntime],
                        params: types.CallToolRequestParams) -> HandlerResult:
    # The wire dict goes back as is: the SDK validates it against the protocol version's
    # result schema anyway (dropping resultType on 2025-11-25), so building a model here
    # first would only cost time.
    try:
        wire = await ctx.lifespan_context.call_tool(
            params.name, params.arguments, dict(ctx.meta) if ctx.meta is not None else None,
            client_version=ctx.protocol_version, inbound=Inbound.of(ctx))
    except UpstreamRpcError as e:
        raise MCPError(code=e.error.code, message=e.error.message, data=e.error.data) from None
    if wire.get("resultType") == "input_required":
        return wire
    return {**wire, "resultType": "complete"}


def _param(ctx: ServerRequestContext[GatewayRuntime], key: str) -> object:
    return (ctx.params or {}).get(key)


async def _on_read_resource(ctx: ServerRequestContext[GatewayRuntime],
                            params: types.ReadResourceRequestParams) -> HandlerResult:
    return await _resource_request(ctx, "resources/read")


async def _on_subscribe(ctx: ServerRequestContext[GatewayRuntime],
                        params: types.SubscribeRequestParams) -> HandlerResult:
    return await _resource_request(ctx, "resources/subscribe")


async def _on_unsubscribe(ctx: ServerRequestContext[GatewayRuntime],
                          params: types.UnsubscribeRequestParams) -> HandlerResult:
    return await _resource_request(ctx, "resources/unsubscribe")


async def _resource_request(ctx: ServerRequestContext[GatewayRuntime], method: str
                            ) -> HandlerResult:
    runtime, inbound = ctx.lifespan_context, Inbound.of(ctx)
    auth = await runtime.authorize_request("resource", method, None, inbound,
                                           uri=_param(ctx, "uri"))
    return await runtime.forward_authorized(auth, inbound, method)


async def _on_get_prompt(ctx: ServerRequestContext[GatewayRuntime],
                         params: types.GetPromptRequestParams) -> HandlerResult:
    runtime, inbound = ctx.lifespan_context, Inbound.of(ctx)
    arguments = _param(ctx, "arguments")
    auth = await runtime.authorize_request(
        "prompt", params.name, arguments if isinstance(arguments, dict) else None, inbound)
    return await runtime.forward_authorized(auth, inbound, "prompts/get")


async def _on_list_resources(ctx: ServerRequestContext[GatewayRuntime],
                             params: types.PaginatedRequestParams | None) -> HandlerResult:
    return await ctx.lifespan_context.filtered_list(Inbound.of(ctx), "resources/list")


async def _on_list_templates(ctx: ServerRequestContext[GatewayRuntime],
                             params: types.PaginatedRequestParams | None) -> HandlerResult:
    return await ctx.lifespan_context.filtered_list(Inbound.of(ctx), "resources/templates/list")


async def _on_list_prompts(ctx: ServerRequestContext[GatewayRuntime],
                           params: types.PaginatedRequestParams | None) -> HandlerResult:
    return await ctx.lifespan_context.filtered_list(Inbound.of(ctx), "prompts/list")


async def _on_complete(ctx: ServerRequestContext[GatewayRuntime],
                       params: types.CompleteRequestParams) -> HandlerResult:
    return await ctx.lifespan_context.complete(Inbound.of(ctx))


async def _on_listen(ctx: ServerRequestContext[GatewayRuntime],
                     params: types.SubscriptionsListenRequestParams) -> HandlerResult:
    return await ctx.lifespan_context.listen(ctx, params)


async def _on_set_level(ctx: ServerRequestContext[GatewayRuntime],
                        params: types.SetLevelRequestParams) -> HandlerResult:
    # The log level of this client's own upstream session: nothing read, nothing acted on.
    result, _ = await ctx.lifespan_context.send_upstream(Inbound.of(ctx), "logging/setLevel",
                                                         ctx.params)
    return result


class GatewayServer(Server[GatewayRuntime]):
    """The low-level server, advertising what the upstream offers (and no more)."""

    live: list[GatewayRuntime]

    async def run(self, read_stream: ReadStream[SessionMessage | Exception],
                  write_stream: WriteStream[SessionMessage],
                  initialization_options: InitializationOptions,
                  raise_exceptions: bool = False) -> None:
        """As ``Server.run``, with the initialize answer built once the lifespan connected
        the upstream (its capabilities) and the notary (the receipt extension): callers
        build ``initialization_options`` before either exists."""
        async with self.lifespan(self) as lifespan_context:
            options = initialization_options.model_copy(
                update={"capabilities": self.get_capabilities()})
            await serve_dual_era_loop(self, read_stream, write_stream,
                                      lifespan_state=lifespan_context, init_options=options,
                                      raise_exceptions=raise_exceptions)

    @asynccontextmanager
    async def started(self) -> AsyncIterator[GatewayRuntime]:
        """Run the lifespan now, before any transport serves (a failure is then one
        :class:`GatewayStartError`, not a transport's traceback), and have the transports
        that enter the lifespan later (``run``, the streamable HTTP manager) share it."""
        original = self.lifespan
        async with original(self) as runtime:

            @asynccontextmanager
            async def shared(_: Server[GatewayRuntime]) -> AsyncIterator[GatewayRuntime]:
                yield runtime

            self.lifespan = shared
            try:
                yield runtime
            finally:
                self.lifespan = original

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        modern = protocol_version in MODERN_PROTOCOL_VERSIONS
        if not modern and RECEIPT_EXTENSION in self.extensions:
            # A 2025-era client finds the receipt extension under experimental.
            experimental_capabilities = with_extension(experimental_capabilities,
                                                       self.extensions[RECEIPT_EXTENSION])
        mine = super().get_capabilities(notification_options, experimental_capabilities,
                                        extensions, protocol_version=protocol_version)
        upstream = self.live[-1].upstream_capabilities if self.live else None
        if upstream is None:
            return mine
        # List changes and resource updates reach a 2025-era client on its own upstream
        # session, and a 2026 client on its subscriptions/listen stream when the upstream
        # serves one (a 2025-era upstream does not).
        relays = not modern or self.live[-1].upstream_listens
        return types.ServerCapabilities(
            tools=(types.ToolsCapability(list_changed=relays and
                                         bool(upstream.tools.list_changed))
                   if upstream.tools is not None else None),
            prompts=(types.PromptsCapability(list_changed=relays and
                                             bool(upstream.prompts.list_changed))
                     if upstream.prompts is not None else None),
            resources=(types.ResourcesCapability(
                subscribe=relays and bool(upstream.resources.subscribe),
                list_changed=relays and bool(upstream.resources.list_changed))
                if upstream.resources is not None else None),
            logging=upstream.logging if not modern else None,
            completions=upstream.completions,
            experimental=mine.experimental,
            extensions=mine.extensions,
        )


async def aer1_result_middleware(ctx: ServerRequestContext[GatewayRuntime], call_next: CallNext
                                 ) -> HandlerResult:
    """Put the AER-1 receipt at ``result._receipt`` on the wire.

    The SDK shapes each result to its protocol version's schema *inside* the middleware
    chain, dropping members the schema does not know (``_receipt`` among them); a middleware
    sees the shaped wire dict after that, so a member added here reaches the client in both
    protocol modes. The receipt itself is already in ``_meta[AER1_META_KEY]``.
    """
    result = await call_next(ctx)
    if ctx.method != "tools/call" or not isinstance(result, dict):
        return result
    meta = result.get("_meta")
    receipt = meta.get(AER1_META_KEY) if isinstance(meta, dict) else None
    if isinstance(receipt, dict):
        result = {**result, aer1.RESULT_KEY: receipt}
    return result


def resolve_name(config: GatewayConfig) -> str:
    """The gateway's name: the flag, else the policy's ``gateway.name``, else the default."""
    if config.name:
        return config.name
    policy = load_policy_text(config.policy_path.read_text("utf-8"))
    return policy.name or DEFAULT_NAME


async def _start(config: GatewayConfig, name: str, me: Server[GatewayRuntime],
                 stack: AsyncExitStack) -> GatewayRuntime:
    """A session's runtime, each step in the order :func:`build_gateway` gives: the state
    file, the notary, the upstream and its tools, then the policy commitment. What it opens is
    closed by ``stack``; a step that fails raises :class:`GatewayStartError`."""
    store = await GatewayStore(config.state_path).open()
    stack.push_async_callback(store.close)
    notary = NotaryClient(config.notary_url, config.api_key,
                          timeout=config.notary_timeout)
    stack.push_async_callback(notary.close)
    runtime = GatewayRuntime(config, name, store, notary)
    try:
        ledger = await notary.ledger()
    except NotaryError as e:
        raise GatewayStartError(f"the notary did not answer ({_one_line(e)}): start "
                                "it, or fix --notary (or NOTARY_URL)") from None
    # Results carry receipts: say so, and where to check them (discovery only).
    vkey = ledger.get("vkey")
    me.extensions[RECEIPT_EXTENSION] = receipt_extension(
        config.notary_public_url or config.notary_url,
        [vkey] if isinstance(vkey, str) else [])
    tasks = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(tasks.cancel_scope.cancel)  # per-session upstreams end with us
    factory = functools.partial(Client, config.upstream,
                                read_timeout_seconds=config.upstream_timeout)
    runtime.upstreams = Upstreams(factory, tasks)
    client = factory(mode=config.upstream_mode,
                     **Upstreams.client_kwargs(runtime.upstreams.shared, None))
    try:
        runtime.attach_upstream(await stack.enter_async_context(client))
        await runtime.refresh_tools()
    except Exception as e:
        raise GatewayStartError(
            f"the upstream {_upstream_name(config.upstream)} did not start or answer "
            f"({_one_line(e)}): fix --upstream") from None
    try:
        await runtime.load_policy()
    except PolicyError as e:
        raise GatewayStartError(f"the policy {config.policy_path} cannot be used: "
                                f"{_one_line(e, None)}", usage=True) from None
    except NotaryError as e:
        raise GatewayStartError(
            f"the notary did not take the policy commitment ({_one_line(e)}): check "
            "the API key (--api-key-file or NOTARY_API_KEY) and the notary") from None
    return runtime


def build_gateway(config: GatewayConfig) -> GatewayServer:
    """The gateway as a low-level MCP server; its lifespan connects everything.

    The policy is parsed here once, so a malformed file fails before anything starts. On
    lifespan entry: the state file opens, the notary must answer, the upstream is connected
    and its tools listed, and only *then* is the policy commitment notarized (nothing goes to
    the ledger for a gateway that cannot serve); on exit all of it is closed again. A step
    that fails raises :class:`GatewayStartError`, one line for the operator.
    """
    name = resolve_name(config)
    tracing.setup("notary-gateway")
    if not structlog.is_configured():
        # structlog's default writes to stdout, which is the MCP channel of a stdio server:
        # the operator log goes to stderr instead (the CLI configures this itself).
        configure("auto", "info")
    live: list[GatewayRuntime] = []

    @asynccontextmanager
    async def lifespan(me: Server[GatewayRuntime]) -> AsyncIterator[GatewayRuntime]:
        async with AsyncExitStack() as stack:
            runtime = await _start(config, name, me, stack)
            live.append(runtime)
            try:
                yield runtime
            finally:
                live.remove(runtime)

    def input_schema(tool: str) -> dict[str, object] | None:
        # For the SDK's Mcp-Param-* header check on modern streamable HTTP: answer from the
        # schemas already seen instead of forwarding a tools/list upstream per call.
        return live[-1].schemas.input_schemas.get(tool) if live else None

    server = GatewayServer(
        name,
        version="1",
        instructions="An authorization gateway: every tools/call is checked against a "
                     "committed policy before it is forwarded, and carries receipts.",
        lifespan=lifespan,
        get_tool_input_schema=input_schema,
        # ttlMs 0, private: what an upstream that sent no hints (a 2025-era one) means.
        cache_hints=dict.fromkeys(get_args(CacheableMethod), CacheHint()),
    )
    server.live = live
    server.add_request_handler("tools/call", types.CallToolRequestParams, _on_call_tool)
    for method, params_type, handler in (
            ("tools/list", types.PaginatedRequestParams, _on_list_tools),
            ("resources/list", types.PaginatedRequestParams, _on_list_resources),
            ("resources/templates/list", types.PaginatedRequestParams, _on_list_templates),
            ("prompts/list", types.PaginatedRequestParams, _on_list_prompts),
            ("resources/read", types.ReadResourceRequestParams, _on_read_resource),
            ("resources/subscribe", types.SubscribeRequestParams, _on_subscribe),
            ("resources/unsubscribe", types.UnsubscribeRequestParams, _on_unsubscribe),
            ("prompts/get", types.GetPromptRequestParams, _on_get_prompt),
            ("completion/complete", types.CompleteRequestParams, _on_complete),
            ("logging/setLevel", types.SetLevelRequestParams, _on_set_level),
            ("subscriptions/listen", types.SubscriptionsListenRequestParams, _on_listen)):
        server.add_request_handler(method, params_type, handler)  # type: ignore[arg-type]
    server.middleware.append(aer1_result_middleware)
    return server
