"""Authorization facts: values read from a call's arguments and coerced to a type (pure).

A fact is what a rule judges, never the raw argument: ``"2750"`` and ``2750`` are the same
``integer`` fact, and ``/allowed/../secret`` is the ``path`` fact ``/secret``. The facts are
what the decision log keeps and what the ledger commits to (by digest), so an auditor
re-evaluating a decision judges exactly what the gateway judged.

Problems are described without the argument's value (a type name, "too long", "a lone
surrogate"), because they go to the operator's log and arguments stay out of logs.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from notary.core.canonical import MAX_SAFE_INTEGER, CanonicalizationError, check_js_safe
from notary.core.errors import NotaryBaseError
from notary.gateway.policy.uris import UriError, normalize_uri

__all__ = [
    "CONTEXT_FACTS",
    "FACT_TYPES",
    "MAX_PATH_CHARS",
    "MISSING",
    "CoercionError",
    "FactSpec",
    "FactType",
    "coerce",
    "lookup",
    "nfc",
    "normalize_path",
]

CONTEXT_FACTS: Final = ("agent", "tool")
FACT_TYPES: Final = ("integer", "number", "string", "boolean", "path", "paths", "uri", "any")
FactType = Literal["integer", "number", "string", "boolean", "path", "paths", "uri", "any"]

MAX_PATH_CHARS: Final = 4096
"""Longest path accepted as a ``path`` fact (PATH_MAX on Linux); longer is refused."""

_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


class CoercionError(NotaryBaseError, ValueError):
    """An argument value cannot be turned into the fact's type (the message has no value)."""


