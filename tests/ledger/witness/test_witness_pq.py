"""The witness with ML-DSA-44 keys: several keys per witness, ML-DSA-44 log keys, ``POST
/sign-subtree`` with every status of tlog-witness, and the monitoring endpoint
``GET /<origin hash>/checkpoint`` (C2SP/C2SP at 5ba5ee8)."""

from __future__ import annotations

import asyncio
import hashlib
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from dilithium_py.ml_dsa import ML_DSA_44

from ledger.cli.cosigner_args import parse_log_spec
from ledger.cli.main import main as ledger_main
from ledger.core.checkpoint import Checkpoint, parse_checkpoint_text
from ledger.core.cosignature import CosignatureSigner
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import (
    Ed25519Signer,
    Note,
    format_note,
    merge_signatures,
    open_note,
    parse_note,
    sign_note,
)
from ledger.core.proofs import consistency_plan
from ledger.core.subtree import subtree_consistency_plan
from ledger.core.subtree_cosignature import (
    SubtreeCosignatureSigner,
    SubtreeCosignatureVerifier,
    subtree_message,
)
from ledger.core.witness_protocol import (
    format_add_checkpoint,
    format_sign_subtree,
    parse_sign_subtree,
    verify_cosignatures,
)
from ledger.cosigner.cosigner import origin_hash
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore, WitnessStoreError
from tests.servers import serving

ORIGIN = "example.test/pq-log"
REPO = Path(__file__).resolve().parents[3]
LEAVES = [leaf_hash(b"entry %d" % i) for i in range(40)]


def proof_of(plan: list[tuple[int, int]]) -> list[bytes]:
    """Proof hashes straight from the leaves: each planned range is MTH(D[a:b])."""
    return [merkle_root(LEAVES[a:b]) for a, b in plan]


@dataclass
class Running:
    url: str
    witness: Witness
    http: aiohttp.ClientSession
    ed: CosignatureSigner
    pq: SubtreeCosignatureSigner
    log_ed: Ed25519Signer
    log_pq: SubtreeCosignatureSigner

    def checkpoint(self, size: int, *, ed: bool = True, pq: bool = True) -> bytes:
        text = Checkpoint(ORIGIN, size, merkle_root(LEAVES[:size])).text()
        sigs = []
        if ed:
            sigs.append(parse_note(sign_note(text, self.log_ed)).signatures[0])
        if pq:
            sigs.append(self.log_pq.cosign(text, 1_700_000_000))
        return format_note(Note(text, tuple(sigs)))

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        async with self.http.post(self.url + path, data=body) as r:
            return r.status, await r.read()

    async def add(self, old: int, size: int, **kw: bool) -> tuple[int, bytes]:
        proof = proof_of(consistency_plan(old, size)) if 0 < old < size else []
        return await self.post("/add-checkpoint",
                               format_add_checkpoint(old, proof, self.checkpoint(size, **kw)))

    async def cosigned(self, size: int) -> bytes:
        """A checkpoint of ``size`` carrying the witness's cosignatures (after add-checkpoint)."""
        note = self.checkpoint(size)
        text = parse_note(note).text
        status, body = await self.post("/add-checkpoint", format_add_checkpoint(
            size, [], note))
        assert status == 200, body
        sigs = verify_cosignatures(text, body, [self.ed.verifier(), self.pq.verifier()])
        return merge_signatures(note, sigs)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    ed = CosignatureSigner.generate("witness.test/ed")
    pq = SubtreeCosignatureSigner.generate("witness.test/pq")
    log_ed, log_pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    store = await WitnessStore.open(tmp_path / "witness.db",
                                    [ed.verifier_key_text(), pq.verifier_key_text()])
    witness = Witness([ed, pq], {ORIGIN: [log_pq.verifier()]}, store)
    async with serving(create_witness_app(witness)) as server, aiohttp.ClientSession() as http:
        yield Running(server.url, witness, http, ed, pq, log_ed, log_pq)
    await store.close()


