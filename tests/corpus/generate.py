"""Generate the corpus that keeps the Python and JavaScript verifiers in step.

``python -m tests.corpus.generate DIR`` writes one JSON file per case into ``DIR`` (and
``index.json``). Every receipt in it was issued by the real notary application (in process, on a
127.0.0.1 socket) and every "Python SDK" result by the real ``notarize_server`` through the real
``mcp.Client``; tampered, forked, witnessed and policy cases are derived from those with the
project's own ledger code. Each case carries its inputs, its trust material and the expected
result, and both test suites check it: ``tests/js/test_corpus.py`` that the Python verifier gives
exactly the expected verdicts, ``js/test/corpus.test.js`` that the JavaScript one does too.

Two kinds of case:

``verify``
    ``input`` is one of ``{"format": "saved_call" | "tool_result" | "receipt_record" |
    "receipt_only", "call" | "call_text", "tool", "arguments", "receipt", "record"}`` (``*_text``
    members hold JSON text, for values a JSON value cannot carry through this file's own
    parser: integers beyond 2^53, float literals, lone surrogates). ``trust`` is ``{"jwks",
    "log_keys", "witnesses", "quorum", "policy"}``, ``state`` the verifier's memory (the state
    file's ``logs`` object) or null. ``expect`` is ``{"error": null | "input" | "state",
    "levels": {level: status}, "valid", "required"}``, written by hand in the tables below.
``jcs``
    ``record_text`` (JSON text of a call record) and ``server``; ``expect`` holds the
    ``call_sha256`` and the canonical text Python computes, or ``refused: true``.
``cose``
    RFC 9942 COSE receipts of one tool call and Python's verdict on each
    (tests/corpus/cose_cases.py says the format).

A case with ``python_diverges`` is one where the documented rule (docs/formats.md, the one the
JavaScript verifier implements) differs from today's Python code; its expectation is the
documented one, and the Python test asserts the divergence is still there, so the marker goes
once Python catches up. There is none today (``structuredContent`` of any JSON type, ``null``
included, is fixed).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import hashlib
import importlib.util
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import nacl.bindings as nacl_bindings
from mcp import Client
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from ledger.client.http import MAX_JSON_BYTES as ANSWER_BYTES
from ledger.client.http import MAX_JSON_DEPTH as ANSWER_DEPTH
from ledger.core.boundedjson import JsonError
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, NoteSignature, merge_signatures, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_policy import MAX_GROUP_DEPTH, TlogPolicyError, parse_tlog_policy
from ledger.core.tlog_proof import ProofBundle, decode_proof_bundle
from ledger.log.facade import Log
from ledger.process.structured_logs import configure as configure_logging
from ledger.storage.memory import MemoryStore
from notary.core.canonical import CanonicalizationError, canonical_json
from notary.core.entry import LogEntry
from notary.core.ids import new_receipt_id, now_issued_at
from notary.core.meta import TOOL_CALL_META_KEY as META_KEY
from notary.core.receipts import Receipt
from notary.core.records import SPEC, CallRecord, RecordError, new_salt, record_from_json
from notary.sdk import Notarizer, NotaryClient
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import roll
from notary.store.sqlite import SqliteNotaryStore
from notary.verifier.inputs import (
    MAX_INPUT_BYTES,
    MAX_INPUT_DEPTH,
    MalformedReceipt,
    ToolCall,
    VerifierInputError,
    call_from_document,
    call_from_receipt_and_record,
    parse_input_json,
)
from notary.verifier.state import StateFile, VerifierStateError
from notary.verifier.trust import (
    Trust,
    build_trust,
    load_jwks,
    parse_log_keys,
    parse_witness_keys,
)
from notary.verifier.verify import verify_tool_call
from tests.corpus.cose_cases import add_cose_cases, python_cose
from tests.notary_server import app_notary
from tests.tamper import (
    checkpoint_root,
    checkpoint_signature,
    in_proof,
    last_signature,
    proof_hash,
    set_field,
)

__all__ = ["LEVELS", "build", "python_cose", "python_ed25519", "python_jcs", "python_verdict"]

LEVELS = ("record", "signature", "inclusion", "witnesses", "consistency")
BASE_REQUIRED = ["record", "signature", "inclusion"]
REPO = Path(__file__).resolve().parents[2]

Json = dict[str, Any]


def expect(
    *,
    failed: Set[str] = frozenset(),
    skipped: Set[str] = frozenset({"witnesses", "consistency"}),
    passed: Set[str] = frozenset(),
    required: list[str] | None = None,
) -> Json:
    """The expected verdict: levels named in ``failed``/``skipped``/``passed``; the others passed.

    ``valid`` follows Python's rule: every required level passed and none failed.
    """
    levels = {}
    for name in LEVELS:
        if name in failed:
            levels[name] = "failed"
        elif name in passed:
            levels[name] = "passed"
        elif name in skipped:
            levels[name] = "skipped"
        else:
            levels[name] = "passed"
    req = list(required if required is not None else BASE_REQUIRED)
    valid = all(levels[n] == "passed" for n in req) and "failed" not in levels.values()
    return {"error": None, "levels": levels, "valid": valid, "required": req}


def error(kind: str = "input") -> Json:
    return {"error": kind, "levels": None, "valid": None, "required": None}


MALFORMED = expect(failed={"record", "signature", "inclusion"})


# ---------------------------------------------------------------------------------------------
# Python's verdict on a case (used by tests/js/test_corpus.py too)


def _load(doc: Json, key: str) -> Any:
    """An input as the CLI reads it: ``*_b64`` (raw bytes) and ``*_text`` through the verifier's
    one strict parser, whose refusal is an input error."""
    raw: bytes | str | None = None
    if isinstance(doc.get(key + "_b64"), str):
        raw = base64.b64decode(doc[key + "_b64"])
    elif isinstance(doc.get(key + "_text"), str):
        raw = doc[key + "_text"]
    if raw is None:
        return doc.get(key)
    try:
        return parse_input_json(raw)
    except JsonError as e:
        raise VerifierInputError(f"cannot read the {key}: {e}") from e


def _trust(spec: Json) -> tuple[Trust, Any]:
    text = base64.b64decode(spec["policy_b64"]) if spec.get("policy_b64") else spec.get("policy")
    policy = parse_tlog_policy(text) if text else None
    jwks = asyncio.run(load_jwks(spec["jwks"], None)) if spec.get("jwks") is not None else None
    log_keys = list(parse_log_keys(spec.get("log_keys") or []))
    if policy is not None:
        log_keys += [
            v
            for v, _ in policy.logs
            if all((k.name, k.key_id) != (v.name, v.key_id) for k in log_keys)
        ]
    witnesses = parse_witness_keys(spec.get("witnesses") or [])
    trust = build_trust(jwks, log_keys, witnesses, spec.get("quorum"))
    if policy is not None and trust.quorum and policy.quorum != "none":
        raise VerifierInputError("witness keys with a quorum and a policy with a quorum")
    return trust, policy


def _call(inp: Json) -> ToolCall:
    fmt = inp["format"]
    if fmt in ("saved_call", "tool_result"):
        return call_from_document(
            _load(inp, "call"),
            tool=inp.get("tool"),
            arguments=_load(inp, "arguments"),
            receipt=_load(inp, "receipt"),
        )
    if fmt == "receipt_record":
        return call_from_receipt_and_record(_load(inp, "receipt"), _load(inp, "record"))
    receipt = _load(inp, "receipt")
    if not isinstance(receipt, dict):
        raise VerifierInputError("the receipt must be a JSON object")
    return ToolCall(receipt, None)


def _apply_policy(report: Any, policy: Any, trust: Trust) -> None:
    """Level 4 under a tlog-policy (the Python verifier takes --witness/--quorum only today):
    the receipt's checkpoint, verified at level 3, checked with ``Policy.verify``."""
    verdict = report.verdict
    if policy.quorum == "none":
        return
    verdict.required = (*verdict.required, "witnesses")
    if verdict.levels["inclusion"].status != "passed" or verdict.checkpoint is None:
        verdict.levels["witnesses"] = type(verdict.levels["witnesses"])(
            "skipped", "no verified checkpoint to check cosignatures on"
        )
        return
    note = decode_proof_bundle(report.receipt.proof.encode()).checkpoint
    origin = verdict.checkpoint.origin
    try:
        policy.verify(note, [k for k in trust.log_keys if k.name == origin])
        status, reason = "passed", "policy met"
    except ValueError as e:
        status, reason = "failed", str(e)
    verdict.levels["witnesses"] = type(verdict.levels["witnesses"])(status, reason)
    if status == "failed":
        verdict.levels["consistency"] = type(verdict.levels["consistency"])(
            "skipped", "the receipt's checkpoint does not meet the witness policy"
        )


def python_verdict(case: Json, workdir: Path) -> Json:
    """What the Python verifier says about a ``verify`` case, in the ``expect`` shape."""
    state = None
    if case.get("state") is not None:
        path = workdir / f"{case['name']}.state.json"
        path.write_text(json.dumps({"version": 1, "logs": case["state"]}))
        state = StateFile(path)
    try:
        trust, policy = _trust(case["trust"])
        call = _call(case["input"])
        report = asyncio.run(verify_tool_call(call, trust, fetcher=None, state=state))
    except (VerifierInputError, TlogPolicyError):
        return error("input")
    except VerifierStateError:
        return error("state")
    if policy is not None:
        _apply_policy(report, policy, trust)
    levels = {n: report.verdict.levels[n].status for n in LEVELS}
    required = list(report.verdict.required)
    valid = all(levels[n] == "passed" for n in required) and "failed" not in levels.values()
    return {"error": None, "levels": levels, "valid": valid, "required": required}


def record_digest(case: Json) -> str | None:
    """The call_sha256 of the case's call record as Python computes it (the documented rule for a
    ``python_diverges`` case); None when there is no record or it cannot be hashed."""
    try:
        call = _call(case["input"])
    except VerifierInputError:
        return None
    if isinstance(call.receipt, Receipt):
        server: str | None = call.receipt.server
    else:  # malformed (its raw form) or none
        raw = call.receipt.raw if isinstance(call.receipt, MalformedReceipt) else {}
        server = raw.get("server") if isinstance(raw.get("server"), str) else None  # type: ignore[assignment]
    if call.record is None:
        return None
    try:
        if case.get("python_diverges"):
            data = canonical_json(design_record(dict(call.record), server))
            return hashlib.sha256(data).hexdigest()
        return record_from_json(call.record, server=server).call_sha256()
    except (RecordError, CanonicalizationError, KeyError, TypeError):
        return None


