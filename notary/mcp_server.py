"""``notary mcp``: the verifier as an MCP server (official ``mcp`` SDK, ``MCPServer``).

An agent that receives a notarized tool result can hand it to this server and get the five
per-level verdicts back as structured content, without shelling out to ``notary verify``. Tools:

- ``verify_tool_call``: a saved tool call, a tool result plus tool name and arguments, or a
  receipt plus call record; trust from the tool arguments, else the server's flags, else the
  keys a notary publishes (``notary_url`` or ``--notary``). Verification failures are a normal
  result with ``valid: false``; only unusable input is an error result.
- ``get_receipt``: a receipt with its proof, by id, from the configured notary (``--notary``).
- ``get_checkpoint``: the configured notary's latest checkpoint, parsed, and verified when a
  log key is configured.

Only tools are served and advertised (no empty ``prompts`` or ``resources``); an unknown
tool name is the JSON-RPC error ``-32602``.

Tool arguments may name URLs to fetch but never local files: the caller of a tool is not
necessarily the person who started the server. Stdio is the default transport; ``--http
HOST:PORT`` serves streamable HTTP (``MCPServer.streamable_http_app()`` under uvicorn) at ``/mcp``.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, NotRequired

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, ContentBlock, TextContent
from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ledger.client.http import FetchError, HttpClient
from ledger.client.tiles import MAX_CHECKPOINT_BYTES
from ledger.core.checkpoint import open_checkpoint, parse_checkpoint_text
from ledger.core.cosignature import LogVerifier
from ledger.core.note import NoteError, NoteVerifier, parse_note
from ledger.core.tlog_policy import TlogPolicy
from ledger.process.version import package_version
from notary.core.ids import is_receipt_id
from notary.core.jwks import Jwks
from notary.core.paths import receipt_path
from notary.core.receipts import Receipt, ReceiptFormatError
from notary.core.verification import check_witnesses
from notary.verifier.inputs import (
    ToolCall,
    VerifierInputError,
    call_from_document,
    call_from_receipt_and_record,
    call_from_saved_call,
    call_from_tool_result,
)
from notary.verifier.state import StateFile, VerifierStateError
from notary.verifier.trust import (
    Trust,
    build_trust,
    complete_from_notary,
    load_jwks,
    parse_log_keys,
    parse_witness_keys,
    parse_witness_policy_text,
    trust_from_notary,
    with_policy_logs,
)
from notary.verifier.verify import verify_tool_call

SERVER_NAME = "mcp-notary-verifier"


class LevelOut(TypedDict):
    status: Literal["passed", "failed", "skipped"]
    required: bool
    reason: NotRequired[str]
    evidence: NotRequired[list[dict[str, object]]]


class VerifyOut(TypedDict):
    """Per-level verdicts; ``valid`` only when every required level passed and none failed."""

    valid: bool
    levels: dict[str, LevelOut]
    required: list[str]
    receipt: dict[str, object] | None
    checkpoint: dict[str, object] | None
    notes: list[str]


class LedgerOut(TypedDict):
    origin: str
    index: int
    entry_url: str


class SignatureOut(TypedDict):
    alg: str
    kid: str
    sig: str


class ReceiptOut(TypedDict):
    """An rs-tool-call/1 receipt; ``proof`` is the tlog-proof text to the latest checkpoint."""

    spec: str
    id: str
    server: str
    tool: str
    call_sha256: str
    issued_at: str
    ledger: LedgerOut
    signature: NotRequired[SignatureOut]
    proof: NotRequired[str]


class SignatureLineOut(TypedDict):
    name: str
    key_id: str


class CheckpointOut(TypedDict):
    """The log's latest signed checkpoint and its fields.

    ``verified`` says whether the log's signature (and the witness policy, when one is
    configured) verified, under the configured log key or else the one the notary publishes.
    """

    url: str
    checkpoint: str
    origin: str
    size: int
    root: str
    root_hex: str
    extensions: list[str]
    signatures: list[SignatureLineOut]
    verified: bool
    verification: str


@dataclass(frozen=True)
class ServerConfig:
    """What the server was started with; tool arguments may add to it, never widen file access.

    ``jwks`` is a loaded key set, or a URL fetched per call (keys may rotate while the server
    runs).
    """

    notary_url: str | None = None
    jwks: Jwks | str | None = None
    log_keys: tuple[LogVerifier, ...] = ()
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int | None = None
    witness_policy: TlogPolicy | None = None
    state: StateFile | None = None
    offline: bool = False
    log_url: str | None = None
    timeout: float = 10.0


@contextlib.asynccontextmanager
async def _fetcher(config: ServerConfig, offline: bool) -> AsyncIterator[HttpClient | None]:
    if offline or config.offline:
        yield None
        return
    async with HttpClient(timeout=config.timeout) as fetcher:
        yield fetcher


def _no_files(values: list[str] | None, what: str) -> list[str]:
    out = list(values or [])
    if any(v.startswith("@") for v in out):
        raise VerifierInputError(f"{what}: @FILE is not accepted in tool arguments")
    return out


async def _trust(config: ServerConfig, fetcher: HttpClient | None, *,
                 jwks: dict[str, object] | str | None, log_keys: list[str] | None,
                 witnesses: list[str] | None, quorum: int | None, notary_url: str | None,
                 witness_policy: str | None = None) -> tuple[Trust, list[str]]:
    """Trust anchors: tool arguments first, then the server's flags, then the notary's own keys."""
    notes: list[str] = []
    if isinstance(jwks, str) and not jwks.startswith(("http://", "https://")):
        raise VerifierInputError("jwks must be a JWKS object or an http(s) URL")
    source = jwks if jwks is not None else config.jwks
    trusted_jwks = source if isinstance(source, Jwks) else (
        await load_jwks(source, fetcher) if source is not None else None)
    keys = parse_log_keys(_no_files(log_keys, "log_keys")) or config.log_keys
    policy = (parse_witness_policy_text(witness_policy) if witness_policy is not None
              else None if witnesses else config.witness_policy)
    if policy is not None:
        if witnesses or quorum is not None:
            raise VerifierInputError("witness_policy replaces witnesses and quorum")
        keys = with_policy_logs(keys, policy)
    url = notary_url or config.notary_url
    if (trusted_jwks is None or not keys) and url is not None and fetcher is None:
        notes.append(f"offline: the keys of {url} were not fetched")
    trusted_jwks, keys, fetched = await complete_from_notary(trusted_jwks, keys, url, fetcher)
    if fetched:
        notes.append(f"trust: keys fetched from {url} (trusting that notary for its own keys)")
    if policy is not None:
        return Trust(trusted_jwks, keys, policy=policy), notes
    if witnesses:
        wit = parse_witness_keys(_no_files(witnesses, "witnesses"))
    else:
        wit, quorum = config.witnesses, (quorum if quorum is not None else config.quorum)
    return build_trust(trusted_jwks, keys, wit, quorum), notes


def _call(*, call: dict[str, object] | None, result: dict[str, object] | None, tool: str | None,
          arguments: dict[str, object] | None, receipt: dict[str, object] | None,
          record: dict[str, object] | None) -> ToolCall:
    given = [n for n, v in (("call", call), ("result", result), ("record", record))
             if v is not None]
    if len(given) != 1:
        raise VerifierInputError("give exactly one of: call (a saved tool call), result (a tool "
                                 "result, with tool and arguments), or receipt with record")
    if record is not None:
        if receipt is None:
            raise VerifierInputError("a call record needs its receipt")
        return call_from_receipt_and_record(receipt, record)
    if result is not None:
        if "jsonrpc" in result:
            return call_from_document(result, tool=tool, arguments=arguments, receipt=receipt)
        if tool is None:
            raise VerifierInputError("a tool result needs the tool name (tool)")
        return call_from_tool_result(result, tool=tool, arguments=arguments, receipt=receipt)
    assert call is not None
    if tool is not None or arguments is not None:
        raise VerifierInputError("tool and arguments go with result; a saved call has its own")
    return call_from_saved_call(call, receipt)


def _notary(config: ServerConfig) -> str:
    if config.notary_url is None:
        raise ToolError("no notary is configured: start the server with --notary URL")
    if config.offline:
        raise ToolError("the server runs --offline and fetches nothing")
    return config.notary_url.rstrip("/")


def _text(obj: object) -> list[ContentBlock]:
    return [TextContent(type="text", text=json.dumps(obj, indent=2, ensure_ascii=False))]


def build_server(config: ServerConfig | None = None) -> MCPServer:
    """The verifier MCP server; ``config`` holds the flags of ``notary mcp``."""
    cfg = config or ServerConfig()
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=package_version(),
        instructions="Verify notarized MCP tool calls (rs-tool-call/1): call verify_tool_call "
                     "with a tool result that carries _meta['com.rightshold/tool-call'], the "
                     "tool name and arguments; read levels and valid in the structured result.",
    )
    _add_verify_tool_call(server, cfg)
    _add_get_receipt(server, cfg)
    _add_get_checkpoint(server, cfg)
    _serve_tools_only(server)
    return server


def _add_verify_tool_call(server: MCPServer, cfg: ServerConfig) -> None:
    """The ``verify_tool_call`` tool: a call in any of its three forms, verified at five
    levels under the trust its arguments, else the server's flags, give."""

    @server.tool(name="verify_tool_call", description=(
        "Verify a notarized tool call at five levels: record (the call hashes to call_sha256), "
        "signature (receipt signed by a trusted key), inclusion (entry in a checkpoint signed by "
        "the trusted log key), witnesses (cosignature quorum), consistency (with checkpoints "
        "seen before, online). Give exactly one of call, result (+ tool, arguments) or "
        "receipt + record."))
    async def verify_tool_call_tool(
        call: Annotated[dict[str, object] | None, Field(description=(
            "a saved tool call {tool, arguments, result, server?}; result is the "
            "CallToolResult wire JSON with _meta"))] = None,
        result: Annotated[dict[str, object] | None, Field(description=(
            "a CallToolResult (wire JSON with _meta['com.rightshold/tool-call'])"))] = None,
        tool: Annotated[str | None, Field(description="the tool name, with result")] = None,
        arguments: Annotated[dict[str, object] | None, Field(description=(
            "the call's arguments exactly as sent, with result (default {})"))] = None,
        receipt: Annotated[dict[str, object] | None, Field(description=(
            "a receipt with its proof: with record, or instead of the one in _meta"))] = None,
        record: Annotated[dict[str, object] | None, Field(description=(
            "an rs-tool-call/1 call record {tool, arguments, result, salt, server?}"))] = None,
        jwks: Annotated[dict[str, object] | str | None, Field(description=(
            "trusted receipt keys: a JWKS object or an http(s) URL"))] = None,
        log_keys: Annotated[list[str] | None, Field(description=(
            "trusted log verifier keys <origin>+<hex id>+<base64>"))] = None,
        witnesses: Annotated[list[str] | None, Field(description=(
            "witness cosignature verifier keys"))] = None,
        quorum: Annotated[int | None, Field(ge=0, description=(
            "how many witnesses must have cosigned (default: all given)"))] = None,
        witness_policy: Annotated[str | None, Field(description=(
            "a C2SP tlog-policy (text: log, witness, group, quorum lines) instead of "
            "witnesses and quorum"))] = None,
        notary_url: Annotated[str | None, Field(description=(
            "fetch receipt keys and log key from this notary when not given otherwise"))] = None,
        offline: Annotated[bool, Field(description=(
            "use no network: level 5 then only checks what it can locally"))] = False,
    ) -> Annotated[CallToolResult, VerifyOut]:
        try:
            tool_call = _call(call=call, result=result, tool=tool, arguments=arguments,
                              receipt=receipt, record=record)
            async with _fetcher(cfg, offline) as fetcher:
                trust, notes = await _trust(cfg, fetcher, jwks=jwks, log_keys=log_keys,
                                            witnesses=witnesses, quorum=quorum,
                                            notary_url=notary_url,
                                            witness_policy=witness_policy)
                report = await verify_tool_call(tool_call, trust, fetcher=fetcher,
                                                state=cfg.state, log_url=cfg.log_url)
        except (VerifierInputError, VerifierStateError) as e:
            raise ToolError(str(e)) from e
        report.notes[:0] = notes
        content: list[ContentBlock] = [TextContent(type="text", text=report.render())]
        return CallToolResult(content=content, structured_content=report.to_json())


