"""The verifier (``notary.verifier``, ``notary verify``) against real receipts.

A real notary app runs in process on a 127.0.0.1 socket (as in test_notary_api.py); forks and
rollbacks are made with a second log under the same log key (``Log`` + ``MemoryStore``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.client.http import HttpClient
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, parse_note
from ledger.core.tlog_proof import ProofBundle, decode_proof_bundle
from ledger.http.routes import LOG, add_ledger_routes, create_ledger_app
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from notary.core.entry import LogEntry
from notary.core.ids import new_receipt_id, now_issued_at
from notary.core.jwks import Jwks
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.receipts import Receipt
from notary.verifier.inputs import (
    ToolCall,
    VerifierInputError,
    call_from_document,
    call_from_receipt_and_record,
    log_base_url,
)
from notary.verifier.online import check_consistency, record_consistency
from notary.verifier.state import ProofResult, Reconciler, Seen, StateFile, VerifierStateError
from notary.verifier.trust import Trust, parse_witness_keys
from tests.notary_server import Call, LiveNotary, capture_cli, live_notary
from tests.servers import serving
from tests.tamper import (
    checkpoint_root,
    checkpoint_signature,
    in_proof,
    last_signature,
    proof_hash,
    set_field,
)
from tests.verifying import failed_levels, json_out, saved, statuses, verify

# ---------------------------------------------------------------------------------------------
# Helpers


def cosign(receipt: dict[str, Any], *witnesses: CosignatureSigner) -> dict[str, Any]:
    """The receipt with witness cosignatures added to its proof's checkpoint (proof is unsigned)."""
    bundle = decode_proof_bundle(receipt["proof"].encode())
    text = parse_note(bundle.checkpoint).text
    note = merge_signatures(bundle.checkpoint, [w.cosign(text, 1_700_000_000) for w in witnesses])
    out = copy.deepcopy(receipt)
    out["proof"] = ProofBundle(bundle.index, bundle.proof, note).encode().decode()
    return out


def other_entry() -> bytes:
    return LogEntry(id=new_receipt_id(), server="evil", tool="t", call_sha256=os.urandom(32),
                    issued_at=now_issued_at()).encode()


async def forked_log(signer: Ed25519Signer, entries: list[bytes]) -> Log:
    """A second log under the same key, with the given history."""
    log = await Log.open(MemoryStore(), signer=signer)
    for e in entries:
        await log.append(e)
    return log


