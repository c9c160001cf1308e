"""Notarize MCP tool results (server side) and check them (client side), for the mcp 2.x SDK.

Server side. :class:`Notarizer` turns a final ``tools/call`` result into a notarized one: it
builds the rs-tool-call/1 call record (arguments exactly as received, the result's
``content``/``structuredContent``/``isError``, a fresh salt), sends only its SHA-256 to the
notary, and returns the result with ``_meta["com.rightshold/tool-call"]`` added. Three ways to
use it, all built on the same code:

* ``notarize_server(server, notarizer)`` for an ``MCPServer`` *or* a low-level ``Server``:
  installs :meth:`Notarizer.middleware` in ``server.middleware``. This is the recommended
  integration. The SDK's middleware sees every ``tools/call`` with its raw params (before any
  validation or argument coercion) and, on the way out, the result *already shaped for the
  wire* of the connection's protocol version (sieved to the version's schema; on 2026-07-28
  stamped with ``resultType`` and the ``serverInfo`` ``_meta``). What is hashed is therefore
  exactly what the client receives, typed tools' ``structuredContent`` included, and tool
  errors that ``MCPServer`` turns into ``isError`` results are covered as well.
* ``server.middleware.append(notarizer.middleware)``: the same, by hand.
* ``await notarizer.notarize_result(tool, arguments, result)`` on a ``CallToolResult`` (for a
  gateway, or code that builds results itself).

Only final results are notarized (``resultType`` absent or ``complete``); an
``input_required`` result asks the client for more, so it passes through untouched.

A client without an API key is refused when the :class:`Notarizer` is built (ValueError), so
a misconfigured server fails at start-up, not on its first call.

When notarization fails (notary unreachable, key refused or revoked, quota exhausted, any other
4xx or 5xx, a record that cannot be hashed faithfully, even a bug in the notarizer) the tool
has *already run*. ``on_unavailable="fail"`` (default)
withholds the result and answers the ``tools/call`` with a JSON-RPC error (INTERNAL_ERROR,
``data["com.rightshold/tool-call"] = {spec, notarized: false, reason, tool_executed: true}``)
rather than an ``isError`` result: an ``isError`` result is a tool outcome, and under this SDK
every tool outcome a client receives carries a receipt, so a client that requires receipts
never has to tell "the tool failed" from "the notary failed". ``tool_executed`` tells a
careful client not to retry a non-idempotent call blindly. ``on_unavailable="mark"`` returns
the result with ``_meta["com.rightshold/tool-call"] = {spec, notarized: false, reason}``,
for servers where availability matters more than receipts; never silently.

Client side. :func:`record_for` rebuilds the call record from what the client sent and
received, and :func:`verify_tool_result` checks it offline with
:func:`notary.core.verification.verify_receipt` (record, signature, inclusion).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar, overload

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ledger.core.cosignature import parse_log_key
from ledger.core.note import NoteError, NoteVerifier
from ledger.process import tracing
from notary.core.canonical import CanonicalizationError
from notary.core.discovery import RECEIPT_EXTENSION, declare, receipt_extension
from notary.core.errors import NotaryBaseError
from notary.core.jwks import Jwks
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.paths import VERIFY_PATH, receipt_path
from notary.core.receipts import Receipt
from notary.core.records import SPEC, CallRecord, RecordError, is_final, new_salt
from notary.core.toolcall import rebuild_record
from notary.core.verification import Verdict, verify_receipt
from notary.sdk.client import MISSING_API_KEY, NotaryClient, NotaryError

__all__ = [
    "TOOL_CALL_META_KEY",
    "NotarizationFailedError",
    "Notarized",
    "Notarizer",
    "OnUnavailable",
    "notarization_of",
    "notarize_server",
    "received_wire",
    "record_for",
    "result_to_wire",
    "structured_for",
    "verify_tool_result",
]

_log = logging.getLogger("notary.sdk")


OnUnavailable = Literal["fail", "mark"]

_HASHED_KEYS = ("content", "structuredContent", "isError")


class Notarized(NamedTuple):
    """A result with its notarization block (:meth:`Notarizer.notarized`), and the record
    that was hashed and the notary's receipt for it (both None when it was not notarized)."""

    wire: dict[str, object]
    record: CallRecord | None
    receipt: Receipt | None


