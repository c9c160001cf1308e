"""What a verifier holds, turned into a receipt and a call record: a saved tool call, a bare
tool result, or a receipt and a record (formats in :mod:`notary.verifier`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ledger.core.paths import ENTRIES_PATH
from notary.core.errors import NotaryBaseError
from notary.core.input_json import MAX_INPUT_BYTES as MAX_INPUT_BYTES
from notary.core.input_json import MAX_INPUT_DEPTH as MAX_INPUT_DEPTH
from notary.core.input_json import parse_input_json as parse_input_json
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.receipts import Receipt, ReceiptFormatError
from notary.core.toolcall import RebuildError, notarization_block, rebuild_record


class VerifierInputError(NotaryBaseError, ValueError):
    """The inputs or trust material are unusable: a usage error (exit 2), not a verdict."""


@dataclass(frozen=True)
class MalformedReceipt:
    """A receipt that was given but cannot be parsed: a failed verdict, not a usage error.

    ``raw`` is kept for the report's summary; ``problem`` says what is wrong.
    """

    raw: Mapping[str, object]
    problem: ReceiptFormatError


def parse_receipt(obj: object, what: str) -> Receipt | MalformedReceipt:
    """A receipt where it enters the verifier: parsed once, strictly, or kept as malformed."""
    doc = _object(obj, what)
    try:
        return Receipt.from_json(doc)
    except ReceiptFormatError as e:
        return MalformedReceipt(doc, e)


_SAVED_CALL_KEYS = frozenset({"tool", "arguments", "result", "server"})


_ENTRIES_PATH = re.compile(re.escape(ENTRIES_PATH) + r"[0-9]+/?$")


def check_http_url(url: str) -> None:
    """Refuse anything but an http(s) URL with a host, as an input error."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise VerifierInputError(f"{url!r} is not an http(s) URL")


def log_base_url(receipt: Receipt) -> str | None:
    """The log's base URL, from the receipt's ``ledger.entry_url``.

    The notary writes ``<base>/v1/ledger/entries/<index>``; anything else falls back to the
    URL's scheme and host. None when there is no http(s) URL to go by.
    """
    parts = urlsplit(receipt.entry_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    path = _ENTRIES_PATH.sub("", parts.path) if _ENTRIES_PATH.search(parts.path) else ""
    return f"{parts.scheme}://{parts.netloc}{path}".rstrip("/")


@dataclass(frozen=True)
class ToolCall:
    """What is verified: a receipt (or where to get it) and the call record it should commit to.

    ``record`` is the rs-tool-call/1 record JSON for :func:`notary.core.records.record_from_json`
    (``server`` may be absent: the receipt's is used). ``meta`` is the result's
    ``_meta["com.rightshold/tool-call"]`` when the call came from a tool result.
    """

    receipt: Receipt | MalformedReceipt | None
    record: Mapping[str, object] | None
    meta: Mapping[str, object] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.receipt, Mapping):  # a caller that built one by hand: parse it here
            object.__setattr__(self, "receipt", parse_receipt(self.receipt, "the receipt"))

    @property
    def receipt_url(self) -> str | None:
        url = self.meta.get("receipt_url") if self.meta is not None else None
        return url if isinstance(url, str) else None


def _object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise VerifierInputError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def call_from_tool_result(
    result: Mapping[str, object],
    *,
    tool: str,
    arguments: Mapping[str, object] | None = None,
    server: str | None = None,
    receipt: Mapping[str, object] | None = None,
) -> ToolCall:
    """Format (b): a CallToolResult (wire JSON) plus the tool name and arguments of the call.

    ``receipt`` overrides the one embedded in ``_meta`` (for results that carry none).
    """
    result = _object(result, "the tool result")
    if not isinstance(tool, str) or not tool:
        raise VerifierInputError("the tool name is required to rebuild the call record")
    args = _object({} if arguments is None else arguments, "the arguments")
    try:
        record = rebuild_record(tool, args, result, server=server)
    except RebuildError as e:
        raise VerifierInputError(str(e)) from e
    meta = notarization_block(result)
    assert meta is not None  # rebuild_record found it
    given: Receipt | MalformedReceipt | None = None
    if receipt is not None:
        given = parse_receipt(receipt, "the receipt")
    elif meta.get("receipt") is not None:
        given = parse_receipt(meta["receipt"], f"_meta[{TOOL_CALL_META_KEY!r}].receipt")
    return ToolCall(given, record, meta, "tool result")


def call_from_saved_call(doc: Mapping[str, object],
                         receipt: Mapping[str, object] | None = None) -> ToolCall:
    """Format (a): ``{tool, arguments, result, server?}``."""
    doc = _object(doc, "a saved tool call")
    unknown = sorted(set(doc) - _SAVED_CALL_KEYS)
    if unknown:
        raise VerifierInputError(f"a saved tool call has unknown member(s) {unknown}; "
                                 f"expected {sorted(_SAVED_CALL_KEYS)}")
    for key in ("tool", "result"):
        if key not in doc:
            raise VerifierInputError(f"a saved tool call needs {key!r}")
    tool, server = doc["tool"], doc.get("server")
    if not isinstance(tool, str) or (server is not None and not isinstance(server, str)):
        raise VerifierInputError("a saved tool call's 'tool' and 'server' must be strings")
    arguments = doc.get("arguments", {})
    call = call_from_tool_result(_object(doc["result"], "'result'"), tool=tool,
                                 arguments=_object(arguments, "'arguments'"), server=server,
                                 receipt=receipt)
    return ToolCall(call.receipt, call.record, call.meta, "saved tool call")


def call_from_receipt_and_record(receipt: Mapping[str, object],
                                 record: Mapping[str, object]) -> ToolCall:
    """Format (c): a receipt (with ``proof``) and an rs-tool-call/1 call record."""
    return ToolCall(parse_receipt(receipt, "the receipt"), _object(record, "the call record"),
                    None, "receipt and record")


def call_from_document(doc: object, *, tool: str | None = None,
                       arguments: Mapping[str, object] | None = None,
                       receipt: Mapping[str, object] | None = None) -> ToolCall:
    """Format (a) or (b), told apart by shape: a result has ``content``, a saved call ``result``.

    A JSON-RPC response (``{"jsonrpc": "2.0", "result": {...}}``) is unwrapped to its result,
    so a message captured off the wire can be verified as is.
    """
    obj = _object(doc, "the tool call document")
    if "jsonrpc" in obj:
        obj = _object(obj.get("result"), "the JSON-RPC response's result")
    if "content" in obj:
        if tool is None:
            raise VerifierInputError("a bare tool result needs the tool name (--tool)")
        return call_from_tool_result(obj, tool=tool, arguments=arguments, receipt=receipt)
    if "result" in obj:
        if tool is not None or arguments is not None:
            raise VerifierInputError("--tool and --arguments are for a bare tool result; a saved "
                                     "tool call carries its own")
        return call_from_saved_call(obj, receipt)
    raise VerifierInputError("not a tool call: expected a saved call {tool, arguments, result} "
                             "or a CallToolResult {content, _meta, ...}")