async def test_a_witness_cosigns_with_each_key_a_log_signed_with_ml_dsa_only(
        running: Running) -> None:
    """The log key the witness trusts is ML-DSA-44; the Ed25519 line is a stranger's to it."""
    status, body = await running.add(0, 10, ed=False)
    assert status == 200, body
    text = Checkpoint(ORIGIN, 10, merkle_root(LEAVES[:10])).text()
    sigs = verify_cosignatures(text, body, [running.ed.verifier(), running.pq.verifier()])
    assert {s.name for s in sigs} == {"witness.test/ed", "witness.test/pq"}
    pq_line = next(s for s in sigs if s.name == "witness.test/pq")
    timestamp = int.from_bytes(pq_line.signature[:8], "big")
    assert timestamp > 0  # add-checkpoint cosignatures are timestamped
    message = subtree_message("witness.test/pq", timestamp, ORIGIN, 0, 10,
                              merkle_root(LEAVES[:10]))
    assert ML_DSA_44.verify(running.pq.public_key, message, pq_line.signature[8:])
    # A checkpoint whose only log signature is Ed25519 (unknown to this witness): 403.
    status, _ = await running.add(10, 12, pq=False)
    assert status == 403
    # A corrupted ML-DSA-44 log line: 403, and the state did not move.
    note = bytearray(running.checkpoint(12, ed=False))
    note[-10] = ord("A") if note[-10] != ord("A") else ord("B")
    status, _ = await running.post("/add-checkpoint",
                                   format_add_checkpoint(10, proof_of(consistency_plan(10, 12)),
                                                         bytes(note)))
    assert status == 403
    assert (await running.add(10, 12))[0] == 200


async def test_monitoring_endpoint_serves_the_newest_cosigned_checkpoint(
        running: Running) -> None:
    url = f"{running.url}/{origin_hash(ORIGIN)}/checkpoint"
    async with running.http.get(url) as r:
        assert r.status == 404
    assert (await running.add(0, 5))[0] == 200
    assert (await running.add(5, 9))[0] == 200
    async with running.http.get(url) as r:
        assert r.status == 200
        served = await r.read()
    note, verified = open_note(served, [running.log_pq.verifier(), running.ed.verifier(),
                                        running.pq.verifier()])
    assert note.text == Checkpoint(ORIGIN, 9, merkle_root(LEAVES[:9])).text()
    assert {s.name for s in verified} == {ORIGIN, "witness.test/ed", "witness.test/pq"}
    # Only the log signature the witness verified is served, not the stranger's Ed25519 line.
    assert [s.key_id for s in note.signatures if s.name == ORIGIN] == [running.log_pq.key_id]
    # Another origin's hash, or one the witness follows but never cosigned: 404.
    async with running.http.get(f"{running.url}/{origin_hash('nope')}/checkpoint") as r:
        assert r.status == 404
    assert origin_hash(ORIGIN) == hashlib.sha256(ORIGIN.encode()).hexdigest()


async def test_sign_subtree_answers_every_status(running: Running) -> None:
    assert (await running.add(0, 14))[0] == 200
    ref = await running.cosigned(14)
    root = merkle_root(LEAVES[:14])

    async def sign(start: int, end: int, *, proof: list[bytes] | None = None,
                   node: bytes | None = None, note: bytes | None = None) -> tuple[int, bytes]:
        p = proof if proof is not None else proof_of(subtree_consistency_plan(start, end, 14))
        h = node if node is not None else merkle_root(LEAVES[start:end])
        return await running.post("/sign-subtree",
                                  format_sign_subtree(start, end, h, p, note or ref))

    status, body = await sign(8, 13)
    assert status == 200, body
    verifier = SubtreeCosignatureVerifier.from_vkey(running.pq.verifier_key_text())
    lines = body.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("\u2014 witness.test/pq ")
    sig = parse_note(Checkpoint(ORIGIN, 1, root).text().encode() + b"\n" + body).signatures[0]
    assert sig.signature[:8] == bytes(8)  # timestamp 0
    assert verifier.verify_subtree(ORIGIN, 8, 13, merkle_root(LEAVES[8:13]), sig.signature)
    assert ML_DSA_44.verify(running.pq.public_key,
                            subtree_message("witness.test/pq", 0, ORIGIN, 8, 13,
                                            merkle_root(LEAVES[8:13])), sig.signature[8:])
    # 400: not a valid subtree, empty, past the checkpoint (before any proof is looked at:
    # the same empty proof and zero hash on a valid range are a 422).
    assert (await sign(8, 13, proof=[], node=bytes(32)))[0] == 422
    for start, end in ((1, 3), (4, 4), (8, 16)):
        assert (await sign(start, end, proof=[], node=bytes(32)))[0] == 400
    assert (await running.post("/sign-subtree", b"subtree 01 2\n" + b"A" * 44 + b"\n\nx"))[0] \
        == 400
    # 404: unknown origin (its checkpoint signed by nobody the witness knows).
    other = format_note(Note(Checkpoint("other.test/log", 14, root).text(),
                             (running.ed.cosign(Checkpoint("other.test/log", 14, root).text(),
                                                1),)))
    assert (await sign(8, 13, note=other))[0] == 404
    # 403: the reference checkpoint lacks this witness's cosignature (the log's is not enough).
    assert (await sign(8, 13, note=running.checkpoint(14)))[0] == 403
    # 422: a bad proof, a wrong subtree hash.
    proof = proof_of(subtree_consistency_plan(8, 13, 14))
    assert (await sign(8, 13, proof=proof[:-1]))[0] == 422
    assert (await sign(8, 13, node=merkle_root(LEAVES[8:12])))[0] == 422
    # The counters saw each answer.
    (metric,) = running.witness.subtree_requests.collect()
    samples = {s.labels["status"]: s.value for s in metric.samples if s.name.endswith("_total")}
    assert samples["200"] == 1 and samples["400"] >= 4 and samples["422"] >= 3


