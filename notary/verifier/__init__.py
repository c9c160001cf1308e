"""Verify a notarized MCP tool call, all five levels, as a library.

``notary verify`` is its command line (:mod:`notary.cli.verify`).

The pure per-level checks live in :mod:`notary.verify` (levels 1-4) and
:mod:`notary.verify_state` (level 5's rules and memory). This package is the shell around them:
it turns what a verifier actually holds (a saved tool call, a bare tool result, or a receipt and a
record) into a receipt and a call record, loads the trust anchors, does the few HTTP GETs the
online checks need, and reports.

Input formats
=============

(a) A **saved tool call**: ``{"tool": NAME, "arguments": {...}, "result": <CallToolResult>}``,
    optionally with ``"server": NAME``. ``result`` is the CallToolResult as wire JSON
    (camelCase: ``content``, ``structuredContent``, ``isError``, ``_meta``...), exactly as
    received. ``arguments`` defaults to ``{}``. Without ``server``, the server name the receipt
    carries is used (the receipt is what names it).
(b) A **bare CallToolResult** (wire JSON, an object with ``content``), or a JSON-RPC response
    whose ``result`` is one; the tool name and arguments come from ``--tool`` and
    ``--arguments`` (default ``{}``).
(c) A **receipt and a call record**: the receipt as the notary returns it (with ``proof``)
    and the rs-tool-call/1 record ``{tool, arguments, result, salt}`` (``server`` and ``spec``
    optional), as ``notary hash`` takes it.

In (a) and (b) the result's ``_meta["com.rightshold/tool-call"]`` supplies the ``salt`` and,
unless the SDK was told not to embed it, the ``receipt`` (with its ``proof``); without an
embedded receipt, an online verifier fetches it from ``receipt_url`` (or pass ``--receipt``).
The record is rebuilt as ``{server, tool, arguments, result: {content, structuredContent?,
isError?}, salt}``: ``_meta`` and ``resultType`` are never hashed; ``structuredContent`` is
any JSON value and is hashed exactly as received (``null`` included, left out only when the
result has no such member).

Levels
======

1. ``record``: the rebuilt record hashes to the receipt's ``call_sha256`` (and the ``_meta``
   copy of ``id``/``call_sha256`` agrees with the receipt).
2. ``signature``: the receipt's Ed25519 signature verifies under a trusted receipt key (JWKS).
3. ``inclusion``: the log entry rebuilt from the receipt is in the checkpoint of the receipt's
   ``proof``, and that checkpoint is signed by a trusted log key for the receipt's origin.
4. ``witnesses``: that checkpoint's cosignatures meet the witness policy: a C2SP tlog-policy
   (witnesses, groups, a quorum), or k of the given witness keys (skipped when no quorum is
   asked for); the reason counts every valid cosignature. Online, a receipt whose own proof
   ends in a checkpoint without the quorum (witnesses cosign a little after issuance) is
   checked again with the notary's current proof for it, fetched from ``receipt_url``;
   ``upgrade`` fetches that proof first in any case (``notary verify --upgrade``).
5. ``consistency``: that checkpoint, the newest one this verifier has seen for the origin (the
   state file) and, online, the log's latest checkpoint (``/checkpoint``, verified under the
   log key and the witness policy) are pairwise consistent: equal sizes need equal roots,
   different sizes an RFC 9162 consistency proof from the log
   (``/v1/ledger/proofs/consistency``). A fork or rollback fails with both signed
   checkpoints as evidence, and the newest consistent checkpoint becomes the stored one.
   Offline, level 5 decides only what needs no proof (equal sizes) and otherwise is skipped
   with the reason; it is never passed without a check, and the state file is not written.

Beside the five levels, an RFC 9942 COSE receipt of the same call (``cose``) is checked as the
report's own ``cose`` line (:mod:`notary.core.cose_verification`), required when given.

Levels 1-4 need no network. Nothing is fetched at all when ``fetcher`` is None (``--offline``);
online, ``fetcher`` is a :class:`ledger.client.http.HttpClient` (every answer size- and
depth-bounded; a failure is a :class:`~ledger.client.http.FetchError` that tells a log that
refused from one that could not be reached).
"""

from ledger.client.http import FetchError, HttpClient
from notary.core.meta import TOOL_CALL_META_KEY
from notary.verifier.inputs import (
    ToolCall,
    VerifierInputError,
    call_from_document,
    call_from_receipt_and_record,
    call_from_saved_call,
    call_from_tool_result,
    log_base_url,
)
from notary.verifier.report import Report
from notary.verifier.trust import (
    Trust,
    load_jwks,
    parse_log_keys,
    parse_witness_keys,
    trust_from_notary,
)
from notary.verifier.verify import verify_tool_call

__all__ = [
    "TOOL_CALL_META_KEY", "FetchError", "HttpClient", "Report", "ToolCall", "Trust",
    "VerifierInputError", "call_from_document", "call_from_receipt_and_record",
    "call_from_saved_call", "call_from_tool_result", "load_jwks", "log_base_url",
    "parse_log_keys", "parse_witness_keys", "trust_from_notary", "verify_tool_call",
]
