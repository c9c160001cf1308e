"""C2SP tlog-witness ``add-checkpoint`` and ``sign-subtree``: codecs and the witness's decisions.

Pure code (no I/O, no clock) shared by the witness server, the log's witnessing client and the
tests, so that both ends agree on every byte (https://c2sp.org/tlog-witness):

- request body: ``old <size>\\n``, zero to 63 base64 consistency-proof lines, an empty line, then
  the signed checkpoint note;
- 200 body: one or more cosignature note lines (``— <name> <base64>\\n``);
- 409 body: the witness's latest cosigned size for the origin, in decimal and a newline, with
  ``Content-Type: text/x.tlog.size``;
- ``sign-subtree`` request body: ``subtree <start> <end>\n``, the subtree hash in base64, zero to
  63 base64 subtree consistency-proof lines, an empty line, then the reference checkpoint (one
  the witness cosigned); 200 body as above, subtree signatures with timestamp 0.

:func:`decide` is the whole compare step of the witness: given what it stored for the origin and
a request whose log signature already verified, it says what to answer and whether to store.
The store runs it inside its write transaction, so the comparison and the write are atomic.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import LedgerError
from ledger.core.hashing import EMPTY_ROOT, HASH_SIZE
from ledger.core.note import NoteError, NoteSignature, NoteVerifier, open_note, strict_b64decode
from ledger.core.proofs import ProofError, verify_consistency

__all__ = [
    "MAX_PROOF_LINES",
    "MAX_REQUEST_SIZE",
    "SIZE_CONTENT_TYPE",
    "AcceptedTree",
    "AddCheckpointRequest",
    "CheckpointDecision",
    "Outcome",
    "ProtocolError",
    "SignSubtreeRequest",
    "decide",
    "format_add_checkpoint",
    "format_cosignatures",
    "format_sign_subtree",
    "format_size",
    "parse_add_checkpoint",
    "parse_sign_subtree",
    "parse_size",
    "verify_cosignatures",
]

#: The client MUST NOT send more (a proof in a tree of 2^64 leaves has at most 2·64 - 1 hashes,
#: but the spec caps it at 63, the height of such a tree minus one).
MAX_PROOF_LINES = 63
#: Media type of the 409 body (the witness's size for the origin).
SIZE_CONTENT_TYPE = "text/x.tlog.size"
#: Largest request body a witness reads: a checkpoint note carries a few signatures, so 256 KiB
#: leaves room for dozens of post-quantum cosignatures while bounding what a stranger can send.
MAX_REQUEST_SIZE = 256 * 1024

_MAX_SIZE = (1 << 64) - 1
_OLD_LINE = re.compile(rb"old (0|[1-9][0-9]{0,19})")
_SUBTREE_LINE = re.compile(rb"subtree (0|[1-9][0-9]{0,19}) (0|[1-9][0-9]{0,19})")
_SIZE_BODY = re.compile(rb"(0|[1-9][0-9]{0,19})\n")


class ProtocolError(LedgerError, ValueError):
    """A request or response that is not in the exact form the spec requires (HTTP 400)."""


@dataclass(frozen=True)
class AddCheckpointRequest:
    """A parsed request body: the client's idea of the witness's size, the proof, the note."""

    old: int
    proof: tuple[bytes, ...]
    checkpoint: bytes  # the signed note, verbatim


def format_add_checkpoint(old: int, proof: Sequence[bytes], checkpoint: bytes) -> bytes:
    """The request body for ``old``, a consistency proof from it, and a signed checkpoint."""
    if isinstance(old, bool) or not isinstance(old, int) or not 0 <= old <= _MAX_SIZE:
        raise ProtocolError(f"old size {old!r} is not a uint64")
    return b"".join([f"old {old}\n".encode(), *_proof_text(proof), b"\n", bytes(checkpoint)])


def _split_request(body: bytes) -> tuple[list[bytes], bytes]:
    """The header lines and the checkpoint note of a request body.

    The header ends at the first empty line: header lines are never empty, and the note that
    follows keeps its own (last) empty line before its signatures.
    """
    if len(body) > MAX_REQUEST_SIZE:
        raise ProtocolError(f"request body is larger than {MAX_REQUEST_SIZE} bytes")
    end = body.find(b"\n\n")
    if end < 0:
        raise ProtocolError("request body has no empty line before the checkpoint")
    note = body[end + 2 :]
    if not note:
        raise ProtocolError("request body has no checkpoint")
    return body[:end].split(b"\n"), note


def _hash_line(line: bytes, what: str) -> bytes:
    try:
        h = strict_b64decode(line.decode("ascii"), what)
    except (UnicodeDecodeError, NoteError) as e:
        raise ProtocolError(f"{what} is not base64: {e}") from None
    if len(h) != HASH_SIZE:
        raise ProtocolError(f"{what} holds {len(h)} bytes, want {HASH_SIZE}")
    return h


def _proof_lines(lines: Sequence[bytes]) -> tuple[bytes, ...]:
    if len(lines) > MAX_PROOF_LINES:
        raise ProtocolError(f"more than {MAX_PROOF_LINES} consistency proof lines")
    return tuple(_hash_line(line, f"proof line {i + 1}") for i, line in enumerate(lines))


def _proof_text(proof: Sequence[bytes]) -> list[bytes]:
    if len(proof) > MAX_PROOF_LINES:
        raise ProtocolError(f"a consistency proof has at most {MAX_PROOF_LINES} hashes")
    for h in proof:
        if len(h) != HASH_SIZE:
            raise ProtocolError(f"proof hash of {len(h)} bytes, want {HASH_SIZE}")
    return [base64.b64encode(h) + b"\n" for h in proof]


def parse_add_checkpoint(body: bytes) -> AddCheckpointRequest:
    """Split a request body strictly; any deviation from the spec's form is a ProtocolError."""
    header, note = _split_request(body)
    m = _OLD_LINE.fullmatch(header[0])
    if m is None:
        raise ProtocolError("the first line must be 'old <size>' (decimal, no leading zeros)")
    old = int(m.group(1))
    if old > _MAX_SIZE:
        raise ProtocolError("old size does not fit in 64 bits")
    return AddCheckpointRequest(old, _proof_lines(header[1:]), note)


