"""String patterns for policy rules, ``glob`` and ``regex``, matched in linear time (pure).

A policy is written by an operator but judged on arguments a caller chose, so a pattern must
never let a caller make the gateway spend exponential time (the classic ``(a+)+$`` against
``aaaa…b``). Both kinds compile to RE2 (the ``google-re2`` package), whose automata match in
time linear in the input, with backreferences and lookaround refused at compile time. The
limits below bound the rest: a pattern's length, the memory RE2 may use to compile it, and
the length of a value worth matching (a longer one fails the rule: fail closed).

Both kinds match the **whole** value (as if anchored ``^…$``): an unanchored allow-list
regex is a classic hole. Globs: ``*`` is any run of characters except ``/``, ``**`` any run
including ``/`` (``**/`` also matches nothing, so ``/data/**/x`` matches ``/data/x``), ``?``
one character except ``/``, ``[abc]``, ``[a-z]`` and ``[!abc]`` a class; every other
character is literal (``\\`` escapes the next one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

import re2

from notary.core.errors import NotaryBaseError

__all__ = ["MAX_MATCH_CHARS", "MAX_PATTERN_CHARS", "Pattern", "PatternError", "compile_pattern"]

MAX_PATTERN_CHARS: Final = 1024
"""Longest glob or regex a policy may hold."""

MAX_MATCH_CHARS: Final = 65536
"""Longest value a pattern is matched against; a longer one does not match."""

_MAX_MEM: Final = 1 << 22  # bytes RE2 may use for one compiled pattern

PatternKind = Literal["glob", "regex"]


class PatternError(NotaryBaseError, ValueError):
    """A pattern that is malformed, too long, or needs more than RE2 allows."""


def glob_to_regex(glob: str) -> str:
    """The RE2 syntax of a glob (see the module docstring for the glob language)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                if glob.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[]"), i) else i + 1)
            if end < 0:
                raise PatternError(f"glob {glob!r}: '[' at {i} has no closing ']'")
            body = glob[i + 1:end]
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            if not body:
                raise PatternError(f"glob {glob!r}: empty character class at {i}")
            parts = []
            for c in body:
                parts.append("-" if c == "-" else re.escape(c))
            out.append(("[^" if negate else "[") + "".join(parts) + "]")
            i = end + 1
            continue
        elif ch == "\\":
            if i + 1 >= n:
                raise PatternError(f"glob {glob!r} ends with a lone backslash")
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


class _Compiled(Protocol):
    """What this module uses of a compiled RE2 pattern (the package has no type hints)."""

    def fullmatch(self, text: str) -> object: ...


@dataclass(frozen=True)
class Pattern:
    """A compiled glob or regex; :meth:`matches` tells whether a whole string matches."""

    kind: PatternKind
    source: str
    _compiled: _Compiled = field(repr=False, compare=False)

    def matches(self, value: str) -> bool:
        if len(value) > MAX_MATCH_CHARS:
            return False
        return self._compiled.fullmatch(value) is not None


def compile_pattern(kind: PatternKind, source: str) -> Pattern:
    """Compile a ``glob`` or ``regex`` for whole-value matching; raises :class:`PatternError`."""
    if not isinstance(source, str) or not source:
        raise PatternError(f"a {kind} must be a non-empty string")
    if len(source) > MAX_PATTERN_CHARS:
        raise PatternError(f"a {kind} is at most {MAX_PATTERN_CHARS} characters")
    regex = glob_to_regex(source) if kind == "glob" else source
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False
    try:
        compiled = re2.compile(regex, options)
    except Exception as e:  # re2 raises its own error type (and TypeError on odd input)
        detail = e.args[0].decode("utf-8", "replace") if e.args and isinstance(
            e.args[0], bytes) else str(e)
        raise PatternError(f"{kind} {source!r} is not valid RE2 syntax: {detail} "
                           "(backreferences and lookaround are not supported)") from None
    return Pattern(kind, source, compiled)