def design_record(obj: Json, server: str | None) -> Json:
    """The record docs/formats.md hashes: structuredContent kept whenever the member is present."""
    result = obj["result"]
    hashed: Json = {"content": result["content"]}
    if "structuredContent" in result:
        hashed["structuredContent"] = result["structuredContent"]
    if result.get("isError") is not None:
        hashed["isError"] = result["isError"]
    return {
        "spec": SPEC,
        "server": obj.get("server", server),
        "tool": obj["tool"],
        "arguments": obj["arguments"],
        "result": hashed,
        "salt": obj["salt"],
    }


def python_jcs(case: Json) -> Json:
    """What Python computes for a ``jcs`` case: digest and canonical text, or a refusal."""
    try:
        rec = record_from_json(parse_input_json(case["record_text"]), server=case.get("server"))
        data = rec.canonical_bytes()
    except (RecordError, CanonicalizationError, ValueError):
        return {"refused": True, "call_sha256": None, "canonical": None}
    return {
        "refused": False,
        "call_sha256": hashlib.sha256(data).hexdigest(),
        "canonical": data.decode("utf-8"),
    }


# ---------------------------------------------------------------------------------------------
# Building the material


@dataclass
class Issued:
    tool: str
    arguments: Json
    record: Json  # the record JSON without server
    receipt: Json
    result: Json  # wire JSON with _meta, as a client receives it

    @property
    def saved(self) -> Json:
        return {"tool": self.tool, "arguments": self.arguments, "result": self.result}

    @property
    def meta(self) -> Json:
        block: Json = self.result["_meta"][META_KEY]
        return block


@dataclass
class Corpus:
    out: Path
    url: str
    api_key: str
    jwks: Json
    vkey: str
    signer: Ed25519Signer
    http: aiohttp.ClientSession
    cases: list[Json] = field(default_factory=list)

    @property
    def trust(self) -> Json:
        return {
            "jwks": self.jwks,
            "log_keys": [self.vkey],
            "witnesses": [],
            "quorum": 0,
            "policy": None,
        }

    def add(
        self,
        name: str,
        description: str,
        inp: Json,
        exp: Json,
        *,
        trust: Json | None = None,
        state: Json | None = None,
        diverges: str | None = None,
    ) -> None:
        case = {
            "name": name,
            "kind": "verify",
            "description": description,
            "input": inp,
            "trust": trust if trust is not None else self.trust,
            "state": state,
            "expect": exp,
        }
        if diverges:
            case["python_diverges"] = diverges
        case["call_sha256"] = record_digest(case)
        self.cases.append(case)

    def add_jcs(
        self,
        name: str,
        description: str,
        record: Json | str,
        *,
        server: str | None = "srv",
        refused: bool | None = None,
        canonical: str | None = None,
        diverges: str | None = None,
    ) -> None:
        text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=True)
        case: Json = {
            "name": name,
            "kind": "jcs",
            "description": description,
            "record_text": text,
            "server": server,
        }
        got = python_jcs(case)
        if diverges:
            obj = json.loads(text)
            data = canonical_json(design_record(obj, server))
            exp = {
                "refused": False,
                "call_sha256": hashlib.sha256(data).hexdigest(),
                "canonical": data.decode("utf-8"),
            }
            case["python_diverges"] = diverges
        else:
            exp = got
            if refused is not None and got["refused"] != refused:
                raise AssertionError(
                    f"{name}: Python {'refuses' if got['refused'] else 'accepts'} "
                    f"it, the table says {'refused' if refused else 'accepted'}"
                )
        if canonical is not None and exp["canonical"] != canonical:
            raise AssertionError(f"{name}: canonical text {exp['canonical']!r}, want {canonical!r}")
        case["expect"] = exp
        self.cases.append(case)

    async def notarize(
        self, tool: str = "echo", result: Json | None = None, **arguments: Any
    ) -> Issued:
        """One call notarized through POST /v1/tool-calls, as a server would."""
        wire = (
            result
            if result is not None
            else {
                "content": [{"type": "text", "text": json.dumps(arguments)}],
                "structuredContent": {"echo": arguments},
                "isError": False,
                "resultType": "complete",
            }
        )
        salt = new_salt()
        digest = CallRecord(
            server="srv", tool=tool, arguments=arguments, result=wire, salt=salt
        ).call_sha256()
        async with self.http.post(
            self.url + "/v1/tool-calls",
            headers={"Authorization": f"Bearer {self.api_key}"},
            json={"server": "srv", "tool": tool, "call_sha256": digest},
        ) as r:
            assert r.status == 201, await r.text()
            receipt = await r.json()
        meta = {
            "spec": SPEC,
            "id": receipt["id"],
            "call_sha256": digest,
            "salt": salt,
            "receipt_url": f"{self.url}/v1/tool-calls/{receipt['id']}",
            "verify_url": f"{self.url}/v1/tool-calls/verify",
            "receipt": receipt,
        }
        out = {
            **wire,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv"}, META_KEY: meta},
        }
        record = {"tool": tool, "arguments": arguments, "result": wire, "salt": salt}
        return Issued(tool, arguments, record, receipt, out)

    async def fetch_receipt(self, receipt_id: str) -> Json:
        async with self.http.get(f"{self.url}/v1/tool-calls/{receipt_id}") as r:
            assert r.status == 200
            doc: Json = await r.json()
            return doc

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        names = set()
        for case in self.cases:
            assert case["name"] not in names, f"duplicate case {case['name']}"
            names.add(case["name"])
            (self.out / f"{case['name']}.json").write_text(
                json.dumps(case, indent=1, ensure_ascii=True) + "\n", encoding="utf-8"
            )
        index = {
            "version": 1,
            "cases": sorted(names),
            "counts": {
                k: sum(c["kind"] == k for c in self.cases)
                for k in ("verify", "jcs", "ed25519", "cose")
            },
            # the parser's bounds, which the JavaScript one must share (js/test/corpus.test.js)
            "limits": {
                "json_depth": MAX_INPUT_DEPTH,
                "json_bytes": MAX_INPUT_BYTES,
                "answer_depth": ANSWER_DEPTH,
                "answer_bytes": ANSWER_BYTES,
            },
        }
        (self.out / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def cosign(
    receipt: Json, *witnesses: CosignatureSigner, plain: Ed25519Signer | None = None
) -> Json:
    """The receipt with cosignatures added to its proof's checkpoint (the proof is unsigned)."""
    bundle = decode_proof_bundle(receipt["proof"].encode())
    text = parse_note(bundle.checkpoint).text
    sigs = [w.cosign(text, 1_700_000_000) for w in witnesses]
    if plain is not None:
        sigs.append(NoteSignature(plain.name, plain.key_id, plain.sign(text.encode())))
    note = merge_signatures(bundle.checkpoint, sigs)
    out = copy.deepcopy(receipt)
    out["proof"] = ProofBundle(bundle.index, bundle.proof, note).encode().decode()
    return out


def stored_entry(receipt: Json, vkey: str) -> Json:
    """A state-file entry remembering the receipt's own checkpoint."""
    note = decode_proof_bundle(receipt["proof"].encode()).checkpoint.decode()
    _, size, root = note.split("\n")[:3]
    return {
        "size": int(size),
        "root": root,
        "checkpoint": note,
        "vkey": vkey,
        "updated": "2026-01-01T00:00:00Z",
    }


def _delete(key: str) -> Callable[[Json], None]:
    def apply(receipt: Json) -> None:
        del receipt[key]

    return apply


# The Python verifier's tamper table (tests/notary/verifier/test_verifier.py), plus shape errors.
RECEIPT_TAMPERING: list[tuple[str, Callable[[Json], None], Json]] = [
    ("id", set_field("id", lambda _: new_receipt_id()), expect(failed={"signature", "inclusion"})),
    ("server", set_field("server", "other"), expect(failed={"record", "signature", "inclusion"})),
    ("tool", set_field("tool", "other"), expect(failed={"record", "signature", "inclusion"})),
    (
        "call_sha256",
        set_field("call_sha256", "ab" * 32),
        expect(failed={"record", "signature", "inclusion"}),
    ),
    (
        "issued_at",
        set_field("issued_at", "2020-01-01T00:00:00.000Z"),
        expect(failed={"signature", "inclusion"}),
    ),
    (
        "ledger-index",
        set_field("ledger.index", lambda i: i + 1),
        expect(failed={"signature", "inclusion"}),
    ),
    (
        "ledger-origin",
        set_field("ledger.origin", "other.example/log"),
        expect(failed={"signature", "inclusion"}),
    ),
    (
        "ledger-entry-url",
        set_field("ledger.entry_url", "https://elsewhere.example/x"),
        expect(failed={"signature"}),
    ),
    (
        "signature-sig",
        set_field("signature.sig", lambda s: ("B" if s[0] == "A" else "A") + s[1:]),
        expect(failed={"signature"}),
    ),
    ("signature-kid", set_field("signature.kid", "A" * 43), expect(failed={"signature"})),
    ("signature-alg", set_field("signature.alg", "ES256"), expect(failed={"signature"})),
    ("signature-missing", _delete("signature"), expect(failed={"signature"})),
    ("proof-hash", in_proof(proof_hash), expect(failed={"inclusion"})),
    ("checkpoint-root", in_proof(checkpoint_root), expect(failed={"inclusion"})),
    ("checkpoint-signature", in_proof(checkpoint_signature), expect(failed={"inclusion"})),
    (
        "proof-garbage",
        set_field("proof", "c2sp.org/tlog-proof@v1\nindex x\n"),
        expect(failed={"inclusion"}),
    ),
    ("proof-missing", _delete("proof"), expect(skipped={"inclusion", "witnesses", "consistency"})),
    ("malformed-spec", set_field("spec", "rs-tool-call/2"), MALFORMED),
    ("malformed-extra-member", set_field("extra", 1), MALFORMED),
    ("malformed-issued-at", set_field("issued_at", "2026-02-30T00:00:00.000Z"), MALFORMED),
    ("malformed-index-negative", set_field("ledger.index", -1), MALFORMED),
    ("malformed-index-unsafe", set_field("ledger.index", 2**53 + 1), MALFORMED),
    ("malformed-index-float", set_field("ledger.index", lambda i: float(i)), MALFORMED),
    ("malformed-index-bool", set_field("ledger.index", True), MALFORMED),
    ("malformed-signature-member", set_field("signature.extra", "x"), MALFORMED),
    ("malformed-proof-type", set_field("proof", 5), MALFORMED),
    ("malformed-call-sha256-upper", set_field("call_sha256", lambda h: h.upper()), MALFORMED),
    ("malformed-id", set_field("id", "tc_short"), MALFORMED),
]


def _saved(issued: Issued, **changes: Any) -> Json:
    return {**issued.saved, **changes}


def _with_meta(issued: Issued, **block: Any) -> Json:
    return {**issued.result, "_meta": {META_KEY: {**issued.meta, **block}}}


RECORD_TAMPERING: list[tuple[str, Callable[[Issued], Json]]] = [
    ("arguments", lambda c: {"format": "saved_call", "call": _saved(c, arguments={"x": 2})}),
    (
        "content",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result={**c.result, "content": [{"type": "text", "text": "forged"}]}),
        },
    ),
    (
        "structured-content",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result={**c.result, "structuredContent": {"echo": {"x": 2}}}),
        },
    ),
    (
        "is-error",
        lambda c: {"format": "saved_call", "call": _saved(c, result={**c.result, "isError": True})},
    ),
    (
        "salt",
        lambda c: {"format": "saved_call", "call": _saved(c, result=_with_meta(c, salt="00" * 16))},
    ),
    (
        "meta-call-sha256",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result=_with_meta(c, call_sha256="cd" * 32)),
        },
    ),
    (
        "meta-id",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result=_with_meta(c, id=new_receipt_id())),
        },
    ),
    (
        "tool",
        lambda c: {
            "format": "tool_result",
            "call": c.result,
            "tool": "other",
            "arguments": c.arguments,
        },
    ),
    ("server", lambda c: {"format": "saved_call", "call": _saved(c, server="other")}),
    (
        "input-required",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result={**c.result, "resultType": "input_required"}),
        },
    ),
    (
        "arguments-unsafe-integer",
        lambda c: {
            "format": "saved_call",
            "call_text": json.dumps(_saved(c, arguments={"x": 2**53 + 1})),
        },
    ),
    (
        "content-lone-surrogate",
        lambda c: {
            "format": "saved_call",
            "call_text": json.dumps(
                _saved(c, result={**c.result, "content": [{"type": "text", "text": "\ud800"}]})
            ),
        },
    ),
    (
        "salt-upper-case",
        lambda c: {
            "format": "saved_call",
            "call": _saved(c, result=_with_meta(c, salt=c.meta["salt"].upper())),
        },
    ),
]