class NotarizationFailedError(MCPError, NotaryBaseError):
    """A final tool result could not be notarized under ``on_unavailable="fail"``.

    An :class:`mcp.shared.exceptions.MCPError`, so raised from a handler or middleware it
    reaches the client as a JSON-RPC error (code INTERNAL_ERROR) whose ``data`` carries
    ``{"com.rightshold/tool-call": {spec, notarized: false, reason, tool_executed: true}}``.
    ``tool_executed`` is always true: the tool ran, only its receipt is missing.
    """

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            # JSON quoting, as the JS package's message: one shape for clients of both.
            f"tool {_quoted(tool)} ran but its result could not be notarized ({reason}); the "
            "result is withheld. Its side effects, if any, have happened: do not blindly retry a "
            "non-idempotent call.",
            {TOOL_CALL_META_KEY: {"spec": SPEC, "notarized": False, "reason": reason,
                        "tool_executed": True}},
        )
        self.tool = tool
        self.reason = reason


def result_to_wire(result: BaseModel | Mapping[str, object]) -> dict[str, object]:
    """A tool result as the server sends it (camelCase, no nulls): what the record hashes.

    Accepts the SDK model or an already-dumped mapping (copied). For a model this is the
    dump the SDK's server runner applies to handler results (``exclude_none``), so a
    ``structured_content=None`` set on a model is never sent and never hashed. A client
    rebuilding the record from what it *received* uses :func:`received_wire`, which keeps a
    ``structuredContent: null`` the server did send.
    """
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dict(result)


def received_wire(result: BaseModel | Mapping[str, object]) -> dict[str, object]:
    """A received tool result as wire JSON, with ``structuredContent`` exactly as it came.

    The SDK's model cannot hold "absent" and ``null`` apart in its value (both are None),
    but it remembers which members the wire carried (``model_fields_set``): a server that
    sent ``"structuredContent": null`` (MCP 2026-07-28 allows any JSON value, ``null``
    included) hashed ``null``, so the record rebuilt here keeps it.
    """
    wire = result_to_wire(result)
    if (isinstance(result, CallToolResult) and result.structured_content is None
            and "structured_content" in result.model_fields_set):
        wire["structuredContent"] = None
    return wire


def structured_for(protocol_version: str | None, value: object) -> object:
    """``value`` as ``structuredContent`` for a client of ``protocol_version``.

    MCP 2026-07-28 allows any JSON value; 2025-era clients (and the SDK's own sieve for
    them) accept only an object, so a non-object root is wrapped as ``{"result": value}``,
    the shape the TypeScript SDK sends and ``MCPServer``'s typed tools use. Each client gets
    (and the record hashes) the shape it can read: for a low-level server's ``on_call_tool``,
    ``structured_for(ctx.protocol_version, value)``.
    """
    if protocol_version in MODERN_PROTOCOL_VERSIONS or isinstance(value, dict):
        return value
    return {"result": value}


def _normalized(wire: Mapping[str, object]) -> dict[str, object]:
    """The wire result with its hashed members in the form every client rebuilds.

    A client using the SDK never sees the wire JSON, only a parsed ``CallToolResult``, and
    the model cannot tell an absent ``isError`` from ``false`` (it defaults to False). So
    ``content`` and ``isError`` are passed through the model once here and *sent in that
    form*: ``isError`` is then always explicit, and a client reading raw JSON and one
    reading the model rebuild the same record. ``structuredContent`` is any JSON value and
    is kept exactly as it is (``null`` included; see :func:`received_wire`). For results
    the SDK produced this changes nothing else (checked in the tests). If the model
    refuses the result, it is left as it is.
    """
    out = dict(wire)
    try:
        model = CallToolResult.model_validate({k: wire[k] for k in _HASHED_KEYS if k in wire})
    except ValidationError:
        return out
    dumped = model.model_dump(by_alias=True, exclude_none=True, mode="json",
                              include={"content", "is_error"})
    for key in ("content", "isError"):
        if key in dumped:
            out[key] = dumped[key]
        else:
            out.pop(key, None)
    return out


def _quoted(text: str) -> str:
    """``text`` as a JSON string, the way JavaScript's ``JSON.stringify`` quotes it."""
    return json.dumps(text, ensure_ascii=False)


_EXPECTED_FAILURES = (NotaryError, RecordError, CanonicalizationError)


def _describe(exc: Exception) -> str:
    """The ``reason`` a client is told; an unexpected error is named, its text kept in the log."""
    if isinstance(exc, NotaryError):
        return str(exc)
    if isinstance(exc, RecordError | CanonicalizationError):
        return f"the call record cannot be hashed: {exc}"
    return f"unexpected {type(exc).__name__} in the notarizer (see the server log)"


