"""The log entry the notary appends for each notarized call (pure, no I/O).

One leaf per call: the deterministic CBOR (RFC 8949 §4.2.1, ``cbor2`` canonical) of
``{spec, id, server, tool, call_sha256, issued_at}``. It carries no account, arguments or
results. Every value also appears in the signed receipt, so a verifier rebuilds the exact
leaf bytes from the receipt alone (:meth:`LogEntry.from_receipt`) and checks its inclusion.
Deterministic encoding matters because the leaf hash is over these bytes: one entry must
have exactly one encoding, and :func:`decode_entry` refuses any other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

import cbor2

from ledger.core.tiles import MAX_ENTRY_SIZE
from notary.core.errors import NotaryBaseError
from notary.core.ids import format_issued_at, is_receipt_id, new_receipt_id, parse_issued_at
from notary.core.records import SPEC, name_problem

__all__ = ["EntryError", "LogEntry", "decode_entry"]

_KEYS = frozenset({"spec", "id", "server", "tool", "call_sha256", "issued_at"})
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


class EntryError(NotaryBaseError, ValueError):
    """Bytes or values that are not a valid rs-tool-call/1 log entry."""


@dataclass(frozen=True)
class LogEntry:
    """The committed facts of one notarized call; validated on construction.

    ``call_sha256`` is the raw 32-byte digest (a CBOR byte string in the leaf, lower-case
    hex in the receipt). ``spec`` is fixed: an entry of another spec is another format.
    """

    spec: ClassVar[str] = SPEC

    id: str
    server: str
    tool: str
    call_sha256: bytes
    issued_at: str

    def __post_init__(self) -> None:
        if not is_receipt_id(self.id):
            raise EntryError(f"id {self.id!r} is not a receipt id (tc_ + 22 base64url)")
        _check_call(self.server, self.tool, self.call_sha256)
        try:
            parse_issued_at(self.issued_at)
        except ValueError as exc:
            raise EntryError(str(exc)) from None

    @classmethod
    def fresh(cls, server: str, tool: str, call_sha256: bytes, now: datetime) -> LogEntry:
        """A new entry: a fresh receipt id, issued at ``now``.

        The id and the time are made here by :func:`new_receipt_id` and
        :func:`format_issued_at`, whose output is their one accepted spelling (property-tested
        in tests/notary/core), so only the caller's values are checked: matching the id's
        pattern and parsing back the time just formatted cost a fifth of the entry's making on
        every notarized call.
        """
        _check_call(server, tool, call_sha256)
        entry = object.__new__(cls)
        init = object.__setattr__  # frozen: what the generated __init__ does, minus the checks
        init(entry, "id", new_receipt_id())
        init(entry, "server", server)
        init(entry, "tool", tool)
        init(entry, "call_sha256", call_sha256)
        init(entry, "issued_at", format_issued_at(now))
        return entry

    @property
    def call_sha256_hex(self) -> str:
        """The digest as the receipt spells it (64 lower-case hex characters)."""
        return self.call_sha256.hex()

    def to_map(self) -> dict[str, object]:
        """The map that is encoded: exactly the six entry keys."""
        return {
            "spec": self.spec,
            "id": self.id,
            "server": self.server,
            "tool": self.tool,
            "call_sha256": self.call_sha256,
            "issued_at": self.issued_at,
        }

    def encode(self) -> bytes:
        """Deterministic CBOR of :meth:`to_map` (keys ordered by their encoded bytes).

        With these keys that order is id, spec, tool, server, issued_at, call_sha256
        (shorter encoded keys first, then bytewise), whatever the values. The map's shape is
        fixed, so it is written directly (``cbor2.dumps(..., canonical=True)`` cost as much
        as the receipt's signature); ``tests/notary/core/test_entry.py`` checks, with property
        tests, that the bytes are cbor2's for any valid values.
        """
        data = b"".join((
            b"\xa6", _KEY_ID, _cbor_text(self.id), _KEY_SPEC, _SPEC_TEXT,
            _KEY_TOOL, _cbor_text(self.tool), _KEY_SERVER, _cbor_text(self.server),
            _KEY_ISSUED_AT, _cbor_text(self.issued_at), _KEY_CALL_SHA256, b"\x58\x20",
            self.call_sha256))
        if len(data) > MAX_ENTRY_SIZE:  # pragma: no cover - names are capped well below
            raise _too_large(data)
        return data

    @classmethod
    def from_receipt(cls, receipt: Mapping[str, object]) -> LogEntry:
        """Rebuild the entry a receipt commits to, from the receipt's own fields.

        Only ``spec``, ``id``, ``server``, ``tool``, ``call_sha256`` and ``issued_at`` are
        read; ``ledger``, ``signature`` and ``proof`` are not part of the leaf.
        """
        if not isinstance(receipt, Mapping):
            raise EntryError("receipt must be an object")
        missing = sorted(_KEYS - set(receipt))
        if missing:
            raise EntryError(f"receipt lacks {missing}")
        if receipt["spec"] != SPEC:
            raise EntryError(f"receipt spec {receipt['spec']!r} is not {SPEC!r}")
        digest = receipt["call_sha256"]
        if not isinstance(digest, str) or _HEX64_RE.fullmatch(digest) is None:
            raise EntryError("receipt call_sha256 must be 64 lower-case hex characters")
        return cls(
            id=_text(receipt, "id"),
            server=_text(receipt, "server"),
            tool=_text(receipt, "tool"),
            call_sha256=bytes.fromhex(digest),
            issued_at=_text(receipt, "issued_at"),
        )


def _check_call(server: str, tool: str, call_sha256: bytes) -> None:
    """The caller's values of an entry: its names (:func:`name_problem`) and digest."""
    problem = name_problem(server)
    if problem is not None:
        raise EntryError(f"server {problem}")
    problem = name_problem(tool)
    if problem is not None:
        raise EntryError(f"tool {problem}")
    if not isinstance(call_sha256, bytes) or len(call_sha256) != 32:
        raise EntryError("call_sha256 must be exactly 32 bytes")


def _too_large(data: bytes) -> EntryError:
    return EntryError(f"entry is {len(data)} bytes; at most {MAX_ENTRY_SIZE} fit")


def _cbor_head(major: int, n: int) -> bytes:
    """The head of a CBOR data item (RFC 8949 §3): major type and argument, shortest form."""
    if n < 24:
        return bytes((major << 5 | n,))
    if n < 0x100:
        return bytes((major << 5 | 24, n))
    if n < 0x10000:
        return bytes((major << 5 | 25,)) + n.to_bytes(2, "big")
    return bytes((major << 5 | 26,)) + n.to_bytes(4, "big")


_TEXT_HEADS = [_cbor_head(3, n) for n in range(0x100)]  # every entry's texts fit here


def _cbor_text(value: str) -> bytes:
    """A CBOR text string (major type 3): its UTF-8 bytes after their length."""
    raw = value.encode("utf-8")
    n = len(raw)
    return (_TEXT_HEADS[n] if n < 0x100 else _cbor_head(3, n)) + raw


_KEY_ID, _KEY_SPEC, _KEY_TOOL, _KEY_SERVER, _KEY_ISSUED_AT, _KEY_CALL_SHA256 = (
    _cbor_text(k) for k in ("id", "spec", "tool", "server", "issued_at", "call_sha256"))
_SPEC_TEXT = _cbor_text(SPEC)


def _text(source: Mapping[str, object], key: str) -> str:
    value = source[key]
    if not isinstance(value, str):
        raise EntryError(f"{key} must be a text string, not {type(value).__name__}")
    return value


def decode_entry(data: bytes | bytearray | memoryview) -> LogEntry:
    """Parse leaf bytes strictly: the exact key set and types, and canonical encoding.

    The decoded entry is re-encoded and must give back ``data`` byte for byte, which
    refuses non-canonical forms (indefinite lengths, long-form integers, unsorted keys,
    trailing bytes, tags) that would otherwise decode to the same values.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise EntryError(f"entry must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_ENTRY_SIZE:
        raise _too_large(raw)
    try:
        obj = cbor2.loads(raw, allow_duplicate_keys=False, max_depth=4)
    except (cbor2.CBORError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise EntryError(f"entry is not valid CBOR: {exc}") from None
    if not isinstance(obj, dict):
        raise EntryError(f"entry must be a CBOR map, not {type(obj).__name__}")
    keys = set(obj)
    if keys != _KEYS:
        extra = sorted(map(repr, keys - _KEYS))
        missing = sorted(_KEYS - keys)
        raise EntryError(f"entry keys differ: missing {missing}, unexpected {extra}")
    if obj["spec"] != SPEC:
        raise EntryError(f"entry spec {obj['spec']!r} is not {SPEC!r}")
    digest = obj["call_sha256"]
    if not isinstance(digest, bytes):
        raise EntryError("call_sha256 must be a byte string")
    entry = LogEntry(
        id=_text(obj, "id"),
        server=_text(obj, "server"),
        tool=_text(obj, "tool"),
        call_sha256=digest,
        issued_at=_text(obj, "issued_at"),
    )
    if entry.encode() != raw:
        raise EntryError("entry is not in deterministic CBOR encoding")
    return entry