INPUT_ERRORS: list[tuple[str, Callable[[Issued], Json]]] = [
    (
        "saved-call-unknown-member",
        lambda c: {"format": "saved_call", "call": {**c.saved, "extra": 1}},
    ),
    ("saved-call-no-tool", lambda c: {"format": "saved_call", "call": {"result": c.result}}),
    (
        "saved-call-tool-not-string",
        lambda c: {"format": "saved_call", "call": {**c.saved, "tool": 7}},
    ),
    (
        "saved-call-arguments-null",
        lambda c: {"format": "saved_call", "call": {**c.saved, "arguments": None}},
    ),
    (
        "saved-call-with-tool-flag",
        lambda c: {"format": "saved_call", "call": c.saved, "tool": "echo"},
    ),
    ("bare-result-without-tool", lambda c: {"format": "tool_result", "call": c.result}),
    ("bare-result-empty-tool", lambda c: {"format": "tool_result", "call": c.result, "tool": ""}),
    (
        "no-meta-block",
        lambda c: {"format": "saved_call", "call": _saved(c, result={**c.result, "_meta": {}})},
    ),
    (
        "meta-not-object",
        lambda c: {"format": "saved_call", "call": _saved(c, result={**c.result, "_meta": []})},
    ),
    (
        "not-notarized",
        lambda c: {
            "format": "saved_call",
            "call": _saved(
                c,
                result={
                    **c.result,
                    "_meta": {
                        META_KEY: {"spec": SPEC, "notarized": False, "reason": "notary down"}
                    },
                },
            ),
        },
    ),
    (
        "no-salt",
        lambda c: {"format": "saved_call", "call": _saved(c, result=_with_meta(c, salt=None))},
    ),
    (
        "embedded-receipt-not-object",
        lambda c: {"format": "saved_call", "call": _saved(c, result=_with_meta(c, receipt=5))},
    ),
    (
        "no-receipt-offline",
        lambda c: {
            "format": "saved_call",
            "call": _saved(
                c,
                result={
                    **c.result,
                    "_meta": {META_KEY: {k: v for k, v in c.meta.items() if k != "receipt"}},
                },
            ),
        },
    ),
    ("document-is-array", lambda c: {"format": "saved_call", "call": [c.saved]}),
    ("neither-call-nor-result", lambda c: {"format": "saved_call", "call": {"nothing": 1}}),
    (
        "jsonrpc-result-not-object",
        lambda c: {"format": "saved_call", "call": {"jsonrpc": "2.0", "id": 1, "result": "x"}},
    ),
    (
        "record-not-object",
        lambda c: {"format": "receipt_record", "receipt": c.receipt, "record": [1]},
    ),
    (
        "receipt-not-object",
        lambda c: {"format": "receipt_record", "receipt": "x", "record": c.record},
    ),
]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _dup_first(text: str, name: str, forged: str) -> str:
    """``text`` with ``"name": <forged>,`` inserted before the first member ``name``: a duplicate
    member name whose last value is the honest one (what a last-wins parser keeps)."""
    at = text.index(f'"{name}": ')
    return f'{text[:at]}"{name}": {forged}, {text[at:]}'


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def hostile_inputs(c: Issued) -> list[tuple[str, str, Json]]:
    """Documents two JSON parsers could read differently, or that break a parser's bounds: each
    must be refused by both verifiers as an input error (the strict rule of
    ledger.core.boundedjson), never verified. (name, description, input)."""
    saved = json.dumps(c.saved)
    receipt = json.dumps(c.receipt)
    record = json.dumps(c.record)
    meta_receipt = json.dumps(_saved(c, result=_with_meta(c)))
    forged = '[{"type": "text", "text": "FORGED"}]'
    out: list[tuple[str, str, Json]] = [
        (
            "duplicate-result-content",
            "a saved call whose result has content twice (forged first)",
            {"format": "saved_call", "call_text": _dup_first(saved, "content", forged)},
        ),
        (
            "duplicate-result-content-escaped",
            "content twice, once spelled with a \\u escape",
            {
                "format": "saved_call",
                "call_text": saved.replace(
                    '"content": ', '"\\u0063ontent": ' + forged + ', "content": ', 1
                ),
            },
        ),
        (
            "duplicate-receipt-server",
            'a receipt with "server":"evil","server":"srv"',
            {
                "format": "receipt_record",
                "receipt_text": _dup_first(receipt, "server", '"evil"'),
                "record": c.record,
            },
        ),
        (
            "duplicate-embedded-receipt-server",
            "the receipt in _meta names its server twice",
            {"format": "saved_call", "call_text": _dup_first(meta_receipt, "server", '"evil"')},
        ),
        (
            "duplicate-arguments-member",
            "the arguments name x twice",
            {"format": "saved_call", "call_text": _dup_first(saved, "x", "2")},
        ),
        (
            "duplicate-meta-salt",
            "the _meta block has two salts",
            {"format": "saved_call", "call_text": _dup_first(saved, "salt", '"' + "00" * 16 + '"')},
        ),
        (
            "duplicate-saved-call-tool",
            "a saved call naming two tools",
            {"format": "saved_call", "call_text": _dup_first(saved, "tool", '"other"')},
        ),
        (
            "duplicate-record-tool",
            "a call record naming two tools",
            {
                "format": "receipt_record",
                "receipt": c.receipt,
                "record_text": _dup_first(record, "tool", '"other"'),
            },
        ),
        (
            "duplicate-proto",
            "__proto__ twice in the arguments",
            {
                "format": "saved_call",
                "call_text": saved.replace(
                    '"arguments": {', '"arguments": {"__proto__": 1, "__proto__": 2, ', 1
                ),
            },
        ),
        (
            "duplicate-jsonrpc-result",
            "a JSON-RPC response with two results",
            {
                "format": "tool_result",
                "tool": c.tool,
                "arguments": c.arguments,
                "call_text": '{"jsonrpc": "2.0", "id": 1, "result": {"content": []}, "result": '
                + json.dumps(c.result)
                + "}",
            },
        ),
        (
            "nan-argument",
            "NaN as an argument value",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": NaN}', 1)},
        ),
        (
            "infinity-argument",
            "Infinity as an argument value",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": Infinity}', 1)},
        ),
        (
            "minus-infinity-argument",
            "-Infinity as an argument value",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": -Infinity}', 1)},
        ),
        (
            "nan-receipt-index",
            "NaN as the receipt's ledger index",
            {
                "format": "receipt_record",
                "record": c.record,
                "receipt_text": receipt.replace('"index": 0', '"index": NaN', 1),
            },
        ),
        ("nan-document", "the document is NaN", {"format": "saved_call", "call_text": "NaN"}),
        (
            "bom-saved-call",
            "a saved call after a UTF-8 byte order mark",
            {"format": "saved_call", "call_b64": _b64(b"\xef\xbb\xbf" + saved.encode())},
        ),
        (
            "bom-receipt",
            "a receipt after a UTF-8 byte order mark",
            {
                "format": "receipt_record",
                "receipt_b64": _b64(b"\xef\xbb\xbf" + receipt.encode()),
                "record": c.record,
            },
        ),
        (
            "bom-text",
            "a saved call after U+FEFF, given as text",
            {"format": "saved_call", "call_text": "\ufeff" + saved},
        ),
        (
            "utf16-saved-call",
            "a saved call in UTF-16 (little-endian, with its BOM)",
            {"format": "saved_call", "call_b64": _b64(saved.encode("utf-16"))},
        ),
        (
            "utf16be-saved-call",
            "a saved call in UTF-16BE without a BOM",
            {"format": "saved_call", "call_b64": _b64(saved.encode("utf-16-be"))},
        ),
        (
            "invalid-utf8-byte",
            "a 0xFF byte inside a string of the result",
            {
                "format": "saved_call",
                "call_b64": _b64(saved.encode().replace(b'"x": 1', b'"x\xff": 1', 1)),
            },
        ),
        (
            "invalid-utf8-overlong",
            "an overlong encoding of '/' (C0 AF) in a string",
            {
                "format": "saved_call",
                "call_b64": _b64(saved.encode().replace(b'"echo"', b'"ec\xc0\xafho"', 1)),
            },
        ),
        (
            "invalid-utf8-surrogate",
            "a UTF-8-encoded surrogate (ED A0 80) in a string",
            {
                "format": "saved_call",
                "call_b64": _b64(saved.encode().replace(b'"echo"', b'"ec\xed\xa0\x80ho"', 1)),
            },
        ),
        (
            "invalid-utf8-truncated",
            "a multi-byte sequence cut short at the end",
            {"format": "saved_call", "call_b64": _b64(saved.encode() + b"\xe2\x82")},
        ),
        (
            "invalid-utf8-receipt",
            "a Latin-1 byte in the receipt",
            {
                "format": "receipt_record",
                "record": c.record,
                "receipt_b64": _b64(receipt.encode().replace(b'"srv"', b'"sr\xe9"', 1)),
            },
        ),
        (
            "nesting-above-bound",
            f"arguments nested to {MAX_INPUT_DEPTH + 1} in all",
            {
                "format": "saved_call",
                "call_text": saved.replace(
                    '{"x": 1}', '{"x": ' + _nest(MAX_INPUT_DEPTH - 1) + "}", 1
                ),
            },
        ),
        (
            "nesting-far-above-bound",
            "arrays nested 600 deep (over the old JavaScript bound too)",
            {
                "format": "saved_call",
                "call_text": saved.replace('{"x": 1}', '{"x": ' + _nest(600) + "}", 1),
            },
        ),
        (
            "nesting-receipt-above-bound",
            f"a receipt nested to {MAX_INPUT_DEPTH + 1}",
            {
                "format": "receipt_record",
                "record": c.record,
                "receipt_text": receipt[:-1] + ', "x": ' + _nest(MAX_INPUT_DEPTH) + "}",
            },
        ),
        (
            "nesting-unbalanced",
            "300 openers and nothing else",
            {"format": "saved_call", "call_text": "[" * 300},
        ),
        (
            "integer-too-long",
            "an argument integer of 4301 digits",
            {
                "format": "saved_call",
                "call_text": saved.replace('{"x": 1}', '{"x": 1' + "0" * 4300 + "}", 1),
            },
        ),
        (
            "nbsp-before-document",
            "U+00A0 (not JSON whitespace) before the document",
            {"format": "saved_call", "call_text": "\u00a0" + saved},
        ),
        (
            "form-feed-before-document",
            "a form feed (not JSON whitespace) before the document",
            {"format": "saved_call", "call_text": "\f" + saved},
        ),
        (
            "nul-after-document",
            "a NUL byte after the document",
            {"format": "saved_call", "call_b64": _b64(saved.encode() + b"\x00")},
        ),
        (
            "trailing-comma",
            "a trailing comma in the arguments",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": 1,}', 1)},
        ),
        (
            "single-quotes",
            "a single-quoted string",
            {"format": "saved_call", "call_text": saved.replace('"echo"', "'echo'", 1)},
        ),
        (
            "comment",
            "a comment after the document",
            {"format": "saved_call", "call_text": saved + " // note"},
        ),
        (
            "second-document",
            "two documents one after the other",
            {"format": "saved_call", "call_text": saved + saved},
        ),
        (
            "raw-control-character",
            "a raw tab inside a string",
            {"format": "saved_call", "call_text": saved.replace('"echo"', '"ec\tho"', 1)},
        ),
        (
            "leading-plus",
            "a number with a leading +",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": +1}', 1)},
        ),
        (
            "hex-number",
            "a hexadecimal number",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": 0x1}', 1)},
        ),
        (
            "leading-zero",
            "a number with a leading zero",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": 01}', 1)},
        ),
    ]
    return out


