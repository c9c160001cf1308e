"""What a URI template (RFC 6570) gives for some of its variables (pure): for completions.

A ``completion/complete`` on a resource template offers values for one variable; the gateway
offers only values a ``resources/read`` the policy allows could follow from. Expanding the
template with the values known (the one completed, and those the client sent as context)
gives either the whole URI or, at the first expression with a variable still unknown, the
text every URI from those values starts with (:func:`expand_known`).

Levels 1 to 4 of the RFC: the operators ``+ # . / ; ? &`` and the modifiers ``:N`` and ``*``
(a value here is a string, so explode changes nothing). A malformed expression stops the
expansion there, like an unknown variable: the caller judges the text before it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import quote

__all__ = ["expand_known"]

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARSPEC = re.compile(r"([A-Za-z0-9_%.]+)(?::([1-9][0-9]{0,3})|\*)?")
_RESERVED_SAFE: Final = ":/?#[]@!$&'()*+,;=%"
# operator: (first, separator, named, suffix of an empty named value, reserved kept)
_OPERATORS: Final = {
    "": ("", ",", False, "", False), "+": ("", ",", False, "", True),
    "#": ("#", ",", False, "", True), ".": (".", ".", False, "", False),
    "/": ("/", "/", False, "", False), ";": (";", ";", True, "", False),
    "?": ("?", "&", True, "=", False), "&": ("&", "&", True, "=", False),
}


def _expression(body: str, values: Mapping[str, str]) -> str | None:
    """The expansion of one ``{…}`` body, or None when a variable is unknown (or malformed)."""
    op = body[:1] if body[:1] in _OPERATORS and body[:1] != "" else ""
    first, sep, named, if_empty, reserved = _OPERATORS[op]
    parts: list[str] = []
    for spec in body[len(op):].split(","):
        m = _VARSPEC.fullmatch(spec)
        if m is None or m.group(1) not in values:
            return None
        name, value = m.group(1), values[m.group(1)]
        if m.group(2):
            value = value[:int(m.group(2))]
        text = quote(value, safe=_RESERVED_SAFE if reserved else "")
        if not named:
            parts.append(text)
        else:  # ;x=1 and ;x when empty; ?x=1 and ?x= when empty
            parts.append(f"{name}={text}" if text else name + if_empty)
    return first + sep.join(parts) if parts else ""


def expand_known(template: str, values: Mapping[str, str]) -> tuple[str, bool]:
    """(text, complete): the template expanded with ``values``, whole (``complete``), or up
    to its first expression with a variable ``values`` lacks."""
    out: list[str] = []
    at = 0
    for m in _EXPRESSION.finditer(template):
        out.append(template[at:m.start()])
        expanded = _expression(m.group(1), values)
        if expanded is None:
            return "".join(out), False
        out.append(expanded)
        at = m.end()
    rest = template[at:]
    if "{" in rest or "}" in rest:  # an unclosed expression: judged up to it
        return "".join(out) + rest[:min(i for i in (rest.find("{"), rest.find("}"))
                                         if i >= 0)], False
    return "".join(out) + rest, True
