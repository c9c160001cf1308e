"""Tests of ledger.core.checkpoint: the tlog-checkpoint text, log signatures and witness quorums."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.checkpoint import (
    MAX_TREE_SIZE,
    Checkpoint,
    CheckpointError,
    open_checkpoint,
    parse_checkpoint_text,
    sign_checkpoint,
    witness_signatures,
)
from ledger.core.cosignature import CosignatureSigner, CosignatureVerifier, parse_verifier_key
from ledger.core.note import (
    Ed25519Signer,
    InvalidSignatureError,
    Note,
    NoteError,
    NoteSignature,
    UnverifiedNoteError,
    format_note,
    merge_signatures,
    parse_note,
    sign_note,
)

# The example of c2sp.org/tlog-checkpoint.
SPEC_TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"

# A real checkpoint of the public log arche2025h1.staging.ct.transparency.dev, with its
# Ed25519 (0x01) log signature, an RFC 6962 (0x05) signature by the same name that we must
# ignore, and Ed25519 cosignature/v1 lines by four witnesses of the public witness network.
# The verifier keys are the keys those operators publish.
REAL_CHECKPOINT = """arche2025h1.staging.ct.transparency.dev
1432088532
U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=

— arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6hoGREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=
— arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUkzbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=
— transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYTzwZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==
— witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/iEcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==
— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobWX9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==
— witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr+AJmIY/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==
""".encode()  # noqa: E501
REAL_LOG_VKEY = (
    "arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f"
)
REAL_WITNESS_VKEYS = [
    "witness.stagemole.eu+67f7aea0+BEqSG3yu9YrmcM3BHvQYTxwFj3uSWakQepafafpUqklv",
    "transparency.dev/DEV:witness-little-garden+d8042a87+BCtusOxINQNUTN5Oj8HObRkh2yHf/MwYaGX4CPdiVEPM",
    "witness1.smartit.nu/witness1+a48c820f+BPSFWg9G6KPiO7QPryYO5Xq4oYJJ+kAvLKLSimDhoxMO",
    "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",
]
# A witness of the same network whose cosignature is not on REAL_CHECKPOINT.
ABSENT_WITNESS_VKEY = (
    "witness.navigli.sunlight.geomys.org+a3e00fe2+BNy/co4C1Hn1p+INwJrfUlgz7W55dSZReusH/GhUhJ/G"
)

EMPTY_ROOT = hashlib.sha256(b"").digest()
TS = 1_700_000_000

# --- Strategies -------------------------------------------------------------------------------

_LINE_CHARS = st.characters(min_codepoint=0x20, codec="utf-8")
lines = st.text(_LINE_CHARS, min_size=1, max_size=60)
checkpoints = st.builds(
    Checkpoint,
    origin=lines,
    size=st.integers(0, MAX_TREE_SIZE),
    root_hash=st.binary(min_size=32, max_size=32),
    extensions=st.lists(lines, max_size=4).map(tuple),
)


def make_cp(origin: str = "example.com/log", size: int = 5) -> Checkpoint:
    return Checkpoint(origin, size, hashlib.sha256(b"root %d" % size).digest())


# --- Text form --------------------------------------------------------------------------------


def test_spec_example_text() -> None:
    cp = parse_checkpoint_text(SPEC_TEXT)
    assert cp.origin == "example.com/behind-the-sofa"
    assert cp.size == 20852163
    assert cp.root_hash == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert cp.extensions == ()
    assert cp.text() == SPEC_TEXT


def test_extensions_and_empty_tree() -> None:
    cp = Checkpoint("o", 0, EMPTY_ROOT, ("ext one", "ext two"))
    text = cp.text()
    assert text == "o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next one\next two\n"
    assert parse_checkpoint_text(text) == cp


@settings(max_examples=200, deadline=None)
@given(cp=checkpoints)
def test_text_round_trip(cp: Checkpoint) -> None:
    assert parse_checkpoint_text(cp.text()) == cp


ROOT64 = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "o\n1\n",
        f"o\n1\n{ROOT64}",  # no final newline
        f"\n1\n{ROOT64}\n",  # empty origin
        f"o\n01\n{ROOT64}\n",
        f"o\n+1\n{ROOT64}\n",
        f"o\n-1\n{ROOT64}\n",
        f"o\n 1\n{ROOT64}\n",
        f"o\n1 \n{ROOT64}\n",
        f"o\n\n{ROOT64}\n",
        f"o\n1_000\n{ROOT64}\n",
        f"o\n\u0661\n{ROOT64}\n",  # ARABIC-INDIC DIGIT ONE: int() would take it
        f"o\n{MAX_TREE_SIZE + 1}\n{ROOT64}\n",
        f"o\n1\n{ROOT64[:-1]}\n",
        f"o\n1\n{ROOT64}=\n",
        f"o\n1\n{ROOT64[:-2]}J=\n",  # non-canonical padding bits
        "o\n1\nCsUYapGGPo4dkMgIAUqom_Xajj7h2fB2MPA3j2jxq2I=\n",  # URL-safe alphabet
        f"o\n1\n{base64.b64encode(bytes(31)).decode()}\n",
        f"o\n1\n{base64.b64encode(bytes(33)).decode()}\n",
        f"o\n1\n{ROOT64}\n\n",  # empty extension line
        f"o\n1\n{ROOT64}\next\n\nmore\n",
        f"o\r\n1\n{ROOT64}\n",
        f"o\x00\n1\n{ROOT64}\n",
    ],
)
def test_bad_checkpoint_texts(text: str) -> None:
    with pytest.raises(CheckpointError):
        parse_checkpoint_text(text)


def test_checkpoint_error_is_note_error() -> None:
    assert issubclass(CheckpointError, NoteError)
    assert issubclass(CheckpointError, ValueError)


@pytest.mark.parametrize(
    ("origin", "size", "root", "ext"),
    [
        ("", 1, EMPTY_ROOT, ()),
        ("a\nb", 1, EMPTY_ROOT, ()),
        ("o", -1, EMPTY_ROOT, ()),
        ("o", MAX_TREE_SIZE + 1, EMPTY_ROOT, ()),
        ("o", True, EMPTY_ROOT, ()),
        ("o", 1, EMPTY_ROOT[:31], ()),
        ("o", 1, EMPTY_ROOT, ("",)),
        ("o", 1, EMPTY_ROOT, ("a\nb",)),
    ],
)
def test_bad_checkpoint_values(origin: str, size: int, root: bytes, ext: tuple[str, ...]) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint(origin, size, root, ext)


# --- Log signature ----------------------------------------------------------------------------


def test_sign_and_open() -> None:
    log = Ed25519Signer.generate("example.com/log")
    cp = make_cp()
    data = sign_checkpoint(cp, log)
    got, note = open_checkpoint(data, log.verifier())
    assert got == cp
    assert note.text == cp.text()
    assert format_note(note) == data


def test_sign_requires_key_name_equal_to_origin() -> None:
    with pytest.raises(CheckpointError, match="origin"):
        sign_checkpoint(make_cp("example.com/log"), Ed25519Signer.generate("example.com/other"))


def test_open_requires_log_key_name_equal_to_origin() -> None:
    log = Ed25519Signer.generate("example.com/log")
    # A note signed by a key whose name is not the origin.
    data = sign_note(make_cp("example.com/elsewhere").text(), log)
    with pytest.raises(CheckpointError, match="origin"):
        open_checkpoint(data, log.verifier())


def test_open_rejects_other_log_key() -> None:
    data = sign_checkpoint(make_cp(), Ed25519Signer.generate("example.com/log"))
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(data, Ed25519Signer.generate("example.com/log").verifier())


def test_open_rejects_tampered_checkpoint() -> None:
    log = Ed25519Signer.generate("example.com/log")
    data = sign_checkpoint(make_cp(size=5), log)
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(data.replace(b"\n5\n", b"\n6\n", 1), log.verifier())


def test_open_rejects_signed_non_checkpoint() -> None:
    log = Ed25519Signer.generate("example.com/log")
    data = sign_note("example.com/log\nnot a size\n", log)
    with pytest.raises(CheckpointError):
        open_checkpoint(data, log.verifier())


def test_open_ignores_unknown_signatures() -> None:
    log = Ed25519Signer.generate("example.com/log")
    data = sign_checkpoint(make_cp(), log)
    data = merge_signatures(data, [NoteSignature("someone.else", 1234, b"whatever")])
    cp, note = open_checkpoint(data, log.verifier())
    assert cp == make_cp()
    assert len(note.signatures) == 2


# --- Witness quorum ---------------------------------------------------------------------------


def cosigned(
    n_witnesses: int, n_signing: int
) -> tuple[bytes, Ed25519Signer, list[CosignatureSigner]]:
    log = Ed25519Signer.generate("example.com/log")
    cp = make_cp()
    data = sign_checkpoint(cp, log)
    witnesses = [CosignatureSigner.generate(f"witness{i}.example") for i in range(n_witnesses)]
    sigs = [w.cosign(cp.text(), TS + i) for i, w in enumerate(witnesses[:n_signing])]
    return merge_signatures(data, sigs), log, witnesses


def test_quorum_met() -> None:
    data, log, ws = cosigned(3, 2)
    vs = [w.verifier() for w in ws]
    for q in (0, 1, 2):
        cp, note = open_checkpoint(data, log.verifier(), vs, q)
        assert cp == make_cp()
    names = [s.name for s in witness_signatures(note, vs)]
    assert names == ["witness0.example", "witness1.example"]


def test_quorum_not_met() -> None:
    data, log, ws = cosigned(3, 2)
    with pytest.raises(CheckpointError, match="need 3"):
        open_checkpoint(data, log.verifier(), [w.verifier() for w in ws], 3)


def test_quorum_larger_than_witness_set() -> None:
    data, log, ws = cosigned(2, 2)
    with pytest.raises(CheckpointError, match="cannot be met"):
        open_checkpoint(data, log.verifier(), [w.verifier() for w in ws], 3)


def test_quorum_without_witnesses_configured() -> None:
    data, log, _ = cosigned(2, 2)
    open_checkpoint(data, log.verifier())  # cosignatures by unknown keys are ignored
    with pytest.raises(CheckpointError):
        open_checkpoint(data, log.verifier(), (), 1)


def test_negative_quorum() -> None:
    data, log, _ = cosigned(1, 1)
    with pytest.raises(ValueError):
        open_checkpoint(data, log.verifier(), (), -1)


def test_duplicate_witness_counts_once() -> None:
    data, log, ws = cosigned(2, 1)
    v0 = ws[0].verifier()
    # The same witness listed twice.
    with pytest.raises(CheckpointError):
        open_checkpoint(data, log.verifier(), [v0, CosignatureVerifier.from_vkey(v0.vkey)], 2)
    # The same public key under a second name (cosignature/v1 does not commit to the name):
    # one witness, even if both lines verify.
    alias = CosignatureSigner("alias.example", ws[0].seed)
    data2 = merge_signatures(data, [alias.cosign(make_cp().text(), TS)])
    open_checkpoint(data2, log.verifier(), [v0, alias.verifier()], 1)
    with pytest.raises(CheckpointError):
        open_checkpoint(data2, log.verifier(), [v0, alias.verifier()], 2)


def test_log_key_listed_as_witness_does_not_count() -> None:
    data, log, _ = cosigned(0, 0)
    with pytest.raises(CheckpointError):
        open_checkpoint(data, log.verifier(), [log.verifier()], 1)


def test_bad_cosignature_by_known_witness_rejects() -> None:
    data, log, ws = cosigned(2, 2)
    note = parse_note(data)
    last = note.signatures[-1]
    # Flip a bit: overwriting the last byte with 0 left a signature ending in 0 unchanged.
    broken = NoteSignature(last.name, last.key_id,
                           last.signature[:-1] + bytes([last.signature[-1] ^ 1]))
    data = merge_signatures(data, [broken])
    vs = [w.verifier() for w in ws]
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(data, log.verifier(), vs, 1)


def test_cosignature_of_other_checkpoint_rejects() -> None:
    data, log, ws = cosigned(1, 0)
    other = ws[0].cosign(make_cp(size=6).text(), TS)
    data = merge_signatures(data, [other])
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(data, log.verifier(), [ws[0].verifier()], 1)


def test_witness_only_checkpoint_rejected() -> None:
    log = Ed25519Signer.generate("example.com/log")
    w = CosignatureSigner.generate("w.example")
    text = make_cp().text()
    # A note carrying only a cosignature: no log signature.
    data = format_note(Note(text, (w.cosign(text, TS),)))
    with pytest.raises(CheckpointError, match="not signed by the log"):
        open_checkpoint(data, log.verifier(), [w.verifier()], 1)


# --- A real checkpoint ------------------------------------------------------------------------


def test_real_checkpoint_with_witness_quorum() -> None:
    log = parse_verifier_key(REAL_LOG_VKEY)
    witnesses = [parse_verifier_key(k) for k in REAL_WITNESS_VKEYS]
    cp, note = open_checkpoint(REAL_CHECKPOINT, log, witnesses, quorum=4)
    assert cp.origin == "arche2025h1.staging.ct.transparency.dev"
    assert cp.size == 1432088532
    assert len(note.signatures) == 6
    assert format_note(note) == REAL_CHECKPOINT
    # Adding a witness that did not cosign does not change what is counted.
    absent = parse_verifier_key(ABSENT_WITNESS_VKEY)
    open_checkpoint(REAL_CHECKPOINT, log, [*witnesses, absent], quorum=4)
    with pytest.raises(CheckpointError, match="need 5"):
        open_checkpoint(REAL_CHECKPOINT, log, [*witnesses, absent], quorum=5)


def test_real_checkpoint_tampered() -> None:
    log = parse_verifier_key(REAL_LOG_VKEY)
    tampered = REAL_CHECKPOINT.replace(b"1432088532", b"1432088533")
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(tampered, log)
    witnesses = [parse_verifier_key(k) for k in REAL_WITNESS_VKEYS]
    # Dropping the log signature line: witnesses alone are not enough.
    lines = REAL_CHECKPOINT.split(b"\n")
    without_log = b"\n".join(lines[:5] + lines[6:])
    with pytest.raises(CheckpointError, match="not signed by the log"):
        open_checkpoint(without_log, log, witnesses, quorum=1)