@dataclass(frozen=True)
class SignSubtreeRequest:
    """A parsed ``sign-subtree`` body: the subtree, its hash, the proof, the reference note."""

    start: int
    end: int
    subtree_hash: bytes
    proof: tuple[bytes, ...]
    checkpoint: bytes  # the signed note, verbatim


def format_sign_subtree(start: int, end: int, subtree_hash: bytes, proof: Sequence[bytes],
                        checkpoint: bytes) -> bytes:
    """The ``sign-subtree`` request body (the range is checked by the witness, not here)."""
    for what, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SIZE:
            raise ProtocolError(f"subtree {what} {value!r} is not a uint64")
    if len(subtree_hash) != HASH_SIZE:
        raise ProtocolError(f"subtree hash of {len(subtree_hash)} bytes, want {HASH_SIZE}")
    lines = [f"subtree {start} {end}\n".encode(), base64.b64encode(subtree_hash) + b"\n"]
    return b"".join([*lines, *_proof_text(proof), b"\n", bytes(checkpoint)])


def parse_sign_subtree(body: bytes) -> SignSubtreeRequest:
    """Split a ``sign-subtree`` body strictly; any deviation from the form is a ProtocolError.

    Whether the range is a valid subtree within the checkpoint is the witness's next check
    (also a 400), made before any signature or proof is looked at.
    """
    header, note = _split_request(body)
    m = _SUBTREE_LINE.fullmatch(header[0])
    if m is None:
        raise ProtocolError("the first line must be 'subtree <start> <end>' (decimal, no "
                            "leading zeros)")
    start, end = int(m.group(1)), int(m.group(2))
    if start > _MAX_SIZE or end > _MAX_SIZE:
        raise ProtocolError("subtree bounds do not fit in 64 bits")
    if len(header) < 2:
        raise ProtocolError("the second line must be the subtree hash in base64")
    subtree_hash = _hash_line(header[1], "subtree hash line")
    return SignSubtreeRequest(start, end, subtree_hash, _proof_lines(header[2:]), note)


def format_size(size: int) -> bytes:
    """The 409 body: the decimal size and a newline."""
    return b"%d\n" % size


def parse_size(body: bytes) -> int:
    """Read a 409 body strictly (the client learns the witness's size from it)."""
    m = _SIZE_BODY.fullmatch(body)
    if m is None or int(m.group(1)) > _MAX_SIZE:
        raise ProtocolError(f"not a text/x.tlog.size body: {body[:40]!r}")
    return int(m.group(1))


