"""Forwarding one request upstream and its answer back, as the client sent it and as the
upstream answered it.

The request's ``params`` go as given except ``_meta``, which keeps only the caller's own keys;
the client's progress token is mapped onto the upstream's, and progress, log messages and
server-to-client requests come back to this client (:mod:`notary.gateway.upstreams` routes
them). The answer comes back as the upstream's wire JSON, with the upstream's own
``serverInfo`` and receipts moved under upstream keys (the gateway's own take the plain ones).
Nothing here decides anything: the policy's checks come before (:mod:`.authorization`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from notary.core.meta import AER1_META_KEY, TOOL_CALL_META_KEY
from notary.gateway import codes
from notary.gateway.upstreams import RAW, Link, forwarding_capabilities, raw_request


@dataclass(frozen=True)
class Inbound:
    """The client request being served: where relayed messages and progress go."""

    session: ServerSession
    request_id: types.RequestId | None
    protocol_version: str
    params: Mapping[str, object] | None
    meta: Mapping[str, object] | None

    @classmethod
    def of(cls, ctx: ServerRequestContext[Any]) -> Inbound:
        # The wire form of _meta (progressToken, not the SDK's progress_token).
        raw = (ctx.params or {}).get("_meta")
        meta = dict(raw) if isinstance(raw, Mapping) else (
            dict(ctx.meta) if ctx.meta is not None else None)
        return cls(ctx.session, ctx.request_id, ctx.protocol_version, ctx.params, meta)

    @property
    def progress_token(self) -> str | int | None:
        token = self.meta.get("progressToken") if self.meta else None
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None


UPSTREAM_KEYS: Final = {
    codes.SERVER_INFO_META_KEY: codes.UPSTREAM_SERVER_INFO_META_KEY,
    TOOL_CALL_META_KEY: codes.UPSTREAM_TOOL_CALL_META_KEY,
    AER1_META_KEY: codes.UPSTREAM_AER1_META_KEY,
    codes.AUTH_RECEIPT_META_KEY: codes.UPSTREAM_AUTH_RECEIPT_META_KEY,
}
"""``_meta`` keys of an upstream result that the gateway moves aside, and where to."""


def aside_upstream_meta(result: dict[str, object]) -> dict[str, object]:
    """``result`` with the upstream's own serverInfo and receipts under upstream keys."""
    meta = result.get("_meta")
    if isinstance(meta, dict) and any(k in meta for k in UPSTREAM_KEYS):
        meta = dict(meta)
        for key, aside in UPSTREAM_KEYS.items():
            if key in meta:
                meta[aside] = meta.pop(key)
        result = {**result, "_meta": meta}
    return result


def forwarded_meta(meta: Mapping[str, object] | None) -> dict[str, object] | None:
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


def _progress_relay(inbound: Inbound | None) -> ProgressFnT | None:
    """The callback that relays the upstream's progress to the client under its own token."""
    token = inbound.progress_token if inbound is not None else None
    if inbound is None or token is None:
        return None
    session, rid = inbound.session, inbound.request_id

    async def relay_progress(progress: float, total: float | None, message: str | None
                             ) -> None:
        with contextlib.suppress(Exception):  # the client may be gone: not ours to fix
            await session.send_progress_notification(
                token, progress, total, message,
                related_request_id=str(rid) if rid is not None else None)

    return relay_progress


async def send(link: Link, inbound: Inbound | None, method: str,
               params: Mapping[str, object] | None, meta: Mapping[str, object] | None,
               timeout: float | None) -> tuple[dict[str, object], bool]:
    """Send one request upstream on ``link``: (raw result, degraded).

    ``meta`` replaces the inbound request's ``_meta`` when given. Upstream JSON-RPC errors
    propagate as :class:`MCPError` (code, message, data); degraded means the upstream asked
    for input (sampling, elicitation, roots) that could not be relayed to this client.
    """
    client = link.client
    assert client is not None
    out = {k: v for k, v in (params or {}).items() if k != "_meta"}
    forwarded = forwarded_meta(meta if meta is not None
                               else inbound.meta if inbound is not None else None)
    if forwarded:
        out["_meta"] = forwarded
    caps = inbound.session.client_capabilities if inbound is not None else None
    async with contextlib.AsyncExitStack() as stack:
        call = None
        if inbound is not None:
            call = await stack.enter_async_context(link.call(inbound.session,
                                                             inbound.request_id))
        await stack.enter_async_context(forwarding_capabilities(caps))
        # RAW keeps the answer as the upstream sent it; the SDK's hint asks for a model.
        raw: dict[str, object] = await client.session.send_request(
            raw_request(method, out), cast(Any, RAW), request_read_timeout_seconds=timeout,
            progress_callback=_progress_relay(inbound))
        degraded = bool(call is not None and call.degraded)
    result = aside_upstream_meta(raw)
    if inbound is not None and inbound.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # An upstream on the 2025 era (the SDK fell back) sends no resultType; the cache
        # hints it did not send are filled by the server (cache_hints).
        result.setdefault("resultType", "complete")
    return result, degraded
