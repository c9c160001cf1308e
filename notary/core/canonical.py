"""Canonical JSON (RFC 8785, JCS) for everything the notary hashes or signs (pure, no I/O).

The serialization itself is the ``rfc8785`` package's; this module only decides which
Python values are allowed in. The rule is that a value must mean the same thing to a
JavaScript implementation as to us, because the rs-tool-call/1 SDKs hash the same records
in Node: a value JavaScript would silently change (2^53+1 rounded to the nearest double,
a lone surrogate replaced on the way to UTF-8) is refused with the path of the offending
value instead of producing a digest nobody else can reproduce.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import cast

import rfc8785

from ledger.core.boundedjson import JsonValue
from notary.core.errors import NotaryBaseError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "CanonicalizationError",
    "canonical_json",
    "check_js_safe",
    "child_path",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: every integer up to it is exactly a double."""

MAX_DEPTH = 256
"""Deepest nesting of arrays and objects accepted.

Real tool arguments and results are nowhere near this; the bound keeps the recursive
serializer far from Python's recursion limit (and stops reference cycles) so hostile input
gets a clear error instead of a RecursionError.
"""

_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class CanonicalizationError(NotaryBaseError, ValueError):
    """A value cannot be canonicalized faithfully; ``path`` names it (``$.a.items[3].n``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def child_path(parent: str, key: str | int) -> str:
    """Path of a member (``str`` key) or array element (``int`` index) of ``parent``.

    Keys that are plain identifiers read as ``$.name``; anything else is written as an
    ASCII JSON string in brackets (``$["a b"]``, ``$["\\ud800"]``) so the path itself stays
    printable and unambiguous even when the key is the problem.
    """
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _IDENTIFIER_RE.fullmatch(key):
        return f"{parent}.{key}"
    return f"{parent}[{json.dumps(key, ensure_ascii=True)}]"


def _surrogate_problem(text: str, what: str) -> str | None:
    m = _SURROGATE_RE.search(text)
    if m is None:
        return None
    return (
        f"{what} contains a lone surrogate U+{ord(m.group()):04X} at index {m.start()}; "
        "it is not valid Unicode and cannot be encoded as UTF-8"
    )


def _int_problem(n: int) -> str | None:
    """Why JavaScript cannot hold ``n`` faithfully, or None if it can.

    Safe integers always can. Beyond ±(2^53−1), ``JSON.parse`` turns the digits into the
    nearest double, so ``n`` is accepted only when that loses nothing: ``n`` is exactly
    that double (2^53, 10^18, 10^21), or the double's own ECMAScript spelling is ``n``'s
    digits (35818508739113130, which is how JavaScript itself writes that double, so a
    float accepted once is accepted again after a trip through ``json.loads``). Any
    other integer (2^53+1, most nanosecond timestamps) would come out as a different
    number and is refused.
    """
    if -MAX_SAFE_INTEGER <= n <= MAX_SAFE_INTEGER:
        return None
    try:
        nearest = float(n)
    except OverflowError:
        # Described by size: printing a huge int can itself fail (int max_str_digits).
        return f"a {n.bit_length()}-bit integer is too large for a JavaScript number"
    if nearest == n:  # int/float comparison in Python is exact
        return None
    spelled = rfc8785.dumps(nearest).decode("ascii")
    if spelled == str(n):
        return None
    return (
        f"integer {n} is beyond ±(2^53−1) and JavaScript would read it as {spelled}; "
        "send such numbers as strings"
    )


def _path(chain: tuple[str | int, ...]) -> str:
    """The path string of a chain ``(root, key or index, ...)``, built only when reporting."""
    root, *keys = chain
    out = str(root)
    for key in keys:
        out = child_path(out, key)
    return out


def _scalar_problem(item: object) -> tuple[str | None, bool]:
    """(why ``item`` is refused or None, whether it is an integer beyond ±(2^53−1))."""
    if item is None or isinstance(item, bool):
        return None, False
    if isinstance(item, int):
        if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            return None, False
        return _int_problem(item), True
    if isinstance(item, float):
        if math.isfinite(item):
            return None, False
        return f"{item!r} is not a JSON number (NaN and infinities are refused)", False
    if isinstance(item, str):
        # An ASCII string (a flag CPython keeps, so no scan) cannot hold a surrogate.
        return (None if item.isascii() else _surrogate_problem(item, "string")), False
    hint = " (use a list for a JSON array)" if isinstance(item, tuple | set | frozenset) else ""
    return f"{type(item).__name__} is not a JSON value{hint}", False


def _children(item: list[object] | dict[object, object], chain: tuple[str | int, ...]
              ) -> Iterator[tuple[str | int, object]]:
    """(key or index, value) of a container's members, after checking an object's keys.

    Every key of an object is checked before any of its values, in order, as the path of
    the first problem in document order is the one reported.
    """
    if isinstance(item, list):
        return enumerate(item)
    for key in item:
        if not isinstance(key, str):
            raise CanonicalizationError(
                _path(chain),
                f"object key {key!r} is a {type(key).__name__}, JSON object keys must be strings",
            )
        if not key.isascii():
            problem = _surrogate_problem(key, "object key")
            if problem is not None:
                raise CanonicalizationError(_path((*chain, key)), problem)
    return iter(item.items())  # type: ignore[arg-type]  # every key was just checked


def _walk(value: object, path: str) -> bool:
    """Validate ``value``; return True if it holds an integer beyond ±(2^53−1).

    Depth-first in document order, so the first problem in the document is the one
    reported, and iterative (a stack of the open containers) to keep depth bounded by
    :data:`MAX_DEPTH` rather than the Python stack. Paths are built only for the error
    message: the walk itself carries a tuple of keys per open container.
    """
    if not isinstance(value, list | dict):
        problem, big = _scalar_problem(value)
        if problem is not None:
            raise CanonicalizationError(path, problem)
        return big
    has_big_int = False
    root: tuple[str | int, ...] = (path,)
    stack: list[tuple[Iterator[tuple[str | int, object]], tuple[str | int, ...]]] = [
        (_children(value, root), root)
    ]
    while stack:
        members, chain = stack[-1]
        for key, item in members:
            if isinstance(item, list | dict):
                child = (*chain, key)
                if len(stack) >= MAX_DEPTH:
                    raise CanonicalizationError(
                        _path(child), f"nesting is deeper than {MAX_DEPTH} arrays/objects"
                    )
                stack.append((_children(item, child), child))
                break
            if isinstance(item, str) and item.isascii():
                continue  # the common case, decided without a call
            problem, big = _scalar_problem(item)
            if problem is not None:
                raise CanonicalizationError(_path((*chain, key)), problem)
            has_big_int = has_big_int or big
        else:
            stack.pop()
    return has_big_int


def check_js_safe(value: object, path: str = "$") -> None:
    """Refuse, naming the path, any value JavaScript and JCS cannot represent faithfully.

    Accepted: ``None``, ``bool``, finite ``float``, ``int`` that a JavaScript number holds
    faithfully (every integer within ±(2^53−1); beyond that only those ``JSON.parse``
    reads without change, see ``_int_problem``), ``str`` without
    surrogate code points, ``list`` (JSON array) and ``dict`` with ``str`` keys (JSON
    object), nested at most :data:`MAX_DEPTH` deep. Everything else is refused, including
    tuples, sets, bytes and other mappings: only the types ``json.loads`` produces are
    accepted, so what is hashed is exactly what a JSON parser would see.
    Raises :class:`CanonicalizationError`.
    """
    _walk(value, path)


def _big_ints_as_floats(value: object) -> object:
    """Copy of ``value`` with integers beyond ±(2^53−1) as floats (already validated).

    JSON has one number type; JavaScript writes such a number with ECMAScript formatting
    (10^21 as ``1e+21``), so it must go through the float path of the serializer to give
    the same bytes. Recursion is bounded by MAX_DEPTH, already checked.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(value)
    if isinstance(value, list):
        return [_big_ints_as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _big_ints_as_floats(v) for k, v in value.items()}
    return value


def canonical_json(value: object) -> bytes:
    """The RFC 8785 (JCS) bytes of ``value`` after :func:`check_js_safe` accepts it.

    Object members sorted by UTF-16 code units, no whitespace, ECMAScript number
    formatting (so ``-0.0`` becomes ``0`` and ``1e21`` becomes ``1e+21``), strings as raw
    UTF-8 with only the required escapes: the bytes a JavaScript JCS implementation writes.
    The output is a fixed point: parsing it with ``json.loads`` and canonicalizing again
    gives the same bytes.
    """
    if _walk(value, "$"):
        value = _big_ints_as_floats(value)
    try:
        return rfc8785.dumps(cast(JsonValue, value))  # _walk checked it is JSON
    except rfc8785.CanonicalizationError as exc:  # pragma: no cover - _walk is stricter
        raise CanonicalizationError("$", str(exc)) from exc