def hostile_verdicts(c: Issued) -> list[tuple[str, str, Json, Json]]:
    """Inputs the strict parser reads but that must still get one verdict in both verifiers."""
    saved = json.dumps(c.saved)
    receipt = json.dumps(c.receipt)
    return [
        (
            "nesting-at-bound",
            f"arguments nested to exactly {MAX_INPUT_DEPTH}, the parser's bound",
            {
                "format": "saved_call",
                "call_text": saved.replace(
                    '{"x": 1}', '{"x": ' + _nest(MAX_INPUT_DEPTH - 2) + "}", 1
                ),
            },
            expect(failed={"record"}),
        ),
        (
            "nesting-receipt-at-bound",
            f"a receipt nested to exactly {MAX_INPUT_DEPTH}",
            {
                "format": "receipt_record",
                "record": c.record,
                "receipt_text": receipt[:-1] + ', "x": ' + _nest(MAX_INPUT_DEPTH - 1) + "}",
            },
            MALFORMED,
        ),
        (
            "float-overflow",
            "1e400 as an argument (a float that is infinite)",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": 1e400}', 1)},
            expect(failed={"record"}),
        ),
        (
            "integer-4300-digits",
            "an argument integer of 4300 digits (read, then not hashable)",
            {
                "format": "saved_call",
                "call_text": saved.replace('{"x": 1}', '{"x": 1' + "0" * 4299 + "}", 1),
            },
            expect(failed={"record"}),
        ),
        (
            "minus-zero",
            "-0 as the argument, the integer 0",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"x": -0}', 1)},
            expect(failed={"record"}),
        ),
        (
            "names-differ-in-case",
            "x and X are two members, not a duplicate",
            {"format": "saved_call", "call_text": saved.replace('{"x": 1}', '{"X": 1, "x": 1}', 1)},
            expect(failed={"record"}),
        ),
        (
            "prototype-names",
            "constructor, toString and __proto__ once each, as plain members",
            {
                "format": "saved_call",
                "call_text": saved.replace(
                    '{"x": 1}', '{"constructor": 1, "toString": 2, "__proto__": 3, "x": 1}', 1
                ),
            },
            expect(failed={"record"}),
        ),
    ]


def _example(name: str) -> ModuleType:
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_corpus_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flip_line(receipt: Json, name: str, *, long: bool) -> Json:
    """The receipt with one signature line of its proof's checkpoint corrupted: the line by
    ``name`` whose signature is long (ML-DSA-44) or short (Ed25519)."""
    bundle = decode_proof_bundle(receipt["proof"].encode())
    lines = bundle.checkpoint.decode().split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith(f"\u2014 {name} ")
             and (len(line) > 500) == long)
    head, b64 = lines[i].rsplit(" ", 1)
    raw = bytearray(base64.b64decode(b64))
    raw[100 if long else 10] ^= 1  # inside the signature, past the key ID (and timestamp)
    lines[i] = f"{head} {base64.b64encode(bytes(raw)).decode()}"
    out = copy.deepcopy(receipt)
    out["proof"] = ProofBundle(bundle.index, bundle.proof,
                               "\n".join(lines).encode()).encode().decode()
    return out


async def _dual_signed(corpus: Corpus, receipt_id: str) -> tuple[str, Json]:
    """The log's ML-DSA-44 vkey (from /v1/ledger vkeys) and the receipt fetched again until its
    checkpoint carries both log lines (the log dual-signs what it serves at most once a
    second)."""
    async with corpus.http.get(corpus.url + "/v1/ledger") as r:
        pq_vkey: str = (await r.json())["vkeys"][1]
    for _ in range(100):
        fetched = await corpus.fetch_receipt(receipt_id)
        if len(parse_note(decode_proof_bundle(fetched["proof"].encode()).checkpoint)
               .signatures) == 2:
            return pq_vkey, fetched
        await asyncio.sleep(0.05)
    raise AssertionError("the notary never served the receipt dual-signed")


async def _post_quantum(corpus: Corpus, base: Issued, req4: list[str]) -> None:
    """Trust in ML-DSA-44 keys alone: the log's derived key (from /v1/ledger vkeys) and an
    ML-DSA-44 witness; a receipt as issued (Ed25519-only checkpoint) and fetched again
    (dual-signed), and corrupted ML-DSA-44 lines."""
    pq_vkey, upgraded = await _dual_signed(corpus, base.receipt["id"])
    origin = corpus.signer.name
    trust = {**corpus.trust, "log_keys": [pq_vkey]}
    call = {"format": "saved_call", "call": base.saved}
    corpus.add("pq-log-key-dual-signed", "the log's ML-DSA-44 key alone: the receipt fetched "
               "again carries the dual-signed checkpoint", {**call, "receipt": upgraded},
               expect(), trust=trust)
    corpus.add("pq-log-key-as-issued", "the log's ML-DSA-44 key alone: the receipt as issued "
               "has only the Ed25519 line", call, expect(failed={"inclusion"}), trust=trust)
    corpus.add("pq-log-line-corrupted", "the log's ML-DSA-44 line corrupted",
               {**call, "receipt": _flip_line(upgraded, origin, long=True)},
               expect(failed={"inclusion"}), trust=trust)
    corpus.add("pq-ed25519-key-ignores-the-ml-dsa-line", "the Ed25519 log key verifies a "
               "dual-signed checkpoint whose ML-DSA-44 line is corrupted (not its key)",
               {**call, "receipt": _flip_line(upgraded, origin, long=True)}, expect())
    w = SubtreeCosignatureSigner.generate("witness.example/pq")
    text = parse_note(decode_proof_bundle(upgraded["proof"].encode()).checkpoint).text
    bundle = decode_proof_bundle(upgraded["proof"].encode())
    cosigned = copy.deepcopy(upgraded)
    cosigned["proof"] = ProofBundle(bundle.index, bundle.proof, merge_signatures(
        bundle.checkpoint, [w.cosign(text, 1_700_000_000)])).encode().decode()
    policy = f"log {pq_vkey}\nwitness W {w.verifier_key_text()}\nquorum W\n"
    ptrust = {**corpus.trust, "log_keys": [], "policy": policy}
    corpus.add("pq-policy-met", "a tlog-policy of ML-DSA-44 keys only (log and witness), met",
               {**call, "receipt": cosigned}, expect(passed={"witnesses"}, required=req4),
               trust=ptrust)
    corpus.add("pq-policy-no-cosignature", "a tlog-policy of ML-DSA-44 keys only, no "
               "cosignature", {**call, "receipt": upgraded},
               expect(failed={"witnesses"}, required=req4), trust=ptrust)
    corpus.add("pq-policy-witness-line-corrupted", "a tlog-policy of ML-DSA-44 keys only, the "
               "witness's line corrupted",
               {**call, "receipt": _flip_line(cosigned, "witness.example/pq", long=True)},
               expect(failed={"witnesses"}, required=req4), trust=ptrust)
    corpus.add("pq-witness-key", "an ML-DSA-44 witness key with a quorum of 1",
               {**call, "receipt": cosigned}, expect(passed={"witnesses"}, required=req4),
               trust={**corpus.trust, "witnesses": [w.verifier_key_text()], "quorum": 1})


