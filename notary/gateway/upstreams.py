"""The gateway's upstream connections, and where an upstream's messages to the client go.

A 2025-11-25 client holds a session with the gateway: the gateway opens **one upstream
session per client session** (:meth:`Upstreams.for_request`), declaring the capabilities
that client declared, and closes it with the client's (the connection's exit stack). What the
upstream sends back on it reaches that client and no other:

- ``sampling/createMessage``, ``elicitation/create`` and ``roots/list`` are relayed to the
  client within the call in progress (the newest ``tools/call``, ``prompts/get``... of that
  connection), and the client's answer (or error) goes back upstream;
- ``notifications/message`` go to the call in progress, else to the connection;
- list changes and ``notifications/resources/updated`` go to the connection.

Progress is relayed on any link by the request's own progress token (the SDK gives each
forwarded request a token of its own), so it always reaches the client that asked.

A 2026-07-28 client is stateless (every request carries its own capabilities): its
requests share the gateway's one upstream connection, and the client's capabilities are
stamped on each forwarded request in place of the gateway's (:func:`forwarding_capabilities`).
An upstream that needs input from such a client answers ``input_required``, which passes
through. A server-to-client request arriving on the shared connection cannot be told apart
by call, so it is never relayed (that could hand one client's sampling request to another):
it is refused, and every call in progress on the connection is marked **degraded**, so its
result is not passed off (or notarized) as a success. A log message on the shared connection
names no request (the SDK exposes no related request id for it), so it cannot be attributed
to the client whose call caused it: it is dropped (counted, never logged), never delivered to
whichever client's call happens to be in progress.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final, TypedDict, TypeVar

import anyio
import mcp_types as types
import structlog
from anyio.abc import TaskGroup
from mcp import Client
from mcp.client.session import (
    ClientRequestContext,
    ElicitationFnT,
    IncomingMessage,
    ListRootsFnT,
    LoggingFnT,
    MessageHandlerFnT,
    SamplingFnT,
)
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter

__all__ = ["RAW", "Call", "ClientCallbacks", "Link", "Upstreams", "forwarding_capabilities",
           "raw_request"]

RAW: Final = TypeAdapter(dict[str, object])
"""Upstream results are kept as the wire JSON the upstream sent (nothing dropped or added)."""

_LINK_KEY: Final = "notary.gateway/upstream"
_LOCK_KEY: Final = "notary.gateway/upstream-lock"
_NO_RELAY: Final = -32603
_log = structlog.get_logger("notary.gateway")

_ResultT = TypeVar("_ResultT", bound=BaseModel)

_client_capabilities: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "notary_gateway_client_capabilities", default=None)


_RawRequest: Final = types.Request[dict[str, object] | None, str]
"""Parametrized once: subscripting a generic model is a cache lookup per call."""


def raw_request(method: str, params: Mapping[str, object] | None
                ) -> types.Request[dict[str, object] | None, str]:
    """A request for ``ClientSession.send_request`` with ``params`` exactly as given."""
    return _RawRequest(method=method, params=dict(params) if params is not None else None)


@asynccontextmanager
async def forwarding_capabilities(capabilities: types.ClientCapabilities | None
                                  ) -> AsyncIterator[None]:
    """Within this block, requests sent on a 2026-07-28 upstream carry ``capabilities``.

    The SDK stamps its own client's capabilities on every modern request; a gateway
    forwarding a stateless client's request must declare what *that* client declared (an
    upstream decides from them whether to ask for sampling or elicitation).
    """
    value = (capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
             if capabilities is not None else {})
    token = _client_capabilities.set(value)
    try:
        yield
    finally:
        _client_capabilities.reset(token)


def _restamp(client: Client) -> None:
    """Wrap the client's request stamp so :func:`forwarding_capabilities` takes effect."""
    session = client.session
    original: Callable[[dict[str, object], CallOptions], None] = session._stamp  # no hook

    def stamp(data: dict[str, object], opts: CallOptions) -> None:
        original(data, opts)
        caps = _client_capabilities.get()
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if caps is not None and isinstance(meta, dict) \
                and types.CLIENT_CAPABILITIES_META_KEY in meta:
            meta[types.CLIENT_CAPABILITIES_META_KEY] = caps

    session._stamp = stamp
    session._stamp_wrapped = True  # type: ignore[attr-defined]


@dataclass(eq=False)
class Call:
    """One client request in progress upstream: where relayed messages for it go."""

    session: ServerSession
    request_id: types.RequestId | None
    degraded: bool = False


