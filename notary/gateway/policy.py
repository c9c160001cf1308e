"""Gateway policies: the TOML format, authorization facts, decisions, commitments (pure).

A policy says, per tool, which **authorization facts** are extracted from a call's arguments
and which **rules** those facts must satisfy. Everything here is a pure function of its
inputs (no I/O, no clock, no randomness): the gateway evaluates it before any upstream call,
and an auditor handed the same policy, salt and facts later re-evaluates it and must reach
the same decision. That is why evaluation takes the *facts* (not the arguments): the saved
facts are what the decision log keeps, and their digest is what the ledger commits to.

File format (``examples/gateway-policy.toml`` is a commented example)::

    version = 1                         # format version (required, 1)

    [gateway]
    name = "payments-gateway"           # server name on ledger entries (optional)
    agent = "LegalAgent"                # the agent fact, when the operator fixes it (optional)

    [tools."payments.transfer"]
    idempotent = false                  # needs an idempotency key (default true)
    facts.amount = { from = "amount", type = "integer" }
    facts.approved = { from = "approval.approved", type = "boolean", default = false }
    facts.recipient = "recipient"       # shorthand: type "any", no default
    rules = [
      { fact = "amount", op = "<=", value = 5000 },
      { fact = "agent", op = "in", value = ["LegalAgent", "OpsAgent"] },
      { fact = "approved", op = "==", value = true },
    ]

Facts: ``agent`` and ``tool`` are context facts (reserved names; ``agent`` may be absent); the
others come from argument paths (``a.b.0.c``: object keys, and list indexes for lists; a list
of segments ``["a.b", "c"]`` for keys that contain dots), coerced to ``integer``, ``number``,
``string``, ``boolean`` or ``any`` (see :func:`coerce`). A missing argument takes ``default``
when one is given; otherwise, as after a failed coercion, the fact is **absent**. Rules (all
must hold): ``<`` ``<=`` ``>`` ``>=`` on numbers, ``==`` ``!=`` on any JSON value (type-strict:
``true`` is not ``1``), ``in`` / ``not in`` a list. A rule on an absent fact fails, whatever its
operator: the policy fails closed. A tool that is not listed is denied.

Commitment: ``SHA-256(JCS({"policy": <the TOML document as JSON>, "salt": <hex salt>}))``:
comments and layout do not change it, any value does; the salt keeps a small policy from
being guessed from its digest until the operator reveals it.
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Final, Literal

from notary.core.canonical import (
    MAX_SAFE_INTEGER,
    CanonicalizationError,
    canonical_json,
    check_js_safe,
)

__all__ = [
    "CONTEXT_FACTS",
    "FACT_TYPES",
    "OPERATORS",
    "POLICY_FORMAT",
    "CoercionError",
    "Decision",
    "FactSpec",
    "FieldReport",
    "Policy",
    "PolicyError",
    "Rule",
    "ToolExplanation",
    "ToolPolicy",
    "coerce",
    "decision_record",
    "explain",
    "facts_sha256",
    "load_policy_text",
    "parse_policy",
    "policy_commitment",
    "render_explanation",
    "schema_fields",
    "sha256_jcs",
]

POLICY_FORMAT: Final = 1
CONTEXT_FACTS: Final = ("agent", "tool")
FACT_TYPES: Final = ("integer", "number", "string", "boolean", "any")
OPERATORS: Final = ("<", "<=", "==", "!=", ">=", ">", "in", "not in")
_ORDERING = frozenset({"<", "<=", ">=", ">"})
_MEMBERSHIP = frozenset({"in", "not in"})

FactType = Literal["integer", "number", "string", "boolean", "any"]
DecisionValue = Literal["allow", "deny"]

_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_TOP_KEYS = frozenset({"version", "gateway", "tools"})
_GATEWAY_KEYS = frozenset({"name", "agent"})
_TOOL_KEYS = frozenset({"description", "idempotent", "facts", "rules"})
_FACT_KEYS = frozenset({"from", "type", "default"})
_RULE_KEYS = frozenset({"fact", "op", "value"})
_FACT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


class PolicyError(ValueError):
    """A policy file is malformed; ``path`` names the offending member (``tools.x.rules[0]``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


def sha256_jcs(value: object) -> str:
    """Lower-case hex SHA-256 of the RFC 8785 canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def policy_commitment(document: Mapping[str, Any], salt_hex: str) -> str:
    """The salted commitment to a policy document (see the module docstring)."""
    return sha256_jcs({"policy": dict(document), "salt": salt_hex})


def facts_sha256(facts: Mapping[str, Any]) -> str:
    """The digest of a set of authorization facts (JCS, SHA-256, lower-case hex)."""
    return sha256_jcs(dict(facts))


def decision_record(decision: DecisionValue, tool: str, facts_digest: str,
                    commitment: str, when: str) -> dict[str, str]:
    """The record notarized for one decision: its SHA-256 (JCS) is the entry's call_sha256."""
    return {"decision": decision, "tool": tool, "facts_sha256": facts_digest,
            "policy_commitment": commitment, "time": when}


# ---------------------------------------------------------------------------------------------
# Facts


class CoercionError(ValueError):
    """An argument value cannot be turned into the fact's type."""


def _js_int(n: int) -> int:
    if not -MAX_SAFE_INTEGER <= n <= MAX_SAFE_INTEGER:
        raise CoercionError("the integer is beyond ±(2^53−1)")
    return n


def coerce(value: object, kind: FactType) -> object:
    """``value`` as a fact of type ``kind``; raises :class:`CoercionError`.

    - ``integer``: an integer; a float with an integral value; a string of decimal digits
      (``"2750"``). Never a boolean. Within ±(2^53−1), like every number JavaScript agrees on.
    - ``number``: an integer or finite float, or a string in JSON number syntax.
    - ``string``: a string only (numbers are not silently turned into text).
    - ``boolean``: a boolean, or the strings ``"true"`` / ``"false"``.
    - ``any``: any JSON value that canonicalizes (checked, not changed).
    """
    if kind == "integer":
        if isinstance(value, bool):
            raise CoercionError("a boolean is not an integer")
        if isinstance(value, int):
            return _js_int(value)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return _js_int(int(value))
        if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
            return _js_int(int(value.strip()))
        raise CoercionError(f"{type(value).__name__} value is not an integer")
    if kind == "number":
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
        raise CoercionError(f"{type(value).__name__} value is not a number")
    if kind == "string":
        if isinstance(value, str):
            return value
        raise CoercionError(f"{type(value).__name__} value is not a string")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip() in ("true", "false"):
            return value.strip() == "true"
        raise CoercionError(f"{type(value).__name__} value is not a boolean")
    try:
        check_js_safe(value)
    except CanonicalizationError as e:
        raise CoercionError(str(e)) from None
    return value


_MISSING: Final = object()


def _lookup(arguments: object, path: Sequence[str]) -> object:
    """The value at ``path`` in ``arguments``, or ``_MISSING``."""
    current = arguments
    for segment in path:
        if isinstance(current, Mapping):
            if segment not in current:
                return _MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


@dataclass(frozen=True)
class FactSpec:
    """One fact read from the arguments: ``name`` ← ``path`` (segments), coerced to ``type``."""

    name: str
    path: tuple[str, ...]
    type: FactType = "any"
    default: object = _MISSING

    @property
    def source(self) -> str:
        """The argument path as the explain output prints it (``approval.approved``)."""
        return ".".join(self.path)

    def extract(self, arguments: Mapping[str, Any]) -> tuple[object, str | None]:
        """(value or ``_MISSING``, problem for the operator's log or None)."""
        raw = _lookup(arguments, self.path)
        if raw is _MISSING:
            if self.default is not _MISSING:
                return self.default, None
            return _MISSING, f"fact {self.name!r}: argument {self.source!r} is absent"
        try:
            return coerce(raw, self.type), None
        except CoercionError as e:
            return _MISSING, f"fact {self.name!r}: argument {self.source!r}: {e}"


# ---------------------------------------------------------------------------------------------
# Rules


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: object, b: object) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Rule:
    """``fact op value``; :meth:`failure` says why it does not hold (None when it does)."""

    fact: str
    op: str
    value: Any

    def describe(self) -> str:
        return f"{self.fact} {self.op} {canonical_json(self.value).decode()}"

    def failure(self, facts: Mapping[str, Any]) -> str | None:
        if self.fact not in facts:
            return f"rule {self.describe()}: fact {self.fact!r} is absent"
        actual = facts[self.fact]
        if self.op in _ORDERING:
            if not _is_number(actual):
                return f"rule {self.describe()}: {self.fact} is not a number"
            ok = {"<": actual < self.value, "<=": actual <= self.value,
                  ">": actual > self.value, ">=": actual >= self.value}[self.op]
        elif self.op == "==":
            ok = _json_equal(actual, self.value)
        elif self.op == "!=":
            ok = not _json_equal(actual, self.value)
        else:
            member = any(_json_equal(actual, v) for v in self.value)
            ok = member if self.op == "in" else not member
        if ok:
            return None
        # The rule, not the value: facts come from the call's arguments, which stay out of logs.
        return f"rule {self.describe()} does not hold"


