"""C2SP tlog-proof: an offline-verifiable inclusion proof with the checkpoint it leads to.

Format (https://c2sp.org/tlog-proof)::

    c2sp.org/tlog-proof@v1
    extra <base64 opaque data>        (optional line)
    index <decimal leaf index>
    <base64 hash>                     (zero or more, leaf's sibling first)

    <signed checkpoint note, verbatim>

This module only encodes and decodes, strictly: verifying the signatures needs trusted keys
(``ledger.core.checkpoint.open_checkpoint``) and verifying the path needs the leaf
(``ledger.core.proofs.verify_inclusion``). Decoding is strict so that one proof has one text, and a
bundle that decodes is guaranteed to re-encode to the same bytes.
"""

from __future__ import annotations

import base64
import re
from binascii import b2a_base64
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.checkpoint import check_checkpoint_note
from ledger.core.errors import LedgerError
from ledger.core.note import NoteError, strict_b64decode

__all__ = [
    "HEADER",
    "MAX_PROOF_HASHES",
    "ProofBundle",
    "ProofBundleError",
    "decode_proof_bundle",
    "proof_text",
]

HEADER = "c2sp.org/tlog-proof@v1"
#: An inclusion path in a tree of at most 2^64 leaves has at most 64 hashes.
MAX_PROOF_HASHES = 64
_MAX_INDEX = (1 << 64) - 1
_HASH_SIZE = 32
_INDEX_LINE = re.compile(r"index (0|[1-9][0-9]*)", re.ASCII)


class ProofBundleError(LedgerError, ValueError):
    """A tlog-proof text is malformed."""


def _b64_line(h: bytes) -> bytes:
    """One proof line: the standard base64 of a hash, then a newline."""
    return b2a_base64(h)  # newline=True: exactly the line


def _check_checkpoint(checkpoint: bytes) -> None:
    """Parse once per distinct checkpoint (:func:`check_checkpoint_note` remembers the notes it
    parsed and those the log signed), since a busy log puts one checkpoint in many bundles."""
    try:
        check_checkpoint_note(checkpoint)
    except NoteError as exc:
        raise ProofBundleError(f"bad checkpoint in proof: {exc}") from None


@dataclass(frozen=True)
class ProofBundle:
    """Leaf index, inclusion path, and the signed checkpoint (full note bytes) it proves into.

    ``extra`` is the spec's optional unauthenticated application data (None when absent; an
    empty value is not representable, since the spec omits the line when there is no data).
    """

    index: int
    proof: tuple[bytes, ...]
    checkpoint: bytes
    extra: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise ProofBundleError("index must be an integer")
        if not 0 <= self.index <= _MAX_INDEX:
            raise ProofBundleError(f"index {self.index} is out of range")
        if not isinstance(self.proof, tuple):
            raise ProofBundleError("proof must be a tuple of hashes")
        if len(self.proof) > MAX_PROOF_HASHES:
            raise ProofBundleError(f"proof has more than {MAX_PROOF_HASHES} hashes")
        # map() instead of a loop: this runs for every receipt answered with its proof.
        if not set(map(type, self.proof)) <= {bytes} or not set(map(len, self.proof)) <= {
                _HASH_SIZE}:
            raise ProofBundleError("every proof hash must be exactly 32 bytes")
        if not isinstance(self.checkpoint, bytes):
            raise ProofBundleError("checkpoint must be the signed note bytes")
        _check_checkpoint(self.checkpoint)
        if self.extra is not None and (not isinstance(self.extra, bytes) or not self.extra):
            raise ProofBundleError("extra must be non-empty bytes, or None when absent")

    def encode(self) -> bytes:
        """The tlog-proof text (UTF-8 bytes), ready to store as a ``.tlog-proof`` file."""
        lines = [HEADER]
        if self.extra is not None:
            lines.append("extra " + base64.b64encode(self.extra).decode("ascii"))
        lines.append(f"index {self.index}")
        head = "".join(line + "\n" for line in lines).encode("ascii")
        hashes = b"".join(map(b2a_base64, self.proof))  # _b64_line's lines, a call less each
        return b"".join((head, hashes, b"\n", self.checkpoint))