@dataclass(eq=False)
class Link:
    """An upstream connection and the client requests it currently serves.

    ``relay`` False (the shared connection): server-to-client requests are refused and mark
    every call in progress degraded, notifications without a call are dropped.
    """

    relay: bool
    calls: list[Call] = field(default_factory=list)
    dropped: int = 0
    """Log messages dropped because no client's request could be named for them."""
    client: Client | None = None
    last_session: ServerSession | None = None
    closed: anyio.Event = field(default_factory=anyio.Event)

    @asynccontextmanager
    async def call(self, session: ServerSession, request_id: types.RequestId | None
                   ) -> AsyncIterator[Call]:
        call = Call(session, request_id)
        self.calls.append(call)
        self.last_session = session
        try:
            yield call
        finally:
            self.calls.remove(call)

    def _current(self) -> Call | None:
        return self.calls[-1] if self.calls else None

    def _refuse(self, what: str) -> types.ErrorData:
        for call in self.calls:
            call.degraded = True
        _log.warning("upstream_request_not_relayed", request=what, calls=len(self.calls))
        return types.ErrorData(code=_NO_RELAY, message=f"{what} cannot be relayed to the client "
                               "by the gateway")

    async def _relay(self, request: types.ServerRequest, result_type: type[_ResultT], what: str
                     ) -> _ResultT | types.ErrorData:
        call = self._current()
        if not self.relay or call is None:
            return self._refuse(what)
        try:
            return await call.session.send_request(
                request, result_type,
                metadata=ServerMessageMetadata(related_request_id=call.request_id))
        except MCPError as e:
            return e.error
        except Exception as e:  # no back channel, a closed stream, a malformed answer
            call.degraded = True
            _log.warning("relay_failed", request=what, error=f"{type(e).__name__}: {e}")
            return types.ErrorData(code=_NO_RELAY, message=f"{what} failed at the client")

    async def sampling(self, context: ClientRequestContext,
                       params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult | types.ErrorData:
        return await self._relay(types.CreateMessageRequest(params=params),
                                 types.CreateMessageResult, "sampling/createMessage")

    async def elicitation(self, context: ClientRequestContext,
                          params: types.ElicitRequestParams
                          ) -> types.ElicitResult | types.ErrorData:
        return await self._relay(types.ElicitRequest(params=params), types.ElicitResult,
                                 "elicitation/create")

    async def roots(self, context: ClientRequestContext
                    ) -> types.ListRootsResult | types.ErrorData:
        return await self._relay(types.ListRootsRequest(), types.ListRootsResult, "roots/list")

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if not self.relay:
            # Several clients' calls share this link and the message names none of them.
            self.dropped += 1
            _log.debug("log_message_not_attributed", dropped=self.dropped)
            return
        call = self._current()
        session = call.session if call is not None else self.last_session
        if session is None:
            return
        try:
            await session.send_log_message(params.level, params.data, params.logger,
                                           related_request_id=call.request_id if call else None)
        except Exception as e:  # the client went away: nothing to deliver to
            _log.debug("log_not_relayed", error=f"{type(e).__name__}: {e}")

    async def message(self, message: IncomingMessage) -> None:
        """Upstream notifications that concern the connection (list changes, updates)."""
        session = self.last_session
        if not self.relay or session is None or isinstance(message, Exception):
            return
        try:
            if isinstance(message, types.ToolListChangedNotification):
                await session.send_tool_list_changed()
            elif isinstance(message, types.PromptListChangedNotification):
                await session.send_prompt_list_changed()
            elif isinstance(message, types.ResourceListChangedNotification):
                await session.send_resource_list_changed()
            elif isinstance(message, types.ResourceUpdatedNotification):
                await session.send_resource_updated(message.params.uri)
        except Exception as e:
            _log.debug("notification_not_relayed", error=f"{type(e).__name__}: {e}")


class ClientCallbacks(TypedDict, total=False):
    """The callbacks a :class:`Link` gives its upstream ``Client`` (keyword arguments)."""

    logging_callback: LoggingFnT
    message_handler: MessageHandlerFnT
    sampling_callback: SamplingFnT
    elicitation_callback: ElicitationFnT
    list_roots_callback: ListRootsFnT


class Upstreams:
    """The shared upstream connection, and one per 2025-era client session."""

    def __init__(self, factory: Callable[..., Client], tasks: TaskGroup) -> None:
        self._factory = factory
        self._tasks = tasks
        self.shared = Link(relay=False)

    @staticmethod
    def client_kwargs(link: Link, capabilities: types.ClientCapabilities | None
                      ) -> ClientCallbacks:
        """Callbacks for ``Client``. A relaying link declares what its client declared; the
        shared link declares sampling and elicitation, so that an upstream asking for them
        is noticed (and the call marked degraded) rather than quietly answering something
        else."""
        kwargs: ClientCallbacks = {"logging_callback": link.log,
                                   "message_handler": link.message}
        caps = capabilities or types.ClientCapabilities()
        if not link.relay or caps.sampling is not None:
            kwargs["sampling_callback"] = link.sampling
        if not link.relay or caps.elicitation is not None:
            kwargs["elicitation_callback"] = link.elicitation
        if link.relay and caps.roots is not None:
            # Not on the shared link: servers ask for roots at start-up, outside any call,
            # and a server told nothing uses its own configuration (roots are advisory).
            kwargs["list_roots_callback"] = link.roots
        return kwargs

    def attach_shared(self, client: Client) -> None:
        self.shared.client = client
        _restamp(client)

    async def for_request(self, session: ServerSession, protocol_version: str) -> Link:
        """The upstream link for a request on ``session``'s connection."""
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            return self.shared
        connection = session._connection  # the SDK exposes per-connection state only here
        link = connection.state.get(_LINK_KEY)
        if isinstance(link, Link):
            return link
        lock = connection.state.setdefault(_LOCK_KEY, anyio.Lock())
        async with lock:
            link = connection.state.get(_LINK_KEY)
            if isinstance(link, Link):
                return link
            link = Link(relay=True, last_session=session)
            kwargs = self.client_kwargs(link, session.client_capabilities)
            await self._tasks.start(self._hold, link, kwargs)
            connection.state[_LINK_KEY] = link

            async def close() -> None:
                link.closed.set()

            connection.exit_stack.push_async_callback(close)
            return link

    async def _hold(self, link: Link, kwargs: ClientCallbacks, *,
                    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                    ) -> None:
        """Open the upstream session, keep it until the client's connection closes."""
        try:
            async with self._factory(mode="legacy", **kwargs) as client:
                link.client = client
                task_status.started()
                await link.closed.wait()
        except Exception as e:
            _log.warning("upstream_session_failed", error=f"{type(e).__name__}: {e}")
            if link.client is None:
                raise
        finally:
            link.client = None