# ---------------------------------------------------------------------------------------------
# Policies


@dataclass(frozen=True)
class ToolPolicy:
    """The facts and rules of one tool; ``idempotent = false`` needs an idempotency key."""

    name: str
    facts: tuple[FactSpec, ...] = ()
    rules: tuple[Rule, ...] = ()
    idempotent: bool = True
    description: str = ""

    def constrained_facts(self) -> set[str]:
        return {r.fact for r in self.rules}


@dataclass(frozen=True)
class Decision:
    """The outcome of evaluating one call: ``reasons`` are for the operator's log only."""

    allowed: bool
    tool: str
    facts: dict[str, Any]
    facts_sha256: str
    reasons: tuple[str, ...] = ()

    @property
    def value(self) -> DecisionValue:
        return "allow" if self.allowed else "deny"


@dataclass(frozen=True)
class Policy:
    """A parsed policy; ``document`` is the JSON form the commitment is computed over."""

    document: dict[str, Any]
    tools: dict[str, ToolPolicy]
    name: str | None = None
    agent: str | None = None

    def commitment(self, salt_hex: str) -> str:
        return policy_commitment(self.document, salt_hex)

    def facts_for(self, tool: str, arguments: Mapping[str, Any] | None, agent: str | None
                  ) -> tuple[dict[str, Any], list[str]]:
        """The authorization facts of a call, and the extraction problems (operator log).

        Context facts first (``tool``; ``agent`` when known), then the tool's mapped facts.
        An unknown tool has only the context facts.
        """
        facts: dict[str, Any] = {"tool": tool}
        if agent is not None:
            facts["agent"] = agent
        problems: list[str] = []
        spec = self.tools.get(tool)
        if spec is None:
            return facts, problems
        args: Mapping[str, Any] = arguments if isinstance(arguments, Mapping) else {}
        for fact in spec.facts:
            value, problem = fact.extract(args)
            if problem is not None:
                problems.append(problem)
            if value is not _MISSING:
                facts[fact.name] = value
        return facts, problems

    def evaluate(self, tool: str, facts: Mapping[str, Any]) -> tuple[bool, list[str]]:
        """Whether ``facts`` satisfy the policy of ``tool``; the failed rules (operator log).

        A pure function of (policy, tool, facts), so an auditor holding the saved facts
        reaches the same answer. Unknown tools, and facts whose ``tool`` is another tool,
        are denied.
        """
        spec = self.tools.get(tool)
        if spec is None:
            return False, [f"tool {tool!r} is not in the policy"]
        if facts.get("tool") != tool:
            return False, ["the facts are for another tool"]
        failures = [f for r in spec.rules if (f := r.failure(facts)) is not None]
        return not failures, failures

    def decide(self, tool: str, arguments: Mapping[str, Any] | None, agent: str | None
               ) -> Decision:
        """Extract the facts of a call and evaluate them. Never raises for bad arguments."""
        facts, problems = self.facts_for(tool, arguments, agent)
        allowed, failures = self.evaluate(tool, facts)
        return Decision(allowed, tool, facts, facts_sha256(facts), (*problems, *failures))


