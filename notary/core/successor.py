"""The successor record: a frozen log's last entry, naming the log that follows it (pure).

When a notary rolls to a new log (``notary log roll``, docs/lifecycle.md), the last entry of
the log it freezes is this record, so that the hand-over is itself an append-only, signed and
witnessed statement: a monitor that trusts the first log's key follows the chain of logs
without new out-of-band trust, and nobody can be shown two different successors of one log.

The bytes are the deterministic CBOR (RFC 8949 §4.2.1, as the tool-call entry) of a map with
exactly ``spec`` (``rs-log-successor/1``), ``origin`` (the next log's origin), ``vkeys`` (the
next log's note verifier keys, Ed25519 first then ML-DSA-44), ``previous`` (this log's
origin), ``frozen_at`` (RFC 3339 UTC with milliseconds) and ``reason`` (``scheduled``,
``operator`` or ``compromised``). Its ``spec`` differs from a tool-call entry's, so no
verifier rebuilding receipt entries can take one for the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import cbor2

from ledger.core.tiles import MAX_ENTRY_SIZE
from notary.core.errors import NotaryBaseError
from notary.core.ids import parse_issued_at

__all__ = ["REASONS", "SUCCESSOR_SPEC", "SuccessorError", "SuccessorRecord",
           "decode_successor"]

SUCCESSOR_SPEC = "rs-log-successor/1"
REASONS = ("scheduled", "operator", "compromised")
_KEYS = frozenset({"spec", "origin", "vkeys", "previous", "frozen_at", "reason"})


class SuccessorError(NotaryBaseError, ValueError):
    """Bytes or values that are not a valid successor record."""


@dataclass(frozen=True)
class SuccessorRecord:
    """What a frozen log says of the next one; validated on construction."""

    origin: str
    vkeys: tuple[str, ...]
    previous: str
    frozen_at: str
    reason: str

    def __post_init__(self) -> None:
        for name in ("origin", "previous", "frozen_at", "reason"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise SuccessorError(f"{name} must be a non-empty text string")
        if not isinstance(self.vkeys, tuple) or not self.vkeys or not all(
                isinstance(k, str) and k for k in self.vkeys):
            raise SuccessorError("vkeys must be a non-empty list of text strings")
        if self.origin == self.previous:
            raise SuccessorError("a log cannot succeed itself")
        if self.reason not in REASONS:
            raise SuccessorError(f"reason must be one of {REASONS}, not {self.reason!r}")
        try:
            parse_issued_at(self.frozen_at)
        except ValueError as e:
            raise SuccessorError(f"frozen_at: {e}") from None

    def to_map(self) -> dict[str, object]:
        return {"spec": SUCCESSOR_SPEC, "origin": self.origin, "vkeys": list(self.vkeys),
                "previous": self.previous, "frozen_at": self.frozen_at, "reason": self.reason}

    def encode(self) -> bytes:
        data: bytes = cbor2.dumps(self.to_map(), canonical=True)
        if len(data) > MAX_ENTRY_SIZE:
            raise SuccessorError(f"the record is {len(data)} bytes, over {MAX_ENTRY_SIZE}")
        return data


def decode_successor(data: bytes | bytearray | memoryview) -> SuccessorRecord:
    """Parse a successor record strictly: exactly its keys and types, and canonical bytes
    (re-encoded, it must give back ``data`` byte for byte)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SuccessorError(f"a record must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_ENTRY_SIZE:
        raise SuccessorError(f"the record is {len(raw)} bytes, over {MAX_ENTRY_SIZE}")
    try:
        obj = cbor2.loads(raw, allow_duplicate_keys=False, max_depth=4)
    except (cbor2.CBORError, ValueError, TypeError, OverflowError, RecursionError) as e:
        raise SuccessorError(f"not valid CBOR: {e}") from None
    if not isinstance(obj, dict) or set(obj) != _KEYS:
        raise SuccessorError(f"a successor record is a map of exactly {sorted(_KEYS)}")
    if obj["spec"] != SUCCESSOR_SPEC:
        raise SuccessorError(f"spec {obj['spec']!r} is not {SUCCESSOR_SPEC!r}")
    vkeys = obj["vkeys"]
    if not isinstance(vkeys, list):
        raise SuccessorError("vkeys must be an array")
    record = SuccessorRecord(obj["origin"], tuple(vkeys), obj["previous"], obj["frozen_at"],
                             obj["reason"])
    if record.encode() != raw:
        raise SuccessorError("the record is not in deterministic CBOR encoding")
    return record
