"""The log's ML-DSA-44 checkpoint line (ledger.log.pq_checkpoints): on committed checkpoints only,
at most once per interval for readers, exactly when asked for a given checkpoint."""

from __future__ import annotations

import pytest
from dilithium_py.ml_dsa import ML_DSA_44

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import Ed25519Signer, open_note, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner, subtree_message
from ledger.log.facade import Head, Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.storage.memory import MemoryStore

ORIGIN = "example.test/pq"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def grow(log: Log, n: int) -> Head:
    for i in range(n):
        await log.append(b"entry %d" % i)
    head = await log.head(0)
    assert head is not None
    return head


async def test_dual_signed_checkpoints_open_with_either_key() -> None:
    ed, pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=ed)
    head = await grow(log, 3)
    pqc = PostQuantumCheckpoints(pq, ORIGIN, clock=lambda: 1_700_000_123.9)
    note = pqc.sign(head)
    assert pqc.sign(head) is note and pqc.signed == 1  # one signature per checkpoint
    parsed, verified = open_note(note, [ed.verifier(), pq.verifier()])
    assert [s.key_id for s in verified] == [ed.key_id, pq.key_id]
    assert parsed.text == parse_note(head.note).text
    line = next(s for s in parsed.signatures if s.key_id == pq.key_id)
    assert line.signature[:8] == (1_700_000_123).to_bytes(8, "big")  # POSIX seconds
    cp = parse_checkpoint_text(parsed.text)
    message = subtree_message(ORIGIN, 1_700_000_123, ORIGIN, 0, cp.size, cp.root_hash)
    assert ML_DSA_44.verify(pq.public_key, message, line.signature[8:])
    open_note(note, [pq.verifier()])  # the ML-DSA-44 line alone verifies it
    await log.close()


async def test_readers_get_a_new_signature_at_most_once_per_interval() -> None:
    ed, pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=ed)
    mono = Clock()
    pqc = PostQuantumCheckpoints(pq, ORIGIN, min_interval=2.0, monotonic=mono)
    h1 = await grow(log, 1)
    assert pqc.latest(h1)[0] == 1
    h2 = await grow(log, 1)
    assert pqc.latest(h2)[0] == 1 and pqc.signed == 1  # too soon: the older one
    mono.now += 2.0
    size, note = pqc.latest(h2)
    assert size == 2 and pqc.signed == 2
    open_note(note, [pq.verifier()])
    # A witness submission needs its exact checkpoint: signed at once, whatever the interval.
    h3 = await grow(log, 1)
    assert parse_checkpoint_text(parse_note(pqc.sign(h3)).text).size == 3 and pqc.signed == 3
    assert pqc.latest(h3)[0] == 3
    await log.close()


def test_the_key_must_be_named_for_the_origin() -> None:
    with pytest.raises(ValueError, match="origin"):
        PostQuantumCheckpoints(SubtreeCosignatureSigner.generate("other"), ORIGIN)
