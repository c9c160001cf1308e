"""The ``uri`` fact: a resource URI in the one normal form every resource rule sees (pure).

MCP names resources by URI (``file:///srv/a.txt``, ``test://template/7/data``); a rule
written for one spelling must hold for every spelling that names the same resource, and a
spelling the gateway cannot compare safely is refused (the fact is then absent, and every
rule on it fails: fail closed). The normal form, after RFC 3986 section 6.2.2:

- the scheme (required) and the authority are lower-cased;
- percent-escapes of unreserved characters are decoded (``%7E`` is ``~``, ``%2E`` is ``.``)
  and the others written with upper-case hex digits;
- ``.`` and ``..`` path segments are removed (section 5.2.4), so ``test://x/a/../b`` is
  ``test://x/b`` and a ``..`` never climbs above the root;
- the URI must be in Unicode normal form C, like paths (:func:`~.facts.normalize_path`).

Refused: a non-string, the empty string, whitespace or control characters, a backslash, an
escaped ``/`` or ``\\`` (``%2F``, ``%5C``: a server that decodes them before resolving the
path would see segments the rules never saw), a malformed escape, lone surrogates, and URIs
over :data:`MAX_URI_CHARS` characters.

``prefix`` on a ``uri`` fact compares whole segments (:func:`uri_has_prefix`):
``test://static`` admits ``test://static`` and ``test://static/x``, not
``test://static-text``; a prefix ending in ``/`` (``file:///srv/``) admits what is under it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from notary.core.canonical import CanonicalizationError, check_js_safe
from notary.core.errors import NotaryBaseError

__all__ = ["MAX_URI_CHARS", "UriError", "normalize_uri", "uri_has_prefix"]

MAX_URI_CHARS: Final = 8192
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)
_ESCAPE_RE = re.compile(r"%(.{0,2})", re.DOTALL)
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class UriError(NotaryBaseError, ValueError):
    """A value is not a URI the gateway compares (the message never quotes the value)."""


def _escapes(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        digits = m.group(1)
        if not _HEX2.fullmatch(digits):
            raise UriError("the URI has a malformed percent-escape")
        char = chr(int(digits, 16))
        if char in "/\\":
            raise UriError("the URI escapes a path separator (%2F or %5C)")
        return char if char in _UNRESERVED else "%" + digits.upper()

    return _ESCAPE_RE.sub(fix, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on whole segments."""
    absolute = path.startswith("/")
    segments = path.split("/")
    if absolute:
        segments = segments[1:]
    out: list[str] = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
            continue
        if segment == "..":
            if out:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(segment)
    text = "/".join(out)
    return "/" + text if absolute else text


def normalize_uri(value: object) -> str:
    """The normal form of a resource URI (see the module docstring); raises :class:`UriError`."""
    if not isinstance(value, str):
        raise UriError(f"a {type(value).__name__} is not a URI")
    if not value:
        raise UriError("an empty string is not a URI")
    if len(value) > MAX_URI_CHARS:
        raise UriError(f"the URI is longer than {MAX_URI_CHARS} characters")
    try:
        check_js_safe(value)
    except CanonicalizationError:
        raise UriError("the URI contains a lone surrogate") from None
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value) or "\\" in value:
        raise UriError("the URI contains whitespace, a control character or a backslash")
    if not unicodedata.is_normalized("NFC", value):
        raise UriError("the URI is not in Unicode normal form C (NFC)")
    m = _SCHEME_RE.fullmatch(value)
    if m is None:
        raise UriError("the URI has no scheme")
    scheme, rest = m.group(1).lower(), m.group(2)
    rest, hash_mark, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    authority = None
    if rest.startswith("//"):
        end = rest.find("/", 2)
        authority, rest = (rest[2:], "") if end < 0 else (rest[2:end], rest[end:])
        authority = _escapes(authority).lower()
    path = _remove_dot_segments(_escapes(rest))
    out = scheme + ":" + (f"//{authority}" if authority is not None else "") + path
    if question:
        out += "?" + _escapes(query)
    if hash_mark:
        out += "#" + _escapes(fragment)
    return out


def uri_has_prefix(uri: str, prefix: str) -> bool:
    """Whether normalized ``uri`` is ``prefix`` or below it, by whole path segments."""
    if uri == prefix:
        return True
    boundary = prefix if prefix.endswith("/") else prefix + "/"
    return uri.startswith(boundary) or uri.startswith(prefix + "?")
