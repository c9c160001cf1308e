"""The ``uri`` fact: a resource URI in the one normal form every resource rule sees (pure).

MCP names resources by URI (``file:///srv/a.txt``, ``test://template/7/data``); a rule
written for one spelling must hold for every spelling that names the same resource, and a
spelling the gateway cannot compare safely is refused (the fact is then absent, and every
rule on it fails: fail closed). The same function puts the policy's own rule values in
normal form, so a rule written with escapes or ``file://localhost/`` means the same. The
normal form, after RFC 3986 section 6.2.2 and RFC 3987 section 3.2:

- the scheme (required) and the authority are lower-cased;
- percent-escapes of unreserved characters are decoded (``%7E`` is ``~``, ``%2E`` is ``.``),
  and so are escaped UTF-8 sequences (``%C3%A9`` is ``é``: the IRI spelling of the same
  URI); other escapes are written with upper-case hex digits;
- in a ``file:`` URI every escape of the path is decoded, because a file server turns the
  path into a file name that way (Node's ``fileURLToPath``, Python's ``unquote``):
  ``team%40corp`` is ``team@corp``. Only ``%``, ``?``, ``#`` and white space stay escaped
  (they would otherwise change how the normal form itself is read). ``file://localhost/x``
  and ``file:/x`` are ``file:///x``, and repeated slashes in the path are one (as the file
  system reads them); another authority (``file://server/share``, a remote file) and an
  empty first segment (``file:////server/share``, a UNC path) are refused;
- ``.`` and ``..`` path segments are removed (section 5.2.4), so ``test://x/a/../b`` is
  ``test://x/b`` and a ``..`` never climbs above the root;
- the decoded URI must be in Unicode normal form C, like paths
  (:func:`~.facts.normalize_path`): a decomposed name may be another file on the upstream's
  file system, so it is refused rather than mapped.

Refused: a non-string, the empty string, whitespace or control characters, a backslash, an
escaped ``/``, ``\\`` or control character (``%2F``, ``%5C``, ``%00``: a server that decodes
them before resolving the path would see segments the rules never saw), a malformed escape,
escaped bytes that are not UTF-8, lone surrogates, and URIs over :data:`MAX_URI_CHARS`
characters.

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
_ESCAPES_RE = re.compile(r"(?:%.{0,2})+", re.DOTALL)
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_FILE_KEPT = frozenset("%?#")
"""Characters a decoded ``file:`` path keeps escaped: they would end the path or start an
escape in the normal form."""
_SLASHES = re.compile(r"/{2,}")


class UriError(NotaryBaseError, ValueError):
    """A value is not a URI the gateway compares (the message never quotes the value)."""


def _escape(char: str) -> str:
    return "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def _decoded(char: str, everything: bool) -> str:
    """One decoded character as it stands in the normal form (decoded, or re-escaped)."""
    if char in "/\\":
        raise UriError("the URI escapes a path separator (%2F or %5C)")
    if unicodedata.category(char) == "Cc":
        raise UriError("the URI escapes a control character")
    if char.isspace():
        return _escape(char)
    if everything:
        return _escape(char) if char in _FILE_KEPT else char
    return char if char in _UNRESERVED or ord(char) > 0x7F else _escape(char)


def _unescape(text: str, everything: bool = False) -> str:
    """``text`` with its escapes decoded: all of them (a ``file:`` path) or the unreserved
    and UTF-8 ones; every run of escapes must be whole and decode as UTF-8."""

    def run(m: re.Match[str]) -> str:
        parts = m.group(0).split("%")[1:]
        if not all(_HEX2.fullmatch(p) for p in parts):
            raise UriError("the URI has a malformed percent-escape")
        try:
            chars = bytes(int(p, 16) for p in parts).decode("utf-8")
        except UnicodeDecodeError:
            raise UriError("the URI escapes bytes that are not UTF-8") from None
        return "".join(_decoded(c, everything) for c in chars)

    return _ESCAPES_RE.sub(run, text)


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


def _file_path(authority: str | None, path: str) -> str:
    """The decoded path of a ``file:`` URI on this host, or :class:`UriError`."""
    if authority not in (None, "", "localhost"):
        raise UriError("a file: URI names another host (only none or localhost is judged)")
    if not path.startswith("/"):
        raise UriError("a file: URI needs an absolute path")
    if path.startswith("//"):
        raise UriError("a file: URI with an empty first segment (a UNC path) is refused")
    return _SLASHES.sub("/", _unescape(path, everything=True))


def _lower_outside_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}|[^%]+",
                  lambda m: m.group(0) if m.group(0).startswith("%") else m.group(0).lower(),
                  text)


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
        authority = _lower_outside_escapes(_unescape(authority))
    if scheme == "file":
        authority, path = "", _file_path(authority, rest)
    else:
        path = _unescape(rest)
    out = (scheme + ":" + (f"//{authority}" if authority is not None else "")
           + _remove_dot_segments(path))
    if question:
        out += "?" + _unescape(query)
    if hash_mark:
        out += "#" + _unescape(fragment)
    if not unicodedata.is_normalized("NFC", out):
        raise UriError("the URI is not in Unicode normal form C (NFC) once decoded")
    return out


def uri_has_prefix(uri: str, prefix: str) -> bool:
    """Whether normalized ``uri`` is ``prefix`` or below it, by whole path segments."""
    if uri == prefix:
        return True
    boundary = prefix if prefix.endswith("/") else prefix + "/"
    return uri.startswith(boundary) or uri.startswith(prefix + "?")