async def with_proof_from(log: Log, receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt with a proof into ``log``'s head instead of the notary's."""
    head = await log.head(0)
    assert head is not None
    bundle = await log.proof_bundle(receipt["ledger"]["index"], head)
    return {**receipt, "proof": bundle.encode().decode()}


@contextlib.asynccontextmanager
async def serve_log(log: Log) -> AsyncIterator[str]:
    try:
        async with serving(create_ledger_app(log)) as server:
            yield server.url
    finally:
        await log.close()


def entries_of(*calls: Call) -> list[bytes]:
    return [LogEntry.from_receipt(c.receipt).encode() for c in calls]


# ---------------------------------------------------------------------------------------------
# All levels, each input format


async def test_every_level_online_and_state_progression(notary: LiveNotary, tmp_path: Path) -> None:
    c0 = await notary.notarize(x=1)
    await notary.notarize(x=2)
    state = StateFile(tmp_path / "cfg" / "state.json")

    first = await verify(saved(c0), notary.trust(), state)
    assert statuses(first) == {"record": "passed", "signature": "passed", "inclusion": "passed",
                               "witnesses": "skipped", "consistency": "passed"}
    # Nothing stored before: consistency was checked against the log but is not required.
    assert first.valid and first.exit_code == 0
    assert first.verdict.required == ("record", "signature", "inclusion")
    assert "the log's latest checkpoint (size 2)" in first.verdict.levels["consistency"].reason
    assert state.get(notary.vkey).size == 2  # type: ignore[union-attr]
    mode = stat.S_IMODE(state.path.stat().st_mode)
    assert mode == 0o600

    c2 = await notary.notarize(x=3)
    again = await verify(saved(c2), notary.trust(), state)
    assert again.valid and "consistency" in again.verdict.required
    assert "the checkpoint already seen (state file) (size 2)" in \
        again.verdict.levels["consistency"].reason
    assert state.get(notary.vkey).size == 3  # type: ignore[union-attr]
    # An old receipt with its issue-time proof (size 1) is proven consistent with size 3.
    old = await verify(saved(c0), notary.trust(), state)
    assert old.valid and old.checkpoint is not None and old.checkpoint.size == 1
    assert state.get(notary.vkey).size == 3  # type: ignore[union-attr]


async def test_input_formats(notary: LiveNotary) -> None:
    c = await notary.notarize("add", a=1, b=2)
    trust = notary.trust()
    bare = call_from_document(c.result, tool="add", arguments={"a": 1, "b": 2})
    rpc = call_from_document({"jsonrpc": "2.0", "id": 7, "result": c.result}, tool="add",
                             arguments={"a": 1, "b": 2})
    record = {k: v for k, v in c.record.to_json().items() if k != "server"}
    pair = call_from_receipt_and_record(c.receipt, record)
    with_server = call_from_document({**c.saved, "server": "srv"})
    for tc in (saved(c), bare, rpc, pair, with_server):
        report = await verify(tc, trust, online=False)
        assert report.valid, report.to_json()
    wrong_server = await verify(call_from_document({**c.saved, "server": "other"}), trust,
                                online=False)
    assert failed_levels(wrong_server) == {"record"}
    wrong_args = await verify(call_from_document(c.result, tool="add", arguments={}), trust,
                              online=False)
    assert failed_levels(wrong_args) == {"record"}

    bad_inputs: list[tuple[object, str | None]] = [
        ({"tool": "add"}, None), (c.result, None), ({**c.saved, "extra": 1}, None),
        ({"nothing": 1}, None), (c.saved, "add"), ([], None),
        ({**c.result, "_meta": {}}, "add"), ({**c.saved, "tool": 7}, None),
        ({**c.result, "_meta": {TOOL_CALL_META_KEY: {"spec": "rs-tool-call/1", "notarized": False,
                                           "reason": "notary down"}}}, "add")]
    for bad, tool in bad_inputs:
        with pytest.raises(VerifierInputError):
            call_from_document(bad, tool=tool)


async def test_receipt_not_embedded_is_fetched_online_only(notary: LiveNotary) -> None:
    c = await notary.notarize(q="x")
    result = copy.deepcopy(c.result)
    del result["_meta"][TOOL_CALL_META_KEY]["receipt"]
    tc = call_from_document({**c.saved, "result": result})
    report = await verify(tc, notary.trust())
    assert report.valid and any("receipt fetched from" in n for n in report.notes)
    with pytest.raises(VerifierInputError, match="offline"):
        await verify(tc, notary.trust(), online=False)
    # A receipt without its proof gets one online; offline inclusion is skipped, not passed.
    bare = {k: v for k, v in c.receipt.items() if k != "proof"}
    report = await verify(call_from_receipt_and_record(bare, c.record.to_json()), notary.trust())
    assert report.valid
    offline = await verify(call_from_receipt_and_record(bare, c.record.to_json()),
                           notary.trust(), online=False)
    assert statuses(offline)["inclusion"] == "skipped" and not offline.valid


# ---------------------------------------------------------------------------------------------
# Tampering: exactly the levels that cover the field fail


RECEIPT_TAMPERING: list[tuple[str, Callable[[dict[str, Any]], None], set[str]]] = [
    ("id", set_field("id", lambda _: new_receipt_id()), {"signature", "inclusion"}),
    ("server", set_field("server", "other"), {"record", "signature", "inclusion"}),
    ("tool", set_field("tool", "other"), {"record", "signature", "inclusion"}),
    ("call_sha256", set_field("call_sha256", "ab" * 32), {"record", "signature", "inclusion"}),
    ("issued_at", set_field("issued_at", "2020-01-01T00:00:00.000Z"), {"signature", "inclusion"}),
    ("ledger.index", set_field("ledger.index", lambda i: i + 1), {"signature", "inclusion"}),
    ("ledger.origin", set_field("ledger.origin", "other.example/log"), {"signature", "inclusion"}),
    ("ledger.entry_url", set_field("ledger.entry_url", "https://elsewhere.example/x"),
     {"signature"}),
    ("signature.sig", set_field("signature.sig", lambda s: ("B" if s[0] == "A" else "A") + s[1:]),
     {"signature"}),
    ("signature.kid", set_field("signature.kid", "A" * 43), {"signature"}),
    ("proof hash", in_proof(proof_hash), {"inclusion"}),
    ("checkpoint root", in_proof(checkpoint_root), {"inclusion"}),
    ("checkpoint signature", in_proof(checkpoint_signature), {"inclusion"}),
]


@pytest.mark.parametrize(("field_name", "tamper", "expected"), RECEIPT_TAMPERING,
                         ids=[t[0] for t in RECEIPT_TAMPERING])
async def test_tampered_receipt_fails_exactly_its_levels(
        notary: LiveNotary, field_name: str, tamper: Callable[[dict[str, Any]], None],
        expected: set[str]) -> None:
    for i in range(3):
        await notary.notarize(i=i)
    c = notary.calls[1]
    receipt = await notary.fetch_receipt(c.receipt["id"])  # proof with several hashes
    assert len(decode_proof_bundle(receipt["proof"].encode()).proof) >= 2
    good = await verify(call_from_receipt_and_record(receipt, c.record.to_json()),
                        notary.trust(), online=False)
    assert good.valid
    bad = copy.deepcopy(receipt)
    tamper(bad)
    report = await verify(call_from_receipt_and_record(bad, c.record.to_json()),
                          notary.trust(), online=False)
    assert failed_levels(report) == expected, report.to_json()
    assert report.exit_code == 1


RECORD_TAMPERING: list[tuple[str, Callable[[Call], ToolCall]]] = [
    ("arguments", lambda c: call_from_document({**c.saved, "arguments": {"x": 2}})),
    ("content", lambda c: call_from_document({**c.saved, "result": {
        **c.result, "content": [{"type": "text", "text": "forged"}]}})),
    ("structuredContent", lambda c: call_from_document({**c.saved, "result": {
        **c.result, "structuredContent": {"echo": {"x": 2}}}})),
    ("isError", lambda c: call_from_document({**c.saved, "result": {**c.result,
                                                                    "isError": True}})),
    ("salt", lambda c: call_from_document({**c.saved, "result": {**c.result, "_meta": {
        TOOL_CALL_META_KEY: {**c.meta, "salt": "00" * 16}}}})),
    ("meta call_sha256", lambda c: call_from_document({**c.saved, "result": {
        **c.result, "_meta": {TOOL_CALL_META_KEY: {**c.meta, "call_sha256": "cd" * 32}}}})),
    ("meta id", lambda c: call_from_document({**c.saved, "result": {
        **c.result, "_meta": {TOOL_CALL_META_KEY: {**c.meta, "id": new_receipt_id()}}}})),
    ("tool", lambda c: call_from_document(c.result, tool="other", arguments=c.arguments)),
    ("input_required", lambda c: call_from_document({**c.saved, "result": {
        **c.result, "resultType": "input_required"}})),
]


@pytest.mark.parametrize(("what", "build"), RECORD_TAMPERING, ids=[t[0] for t in RECORD_TAMPERING])
async def test_tampered_record_fails_level_1_only(
        notary: LiveNotary, what: str, build: Callable[[Call], ToolCall]) -> None:
    c = await notary.notarize(x=1)
    report = await verify(build(c), notary.trust(), online=False)
    assert failed_levels(report) == {"record"}, report.to_json()
    # resultType and the rest of _meta are not hashed.
    same = {**c.result, "resultType": "complete", "_meta": {"other": 1, TOOL_CALL_META_KEY: c.meta}}
    assert (await verify(call_from_document({**c.saved, "result": same}), notary.trust(),
                         online=False)).valid


async def test_untrusted_keys_fail_signature_and_inclusion(notary: LiveNotary) -> None:
    c = await notary.notarize(x=1)
    other_jwks = Jwks({"keys": []})
    other_log = Ed25519Signer.generate(c.receipt["ledger"]["origin"]).verifier()
    report = await verify(saved(c), Trust(other_jwks, (other_log,)), online=False)
    assert failed_levels(report) == {"signature", "inclusion"}
    stranger = Ed25519Signer.generate("another.example/log").verifier()
    report = await verify(saved(c), Trust(notary.jwks, (stranger,)), online=False)
    assert failed_levels(report) == {"inclusion"}
    assert "no trusted log key for origin" in report.verdict.levels["inclusion"].reason
    # Missing inputs skip the level; the report is then not valid.
    report = await verify(ToolCall(Receipt.from_json(c.receipt), None), notary.trust(),
                          online=False)
    assert statuses(report)["record"] == "skipped" and not report.valid
    report = await verify(saved(c), Trust(notary.jwks), online=False)
    assert statuses(report)["inclusion"] == "skipped" and not report.valid
    report = await verify(saved(c), Trust(), online=False)
    assert statuses(report)["signature"] == "skipped" and not report.valid


# ---------------------------------------------------------------------------------------------
# Level 4


async def test_witness_quorum(notary: LiveNotary) -> None:
    c = await notary.notarize(x=1)
    w1, w2, w3 = (CosignatureSigner.generate(f"witness-{i}.example") for i in (1, 2, 3))
    keys = parse_witness_keys([w.verifier_key_text() for w in (w1, w2, w3)])
    receipt = cosign(c.receipt, w1, w2)
    tc = saved(c, receipt)
    ok = await verify(tc, notary.trust(witnesses=keys, quorum=2), online=False)
    assert statuses(ok)["witnesses"] == "passed" and ok.valid
    assert "witnesses" in ok.verdict.required
    short = await verify(tc, notary.trust(witnesses=keys, quorum=3), online=False)
    assert failed_levels(short) == {"witnesses"} and short.exit_code == 1
    assert statuses(short)["consistency"] == "skipped"  # not remembered either
    # A forged cosignature is refused, not ignored.
    forged = cosign(c.receipt, w1)
    forged["proof"] = last_signature(forged["proof"])
    bad = await verify(saved(c, forged), notary.trust(witnesses=keys[:1], quorum=1),
                       online=False)
    assert failed_levels(bad) == {"witnesses"}
    with pytest.raises(VerifierInputError):
        notary.trust(witnesses=keys[:1], quorum=2)


async def test_online_fetches_a_witnessed_proof(notary: LiveNotary) -> None:
    """A fresh receipt's proof ends in a checkpoint witnesses have not cosigned yet; online,
    the verifier asks receipt_url for the current proof (the notary upgrades it)."""
    c = await notary.notarize(x=1)
    w = CosignatureSigner.generate("witness.example")
    trust = notary.trust(witnesses=parse_witness_keys([w.verifier_key_text()]), quorum=1)
    witnessed = cosign(await notary.fetch_receipt(c.receipt["id"]), w)

    async def receipt(request: web.Request) -> web.Response:
        return web.json_response(witnessed)

    app = web.Application()
    app.router.add_get("/r", receipt)
    async with serving(app) as server:
        meta = {**c.meta, "receipt_url": f"{server.url}/r"}
        result = {**c.result, "_meta": {TOOL_CALL_META_KEY: meta}}
        tc = call_from_document({**c.saved, "result": result})
        offline = await verify(tc, trust, online=False)
        assert failed_levels(offline) == {"witnesses"}
        report = await verify(tc, trust)
    assert report.valid and statuses(report)["witnesses"] == "passed", report.to_json()
    assert any("lacked the witness quorum" in n for n in report.notes)


# ---------------------------------------------------------------------------------------------
# Level 5: forks, rollbacks, offline


async def test_fork_same_size_is_flagged_offline(notary: LiveNotary, tmp_path: Path) -> None:
    c0 = await notary.notarize(x=0)
    c1 = await notary.notarize(x=1)
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c1), notary.trust(), state)).valid  # stores size 2
    fork = await forked_log(notary.signer, [*entries_of(c0), other_entry()])
    forged = await with_proof_from(fork, c0.receipt)
    report = await verify(saved(c0, forged), notary.trust(), state, online=False)
    assert statuses(report)["record"] == "passed" and statuses(report)["inclusion"] == "passed"
    assert failed_levels(report) == {"consistency"} and report.exit_code == 1
    (conflict,) = report.conflicts
    assert conflict.kind == "fork"
    evidence = report.to_json()["levels"]["consistency"]["evidence"][0]
    assert {e["source"] for e in evidence["checkpoints"]} == {"stored", "receipt"}
    assert all(e["note"].count("\n") >= 4 for e in evidence["checkpoints"])
    assert "EVIDENCE of a FORK" in report.render()
    assert state.get(notary.vkey).size == 2  # type: ignore[union-attr]
    await fork.close()


async def test_level_5_decides_first_and_writes_only_when_recorded(notary: LiveNotary,
                                                                    tmp_path: Path) -> None:
    """``check_consistency`` returns what level 5 found and changes nothing (neither the
    report nor the state file); ``record_consistency`` applies it, remembering the newest
    checkpoint only when online."""
    c0 = await notary.notarize(x=0)
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c0), notary.trust(), state)).valid  # remembers size 1
    c1 = await notary.notarize(x=1)
    stored = state.path.read_bytes()
    trust = notary.trust()
    (log_key,) = trust.log_keys
    report = await verify(saved(c1), trust, None, online=False)
    before = (report.to_json(), list(report.notes))
    async with HttpClient(timeout=5.0) as fetcher:
        found = await check_consistency(report.receipt, report.verdict, report.proof, log_key,
                                        trust, fetcher, state, None)
    assert found.level.status == "passed" and found.required and found.conflicts == []
    assert found.newest is not None and found.newest.size == 2
    assert (report.to_json(), report.notes) == before and state.path.read_bytes() == stored
    record_consistency(report, found, state, log_key, online=False)
    assert report.notes[-1] == f"offline: {state.path} is not updated"
    assert state.path.read_bytes() == stored
    record_consistency(report, found, state, log_key, online=True)
    assert state.get(notary.vkey).size == 2  # type: ignore[union-attr]

    fork = await forked_log(notary.signer, [*entries_of(c0), other_entry()])
    report = await verify(saved(c0, await with_proof_from(fork, c0.receipt)), trust, None,
                          online=False)
    stored = state.path.read_bytes()
    found = await check_consistency(report.receipt, report.verdict, report.proof, log_key,
                                    trust, None, state, None)
    assert found.level.status == "failed" and found.required and found.conflicts
    assert "consistency" not in report.verdict.required and state.path.read_bytes() == stored
    record_consistency(report, found, state, log_key, online=True)
    assert failed_levels(report) == {"consistency"} and not report.verdict.valid
    assert report.conflicts == found.conflicts and state.path.read_bytes() == stored
    await fork.close()


async def test_fork_bigger_tree_fails_consistency_proof_online(notary: LiveNotary,
                                                               tmp_path: Path) -> None:
    c0 = await notary.notarize(x=0)
    c1 = await notary.notarize(x=1)
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c1), notary.trust(), state)).valid  # stores size 2
    stored_before = state.path.read_bytes()
    fork = await forked_log(notary.signer, [*entries_of(c0), *(other_entry() for _ in range(3))])
    forged = await with_proof_from(fork, c0.receipt)
    await notary.notarize(x=2)
    await notary.notarize(x=3)  # the real log is at size 4 too
    await notary.published_size(4)  # /checkpoint is dual-signed at most once a second
    report = await verify(saved(c0, forged), notary.trust(), state)
    assert failed_levels(report) == {"consistency"}
    kinds = {(c.kind, c.first.label, c.second.label) for c in report.conflicts}
    assert ("fork", "stored", "receipt") in kinds  # the 2 -> 4 proof does not verify
    assert ("fork", "receipt", "latest") in kinds  # same size 4, different roots
    assert state.path.read_bytes() == stored_before
    await fork.close()


async def test_rollback_older_inconsistent_checkpoint(notary: LiveNotary, tmp_path: Path) -> None:
    c0 = await notary.notarize(x=0)
    await notary.notarize(x=1)
    c2 = await notary.notarize(x=2)
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c2), notary.trust(), state)).valid  # stores size 3
    fork = await forked_log(notary.signer, [*entries_of(c0), other_entry()])
    forged = await with_proof_from(fork, c0.receipt)
    report = await verify(saved(c0, forged), notary.trust(), state)
    assert failed_levels(report) == {"consistency"}
    assert "rollback" in {c.kind for c in report.conflicts}
    # Offline the same receipt cannot be checked: skipped, never passed.
    offline = await verify(saved(c0, forged), notary.trust(), state, online=False)
    assert statuses(offline)["consistency"] == "skipped" and offline.valid
    assert "consistency" not in offline.verdict.required
    await fork.close()


async def test_rollback_log_serving_smaller_tree(notary: LiveNotary, tmp_path: Path) -> None:
    c0, c1, c2 = [await notary.notarize(x=i) for i in range(3)]
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c2), notary.trust(), state)).valid  # stores size 3
    latest = await notary.fetch_receipt(c0.receipt["id"])  # proof at size 3
    rolled_back = await forked_log(notary.signer, entries_of(c0, c1))  # honest prefix, size 2
    async with serve_log(rolled_back) as url:
        report = await verify(saved(c0, latest), notary.trust(), state, log_url=url)
    assert failed_levels(report) == {"consistency"}
    assert {c.kind for c in report.conflicts} == {"rollback"}
    assert "the log now serves size 2" in report.verdict.levels["consistency"].reason
    assert state.get(notary.vkey).size == 3  # type: ignore[union-attr]


async def test_lagging_latest_checkpoint_is_not_a_rollback(notary: LiveNotary,
                                                            tmp_path: Path) -> None:
    """A log that publishes an older (say, witnessed) checkpoint than its tree is fine as long
    as it proves that checkpoint a prefix of the newer ones seen."""
    calls = [await notary.notarize(x=i) for i in range(3)]
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(calls[2]), notary.trust(), state)).valid  # stores size 3
    mirror = await Log.open(MemoryStore(), signer=notary.signer)  # same key, same history
    published = [(await mirror.append(e)).checkpoint for e in entries_of(*calls)][1]

    @web.middleware
    async def lagging(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/checkpoint":
            return web.Response(body=published, content_type="text/plain")
        return await handler(request)  # type: ignore[no-any-return]

    app = web.Application(middlewares=[lagging])
    app[LOG] = mirror
    add_ledger_routes(app)
    try:
        async with serving(app) as server:
            report = await verify(
                saved(calls[0], await notary.fetch_receipt(calls[0].receipt["id"])),
                notary.trust(), state, log_url=server.url)
    finally:
        await mirror.close()
    assert report.valid, report.to_json()
    assert "the log's latest checkpoint (size 2)" in report.verdict.levels["consistency"].reason
    assert state.get(notary.vkey).size == 3  # type: ignore[union-attr]


async def test_offline_with_notary_stopped_makes_no_connection(
        notary: LiveNotary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c0 = await notary.notarize(x=0)
    witness = CosignatureSigner.generate("witness.example")
    state = tmp_path / "state.json"
    # Remember c0's checkpoint (size 1) online first: offline, the state is read, not written.
    assert (await verify(saved(c0), notary.trust(), StateFile(state))).valid
    remembered = state.read_bytes()
    c1 = await notary.notarize(x=1)
    await notary.stop()
    port = int(notary.url.rsplit(":", 1)[1])

    # A listener on the notary's old port counts any connection attempt.
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", port, reuse_address=True)

    def no_sessions(*a: Any, **k: Any) -> None:
        raise AssertionError("offline verification opened an HTTP session")

    monkeypatch.setattr(aiohttp.ClientSession, "__init__", no_sessions)
    try:
        base = [*notary.trust_args(), "--state", str(state), "--offline",
                "--witness", witness.verifier_key_text()]
        call_file = tmp_path / "call.json"
        call_file.write_text(json.dumps(
            {**c0.saved, "result": {**c0.result, "_meta": {TOOL_CALL_META_KEY: {
                **c0.meta, "receipt": cosign(c0.receipt, witness)}}}}))
        code, out, _ = await capture_cli("verify", str(call_file), *base, "--json")
        doc = json_out(out)
        assert code == 0, out
        assert statuses(doc) == {"record": "passed", "signature": "passed",
                                 "inclusion": "passed", "witnesses": "passed",
                                 "consistency": "passed"}
        assert doc["levels"]["consistency"]["reason"].startswith("consistent with")
        assert state.read_bytes() == remembered
        # A first sight offline leaves no state file behind at all.
        fresh = tmp_path / "fresh-state.json"
        code, out, _ = await capture_cli("verify", str(call_file), *notary.trust_args(), "--state",
                                     str(fresh), "--offline", "--json")
        assert code == 0 and not fresh.exists(), out
        assert "offline" in json_out(out)["levels"]["consistency"]["reason"]

        # Stored size 1; c1's checkpoint is size 2: needs a proof, so skipped with the reason.
        call_file.write_text(json.dumps({**c1.saved, "result": {**c1.result, "_meta": {
            TOOL_CALL_META_KEY: {**c1.meta, "receipt": cosign(c1.receipt, witness)}}}}))
        code, out, _ = await capture_cli("verify", str(call_file), *base, "--json")
        doc = json_out(out)
        assert code == 0 and doc["levels"]["consistency"]["status"] == "skipped"
        assert "needs a consistency proof" in doc["levels"]["consistency"]["reason"]
        assert state.read_bytes() == remembered

        # The same checkpoint again is decided offline (equal sizes): passed and required.
        call_file.write_text(json.dumps({**c0.saved, "result": {**c0.result, "_meta": {
            TOOL_CALL_META_KEY: {**c0.meta, "receipt": cosign(c0.receipt, witness)}}}}))
        code, out, _ = await capture_cli("verify", str(call_file), *base, "--json")
        doc = json_out(out)
        assert code == 0 and doc["levels"]["consistency"]["status"] == "passed"
        assert "consistency" in doc["required"]
    finally:
        listener.close()
        await listener.wait_closed()
    assert accepted == []


async def test_online_with_log_down_skips_level_5(notary: LiveNotary, tmp_path: Path) -> None:
    c0 = await notary.notarize(x=0)
    await notary.stop()
    report = await verify(saved(c0), notary.trust(), StateFile(tmp_path / "s.json"))
    assert report.valid and statuses(report)["consistency"] == "skipped"
    assert "could not be fetched" in report.verdict.levels["consistency"].reason


async def test_state_file_tampered_or_corrupt(notary: LiveNotary, tmp_path: Path) -> None:
    c0 = await notary.notarize(x=0)
    state = StateFile(tmp_path / "state.json")
    assert (await verify(saved(c0), notary.trust(), state)).valid
    doc = json.loads(state.path.read_text())
    origin = notary.vkey
    doc["logs"][origin]["checkpoint"] = doc["logs"][origin]["checkpoint"].replace(
        "\n1\n", "\n9\n")
    state.path.write_text(json.dumps(doc))
    report = await verify(saved(c0), notary.trust(), state)
    assert failed_levels(report) == {"consistency"}
    assert "does not verify under the trusted log key" in \
        report.verdict.levels["consistency"].reason
    state.path.write_text("{not json")
    with pytest.raises(VerifierStateError):
        await verify(saved(c0), notary.trust(), state)
    code, _, err = await capture_cli("verify", *notary.trust_args(), "--state", str(state.path),
                                 "--offline", str(_write(tmp_path / "c.json", c0.saved)))
    assert code == 2 and "not valid JSON" in err


def test_reconciler_rules() -> None:
    signer = Ed25519Signer.generate("example.com/log")

    def seen(label: str, size: int, root: bytes) -> Seen:
        from ledger.core.checkpoint import Checkpoint, sign_checkpoint
        cp = Checkpoint(signer.name, size, root)
        return Seen(label, cp, sign_checkpoint(cp, signer))  # type: ignore[arg-type]

    a, b = b"\x01" * 32, b"\x02" * 32
    same = Reconciler(seen("stored", 3, a), seen("receipt", 3, a), None).finish({})
    assert not same.conflicts and same.newest is None
    fork = Reconciler(seen("stored", 3, a), seen("receipt", 3, b), None).finish({})
    assert [c.kind for c in fork.conflicts] == ["fork"]
    # The log's latest smaller than a checkpoint seen: fine if the log proves it a prefix (a
    # log publishing witnessed checkpoints lags), a rollback if it cannot.
    lagging = Reconciler(seen("stored", 3, a), seen("receipt", 3, a), seen("latest", 2, b))
    assert lagging.proofs_needed() == [(2, 3)]
    res = lagging.finish({(2, 3): ProofResult(problem="HTTP 404: beyond the tree", refused=True)})
    assert {c.kind for c in res.conflicts} == {"rollback"}
    res = Reconciler(seen("stored", 3, a), seen("receipt", 3, a), seen("latest", 2, b)).finish(
        {(2, 3): ProofResult(problem="connection refused")})
    assert not res.conflicts and res.unchecked
    pending = Reconciler(None, seen("receipt", 2, a), None)
    assert pending.finish({}).newest is not None  # first sight is remembered
    needs = Reconciler(seen("stored", 2, a), seen("receipt", 4, b), None)
    assert needs.proofs_needed() == [(2, 4)]
    res = needs.finish({})
    assert res.unchecked and res.newest is None


# ---------------------------------------------------------------------------------------------
# The CLI


def _write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


async def test_cli_formats_and_exit_codes(notary: LiveNotary, tmp_path: Path) -> None:
    c = await notary.notarize("add", a=1, b=2)
    state = ["--state", str(tmp_path / "state.json")]
    trust = notary.trust_args()
    saved_file = _write(tmp_path / "saved.json", c.saved)
    result_file = _write(tmp_path / "result.json", c.result)
    receipt_file = _write(tmp_path / "receipt.json", c.receipt)
    record_file = _write(tmp_path / "record.json", c.record.to_json())
    args_file = _write(tmp_path / "args.json", c.arguments)

    code, out, _ = await capture_cli("verify", str(saved_file), *trust, *state)
    assert code == 0, out
    assert "1. record       PASSED" in out and "VALID" in out
    code, out, _ = await capture_cli("verify", str(result_file), "--tool", "add", "--arguments",
                                 '{"a": 1, "b": 2}', *trust, *state, "--json")
    assert code == 0 and json_out(out)["valid"] is True
    code, out, _ = await capture_cli("verify", str(result_file), "--tool", "add", "--arguments",
                                 str(args_file), *trust, "--no-state")
    assert code == 0, out
    code, out, _ = await capture_cli("verify", "--receipt", str(receipt_file), "--record",
                                 str(record_file), *trust, *state, "--json")
    assert code == 0 and json_out(out)["receipt"]["id"] == c.receipt["id"]
    # Keys from the notary itself (trust on first use) and from a JWKS URL, and @FILE keys.
    code, out, _ = await capture_cli("verify", str(saved_file), "--notary", notary.url, *state)
    assert code == 0, out
    vkey_file = tmp_path / "log.vkey"
    vkey_file.write_text(f"# the log\n{notary.vkey}\n")
    code, out, _ = await capture_cli("verify", str(saved_file), "--jwks",
                                 notary.url + "/.well-known/jwks.json", "--log-key",
                                 f"@{vkey_file}", *state)
    assert code == 0, out

    # Verification failures: exit 1, with the reason.
    code, out, _ = await capture_cli("verify", str(result_file), "--tool", "add", *trust, *state)
    assert code == 1 and "1. record       FAILED" in out and "NOT VALID" in out
    w = CosignatureSigner.generate("w.example")
    code, out, _ = await capture_cli("verify", str(saved_file), *trust, *state, "--witness",
                                 w.verifier_key_text(), "--json")
    assert code == 1 and json_out(out)["levels"]["witnesses"]["status"] == "failed"

    # Usage and input errors: exit 2.
    usage = [
        ["verify", str(saved_file)],  # no trust
        ["verify", str(saved_file), "--jwks", str(notary.jwks_file)],  # no log key
        ["verify", *trust],  # no input
        ["verify", str(tmp_path / "missing.json"), *trust],
        ["verify", str(_write(tmp_path / "junk.json", {"x": 1})), *trust],
        ["verify", str(result_file), *trust],  # bare result without --tool
        ["verify", str(saved_file), "--record", str(record_file), *trust],
        ["verify", str(saved_file), "--jwks", str(notary.jwks_file), "--log-key", "nope"],
        ["verify", str(saved_file), *trust, "--offline", "--notary", notary.url],
        ["verify", str(saved_file), "--jwks", notary.url + "/x", "--log-key", notary.vkey,
         "--offline"],
        ["verify", str(saved_file), *trust, "--quorum", "1"],
        ["verify", str(saved_file), *trust, "--witness", w.verifier_key_text(), "--quorum", "2"],
        ["verify", str(saved_file), *trust, "--state", "x", "--no-state"],
        ["verify", str(saved_file), "--jwks", str(record_file), "--log-key", notary.vkey],
    ]
    for argv in usage:
        code, out, err = await capture_cli(*argv)
        assert code == 2, (argv, out, err)


def test_log_base_url() -> None:
    def r(url: str) -> Receipt:
        return Receipt(id="tc_AAAAAAAAAAAAAAAAAAAAAA", server="s", tool="t",
                       call_sha256="a" * 64, issued_at="2026-01-01T00:00:00.000Z", origin="o",
                       index=7, entry_url=url)
    assert log_base_url(r("https://n.example/v1/ledger/entries/7")) == "https://n.example"
    assert log_base_url(r("https://n.example/api/v1/ledger/entries/7")) == \
        "https://n.example/api"
    assert log_base_url(r("https://n.example/elsewhere/7")) == "https://n.example"
    assert log_base_url(r("file:///etc/passwd")) is None


@pytest.fixture
def _no_home_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield


@pytest.mark.usefixtures("_no_home_state")
async def test_default_state_path_is_under_home(notary: LiveNotary, tmp_path: Path) -> None:
    c = await notary.notarize(x=1)
    code, out, _ = await capture_cli("verify", str(_write(tmp_path / "c.json", c.saved)),
                                 *notary.trust_args())
    assert code == 0, out
    assert (tmp_path / "home/.config/mcp-notary/verifier-state.json").exists()


async def test_state_is_kept_per_log_key_and_older_files_still_count(tmp_path: Path) -> None:
    """A notary that started over (a fresh data directory: the same origin, a new key) is
    another log: its receipts verify, and the first log's checkpoint stays where it was.
    Entries of older files, keyed by origin alone, count for the key they name (or, naming
    none, for the key their checkpoint verifies under) and move under that key."""
    state = tmp_path / "state.json"
    async with live_notary(tmp_path / "a", origin="notary.example/log") as first:
        await first.notarize(x=0)
        a1 = await first.notarize(x=1)  # its receipt's checkpoint is the log's latest
        a_call = _write(tmp_path / "a.json", a1.saved)
        code, out, _ = await capture_cli("verify", str(a_call), *first.trust_args(),
                                     "--state", str(state))
        assert code == 0, out
        first_vkey, first_args = first.vkey, first.trust_args()
        remembered = json.loads(state.read_text())["logs"][first_vkey]
    async with live_notary(tmp_path / "b", origin="notary.example/log") as second:
        assert second.vkey != first_vkey
        assert second.vkey.split("+")[0] == first_vkey.split("+")[0]  # one origin
        b0 = await second.notarize(x=0)
        b_call = _write(tmp_path / "b.json", b0.saved)
        code, out, _ = await capture_cli("verify", str(b_call), *second.trust_args(),
                                     "--state", str(state), "--json")
        assert code == 0, out
        report = json.loads(out)
        consistency = report["levels"]["consistency"]
        assert report["valid"] is True and consistency["status"] == "passed"
        assert "already seen" not in consistency["reason"]  # only the log's latest
        assert any("other logs of that name" in n for n in report["notes"])
        logs = json.loads(state.read_text())["logs"]
        assert set(logs) == {first_vkey, second.vkey} and logs[first_vkey] == remembered

        # An older file (keyed by origin), naming the first key, or none: no failure.
        origin = first_vkey.split("+")[0]
        for legacy in ({**remembered}, {**remembered, "vkey": ""}):
            state.write_text(json.dumps({"version": 1, "logs": {origin: legacy}}))
            code, out, _ = await capture_cli("verify", str(b_call), *second.trust_args(),
                                         "--state", str(state), "--offline")
            assert code == 0, out
            code, out, _ = await capture_cli("verify", str(a_call), *first_args,
                                         "--state", str(state), "--offline", "--json")
            assert code == 0, out
            assert json.loads(out)["levels"]["consistency"]["status"] == "passed"
    # Online (the first notary is gone, so its latest checkpoint cannot be fetched), the
    # older entry naming the first key moves under it.
    state.write_text(json.dumps({"version": 1, "logs": {origin: remembered}}))
    async with live_notary(tmp_path / "c", origin="notary.example/log") as third:
        c0 = await third.notarize(x=0)
        code, out, _ = await capture_cli("verify", str(_write(tmp_path / "c.json", c0.saved)),
                                     *third.trust_args(), "--state", str(state))
        assert code == 0, out
        assert set(json.loads(state.read_text())["logs"]) == {origin, third.vkey}


async def test_cli_witness_policy_nested_deep_or_not_utf8_is_an_input_error(
        notary: LiveNotary, tmp_path: Path) -> None:
    """A tlog-policy nested 400 groups deep, or not UTF-8, is exit 2 with a message: never a
    RecursionError, and one decoding rule with the JavaScript verifier."""
    c = await notary.notarize(x=1)
    call = _write(tmp_path / "c.json", c.saved)
    witness = CosignatureSigner.generate("witness.test/a").verifier_key_text()
    groups = ["group G1 any A", *(f"group G{i} any G{i - 1}" for i in range(2, 401))]
    deep = "\n".join([f"log {notary.vkey}", f"witness A {witness}", *groups, "quorum G400", ""])
    cases = {
        "deep": (deep.encode(), "nests 33 deep"),
        "bom": (b"\xef\xbb\xbf" + f"log {notary.vkey}\nquorum none\n".encode(), "byte order mark"),
        "latin1": (f"log {notary.vkey} https://caf\xe9.example\nquorum none\n".encode("latin-1"),
                   "not UTF-8"),
    }
    for name, (data, message) in cases.items():
        policy = tmp_path / f"{name}.policy"
        policy.write_bytes(data)
        code, out, err = await capture_cli("verify", str(call), "--jwks", str(notary.jwks_file),
                                       "--witness-policy", str(policy), "--offline", "--no-state")
        assert code == 2, (name, out, err)
        assert message in err and "Traceback" not in err, (name, err)