class _Missing:
    """The marker of an absent fact (a missing argument, or one that failed to coerce)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def _js_int(n: int) -> int:
    if not -MAX_SAFE_INTEGER <= n <= MAX_SAFE_INTEGER:
        raise CoercionError("the integer is beyond ±(2^53−1)")
    return n


def nfc(text: str) -> str:
    """``text`` in Unicode normal form C: how path rule values are compared."""
    return unicodedata.normalize("NFC", text)


def normalize_path(value: object) -> str:
    """The lexical normal form of a path: what every path rule sees.

    Repeated slashes collapse, ``.`` segments go, ``..`` removes the segment before it (and
    stays at the root of an absolute path: ``/../x`` is ``/x``), a trailing slash is
    dropped. A relative path stays relative, keeping the ``..`` that lead out of it, so it
    never matches an absolute prefix. Lexical here (this module does no I/O): the gateway
    resolves symlinks on its own host for a local upstream (:mod:`notary.gateway.hostpaths`),
    and a remote upstream must confine them itself.

    A path must already be in Unicode normal form C (NFC), the form rule values are compared
    in. Servers and file systems that map canonically equivalent names to one entry (the
    reference filesystem server, macOS) would otherwise serve ``Verträge`` spelled with a
    combining diaeresis past a rule written for the composed spelling; such a path is
    refused, so every rule on it fails. Refused too: non-strings, the empty string, NUL
    bytes, lone surrogates, and paths over :data:`MAX_PATH_CHARS` characters.
    """
    if not isinstance(value, str):
        raise CoercionError(f"a {type(value).__name__} is not a path")
    if not value:
        raise CoercionError("an empty string is not a path")
    if len(value) > MAX_PATH_CHARS:
        raise CoercionError(f"the path is longer than {MAX_PATH_CHARS} characters")
    if "\x00" in value:
        raise CoercionError("the path contains a NUL character")
    try:
        check_js_safe(value)
    except CanonicalizationError:
        raise CoercionError("the path contains a lone surrogate") from None
    if not unicodedata.is_normalized("NFC", value):
        raise CoercionError("the path is not in Unicode normal form C (NFC)")
    absolute = value.startswith("/")
    out: list[str] = []
    for segment in value.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append("..")
            continue
        out.append(segment)
    text = "/".join(out)
    if absolute:
        return "/" + text
    return text or "."


def coerce(value: object, kind: FactType) -> object:
    """``value`` as a fact of type ``kind``; raises :class:`CoercionError`.

    - ``integer``: an integer; a float with an integral value; a string of decimal digits
      (``"2750"``). Never a boolean. Within ±(2^53−1), like every number JavaScript agrees on.
    - ``number``: an integer or finite float, or a string in JSON number syntax.
    - ``string``: a string only (numbers are not silently turned into text).
    - ``boolean``: a boolean, or the strings ``"true"`` / ``"false"``.
    - ``path``: a string, in the lexical normal form of :func:`normalize_path`.
    - ``paths``: a list of strings, each as for ``path`` (for tools taking several paths).
    - ``uri``: a string, in the normal form of :func:`~.uris.normalize_uri`.
    - ``any``: any JSON value that canonicalizes (checked, not changed).
    """
    return _COERCIONS.get(kind, _any)(value)


def _integer(value: object) -> int:
    if isinstance(value, bool):
        raise CoercionError("a boolean is not an integer")
    if isinstance(value, int):
        return _js_int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return _js_int(int(value))
    if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return _js_int(int(value.strip()))
    raise CoercionError(f"the {type(value).__name__} value is not an integer")


def _number(value: object) -> int | float:
    if isinstance(value, bool):
        raise CoercionError("a boolean is not a number")
    if isinstance(value, int):
        return _js_int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CoercionError("NaN and infinities are not numbers here")
        return value
    if isinstance(value, str) and _NUMBER_RE.fullmatch(value.strip()):
        text = value.strip()
        if _INT_RE.fullmatch(text):
            return _js_int(int(text))
        number = float(text)
        if not math.isfinite(number):
            raise CoercionError("the number is out of range")
        return number
    raise CoercionError(f"the {type(value).__name__} value is not a number")


def _string(value: object) -> str:
    if isinstance(value, str):
        try:
            check_js_safe(value)
        except CanonicalizationError:
            raise CoercionError("the string contains a lone surrogate") from None
        return value
    raise CoercionError(f"the {type(value).__name__} value is not a string")


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in ("true", "false"):
        return value.strip() == "true"
    raise CoercionError(f"the {type(value).__name__} value is not a boolean")


def _uri(value: object) -> str:
    try:
        return normalize_uri(value)
    except UriError as e:
        raise CoercionError(str(e)) from None


def _paths(value: object) -> list[str]:
    if not isinstance(value, list):
        raise CoercionError(f"the {type(value).__name__} value is not a list of paths")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(normalize_path(item))
        except CoercionError as e:
            raise CoercionError(f"item {i}: {e}") from None
    return out


def _any(value: object) -> object:
    try:
        check_js_safe(value)
    except CanonicalizationError:
        # Neither the value nor its path (keys come from the arguments too) is quoted.
        raise CoercionError("the value has no faithful JSON form (an integer beyond "
                            "±(2^53−1), a lone surrogate, NaN, or nesting too deep)") from None
    return value


_COERCIONS: Final[Mapping[str, Callable[[object], object]]] = {
    "integer": _integer, "number": _number, "string": _string, "boolean": _boolean,
    "path": normalize_path, "paths": _paths, "uri": _uri, "any": _any,
}


def lookup(arguments: object, path: Sequence[str]) -> object:
    """The value at ``path`` in ``arguments``, or :data:`MISSING`."""
    current = arguments
    for segment in path:
        if isinstance(current, Mapping):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


@dataclass(frozen=True)
class FactSpec:
    """One fact read from the arguments: ``name`` ← ``path`` (segments), coerced to ``type``."""

    name: str
    path: tuple[str, ...]
    type: FactType = "any"
    default: object = MISSING

    @property
    def source(self) -> str:
        """The argument path as the explain output prints it (``approval.approved``)."""
        return ".".join(self.path)

    def extract(self, arguments: Mapping[str, object]) -> tuple[object, str | None]:
        """(value or :data:`MISSING`, problem for the operator's log or None).

        The problem names the fact and the argument path (both from the policy) and the kind
        of problem, never the argument's value.
        """
        raw = lookup(arguments, self.path)
        if raw is MISSING:
            if self.default is not MISSING:
                return self.default, None
            return MISSING, f"fact {self.name!r}: argument {self.source!r} is absent"
        try:
            return coerce(raw, self.type), None
        except CoercionError as e:
            return MISSING, f"fact {self.name!r}: argument {self.source!r}: {e}"