def format_cosignatures(signatures: Iterable[NoteSignature]) -> bytes:
    """The 200 body: one note signature line per cosignature, each ending in a newline."""
    out = b"".join(sig.line().encode("utf-8") + b"\n" for sig in signatures)
    if not out:
        raise ProtocolError("a 200 answer needs at least one cosignature")
    return out


def verify_cosignatures(
    checkpoint_text: str, body: bytes, verifiers: Sequence[NoteVerifier]
) -> list[NoteSignature]:
    """The cosignature lines of a 200 body made by ``verifiers``, each verified.

    As the spec suggests, the body is appended to the checkpoint text and opened as a note:
    lines by unknown keys are ignored, a line by a known key that does not verify rejects the
    whole answer (NoteError), and so does an answer with no line by a known key.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("cosignature body is not UTF-8") from None
    if not text.endswith("\n") or not all(line.startswith("\u2014 ")
                                          for line in text[:-1].split("\n")):
        raise ProtocolError("cosignature body must be note signature lines ending in newlines")
    _, verified = open_note((checkpoint_text + "\n" + text).encode("utf-8"), verifiers)
    return verified


# ---------------------------------------------------------------------------------------------
# The witness's decision


class Outcome(Enum):
    """What the witness answers; the value is the HTTP status."""

    COSIGN = 200
    BAD_REQUEST = 400
    CONFLICT = 409
    BAD_PROOF = 422


@dataclass(frozen=True)
class AcceptedTree:
    """The tree a cosigner holds for an origin, which a new checkpoint must extend: the
    latest size and root the witness cosigned, or the mirror's newest pending checkpoint."""

    size: int
    root: bytes


@dataclass(frozen=True)
class CheckpointDecision:
    """The answer to one add-checkpoint request. ``store`` is set when the new checkpoint must
    be persisted (it is larger than the stored one); ``known`` is the size a 409 reports."""

    outcome: Outcome
    reason: str = ""
    known: int = 0
    store: bool = False
    #: A log-signed checkpoint refused for a reason that may show misbehaviour (a proof that
    #: does not verify, another root at the witnessed size): the spec lets the witness keep it.
    evidence: bool = False


def decide(stored: AcceptedTree | None, old: int, proof: Sequence[bytes],
           checkpoint: Checkpoint) -> CheckpointDecision:
    """Check a request whose log signature verified against the witness's stored state.

    The order is the spec's: ``old`` above the checkpoint size is a 400; ``old`` other than the
    stored size (0 when nothing is stored) is a 409 reporting the stored size; a proof that
    does not verify is a 422 (from size 0 the proof must be empty, and a size-0 checkpoint must
    carry the empty tree's root), and so are equal sizes with another root. Anything else is
    cosigned, and stored when it is larger than what was stored.
    """
    known = stored.size if stored is not None else 0
    size, root = checkpoint.size, checkpoint.root_hash
    if old > size:
        return CheckpointDecision(Outcome.BAD_REQUEST, f"old size {old} is larger than the "
                                  f"checkpoint size {size}", known)
    if old != known:
        return CheckpointDecision(Outcome.CONFLICT, f"old size {old} is not the witnessed size "
                                  f"{known}", known)
    if old == 0:
        if proof:
            return CheckpointDecision(Outcome.BAD_PROOF, "the proof from size 0 must be empty",
                                      known, evidence=True)
        if size == 0 and root != EMPTY_ROOT:
            return CheckpointDecision(Outcome.BAD_PROOF, "a size-0 checkpoint must carry the "
                                      "empty tree's root", known, evidence=True)
        if stored is not None and size == 0:
            return CheckpointDecision(Outcome.COSIGN, "", known)
        return CheckpointDecision(Outcome.COSIGN, "", known, store=True)
    assert stored is not None  # old == known > 0
    if old == size:
        if proof:
            return CheckpointDecision(Outcome.BAD_PROOF, "equal sizes need an empty proof",
                                      known, evidence=True)
        if root != stored.root:
            return CheckpointDecision(Outcome.BAD_PROOF, "root hash differs from the one "
                                      f"witnessed at size {size}", known, evidence=True)
        return CheckpointDecision(Outcome.COSIGN, "", known)
    try:
        verify_consistency(old, size, stored.root, root, proof)
    except ProofError as e:
        return CheckpointDecision(Outcome.BAD_PROOF, f"consistency proof: {e}", known,
                                  evidence=True)
    return CheckpointDecision(Outcome.COSIGN, "", known, store=True)