class Notarizer:
    """Notarizes final tool results of one MCP server through one notary.

    ``server_name`` is the name the receipts carry (and the record hashes); verifiers see it
    in every receipt, so pick a stable, meaningful one. ``embed_receipt`` puts the full
    receipt with its ``proof`` inside the ``_meta`` block, so the result verifies offline
    with no further request; turn it off to keep results small (clients then fetch
    ``receipt_url``). ``on_unavailable`` is the policy when notarization fails (see the
    module docstring). ``public_url`` is the notary's address as verifiers should see it in
    ``receipt_url``/``verify_url``, when it differs from the one the server uses
    (defaults to ``client.base_url``).
    """

    def __init__(
        self,
        client: NotaryClient,
        server_name: str,
        *,
        embed_receipt: bool = True,
        on_unavailable: OnUnavailable = "fail",
        public_url: str | None = None,
    ) -> None:
        if on_unavailable not in ("fail", "mark"):
            raise ValueError(f"on_unavailable must be 'fail' or 'mark', not {on_unavailable!r}")
        if not isinstance(server_name, str) or not server_name:
            raise ValueError("server_name must be a non-empty string")
        if not client.has_api_key:
            raise ValueError(MISSING_API_KEY)
        self.client = client
        self.server_name = server_name
        self.embed_receipt = embed_receipt
        self.on_unavailable: OnUnavailable = on_unavailable
        self.public_url = (public_url or client.base_url).rstrip("/")
        self.extension: dict[str, object] | None = None
        """The receipt extension's settings, once :func:`notarize_server` declared it."""

    def __repr__(self) -> str:
        return (f"Notarizer({self.server_name!r}, {self.client!r}, "
                f"embed_receipt={self.embed_receipt}, on_unavailable={self.on_unavailable!r})")

    # The core, on wire JSON ------------------------------------------------------------------

    async def notarize_wire(self, tool: str, arguments: Mapping[str, object] | None,
                            result: Mapping[str, object]) -> dict[str, object]:
        """Notarize a result given as wire JSON; a new dict (the input is not modified).

        Non-final results come back as an unchanged copy. ``arguments`` must be the call's
        arguments exactly as received (None means the call had none and is recorded as
        ``{}``). Raises :class:`NotarizationFailedError` under ``on_unavailable="fail"``.
        """
        return (await self.notarized(tool, arguments, result)).wire

    async def notarized(self, tool: str, arguments: Mapping[str, object] | None,
                        result: Mapping[str, object]) -> Notarized:
        """:meth:`notarize_wire`, with the record it hashed and the notary's receipt: for a
        caller that describes the same record again (the gateway's AER-1 receipt), which
        then neither rebuilds nor re-canonicalizes it."""
        if not is_final(result):
            return Notarized(dict(result), None, None)
        wire = _normalized(result)
        args = {} if arguments is None else arguments
        try:
            record = CallRecord(
                server=self.server_name, tool=tool,
                arguments=dict(args) if isinstance(args, Mapping) else args,
                result=wire, salt=new_salt(),
            )
            digest = record.call_sha256()
            receipt = await self.client.notarize(self.server_name, tool, digest)
        except Exception as exc:
            # Whatever went wrong, the tool has run, so the client is told so in the documented
            # shape rather than with a bare "Internal server error"; only an error nobody
            # expected (a bug, a closed shared session) puts a traceback in the log.
            expected = isinstance(exc, _EXPECTED_FAILURES)
            return Notarized(self._failed(tool, wire, _describe(exc), None if expected else exc),
                             None, None)
        block: dict[str, object] = {
            "spec": SPEC,
            "id": receipt.id,
            "call_sha256": digest,
            "salt": record.salt,
            "receipt_url": self.public_url + receipt_path(receipt.id),
            "verify_url": self.public_url + VERIFY_PATH,
        }
        if self.embed_receipt:
            block["receipt"] = receipt.to_json()
        return Notarized(self._with_block(tool, wire, block), record, receipt)

    def _with_block(self, tool: str, wire: dict[str, object], block: dict[str, object]
                    ) -> dict[str, object]:
        """``wire`` with the block added to ``_meta``, every other ``_meta`` key kept."""
        existing = wire.get("_meta")
        meta: dict[str, object] = dict(existing) if isinstance(existing, Mapping) else {}
        if existing is not None and not isinstance(existing, Mapping):
            _log.warning("tool %r returned a non-object _meta; it is replaced", tool)
        if TOOL_CALL_META_KEY in meta:
            # Not hashed, so nothing is lost from the commitment; but say so.
            _log.warning("tool %r result already had %s in _meta; it is replaced", tool,
                         TOOL_CALL_META_KEY)
        meta[TOOL_CALL_META_KEY] = block
        return {**wire, "_meta": meta}

    def _failed(self, tool: str, wire: dict[str, object], reason: str,
                unexpected: Exception | None = None) -> dict[str, object]:
        """Apply the policy; one log line (with the traceback only for an unexpected error)."""
        _log.log(logging.WARNING if unexpected is None else logging.ERROR,
                 "could not notarize a result of tool %s (%s); policy %s", _quoted(tool),
                 reason, _quoted(self.on_unavailable), exc_info=unexpected)
        if self.on_unavailable == "fail":
            raise NotarizationFailedError(tool, reason)
        return self._with_block(tool, wire, {"spec": SPEC, "notarized": False, "reason": reason})

    # On SDK models -------------------------------------------------------------------------

    @overload
    async def notarize_result(self, tool: str, arguments: Mapping[str, object] | None,
                              result: CallToolResult) -> CallToolResult: ...

    @overload
    async def notarize_result(self, tool: str, arguments: Mapping[str, object] | None,
                              result: InputRequiredResult) -> InputRequiredResult: ...

    async def notarize_result(self, tool: str, arguments: Mapping[str, object] | None,
                              result: CallToolResult | InputRequiredResult
                              ) -> CallToolResult | InputRequiredResult:
        """A copy of ``result`` carrying its notarization in ``_meta`` (see the module doc).

        ``InputRequiredResult`` (and any result whose ``result_type`` is not ``complete``) is
        returned as is, unnotarized. ``is_error`` results are notarized like any final
        result. Use this where you build results yourself; a handler returning the notarized
        result keeps it, as the SDK's later wire shaping keeps extra ``_meta`` keys.
        """
        if isinstance(result, InputRequiredResult) or result.result_type not in (None, "complete"):
            return result
        out = await self.notarize_wire(tool, arguments, result_to_wire(result))
        return CallToolResult.model_validate(out)

    # As SDK middleware ---------------------------------------------------------------------

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                         ) -> HandlerResult:
        """A ``Server.middleware`` entry: notarize every final ``tools/call`` result.

        Reads the tool name and arguments from the raw request params (a deep copy taken
        before the handler runs, so nothing downstream can change what is recorded), and
        the result as ``call_next`` returns it, which for ``tools/call`` is the wire dict
        the SDK is about to send. Errors raised by the handler (JSON-RPC errors) pass
        through: there is no result to notarize.
        """
        if ctx.method == "initialize" and self.extension is not None:
            # 2025-era clients read extensions under experimental (2026-07-28 clients get
            # ``server.extensions`` in server/discover).
            result = await call_next(ctx)
            if isinstance(result, Mapping) and isinstance(result.get("capabilities"), Mapping):
                result = {**result, "capabilities": declare(result["capabilities"],
                                                            self.extension, modern=False)}
            return result
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        tool = params.get("name")
        arguments = copy.deepcopy(params.get("arguments"))
        result = await call_next(ctx)
        if not isinstance(tool, str) or result is None:
            return result
        if isinstance(result, BaseModel):
            wire = result_to_wire(result)
        elif isinstance(result, Mapping):
            wire = dict(result)
        else:  # pragma: no cover - the runner only produces dicts and models
            return result
        return await self.notarize_wire(tool, arguments, wire)


