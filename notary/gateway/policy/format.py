"""The policy file: TOML, version 1, parsed strictly into a :class:`Policy` (pure).

File format (``examples/gateway-policy.toml`` and ``examples/gateway-filesystem.toml`` are
commented examples)::

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

    [tools.read_file]
    facts.path = { from = "path", type = "path" }
    rules = [{ fact = "path", op = "prefix", value = "/srv/data" },
             { fact = "path", op = "not glob", value = "**/.*" }]

    [prompts.summarize]                 # prompts/get, like a tool (facts from its arguments)
    facts.style = { from = "style", type = "string" }
    rules = [{ fact = "style", op = "in", value = ["short", "long"] }]

    [resources]                         # every resource method, by URI (type "uri")
    rules = [{ fact = "uri", op = "prefix", value = "file:///srv/data/" }]

Facts: ``agent`` and ``tool`` are context facts (reserved names; ``agent`` may be absent); the
others come from argument paths (``a.b.0.c``: object keys, and list indexes for lists; a list
of segments ``["a.b", "c"]`` for keys that contain dots), coerced to a type of
:mod:`.facts`. A missing argument takes ``default`` when one is given; otherwise, as after a
failed coercion, the fact is **absent**. Rules (all must hold) use the operators of
:mod:`.rules`; a rule on an absent fact fails: the policy fails closed. A tool that is not
listed is denied, and so is a prompt. Prompts have the context facts ``prompt`` and
``agent``. Resources (``resources/read``, ``resources/subscribe``, ``resources/unsubscribe``
and the completion of a template argument) are judged by the one ``[resources]`` table, on
the context facts ``uri`` (type ``uri``: :mod:`.uris`), ``method`` and ``agent``; a
``[resources]`` table without rules allows every resource, and a policy without one denies
them all (a policy written before resources were proxied means what it meant). Unknown
keys are refused everywhere, so a typo cannot silently leave a tool unconstrained.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Final

from notary.core.canonical import CanonicalizationError, canonical_json
from notary.core.errors import NotaryBaseError
from notary.gateway.policy.evaluation import Policy, ToolPolicy
from notary.gateway.policy.facts import (
    CONTEXT_FACTS,
    FACT_TYPES,
    MISSING,
    CoercionError,
    FactSpec,
    FactType,
    coerce,
    nfc,
    normalize_path,
)
from notary.gateway.policy.patterns import Pattern, PatternError, PatternKind, compile_pattern
from notary.gateway.policy.rules import (
    LENGTH,
    MEMBERSHIP,
    OPERATORS,
    ORDERING,
    PATTERN_OPS,
    STRING_OPS,
    Rule,
    is_number,
)
from notary.gateway.policy.uris import UriError, normalize_uri

__all__ = ["POLICY_FORMAT", "PolicyError", "load_policy_text", "parse_policy"]

POLICY_FORMAT: Final = 1
_TOP_KEYS = frozenset({"version", "gateway", "tools", "prompts", "resources"})
_GATEWAY_KEYS = frozenset({"name", "agent"})
_TOOL_KEYS = frozenset({"description", "idempotent", "facts", "rules"})
_PROMPT_KEYS = frozenset({"description", "facts", "rules"})
_RESOURCE_KEYS = frozenset({"description", "rules"})
_FACT_KEYS = frozenset({"from", "type", "default"})
_RULE_KEYS = frozenset({"fact", "op", "value"})
_LENGTH_KEYS = frozenset({"min", "max"})
_FACT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_STRING_KINDS = frozenset({"string", "path", "paths", "uri", "any"})


class PolicyError(NotaryBaseError, ValueError):
    """A policy file is malformed; ``path`` names the offending member (``tools.x.rules[0]``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


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


def _check_keys(obj: Mapping[str, object], allowed: frozenset[str], path: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise PolicyError(path, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _optional_str(obj: Mapping[str, object], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
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


def _parse_fact(name: str, raw: object, where: str,
                context: tuple[str, ...] = CONTEXT_FACTS) -> FactSpec:
    if name in context:
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
    default: object = MISSING
    if "default" in raw:
        written = raw["default"]
        if kind in ("path", "paths"):  # the operator's value, put in NFC like rule values
            written = _nfc_strings(written)
        try:
            default = coerce(written, kind)
        except CoercionError as e:
            raise PolicyError(f"{where}.default", f"does not fit type {kind!r}: {e}") from None
    return FactSpec(name, _parse_path(raw["from"], f"{where}.from"), kind, default)


def _strings(value: object, where: str, op: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise PolicyError(f"{where}.value", f"'{op}' needs a non-empty string or a non-empty "
                          "list of them")
    return tuple(str(v) for v in items)


def _length_bounds(value: object, where: str) -> None:
    if not isinstance(value, Mapping) or not value:
        raise PolicyError(f"{where}.value", "'length' needs a table {min = M, max = N}")
    _check_keys(value, _LENGTH_KEYS, f"{where}.value")
    for key, bound in value.items():
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
            raise PolicyError(f"{where}.value.{key}", "must be a non-negative integer")
    if "min" in value and "max" in value and value["min"] > value["max"]:
        raise PolicyError(f"{where}.value", "min is greater than max")


def _parse_rule(raw: object, where: str, fact_types: Mapping[str, str]) -> Rule:
    """One rule: its shape, then its operand checked (and prepared) for its operator."""
    fact, op, value, kind = _rule_fields(raw, where, fact_types)
    if op in ORDERING:
        return _ordering_rule(fact, op, value, kind, where)
    if op in MEMBERSHIP and not isinstance(value, list):
        raise PolicyError(f"{where}.value", f"'{op}' needs a list")
    if op == LENGTH:
        return _length_rule(fact, op, value, kind, where)
    if op in STRING_OPS:
        return _string_rule(fact, op, value, kind, where)
    if kind in ("path", "paths"):  # ==, !=, in, not in: path strings compared in NFC
        return Rule(fact, op, value, kind, operand=_nfc_strings(value))
    if kind == "uri":  # ==, !=, in, not in: URIs compared in their normal form
        return Rule(fact, op, value, kind, operand=_normal_uris(value, where))
    return Rule(fact, op, value, kind)


def _rule_fields(raw: object, where: str, fact_types: Mapping[str, str]
                 ) -> tuple[str, str, object, str]:
    """A rule's fact (one of this entry's), operator and operand, and the fact's type."""
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
    return fact, op, value, fact_types[fact]


def _ordering_rule(fact: str, op: str, value: object, kind: str, where: str) -> Rule:
    if not is_number(value):
        raise PolicyError(f"{where}.value", f"{op} compares numbers; {value!r} is not one")
    if kind not in ("integer", "number", "any"):
        raise PolicyError(where, f"{op} needs a numeric fact; {fact!r} is {kind}")
    return Rule(fact, op, value, kind)


def _length_rule(fact: str, op: str, value: object, kind: str, where: str) -> Rule:
    if kind not in ("string", "path", "paths", "uri", "any"):
        raise PolicyError(where, f"'length' needs a string or list fact; {fact!r} is {kind}")
    _length_bounds(value, where)
    return Rule(fact, op, value, kind)


def _string_rule(fact: str, op: str, value: object, kind: str, where: str) -> Rule:
    """A prefix or pattern rule: patterns compiled, prefixes in the fact's normal form."""
    if kind not in _STRING_KINDS:
        raise PolicyError(where, f"'{op}' needs a string or path fact; {fact!r} is {kind}")
    items = _strings(value, where, op)
    if kind in ("path", "paths"):  # compared in NFC, the only form a path fact takes
        items = tuple(nfc(i) for i in items)
    if op in PATTERN_OPS:
        return Rule(fact, op, value, kind, patterns=_patterns(op, items, where))
    if kind == "uri":
        try:
            prefixes = tuple(normalize_uri(p) for p in items)
        except UriError as e:
            raise PolicyError(f"{where}.value", str(e)) from None
        return Rule(fact, op, value, kind, prefixes=prefixes)
    if kind in ("path", "paths"):
        return Rule(fact, op, value, kind, prefixes=_path_prefixes(items, where))
    return Rule(fact, op, value, kind, prefixes=items)


def _patterns(op: str, items: tuple[str, ...], where: str) -> tuple[Pattern, ...]:
    pattern_kind: PatternKind = "glob" if op.endswith("glob") else "regex"
    if pattern_kind == "regex" and len(items) != 1:
        raise PolicyError(f"{where}.value", "'regex' takes one pattern (use | inside)")
    try:
        return tuple(compile_pattern(pattern_kind, p) for p in items)
    except PatternError as e:
        raise PolicyError(f"{where}.value", str(e)) from None


def _path_prefixes(items: tuple[str, ...], where: str) -> tuple[str, ...]:
    bad = [p for p in items if not p.startswith("/")]
    if bad:
        raise PolicyError(f"{where}.value", f"a path prefix must be absolute: {bad[0]!r}")
    try:
        return tuple(normalize_path(p) for p in items)
    except CoercionError as e:
        raise PolicyError(f"{where}.value", str(e)) from None


def _normal_uris(value: object, where: str) -> object:
    """A rule operand on a uri fact with every string in the URI normal form."""
    try:
        if isinstance(value, str):
            return normalize_uri(value)
        if isinstance(value, list):
            return [normalize_uri(v) if isinstance(v, str) else v for v in value]
    except UriError as e:
        raise PolicyError(f"{where}.value", str(e)) from None
    return value


def _nfc_strings(value: object) -> object:
    """``value`` with every string in it in NFC (a rule operand on a path fact)."""
    if isinstance(value, str):
        return nfc(value)
    if isinstance(value, list):
        return [_nfc_strings(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _nfc_strings(v) for k, v in value.items()}
    return value


def _parse_entry(name: str, raw: object, where: str, keys: frozenset[str],
                 context: Mapping[str, FactType]) -> ToolPolicy:
    """One ``[tools.X]``, ``[prompts.X]`` or ``[resources]`` table; ``context`` are the facts
    the gateway sets itself (never read from the arguments), with their types."""
    if not isinstance(raw, Mapping):
        raise PolicyError(where, "must be a table")
    _check_keys(raw, keys, where)
    idempotent = raw.get("idempotent", True)
    if not isinstance(idempotent, bool):
        raise PolicyError(f"{where}.idempotent", "must be true or false")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise PolicyError(f"{where}.description", "must be a string")
    facts_doc = raw.get("facts", {})
    if not isinstance(facts_doc, Mapping):
        raise PolicyError(f"{where}.facts", "must be a table of facts")
    facts = tuple(_parse_fact(n, v, f"{where}.facts.{n}", tuple(context))
                  for n, v in facts_doc.items())
    fact_types: dict[str, FactType] = dict(context)
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
    return ToolPolicy(name, facts, rules, idempotent, description)


def _parse_tool(tool: str, raw: object) -> ToolPolicy:
    return _parse_entry(tool, raw, f"tools.{tool}", _TOOL_KEYS,
                        {"tool": "string", "agent": "string"})


def _parse_table_of(doc: Mapping[str, object], key: str) -> Mapping[str, object]:
    table = doc.get(key, {})
    if not isinstance(table, Mapping):
        raise PolicyError(key, f"must be a table of {key}")
    return table


def parse_policy(document: Mapping[str, object]) -> Policy:
    """Validate a policy document (the parsed TOML) strictly; raises :class:`PolicyError`."""
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
    tools = {tool: _parse_tool(tool, raw)
             for tool, raw in _parse_table_of(doc, "tools").items()}
    prompts = {name: _parse_entry(name, raw, f"prompts.{name}", _PROMPT_KEYS,
                                  {"prompt": "string", "agent": "string"})
               for name, raw in _parse_table_of(doc, "prompts").items()}
    resources = None
    if "resources" in doc:
        resources = _parse_entry("resources", doc["resources"], "resources", _RESOURCE_KEYS,
                                 {"uri": "uri", "method": "string", "agent": "string"})
    try:
        canonical_json(doc)
    except CanonicalizationError as e:
        raise PolicyError("", f"the policy cannot be canonicalized: {e}") from None
    return Policy(doc, tools, name, agent, prompts, resources)


def load_policy_text(text: str) -> Policy:
    """Parse TOML text into a :class:`Policy`; TOML syntax errors become PolicyError."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError("", f"not valid TOML: {e}") from None
    return parse_policy(document)
