"""Damage a receipt one field at a time, for the tests that check exactly which levels fail.

The verifier's tests, the SDK's and the cross-language corpus (``tests/corpus/generate.py``) tamper
with the same fields, and a verifier in another language must be shown the same damage as ours:
so there is one way to damage each. The proof functions take and return a receipt's ``proof``
text (a C2SP tlog-proof); :func:`in_proof` and :func:`set_field` make in-place changes of a
receipt dictionary out of them, for the tables of cases. :func:`flip_tile_bit` damages a tile
or bundle stored in a SQLite log, as disk damage would, for the scrub, check and verify tests.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

Receipt = dict[str, Any]
ReceiptTamper = Callable[[Receipt], None]

__all__ = ["checkpoint_root", "checkpoint_signature", "flip_b64", "flip_tile_bit", "in_proof",
           "last_signature", "proof_hash", "set_field"]


def flip_b64(text: str) -> str:
    """``text`` (base64) with the first bit of its first byte flipped."""
    raw = bytearray(base64.b64decode(text))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def proof_hash(proof: str) -> str:
    """The first hash of the inclusion proof flipped (the line after header and index)."""
    lines = proof.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1" and lines[1].startswith("index ")
    assert lines[2], "the proof must have at least one hash"
    lines[2] = flip_b64(lines[2])
    return "\n".join(lines)


def checkpoint_root(proof: str) -> str:
    """The checkpoint's root hash flipped (its third line: origin, size, root)."""
    head, checkpoint = proof.split("\n\n", 1)
    lines = checkpoint.split("\n")
    lines[2] = flip_b64(lines[2])
    return head + "\n\n" + "\n".join(lines)


def checkpoint_signature(proof: str) -> str:
    """The log's Ed25519 signature line flipped: the one a verifier pinned to the Ed25519 log
    key checks (a dual-signed checkpoint's ML-DSA-44 line is a stranger to that key)."""
    origin = proof.split("\n\n", 1)[1].split("\n", 1)[0]
    lines = proof.split("\n")
    i = next(n for n, line in enumerate(lines)
             if line.startswith(f"\u2014 {origin} ") and len(line.rsplit(" ", 1)[1]) < 100)
    head, sig = lines[i].rsplit(" ", 1)
    lines[i] = f"{head} {flip_b64(sig)}"
    return "\n".join(lines)


def last_signature(proof: str) -> str:
    """The checkpoint's last signature line flipped (a witness's cosignature, once added)."""
    last = proof.rstrip("\n").rsplit(" ", 1)[1]
    return proof.replace(last, flip_b64(last))


def in_proof(tamper: Callable[[str], str]) -> ReceiptTamper:
    """``tamper`` applied to a receipt's proof, in place."""
    def apply(receipt: Receipt) -> None:
        receipt["proof"] = tamper(receipt["proof"])
    return apply


def set_field(path: str, value: Any) -> ReceiptTamper:
    """Set the receipt's field at the dotted ``path`` to ``value``, or to ``value(old)`` when
    ``value`` is callable."""
    def apply(receipt: Receipt) -> None:
        *parents, last = path.split(".")
        obj = receipt
        for p in parents:
            obj = obj[p]
        obj[last] = value(obj[last]) if callable(value) else value
    return apply


def flip_tile_bit(db: Path, level: int, index: int, offset: int = 0) -> None:
    """XOR the lowest bit of byte ``offset`` of tile ``(level, index)`` (level -1: an entry
    bundle) in the SQLite log ``db``; a second flip restores it."""
    conn = sqlite3.connect(db, timeout=10)
    try:
        row_id = ((level + 1) << 48) | index
        (data,) = conn.execute("SELECT data FROM tiles WHERE id = ?", (row_id,)).fetchone()
        data = bytearray(data)
        data[offset] ^= 0x01
        conn.execute("UPDATE tiles SET data = ? WHERE id = ?", (bytes(data), row_id))
        conn.commit()
    finally:
        conn.close()