_ServerT = TypeVar("_ServerT", MCPServer[Any], Server[Any])


def notarize_server(server: _ServerT, notarizer: Notarizer, *,
                    log_keys: Sequence[str] = ()) -> _ServerT:
    """Notarize every final ``tools/call`` result of ``server``; returns ``server``.

    Works for ``MCPServer`` and the low-level ``Server`` alike, by appending
    :meth:`Notarizer.middleware` to ``server.middleware`` (the SDK's built-ins, OpenTelemetry
    and MCPServer's request-state boundary, stay outside it; they do not change final
    results). Middleware appended *after* this call runs inside the notarizer, so it may
    rewrite results before they are hashed; middleware registered *before* it (e.g. through
    ``MCPServer(middleware=[...])``) must not rewrite ``tools/call`` results, or receipts
    will not match what clients receive. Installing a second notarizer is refused: a result
    carries one notarization block.

    The server also declares the receipt extension ``com.rightshold/tool-call``
    (:mod:`notary.core.discovery`) with the notary's public URL, its JWKS URL and
    ``log_keys`` (the log's note verifier keys, when the caller gives them), so a client
    learns that results carry receipts and where to check them: ``extensions`` for
    2026-07-28 clients, ``experimental`` for 2025-era ones. With the ``OTEL_*`` variables
    asking for traces (docs/tracing.md), the process exports them (:mod:`ledger.process.tracing`).
    """
    # Spans exported as the OTEL_* variables say (none set: nothing); the SDK's OpenTelemetry
    # middleware continues the caller's trace from _meta, and the notary's request joins it.
    tracing.setup(notarizer.server_name)
    chain = server.middleware
    for mw in chain:
        if isinstance(getattr(mw, "__self__", None), Notarizer):
            raise ValueError("this server already has a Notarizer installed")
    notarizer.extension = receipt_extension(notarizer.public_url, log_keys)
    low = server._lowlevel_server if isinstance(server, MCPServer) else server
    low.extensions[RECEIPT_EXTENSION] = notarizer.extension
    chain.append(notarizer.middleware)
    return server


