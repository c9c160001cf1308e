"""Request bodies as strict JSON: UTF-8 only, no byte order mark, unique member names.

Python's ``json.loads`` accepts more than RFC 8259 asks senders to produce, and each extra is a
way for two parsers to read one body differently: a duplicate member (``{"id": a, "id": b}``)
is "last wins" here and "first wins" elsewhere; a UTF-8 byte order mark or a UTF-16/32 body is
silently decoded (RFC 8259 §8.1: JSON exchanged between systems MUST be UTF-8 and MUST NOT
start with a BOM); ``NaN`` and ``Infinity`` are not JSON at all. A receipt service should read
exactly one meaning from the bytes it is given, so all of these are refused with a message that
says which rule was broken.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["StrictJSONError", "loads_strict"]

_BOM = b"\xef\xbb\xbf"


class StrictJSONError(ValueError):
    """The body is not strict JSON; the message says why (it never quotes the body)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = key if len(key) <= 40 else key[:40] + "…"
                raise StrictJSONError(f"duplicate member name {shown!r} in an object")
            seen.add(key)
    return obj


def _no_constants(name: str) -> object:
    raise StrictJSONError(f"{name} is not a JSON value")


def loads_strict(raw: bytes) -> Any:
    """Parse ``raw``; :class:`StrictJSONError` for anything but one strict JSON text.

    ``RecursionError`` (nesting deeper than the interpreter allows) is left to the caller,
    which can word it for its context.
    """
    if raw.startswith(_BOM):
        raise StrictJSONError("the body starts with a UTF-8 byte order mark; send UTF-8 "
                              "without one (RFC 8259 §8.1)")
    if b"\x00" in raw[:4]:
        raise StrictJSONError("the body looks like UTF-16 or UTF-32; send UTF-8 "
                              "(RFC 8259 §8.1)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StrictJSONError(f"the body is not UTF-8 (invalid byte at offset {e.start}); "
                              "send UTF-8 (RFC 8259 §8.1)") from None
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constants)
    except StrictJSONError:
        raise
    except ValueError as e:  # json's messages give a position, never the text
        raise StrictJSONError(str(e)) from None