async def _bom_origin(corpus: Corpus) -> None:
    """A log whose origin starts with U+FEFF (a character like any other inside a note: only a
    JSON text may not start with a BOM), its dual-signed receipt verified under the log's
    ML-DSA-44 key alone and under its Ed25519 key alone: both verifiers must keep the
    character in the checkpoint text the signatures cover, and in the one they remember."""
    with tempfile.TemporaryDirectory(prefix="notary-corpus-bom-") as tmp:
        async with app_notary(Path(tmp) / "data", origin="\ufeffcorpus.example/bom") as app:
            async with corpus.http.get(app.url + "/.well-known/jwks.json") as r:
                jwks = await r.json()
            log = Corpus(corpus.out, app.url, await app.new_api_key("corpus"), jwks, app.vkey,
                         load_log_key(Paths(app.data)), corpus.http, corpus.cases)
            issued = await log.notarize("echo", x=1)
            pq_vkey, upgraded = await _dual_signed(log, issued.receipt["id"])
    assert parse_note(decode_proof_bundle(upgraded["proof"].encode()).checkpoint).text[0] \
        == "\ufeff"
    call = {"format": "saved_call", "call": issued.saved, "receipt": upgraded}
    log.add("pq-bom-origin-ml-dsa-key", "a log whose origin starts with U+FEFF, its "
            "dual-signed checkpoint under the log's ML-DSA-44 key alone", call, expect(),
            trust={**log.trust, "log_keys": [pq_vkey]})
    log.add("pq-bom-origin-ed25519-key", "a log whose origin starts with U+FEFF, its "
            "dual-signed checkpoint under the log's Ed25519 key alone", call, expect())
    log.add("pq-bom-origin-remembered", "a log whose origin starts with U+FEFF, its checkpoint "
            "remembered by the verifier (the state keeps the character)", call,
            expect(passed={"consistency"}, required=[*BASE_REQUIRED, "consistency"]),
            trust={**log.trust, "log_keys": [pq_vkey]},
            state={pq_vkey: stored_entry(upgraded, pq_vkey)})


async def _frozen_log(corpus: Corpus) -> None:
    """A receipt of a log the notary has rolled away from (docs/lifecycle.md): served with its
    proof to the frozen log's final checkpoint (whose last entry is the successor record), it
    verifies under that log's key, and under the next log's key alone it does not."""
    with tempfile.TemporaryDirectory(prefix="notary-corpus-roll-") as tmp:
        async with app_notary(Path(tmp) / "data", origin="corpus.example/rolled") as app:
            async with corpus.http.get(app.url + "/.well-known/jwks.json") as r:
                jwks = await r.json()
            log = Corpus(corpus.out, app.url, await app.new_api_key("corpus"), jwks, app.vkey,
                         load_log_key(Paths(app.data)), corpus.http, corpus.cases)
            issued = await log.notarize("echo", x=1)
            store = await SqliteNotaryStore.open(Paths(app.data).db)  # as `notary log roll` does
            try:
                rolled = await roll(store, load_log_key(Paths(app.data)))
            finally:
                await store.close()
            for _ in range(100):  # the running notary follows the roll within seconds
                async with corpus.http.get(
                        f"{app.url}/v1/tool-calls/{issued.receipt['id']}") as r:
                    frozen = await r.json()
                proof = decode_proof_bundle(frozen["proof"].encode())
                final = parse_checkpoint_text(parse_note(proof.checkpoint).text)
                if final.size == rolled.frozen.final_size:
                    break
                await asyncio.sleep(0.1)
    first, second = rolled.frozen.vkeys[0], rolled.active.vkeys[0]
    assert first == app.vkey
    assert final.size == rolled.frozen.final_size == issued.receipt["ledger"]["index"] + 2
    call = {"format": "saved_call", "call": issued.saved, "receipt": frozen}
    log.add("frozen-log-receipt", "a receipt of a frozen log, its proof to the log's final "
            "checkpoint, under the keys of both logs", call, expect(),
            trust={**log.trust, "log_keys": [second, first]})
    log.add("frozen-log-receipt-next-key-only", "a receipt of a frozen log under the next "
            "log's key alone", call, expect(failed={"inclusion"}),
            trust={**log.trust, "log_keys": [second]})


async def python_sdk_results(corpus: Corpus) -> None:
    """Results of the example MCPServer notarized by the Python SDK, as its clients saved them."""
    # as tests/notary/sdk/test_sdk_mcp.py loads them
    notarized_server = _example("notarized_server")
    sample_calls: list[tuple[str, Json | None]] = _example("verifying_client").SAMPLE_CALLS
    for mode in ("auto", "legacy"):
        async with NotaryClient(corpus.url, corpus.api_key) as notary:
            server = notarized_server.build_server(Notarizer(notary, "py-sdk"))
            async with Client(server, mode=mode) as client:
                for tool, arguments in sample_calls:
                    result = await client.call_tool(tool, arguments)
                    doc = {
                        "tool": tool,
                        "arguments": arguments or {},
                        "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"),
                    }
                    corpus.add(
                        f"python-sdk-{mode}-{tool.replace('_', '-')}",
                        f"a result of the Python SDK's notarize_server ({mode} mode), "
                        "as the client saved it",
                        {"format": "saved_call", "call": doc},
                        expect(),
                    )


async def build(out: Path) -> list[Json]:
    """Generate every case into ``out``; returns the cases."""
    with tempfile.TemporaryDirectory(prefix="notary-corpus-") as tmp:
        async with app_notary(Path(tmp) / "data") as app, aiohttp.ClientSession() as http:
            async with http.get(app.url + "/.well-known/jwks.json") as r:
                jwks = await r.json()
            corpus = Corpus(
                out,
                app.url,
                await app.new_api_key("corpus"),
                jwks,
                app.vkey,
                load_log_key(Paths(app.data)),
                http,
            )
            await _build(corpus)
    corpus.write()
    return corpus.cases