# Client side ---------------------------------------------------------------------------------


def notarization_of(result: CallToolResult | Mapping[str, object]) -> dict[str, object] | None:
    """The ``_meta["com.rightshold/tool-call"]`` block of a received result, or None."""
    meta = result.meta if isinstance(result, BaseModel) else result.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    block = meta.get(TOOL_CALL_META_KEY)
    return dict(block) if isinstance(block, Mapping) else None


def record_for(tool: str, arguments: Mapping[str, object] | None,
               result: CallToolResult | Mapping[str, object], *,
               server: str | None = None) -> dict[str, object]:
    """Rebuild the call record from what the client sent and received.

    ``arguments`` are the arguments the client passed to ``call_tool`` (None → ``{}``);
    ``result`` the ``CallToolResult`` it got back (or its wire JSON). The salt comes from
    the result's notarization block. ``server`` is omitted unless given: the verifier then
    takes it from the receipt; pass the server name you expect to pin it. Raises
    ``ValueError`` if the result carries no usable notarization block. The verifier and the
    gateway rebuild records with the same function (:func:`notary.core.toolcall.rebuild_record`).
    """
    return rebuild_record(tool, arguments, received_wire(result), server=server)


def verify_tool_result(
    tool: str,
    arguments: Mapping[str, object] | None,
    result: CallToolResult | Mapping[str, object],
    *,
    jwks: Jwks | Mapping[str, object] | None,
    log_verifier: NoteVerifier | str | None,
    receipt: Receipt | Mapping[str, object] | None = None,
    server: str | None = None,
) -> Verdict:
    """Verify a received tool result offline: record, receipt signature, inclusion.

    ``tool`` and ``arguments`` are what the client sent (``None`` → ``{}``), ``result`` what
    it received (the ``CallToolResult`` or its wire JSON). ``jwks`` (the receipt keys: a JWKS
    document as served at ``/.well-known/jwks.json``, or a :class:`Jwks`) and
    ``log_verifier`` (the log's key: a vkey ``<origin>+<id>+<key>``, Ed25519 or ML-DSA-44, or a
    parsed verifier) are the trust anchors: fetch them once from the notary (or, better, pin
    them) rather than per result; ``None`` skips the level that needs it. ``receipt`` defaults
    to the one embedded in the result (pass the one fetched from ``receipt_url`` for results
    notarized with ``embed_receipt=False``); ``server`` pins the server name the receipt must
    carry. Raises ``ValueError`` if the result carries no notarization or no receipt, or a
    trust anchor is malformed; every check itself is reported in the :class:`Verdict`
    (``valid``, and ``levels[name].status`` and ``.reason`` per level).
    """
    record = record_for(tool, arguments, result, server=server)
    if receipt is None:
        block = notarization_of(result) or {}
        embedded = block.get("receipt")
        if not isinstance(embedded, Mapping):
            raise ValueError("the result embeds no receipt; fetch it from receipt_url")
        receipt = embedded
    if jwks is not None and not isinstance(jwks, Jwks):
        jwks = Jwks(jwks)
    if isinstance(log_verifier, str):
        vkey = log_verifier
        try:
            log_verifier = parse_log_key(vkey)
        except NoteError as e:
            raise ValueError(f"bad log key {vkey[:60]!r}: {e}") from e
    return verify_receipt(receipt, record=record, jwks=jwks, log_verifier=log_verifier)
