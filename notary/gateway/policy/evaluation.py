"""A parsed policy and its evaluation: facts of a call, the decision, which tools to offer.

Everything here is a pure function of its inputs (no I/O, no clock, no randomness): the
gateway evaluates it before any upstream call, and an auditor handed the same policy, salt
and facts later re-evaluates it and must reach the same decision. That is why evaluation
takes the *facts* (not the arguments): the saved facts are what the decision log keeps, and
their digest is what the ledger commits to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from notary.gateway.policy.commitment import DecisionValue, facts_sha256, policy_commitment
from notary.gateway.policy.facts import MISSING, CoercionError, FactSpec, coerce
from notary.gateway.policy.rules import Rule
from notary.gateway.policy.templates import expand_known
from notary.gateway.policy.uris import UriError, normalize_uri, uri_has_prefix

__all__ = ["KINDS", "Decision", "Kind", "Policy", "ToolPolicy"]

Kind = Literal["tool", "prompt", "resource"]
KINDS: tuple[Kind, ...] = ("tool", "prompt", "resource")
_SUBJECT_FACT: dict[str, str] = {"tool": "tool", "prompt": "prompt", "resource": "method"}
"""The context fact that names what a decision is about: the tool, the prompt, or the
resource method (``resources/read``...; the resource itself is the ``uri`` fact)."""


@dataclass(frozen=True)
class ToolPolicy:
    """The facts and rules of one tool; ``idempotent = false`` needs an idempotency key."""

    name: str
    facts: tuple[FactSpec, ...] = ()
    rules: tuple[Rule, ...] = ()
    idempotent: bool = True
    description: str = ""


@dataclass(frozen=True)
class Decision:
    """The outcome of evaluating one call: ``reasons`` are for the operator's log only."""

    allowed: bool
    tool: str
    facts: dict[str, object]
    facts_sha256: str
    reasons: tuple[str, ...] = ()
    kind: Kind = "tool"

    @property
    def value(self) -> DecisionValue:
        return "allow" if self.allowed else "deny"


