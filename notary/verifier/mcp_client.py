"""A client that verifies for you: every tool result is checked before the application sees it.

The official ``mcp`` client (2.x ``mcp.Client``) has no hook around ``call_tool`` (its
``ClientExtension`` claims result *shapes*, it does not see every result), so this is a wrapper:
:class:`VerifyingClient` holds a ``Client`` (or anything with its ``call_tool``), forwards every
other attribute to it, and on each ``call_tool``

1. rebuilds the rs-tool-call/1 record from the call made (the tool name and the arguments this
   client sent) and the result received (as wire JSON, ``structuredContent: null`` kept), and
2. verifies it **offline** with :func:`notary.verifier.verify_tool_call`, the verifier of
   ``notary verify``, under the caller's :class:`~notary.verifier.Trust` (receipt keys, log
   keys, optionally a witness policy): record, signature, inclusion, witnesses;
3. when it verifies, keeps the call in the evidence store (:mod:`notary.verifier.evidence`),
   which ``notary verify DIR`` and ``mcp-notary verify DIR`` check again later.

What a result that carries no receipt (``missing``: no notarization block, a server that says
it could not notarize, a receipt left out of ``_meta``) or one that fails (``invalid``: any
level failed, a malformed block, a receipt already kept for an earlier call) does is the
caller's choice, separately for each: ``"raise"`` (:class:`ReceiptCheckError`, the result is
withheld), ``"mark"`` (returned with the finding in ``_meta["com.rightshold/verification"]``),
or ``"log"`` (the same, plus a warning in the log naming the tool, receipt id and reason, never
arguments or results). Every result this client returns carries that ``_meta`` entry
``{status: "verified"|"missing"|"invalid", reason, id?, levels?}``; it is the client's own and
is not part of what was notarized.

A receipt embedded at call time ends in the checkpoint signed with it, which witnesses cosign a
little later: a witness policy that requires cosignatures fails offline at call time. Keep such
calls with ``on_invalid="mark"`` and check the store later with ``notary verify DIR --upgrade``,
or run the notary with witnesses that cosign before it answers.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from mcp_types import CallToolResult
from pydantic import BaseModel

from notary.core.errors import NotaryBaseError
from notary.core.meta import TOOL_CALL_META_KEY, VERIFICATION_META_KEY
from notary.core.receipts import Receipt
from notary.core.toolcall import notarization_block
from notary.core.verification import LEVELS
from notary.verifier.evidence import EvidenceStore
from notary.verifier.inputs import VerifierInputError, call_from_tool_result
from notary.verifier.report import Report
from notary.verifier.state import StateFile
from notary.verifier.trust import Trust
from notary.verifier.verify import verify_tool_call

__all__ = ["VERIFICATION_META_KEY", "OnFailure", "ReceiptCheckError", "VerifyingClient",
           "received_wire"]

OnFailure = Literal["raise", "mark", "log"]
_ACTIONS = ("raise", "mark", "log")

_log = logging.getLogger("notary.verifier.mcp_client")


class ReceiptCheckError(NotaryBaseError, Exception):
    """A tool result whose receipt is missing or does not verify, under ``"raise"``.

    ``status`` is ``"missing"`` or ``"invalid"``; ``report`` the verifier's report when one was
    made; ``result`` the withheld result (for forensics: the application did not get it).
    """

    def __init__(self, tool: str, status: str, reason: str, report: Report | None,
                 result: CallToolResult) -> None:
        super().__init__(f"the result of tool {json.dumps(tool, ensure_ascii=False)} is "
                         f"{'not notarized' if status == 'missing' else 'not valid'}: {reason}")
        self.tool = tool
        self.status = status
        self.reason = reason
        self.report = report
        self.result = result


class _CallsTools(Protocol):
    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        *args: Any, **kwargs: Any) -> CallToolResult: ...


def received_wire(result: BaseModel | Mapping[str, object]) -> dict[str, object]:
    """A received ``CallToolResult`` as wire JSON, ``structuredContent: null`` kept when the
    wire carried it (the model holds absent and null alike, but remembers which fields were
    set). The same as ``notary.sdk.received_wire``, which this layer may not import; a test
    keeps the two equal."""
    if not isinstance(result, BaseModel):
        return dict(result)
    wire = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    if (isinstance(result, CallToolResult) and result.structured_content is None
            and "structured_content" in result.model_fields_set):
        wire["structuredContent"] = None
    return wire


class VerifyingClient:
    """``client`` with every ``call_tool`` result verified (see the module doc).

    ``trust``: the receipt keys, log keys and witness policy to verify under (pin them).
    ``on_missing`` / ``on_invalid``: ``"raise"`` (default), ``"mark"`` or ``"log"``.
    ``evidence``: a directory (or :class:`EvidenceStore`) to keep verified calls in; None keeps
    none. ``server``: the server name the receipts must carry (default: whatever the receipt
    names). ``state``: a verifier state file, read (never written, offline) so that a receipt
    in a checkpoint older than one already seen still fails level 5 on a rollback.

    Use it in place of the client (``async with VerifyingClient(Client(url), trust) as c``)
    or around one already entered.
    """

    def __init__(self, client: Any, trust: Trust, *, on_missing: OnFailure = "raise",
                 on_invalid: OnFailure = "raise",
                 evidence: str | Path | EvidenceStore | None = None,
                 server: str | None = None, state: StateFile | None = None) -> None:
        for name, value in (("on_missing", on_missing), ("on_invalid", on_invalid)):
            if value not in _ACTIONS:
                raise ValueError(f"{name} must be one of {_ACTIONS}, not {value!r}")
        self.client = client
        self.trust = trust
        self.on_missing = on_missing
        self.on_invalid = on_invalid
        self.evidence = (evidence if isinstance(evidence, EvidenceStore) or evidence is None
                         else EvidenceStore(evidence))
        self.server = server
        self.state = state

    async def __aenter__(self) -> VerifyingClient:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        *args: Any, **kwargs: Any) -> CallToolResult:
        """``client.call_tool``, verified; the arguments are copied before they are sent, so
        what is checked is what was sent."""
        sent = copy.deepcopy(arguments)
        result: CallToolResult = await self.client.call_tool(name, arguments, *args, **kwargs)
        wire = received_wire(result)
        status, reason, report = await self._check(name, sent, wire)
        finding: dict[str, object] = {"status": status, "reason": reason}
        if report is not None:
            if isinstance(report.receipt, Receipt):
                finding["id"] = report.receipt.id
            finding["levels"] = {n: report.verdict.levels[n].status
                                 for n in LEVELS if n in report.verdict.levels}
        if status != "verified":
            action = self.on_missing if status == "missing" else self.on_invalid
            if action == "raise":
                raise ReceiptCheckError(name, status, reason, report, result)
            if action == "log":
                _log.warning("tool result %s: %s (receipt %s): %s", json.dumps(name), status,
                             finding.get("id", "none"), reason)
        meta = dict(result.meta or {})
        meta[VERIFICATION_META_KEY] = finding
        return result.model_copy(update={"meta": meta})

    async def _check(self, tool: str, arguments: dict[str, Any] | None,
                     wire: dict[str, object]) -> tuple[str, str, Report | None]:
        """(status, reason, report) for one received result; keeps it when it verifies."""
        block = notarization_block(wire)
        if block is None:
            return "missing", f"the result has no _meta[{TOOL_CALL_META_KEY!r}] block", None
        if block.get("notarized") is False:
            return "missing", f"the server could not notarize it: {block.get('reason')}", None
        if block.get("receipt") is None:
            return "missing", "the result carries no embedded receipt (the server was told " \
                              "not to embed it), so it cannot be verified offline", None
        try:
            call = call_from_tool_result(wire, tool=tool, arguments=arguments,
                                         server=self.server)
            report = await verify_tool_call(call, self.trust, fetcher=None, state=self.state)
        except VerifierInputError as e:
            return "invalid", str(e), None
        if not report.valid:
            levels = report.verdict.levels
            level = next((n for n in LEVELS if n in levels and levels[n].status == "failed"),
                         next(n for n in report.verdict.required
                              if n not in levels or levels[n].status != "passed"))
            reason = levels[level].reason if level in levels else "not checked"
            return "invalid", f"{level}: {reason}", report
        receipt = report.receipt
        assert isinstance(receipt, Receipt)  # a valid report has a parsed receipt
        if self.evidence is not None:
            if self.evidence.has(receipt.id):
                return "invalid", (f"receipt {receipt.id} was already received for an earlier "
                                   "call: the server replayed an old result"), report
            saved: dict[str, object] = {"tool": tool, "arguments": arguments or {},
                                        "result": wire}
            if self.server is not None:
                saved["server"] = self.server
            self.evidence.save(receipt.id, saved)
        return "verified", f"receipt {receipt.id} verified", report
