"""The search API's parameters, pure: time bounds, page sizes and opaque cursors.

``GET /v1/tool-calls?server=&tool=&since=&until=&cursor=&limit=`` lists receipts newest first by
``(issued_at, index)``. Everything a client sends is checked here so that the route only maps
:class:`SearchParameterError` to a 400 and the store only ever sees well-formed values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from notary.core.errors import NotaryBaseError
from notary.core.ids import b64url_decode, b64url_encode, format_issued_at

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Cursor",
    "SearchParameterError",
    "decode_cursor",
    "encode_cursor",
    "in_window",
    "parse_limit",
    "parse_time_bound",
]

DEFAULT_LIMIT = 20
MAX_LIMIT = 100

# RFC 3339 date-time (§5.6) with an explicit offset; ASCII digits only. Lower-case t/z are
# allowed by RFC 3339 and accepted; a leap second (:60) is not representable and refused.
_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_ISSUED_AT_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
_CURSOR_PREFIX = "v1|"
_MAX_INDEX = (1 << 64) - 1


class SearchParameterError(NotaryBaseError, ValueError):
    """A search parameter that cannot be used; ``code`` is the API's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def in_window(issued_at: str, index: int, *, since: str | None, until: str | None,
              before: tuple[str, int] | None) -> bool:
    """Whether a receipt issued at ``issued_at`` with log ``index`` is on a search's page:
    at or after ``since``, before ``until``, and older than the cursor's ``before``. (Stores
    narrow by index ranges first; times are canonical ``issued_at`` strings, so they compare
    as text.)"""
    return ((since is None or issued_at >= since) and (until is None or issued_at < until)
            and (before is None or (issued_at, index) < before))


def parse_time_bound(name: str, text: str) -> str:
    """An RFC 3339 instant as a receipt ``issued_at`` string, rounded *up* to the millisecond.

    Receipt times are whole milliseconds, so for ``issued_at >= since`` and ``issued_at <
    until`` rounding the bound up gives exactly the receipts at or after (before) the instant
    asked for; rounding down would let in one that is a fraction of a millisecond early.
    """
    shown = text if len(text) <= 40 else text[:40] + "…"
    if not _TIME_RE.fullmatch(text):
        raise SearchParameterError("invalid_time", f"{name} must be an RFC 3339 date-time with "
                                   f"a time zone, e.g. 2026-01-31T12:00:00Z; got {shown!r}")
    m = _TIME_RE.fullmatch(text)
    assert m is not None
    fraction = m.group(1) or ""
    whole = (text[: m.start(1)] + text[m.end(1):]) if fraction else text
    try:
        dt = datetime.fromisoformat(whole.upper().replace("Z", "+00:00"))
    except ValueError:
        raise SearchParameterError("invalid_time", f"{name} is not a real date and time: "
                                   f"{shown!r}") from None
    nanos = int(fraction[1:].ljust(9, "0")) if fraction else 0
    millis = -(-nanos // 1_000_000)  # ceiling: see above
    try:
        return format_issued_at((dt + timedelta(milliseconds=millis)).astimezone(UTC))
    except (OverflowError, ValueError):
        raise SearchParameterError("invalid_time", f"{name} is out of range: {shown!r}") from None


def parse_limit(text: str) -> int:
    """1..MAX_LIMIT in canonical decimal: one spelling per value."""
    if not (text.isascii() and text.isdigit()) or text[0] == "0" or len(text) > 3 \
            or int(text) > MAX_LIMIT:
        shown = text if len(text) <= 20 else text[:20] + "…"
        raise SearchParameterError("invalid_limit",
                                   f"limit must be an integer 1..{MAX_LIMIT}; got {shown!r}")
    return int(text)


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: strictly older than this ``(issued_at, index)``."""

    issued_at: str
    index: int

    def key(self) -> tuple[str, int]:
        return (self.issued_at, self.index)


def encode_cursor(cursor: Cursor) -> str:
    """Opaque to clients (they must not build one), plain to the server: base64url text."""
    return b64url_encode(f"{_CURSOR_PREFIX}{cursor.issued_at}|{cursor.index}".encode("ascii"))


def decode_cursor(text: str) -> Cursor:
    """The inverse of :func:`encode_cursor`; anything it did not produce is refused."""
    bad = SearchParameterError("invalid_cursor", "cursor is not one this notary handed out; "
                               "use next_cursor from a previous page as is")
    if len(text) > 128:
        raise bad
    try:
        raw = b64url_decode(text).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        raise bad from None
    if not raw.startswith(_CURSOR_PREFIX):
        raise bad
    parts = raw[len(_CURSOR_PREFIX):].split("|")
    if len(parts) != 2 or not _ISSUED_AT_RE.fullmatch(parts[0]):
        raise bad
    issued_at, index = parts
    if not (index.isascii() and index.isdigit()) or (len(index) > 1 and index[0] == "0") \
            or len(index) > 20 or int(index) > _MAX_INDEX:
        raise bad
    cursor = Cursor(issued_at, int(index))
    if encode_cursor(cursor) != text:
        raise bad
    return cursor