def _to_json(value: object, path: str) -> object:
    """TOML values as JSON: dates and times have no JSON form and are refused."""
    if isinstance(value, datetime | date | time):
        raise PolicyError(path, "dates and times are not allowed (they have no JSON form)")
    if isinstance(value, float) and not math.isfinite(value):
        raise PolicyError(path, "NaN and infinities are not allowed")
    if isinstance(value, dict):
        return {k: _to_json(v, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise PolicyError(path, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise PolicyError(f"{path}.{key}", "must be a non-empty string")
    return value


def _parse_path(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        segments = tuple(value.split("."))
    elif isinstance(value, list) and value and all(isinstance(s, str) for s in value):
        segments = tuple(value)
    else:
        raise PolicyError(where, "must be an argument path: \"a.b.0\" or a list of segments")
    if not segments or any(not s for s in segments):
        raise PolicyError(where, f"{value!r} has an empty segment")
    return segments


def _parse_fact(name: str, raw: object, where: str) -> FactSpec:
    if name in CONTEXT_FACTS:
        raise PolicyError(where, f"{name!r} is a context fact and cannot come from the "
                          "arguments (a caller could set it)")
    if not _FACT_NAME_RE.fullmatch(name):
        raise PolicyError(where, "fact names are 1-64 characters: letters, digits, _ . -")
    if isinstance(raw, str | list):
        return FactSpec(name, _parse_path(raw, where))
    if not isinstance(raw, Mapping):
        raise PolicyError(where, "must be an argument path or a table {from, type, default}")
    _check_keys(raw, _FACT_KEYS, where)
    if "from" not in raw:
        raise PolicyError(where, "needs 'from' (the argument path)")
    kind = raw.get("type", "any")
    if kind not in FACT_TYPES:
        raise PolicyError(f"{where}.type", f"must be one of {list(FACT_TYPES)}")
    default: object = _MISSING
    if "default" in raw:
        try:
            default = coerce(raw["default"], kind)
        except CoercionError as e:
            raise PolicyError(f"{where}.default", f"does not fit type {kind!r}: {e}") from None
    return FactSpec(name, _parse_path(raw["from"], f"{where}.from"), kind, default)


def _parse_rule(raw: object, where: str, fact_types: Mapping[str, str]) -> Rule:
    if not isinstance(raw, Mapping):
        raise PolicyError(where, "a rule is a table {fact, op, value}")
    _check_keys(raw, _RULE_KEYS, where)
    for key in ("fact", "op", "value"):
        if key not in raw:
            raise PolicyError(where, f"needs {key!r}")
    fact, op, value = raw["fact"], raw["op"], raw["value"]
    if not isinstance(fact, str) or fact not in fact_types:
        raise PolicyError(f"{where}.fact", f"{fact!r} is not a fact of this tool (facts: "
                          f"{sorted(fact_types)})")
    if op not in OPERATORS:
        raise PolicyError(f"{where}.op", f"{op!r} is not one of {list(OPERATORS)}")
    kind = fact_types[fact]
    if op in _ORDERING:
        if not _is_number(value):
            raise PolicyError(f"{where}.value", f"{op} compares numbers; {value!r} is not one")
        if kind not in ("integer", "number", "any"):
            raise PolicyError(where, f"{op} needs a numeric fact; {fact!r} is {kind}")
    elif op in _MEMBERSHIP and not isinstance(value, list):
        raise PolicyError(f"{where}.value", f"'{op}' needs a list")
    return Rule(fact, op, value)


def parse_policy(document: Mapping[str, Any]) -> Policy:
    """Validate a policy document (the parsed TOML) strictly; raises :class:`PolicyError`.

    Unknown keys are refused everywhere: a typo (``rule`` for ``rules``) would otherwise
    silently leave a tool unconstrained.
    """
    doc = _to_json(dict(document), "")
    assert isinstance(doc, dict)
    _check_keys(doc, _TOP_KEYS, "")
    if doc.get("version") != POLICY_FORMAT:
        raise PolicyError("version", f"must be {POLICY_FORMAT} (the policy format version)")
    gateway = doc.get("gateway", {})
    if not isinstance(gateway, Mapping):
        raise PolicyError("gateway", "must be a table")
    _check_keys(gateway, _GATEWAY_KEYS, "gateway")
    name = _optional_str(gateway, "name", "gateway")
    agent = _optional_str(gateway, "agent", "gateway")
    tools_doc = doc.get("tools", {})
    if not isinstance(tools_doc, Mapping):
        raise PolicyError("tools", "must be a table of tools")
    tools: dict[str, ToolPolicy] = {}
    for tool, raw in tools_doc.items():
        where = f"tools.{tool}"
        if not isinstance(raw, Mapping):
            raise PolicyError(where, "must be a table")
        _check_keys(raw, _TOOL_KEYS, where)
        idempotent = raw.get("idempotent", True)
        if not isinstance(idempotent, bool):
            raise PolicyError(f"{where}.idempotent", "must be true or false")
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise PolicyError(f"{where}.description", "must be a string")
        facts_doc = raw.get("facts", {})
        if not isinstance(facts_doc, Mapping):
            raise PolicyError(f"{where}.facts", "must be a table of facts")
        facts = tuple(_parse_fact(n, v, f"{where}.facts.{n}") for n, v in facts_doc.items())
        fact_types: dict[str, str] = {"tool": "string", "agent": "string"}
        fact_types.update({f.name: f.type for f in facts})
        rules_doc = raw.get("rules", [])
        if not isinstance(rules_doc, list):
            raise PolicyError(f"{where}.rules", "must be a list of rules")
        rules = tuple(_parse_rule(r, f"{where}.rules[{i}]", fact_types)
                      for i, r in enumerate(rules_doc))
        try:
            canonical_json(raw)
        except CanonicalizationError as e:
            raise PolicyError(where, str(e)) from None
        tools[tool] = ToolPolicy(tool, facts, rules, idempotent, description)
    try:
        canonical_json(doc)
    except CanonicalizationError as e:
        raise PolicyError("", f"the policy cannot be canonicalized: {e}") from None
    return Policy(doc, tools, name, agent)


def load_policy_text(text: str) -> Policy:
    """Parse TOML text into a :class:`Policy`; TOML syntax errors become PolicyError."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError("", f"not valid TOML: {e}") from None
    return parse_policy(document)


# ---------------------------------------------------------------------------------------------
# Explain


@dataclass(frozen=True)
class FieldReport:
    """One argument field: ``status`` is constrained / partly constrained / extracted /
    unconstrained; ``facts`` the facts reading it and ``rules`` the rules that judge them."""

    path: str
    status: str
    facts: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolExplanation:
    tool: str
    in_policy: bool
    offered: bool | None
    idempotent: bool
    fields: tuple[FieldReport, ...] = ()
    context_rules: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "in_policy": self.in_policy, "offered_by_upstream": self.offered,
            "idempotent": self.idempotent,
            "fields": [{"path": f.path, "status": f.status, "facts": list(f.facts),
                        "rules": list(f.rules)} for f in self.fields],
            "context_rules": list(self.context_rules), "notes": list(self.notes),
        }


def schema_fields(schema: Mapping[str, Any] | None) -> list[str]:
    """Leaf argument paths of an input schema: nested object properties, dotted.

    Arrays, combinators (``anyOf``...) and ``$ref`` count as leaves: the explanation is
    about which part of the payload a fact reads, and a fact reading inside such a field
    makes it "partly constrained".
    """
    out: list[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        props = node.get("properties")
        if not isinstance(props, Mapping) or not props:
            if prefix:
                out.append(prefix)
            return
        for key, sub in props.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(sub, Mapping):
                walk(sub, path)
            else:
                out.append(path)

    if isinstance(schema, Mapping):
        walk(schema, "")
    return out


def _explain_tool(spec: ToolPolicy | None, tool: str, schema: Mapping[str, Any] | None,
                  offered: bool | None) -> ToolExplanation:
    if spec is None:
        fields = tuple(FieldReport(p, "denied") for p in schema_fields(schema))
        return ToolExplanation(tool, False, offered, True, fields,
                               notes=("not in the policy: every call is denied",))
    rules_by_fact: dict[str, list[str]] = {}
    for rule in spec.rules:
        rules_by_fact.setdefault(rule.fact, []).append(rule.describe())
    by_path: dict[str, list[FactSpec]] = {}
    for fact in spec.facts:
        by_path.setdefault(fact.source, []).append(fact)
    paths = list(dict.fromkeys([*schema_fields(schema), *by_path]))
    reports = []
    for path in paths:
        exact = [f for p, fs in by_path.items() for f in fs
                 if p == path or path.startswith(p + ".")]
        inner = [f for p, fs in by_path.items() for f in fs if p.startswith(path + ".")]
        readers = exact + inner
        rules = tuple(r for f in readers for r in rules_by_fact.get(f.name, ()))
        if any(f.name in rules_by_fact for f in exact):
            status = "constrained"
        elif any(f.name in rules_by_fact for f in inner):
            status = "partly constrained"
        elif readers:
            status = "extracted, not constrained"
        else:
            status = "unconstrained"
        reports.append(FieldReport(path, status, tuple(f.name for f in readers), rules))
    context = tuple(r for fact in CONTEXT_FACTS for r in rules_by_fact.get(fact, ()))
    notes: list[str] = []
    if not spec.rules:
        notes.append("no rules: every call is allowed")
    if offered is False:
        notes.append("not offered by the upstream")
    if not spec.idempotent:
        notes.append("non-idempotent: calls need an idempotency key")
    return ToolExplanation(tool, True, offered, spec.idempotent, tuple(reports), context,
                           tuple(notes))


def explain(policy: Policy, input_schemas: Mapping[str, Mapping[str, Any] | None] | None = None
            ) -> list[ToolExplanation]:
    """Per tool, which argument fields the policy constrains and which pass unconstrained.

    ``input_schemas`` (tool → input schema, from the upstream's ``tools/list``) adds the
    fields nobody constrains and the upstream's tools the policy does not list; without it
    only the fields the policy itself reads are known.
    """
    names = list(policy.tools)
    if input_schemas is not None:
        names += [n for n in input_schemas if n not in policy.tools]
    out = []
    for name in names:
        schema = input_schemas.get(name) if input_schemas is not None else None
        offered = None if input_schemas is None else name in input_schemas
        out.append(_explain_tool(policy.tools.get(name), name, schema, offered))
    return out


def render_explanation(items: Sequence[ToolExplanation], *, with_upstream: bool) -> str:
    """The human-readable form of :func:`explain`."""
    lines: list[str] = []
    if not with_upstream:
        lines += ["(only the fields the policy reads are listed; pass --upstream to list every "
                  "argument field and the upstream's tools)", ""]
    for item in items:
        head = f"{item.tool}"
        if not item.in_policy:
            head += "  [DENIED: not in the policy]"
        elif not item.idempotent:
            head += "  [non-idempotent]"
        lines.append(head)
        width = max((len(f.path) for f in item.fields), default=0)
        for f in item.fields:
            detail = ""
            if f.facts and f.status != "denied":
                detail = f"  (fact {', '.join(f.facts)}"
                detail += f"; {'; '.join(f.rules)})" if f.rules else ")"
            lines.append(f"  {f.path:<{width}}  {f.status}{detail}")
        for rule in item.context_rules:
            lines.append(f"  context rule: {rule}")
        for note in item.notes:
            lines.append(f"  note: {note}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
