"""The Cosigner over the state protocol alone: what a new kind of state (the mirror's object
storage, say) must provide, and what the Cosigner checks before a state sees a request.

An in-memory :class:`~ledger.cosigner.cosigner.CosignerState` of a few lines is enough for
add-checkpoint's every answer and for the served checkpoint; the witness and the mirror tests
cover their SQLite states."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.hashing import EMPTY_ROOT
from ledger.core.note import (
    Ed25519Signer,
    Note,
    NoteSignature,
    format_note,
    merge_signatures,
    sign_note,
)
from ledger.core.witness_protocol import (
    SIZE_CONTENT_TYPE,
    AcceptedTree,
    CheckpointDecision,
    decide,
    format_add_checkpoint,
    parse_size,
    verify_cosignatures,
)
from ledger.cosigner.cosigner import Cosign, Cosigner, Submitted, origin_hash

ORIGIN = "example.test/cosigned"
ROOT = b"\x07" * 32


@dataclass
class MemoryState:
    """A cosigning state in a dict: the compare step, then the cosigned note kept."""

    signs: bool = True
    held: dict[str, tuple[AcceptedTree, bytes]] = field(default_factory=dict)
    seen: list[Submitted] = field(default_factory=list)

    async def add_checkpoint(self, submitted: Submitted, cosign: Cosign
                             ) -> tuple[CheckpointDecision, list[NoteSignature]]:
        self.seen.append(submitted)
        cp = submitted.checkpoint
        stored = self.held.get(cp.origin)
        decision = decide(None if stored is None else stored[0], submitted.request.old,
                          submitted.request.proof, cp)
        sigs = cosign(submitted.verified.text) if self.signs and decision.store else []
        if decision.store:
            note = Note(submitted.verified.text, (*submitted.verified.signatures, *sigs))
            self.held[cp.origin] = AcceptedTree(cp.size, cp.root_hash), format_note(note)
        return decision, sigs

    async def served(self, origin: str) -> bytes | None:
        held = self.held.get(origin)
        return None if held is None else held[1]


def setup(signs: bool = True) -> tuple[Cosigner, MemoryState, Ed25519Signer, CosignatureSigner]:
    log_key = Ed25519Signer.generate(ORIGIN)
    key = CosignatureSigner.generate("cosigner.test/c1")
    state = MemoryState(signs=signs)
    cosigner = Cosigner([key], {ORIGIN: [log_key.verifier()]}, state, role="witness",
                        clock=lambda: 1_700_000_000)
    return cosigner, state, log_key, key


async def test_a_state_of_a_few_lines_is_enough_to_cosign_and_serve() -> None:
    cosigner, state, log_key, key = setup()
    note = sign_checkpoint(Checkpoint(ORIGIN, 0, EMPTY_ROOT), log_key)
    answer = await cosigner.add_checkpoint(format_add_checkpoint(0, [], note))
    assert answer.status == 200, answer.body
    text = state.seen[0].verified.text
    (line,) = verify_cosignatures(text, answer.body, [key.verifier()])
    served = await cosigner.checkpoint(origin_hash(ORIGIN))
    assert served.status == 200
    assert served.body == merge_signatures(note, [line])
    # The state's size is what the next request is compared with.
    later = sign_checkpoint(Checkpoint(ORIGIN, 3, ROOT), log_key)
    conflict = await cosigner.add_checkpoint(format_add_checkpoint(2, [ROOT], later))
    assert (conflict.status, conflict.content_type) == (409, SIZE_CONTENT_TYPE)
    assert parse_size(conflict.body) == 0


async def test_the_state_sees_only_requests_signed_by_the_log_and_only_verified_lines(
) -> None:
    cosigner, state, log_key, _ = setup()
    stranger = Ed25519Signer.generate(ORIGIN)
    unknown = sign_checkpoint(Checkpoint("other.test/log", 0, EMPTY_ROOT),
                              Ed25519Signer.generate("other.test/log"))
    for body, status in ((b"old 0\n\nnot a note", 400),
                         (format_add_checkpoint(0, [], unknown), 404),
                         (format_add_checkpoint(0, [], sign_checkpoint(
                             Checkpoint(ORIGIN, 0, EMPTY_ROOT), stranger)), 403)):
        assert (await cosigner.add_checkpoint(body)).status == status
    assert state.seen == []
    # A line by a key of the log's name the cosigner was not given reaches no state.
    extra = sign_note(Checkpoint(ORIGIN, 0, EMPTY_ROOT).text(), log_key, stranger)
    assert (await cosigner.add_checkpoint(format_add_checkpoint(0, [], extra))).status == 200
    (submitted,) = state.seen
    assert [s.key_id for s in submitted.verified.signatures] == [log_key.key_id]
    assert submitted.checkpoint.size == 0 and submitted.body.endswith(extra)


async def test_a_state_that_does_not_sign_gets_an_empty_200() -> None:
    """The mirror's pending checkpoint: accepted, not cosigned (tlog-mirror)."""
    cosigner, _, log_key, _ = setup(signs=False)
    note = sign_checkpoint(Checkpoint(ORIGIN, 0, EMPTY_ROOT), log_key)
    answer = await cosigner.add_checkpoint(format_add_checkpoint(0, [], note))
    assert (answer.status, answer.body) == (200, b"")
