"""The agent side of AER-1: notarize what an agent receives, as ``LOGGED BY AGENT``.

A gateway observes calls on the server side; an agent that talks to servers directly (or
wants its own record next to the gateway's) wraps its :class:`mcp.Client` in an
:class:`AgentRecorder`. Every final result it receives is hashed as an rs-tool-call/1 call
record (with a fresh salt), the digest notarized, and an AER-1 receipt with provenance
``LOGGED BY AGENT`` attached under ``_meta["io.zkmcp/aer-1-agent-receipt"]`` (the SDK's
result model has no room for a top-level ``_receipt``, and a gateway's own receipt may already
sit at ``_meta["io.zkmcp/aer-1-receipt"]``; :func:`aer1_of` reads the agent's back, and
:func:`to_wire` gives the wire form with it at ``_receipt`` for tools that want it there).

Existing ``_meta`` of the result is kept untouched, the server's own notarization block
(``com.rightshold/tool-call``, e.g. from a gateway) included: the agent's record is a second,
independent witness of the same result, not a replacement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict, Unpack

import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT

from notary.core import aer1
from notary.core.canonical import CanonicalizationError
from notary.core.meta import AER1_AGENT_META_KEY
from notary.core.receipts import Receipt
from notary.core.records import CallRecord, RecordError, hashed_result, new_salt
from notary.sdk import NotaryClient, NotaryError
from notary.sdk.mcp import result_to_wire

__all__ = ["AgentRecorder", "CallOptions", "aer1_of", "to_wire"]


class CallOptions(TypedDict, total=False):
    """The options of ``mcp.Client.call_tool`` besides the tool and its arguments."""

    read_timeout_seconds: float | None
    progress_callback: ProgressFnT | None
    input_responses: types.InputResponses | None
    request_state: str | None
    meta: types.RequestParamsMeta | None


def aer1_of(result: types.CallToolResult | Mapping[str, object]) -> dict[str, object] | None:
    """The agent's AER-1 receipt attached to a result by :class:`AgentRecorder`, or None."""
    wire = result_to_wire(result) if isinstance(result, types.CallToolResult) else dict(result)
    meta = wire.get("_meta")
    receipt = meta.get(AER1_AGENT_META_KEY) if isinstance(meta, Mapping) else None
    return dict(receipt) if aer1.is_aer1_receipt(receipt) else None


def to_wire(result: types.CallToolResult) -> dict[str, object]:
    """The result as wire JSON with the agent's AER-1 receipt at the top-level ``_receipt``."""
    wire = result_to_wire(result)
    receipt = aer1_of(wire)
    if receipt is not None:
        wire[aer1.RESULT_KEY] = receipt
    return wire


class AgentRecorder:
    """Wrap a connected :class:`mcp.Client`; :meth:`call_tool` notarizes what comes back.

    ``server_name`` is the ``server`` of the call records (default: the name the server
    gave in its serverInfo). ``on_unavailable``: ``"mark"`` (default) still returns the
    result, with an AER-1 receipt whose ``anchor`` is null; ``"fail"`` raises the
    :class:`~notary.sdk.NotaryError`. The tool has run either way: the receipt records what
    was received, it does not gate it.
    """

    def __init__(self, client: Client, notary: NotaryClient, *, server_name: str | None = None,
                 on_unavailable: Literal["mark", "fail"] = "mark") -> None:
        self.client = client
        self.notary = notary
        self._server_name = server_name
        self.on_unavailable = on_unavailable

    @property
    def server_name(self) -> str:
        if self._server_name:
            return self._server_name
        info = self.client.server_info
        return info.name if info is not None and info.name else "unknown-server"

    async def call_tool(self, name: str, arguments: dict[str, object] | None = None,
                        **kwargs: Unpack[CallOptions]) -> types.CallToolResult:
        """``client.call_tool`` plus the AER-1 receipt of the result (see the class doc)."""
        result = await self.client.call_tool(name, arguments, **kwargs)
        receipt = await self.record(name, arguments, result)
        meta = dict(result.meta or {})
        meta[AER1_AGENT_META_KEY] = receipt
        return result.model_copy(update={"meta": meta})

    async def record(self, name: str, arguments: Mapping[str, object] | None,
                     result: types.CallToolResult) -> aer1.Aer1Receipt:
        """Notarize one received result; its AER-1 receipt (``LOGGED BY AGENT``)."""
        wire = hashed_result(result_to_wire(result))
        args = dict(arguments) if arguments is not None else {}
        server = self.server_name
        try:
            record = CallRecord(server=server, tool=name, arguments=args, result=wire,
                                salt=new_salt())
        except (RecordError, CanonicalizationError):
            # Arguments JavaScript cannot represent: the receipt covers the result alone.
            record = CallRecord(server=server, tool=name, arguments={}, result=wire,
                                salt=new_salt())
        notary_receipt: Receipt | None
        try:
            notary_receipt = await self.notary.notarize(server, name, record.call_sha256())
        except NotaryError:
            if self.on_unavailable == "fail":
                raise
            notary_receipt = None
        info = self.client.server_info
        return aer1.build_aer1(
            record=record, provenance=aer1.PROVENANCE_AGENT, verification_status="not_verified",
            status="error" if result.is_error else "success",
            tool_context={"name": name,
                          "version": (info.version if info is not None and info.version
                                      else "unknown"),
                          "scope": f"mcp:{server}"},
            notary_receipt=notary_receipt)
