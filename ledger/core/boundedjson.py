"""JSON from someone else, parsed within bounds on its size and nesting depth.

Python's parser recurses once per nested array or object, so a hostile answer such as 30,000
``[`` raises :class:`RecursionError` from deep inside it: not a :class:`ValueError` that callers
handle, and a crash of any daemon that reads it. Here the depth is measured first, without
recursion, and refused above a limit; the size is refused before anything is parsed.

Beyond RFC 8259's grammar this parser also refuses what JSON cannot mean but Python would
accept: duplicate member names (which one a reader keeps is implementation-defined, so two
verifiers could disagree about one document), ``NaN``/``Infinity``, and text that is not UTF-8
(Python would guess UTF-16 or UTF-32 from the first bytes), or that starts with a byte order
mark (RFC 8259 §8.1: JSON exchanged between systems MUST be UTF-8 and MUST NOT start with one).
Each of these is a way for two parsers to read one document differently, so each is refused
with a message that says which rule was broken and never quotes the document.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, repeat
from operator import sub
from typing import NoReturn, TypeAlias

from ledger.core.errors import LedgerError

__all__ = ["DEFAULT_MAX_DEPTH", "JsonError", "JsonObject", "JsonValue", "nesting_depth",
           "parse_json"]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A parsed JSON value, as :func:`parse_json` (and ``json.loads``) return it.

The one JSON type of both packages: a value of it must be narrowed (``isinstance``) before
it is used, which is the point for documents that come from someone else. Code that only
passes a document on, or builds one from values typed elsewhere, uses ``object`` instead
(``dict`` is invariant, so a ``dict[str, str]`` is not a :data:`JsonObject`).
"""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A parsed JSON object (the usual root of a document)."""

DEFAULT_MAX_DEPTH = 64
"""Deeper than any document of this project (receipts, JWKS, proofs are 2 to 4 levels)."""

# A JSON string, escapes included ("unrolled" so that long strings do not backtrack).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# After strings are gone, only the brackets matter: openers count +1, closers -1.
_BRACKETS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_OTHER = bytes(b for b in range(256) if b not in b"[{]}")
_BOM = b"\xef\xbb\xbf"


class JsonError(LedgerError, ValueError):
    """The data is not JSON, or not JSON within the limits."""


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in ``data`` (brackets inside strings do not
    count). Linear time, no recursion; meant for data that may not be valid JSON at all."""
    if data.count(b"[") + data.count(b"{") == 0:
        return 0
    brackets = _STRING.sub(b"", data).translate(_BRACKETS, _OTHER)
    if not brackets:
        return 0
    # Running sum of +1/-1 over the brackets, in C-level iterators (a hostile document may
    # hold millions of them).
    deepest: int = max(accumulate(map(sub, brackets, repeat(1))))
    return max(0, deepest)


def _no_constant(name: str) -> NoReturn:
    raise JsonError(f"{name} is not a JSON value")


def _unique(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonError(f"duplicate member name {key[:60]!r}")
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_unique)
"""One decoder for every document (``json.loads`` with these options builds one per call)."""


def parse_json(data: bytes | str, *, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH
               ) -> JsonValue:
    """Parse ``data`` as strict JSON of at most ``max_bytes`` bytes nested at most ``max_depth``
    deep; raise :class:`JsonError` (a :class:`ValueError`) for anything else."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise JsonError(f"the document is {len(raw)} bytes, more than the limit of {max_bytes}")
    # The depth is at most the number of openers (those inside strings included), so a
    # document with few of them (every request body of this project) needs no measuring.
    depth = 0 if raw.count(b"[") + raw.count(b"{") <= max_depth else nesting_depth(raw)
    if depth > max_depth:
        raise JsonError(f"the document is nested {depth} deep, more than the limit of "
                        f"{max_depth}")
    if raw.startswith(_BOM):
        raise JsonError("the document starts with a UTF-8 byte order mark (BOM); send UTF-8 "
                        "without one (RFC 8259 §8.1)")
    if b"\x00" in raw[:4]:
        raise JsonError("the document is not UTF-8 (it looks like UTF-16 or UTF-32); send "
                        "UTF-8 (RFC 8259 §8.1)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonError(f"the document is not UTF-8 (invalid byte at offset {e.start}); send "
                        "UTF-8 (RFC 8259 §8.1)") from None
    try:
        value: JsonValue = _DECODER.decode(text)
    except JsonError:
        raise
    except (ValueError, RecursionError) as e:  # RecursionError: cannot happen below max_depth
        raise JsonError(f"not JSON: {e}") from None
    return value
