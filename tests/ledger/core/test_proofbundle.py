"""Tests of ledger.core.tlog_proof: the C2SP tlog-proof text format."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.note import Ed25519Signer, sign_note
from ledger.core.tlog_proof import (
    HEADER,
    MAX_PROOF_HASHES,
    ProofBundle,
    ProofBundleError,
    decode_proof_bundle,
    proof_text,
)

LOG = Ed25519Signer("example.com/fancylog", hashlib.sha256(b"test log key, not secret").digest())
CP = Checkpoint("example.com/fancylog", 109482, hashlib.sha256(b"root").digest())
SIGNED_CP = sign_checkpoint(CP, LOG)
H = [hashlib.sha256(bytes([i])).digest() for i in range(70)]


def b64(h: bytes) -> str:
    return base64.b64encode(h).decode()


def bundle_text(*lines: str, checkpoint: bytes = SIGNED_CP) -> bytes:
    return "".join(line + "\n" for line in lines).encode() + checkpoint


def test_encode_exact_layout() -> None:
    pb = ProofBundle(index=73894, proof=(H[0], H[1]), checkpoint=SIGNED_CP)
    assert pb.encode() == bundle_text(HEADER, "index 73894", b64(H[0]), b64(H[1]), "")
    pb2 = ProofBundle(index=0, proof=(), checkpoint=SIGNED_CP, extra=b"age-v1.2.1")
    assert pb2.encode() == bundle_text(HEADER, "extra " + b64(b"age-v1.2.1"), "index 0", "")
    assert decode_proof_bundle(pb.encode()) == pb
    assert decode_proof_bundle(pb2.encode()) == pb2


def test_decoded_checkpoint_still_verifies() -> None:
    pb = decode_proof_bundle(ProofBundle(5, (H[0],), SIGNED_CP).encode())
    cp, _ = open_checkpoint(pb.checkpoint, LOG.verifier())
    assert cp == CP


@settings(max_examples=100, deadline=None)
@given(
    index=st.integers(0, (1 << 64) - 1),
    proof=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PROOF_HASHES).map(tuple),
    extra=st.none() | st.binary(min_size=1, max_size=100),
)
def test_round_trip(index: int, proof: tuple[bytes, ...], extra: bytes | None) -> None:
    pb = ProofBundle(index=index, proof=proof, checkpoint=SIGNED_CP, extra=extra)
    data = pb.encode()
    assert decode_proof_bundle(data) == pb
    assert decode_proof_bundle(data).encode() == data


GOOD_HASH = b64(H[0])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        SIGNED_CP,
        bundle_text("c2sp.org/tlog-proof@v2", "index 1", ""),
        bundle_text("C2SP.org/tlog-proof@v1", "index 1", ""),
        bundle_text(HEADER + " ", "index 1", ""),
        bundle_text(HEADER, ""),  # no index line
        bundle_text(HEADER, "index", ""),
        bundle_text(HEADER, "index ", ""),
        bundle_text(HEADER, "index 01", ""),
        bundle_text(HEADER, "index -1", ""),
        bundle_text(HEADER, "index +1", ""),
        bundle_text(HEADER, "index  1", ""),
        bundle_text(HEADER, "index 1 ", ""),
        bundle_text(HEADER, "index 0x10", ""),
        bundle_text(HEADER, "index \u0661", ""),
        bundle_text(HEADER, f"index {1 << 64}", ""),
        bundle_text(HEADER, "Index 1", ""),
        bundle_text(HEADER, "index 1", "extra " + b64(b"x"), ""),  # extra after index
        bundle_text(HEADER, "extra ", "index 1", ""),  # empty extra
        bundle_text(HEADER, "extra !!!!", "index 1", ""),
        bundle_text(HEADER, "extra " + b64(b"x"), "extra " + b64(b"y"), "index 1", ""),
        bundle_text(HEADER, "index 1", GOOD_HASH[:-1], ""),
        bundle_text(HEADER, "index 1", GOOD_HASH + "=", ""),
        bundle_text(HEADER, "index 1", GOOD_HASH[:-2] + "B=", ""),  # non-canonical bits
        bundle_text(HEADER, "index 1", "CsUYapGGPo4dkMgIAUqom_Xajj7h2fB2MPA3j2jxq2I=", ""),
        bundle_text(HEADER, "index 1", b64(bytes(31)), ""),
        bundle_text(HEADER, "index 1", b64(bytes(33)), ""),
        bundle_text(HEADER, "index 1", " " + GOOD_HASH, ""),
        bundle_text(HEADER, "index 1", *[b64(h) for h in H[: MAX_PROOF_HASHES + 1]], ""),
        bundle_text(HEADER, "index 1", GOOD_HASH),  # no blank line: hash, then the note
        bundle_text(HEADER, "index 1", "", checkpoint=b""),  # no checkpoint
        (HEADER + "\r\nindex 1\r\n\r\n").encode() + SIGNED_CP,
        bundle_text(HEADER, "index 1", "", checkpoint=CP.text().encode()),  # unsigned
        bundle_text(HEADER, "index 1", "", checkpoint=SIGNED_CP + b"trailing\n"),
        bundle_text(HEADER, "index 1", "", checkpoint=SIGNED_CP[:-1]),
        bundle_text(HEADER, "index 1", "", checkpoint=sign_note("not\na checkpoint\n", LOG)),
        bundle_text(HEADER, "index 1", "", "", checkpoint=SIGNED_CP),  # two blank lines
        bundle_text("\ufeff" + HEADER, "index 1", ""),
    ],
)
def test_rejects(data: bytes) -> None:
    with pytest.raises(ProofBundleError):
        decode_proof_bundle(data)


def test_minimal_bundle_accepted() -> None:
    # The control for test_rejects: the same layout with nothing wrong decodes.
    pb = decode_proof_bundle(bundle_text(HEADER, "index 1", ""))
    assert (pb.index, pb.proof, pb.checkpoint, pb.extra) == (1, (), SIGNED_CP, None)


def test_max_proof_length_accepted() -> None:
    proof = tuple(H[:MAX_PROOF_HASHES])
    pb = ProofBundle(3, proof, SIGNED_CP)
    assert decode_proof_bundle(pb.encode()).proof == proof


@pytest.mark.parametrize(
    "kwargs",
    [
        {"index": -1},
        {"index": 1 << 64},
        {"index": True},
        {"proof": (H[0][:31],)},
        {"proof": (H[0], H[1] + b"\0")},
        {"proof": (H[0], "a" * 32)},
        {"proof": (H[0], bytearray(H[1]))},
        {"proof": [H[0]]},
        {"proof": tuple(H[: MAX_PROOF_HASHES + 1])},
        {"checkpoint": b"not a note"},
        {"checkpoint": CP.text().encode()},
        {"extra": b""},
    ],
)
def test_constructor_rejects(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"index": 1, "proof": (H[0],), "checkpoint": SIGNED_CP}
    args.update(kwargs)
    with pytest.raises(ProofBundleError):
        ProofBundle(**args)  # type: ignore[arg-type]


def test_error_is_value_error() -> None:
    assert issubclass(ProofBundleError, ValueError)


def test_a_checkpoint_the_log_just_signed_is_not_parsed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every receipt of a commit carries a proof into the checkpoint the commit signed: parsing
    # that note back once per commit was a fixed cost of every commit
    # (benchmarks/docs/notarize_cpu.md).
    import ledger.core.checkpoint as checkpoint_module
    import ledger.core.tlog_proof as tlog_proof_module

    fresh = sign_checkpoint(Checkpoint(CP.origin, 5551, hashlib.sha256(b"new").digest()), LOG)

    def refuse(data: bytes) -> None:
        raise AssertionError("parsed a checkpoint the log signed itself")

    monkeypatch.setattr(checkpoint_module, "parse_note", refuse)
    monkeypatch.setattr(tlog_proof_module, "parse_note", refuse, raising=False)
    assert ProofBundle(3, (H[0],), fresh).checkpoint == fresh
    assert decode_proof_bundle(ProofBundle(3, (H[0],), fresh).encode()).checkpoint == fresh


def test_a_checkpoint_from_elsewhere_is_still_checked() -> None:
    other = Ed25519Signer("example.com/other", hashlib.sha256(b"other key").digest())
    garbled = sign_note("example.com/other\n01\nnot base64\n", other)
    with pytest.raises(ProofBundleError):
        ProofBundle(0, (), garbled)
    with pytest.raises(ProofBundleError):  # asked again: a refusal is not remembered
        ProofBundle(0, (), garbled)


_NAME = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="+"),
                min_size=1, max_size=30)
_LINE = st.text(st.characters(min_codepoint=0x20, codec="utf-8"), min_size=1, max_size=40)


@settings(max_examples=100)
@given(origin=_NAME, size=st.integers(0, (1 << 64) - 1),
       root=st.binary(min_size=32, max_size=32), ext=st.lists(_LINE, max_size=3))
def test_what_sign_checkpoint_makes_parses_back(origin: str, size: int, root: bytes,
                                                ext: list[str]) -> None:
    # Why remembering sign_checkpoint's output as well formed is sound.
    from ledger.core.checkpoint import parse_checkpoint_text
    from ledger.core.note import parse_note

    cp = Checkpoint(origin, size, root, tuple(ext))
    note = sign_checkpoint(cp, Ed25519Signer(origin, root))
    assert parse_checkpoint_text(parse_note(note).text) == cp


OTHER_CP = sign_checkpoint(Checkpoint("example.com/fancylog", 7, hashlib.sha256(b"r").digest()),
                           LOG)


@settings(max_examples=100, deadline=None)
@given(index=st.integers(0, (1 << 64) - 1),
       proof=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PROOF_HASHES),
       checkpoint=st.sampled_from([SIGNED_CP, OTHER_CP]))
def test_proof_text_is_the_bundle_s_text(index: int, proof: list[bytes],
                                         checkpoint: bytes) -> None:
    # What the notary answers a new receipt with (Notary._complete): the bundle's exact text,
    # whichever checkpoint it was called with last.
    want = ProofBundle(index, tuple(proof), checkpoint).encode().decode()
    assert proof_text(index, proof, checkpoint) == want
    assert proof_text(index, tuple(proof), bytes(checkpoint)) == want  # an equal note


@pytest.mark.parametrize(("index", "proof", "checkpoint"), [
    (-1, [], SIGNED_CP), (1 << 64, [], SIGNED_CP), (True, [], SIGNED_CP), ("1", [], SIGNED_CP),
    (0, [b"\0" * 31], SIGNED_CP), (0, ["00" * 32], SIGNED_CP),
    (0, [b"\0" * 32] * (MAX_PROOF_HASHES + 1), SIGNED_CP),
    (0, [], b"not a checkpoint\n"), (0, [], "text, not bytes"),
])
def test_proof_text_refuses_what_the_bundle_refuses(index: Any, proof: Any,
                                                    checkpoint: Any) -> None:
    with pytest.raises(ProofBundleError):
        ProofBundle(index, tuple(proof), checkpoint)
    with pytest.raises(ProofBundleError):
        proof_text(index, proof, checkpoint)