@dataclass(frozen=True)
class Policy:
    """A parsed policy; ``document`` is the JSON form the commitment is computed over."""

    document: dict[str, object]
    tools: dict[str, ToolPolicy]
    name: str | None = None
    agent: str | None = None
    prompts: dict[str, ToolPolicy] = field(default_factory=dict)
    resources: ToolPolicy | None = None
    """The ``[resources]`` table; None (no table) denies every resource."""

    def spec(self, name: str, kind: Kind = "tool") -> ToolPolicy | None:
        """The table that judges ``name`` (a tool, a prompt, or a resource method)."""
        if kind == "tool":
            return self.tools.get(name)
        if kind == "prompt":
            return self.prompts.get(name)
        return self.resources

    def resource_facts(self, method: str, uri: object, agent: str | None
                       ) -> tuple[dict[str, object], list[str]]:
        """The facts of a resource request: ``method``, ``uri`` (normalized) and ``agent``.

        A URI that has no normal form is left out (the ``uri`` fact is absent, so every rule
        on it fails); the problem, without the URI, is for the operator's log.
        """
        facts: dict[str, object] = {"method": method}
        if agent is not None:
            facts["agent"] = agent
        try:
            facts["uri"] = coerce(uri, "uri")
        except CoercionError as e:
            return facts, [f"uri: {e}"]
        return facts, []

    def commitment(self, salt_hex: str) -> str:
        return policy_commitment(self.document, salt_hex)

    def facts_for(self, tool: str, arguments: Mapping[str, object] | None, agent: str | None,
                  kind: Kind = "tool") -> tuple[dict[str, object], list[str]]:
        """The authorization facts of a call, and the extraction problems (operator log).

        Context facts first (``tool``, or ``prompt`` for a prompt; ``agent`` when known),
        then the mapped facts of its table. An unknown name has only the context facts.
        """
        facts: dict[str, object] = {_SUBJECT_FACT[kind]: tool}
        if agent is not None:
            facts["agent"] = agent
        problems: list[str] = []
        spec = self.spec(tool, kind) if kind != "resource" else None
        if spec is None:
            return facts, problems
        args: Mapping[str, object] = arguments if isinstance(arguments, Mapping) else {}
        for fact in spec.facts:
            value, problem = fact.extract(args)
            if problem is not None:
                problems.append(problem)
            if value is not MISSING:
                facts[fact.name] = value
        return facts, problems

    def evaluate(self, tool: str, facts: Mapping[str, object], kind: Kind = "tool"
                 ) -> tuple[bool, list[str]]:
        """Whether ``facts`` satisfy the policy of ``tool``; the failed rules (operator log).

        A pure function of (policy, kind, name, facts), so an auditor holding the saved
        facts reaches the same answer. Unknown tools and prompts, any resource when the
        policy has no ``[resources]`` table, and facts about something else, are denied.
        """
        spec = self.spec(tool, kind)
        if spec is None:
            what = "resources are" if kind == "resource" else f"{kind} {tool!r} is"
            return False, [f"{what} not in the policy"]
        if facts.get(_SUBJECT_FACT[kind]) != tool:
            return False, [f"the facts are for another {kind}"]
        if kind == "resource" and not isinstance(facts.get("uri"), str):
            # Even a [resources] table without rules judges only URIs it can name.
            return False, ["the uri fact is absent (not a URI in a normal form)"]
        failures = [f for r in spec.rules if (f := r.failure(facts)) is not None]
        return not failures, failures

    def decide(self, tool: str, arguments: Mapping[str, object] | None, agent: str | None,
               kind: Kind = "tool") -> Decision:
        """Extract the facts of a call and evaluate them. Never raises for bad arguments."""
        facts, problems = self.facts_for(tool, arguments, agent, kind)
        return self.judge(tool, facts, problems, kind)

    def judge(self, tool: str, facts: Mapping[str, object], problems: Sequence[str] = (),
              kind: Kind = "tool") -> Decision:
        """The decision on facts already extracted (and, for a local upstream, resolved on
        the host by the gateway); ``problems`` are the extraction's, for the log."""
        allowed, failures = self.evaluate(tool, facts, kind)
        return Decision(allowed, tool, dict(facts), facts_sha256(facts),
                        (*problems, *failures), kind)

    def could_allow_prompt(self, prompt: str, agent: str | None) -> bool:
        """Whether some ``prompts/get`` of ``prompt`` could be allowed (for ``prompts/list``)."""
        spec = self.prompts.get(prompt)
        if spec is None:
            return False
        facts: dict[str, object] = {"prompt": prompt}
        if agent is not None:
            facts["agent"] = agent
        return all(r.failure(facts) is None for r in spec.rules
                   if r.fact == "prompt" or (r.fact == "agent" and agent is not None))

    def allows_resource(self, uri: object, agent: str | None) -> bool:
        """Whether ``resources/read`` of ``uri`` is allowed (filters ``resources/list``)."""
        facts, problems = self.resource_facts("resources/read", uri, agent)
        return not problems and self.evaluate("resources/read", facts, "resource")[0]

    def could_allow_resources(self, agent: str | None) -> bool:
        """Whether any resource could be allowed (filters ``resources/templates/list``):
        the ``[resources]`` table exists and its agent rules admit this agent."""
        if self.resources is None:
            return False
        return agent is None or all(r.failure({"agent": agent}) is None
                                    for r in self.resources.rules if r.fact == "agent")

    def could_allow_uri(self, text: str, complete: bool, agent: str | None) -> bool:
        """Whether ``resources/read`` of ``text`` (``complete``), or else of some URI that
        starts with ``text``, could be allowed.

        For a start only, the ``prefix`` rules are judged on what it already fixes (it must
        lie under an allowed prefix, or lead to one; it must not lie under a denied one),
        the rules on other facts as for a read; other rules on the URI judge text not known
        yet, so they could hold. A start with no normal form could lead nowhere allowed.
        """
        if complete:
            return self.allows_resource(text, agent)
        if self.resources is None:
            return False
        try:
            uri = normalize_uri(text)
        except UriError:
            return False
        facts: dict[str, object] = {"method": "resources/read", "uri": uri}
        if agent is not None:
            facts["agent"] = agent
        for rule in self.resources.rules:
            if rule.fact != "uri":
                ok = rule.failure(facts) is None
            elif rule.op == "prefix":
                ok = any(uri_has_prefix(uri, p) or p.startswith(uri) for p in rule.prefixes)
            elif rule.op == "not prefix":
                ok = not any(uri_has_prefix(uri, p) for p in rule.prefixes)
            else:
                continue
            if not ok:
                return False
        return True

    def could_allow_prompt_value(self, prompt: str, argument: str, value: object,
                                 agent: str | None) -> bool:
        """Whether ``value`` of ``argument`` could be in an allowed ``prompts/get``: the
        rules on facts read from that argument alone hold for it (the others judge
        arguments not known yet)."""
        spec = self.prompts.get(prompt)
        if spec is None or not self.could_allow_prompt(prompt, agent):
            return False
        facts: dict[str, object] = {}
        for fact in spec.facts:
            if fact.path == (argument,):
                got, problem = fact.extract({argument: value})
                if problem is not None:
                    return False
                facts[fact.name] = got
        return all(r.failure(facts) is None for r in spec.rules if r.fact in facts)

    def completion_values(self, ref: Mapping[str, object], argument: Mapping[str, object],
                          context: Mapping[str, object], values: Sequence[object],
                          agent: str | None) -> list[str]:
        """The completion ``values`` for ``argument`` of ``ref`` (a prompt, or a resource
        template) that the policy could allow (``completion/complete`` offers no others).

        For a template, each value is expanded into it with the other arguments the client
        sent as context (:func:`~.templates.expand_known`) and the URI, or the start every
        URI from it has, judged by :meth:`could_allow_uri`.
        """
        name = argument.get("name")
        if not isinstance(name, str):
            return []
        strings = [v for v in values if isinstance(v, str)]
        if ref.get("type") == "ref/prompt":
            prompt = str(ref.get("name"))
            return [v for v in strings if self.could_allow_prompt_value(prompt, name, v, agent)]
        template = ref.get("uri")
        if ref.get("type") != "ref/resource" or not isinstance(template, str):
            return []
        known = {k: v for k, v in context.items() if isinstance(v, str)}
        return [v for v in strings
                if self.could_allow_uri(*expand_known(template, {**known, name: v}), agent)]

    def could_allow(self, tool: str, agent: str | None) -> bool:
        """Whether some call of ``tool`` by ``agent`` could be allowed (for ``tools/list``).

        The tool must be in the policy, and its rules on the context facts (``tool``,
        ``agent``) must hold: those do not depend on the arguments, so a tool whose context
        rules fail is denied for every call and is not worth offering. With no agent known
        (none configured, none claimed on this request) the agent rules are not judged: a
        call could still claim one they admit.
        """
        spec = self.tools.get(tool)
        if spec is None:
            return False
        facts: dict[str, object] = {"tool": tool}
        if agent is not None:
            facts["agent"] = agent
        return all(r.failure(facts) is None for r in spec.rules
                   if r.fact == "tool" or (r.fact == "agent" and agent is not None))