def _add_get_receipt(server: MCPServer, cfg: ServerConfig) -> None:
    """The ``get_receipt`` tool: a receipt with its proof, by id, from the configured notary."""

    @server.tool(description="Fetch a receipt with its inclusion proof (to the latest "
                             "checkpoint) by id (tc_...) from the configured notary.")
    async def get_receipt(
        id: Annotated[str, Field(description="the receipt id, tc_...")],
    ) -> Annotated[CallToolResult, ReceiptOut]:
        base = _notary(cfg)
        if not is_receipt_id(id):
            raise ToolError(f"{id!r} is not a receipt id (tc_ + 22 base64url characters)")
        async with HttpClient(timeout=cfg.timeout) as fetcher:
            try:
                receipt = await fetcher.get_json(base + receipt_path(id))
            except FetchError as e:
                raise ToolError(f"cannot fetch receipt {id}: {e}") from e
        try:
            parsed = Receipt.from_json(receipt).to_json()
        except ReceiptFormatError as e:
            raise ToolError(f"the notary returned a malformed receipt: {e}") from e
        return CallToolResult(content=_text(parsed), structured_content=parsed)


def _add_get_checkpoint(server: MCPServer, cfg: ServerConfig) -> None:
    """The ``get_checkpoint`` tool: the configured notary's checkpoint, parsed and checked."""

    @server.tool(description="The configured notary's latest signed checkpoint (tree size and "
                             "root hash), with its fields parsed and, when the server has the "
                             "log key, its signature (and witness quorum) verified.")
    async def get_checkpoint() -> Annotated[CallToolResult, CheckpointOut]:
        base = _notary(cfg)
        url = base + "/checkpoint"
        async with HttpClient(timeout=cfg.timeout) as fetcher:
            try:
                note = await fetcher.get(url, limit=MAX_CHECKPOINT_BYTES)
            except FetchError as e:
                raise ToolError(f"cannot fetch the checkpoint: {e}") from e
            keys, how = cfg.log_keys, ""
            if not keys:
                # The same trust verify_tool_call falls back on: the key the notary publishes.
                try:
                    _, notary_keys = await trust_from_notary(base, fetcher)
                except VerifierInputError as e:
                    raise ToolError(f"cannot fetch the notary's log key: {e}") from e
                keys, how = notary_keys[:1], (f"log key fetched from {base} (trusting that "
                                              "notary for its own key); ")
        out = _checkpoint_out(cfg, url, note, keys, how)
        return CallToolResult(content=_text(out), structured_content=dict(out))