def proof_text(index: int, proof: Sequence[bytes], checkpoint: bytes) -> str:
    """``ProofBundle(index, tuple(proof), checkpoint).encode().decode()``, with the same checks,
    without the bundle object: the text a log answers each entry of a batch with (one per
    receipt, so the dataclass and a decode of the whole text per answer were worth saving).
    The checkpoint's text is decoded once per distinct note (the batch's entries share it)."""
    if type(index) is not int or not 0 <= index <= _MAX_INDEX:
        raise ProofBundleError(f"index {index!r} is not an integer from 0 to 2^64-1")
    if len(proof) > MAX_PROOF_HASHES:
        raise ProofBundleError(f"proof has more than {MAX_PROOF_HASHES} hashes")
    if not set(map(type, proof)) <= {bytes} or not set(map(len, proof)) <= {_HASH_SIZE}:
        raise ProofBundleError("every proof hash must be exactly 32 bytes")
    global _last_note
    note, text = _last_note
    if checkpoint is not note:
        if not isinstance(checkpoint, bytes):
            raise ProofBundleError("checkpoint must be the signed note bytes")
        _check_checkpoint(checkpoint)
        note, text = _last_note = checkpoint, checkpoint.decode("utf-8")
    lines = b"".join(map(b2a_base64, proof)).decode("ascii")
    return f"{HEADER}\nindex {index}\n{lines}\n{text}"


_last_note: tuple[bytes, str] = (b"", "")
"""The checkpoint :func:`proof_text` decoded last (a note is valid UTF-8 once checked)."""


def decode_proof_bundle(data: bytes) -> ProofBundle:
    """Parse a tlog-proof text strictly; raises ProofBundleError on any deviation.

    The header must be exact; ``extra`` may only be the second line; the index is decimal without
    leading zeros; each proof line is the canonical base64 of 32 bytes; an empty line ends the
    proof; the rest must be a syntactically valid signed checkpoint (signatures not verified).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProofBundleError("proof must be bytes")
    data = bytes(data)
    pos = 0

    def next_line(what: str) -> str:
        nonlocal pos
        end = data.find(b"\n", pos)
        if end < 0:
            raise ProofBundleError(f"proof ends before the {what}")
        raw = data[pos:end]
        pos = end + 1
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise ProofBundleError(f"non-ASCII bytes in the {what}") from None

    if next_line("header line") != HEADER:
        raise ProofBundleError(f"proof does not start with {HEADER!r}")

    extra: bytes | None = None
    line = next_line("index line")
    if line.startswith("extra "):
        try:
            extra = strict_b64decode(line[len("extra ") :], "extra data")
        except NoteError as exc:
            raise ProofBundleError(str(exc)) from None
        if not extra:
            raise ProofBundleError("empty extra data (omit the line instead)")
        line = next_line("index line")

    m = _INDEX_LINE.fullmatch(line)
    if m is None:
        raise ProofBundleError(f"bad index line {line[:40]!r}")
    index = int(m.group(1))
    if index > _MAX_INDEX:
        raise ProofBundleError("index does not fit in 64 bits")

    proof: list[bytes] = []
    while True:
        line = next_line("blank line before the checkpoint")
        if not line:
            break
        if len(proof) >= MAX_PROOF_HASHES:
            raise ProofBundleError(f"proof has more than {MAX_PROOF_HASHES} hashes")
        try:
            h = strict_b64decode(line, "proof hash")
        except NoteError as exc:
            raise ProofBundleError(str(exc)) from None
        if len(h) != _HASH_SIZE:
            raise ProofBundleError(f"proof hash is {len(h)} bytes, want 32")
        proof.append(h)

    checkpoint = data[pos:]
    if not checkpoint:
        raise ProofBundleError("proof has no checkpoint")
    return ProofBundle(index=index, proof=tuple(proof), checkpoint=checkpoint, extra=extra)
