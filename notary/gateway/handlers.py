"""The MCP request handlers of the gateway, one per method, and what each does besides
forwarding: lists filtered to what the policy could allow, prompts and resources decided
(their decisions notarized) before they are forwarded, completions judged by what they
complete, ``subscriptions/listen`` relayed from an upstream listen stream. ``tools/call``
is :func:`notary.gateway.toolcalls.call_tool`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any, Final

import anyio
import mcp_types as types
import structlog
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from notary.gateway.authorization import Authorized, authorize_request, check_grant
from notary.gateway.forwarding import Inbound
from notary.gateway.replies import denial_error, items
from notary.gateway.runtime import GatewayRuntime
from notary.gateway.toolcalls import UpstreamRpcError, call_tool

_log = structlog.get_logger("notary.gateway")

Context = ServerRequestContext[GatewayRuntime]


async def forward_authorized(runtime: GatewayRuntime, auth: Authorized, inbound: Inbound,
                             method: str) -> dict[str, object]:
    """Forward an authorized prompt or resource request as the client sent it."""
    check_grant(auth)
    started = time.perf_counter()
    result, _ = await runtime.send_upstream(inbound, method, inbound.params)
    _log.info("request", method=method, ms=round((time.perf_counter() - started) * 1e3, 2),
              outcome="ok")
    return result


async def filtered_list(runtime: GatewayRuntime, inbound: Inbound, method: str
                        ) -> dict[str, object]:
    """``resources/list``, ``resources/templates/list`` or ``prompts/list``, forwarded and
    filtered to what the policy could allow for this caller."""
    result, _ = await runtime.send_upstream(inbound, method, inbound.params)
    policy = (await runtime.current_policy()).policy
    agent = runtime.agent_for(inbound.meta, policy)
    if method == "resources/list":
        result["resources"] = [r for r in items(result.get("resources"))
                               if isinstance(r, dict)
                               and policy.allows_resource(r.get("uri"), agent)]
    elif method == "resources/templates/list":
        keep = policy.could_allow_resources(agent)
        result["resourceTemplates"] = [
            t for t in items(result.get("resourceTemplates")) if keep and isinstance(t, dict)
            and policy.allows_resource(t.get("uriTemplate"), agent)]
    elif method == "prompts/list":
        result["prompts"] = [p for p in items(result.get("prompts")) if isinstance(p, dict)
                             and policy.could_allow_prompt(str(p.get("name")), agent)]
    return result


async def complete(runtime: GatewayRuntime, inbound: Inbound) -> dict[str, object]:
    """``completion/complete``: allowed when the prompt or resource it completes could
    be, and answered with only the values the policy could allow
    (:meth:`Policy.completion_values`); judged without a ledger entry (a completion reads
    no resource and runs nothing)."""
    policy = (await runtime.current_policy()).policy
    agent = runtime.agent_for(inbound.meta, policy)
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
    result, _ = await runtime.send_upstream(inbound, "completion/complete", inbound.params)
    # Only values the policy could allow are offered (none under a denied prefix).
    completion = result.get("completion")
    if isinstance(completion, dict) and isinstance(ref, Mapping):
        params = inbound.params or {}
        argument, context = params.get("argument"), params.get("context")
        arguments = context.get("arguments") if isinstance(context, Mapping) else None
        offered = items(completion.get("values"))
        values = policy.completion_values(
            ref, argument if isinstance(argument, Mapping) else {},
            arguments if isinstance(arguments, Mapping) else {}, offered, agent)
        if len(values) != len(offered):
            # total counted what was filtered out; it is optional, so it goes
            completion = {k: v for k, v in completion.items() if k != "total"}
            result["completion"] = {**completion, "values": values}
    return result


async def listen(runtime: GatewayRuntime, ctx: Context,
                 params: types.SubscriptionsListenRequestParams
                 ) -> types.SubscriptionsListenResult:
    """``subscriptions/listen`` (2026-07-28): one upstream listen per client stream,
    its events relayed. Each resource URI to watch is decided like
    ``resources/subscribe`` (and the decision notarized); one the policy does not allow
    is left out of the acknowledged (honored) set."""
    if not runtime.upstream_listens:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found",
                       data="subscriptions/listen")
    wanted = params.notifications
    inbound = Inbound.of(ctx)
    uris: list[str] = []
    for uri in wanted.resource_subscriptions or ():
        with contextlib.suppress(MCPError):  # denied: not honored
            await authorize_request(runtime, "resource", "resources/subscribe", None, inbound,
                                    uri=uri)
            uris.append(uri)
    relayed = params.model_copy(update={"notifications": wanted.model_copy(
        update={"resource_subscriptions": uris or None})})
    bus = InMemorySubscriptionBus()
    handler = ListenHandler(bus)
    client = runtime.upstream

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


async def list_tools(runtime: GatewayRuntime, inbound: Inbound) -> dict[str, object]:
    """``tools/list`` as the upstream answered it (caching hints and all), the schemas
    seen recorded for projection. Only the tools the policy could allow for this
    caller's agent are listed, unless the gateway was started with ``list_all_tools``:
    every other tool is denied on every call, and offering it would only invite the
    client to try. A 2025-era client gets non-object output schemas wrapped."""
    result, _ = await runtime.send_upstream(inbound, "tools/list", inbound.params)
    tools = [types.Tool.model_validate(t, by_name=False) for t in items(result.get("tools"))]
    runtime.record_tools(tools)
    if not runtime.config.list_all_tools:
        policy = (await runtime.current_policy()).policy
        agent = runtime.agent_for(inbound.meta, policy)
        tools = [t for t in tools if policy.could_allow(t.name, agent)]
    if inbound.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        tools = [_legacy_tool(t) for t in tools]
    result["tools"] = [t.model_dump(by_alias=True, mode="json", exclude_none=True)
                       for t in tools]
    return result


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



# The handlers ---------------------------------------------------------------------------


async def _on_list_tools(ctx: Context, params: types.PaginatedRequestParams | None
                         ) -> HandlerResult:
    return await list_tools(ctx.lifespan_context, Inbound.of(ctx))


async def _on_call_tool(ctx: Context, params: types.CallToolRequestParams) -> HandlerResult:
    # The wire dict goes back as is: the SDK validates it against the protocol version's
    # result schema anyway (dropping resultType on 2025-11-25), so building a model here
    # first would only cost time.
    try:
        wire = await call_tool(
            ctx.lifespan_context, params.name, params.arguments,
            dict(ctx.meta) if ctx.meta is not None else None,
            client_version=ctx.protocol_version, inbound=Inbound.of(ctx))
    except UpstreamRpcError as e:
        raise MCPError(code=e.error.code, message=e.error.message, data=e.error.data) from None
    if wire.get("resultType") == "input_required":
        return wire
    return {**wire, "resultType": "complete"}


def _param(ctx: Context, key: str) -> object:
    return (ctx.params or {}).get(key)


async def _on_read_resource(ctx: Context, params: types.ReadResourceRequestParams
                            ) -> HandlerResult:
    return await _resource_request(ctx, "resources/read")


async def _on_subscribe(ctx: Context, params: types.SubscribeRequestParams) -> HandlerResult:
    return await _resource_request(ctx, "resources/subscribe")


async def _on_unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams
                          ) -> HandlerResult:
    return await _resource_request(ctx, "resources/unsubscribe")


async def _resource_request(ctx: Context, method: str) -> HandlerResult:
    runtime, inbound = ctx.lifespan_context, Inbound.of(ctx)
    auth = await authorize_request(runtime, "resource", method, None, inbound,
                                   uri=_param(ctx, "uri"))
    return await forward_authorized(runtime, auth, inbound, method)


async def _on_get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> HandlerResult:
    runtime, inbound = ctx.lifespan_context, Inbound.of(ctx)
    arguments = _param(ctx, "arguments")
    auth = await authorize_request(runtime, "prompt", params.name,
                                   arguments if isinstance(arguments, dict) else None, inbound)
    return await forward_authorized(runtime, auth, inbound, "prompts/get")


async def _on_list_resources(ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> HandlerResult:
    return await filtered_list(ctx.lifespan_context, Inbound.of(ctx), "resources/list")


async def _on_list_templates(ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> HandlerResult:
    return await filtered_list(ctx.lifespan_context, Inbound.of(ctx),
                               "resources/templates/list")


async def _on_list_prompts(ctx: Context, params: types.PaginatedRequestParams | None
                           ) -> HandlerResult:
    return await filtered_list(ctx.lifespan_context, Inbound.of(ctx), "prompts/list")


async def _on_complete(ctx: Context, params: types.CompleteRequestParams) -> HandlerResult:
    return await complete(ctx.lifespan_context, Inbound.of(ctx))


async def _on_listen(ctx: Context, params: types.SubscriptionsListenRequestParams
                     ) -> HandlerResult:
    return await listen(ctx.lifespan_context, ctx, params)


async def _on_set_level(ctx: Context, params: types.SetLevelRequestParams) -> HandlerResult:
    # The log level of this client's own upstream session: nothing read, nothing acted on.
    result, _ = await ctx.lifespan_context.send_upstream(Inbound.of(ctx), "logging/setLevel",
                                                         ctx.params)
    return result


HANDLERS: Final[tuple[tuple[str, type[BaseModel], Any], ...]] = (
    ("tools/call", types.CallToolRequestParams, _on_call_tool),
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
    ("subscriptions/listen", types.SubscriptionsListenRequestParams, _on_listen),
)
"""Each method the gateway serves: its params model and its handler."""
