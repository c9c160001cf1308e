"""The C2SP tlog-witness: codecs, every status of add-checkpoint, atomicity, SIGKILL safety."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from ledger.cli.cosigner_args import parse_log_spec
from ledger.cli.main import main as ledger_main
from ledger.client.http import HttpClient
from ledger.client.witness import WitnessClient, WitnessConflict, WitnessRefused
from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.cosignature import CosignatureSigner, CosignatureVerifier
from ledger.core.hashing import EMPTY_ROOT
from ledger.core.note import Ed25519Signer, open_note
from ledger.core.witness_protocol import (
    SIZE_CONTENT_TYPE,
    ProtocolError,
    format_add_checkpoint,
    parse_add_checkpoint,
    parse_size,
)
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore
from tests.servers import serving

ORIGIN = "example.test/log"
REPO = Path(__file__).resolve().parents[3]


async def make_log(signer: Ed25519Signer, entries: list[bytes]) -> Log:
    log = await Log.open(MemoryStore(), signer=signer)
    if entries:
        await asyncio.gather(*(log.append(e) for e in entries))
    return log


async def note_at(log: Log) -> bytes:
    head = await log.head(0)
    assert head is not None
    return head.note


@dataclass
class Running:
    url: str
    witness: Witness
    http: aiohttp.ClientSession
    signer: CosignatureSigner

    async def post(self, body: bytes) -> tuple[int, str, bytes]:
        async with self.http.post(self.url + "/add-checkpoint", data=body) as r:
            return r.status, r.headers.get("Content-Type", ""), await r.read()

    async def submit(self, old: int, proof: list[bytes], note: bytes) -> tuple[int, str, bytes]:
        return await self.post(format_add_checkpoint(old, proof, note))


@pytest.fixture
async def log_signer() -> Ed25519Signer:
    return Ed25519Signer.generate(ORIGIN)


@pytest.fixture
async def running(tmp_path: Path, log_signer: Ed25519Signer) -> AsyncIterator[Running]:
    signer = CosignatureSigner.generate("witness.test/w1")
    store = await WitnessStore.open(tmp_path / "witness.db", signer.verifier_key_text())
    witness = Witness(signer, {ORIGIN: [log_signer.verifier()]}, store)
    async with serving(create_witness_app(witness)) as server, aiohttp.ClientSession() as http:
        yield Running(server.url, witness, http, signer)
    await store.close()


# --- codecs -----------------------------------------------------------------------------------


def test_request_round_trip_and_spec_example_shape() -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 5, b"\x01" * 32), Ed25519Signer.generate(ORIGIN))
    proof = [bytes([i]) * 32 for i in range(3)]
    body = format_add_checkpoint(4, proof, note)
    assert body.startswith(b"old 4\n") and b"\n\n" + note[: len(ORIGIN)] in body
    req = parse_add_checkpoint(body)
    assert (req.old, list(req.proof), req.checkpoint) == (4, proof, note)
    assert parse_add_checkpoint(format_add_checkpoint(0, [], note)).proof == ()


@pytest.mark.parametrize("body", [
    b"old 1\n\n",
    b"old 01\n\nx\n",
    b"old -1\n\nx\n",
    b"old  1\n\nx\n",
    b"new 1\n\nx\n",
    b"old 1\nnot base64!\n\nx\n",
    b"old 1\nAAAA\n\nx\n",  # 3 bytes, not a hash
    b"old 1\n" + b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n" * 64 + b"\nx\n",
    b"old 1 \n\nx\n",
    b"no blank line",
])
def test_malformed_requests(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_add_checkpoint(body)


def test_size_body() -> None:
    assert parse_size(b"42\n") == 42
    for bad in (b"42", b"042\n", b"-1\n", b"", b"1 \n"):
        with pytest.raises(ProtocolError):
            parse_size(bad)


def test_log_spec_forms() -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    vkey = signer.verifier_key_text()
    assert parse_log_spec(vkey)[0] == ORIGIN
    origin, verifier = parse_log_spec(f"other.origin={vkey}")
    assert origin == "other.origin" and verifier.key_id == signer.key_id


def test_keygen_writes_0600_and_prints_vkey(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    out = tmp_path / "w.key"
    assert ledger_main(["witness", "keygen", "--name", "witness.test/k", "--out", str(out)]) == 0
    vkey = capsys.readouterr().out.strip()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    signer = CosignatureSigner.from_private_key(out.read_text().strip())
    assert CosignatureVerifier.from_vkey(vkey).public_key == signer.public_key
    # Never overwrites a key.
    assert ledger_main(["witness", "keygen", "--name", "witness.test/k", "--out", str(out)]) == 2


# --- add-checkpoint statuses ------------------------------------------------------------------


async def test_cosigns_grows_and_answers_every_refusal(running: Running,
                                                       log_signer: Ed25519Signer) -> None:
    log = await make_log(log_signer, [b"a%d" % i for i in range(10)])
    note10 = await note_at(log)
    status, ctype, body = await running.submit(0, [], note10)
    assert status == 200, body
    # The 200 body is exactly one cosignature line that verifies on the checkpoint.
    assert body.startswith("— witness.test/w1 ".encode()) and body.endswith(b"\n")
    assert body.count(b"\n") == 1
    text = note10.decode().split("\n\n")[0] + "\n"
    open_note((text + "\n").encode() + body, [running.signer.verifier()])

    # 409: old is not the witnessed size; the body is that size, as text/x.tlog.size.
    status, ctype, body = await running.submit(0, [], note10)
    assert (status, ctype, body) == (409, SIZE_CONTENT_TYPE, b"10\n")

    await asyncio.gather(*(log.append(b"b%d" % i) for i in range(7)))
    note17 = await note_at(log)
    proof = await log.reader.consistency_proof(10, 17)
    # 422: a proof that does not verify.
    bad = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
    status, _, _ = await running.submit(10, bad, note17)
    assert status == 422
    # 400: old above the checkpoint size (checked before the stored size).
    status, _, _ = await running.submit(18, [], note17)
    assert status == 400
    status, _, _ = await running.submit(10, proof, note17)
    assert status == 200
    # Same size, same root: cosigned again (no state change).
    status, _, _ = await running.submit(17, [], note17)
    assert status == 200
    # Older checkpoint after a newer one: 409 with the newer size, never a rollback.
    status, ctype, body = await running.submit(10, [], note10)
    assert (status, ctype, body) == (409, SIZE_CONTENT_TYPE, b"17\n")

    # 404: unknown origin; 403: not signed by the trusted key, or no signature line by it.
    stranger = Ed25519Signer.generate("stranger.test/log")
    status, _, _ = await running.submit(0, [], sign_checkpoint(
        Checkpoint("stranger.test/log", 1, b"\x00" * 32), stranger))
    assert status == 404
    impostor = Ed25519Signer.generate(ORIGIN)
    status, _, _ = await running.submit(17, [], sign_checkpoint(
        Checkpoint(ORIGIN, 17, b"\x00" * 32), impostor))
    assert status == 403
    forged = note17.replace(note17.split(b"\n")[-2][-8:], b"AAAAAAA=")
    status, _, _ = await running.submit(17, [], forged)
    assert status in (400, 403)
    # 400: malformed bodies never reach the store; so is one labelled gzip that is not.
    for body in (b"", b"old 17\n", b"old x\n\n" + note17, b"old 17\n\nnot a note\n"):
        status, _, _ = await running.post(body)
        assert status == 400
    async with running.http.post(running.url + "/add-checkpoint",
                                 data=format_add_checkpoint(17, [], note17),
                                 headers={"Content-Encoding": "gzip"}) as r:
        assert (r.status, await r.text()) == (
            400, "the request body cannot be read as its Content-Encoding says\n")
    stored = await running.witness.store.latest(ORIGIN)
    assert stored is not None and stored[0].size == 17
    evidence = await running.witness.store.evidence()
    assert [e.status for e in evidence] == [422]


async def test_old_zero_rules(running: Running, log_signer: Ed25519Signer) -> None:
    empty = sign_checkpoint(Checkpoint(ORIGIN, 0, b"\x07" * 32), log_signer)
    status, _, _ = await running.submit(0, [], empty)
    assert status == 422  # a size-0 checkpoint must carry SHA-256("")
    log = await make_log(log_signer, [b"x", b"y"])
    note2 = await note_at(log)
    status, _, _ = await running.submit(0, [b"\x00" * 32], note2)
    assert status == 422  # from size 0 the proof must be empty
    status, _, _ = await running.submit(0, [], sign_checkpoint(
        Checkpoint(ORIGIN, 0, EMPTY_ROOT), log_signer))
    assert status == 200
    status, _, _ = await running.submit(0, [], note2)
    assert status == 200


async def test_forked_log_is_refused(running: Running, log_signer: Ed25519Signer) -> None:
    """Same key, two histories: the witness cosigns one and refuses the other."""
    honest = await make_log(log_signer, [b"e%d" % i for i in range(20)])
    fork = await make_log(log_signer, [b"e%d" % i for i in range(12)] +
                          [b"evil%d" % i for i in range(8)])
    assert (await running.submit(0, [], await note_at(honest)))[0] == 200
    # Same size, another root: 422 (tlog-witness at C2SP 5ba5ee8: "If they don't match, the
    # witness MUST respond with a 422").
    status, _, _ = await running.submit(20, [], await note_at(fork))
    assert status == 422
    # Larger fork with its own (valid for the fork) proof: 422.
    await asyncio.gather(*(fork.append(b"more%d" % i) for i in range(5)))
    proof = await fork.reader.consistency_proof(20, 25)
    status, _, _ = await running.submit(20, proof, await note_at(fork))
    assert status == 422
    stored = await running.witness.store.latest(ORIGIN)
    assert stored is not None
    assert stored[0].root == (await honest.head(0)).checkpoint.root_hash  # type: ignore[union-attr]
    assert sorted(e.status for e in await running.witness.store.evidence()) == [422, 422]


async def test_client_learns_size_from_409(running: Running, log_signer: Ed25519Signer) -> None:
    log = await make_log(log_signer, [b"c%d" % i for i in range(5)])
    client = WitnessClient(running.url, running.signer.verifier(), HttpClient(running.http))
    sigs = await client.add_checkpoint(0, [], await note_at(log))
    assert [s.name for s in sigs] == ["witness.test/w1"]
    await log.append(b"c5")
    with pytest.raises(WitnessConflict) as info:
        await client.add_checkpoint(0, [], await note_at(log))
    assert info.value.size == 5 and not info.value.root_mismatch
    proof = await log.reader.consistency_proof(5, 6)
    assert await client.add_checkpoint(5, proof, await note_at(log))
    # A client configured with another key for this witness rejects the answer.
    other = WitnessClient(running.url, CosignatureSigner.generate("witness.test/w1").verifier(),
                          HttpClient(running.http))
    with pytest.raises(WitnessRefused):
        await other.add_checkpoint(6, [], await note_at(log))


async def test_concurrent_requests_never_roll_back(running: Running,
                                                   log_signer: Ed25519Signer) -> None:
    """Many racing submissions from the same old size: exactly one wins, the size only grows."""
    log = await make_log(log_signer, [b"r%d" % i for i in range(4)])
    assert (await running.submit(0, [], await note_at(log)))[0] == 200
    notes: list[tuple[bytes, list[bytes]]] = []
    for _ in range(12):
        await log.append(os.urandom(8))
        head = await log.head(0)
        assert head is not None
        notes.append((head.note, await log.reader.consistency_proof(4, head.size)))
    results = await asyncio.gather(*(running.submit(4, proof, note) for note, proof in notes))
    assert sorted(r[0] for r in results).count(200) == 1
    winner = next(i for i, r in enumerate(results) if r[0] == 200)
    stored = await running.witness.store.latest(ORIGIN)
    assert stored is not None and stored[0].size == 4 + winner + 1
    assert all(r[2] == b"%d\n" % stored[0].size for r in results if r[0] == 409)


# --- crash safety -----------------------------------------------------------------------------


def _start_witness(key: Path, data: Path, vkey: str) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "notary.cli.main", "witness", "serve", "--key", str(key),
         "--log", f"{ORIGIN}={vkey}", "--listen", "127.0.0.1:0", "--data", str(data),
         "--log-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


async def test_sigkill_never_rolls_back(tmp_path: Path, log_signer: Ed25519Signer,
                                        seeded_rng: random.Random) -> None:
    """Kill -9 the witness at random moments while it cosigns a growing log, restart it: its
    size is never below the largest it cosigned, and older checkpoints are refused."""
    key = tmp_path / "w.key"
    signer = CosignatureSigner.generate("witness.test/crash")
    key.write_text(signer.private_key_text() + "\n")
    key.chmod(0o600)
    vkey = log_signer.verifier_key_text()
    log = await make_log(log_signer, [b"k%d" % i for i in range(3)])
    rng = seeded_rng
    cosigned: list[tuple[int, bytes]] = []
    known = 0
    async with aiohttp.ClientSession() as http:
        for _ in range(3):
            proc, url = _start_witness(key, tmp_path / "data", vkey)
            client = WitnessClient(url, signer.verifier(), HttpClient(http, timeout=5))
            # After the restart: the persisted size is at least the last cosigned one (a request
            # in flight at the kill may have been committed without its answer arriving).
            head = await log.head(0)
            assert head is not None
            try:
                await client.add_checkpoint(0, [], head.note)
                assert known == 0
                known = head.size
                cosigned.append((head.size, head.note))
            except WitnessConflict as c:
                assert c.size >= (cosigned[-1][0] if cosigned else 0)
                known = c.size
            for size, note in cosigned[:-1]:
                if size < known:
                    with pytest.raises(WitnessConflict):  # stale: never cosigned again
                        await client.add_checkpoint(0, [], note)

            async def grow_and_submit(client: WitnessClient) -> None:
                nonlocal known
                while True:
                    await log.append(os.urandom(8))
                    head = await log.head(0)
                    assert head is not None
                    proof = await log.reader.consistency_proof(known, head.size) if known else []
                    await client.add_checkpoint(known, proof, head.note)
                    known = head.size
                    cosigned.append((head.size, head.note))

            task = asyncio.create_task(grow_and_submit(client))
            await asyncio.sleep(rng.uniform(0.1, 0.4))
            proc.send_signal(signal.SIGKILL)  # at any moment: mid-request, mid-commit, idle
            proc.wait()
            with contextlib.suppress(Exception):
                await task
            assert cosigned, "nothing was cosigned before the kill"
        proc, url = _start_witness(key, tmp_path / "data", vkey)
        try:
            async with http.post(url + "/add-checkpoint",
                                 data=format_add_checkpoint(0, [], cosigned[0][1])) as r:
                assert r.status == 409
                assert r.headers["Content-Type"] == SIZE_CONTENT_TYPE
                assert int(await r.read()) >= cosigned[-1][0]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait()


# --- tlog-policy ------------------------------------------------------------------------------


def _policy_keys() -> tuple[Ed25519Signer, list[CosignatureSigner]]:
    return Ed25519Signer.generate(ORIGIN), [CosignatureSigner.generate(f"w{i}.test")
                                            for i in range(6)]


def test_policy_groups_and_quorum() -> None:
    from ledger.core.tlog_policy import TlogPolicyNotMet, parse_tlog_policy

    log, ws = _policy_keys()
    text = (f"# two operators\nlog {log.verifier_key_text()} https://log.test\n\n"
            + "".join(f"witness X{i} {ws[i].verifier_key_text()}\n" for i in range(3))
            + "group X 2 X0 X1 X2\n"
            + "".join(f"  witness\tY{i} {ws[3 + i].verifier_key_text()}\n" for i in range(3))
            + "group Y any Y0 Y1 Y2\ngroup XY all X Y\nquorum XY\n")
    policy = parse_tlog_policy(text)
    assert policy.satisfied({"X0", "X2", "Y1"})
    assert not policy.satisfied({"X0", "Y1"}) and not policy.satisfied({"X0", "X1", "X2"})
    cp_note = sign_checkpoint(Checkpoint(ORIGIN, 3, b"\x02" * 32), log)
    cptext = cp_note.decode().split("\n\n")[0] + "\n"
    from ledger.core.note import merge_signatures

    sigs = [ws[i].cosign(cptext, 1_700_000_000) for i in (0, 1, 4)]
    cp, cosigned = policy.verify(merge_signatures(cp_note, sigs))
    assert cp.size == 3 and cosigned == {"X0", "X1", "Y1"}
    with pytest.raises(TlogPolicyNotMet):
        policy.verify(merge_signatures(cp_note, sigs[:2]))
    with pytest.raises(TlogPolicyNotMet):  # signed by a key the policy does not list
        policy.verify(sign_checkpoint(Checkpoint(ORIGIN, 3, b"\x02" * 32),
                                      Ed25519Signer.generate(ORIGIN)) + b"")
    assert parse_tlog_policy("quorum none\n").satisfied(set())


@pytest.mark.parametrize("body", [
    "",  # no quorum
    "quorum none\nquorum none\n",
    "quorum X\n",  # undefined
    "witness none {w0}\nquorum none\n",
    "witness A {w0}\nwitness B {w0}\nquorum A\n",  # duplicate key
    "witness A {w0}\nwitness A {w1}\nquorum A\n",
    "witness A {w0}\ngroup G 2 A\nquorum G\n",  # k > n
    "witness A {w0}\ngroup G 0 A\nquorum G\n",
    "witness A {w0}\ngroup G any A\ngroup H any A\nquorum G\n",  # member twice
    "witness A {w0}\ngroup G any B\nquorum G\n",
    "witness A {log}\nquorum A\n",  # a log key where a cosignature key belongs
    "log {w0}\nquorum none\n",
    "frobnicate\nquorum none\n",
    "quorum none\x0b\n",
])
def test_policy_rejects(body: str) -> None:
    from ledger.core.tlog_policy import TlogPolicyError, parse_tlog_policy

    log, ws = _policy_keys()
    text = body.format(w0=ws[0].verifier_key_text(), w1=ws[1].verifier_key_text(),
                       log=log.verifier_key_text())
    with pytest.raises(TlogPolicyError):
        parse_tlog_policy(text)


def test_policy_from_quorum_counts_every_valid_cosignature() -> None:
    from ledger.core.note import merge_signatures
    from ledger.core.tlog_policy import TlogPolicy, TlogPolicyError, parse_tlog_policy

    log, ws = _policy_keys()
    keys = [CosignatureVerifier.from_vkey(w.verifier_key_text()) for w in ws[:3]]
    simple = TlogPolicy.from_quorum([*keys, keys[0]], 2)  # a key given twice counts once
    assert sorted(simple.witnesses) == ["w0.test", "w1.test", "w2.test"]
    assert simple.describe() == "2 of 3 (w0.test, w1.test, w2.test)"
    assert simple.quorum_header == "2" and simple.requires_cosignatures
    cp_note = sign_checkpoint(Checkpoint(ORIGIN, 3, b"\x02" * 32), log)
    text = cp_note.decode().split("\n\n")[0] + "\n"
    all_three = merge_signatures(cp_note, [w.cosign(text, 1_700_000_000) for w in ws[:3]])
    # The quorum is 2, and all three verify: three are reported, not two.
    assert simple.cosigners(all_three, [log.verifier()]) == {"w0.test", "w1.test", "w2.test"}
    assert simple.satisfied(simple.cosigners(all_three))
    one = merge_signatures(cp_note, [ws[1].cosign(text, 1_700_000_000)])
    assert simple.cosigners(one) == {"w1.test"} and not simple.satisfied({"w1.test"})
    assert simple.cosigners(cp_note) == set()
    assert not TlogPolicy.from_quorum(keys, 0).requires_cosignatures
    with pytest.raises(TlogPolicyError):
        TlogPolicy.from_quorum(keys, 4)
    # Two keys under one name stay two witnesses.
    twin = CosignatureSigner.generate("w0.test")
    named = TlogPolicy.from_quorum([keys[0], twin.verifier()], 2)
    assert sorted(named.witnesses) == ["w0.test", "w0.test#2"]
    nested = parse_tlog_policy("".join(f"witness a{i} {ws[i].verifier_key_text()}\n"
                                       for i in range(3))
                               + "group pair 2 a0 a1\ngroup top all pair a2\nquorum top\n")
    assert nested.describe() == "group top: 2 of 2 ((group pair: 2 of 2 (a0, a1)), a2)"
    assert nested.quorum_header == "top"