_NOT_SERVED: Final = ("prompts/list", "prompts/get", "resources/list", "resources/read",
                      "resources/templates/list", "resources/subscribe",
                      "resources/unsubscribe", "completion/complete", "subscriptions/listen")


def _serve_tools_only(server: MCPServer) -> None:
    """Advertise and answer only tools: ``MCPServer`` registers empty prompt and resource
    handlers (so ``prompts`` and ``resources`` would be advertised with nothing behind them);
    without them those methods are ``-32601`` and absent from the capabilities. A
    ``tools/call`` of a tool this server does not have is ``-32602`` (invalid params), as
    MCP specifies, not a tool result."""
    low = server._lowlevel_server  # MCPServer has no switch for the capabilities it claims
    for method in _NOT_SERVED:
        low._request_handlers.pop(method, None)
    names = frozenset(t.name for t in server._tool_manager.list_tools())

    async def unknown_tool(ctx: ServerRequestContext[Any, Any], call_next: CallNext
                           ) -> HandlerResult:
        if ctx.method == "tools/call":
            name = (ctx.params or {}).get("name")
            if name not in names:
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        return await call_next(ctx)

    low.middleware.append(unknown_tool)


def _checkpoint_out(cfg: ServerConfig, url: str, note_bytes: bytes,
                    log_keys: tuple[LogVerifier, ...], how_trusted: str = ""
                    ) -> CheckpointOut:
    try:
        note = parse_note(note_bytes)
        cp = parse_checkpoint_text(note.text)
    except NoteError as e:
        raise ToolError(f"{url} served something that is not a signed checkpoint: {e}") from e
    keys = [k for k in log_keys if k.name == cp.origin]
    verified: bool | None
    if not keys:
        verified, how = False, (f"no trusted log key for origin {cp.origin!r} (trusted: "
                                f"{', '.join(sorted(k.name for k in log_keys)) or 'none'})")
    else:
        trust = Trust(None, tuple(keys), cfg.witnesses,
                      cfg.quorum if cfg.quorum is not None else len(
                          {(w.name, w.key_id) for w in cfg.witnesses}),
                      ) if cfg.witness_policy is None else Trust(None, tuple(keys),
                                                                 policy=cfg.witness_policy)
        try:
            open_checkpoint(note_bytes, keys[0])
            verified, how = True, f"{how_trusted}signed by {keys[0].vkey}"
            policy = trust.witness_policy
            if policy is not None:
                level = check_witnesses(note_bytes, keys[0], policy)
                verified = verified and (level.status == "passed"
                                         or not policy.requires_cosignatures)
                how += f"; {level.reason}"
        except (NoteError, ValueError) as e:
            verified, how = False, str(e)
    return CheckpointOut(
        url=url, checkpoint=note_bytes.decode("utf-8"), origin=cp.origin, size=cp.size,
        root=base64.b64encode(cp.root_hash).decode(), root_hex=cp.root_hash.hex(),
        extensions=list(cp.extensions),
        signatures=[SignatureLineOut(name=s.name, key_id=f"{s.key_id:08x}")
                    for s in note.signatures],
        verified=verified, verification=how)