async def _build(corpus: Corpus) -> None:
    trust = corpus.trust
    base = await corpus.notarize("echo", x=1)

    # Valid, every input format ---------------------------------------------------------------
    corpus.add(
        "valid-saved-call",
        "a saved tool call",
        {"format": "saved_call", "call": base.saved},
        expect(),
    )
    corpus.add(
        "valid-saved-call-server",
        "a saved tool call naming its server",
        {"format": "saved_call", "call": {**base.saved, "server": "srv"}},
        expect(),
    )
    corpus.add(
        "valid-tool-result",
        "a bare CallToolResult with the tool and arguments",
        {"format": "tool_result", "call": base.result, "tool": "echo", "arguments": {"x": 1}},
        expect(),
    )
    corpus.add(
        "valid-jsonrpc-response",
        "a JSON-RPC response carrying the result",
        {
            "format": "tool_result",
            "call": {"jsonrpc": "2.0", "id": 7, "result": base.result},
            "tool": "echo",
            "arguments": {"x": 1},
        },
        expect(),
    )
    corpus.add(
        "valid-receipt-record",
        "a receipt and its record (without server)",
        {"format": "receipt_record", "receipt": base.receipt, "record": base.record},
        expect(),
    )
    corpus.add(
        "valid-receipt-record-server",
        "a receipt and its record naming the server",
        {
            "format": "receipt_record",
            "receipt": base.receipt,
            "record": {**base.record, "server": "srv", "spec": SPEC},
        },
        expect(),
    )
    corpus.add(
        "valid-receipt-override",
        "a saved call with the receipt given separately",
        {"format": "saved_call", "call": base.saved, "receipt": base.receipt},
        expect(),
    )
    corpus.add(
        "receipt-without-record",
        "a receipt alone: level 1 is skipped, so not valid",
        {"format": "receipt_only", "receipt": base.receipt},
        expect(skipped={"record", "witnesses", "consistency"}),
    )
    corpus.add(
        "valid-unhashed-members",
        "resultType and other _meta keys are not hashed",
        {
            "format": "saved_call",
            "call": _saved(
                base,
                result={
                    **base.result,
                    "resultType": "complete",
                    "_meta": {"other": 1, META_KEY: base.meta},
                },
            ),
        },
        expect(),
    )
    traps = await corpus.notarize(
        "traps",
        result={
            "content": [{"type": "text", "text": "a\u2028b \U0001f600 \u00e9"}],
            "structuredContent": {
                "\U0001f600": 1,
                "\uffff": 2,
                "10": 3,
                "9": 4,
                "n": 1e21,
                "f": 0.1,
                "z": -0.0,
                "big": 2**53,
                "t": 10**18,
            },
            "isError": False,
        },
        **{"\U0001f600": [1e-7, 5e-324], "10": {"9": None}},
    )
    corpus.add(
        "valid-jcs-traps",
        "a record full of JCS traps, notarized",
        {"format": "saved_call", "call": traps.saved},
        expect(),
    )
    structured = {
        "array": [1, "two", None],
        "string": "text",
        "number": 2.5,
        "true": True,
        "false": False,
        "null": None,
    }
    for kind, value in structured.items():
        c = await corpus.notarize(
            f"sc-{kind}",
            result={
                "content": [{"type": "text", "text": kind}],
                "structuredContent": value,
                "isError": False,
            },
        )
        corpus.add(
            f"valid-structured-content-{kind}",
            f"structuredContent that is {kind}: hashed exactly as sent",
            {"format": "saved_call", "call": c.saved},
            expect(),
        )
    no_is_error = await corpus.notarize("plain", result={"content": []})
    corpus.add(
        "valid-no-is-error",
        "a result without isError or structuredContent",
        {"format": "saved_call", "call": no_is_error.saved},
        expect(),
    )

    # The Python SDK --------------------------------------------------------------------------
    await python_sdk_results(corpus)

    # Receipt tampering, with a proof of several hashes ---------------------------------------
    calls = [await corpus.notarize(i=i) for i in range(3)]
    c1 = calls[1]
    fresh = await corpus.fetch_receipt(c1.receipt["id"])
    assert len(decode_proof_bundle(fresh["proof"].encode()).proof) >= 2
    corpus.add(
        "tamper-none",
        "the untampered receipt the tamper cases start from",
        {"format": "receipt_record", "receipt": fresh, "record": c1.record},
        expect(),
    )
    for name, tamper, exp in RECEIPT_TAMPERING:
        bad = copy.deepcopy(fresh)
        tamper(bad)
        inp: Json = {"format": "receipt_record", "receipt": bad, "record": c1.record}
        if name in ("malformed-index-unsafe", "malformed-index-float"):
            inp = {"format": "receipt_record", "receipt_text": json.dumps(bad), "record": c1.record}
        corpus.add(f"tamper-receipt-{name}", f"the receipt's {name} changed", inp, exp)

    # Record tampering: level 1 alone fails ----------------------------------------------------
    for name, build_input in RECORD_TAMPERING:
        corpus.add(
            f"tamper-record-{name}",
            f"the record's {name} changed",
            build_input(base),
            expect(failed={"record"}),
        )

    # Input errors ----------------------------------------------------------------------------
    for name, build_input in INPUT_ERRORS:
        corpus.add(f"input-{name}", f"an unusable input: {name}", build_input(base), error())

    # Hostile inputs: one strict JSON rule and one depth bound in both verifiers --------------
    for name, description, inp in hostile_inputs(base):
        corpus.add(f"hostile-{name}", description, inp, error())
    for name, description, inp, exp in hostile_verdicts(base):
        corpus.add(f"hostile-{name}", description, inp, exp)

    # Trust -----------------------------------------------------------------------------------
    stranger_jwks = {
        "keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
        ]
    }
    other_log = Ed25519Signer.generate(corpus.signer.name).verifier().vkey
    another_origin = Ed25519Signer.generate("another.example/log").verifier().vkey
    corpus.add(
        "trust-other-receipt-key",
        "a JWKS without the receipt's key",
        {"format": "saved_call", "call": base.saved},
        expect(failed={"signature"}),
        trust={**trust, "jwks": stranger_jwks},
    )
    corpus.add(
        "trust-other-log-key-same-origin",
        "another key under the log's origin",
        {"format": "saved_call", "call": base.saved},
        expect(failed={"inclusion"}),
        trust={**trust, "log_keys": [other_log]},
    )
    corpus.add(
        "trust-log-key-other-origin",
        "a log key for another origin only",
        {"format": "saved_call", "call": base.saved},
        expect(failed={"inclusion"}),
        trust={**trust, "log_keys": [another_origin]},
    )
    corpus.add(
        "trust-rotated-log-keys",
        "two keys for the origin, the signer second",
        {"format": "saved_call", "call": base.saved},
        expect(),
        trust={**trust, "log_keys": [other_log, corpus.vkey]},
    )
    corpus.add(
        "trust-no-jwks",
        "no receipt keys: level 2 skipped, so not valid",
        {"format": "saved_call", "call": base.saved},
        expect(skipped={"signature", "witnesses", "consistency"}),
        trust={**trust, "jwks": None},
    )
    corpus.add(
        "trust-no-log-key",
        "no log key: level 3 skipped, so not valid",
        {"format": "saved_call", "call": base.saved},
        expect(skipped={"inclusion", "witnesses", "consistency"}),
        trust={**trust, "log_keys": []},
    )
    corpus.add(
        "trust-empty-jwks",
        "a JWKS with no Ed25519 key is unusable",
        {"format": "saved_call", "call": base.saved},
        error(),
        trust={**trust, "jwks": {"keys": []}},
    )
    corpus.add(
        "trust-jwks-private-key",
        "a JWKS holding a private key is refused",
        {"format": "saved_call", "call": base.saved},
        error(),
        trust={**trust, "jwks": {"keys": [{**jwks_key(corpus.jwks), "d": "AAAA"}]}},
    )
    corpus.add(
        "trust-bad-log-key",
        "a malformed log key",
        {"format": "saved_call", "call": base.saved},
        error(),
        trust={**trust, "log_keys": ["nope"]},
    )

    # Level 4: witnesses ----------------------------------------------------------------------
    w1, w2, w3 = (CosignatureSigner.generate(f"witness-{i}.example") for i in (1, 2, 3))
    keys = [w.verifier_key_text() for w in (w1, w2, w3)]
    cosigned = cosign(base.receipt, w1, w2)
    witnessed = {"format": "saved_call", "call": base.saved, "receipt": cosigned}
    req4 = [*BASE_REQUIRED, "witnesses"]
    corpus.add(
        "witness-quorum-2-of-3",
        "cosigned by two of three witnesses, quorum 2",
        witnessed,
        expect(passed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys, "quorum": 2},
    )
    corpus.add(
        "witness-quorum-3-of-3-short",
        "cosigned by two, quorum 3",
        witnessed,
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys, "quorum": 3},
    )
    corpus.add(
        "witness-default-quorum",
        "no quorum given: all witnesses (3) are needed",
        witnessed,
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys, "quorum": None},
    )
    corpus.add(
        "witness-quorum-0",
        "witness keys but quorum 0: level 4 is not asked for",
        witnessed,
        expect(),
        trust={**trust, "witnesses": keys, "quorum": 0},
    )
    corpus.add(
        "witness-quorum-too-large",
        "a quorum larger than the witnesses is an input error",
        witnessed,
        error(),
        trust={**trust, "witnesses": keys[:1], "quorum": 2},
    )
    forged = cosign(base.receipt, w1)
    forged["proof"] = last_signature(forged["proof"])
    corpus.add(
        "witness-forged-cosignature",
        "a known witness's cosignature that does not verify",
        {"format": "saved_call", "call": base.saved, "receipt": forged},
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys[:1], "quorum": 1},
    )
    alias = CosignatureSigner(f"alias-{w1.name}", w1.seed).verifier_key_text()
    corpus.add(
        "witness-same-key-two-names",
        "one witness key under two names counts once: a quorum of 2 cannot be met (refused)",
        witnessed,
        error("input"),
        trust={**trust, "witnesses": [keys[0], alias], "quorum": 2},
    )
    corpus.add(
        "witness-log-key-as-witness",
        "the log's own key never counts as a witness",
        witnessed,
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": [corpus.vkey], "quorum": 1},
    )
    plain = Ed25519Signer.generate("plain-witness.example")
    corpus.add(
        "witness-plain-ed25519",
        "a witness signing the note with a plain Ed25519 key",
        {"format": "saved_call", "call": base.saved, "receipt": cosign(base.receipt, plain=plain)},
        expect(passed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": [plain.verifier().vkey], "quorum": 1},
    )
    corpus.add(
        "witness-uncosigned-receipt",
        "the receipt as issued carries no cosignature",
        {"format": "saved_call", "call": base.saved},
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys, "quorum": 1},
    )
    corpus.add(
        "witness-on-failed-inclusion",
        "no verified checkpoint: level 4 skipped",
        {"format": "saved_call", "call": base.saved, "receipt": cosign(base.receipt, w1, w2)},
        expect(failed={"inclusion"}, skipped={"witnesses", "consistency"}, required=req4),
        trust={**trust, "log_keys": [other_log], "witnesses": keys, "quorum": 2},
    )

    # Level 4: tlog-policy --------------------------------------------------------------------
    wa, wb = (w.verifier_key_text() for w in (w1, w2))
    policy_any = f"log {corpus.vkey}\nwitness A {wa}\nwitness B {wb}\ngroup G any A B\nquorum G\n"
    policy_all = f"log {corpus.vkey}\nwitness A {wa}\nwitness B {wb}\ngroup G all A B\nquorum G\n"
    one = {"format": "saved_call", "call": base.saved, "receipt": cosign(base.receipt, w1)}
    ptrust = {**trust, "log_keys": [], "policy": policy_any}
    corpus.add(
        "policy-any-met",
        "policy: any of A, B; A cosigned; the policy's log key only",
        one,
        expect(passed={"witnesses"}, required=req4),
        trust=ptrust,
    )
    corpus.add(
        "policy-all-short",
        "policy: all of A, B; only A cosigned",
        one,
        expect(failed={"witnesses"}, required=req4),
        trust={**ptrust, "policy": policy_all},
    )
    corpus.add(
        "policy-quorum-none",
        "policy without a quorum: level 4 not asked for",
        {"format": "saved_call", "call": base.saved},
        expect(),
        trust={**ptrust, "policy": f"log {corpus.vkey}\nquorum none\n"},
    )
    corpus.add(
        "policy-other-log",
        "policy trusting another log only",
        {"format": "saved_call", "call": base.saved},
        expect(failed={"inclusion"}, skipped={"witnesses", "consistency"}, required=req4),
        trust={**ptrust, "policy": f"log {another_origin}\nwitness A {wa}\nquorum A\n"},
    )
    corpus.add(
        "policy-malformed",
        "a malformed policy is an input error",
        {"format": "saved_call", "call": base.saved},
        error(),
        trust={**ptrust, "policy": "witness A nope\nquorum A\n"},
    )

    # One bound on group nesting and one decoding rule (UTF-8, no BOM) in both parsers.
    def nested(depth: int) -> str:
        lines = [f"log {corpus.vkey}", f"witness A {wa}", "group G1 any A"]
        lines += [f"group G{i} any G{i - 1}" for i in range(2, depth + 1)]
        return "\n".join([*lines, f"quorum G{depth}", ""])

    for name, description, policy, exp in [
        (
            "policy-nested-at-bound",
            f"groups nested {MAX_GROUP_DEPTH} deep",
            nested(MAX_GROUP_DEPTH),
            expect(passed={"witnesses"}, required=req4),
        ),
        (
            "policy-nested-above-bound",
            f"groups nested {MAX_GROUP_DEPTH + 1} deep",
            nested(MAX_GROUP_DEPTH + 1),
            error(),
        ),
        (
            "policy-nested-400",
            "groups nested 400 deep (Python recursed, JavaScript at 3,000)",
            nested(400),
            error(),
        ),
    ]:
        corpus.add(name, description, one, exp, trust={**ptrust, "policy": policy})
    for name, description, raw in [
        (
            "policy-bom",
            "a policy after a UTF-8 byte order mark",
            b"\xef\xbb\xbf" + policy_any.encode(),
        ),
        (
            "policy-invalid-utf8",
            "a witness URL with a 0xFF byte",
            policy_any.replace(
                f"witness B {wb}", f"witness B {wb} https://b\udcff.example", 1
            ).encode("utf-8", "surrogateescape"),
        ),
        (
            "policy-invalid-utf8-url",
            "a log URL in Latin-1",
            policy_any.replace(
                f"log {corpus.vkey}", f"log {corpus.vkey} https://caf\udce9.example", 1
            ).encode("utf-8", "surrogateescape"),
        ),
    ]:
        corpus.add(
            name,
            description,
            one,
            error(),
            trust={**ptrust, "policy": None, "policy_b64": base64.b64encode(raw).decode()},
        )
    corpus.add(
        "policy-and-quorum",
        "a policy with a quorum and --quorum together",
        one,
        error(),
        trust={**ptrust, "witnesses": [wa], "quorum": 1, "policy": policy_any},
    )

    await _post_quantum(corpus, base, req4)
    await _bom_origin(corpus)
    await _frozen_log(corpus)

    # Level 5, offline, with the verifier's memory --------------------------------------------
    origin = corpus.signer.name
    c0 = calls[0]
    req5 = [*BASE_REQUIRED, "consistency"]
    corpus.add(
        "state-same-checkpoint",
        "the stored checkpoint is the receipt's: passed, required",
        {"format": "saved_call", "call": c0.saved},
        expect(passed={"consistency"}, required=req5),
        state={origin: stored_entry(c0.receipt, corpus.vkey)},
    )
    corpus.add(
        "state-older-checkpoint",
        "a smaller stored checkpoint needs a proof: skipped offline",
        {"format": "saved_call", "call": calls[2].saved},
        expect(),
        state={origin: stored_entry(c0.receipt, corpus.vkey)},
    )
    corpus.add(
        "state-newer-checkpoint",
        "a larger stored checkpoint needs a proof: skipped offline",
        {"format": "saved_call", "call": c0.saved},
        expect(),
        state={origin: stored_entry(calls[2].receipt, corpus.vkey)},
    )
    corpus.add(
        "state-other-origin",
        "a stored checkpoint of another log is not compared",
        {"format": "saved_call", "call": c0.saved},
        expect(),
        state={"another.example/log": stored_entry(c0.receipt, corpus.vkey)},
    )
    # A log is its origin and its key: a notary that started over under the same origin (a new
    # key) is another log, its checkpoints neither compared nor taken for tampering. Entries of
    # older state files, keyed by origin alone, count for the key they name, or none.
    restarted = Ed25519Signer.generate(origin)
    other = await Log.open(MemoryStore(), signer=restarted)
    await other.append(LogEntry.from_receipt(base.receipt).encode())
    other_head = await other.head(0)
    assert other_head is not None
    await other.close()
    other_vkey = restarted.verifier().vkey
    other_note = other_head.note.decode()
    other_entry = {
        "size": other_head.size,
        "root": other_note.split("\n")[2],
        "checkpoint": other_note,
        "vkey": other_vkey,
        "updated": "2026-01-01T00:00:00Z",
    }
    for name, description, state, exp in [
        (
            "state-keyed-by-log-key",
            "the stored checkpoint, kept under the log verifier key",
            {corpus.vkey: stored_entry(c0.receipt, corpus.vkey)},
            expect(passed={"consistency"}, required=req5),
        ),
        (
            "state-other-key",
            "a checkpoint of the same origin under another key: another log, not compared",
            {other_vkey: other_entry},
            expect(),
        ),
        (
            "state-other-key-by-origin",
            "an older file's entry (keyed by origin) naming another key: another log",
            {origin: other_entry},
            expect(),
        ),
        (
            "state-other-key-by-origin-no-vkey",
            "an older file's entry naming no key, whose checkpoint another key signed",
            {origin: {**other_entry, "vkey": ""}},
            expect(),
        ),
        (
            "state-by-origin-no-vkey",
            "an older file's entry naming no key, signed by this log's key: compared",
            {origin: {**stored_entry(c0.receipt, corpus.vkey), "vkey": ""}},
            expect(passed={"consistency"}, required=req5),
        ),
        (
            "state-both-keys",
            "entries of both logs of the origin: this key's is compared",
            {other_vkey: other_entry, corpus.vkey: stored_entry(c0.receipt, corpus.vkey)},
            expect(passed={"consistency"}, required=req5),
        ),
        (
            "state-tampered-by-log-key",
            "an entry under this log key whose checkpoint does not verify under it: altered",
            {corpus.vkey: {**other_entry, "vkey": corpus.vkey}},
            expect(failed={"consistency"}, required=req5),
        ),
    ]:
        corpus.add(name, description, {"format": "saved_call", "call": c0.saved}, exp, state=state)
    fork = await Log.open(MemoryStore(), signer=corpus.signer)
    for e in [
        LogEntry.from_receipt(base.receipt).encode(),
        LogEntry(
            id=new_receipt_id(),
            server="evil",
            tool="t",
            call_sha256=b"\x07" * 32,
            issued_at=now_issued_at(),
        ).encode(),
    ]:
        await fork.append(e)
    head = await fork.head(0)
    assert head is not None
    forked = {**base.receipt, "proof": (await fork.proof_bundle(0, head)).encode().decode()}
    await fork.close()
    honest_size_2 = traps  # issued at index 1: its proof ends in the honest size-2 checkpoint
    assert traps.receipt["ledger"]["index"] == 1 and base.receipt["ledger"]["index"] == 0
    corpus.add(
        "state-fork-same-size",
        "the receipt's checkpoint and the stored one: same size, different roots (a fork)",
        {"format": "saved_call", "call": base.saved, "receipt": forked},
        expect(failed={"consistency"}, required=req5),
        state={origin: stored_entry(honest_size_2.receipt, corpus.vkey)},
    )
    tampered_state = stored_entry(c0.receipt, corpus.vkey)
    tampered_state["checkpoint"] = tampered_state["checkpoint"].replace(
        f"\n{tampered_state['size']}\n", f"\n{tampered_state['size'] + 7}\n"
    )
    corpus.add(
        "state-tampered",
        "a stored checkpoint that does not verify under the log key",
        {"format": "saved_call", "call": c0.saved},
        expect(failed={"consistency"}, required=req5),
        state={origin: tampered_state},
    )
    corpus.add(
        "state-malformed-entry",
        "a stored entry with a negative size is unusable",
        {"format": "saved_call", "call": c0.saved},
        error("state"),
        state={origin: {**stored_entry(c0.receipt, corpus.vkey), "size": -1}},
    )
    # A size beyond what both verifiers represent exactly (2^53 - 1) is refused by both alike;
    # below it, the entry's own checkpoint decides, as ever.
    for name, size, exp in [
        ("state-size-2-64", 2**64, error("state")),
        ("state-size-2-53", 2**53, error("state")),
        ("state-size-max-safe", 2**53 - 1, expect(passed={"consistency"}, required=req5)),
    ]:
        corpus.add(
            name,
            f"a stored entry whose size is {size}",
            {"format": "saved_call", "call": c0.saved},
            exp,
            state={origin: {**stored_entry(c0.receipt, corpus.vkey), "size": size}},
        )
    corpus.add(
        "state-witness-failed",
        "a checkpoint missing the witness quorum is not compared",
        {"format": "saved_call", "call": base.saved, "receipt": forked},
        expect(failed={"witnesses"}, required=req4),
        trust={**trust, "witnesses": keys[:1], "quorum": 1},
        state={origin: stored_entry(honest_size_2.receipt, corpus.vkey)},
    )

    await add_cose_cases(corpus)
    _jcs_cases(corpus)
    corpus.cases.extend(ed25519_cases())


