"""Trust in ML-DSA-44 keys alone: tlog-policy ``log`` and ``witness`` lines naming ML-DSA-44
keys verify a dual-signed, cosigned checkpoint; the monitor pinned to the log's ML-DSA-44 key
follows and audits a log that dual-signs, and refuses a corrupted ML-DSA-44 line."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from ledger.cli.monitor import register, run
from ledger.core.checkpoint import Checkpoint
from ledger.core.cosignature import CosignatureSigner, parse_log_key, parse_witness_key
from ledger.core.note import Ed25519Signer, NoteError, merge_signatures, sign_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_policy import TlogPolicyError, TlogPolicyNotMet, parse_tlog_policy
from ledger.http.routes import create_ledger_app
from ledger.log.facade import Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.process.exitcodes import ExitCode
from ledger.storage.memory import MemoryStore
from tests.servers import Serve

ORIGIN = "example.test/pq-trust"


def dual_signed(ed: Ed25519Signer, pq: SubtreeCosignatureSigner, size: int) -> tuple[str, bytes]:
    text = Checkpoint(ORIGIN, size, bytes(range(32))).text()
    return text, merge_signatures(sign_note(text, ed), [pq.cosign(text, 1_700_000_000)])


def test_a_policy_of_ml_dsa_keys_only() -> None:
    ed, pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.derived_from(
        Ed25519Signer.generate(ORIGIN))
    w1 = SubtreeCosignatureSigner.generate("witness.test/pq1")
    w2 = SubtreeCosignatureSigner.generate("witness.test/pq2")
    policy = parse_tlog_policy((
        f"log {pq.verifier_key_text()}\n"
        f"witness w1 {w1.verifier_key_text()} http://127.0.0.1:1\n"
        f"witness w2 {w2.verifier_key_text()}\n"
        "group both all w1 w2\nquorum both\n").encode())
    text, note = dual_signed(ed, pq, 10)
    with pytest.raises(TlogPolicyNotMet, match="quorum"):
        policy.verify(note)
    cosigned = merge_signatures(note, [w1.cosign(text, 5), w2.cosign(text, 6)])
    cp, names = policy.verify(cosigned)
    assert cp.size == 10 and names == {"w1", "w2"}
    # Without the ML-DSA-44 log line (the Ed25519 one is a stranger to this policy): not met.
    ed_only = merge_signatures(sign_note(text, ed), [w1.cosign(text, 5), w2.cosign(text, 6)])
    with pytest.raises(TlogPolicyNotMet, match="not signed by a policy log"):
        policy.verify(ed_only)
    # A corrupted ML-DSA-44 line of a key the policy names: an error, not a pass.
    lines = cosigned.decode().split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("\u2014 witness.test/pq1 "))
    lines[i] = lines[i][:-8] + ("A" if lines[i][-8] != "A" else "B") + lines[i][-7:]
    with pytest.raises(NoteError):
        policy.verify("\n".join(lines).encode())


def test_key_kinds_are_checked_where_they_are_named() -> None:
    pq = SubtreeCosignatureSigner.generate(ORIGIN).verifier_key_text()
    ed = Ed25519Signer.generate(ORIGIN).verifier_key_text()
    cosig = CosignatureSigner.generate("w").verifier_key_text()
    assert parse_log_key(pq).name == ORIGIN and parse_log_key(ed).name == ORIGIN
    assert parse_witness_key(pq).name == ORIGIN and parse_witness_key(cosig).name == "w"
    with pytest.raises(NoteError, match="not a log key"):
        parse_log_key(cosig)
    with pytest.raises(NoteError, match="not a witness key"):
        parse_witness_key(ed)
    with pytest.raises(TlogPolicyError, match="bad log key"):
        parse_tlog_policy(f"log {cosig}\nquorum none\n".encode())


async def monitor(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    code = await run(parser.parse_args(list(argv)), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_a_monitor_pinned_to_the_ml_dsa_key_audits_a_dual_signing_log(
        tmp_path: Path, serve: Serve) -> None:
    ed = Ed25519Signer.generate(ORIGIN)
    pq = PostQuantumCheckpoints(SubtreeCosignatureSigner.derived_from(ed), ORIGIN,
                                min_interval=0)
    log = await Log.open(MemoryStore(), signer=ed)
    for i in range(40):
        await log.append(b"entry %d" % i)
    url = (await serve(create_ledger_app(log, pq))).url
    args = ["monitor", "--log", url, "--vkey", pq.vkey, "--state", str(tmp_path / "s.json"),
            "--audit"]
    code, out, err = await monitor(*args)
    assert code == ExitCode.OK, err
    assert "size 40 (first seen); audited 40 entries" in out
    for i in range(10):
        await log.append(b"more %d" % i)
    code, out, err = await monitor(*args)
    assert code == ExitCode.OK, err
    assert "size 50 (consistent with 40)" in out
    # Pinned to the Ed25519 key of another log with this origin: no valid signature.
    other = Ed25519Signer.generate(ORIGIN).verifier_key_text()
    code, _, err = await monitor("monitor", "--log", url, "--vkey", other, "--state",
                                 str(tmp_path / "other.json"))
    assert code != ExitCode.OK and err
    await log.close()
