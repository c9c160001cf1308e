"""C2SP tlog-checkpoint: the signed tree head of the log, a signed note with a fixed text.

The text is the origin line, the decimal tree size, the standard base64 of the 32-byte RFC 6962
root hash, then optional non-empty extension lines (https://c2sp.org/tlog-checkpoint). The log
signs it with a key whose name is the origin; witnesses add cosignatures to the same note.

Parsing is strict (no leading zeros, canonical base64, exactly 32 bytes) because two texts that
mean the same tree head would let a log show different bytes to different clients without being
caught by byte comparisons, and because what we accept we must be able to re-serve unchanged.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.note import (
    Ed25519Signer,
    Ed25519Verifier,
    Note,
    NoteError,
    NoteSignature,
    NoteVerifier,
    open_note,
    parse_note,
    sign_note,
    strict_b64decode,
)

__all__ = [
    "MAX_TREE_SIZE",
    "Checkpoint",
    "CheckpointError",
    "check_checkpoint_note",
    "open_checkpoint",
    "parse_checkpoint_text",
    "sign_checkpoint",
    "witness_signatures",
]

#: Tree sizes are unsigned 64-bit integers in every implementation of the spec (Go's ParseUint).
MAX_TREE_SIZE = (1 << 64) - 1
_ROOT_SIZE = 32
_DECIMAL = re.compile(r"0|[1-9][0-9]*", re.ASCII)


class CheckpointError(NoteError):
    """A checkpoint text is malformed, or its signatures do not satisfy the caller's policy."""


def _check_line(what: str, line: str) -> None:
    if not isinstance(line, str) or not line:
        raise CheckpointError(f"checkpoint {what} must be a non-empty string")
    if line in _GOOD_LINES:  # a log checks its own origin on every commit
        return
    for ch in line:
        o = ord(ch)
        if o < 0x20 or 0xD800 <= o <= 0xDFFF:
            raise CheckpointError(f"checkpoint {what} contains forbidden character U+{o:04X}")
    if len(_GOOD_LINES) < _GOOD_LINES_MAX:
        _GOOD_LINES.add(line)


