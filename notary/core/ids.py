"""Identifiers and timestamps shared by log entries and receipts (pure, no I/O).

Every value here ends up inside a signed receipt *and* inside a log leaf, so each one has
exactly one spelling: a verifier rebuilds the leaf bytes from the receipt text, and two
spellings of the same instant or the same id would give two different leaves.
"""

from __future__ import annotations

import base64
import re
import secrets
from binascii import b2a_base64
from datetime import UTC, datetime

__all__ = [
    "RECEIPT_ID_PREFIX",
    "b64url_decode",
    "b64url_encode",
    "format_issued_at",
    "is_receipt_id",
    "new_receipt_id",
    "now_issued_at",
    "parse_issued_at",
]

RECEIPT_ID_PREFIX = "tc_"

# 16 random bytes are 128 bits; base64url carries 6 bits a character, so 22 characters
# hold them with 4 spare bits in the last character. Those spare bits are zero in the
# canonical encoding, which leaves only A, Q, g and w as possible last characters. Requiring
# that makes the id spelling unique (no two strings decode to the same 16 bytes).
_RECEIPT_ID_RE = re.compile(r"tc_[A-Za-z0-9_-]{21}[AQgw]")

_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")

# RFC 3339 profile: UTC only, exactly three fractional digits, upper-case T and Z. ASCII
# digits only ([0-9], not \d, which would also match other scripts' digits).
_ISSUED_AT_RE = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})"
    r"T(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})\.(?P<ms>[0-9]{3})Z"
)


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def b64url_encode(data: bytes) -> str:
    """Base64url without padding (RFC 4648 §5), the form JOSE and receipt ids use.

    ``binascii`` directly (what ``base64.urlsafe_b64encode`` does, without its Python frame):
    every receipt spells its id and its signature so.
    """
    return b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict inverse of :func:`b64url_encode`.

    Refuses padding, characters outside the url-safe alphabet, impossible lengths and
    non-canonical trailing bits, so each byte string has exactly one accepted spelling
    (a signature or key cannot be re-spelled to dodge a comparison). Raises ValueError.
    """
    if not isinstance(text, str):
        raise ValueError("base64url value must be a string")
    if _B64URL_RE.fullmatch(text) is None:
        raise ValueError("base64url value has characters outside A-Z a-z 0-9 - _ (or padding)")
    if len(text) % 4 == 1:
        raise ValueError("base64url value has an impossible length")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url_encode(data) != text:
        raise ValueError("base64url value is not canonical (non-zero trailing bits)")
    return data


def new_receipt_id() -> str:
    """A fresh receipt id: ``tc_`` + 22 base64url characters of 16 CSPRNG bytes.

    128 random bits make collisions negligible without any coordination between processes.
    """
    return RECEIPT_ID_PREFIX + b64url_encode(secrets.token_bytes(16))


def is_receipt_id(value: object) -> bool:
    """True only for the exact canonical shape :func:`new_receipt_id` produces."""
    return isinstance(value, str) and _RECEIPT_ID_RE.fullmatch(value) is not None


def format_issued_at(dt: datetime) -> str:
    """RFC 3339 UTC with exactly milliseconds and ``Z``, e.g. ``2026-11-29T20:49:44.123Z``.

    Sub-millisecond digits are truncated (not rounded) so a timestamp never moves into the
    next second or day. Naive datetimes are refused: guessing their zone would silently
    shift the instant a receipt attests to.
    """
    if not isinstance(dt, datetime):
        raise ValueError("issued_at must be built from a datetime")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("issued_at needs a timezone-aware datetime (got a naive one)")
    utc = dt if dt.tzinfo is UTC else dt.astimezone(UTC)
    # isoformat truncates to milliseconds too, pads the year to four digits and ends in
    # "+00:00" for UTC: the same text, from C, at half the cost of formatting seven fields.
    return utc.isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_issued_at(text: str) -> datetime:
    """Parse the one accepted spelling of ``issued_at`` into an aware UTC datetime.

    Anything :func:`format_issued_at` would not have produced (offsets other than ``Z``,
    lower-case ``t``/``z``, missing or extra fractional digits, leap second 60, impossible
    dates) is refused with ValueError, so ``format_issued_at(parse_issued_at(s)) == s``.
    """
    if not isinstance(text, str):
        raise ValueError("issued_at must be a string")
    m = _ISSUED_AT_RE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"issued_at {text!r} is not RFC 3339 UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)"
        )
    try:
        return datetime(
            int(m["y"]),
            int(m["mo"]),
            int(m["d"]),
            int(m["h"]),
            int(m["mi"]),
            int(m["s"]),
            int(m["ms"]) * 1000,
            tzinfo=UTC,
        )
    except ValueError as exc:
        raise ValueError(f"issued_at {text!r} is not a valid instant: {exc}") from None


def now_issued_at() -> str:
    """The current instant as an ``issued_at`` string."""
    return format_issued_at(datetime.now(UTC))