def test_sign_subtree_codec() -> None:
    note = b"o\n1\n" + b"A" * 43 + b"=\n\n\xe2\x80\x94 o AAAA\n"
    body = format_sign_subtree(8, 13, bytes(32), [bytes([1]) * 32], note)
    assert body.startswith(b"subtree 8 13\nAAAA")
    req = parse_sign_subtree(body)
    assert (req.start, req.end, req.subtree_hash, req.proof, req.checkpoint) == (
        8, 13, bytes(32), (bytes([1]) * 32,), note)
    for bad in (b"subtree 8\nAAAA\n\nx", b"subtree 8 13\n\nx", b"subtree -1 3\n" + b"A" * 44
                + b"\n\nx", b"subtree 8 13\n" + b"AAAA\n\nx"):
        with pytest.raises(ValueError):
            parse_sign_subtree(bad)


async def test_no_sign_subtree_without_an_ml_dsa_key(tmp_path: Path) -> None:
    ed = CosignatureSigner.generate("witness.test/ed")
    store = await WitnessStore.open(tmp_path / "w.db", ed.verifier_key_text())
    witness = Witness(ed, {ORIGIN: [Ed25519Signer.generate(ORIGIN).verifier()]}, store)
    async with (serving(create_witness_app(witness)) as server, aiohttp.ClientSession() as http,
                http.post(server.url + "/sign-subtree", data=b"subtree 0 1\n") as r):
        assert r.status in (404, 405)
    await store.close()


async def test_store_keeps_its_witness_across_added_keys(tmp_path: Path) -> None:
    ed = CosignatureSigner.generate("witness.test/ed").verifier_key_text()
    pq = SubtreeCosignatureSigner.generate("witness.test/pq").verifier_key_text()
    stranger = CosignatureSigner.generate("witness.test/x").verifier_key_text()
    await (await WitnessStore.open(tmp_path / "w.db", ed)).close()
    await (await WitnessStore.open(tmp_path / "w.db", [ed, pq])).close()  # gains a key
    await (await WitnessStore.open(tmp_path / "w.db", pq)).close()  # the new key alone
    with pytest.raises(WitnessStoreError, match="holds the state of witness"):
        await WitnessStore.open(tmp_path / "w.db", stranger)


