"""The authorization gateway: an MCP server in front of one upstream MCP server.

Shape (the ``mcp`` 2.x SDK has no proxy helper): a low-level :class:`mcp.server.Server` whose
lifespan holds a :class:`~notary.gateway.runtime.GatewayRuntime`, which owns the upstream
connections (:mod:`notary.gateway.upstreams`: one shared, one per 2025-era client session), a
:class:`~notary.sdk.NotaryClient`, the gateway's SQLite state and the committed policy. Every
method the upstream offers is forwarded as the client sent it (params, ``_meta``, progress:
:mod:`notary.gateway.forwarding`), and its answer or JSON-RPC error comes back as the
upstream sent it, except where the policy decides (:mod:`notary.gateway.handlers`): list
results are filtered to what it could allow; ``resources/read``,
``resources/subscribe``/``unsubscribe`` (and each URI of a ``subscriptions/listen``) and
``prompts/get`` are decided and their decisions notarized before forwarding
(:mod:`notary.gateway.authorization`; a denial is one generic error);
``completion/complete`` follows the prompt or resource it completes; ``tools/call`` goes
through :func:`notary.gateway.toolcalls.call_tool`, whose module says the order of its steps.

This module builds the server and starts a session's runtime.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, get_args

import anyio
import mcp_types as types
import structlog
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import NotificationOptions, Server
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ledger.process import tracing
from ledger.process.structured_logs import configure
from notary.core import aer1
from notary.core.discovery import RECEIPT_EXTENSION, receipt_extension, with_extension
from notary.core.errors import NotaryBaseError
from notary.core.meta import AER1_META_KEY
from notary.gateway.handlers import HANDLERS
from notary.gateway.policy import PolicyError, load_policy_text
from notary.gateway.runtime import GatewayConfig, GatewayRuntime, UpstreamTarget
from notary.gateway.store import GatewayStore
from notary.gateway.upstreams import Upstreams
from notary.sdk import NotaryClient, NotaryError

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream  # the SDK's own hints

__all__ = [
    "DEFAULT_NAME",
    "GatewayConfig",
    "GatewayRuntime",
    "GatewayServer",
    "GatewayStartError",
    "UpstreamTarget",
    "build_gateway",
]

DEFAULT_NAME: Final = "notary-gateway"


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
    for method, params_type, handler in HANDLERS:
        server.add_request_handler(method, params_type, handler)
    server.middleware.append(aer1_result_middleware)
    return server
