"""Verify a notarized MCP tool call, all five levels, as a library and as ``notary verify``.

The pure per-level checks live in :mod:`notary.verify` (levels 1-4) and
:mod:`notary.verify_state` (level 5's rules and memory). This module is the shell around them:
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
isError?}, salt}``: ``_meta`` and ``resultType`` are never hashed.

Levels
======

1. ``record``: the rebuilt record hashes to the receipt's ``call_sha256`` (and the ``_meta``
   copy of ``id``/``call_sha256`` agrees with the receipt).
2. ``signature``: the receipt's Ed25519 signature verifies under a trusted receipt key (JWKS).
3. ``inclusion``: the log entry rebuilt from the receipt is in the checkpoint of the receipt's
   ``proof``, and that checkpoint is signed by a trusted log key for the receipt's origin.
4. ``witnesses``: that checkpoint carries cosignatures from at least ``quorum`` of the given
   witness keys (skipped when no quorum is asked for). Online, a receipt whose own proof ends
   in a checkpoint without the quorum (witnesses cosign a little after issuance) is checked
   again with the notary's current proof for it, fetched from ``receipt_url``.
5. ``consistency``: that checkpoint, the newest one this verifier has seen for the origin (the
   state file) and, online, the log's latest checkpoint (``/checkpoint``, verified under the
   log key and the witness policy) are pairwise consistent: equal sizes need equal roots,
   different sizes an RFC 9162 consistency proof from the log
   (``/v1/ledger/proofs/consistency``). A fork or rollback fails with both signed
   checkpoints as evidence, and the newest consistent checkpoint becomes the stored one.
   Offline, level 5 decides only what needs no proof (equal sizes) and otherwise is skipped
   with the reason; it is never passed without a check.

Levels 1-4 need no network. Nothing is fetched at all when ``fetcher`` is None (``--offline``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp

from ledger.checkpoint import Checkpoint, open_checkpoint
from ledger.cosignature import parse_verifier_key
from ledger.note import Ed25519Verifier, NoteError, NoteVerifier, parse_note, strict_b64decode
from ledger.proofbundle import ProofBundleError, decode_proof_bundle

from .receipts import Jwks, JwksError
from .verify import LEVELS, LevelResult, Verdict, failed, passed, skipped, verify_receipt
from .verify_state import (
    DEFAULT_STATE_PATH,
    Conflict,
    ProofResult,
    Reconciler,
    Seen,
    StateError,
    StateFile,
    describe_pairs,
)

__all__ = [
    "META_KEY",
    "FetchError",
    "Fetcher",
    "HttpFetcher",
    "Report",
    "ToolCall",
    "Trust",
    "VerifierInputError",
    "call_from_document",
    "call_from_receipt_and_record",
    "call_from_saved_call",
    "call_from_tool_result",
    "load_jwks",
    "log_base_url",
    "parse_log_keys",
    "parse_witness_keys",
    "register",
    "trust_from_notary",
    "verify_tool_call",
]

META_KEY = "com.rightshold/tool-call"
"""The ``_meta`` key under which the SDK puts the call's salt, ids and receipt."""

MAX_RESPONSE_BYTES = 4 << 20
"""Largest HTTP answer read; receipts, checkpoints and proofs are a few kilobytes."""

_SAVED_CALL_KEYS = frozenset({"tool", "arguments", "result", "server"})
_ENTRIES_PATH = re.compile(r"/v1/ledger/entries/[0-9]+/?$")


class VerifierInputError(ValueError):
    """The inputs or trust material are unusable: a usage error (exit 2), not a verdict."""


# ---------------------------------------------------------------------------------------------
# HTTP


class FetchError(Exception):
    """A GET failed. ``status`` is the HTTP status when the server answered at all.

    The distinction matters to level 5: a log that answers 4xx (or garbage) to a question it
    must be able to answer is evidence against it, while a network failure or a 5xx is not
    evidence of anything and only means the check could not be made.
    """

    def __init__(self, url: str, message: str, status: int | None = None,
                 malformed: bool = False) -> None:
        super().__init__(f"GET {url}: {message}")
        self.url = url
        self.status = status
        self.malformed = malformed

    @property
    def refused(self) -> bool:
        return self.malformed or (self.status is not None and 400 <= self.status < 500)


class Fetcher(Protocol):
    """What the online checks need: GET a URL's bytes. Offline code is handed ``None``."""

    async def get_bytes(self, url: str) -> bytes: ...