# ---------------------------------------------------------------------------------------------
# Ed25519 edge cases, crafted with libsodium's group arithmetic (through PyNaCl)

L_ORDER = 2**252 + 27742317777372353535851937790883648493
# A point of order 8 (libsodium's small-order blocklist).
ORDER_8 = bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")


def python_ed25519(case: Json) -> Json:
    """libsodium's verdict (through PyNaCl), the one every verifier here must give."""
    try:
        VerifyKey(bytes.fromhex(case["public_key"])).verify(
            bytes.fromhex(case["message"]), bytes.fromhex(case["signature"])
        )
    except (BadSignatureError, ValueError, TypeError):
        return {"valid": False}
    return {"valid": True}


def _scalar(n: int) -> bytes:
    return (n % L_ORDER).to_bytes(32, "little")


def _k(r: bytes, a: bytes, message: bytes) -> int:
    return int.from_bytes(hashlib.sha512(r + a + message).digest(), "little") % L_ORDER


def ed25519_cases() -> list[Json]:
    """Signatures an honest key makes, and ones crafted to sit on the edges of the rules: an R
    with a small-order component (accepted by a cofactored equation, refused by libsodium's),
    a small-order R, a non-canonical S, a non-canonical key, and a key with a small-order
    component (libsodium accepts such a signature exactly when [k]T is the identity)."""
    seed = hashlib.sha256(b"mcp-notary corpus ed25519").digest()
    digest = hashlib.sha512(seed).digest()
    a_int = int.from_bytes(digest[:32], "little")
    a_int &= (1 << 254) - 8
    a_int |= 1 << 254
    key = SigningKey(seed)
    pk = bytes(key.verify_key)
    message = b"rs-tool-call/1 checkpoint\n"

    def sign_with_r(public: bytes, r_point: bytes, r: int) -> bytes:
        return r_point + _scalar(r + _k(r_point, public, message) * a_int)

    cases: list[tuple[str, str, bytes, bytes]] = []
    honest = key.sign(message).signature
    cases.append(("honest", "an honest signature", pk, honest))
    r = int.from_bytes(hashlib.sha512(b"r").digest(), "little") % L_ORDER
    r_point = nacl_bindings.crypto_scalarmult_ed25519_base_noclamp(_scalar(r))
    mixed = nacl_bindings.crypto_core_ed25519_add(r_point, ORDER_8)
    cases.append(
        (
            "mixed-order-r",
            "honest key, R with a small-order component: R + T (order 8)",
            pk,
            sign_with_r(pk, mixed, r),
        )
    )
    cases.append(
        ("honest-crafted", "the same construction without T", pk, sign_with_r(pk, r_point, r))
    )
    cases.append(("small-order-r", "R a point of order 8", pk, sign_with_r(pk, ORDER_8, 0)))
    s_int = int.from_bytes(honest[32:], "little")
    cases.append(
        (
            "s-plus-l",
            "S + L: the same value, non-canonical",
            pk,
            honest[:32] + (s_int + L_ORDER).to_bytes(32, "little"),
        )
    )
    cases.append(
        (
            "key-non-canonical",
            "the key's y + p (non-canonical) where y < 19",
            bytes([0xEE]) + b"\xff" * 30 + b"\x7f",
            honest,
        )
    )
    # A key with a small-order component, A + T: [S]B - [k](A + T) = R - [k]T.
    mixed_key = nacl_bindings.crypto_core_ed25519_add(pk, ORDER_8)
    found: dict[bool, bytes] = {}
    for i in range(64):
        ri = int.from_bytes(hashlib.sha512(b"ri%d" % i).digest(), "little") % L_ORDER
        ri_point = nacl_bindings.crypto_scalarmult_ed25519_base_noclamp(_scalar(ri))
        found.setdefault(
            _k(ri_point, mixed_key, message) % 8 == 0,
            ri_point + _scalar(ri + _k(ri_point, mixed_key, message) * a_int),
        )
        if len(found) == 2:
            break
    cases.append(("mixed-order-key-k8", "key A + T, k a multiple of 8", mixed_key, found[True]))
    cases.append(("mixed-order-key", "key A + T, k not a multiple of 8", mixed_key, found[False]))
    out = []
    for name, description, public, signature in cases:
        case: Json = {
            "name": f"ed25519-{name}",
            "kind": "ed25519",
            "description": description,
            "public_key": public.hex(),
            "message": message.hex(),
            "signature": signature.hex(),
        }
        case["expect"] = python_ed25519(case)
        out.append(case)
    assert [c["expect"]["valid"] for c in out] == [
        True,
        False,
        True,
        False,
        False,
        False,
        True,
        False,
    ]
    return out