_GOOD_LINES: set[str] = set()
"""Lines :func:`_check_line` accepted (a handful in practice: origins, extension lines)."""
_GOOD_LINES_MAX = 256


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: origin, tree size, root hash, and opaque extension lines.

    Validated on construction so that an instance always has a text that parses back to it.
    """

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line("origin", self.origin)
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise CheckpointError("checkpoint size must be an integer")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"checkpoint size {self.size} is out of range")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != _ROOT_SIZE:
            raise CheckpointError("checkpoint root hash must be exactly 32 bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("checkpoint extensions must be a tuple of lines")
        for ext in self.extensions:
            _check_line("extension line", ext)

    def text(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each ending in newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii")]
        lines.extend(self.extensions)
        return "".join(line + "\n" for line in lines)


def parse_checkpoint_text(text: str) -> Checkpoint:
    """Parse a checkpoint note text (signatures already split off), strictly.

    Requires a final newline, at least three lines, all non-empty; a decimal size without sign or
    leading zeros; a canonical standard-base64 root of exactly 32 bytes.
    """
    if not isinstance(text, str):
        raise CheckpointError("checkpoint text must be str")
    if not text.endswith("\n"):
        raise CheckpointError("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError("checkpoint text needs origin, size and root hash lines")
    origin, size_line, root_line, *extensions = lines
    if not _DECIMAL.fullmatch(size_line):
        raise CheckpointError(f"bad checkpoint size {size_line[:40]!r}")
    size = int(size_line)
    if size > MAX_TREE_SIZE:
        raise CheckpointError("checkpoint size does not fit in 64 bits")
    try:
        root = strict_b64decode(root_line, "checkpoint root hash")
    except NoteError as exc:
        raise CheckpointError(str(exc)) from None
    if len(root) != _ROOT_SIZE:
        raise CheckpointError(f"checkpoint root hash is {len(root)} bytes, want 32")
    return Checkpoint(origin=origin, size=size, root_hash=root, extensions=tuple(extensions))


_WELL_FORMED_MAX = 64
_well_formed: dict[bytes, None] = {}
"""Signed checkpoint notes known to parse, newest last (insertion order): a busy log puts one
checkpoint in many proofs, and the one it has just signed in all of them."""


def _remember_well_formed(note: bytes) -> None:
    _well_formed[note] = None
    if len(_well_formed) > _WELL_FORMED_MAX:
        del _well_formed[next(iter(_well_formed))]


def check_checkpoint_note(note: bytes) -> None:
    """Raise :class:`NoteError` unless ``note`` is a syntactically valid signed checkpoint
    (signatures not verified).

    A note seen here before, or made by :func:`sign_checkpoint` in this process, is not parsed
    again: a log that answers every receipt with a proof into the checkpoint it has just signed
    would otherwise parse its own output once per commit.
    """
    if note in _well_formed:
        return
    parse_checkpoint_text(parse_note(note).text)
    _remember_well_formed(note)


def sign_checkpoint(cp: Checkpoint, signer: Ed25519Signer) -> bytes:
    """The signed note of ``cp`` by the log key, whose name must be the origin.

    Clients look the log key up by origin, so a checkpoint signed under another name would not
    verify for them; refusing here catches a misconfigured log before it publishes.
    """
    if signer.name != cp.origin:
        raise CheckpointError(
            f"log key name {signer.name!r} does not match checkpoint origin {cp.origin!r}"
        )
    note = sign_note(cp.text(), signer)
    # Well formed by construction: ``cp`` validated its lines, sign_note its text and
    # signature line, so the note parses back to ``cp`` (tests/ledger/core/test_checkpoint.py).
    _remember_well_formed(note)
    return note


def _identity(v: NoteVerifier) -> object:
    """What makes two witness keys the same witness: the public key when the verifier has one.

    cosignature/v1 does not commit to the witness name, so one key listed under two names must
    still count once towards a quorum.
    """
    public_key = getattr(v, "public_key", None)
    if isinstance(public_key, bytes):
        return ("public key", public_key)
    return (v.name, v.key_id)


def open_checkpoint(
    data: bytes,
    log_verifier: NoteVerifier,
    witnesses: Sequence[NoteVerifier] = (),
    quorum: int = 0,
) -> tuple[Checkpoint, Note]:
    """Verify a signed checkpoint: the log's signature and, if ``quorum`` > 0, enough cosignatures.

    The log key's name must be the checkpoint origin. Signatures by keys in neither
    ``log_verifier`` nor ``witnesses`` are ignored; one by a known key that fails to verify
    rejects the note. At least ``quorum`` distinct witness keys must have verifying cosignatures.
    Returns the parsed checkpoint and the whole note (every signature line, for re-serving).

    The common case, the log key alone (an :class:`Ed25519Verifier`, no witnesses), is
    memoized on the exact note bytes and the key (name and public key): many receipts carry
    the same checkpoint, and opening it again would give the same answer. Only successes are
    remembered; a note that fails is checked afresh every time.
    """
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 0:
        raise ValueError("quorum must be a non-negative integer")
    if (not witnesses and quorum == 0 and type(data) is bytes
            and type(log_verifier) is Ed25519Verifier):
        return _open_with_log_key(data, log_verifier)
    return _open_checkpoint(data, log_verifier, witnesses, quorum)


@functools.lru_cache(maxsize=256)
def _open_with_log_key(data: bytes, log_verifier: Ed25519Verifier) -> tuple[Checkpoint, Note]:
    """:func:`open_checkpoint` without witnesses, remembered per (note bytes, log key).

    Ed25519Verifier hashes and compares by name and public key (its key ID derives from
    them) and its ``verify`` is deterministic, so an entry is exactly the bytes and the key
    that were verified. The result is immutable (frozen dataclasses and tuples).
    """
    return _open_checkpoint(data, log_verifier, (), 0)


def _open_checkpoint(
    data: bytes,
    log_verifier: NoteVerifier,
    witnesses: Sequence[NoteVerifier],
    quorum: int,
) -> tuple[Checkpoint, Note]:
    note = parse_note(data)
    cp = parse_checkpoint_text(note.text)
    if log_verifier.name != cp.origin:
        raise CheckpointError(
            f"log key name {log_verifier.name!r} does not match origin {cp.origin!r}"
        )
    log_ident = (log_verifier.name, log_verifier.key_id)
    # The log's own key never counts as a witness, even if it is listed as one.
    witnesses = [w for w in witnesses if (w.name, w.key_id) != log_ident]
    distinct_witnesses = {_identity(w) for w in witnesses}
    if quorum > len(distinct_witnesses):
        raise CheckpointError(
            f"quorum {quorum} cannot be met by {len(distinct_witnesses)} distinct witness keys"
        )
    _, verified = open_note(data, [log_verifier, *witnesses])
    verified_ids = {(s.name, s.key_id) for s in verified}
    if log_ident not in verified_ids:
        raise CheckpointError(f"checkpoint is not signed by the log key for {cp.origin!r}")
    if quorum:
        cosigned = {_identity(w) for w in witnesses if (w.name, w.key_id) in verified_ids}
        if len(cosigned) < quorum:
            raise CheckpointError(
                f"checkpoint has {len(cosigned)} verified witness cosignatures, need {quorum}"
            )
    return cp, note


def witness_signatures(note: Note, witnesses: Sequence[NoteVerifier]) -> list[NoteSignature]:
    """The signature lines of ``note`` made by the given witness keys (name and ID match).

    Matching only: call after :func:`open_checkpoint`, which has verified every one of them.
    """
    wanted = {(w.name, w.key_id) for w in witnesses}
    return [s for s in note.signatures if (s.name, s.key_id) in wanted]