async def get_json(fetcher: Fetcher, url: str) -> Any:
    """GET and parse JSON; a body that is not JSON is a malformed answer."""
    data = await fetcher.get_bytes(url)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise FetchError(url, f"the answer is not JSON: {e}", malformed=True) from None


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise VerifierInputError(f"{url!r} is not an http(s) URL")


class HttpFetcher:
    """GETs over one aiohttp session with a total timeout per request.

    Use as an async context manager. Only ``http``/``https`` URLs are fetched, answers are
    capped at :data:`MAX_RESPONSE_BYTES`, and redirects are not followed: a log's API answers
    directly, and a redirect is more likely to lead somewhere unintended than to help.
    """

    def __init__(self, timeout: float = 10.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpFetcher:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get_bytes(self, url: str) -> bytes:
        _check_url(url)
        if self._session is None:
            raise RuntimeError("HttpFetcher is used outside 'async with'")
        try:
            async with self._session.get(url, allow_redirects=False) as resp:
                body = await resp.content.read(MAX_RESPONSE_BYTES + 1)
                if len(body) > MAX_RESPONSE_BYTES:
                    raise FetchError(url, "the answer is too large", resp.status, malformed=True)
                if resp.status != 200:
                    raise FetchError(url, f"HTTP {resp.status}: {_error_text(body)}", resp.status)
                return body
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise FetchError(url, f"{type(e).__name__}: {e}") from None


def _error_text(body: bytes) -> str:
    """The message of a JSON error answer, else the start of the body."""
    try:
        doc = json.loads(body)
        message = doc["error"]["message"]
        if isinstance(message, str):
            return message
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        pass
    return body[:200].decode("utf-8", "replace").strip()


def log_base_url(receipt: Mapping[str, object]) -> str | None:
    """The log's base URL, from the receipt's ``ledger.entry_url``.

    The notary writes ``<base>/v1/ledger/entries/<index>``; anything else falls back to the
    URL's scheme and host. None when there is no http(s) URL to go by.
    """
    ledger = receipt.get("ledger")
    url = ledger.get("entry_url") if isinstance(ledger, Mapping) else None
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    path = _ENTRIES_PATH.sub("", parts.path) if _ENTRIES_PATH.search(parts.path) else ""
    return f"{parts.scheme}://{parts.netloc}{path}".rstrip("/")


# ---------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class ToolCall:
    """What is verified: a receipt (or where to get it) and the call record it should commit to.

    ``record`` is the rs-tool-call/1 record JSON for :func:`notary.records.record_from_json`
    (``server`` may be absent: the receipt's is used). ``meta`` is the result's
    ``_meta["com.rightshold/tool-call"]`` when the call came from a tool result.
    """

    receipt: Mapping[str, object] | None
    record: Mapping[str, object] | None
    meta: Mapping[str, object] | None = None
    source: str = ""

    @property
    def receipt_url(self) -> str | None:
        url = self.meta.get("receipt_url") if self.meta is not None else None
        return url if isinstance(url, str) else None


def _object(value: object, what: str) -> dict[str, Any]:
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
    meta_all = result.get("_meta")
    if not isinstance(meta_all, Mapping) or not isinstance(meta_all.get(META_KEY), Mapping):
        raise VerifierInputError(f"the tool result has no _meta[{META_KEY!r}]: it was not "
                                 "notarized, or its _meta was stripped on the way")
    meta: Mapping[str, object] = meta_all[META_KEY]
    if meta.get("notarized") is False:
        raise VerifierInputError(f"the server says this result was not notarized: "
                                 f"{meta.get('reason', 'no reason given')}")
    salt = meta.get("salt")
    if not isinstance(salt, str):
        raise VerifierInputError(f"_meta[{META_KEY!r}].salt is missing: the record cannot be "
                                 "rebuilt without it")
    record: dict[str, object] = {"tool": tool, "arguments": args, "result": result, "salt": salt}
    if server is not None:
        record["server"] = server
    if receipt is None:
        embedded = meta.get("receipt")
        if embedded is not None:
            receipt = _object(embedded, f"_meta[{META_KEY!r}].receipt")
    return ToolCall(receipt, record, meta, "tool result")


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
    return ToolCall(_object(receipt, "the receipt"), _object(record, "the call record"),
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


# ---------------------------------------------------------------------------------------------
# Trust


@dataclass(frozen=True)
class Trust:
    """The verifier's trust anchors: receipt keys, log keys, witness keys and the quorum.

    ``quorum`` is how many distinct witnesses must have cosigned (k of n); 0 means no witness
    check. Log keys are matched to a receipt by origin (the key name).
    """

    jwks: Jwks | None = None
    log_keys: tuple[Ed25519Verifier, ...] = ()
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.quorum, bool) or not isinstance(self.quorum, int) or self.quorum < 0:
            raise VerifierInputError("the witness quorum must be a non-negative integer")
        if self.quorum > len({(w.name, w.key_id) for w in self.witnesses}):
            raise VerifierInputError(f"a quorum of {self.quorum} cannot be met by "
                                     f"{len(self.witnesses)} witness key(s)")


def _expand_keys(values: Sequence[str]) -> list[str]:
    """Key texts from values that are keys or ``@FILE`` (one key a line, ``#`` comments)."""
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            try:
                text = Path(value[1:]).expanduser().read_text()
            except OSError as e:
                raise VerifierInputError(f"cannot read key file {value[1:]}: {e}") from e
            out.extend(line.strip() for line in text.splitlines()
                       if line.strip() and not line.lstrip().startswith("#"))
        else:
            out.append(value.strip())
    return out


def parse_log_keys(values: Sequence[str]) -> tuple[Ed25519Verifier, ...]:
    """Log verifier keys (``<origin>+<hex id>+<base64>``, type Ed25519) or ``@FILE``s of them."""
    keys = []
    for text in _expand_keys(values):
        try:
            keys.append(Ed25519Verifier.from_vkey(text))
        except NoteError as e:
            raise VerifierInputError(f"bad log key {text[:60]!r}: {e}") from e
    return tuple(keys)


def parse_witness_keys(values: Sequence[str]) -> tuple[NoteVerifier, ...]:
    """Witness verifier keys (cosignature/v1, or plain Ed25519) or ``@FILE``s of them."""
    keys = []
    for text in _expand_keys(values):
        try:
            keys.append(parse_verifier_key(text))
        except NoteError as e:
            raise VerifierInputError(f"bad witness key {text[:60]!r}: {e}") from e
    return tuple(keys)


def _jwks(doc: object, where: str) -> Jwks:
    try:
        jwks = Jwks(_object(doc, f"the JWKS from {where}"))
    except JwksError as e:
        raise VerifierInputError(f"the JWKS from {where} is unusable: {e}") from e
    if not len(jwks):
        raise VerifierInputError(f"the JWKS from {where} has no Ed25519 key")
    return jwks


async def load_jwks(value: str | Mapping[str, object], fetcher: Fetcher | None) -> Jwks:
    """Receipt keys from a JWKS document, a file (``FILE`` or ``@FILE``), or an http(s) URL.

    A URL needs ``fetcher``: offline, it is an input error rather than a silent skip.
    """
    if isinstance(value, Mapping):
        return _jwks(dict(value), "the arguments")
    if value.startswith(("http://", "https://")):
        if fetcher is None:
            raise VerifierInputError(f"the JWKS {value} is a URL, and offline nothing is fetched; "
                                     "pass a saved JWKS file")
        try:
            return _jwks(await get_json(fetcher, value), value)
        except FetchError as e:
            raise VerifierInputError(f"cannot fetch the JWKS: {e}") from e
    path = Path(value.removeprefix("@")).expanduser()
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise VerifierInputError(f"cannot read the JWKS file {path}: {e}") from e
    return _jwks(doc, str(path))


async def trust_from_notary(url: str, fetcher: Fetcher) -> tuple[Jwks, Ed25519Verifier]:
    """The receipt keys and log key a notary publishes (``/.well-known/jwks.json``, ``/v1/ledger``).

    This trusts that notary for its own keys (trust on first use): it proves the receipt is the
    notary's, not that the notary is the one you meant. Pin keys to verify independently.
    """
    base = url.rstrip("/")
    _check_url(base)
    try:
        jwks = _jwks(await get_json(fetcher, base + "/.well-known/jwks.json"), base)
        ledger = await get_json(fetcher, base + "/v1/ledger")
    except FetchError as e:
        raise VerifierInputError(f"cannot fetch the notary's keys: {e}") from e
    vkey = ledger.get("vkey") if isinstance(ledger, dict) else None
    if not isinstance(vkey, str):
        raise VerifierInputError(f"{base}/v1/ledger has no 'vkey'")
    return jwks, parse_log_keys([vkey])[0]


# ---------------------------------------------------------------------------------------------
# The report


@dataclass
class Report:
    """Per-level results plus what a reader needs to act on them.

    ``conflicts`` holds the fork/rollback evidence of level 5 (both signed checkpoints).
    """

    verdict: Verdict
    receipt: Mapping[str, object] | None = None
    checkpoint: Checkpoint | None = None
    conflicts: list[Conflict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Every required level passed and none failed."""
        return self.verdict.valid and not any(
            r.status == "failed" for r in self.verdict.levels.values())

    @property
    def exit_code(self) -> int:
        return 0 if self.valid else 1

    def to_json(self) -> dict[str, Any]:
        levels: dict[str, dict[str, object]] = {}
        for name in LEVELS:
            result = self.verdict.levels.get(name, skipped("not checked"))
            entry: dict[str, object] = {**result.to_json(),
                                        "required": name in self.verdict.required}
            if name == "consistency" and self.conflicts:
                entry["evidence"] = [c.to_json() for c in self.conflicts]
            levels[name] = entry
        out: dict[str, Any] = {"valid": self.valid, "levels": levels,
                               "required": list(self.verdict.required)}
        out["receipt"] = _receipt_summary(self.receipt)
        cp = self.checkpoint
        out["checkpoint"] = None if cp is None else {
            "origin": cp.origin, "size": cp.size,
            "root": base64.b64encode(cp.root_hash).decode()}
        out["notes"] = list(self.notes)
        return out

    def render(self) -> str:
        """The human-readable report."""
        lines = []
        summary = _receipt_summary(self.receipt)
        if summary:
            lines.append(f"Receipt {summary.get('id')}: server {summary.get('server')!r}, "
                         f"tool {summary.get('tool')!r}, issued {summary.get('issued_at')}")
            lines.append(f"  log {summary.get('origin')!r}, entry {summary.get('index')}")
        for i, name in enumerate(LEVELS, 1):
            result = self.verdict.levels.get(name, skipped("not checked"))
            tag = "required" if name in self.verdict.required else "optional"
            reason = f": {result.reason}" if result.reason else ""
            lines.append(f"  {i}. {name:<12} {result.status.upper():<8} ({tag}){reason}")
        for c in self.conflicts:
            lines.append(f"  EVIDENCE of a {c.kind.upper()}: {c.message}")
            for s in (c.first, c.second):
                lines.append(f"    {s.describe()}:")
                lines.extend("      " + ln for ln in s.note.decode("utf-8", "replace")
                             .rstrip("\n").split("\n"))
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.append("VALID: every required level passed." if self.valid
                     else "NOT VALID: " + ", ".join(
                         n for n in LEVELS if n in self.verdict.required
                         and self.verdict.levels.get(n, skipped("")).status != "passed"
                     ) + " did not pass.")
        return "\n".join(lines)


def _receipt_summary(receipt: Mapping[str, object] | None) -> dict[str, object] | None:
    if receipt is None:
        return None
    ledger = receipt.get("ledger")
    ledger = ledger if isinstance(ledger, Mapping) else {}
    return {k: receipt.get(k) for k in ("id", "server", "tool", "call_sha256", "issued_at")} | {
        "origin": ledger.get("origin"), "index": ledger.get("index")}


# ---------------------------------------------------------------------------------------------
# Verification


def _select_log_key(receipt: Mapping[str, object], proof: str | None,
                    keys: Sequence[Ed25519Verifier]) -> Ed25519Verifier | LevelResult | None:
    """The trusted log key for the receipt's origin; a failed result when there is none.

    Several keys may share an origin (a rotated log key); the one that signed the proof's
    checkpoint is preferred.
    """
    if not keys:
        return None
    ledger = receipt.get("ledger")
    origin = ledger.get("origin") if isinstance(ledger, Mapping) else None
    candidates = [k for k in keys if k.name == origin]
    if not candidates:
        return failed(f"no trusted log key for origin {origin!r} (trusted: "
                      f"{', '.join(sorted({k.name for k in keys}))})")
    if len(candidates) > 1 and proof is not None:
        try:
            note = parse_note(decode_proof_bundle(proof.encode()).checkpoint)
            signers = {(s.name, s.key_id) for s in note.signatures}
            candidates.sort(key=lambda k: (k.name, k.key_id) not in signers)
        except (NoteError, ProofBundleError):
            pass
    return candidates[0]


async def _fetch_receipt(call: ToolCall, fetcher: Fetcher | None) -> tuple[dict[str, Any], str]:
    url = call.receipt_url
    if url is None:
        raise VerifierInputError("the tool result carries no receipt and no receipt_url; "
                                 "pass the receipt (--receipt)")
    if fetcher is None:
        raise VerifierInputError(f"the tool result carries no receipt, and offline it cannot be "
                                 f"fetched from {url}; pass it with --receipt")
    try:
        receipt = _object(await get_json(fetcher, url), f"the receipt from {url}")
    except FetchError as e:
        raise VerifierInputError(f"cannot fetch the receipt: {e}") from e
    return receipt, f"receipt fetched from {url}"


async def _fetch_proof(receipt: Mapping[str, object], receipt_url: str | None,
                       fetcher: Fetcher | None) -> tuple[str | None, str]:
    """The notary's current proof for a receipt (served with the receipt at its URL)."""
    base = log_base_url(receipt)
    url = receipt_url or (f"{base}/v1/tool-calls/{receipt.get('id')}" if base else None)
    if fetcher is None or url is None:
        return None, "the receipt has no proof and offline none can be fetched"
    try:
        fetched = await get_json(fetcher, url)
    except FetchError as e:
        return None, f"the receipt has no proof and none could be fetched: {e}"
    proof = fetched.get("proof") if isinstance(fetched, dict) else None
    if not isinstance(proof, str):
        return None, f"the receipt has no proof and {url} gave none"
    return proof, f"inclusion proof fetched from {url}"


def _check_meta(call: ToolCall, receipt: Mapping[str, object], verdict: Verdict) -> None:
    """Level 1 also covers the binding of the result's ``_meta`` to its receipt.

    ``_meta`` repeats ``id`` and ``call_sha256`` outside the signature; if they disagree with
    the receipt, the result was paired with someone else's receipt.
    """
    if verdict.levels.get("record", skipped("")).status != "passed":
        return
    if call.meta is None:
        verdict.levels["record"] = passed(f"the call record hashes to call_sha256 "
                                          f"{receipt.get('call_sha256')}")
        return
    for key in ("id", "call_sha256"):
        if key in call.meta and call.meta[key] != receipt.get(key):
            verdict.levels["record"] = failed(
                f"the result's _meta {key} {call.meta[key]!r} differs from its receipt's "
                f"{receipt.get(key)!r}")
            return
    verdict.levels["record"] = passed(f"the call record hashes to call_sha256 "
                                      f"{receipt.get('call_sha256')}")


async def verify_tool_call(
    call: ToolCall,
    trust: Trust,
    *,
    fetcher: Fetcher | None = None,
    state: StateFile | None = None,
    log_url: str | None = None,
) -> Report:
    """Check all five levels of one tool call.

    ``fetcher`` None means offline: nothing is fetched and level 5 decides only what needs no
    proof. ``state`` None means no memory (level 5 then compares with the log's latest only).
    ``log_url`` overrides the log's base URL taken from the receipt's ``ledger.entry_url``.
    Raises :class:`VerifierInputError` for unusable inputs and :class:`StateError` for a state
    file that cannot be read or written.
    """
    notes: list[str] = []
    receipt = call.receipt
    if receipt is None:
        receipt, note = await _fetch_receipt(call, fetcher)
        notes.append(note)
    proof = receipt.get("proof")
    proof_text = proof if isinstance(proof, str) else None
    if proof is None:
        proof_text, note = await _fetch_proof(receipt, call.receipt_url, fetcher)
        notes.append(note)

    selected = _select_log_key(receipt, proof_text, trust.log_keys)
    log_key = selected if isinstance(selected, Ed25519Verifier) else None
    verdict = verify_receipt(receipt, record=call.record, jwks=trust.jwks, log_verifier=log_key,
                             proof=proof_text, witnesses=trust.witnesses, quorum=trust.quorum)
    if isinstance(selected, LevelResult) and "inclusion" in verdict.levels:
        verdict.levels["inclusion"] = selected
    witnesses = verdict.levels.get("witnesses")
    if witnesses is not None and witnesses.status == "failed" and fetcher is not None:
        # A proof issued with the receipt ends in the log's newest checkpoint, which witnesses
        # cosign a little later; the notary upgrades a receipt's proof to its witnessed
        # checkpoint once that covers the entry. Any such proof is verified in full.
        fresh, note = await _fetch_proof(receipt, call.receipt_url, fetcher)
        if fresh is not None and fresh != proof_text:
            retry = verify_receipt(receipt, record=call.record, jwks=trust.jwks,
                                   log_verifier=log_key, proof=fresh,
                                   witnesses=trust.witnesses, quorum=trust.quorum)
            if retry.levels.get("witnesses", witnesses).status == "passed":
                verdict, proof_text = retry, fresh
                notes.append(f"the receipt's own proof lacked the witness quorum: {note}")
    _check_meta(call, receipt, verdict)
    report = Report(verdict, receipt, verdict.checkpoint, notes=notes)
    if "witnesses" not in verdict.levels:  # a malformed receipt stops after level 3
        verdict.levels["witnesses"] = skipped("the receipt is malformed")
        verdict.levels["consistency"] = skipped("the receipt is malformed")
        return report
    if trust.quorum:
        _require(verdict, "witnesses")

    await _level5(report, receipt, proof_text, log_key, trust, fetcher, state, log_url)
    return report


def _require(verdict: Verdict, level: str) -> None:
    if level not in verdict.required:
        verdict.required = (*verdict.required, level)


async def _level5(report: Report, receipt: Mapping[str, object], proof: str | None,
                  log_key: Ed25519Verifier | None, trust: Trust, fetcher: Fetcher | None,
                  state: StateFile | None, log_url: str | None) -> None:
    verdict = report.verdict
    cp = verdict.checkpoint
    if cp is None or log_key is None or proof is None:
        verdict.levels["consistency"] = skipped("no verified checkpoint to compare (level 3)")
        return
    if verdict.levels["witnesses"].status == "failed":
        verdict.levels["consistency"] = skipped(
            "the receipt's checkpoint does not meet the witness policy; it is neither compared "
            "nor remembered")
        return
    receipt_seen = Seen("receipt", cp, decode_proof_bundle(proof.encode()).checkpoint)

    stored: Seen | None = None
    if state is not None:
        entry = state.get(cp.origin)
        if entry is not None:
            try:
                stored_cp, _ = open_checkpoint(entry.checkpoint.encode(), log_key)
            except (NoteError, ValueError) as e:
                verdict.levels["consistency"] = failed(
                    f"the checkpoint stored for {cp.origin!r} in {state.path} does not verify "
                    f"under the trusted log key ({e}); the file was altered or the log key "
                    "changed: remove that entry to start over")
                _require(verdict, "consistency")
                return
            stored = Seen("stored", stored_cp, entry.checkpoint.encode())

    latest: Seen | None = None
    problems: list[str] = []
    base = (log_url.rstrip("/") if log_url else None) or log_base_url(receipt)
    if fetcher is None:
        problems.append("offline: the log's latest checkpoint and consistency proofs are not "
                        "fetched")
    elif base is None:
        problems.append("no http(s) log URL in the receipt (use --log-url)")
    else:
        try:
            latest = await _latest(fetcher, base, log_key, trust)
        except FetchError as e:
            if e.refused:
                verdict.levels["consistency"] = failed(f"the log's latest checkpoint: {e}")
                _require(verdict, "consistency")
                return
            problems.append(f"the log's latest checkpoint could not be fetched: {e}")
        except _LatestUnusable as e:
            problems.append(str(e))
        except NoteError as e:
            verdict.levels["consistency"] = failed(
                f"the log at {base} serves a checkpoint that does not verify under the trusted "
                f"log key: {e}")
            _require(verdict, "consistency")
            return

    reconciler = Reconciler(stored, receipt_seen, latest)
    proofs: dict[tuple[int, int], ProofResult] = {}
    if fetcher is not None and base is not None:
        for old, new in reconciler.proofs_needed():
            proofs[(old, new)] = await _consistency_proof(fetcher, base, old, new)
    result = reconciler.finish(proofs)
    report.conflicts = result.conflicts

    if result.conflicts:
        verdict.levels["consistency"] = failed("; ".join(c.message for c in result.conflicts))
        _require(verdict, "consistency")
        return
    others = [s for s in (stored, latest) if s is not None]
    unchecked = describe_pairs(result.unchecked)
    if others and all(result.connected(receipt_seen, s) for s in others):
        what = " and ".join(s.describe() for s in others)
        level = passed(f"consistent with {what}")
        if stored is not None:
            _require(verdict, "consistency")
    elif stored is None and latest is None:
        level = skipped("; ".join([*problems, f"no checkpoint of {cp.origin!r} seen before"]))
    else:
        level = skipped("; ".join(p for p in [*problems, unchecked] if p))
    if problems and level.status == "passed":
        report.notes.extend(problems)
    verdict.levels["consistency"] = level

    newest = result.newest
    if state is not None and newest is not None and state.remember(
            newest.checkpoint, newest.note, log_key.vkey):
        report.notes.append(f"remembered {newest.describe()} as the newest checkpoint seen for "
                            f"{cp.origin!r} in {state.path}")


class _LatestUnusable(Exception):
    """The log's latest checkpoint verifies under the log key but misses the witness quorum."""


async def _latest(fetcher: Fetcher, base: str, log_key: Ed25519Verifier, trust: Trust) -> Seen:
    """The log's latest checkpoint, verified under the log key and the witness policy.

    One without the witness quorum is not used (a log may serve a new checkpoint before its
    witnesses cosign it; that is not evidence of anything) but one the log key did not sign is
    an error the caller reports as a failure.
    """
    note = await fetcher.get_bytes(base + "/checkpoint")
    latest, _ = open_checkpoint(note, log_key)
    if trust.quorum:
        try:
            open_checkpoint(note, log_key, trust.witnesses, trust.quorum)
        except (NoteError, ValueError) as e:
            raise _LatestUnusable(
                f"the log's latest checkpoint (size {latest.size}) does not meet the witness "
                f"policy and is not used: {e}") from None
    return Seen("latest", latest, note)


async def _consistency_proof(fetcher: Fetcher, base: str, old: int, new: int) -> ProofResult:
    url = f"{base}/v1/ledger/proofs/consistency?old={old}&new={new}"
    try:
        doc = await get_json(fetcher, url)
    except FetchError as e:
        return ProofResult(problem=str(e), refused=e.refused)
    hashes = doc.get("proof") if isinstance(doc, dict) else None
    if (not isinstance(doc, dict) or doc.get("old") != old or doc.get("new") != new
            or not isinstance(hashes, list) or not all(isinstance(h, str) for h in hashes)):
        return ProofResult(problem=f"GET {url}: malformed answer", refused=True)
    try:
        return ProofResult(proof=tuple(strict_b64decode(h, "proof hash") for h in hashes))
    except NoteError as e:
        return ProofResult(problem=f"GET {url}: {e}", refused=True)


# ---------------------------------------------------------------------------------------------
# CLI: notary verify


def _read_json(value: str, what: str) -> Any:
    """JSON from a file path, ``-`` (stdin), or inline text starting with ``{``."""
    try:
        if value.lstrip().startswith("{"):
            return json.loads(value)
        text = sys.stdin.read() if value == "-" else Path(value).expanduser().read_text()
        return json.loads(text)
    except (OSError, ValueError) as e:
        raise VerifierInputError(f"cannot read {what} {value!r}: {e}") from e


def add_trust_arguments(p: argparse.ArgumentParser, notary_help: str = "") -> None:
    """The trust and network flags shared by ``notary verify`` and ``notary mcp``."""
    p.add_argument("--jwks", metavar="FILE|URL",
                   help="trusted receipt keys: a JWKS file or URL (a URL needs the network)")
    p.add_argument("--log-key", action="append", default=[], metavar="VKEY|@FILE",
                   help="trusted log verifier key <origin>+<id>+<key> (repeatable; @FILE reads "
                        "one key a line)")
    p.add_argument("--witness", action="append", default=[], metavar="VKEY|@FILE",
                   help="witness cosignature key (repeatable; @FILE reads one key a line)")
    p.add_argument("--quorum", type=int, metavar="K",
                   help="witnesses that must have cosigned (default: all given witnesses; "
                        "0 when none)")
    p.add_argument("--notary", metavar="URL",
                   help=notary_help + "fetch the receipt keys and log key from this notary when "
                        "--jwks or --log-key is not given (trusts that notary for its own keys)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--state", type=Path, metavar="FILE",
                       help=f"checkpoints seen so far, per log (default {DEFAULT_STATE_PATH})")
    group.add_argument("--no-state", action="store_true",
                       help="neither read nor write a state file")
    p.add_argument("--offline", action="store_true",
                   help="never use the network; checks that need it are skipped")
    p.add_argument("--log-url", metavar="URL",
                   help="the log's base URL for level 5 (default: from the receipt's entry_url)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="per HTTP request (default 10)")


def state_from_args(args: argparse.Namespace) -> StateFile | None:
    if args.no_state:
        return None
    return StateFile(args.state if args.state is not None else DEFAULT_STATE_PATH)


def check_network_args(args: argparse.Namespace) -> None:
    """Flag combinations that would need the network while ``--offline`` forbids it."""
    if args.offline and args.notary:
        raise VerifierInputError("--notary fetches keys, which --offline forbids; pass --jwks "
                                 "FILE and --log-key")
    if args.offline and args.jwks and args.jwks.startswith(("http://", "https://")):
        raise VerifierInputError("--jwks is a URL, which --offline forbids; pass a JWKS file")
    for url in (args.notary, args.log_url):
        if url is not None:
            _check_url(url)
    if args.timeout <= 0:
        raise VerifierInputError("--timeout must be positive")


async def trust_from_args(args: argparse.Namespace, fetcher: Fetcher | None) -> Trust:
    """The trust anchors the flags name; the notary's own keys fill in only what is missing."""
    jwks = await load_jwks(args.jwks, fetcher) if args.jwks else None
    log_keys = parse_log_keys(args.log_key)
    if (jwks is None or not log_keys) and args.notary and fetcher is not None:
        notary_jwks, notary_key = await trust_from_notary(args.notary, fetcher)
        jwks = jwks or notary_jwks
        log_keys = log_keys or (notary_key,)
    witnesses = parse_witness_keys(args.witness)
    quorum = len({(w.name, w.key_id) for w in witnesses}) if args.quorum is None else args.quorum
    if args.quorum and not witnesses:
        raise VerifierInputError("--quorum needs witness keys (--witness)")
    return Trust(jwks, log_keys, witnesses, quorum)


def _load_call(args: argparse.Namespace) -> ToolCall:
    receipt = _object(_read_json(args.receipt, "the receipt"), "the receipt") \
        if args.receipt else None
    if args.call is None:
        if args.record is None or receipt is None:
            raise VerifierInputError("give a tool call file, or --receipt FILE and --record FILE")
        if args.tool or args.arguments:
            raise VerifierInputError("--tool and --arguments go with a bare tool result")
        return call_from_receipt_and_record(receipt, _read_json(args.record, "the record"))
    if args.record is not None:
        raise VerifierInputError("--record goes with --receipt, not with a tool call file")
    arguments = (_object(_read_json(args.arguments, "the arguments"), "the arguments")
                 if args.arguments is not None else None)
    return call_from_document(_read_json(args.call, "the tool call"), tool=args.tool,
                              arguments=arguments, receipt=receipt)


async def _run_verify(args: argparse.Namespace) -> Report:
    check_network_args(args)
    if not (args.jwks or args.notary):
        raise VerifierInputError("no receipt keys to trust: pass --jwks FILE|URL (or --notary URL)")
    if not (args.log_key or args.notary):
        raise VerifierInputError("no log key to trust: pass --log-key VKEY (or --notary URL)")
    call = _load_call(args)
    state = state_from_args(args)
    if args.offline:
        trust = await trust_from_args(args, None)
        return await verify_tool_call(call, trust, fetcher=None, state=state,
                                      log_url=args.log_url)
    async with HttpFetcher(args.timeout) as fetcher:
        trust = await trust_from_args(args, fetcher)
        return await verify_tool_call(call, trust, fetcher=fetcher, state=state,
                                      log_url=args.log_url)


def cmd_verify(args: argparse.Namespace) -> int:
    from .aer1 import verify_command as verify_aer1_command
    from .cli import CliError

    aer1_code = verify_aer1_command(args)  # AER-1 receipts (result._receipt); None otherwise
    if aer1_code is not None:
        return aer1_code
    try:
        report = asyncio.run(_run_verify(args))
    except (VerifierInputError, StateError) as e:
        raise CliError(str(e)) from e
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    return report.exit_code


_VERIFY_EPILOG = """\
inputs (one of):
  CALL                      saved tool call {"tool", "arguments", "result", "server"?}
  CALL --tool T [--arguments A]
                            bare CallToolResult (wire JSON with _meta), or a JSON-RPC response
  --receipt R --record C    receipt (with proof) and rs-tool-call/1 call record
  (CALL --receipt R: use R instead of, or for want of, the receipt embedded in _meta)

levels: 1 record, 2 signature, 3 inclusion, 4 witnesses, 5 consistency.
exit status: 0 every required level passed (1-3 always; 4 with a quorum; 5 when a checkpoint
of the log was stored before and the check could be made), 1 a level failed or a required
level did not pass (a fork or rollback always fails), 2 usage or input error.
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary verify`` to the CLI."""
    p = subparsers.add_parser(
        "verify", help="verify a notarized tool call (five levels)",
        description="Verify a notarized MCP tool call: the call record, the receipt signature,\n"
                    "inclusion in the log, witness cosignatures, and consistency with the\n"
                    "checkpoints seen before (see notary/verifier.py for the formats).",
        epilog=_VERIFY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("call", nargs="?", metavar="CALL",
                   help="tool call JSON file ('-': stdin)")
    p.add_argument("--tool", help="tool name, for a bare tool result")
    p.add_argument("--arguments", metavar="FILE|JSON",
                   help="the call's arguments object, for a bare tool result (default {})")
    p.add_argument("--receipt", metavar="FILE", help="receipt JSON (with its proof)")
    p.add_argument("--record", metavar="FILE", help="rs-tool-call/1 call record JSON")
    add_trust_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_verify)