def jwks_key(jwks: Json) -> Json:
    key: Json = jwks["keys"][0]
    return key


def _rec(
    arguments: Any = None,
    result: Any = None,
    *,
    tool: str = "t",
    salt: str = "ab" * 16,
    **extra: Any,
) -> Json:
    rec = {
        "tool": tool,
        "arguments": {} if arguments is None else arguments,
        "result": {"content": []} if result is None else result,
        "salt": salt,
    }
    rec.update(extra)
    return rec


def _jcs_cases(corpus: Corpus) -> None:
    add = corpus.add_jcs
    add(
        "jcs-astral-keys",
        "keys sort by UTF-16 code units: U+1F600 before U+FFFF",
        _rec({"\ufb33": 1, "\U0001f600": 2, "\uffff": 3, "a": 4}),
        canonical='{"arguments":{"a":4,"\U0001f600":2,"\ufb33":1,"\uffff":3},"result":{"content":[]},'
        '"salt":"' + "ab" * 16 + '","server":"srv","spec":"rs-tool-call/1","tool":"t"}',
    )
    add(
        "jcs-integer-like-keys",
        "integer-like keys sort as strings",
        _rec({"10": 1, "9": 2, "1": 3, "a": 4, "": 5}),
    )
    add(
        "jcs-numbers",
        "ECMAScript number formatting",
        '{"tool":"t","arguments":{"a":1e21,"b":1e-7,"c":0.1,"d":-0.0,"e":5e-324,"f":1.7976931348623157e308,'
        '"g":100,"h":1E2,"i":0.000001,"j":123e-20,"k":-1.5e-9,"l":9007199254740991,"m":-9007199254740991,'
        '"n":4.35,"o":0.30000000000000004,"p":1e+300,"q":12.0},"result":{"content":[]},"salt":"'
        + "ab" * 16
        + '"}',
    )
    add(
        "jcs-big-integers-exact",
        "integers a double holds exactly pass (2^53, 2^53+2, 10^18, 2^60, 10^21, 2^64)",
        '{"tool":"t","arguments":{"a":9007199254740992,"b":9007199254740994,"c":1000000000000000000,'
        '"d":1152921504606846976,"e":1000000000000000000000,"f":18446744073709551616,"g":-9007199254740992},'
        '"result":{"content":[]},"salt":"' + "ab" * 16 + '"}',
        refused=False,
    )
    add(
        "jcs-big-integer-spelled",
        "an integer whose double JavaScript writes with the same digits",
        '{"tool":"t","arguments":{"a":35818508739113130},"result":{"content":[]},"salt":"'
        + "ab" * 16
        + '"}',
        refused=False,
    )
    add(
        "jcs-refuse-2-53-plus-1",
        "2^53+1 would change in JavaScript: refused",
        '{"tool":"t","arguments":{"a":9007199254740993},"result":{"content":[]},"salt":"'
        + "ab" * 16
        + '"}',
        refused=True,
    )
    add(
        "jcs-refuse-negative-2-53-plus-1",
        "-(2^53+1): refused",
        '{"tool":"t","arguments":{"a":[-9007199254740993]},"result":{"content":[]},"salt":"'
        + "ab" * 16
        + '"}',
        refused=True,
    )
    add(
        "jcs-refuse-20-digits",
        "12345678901234567890 would change: refused",
        '{"tool":"t","arguments":{},"result":{"content":[{"n":12345678901234567890}]},"salt":"'
        + "ab" * 16
        + '"}',
        refused=True,
    )
    add(
        "jcs-refuse-lone-surrogate-value",
        "a lone surrogate in a string: refused",
        _rec({"a": "x\ud800y"}),
        refused=True,
    )
    add(
        "jcs-refuse-lone-low-surrogate",
        "a lone low surrogate: refused",
        _rec({"a": "\udc00"}),
        refused=True,
    )
    add(
        "jcs-refuse-lone-surrogate-key",
        "a lone surrogate in a key: refused",
        _rec({"\udbff": 1}),
        refused=True,
    )
    add(
        "jcs-refuse-nan",
        "NaN: refused",
        '{"tool":"t","arguments":{"a":NaN},"result":{"content":[]},"salt":"' + "ab" * 16 + '"}',
        refused=True,
    )
    add(
        "jcs-refuse-infinity",
        "1e400 is infinite: refused",
        '{"tool":"t","arguments":{"a":1e400},"result":{"content":[]},"salt":"' + "ab" * 16 + '"}',
        refused=True,
    )
    add(
        "jcs-strings",
        "U+2028, U+2029, controls, quotes, backslashes, DEL, non-ASCII as raw UTF-8",
        _rec({"s": 'a\u2028b\u2029c\u0001\u001f"\\/\u007f\u00e9e\u0301\U0001f600\t\n\r\b\f'}),
    )
    add(
        "jcs-surrogate-pair-escaped",
        "an escaped surrogate pair is one character",
        '{"tool":"t","arguments":{"\\ud83d\\ude00":"\\ud83d\\ude00"},"result":{"content":[]},"salt":"'
        + "ab" * 16
        + '"}',
    )
    add(
        "jcs-empty-and-nested",
        "empty containers and nesting",
        _rec({"a": {}, "b": [], "c": [[{}], {"d": [None, True, False]}]}),
    )
    deep: Any = 1
    for _ in range(254):  # + the record and arguments objects: 256 containers
        deep = [deep]
    add(
        "jcs-depth-256",
        "256 nested containers (the record and result count): accepted",
        _rec({"a": deep}),
        refused=False,
    )
    add("jcs-refuse-depth-257", "257 nested containers: refused", _rec({"a": [deep]}), refused=True)
    add(
        "jcs-refuse-duplicate-keys",
        "a duplicate key: refused by both parsers (which one a reader keeps is not defined)",
        '{"tool":"t","arguments":{"a":1,"a":2},"result":{"content":[]},"salt":"' + "ab" * 16 + '"}',
        refused=True,
    )
    add(
        "jcs-proto-key",
        "a __proto__ key is an ordinary member",
        _rec({"__proto__": {"x": 1}, "constructor": 2}),
    )
    add(
        "jcs-structured-object",
        "structuredContent object",
        _rec(result={"content": [], "structuredContent": {"b": 1, "a": [2]}}),
    )
    add("jcs-is-error", "isError true", _rec(result={"content": [], "isError": True}))
    add(
        "jcs-is-error-null",
        "isError null counts as absent",
        _rec(result={"content": [], "isError": None}),
    )
    add(
        "jcs-unhashed-members",
        "resultType complete and _meta are not hashed",
        '{"tool":"t","arguments":{},"result":{"content":[],"resultType":"complete",'
        '"_meta":{"x":9007199254740993}},"salt":"' + "ab" * 16 + '"}',
        refused=False,
    )
    for kind, value in {
        "null": None,
        "array": [1, "a", None],
        "string": "s",
        "number": -0.5,
        "true": True,
        "false": False,
        "empty-array": [],
    }.items():
        add(
            f"jcs-structured-{kind}",
            f"structuredContent {kind}: hashed as sent",
            _rec(result={"content": [], "structuredContent": value}),
        )
    add("jcs-server-given", "the record omits server; the receipt's is used", _rec(), server="srv")
    add("jcs-server-in-record", "a server in the record wins", _rec(server="inner"), server="srv")
    add("jcs-refuse-no-server", "no server anywhere: refused", _rec(), server=None, refused=True)
    add(
        "jcs-astral-name-256",
        "a 256-character name of astral characters (512 UTF-16 units)",
        _rec(tool="\U0001f600" * 256),
        refused=False,
    )
    add("jcs-refuse-name-257", "a 257-character name: refused", _rec(tool="t" * 257), refused=True)
    add("jcs-refuse-empty-tool", "an empty tool name: refused", _rec(tool=""), refused=True)
    add("jcs-refuse-salt-upper", "an upper-case salt: refused", _rec(salt="AB" * 16), refused=True)
    add("jcs-refuse-salt-short", "a 15-byte salt: refused", _rec(salt="ab" * 15), refused=True)
    add(
        "jcs-refuse-salt-odd",
        "an odd-length salt: refused",
        _rec(salt="ab" * 16 + "a"),
        refused=True,
    )
    add("jcs-salt-long", "a 64-byte salt", _rec(salt="0f" * 64), refused=False)
    add(
        "jcs-refuse-input-required",
        "an input_required result is not final: refused",
        _rec(result={"content": [], "resultType": "input_required"}),
        refused=True,
    )
    add(
        "jcs-refuse-unknown-member",
        "an unknown record member: refused",
        _rec(argument={}),
        refused=True,
    )
    add("jcs-refuse-other-spec", "another spec: refused", _rec(spec="rs-tool-call/2"), refused=True)
    add(
        "jcs-refuse-content-missing",
        "a result without content: refused",
        _rec(result={}),
        refused=True,
    )
    add(
        "jcs-refuse-content-object",
        "content that is not a list: refused",
        _rec(result={"content": {}}),
        refused=True,
    )
    add(
        "jcs-refuse-is-error-string",
        "isError that is not a boolean: refused",
        _rec(result={"content": [], "isError": "yes"}),
        refused=True,
    )
    add(
        "jcs-refuse-arguments-array",
        "arguments that are not an object: refused",
        _rec([1]),
        refused=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory to write the cases into")
    args = parser.parse_args(argv)
    configure_logging("json", "warning")  # the in-process notary's request log is noise here
    logging.disable(logging.INFO)
    cases = asyncio.run(build(args.out))
    counts = {k: sum(c["kind"] == k for c in cases) for k in ("verify", "jcs")}
    print(
        f"corpus: {len(cases)} cases ({counts['verify']} verify, {counts['jcs']} jcs) "
        f"in {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
