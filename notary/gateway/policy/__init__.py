"""Gateway policies (pure): the TOML format, facts, rules, evaluation, commitments, explain.

A policy says, per tool, which **authorization facts** are extracted from a call's arguments
and which **rules** those facts must satisfy. One module per concern:

- :mod:`.format`: the file format and its strict parser (:func:`load_policy_text`);
- :mod:`.facts`: reading and coercing facts, the ``path`` normal form;
- :mod:`.uris`: the ``uri`` normal form (resources are judged by URI);
- :mod:`.templates`: what a URI template gives for some of its variables (completions);
- :mod:`.rules` and :mod:`.patterns`: the operators, with linear-time ``glob``/``regex``;
- :mod:`.evaluation`: :class:`Policy`, the decision of a call, the tools worth offering;
- :mod:`.commitment`: the salted policy commitment and the decision record;
- :mod:`.explain`: which argument fields a policy constrains.

Nothing here does I/O, reads a clock or draws randomness: an auditor handed the same policy,
salt and facts re-evaluates a decision and must reach the same answer.
"""

from __future__ import annotations

from notary.gateway.policy.commitment import (
    DecisionValue,
    decision_record,
    facts_sha256,
    policy_commitment,
    sha256_jcs,
)
from notary.gateway.policy.evaluation import KINDS, Decision, Kind, Policy, ToolPolicy
from notary.gateway.policy.explain import (
    FieldReport,
    ToolExplanation,
    explain,
    render_explanation,
    schema_fields,
)
from notary.gateway.policy.facts import (
    CONTEXT_FACTS,
    FACT_TYPES,
    CoercionError,
    FactSpec,
    FactType,
    coerce,
    normalize_path,
)
from notary.gateway.policy.format import POLICY_FORMAT, PolicyError, load_policy_text, parse_policy
from notary.gateway.policy.patterns import PatternError, compile_pattern
from notary.gateway.policy.rules import OPERATORS, Rule
from notary.gateway.policy.uris import normalize_uri

__all__ = [
    "CONTEXT_FACTS",
    "FACT_TYPES",
    "KINDS",
    "OPERATORS",
    "POLICY_FORMAT",
    "CoercionError",
    "Decision",
    "DecisionValue",
    "FactSpec",
    "FactType",
    "FieldReport",
    "Kind",
    "PatternError",
    "Policy",
    "PolicyError",
    "Rule",
    "ToolExplanation",
    "ToolPolicy",
    "coerce",
    "compile_pattern",
    "decision_record",
    "explain",
    "facts_sha256",
    "load_policy_text",
    "normalize_path",
    "normalize_uri",
    "parse_policy",
    "policy_commitment",
    "render_explanation",
    "schema_fields",
    "sha256_jcs",
]