def test_keygen_ml_dsa_and_log_spec_split_at_the_first_equals(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pq.key"
    assert ledger_main(["witness", "keygen", "--name", "witness.test/pq", "--out", str(out),
                        "--algorithm", "ml-dsa-44"]) == 0
    vkey = capsys.readouterr().out.strip().splitlines()[-1]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    signer = SubtreeCosignatureSigner.from_private_key(out.read_text().strip())
    assert SubtreeCosignatureVerifier.from_vkey(vkey) == signer.verifier()
    log_vkey = SubtreeCosignatureSigner.generate(ORIGIN).verifier_key_text()
    assert log_vkey.endswith("=")
    for spec in (log_vkey, f"{ORIGIN}={log_vkey}"):
        origin, verifier = parse_log_spec(spec)
        assert origin == ORIGIN and isinstance(verifier, SubtreeCosignatureVerifier)
    with pytest.raises(Exception, match="not a log key"):
        parse_log_spec(f"{ORIGIN}={CosignatureSigner.generate('w').verifier_key_text()}")


async def test_two_witness_processes_share_a_key_file_and_data(tmp_path: Path) -> None:
    """A key file may be used by several witness processes at once; they share one state."""
    key = tmp_path / "pq.key"
    subprocess.run([sys.executable, "-m", "ledger.cli.main", "witness", "keygen", "--name",
                    "witness.test/pq", "--out", str(key), "--algorithm", "ml-dsa-44"],
                   check=True, capture_output=True, cwd=REPO)
    log_pq = SubtreeCosignatureSigner.generate(ORIGIN)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "witness", "serve", "--key", str(key),
         "--log", log_pq.verifier_key_text(), "--listen", "127.0.0.1:0", "--data",
         str(tmp_path / "data"), "--log-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO) for _ in range(2)]
    try:
        urls = []
        for p in procs:
            assert p.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 30)
            urls.append(line.decode().strip())

        def note(size: int) -> bytes:
            text = Checkpoint(ORIGIN, size, merkle_root(LEAVES[:size])).text()
            return format_note(Note(text, (log_pq.cosign(text, 1),)))

        async with aiohttp.ClientSession() as http:
            async with http.post(urls[0] + "/add-checkpoint",
                                 data=format_add_checkpoint(0, [], note(4))) as r:
                assert r.status == 200
            # The second process sees the first one's state: old 0 is now a conflict.
            async with http.post(urls[1] + "/add-checkpoint",
                                 data=format_add_checkpoint(0, [], note(6))) as r:
                assert r.status == 409 and await r.read() == b"4\n"
            async with http.post(urls[1] + "/add-checkpoint", data=format_add_checkpoint(
                    4, proof_of(consistency_plan(4, 6)), note(6))) as r:
                assert r.status == 200
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


async def test_a_resubmission_at_the_same_size_never_changes_the_monitoring_view(
        tmp_path: Path) -> None:
    """What ``GET /<origin hash>/checkpoint`` serves is fixed when a size is first cosigned: a
    resubmission at that size that drops a log signature line, or adds an extension line the
    ML-DSA-44 signature (origin, size and root only) does not cover, is cosigned for its
    sender but never becomes what monitors get."""
    ed = CosignatureSigner.generate("witness.test/ed")
    log_ed, log_pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    store = await WitnessStore.open(tmp_path / "w.db", ed.verifier_key_text())
    witness = Witness(ed, {ORIGIN: [log_ed.verifier(), log_pq.verifier()]}, store)

    def note(size: int, *, ed_line: bool = True, extension: str | None = None) -> bytes:
        cp = Checkpoint(ORIGIN, size, merkle_root(LEAVES[:size]),
                        (extension,) if extension else ())
        sigs = [log_pq.cosign(cp.text(), 1_700_000_000)]
        if ed_line:
            sigs.insert(0, parse_note(sign_note(cp.text(), log_ed)).signatures[0])
        return format_note(Note(cp.text(), tuple(sigs)))

    url = f"/{origin_hash(ORIGIN)}/checkpoint"
    async with (serving(create_witness_app(witness)) as server,
                aiohttp.ClientSession(base_url=server.url) as http):
        async def add(old: int, body: bytes) -> int:
            size = parse_checkpoint_text(parse_note(body).text).size
            proof = proof_of(consistency_plan(old, size)) if 0 < old < size else []
            async with http.post("/add-checkpoint",
                                 data=format_add_checkpoint(old, proof, body)) as r:
                return r.status

        async def served() -> bytes:
            async with http.get(url) as r:
                assert r.status == 200
                return await r.read()

        assert await add(0, note(9)) == 200
        first = await served()
        assert {s.key_id for s in parse_note(first).signatures} >= {log_ed.key_id,
                                                                   log_pq.key_id}
        assert await add(9, note(9, ed_line=False)) == 200
        assert await add(9, note(9, ed_line=False, extension="attacker: not the log's")) == 200
        assert await served() == first
        # The next size is a new view: the log lines the witness verified in that request.
        assert await add(9, note(12, ed_line=False)) == 200
        assert parse_note(await served()).text == parse_note(note(12)).text
        assert await add(12, note(12)) == 200
        assert [s.key_id for s in parse_note(await served()).signatures
                if s.name == ORIGIN] == [log_pq.key_id]
    await store.close()
