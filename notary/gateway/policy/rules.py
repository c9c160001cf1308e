"""Rules: ``fact op value``, evaluated on the facts of one call (pure).

Operators:

- ``<`` ``<=`` ``>`` ``>=`` on numbers;
- ``==`` ``!=`` on any JSON value (type-strict: ``true`` is not ``1``; ``1`` is ``1.0``);
- ``in`` / ``not in`` a list of JSON values;
- ``prefix`` / ``not prefix`` a string (or a list of strings: any of them); on a ``path`` fact
  the prefix is a path and compares whole segments, so ``prefix = "/data"`` admits ``/data``
  and ``/data/x`` but not ``/database``; on a ``uri`` fact likewise by whole segments
  (:func:`~.uris.uri_has_prefix`);
- ``glob`` / ``not glob`` a glob (or a list: any of them), ``regex`` / ``not regex`` an RE2
  regular expression, both matching the whole value in linear time (:mod:`.patterns`);
- ``length`` with ``{min = M, max = N}`` (either or both): characters of a string, items of
  a list.

On a ``paths`` fact (a list of paths) the string operators must hold for every item. A rule
on an absent fact fails, whatever its operator, and so does a string operator on a value
that is not a string: the policy fails closed. A failure names the rule (from the policy),
never the value, because facts come from the caller's arguments and stay out of logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, cast

from notary.core.canonical import canonical_json
from notary.gateway.policy.patterns import MAX_MATCH_CHARS, Pattern
from notary.gateway.policy.uris import uri_has_prefix

__all__ = [
    "LENGTH",
    "MEMBERSHIP",
    "OPERATORS",
    "ORDERING",
    "PATTERN_OPS",
    "STRING_OPS",
    "Rule",
    "is_number",
    "json_equal",
    "path_has_prefix",
]

ORDERING: Final = frozenset({"<", "<=", ">=", ">"})
MEMBERSHIP: Final = frozenset({"in", "not in"})
PATTERN_OPS: Final = frozenset({"glob", "not glob", "regex", "not regex"})
STRING_OPS: Final = frozenset({"prefix", "not prefix"}) | PATTERN_OPS
LENGTH: Final = "length"
OPERATORS: Final = ("<", "<=", "==", "!=", ">=", ">", "in", "not in", "prefix", "not prefix",
                    "glob", "not glob", "regex", "not regex", "length")


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(a: object, b: object) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def path_has_prefix(path: str, prefix: str) -> bool:
    """Whether normalized ``path`` is ``prefix`` or below it, by whole segments."""
    if prefix == "/":
        return path.startswith("/")
    return path == prefix or path.startswith(prefix + "/")


@dataclass(frozen=True)
class Rule:
    """``fact op value``; :meth:`failure` says why it does not hold (None when it does).

    ``kind`` is the type of the fact (``path`` prefixes compare segments; ``paths`` facts
    apply string operators to every item); ``patterns`` are the compiled globs or regexes of
    a pattern operator, ``value`` exactly as the policy wrote it (it is what the commitment
    and :meth:`describe` show). On a path fact, prefixes, patterns and ``operand`` hold the
    value in NFC, the form every path fact is in: a deterministic function of the committed
    document, so an auditor holding it evaluates exactly what the gateway evaluated.
    """

    fact: str
    op: str
    value: object
    kind: str = "any"
    patterns: tuple[Pattern, ...] = field(default=(), compare=False, repr=False)
    prefixes: tuple[str, ...] = field(default=(), compare=False, repr=False)
    operand: object = field(default=None, compare=False, repr=False)

    @property
    def compared(self) -> object:
        """What ``==``, ``!=``, ``in`` and ``not in`` compare with: ``operand`` when set (on
        a path fact, ``value`` in NFC), else ``value`` (TOML has no null to confuse)."""
        return self.value if self.operand is None else self.operand

    def describe(self) -> str:
        return f"{self.fact} {self.op} {canonical_json(self.value).decode()}"

    def _string_holds(self, text: str) -> bool:
        if self.op in ("prefix", "not prefix"):
            if self.kind in ("path", "paths"):
                hit = any(path_has_prefix(text, p) for p in self.prefixes)
            elif self.kind == "uri":
                hit = any(uri_has_prefix(text, p) for p in self.prefixes)
            else:
                hit = len(text) <= MAX_MATCH_CHARS and any(
                    text.startswith(p) for p in self.prefixes)
        else:
            hit = any(p.matches(text) for p in self.patterns)
        return hit if not self.op.startswith("not ") else (
            not hit and len(text) <= MAX_MATCH_CHARS)

    def _holds(self, actual: object) -> bool | str:
        """True/False, or a value-free reason why the rule cannot apply to this fact."""
        op = self.op
        if op in ORDERING:
            if not is_number(actual):
                return f"{self.fact} is not a number"
            a, v = cast(float, actual), cast(float, self.value)  # ints compare exactly
            return {"<": a < v, "<=": a <= v, ">": a > v, ">=": a >= v}[op]
        if op == "==":
            return json_equal(actual, self.compared)
        if op == "!=":
            return not json_equal(actual, self.compared)
        if op in MEMBERSHIP:
            candidates = self.compared
            member = isinstance(candidates, list) and any(json_equal(actual, v)
                                                          for v in candidates)
            return member if op == "in" else not member
        if op == LENGTH:
            if not isinstance(actual, str | list):
                return f"{self.fact} is neither a string nor a list"
            n = len(actual)
            bounds = self.value if isinstance(self.value, Mapping) else {}
            low, high = bounds.get("min"), bounds.get("max")
            return ((not isinstance(low, int) or n >= low)
                    and (not isinstance(high, int) or n <= high))
        # String operators: on a string, or on every item of a list of paths.
        items = actual if self.kind == "paths" and isinstance(actual, list) else [actual]
        texts = [i for i in items if isinstance(i, str)]
        if len(texts) != len(items):
            return f"{self.fact} is not a string"
        return all(self._string_holds(t) for t in texts)

    def failure(self, facts: Mapping[str, object]) -> str | None:
        if self.fact not in facts:
            return f"rule {self.describe()}: fact {self.fact!r} is absent"
        ok = self._holds(facts[self.fact])
        if ok is True:
            return None
        if isinstance(ok, str):
            return f"rule {self.describe()}: {ok}"
        # The rule, not the value: facts come from the call's arguments, which stay out of logs.
        return f"rule {self.describe()} does not hold"
