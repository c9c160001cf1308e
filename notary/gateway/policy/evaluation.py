"""A parsed policy and its evaluation: facts of a call, the decision, which tools to offer.

Everything here is a pure function of its inputs (no I/O, no clock, no randomness): the
gateway evaluates it before any upstream call, and an auditor handed the same policy, salt
and facts later re-evaluates it and must reach the same decision. That is why evaluation
takes the *facts* (not the arguments): the saved facts are what the decision log keeps, and
their digest is what the ledger commits to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from notary.gateway.policy.commitment import DecisionValue, facts_sha256, policy_commitment
from notary.gateway.policy.facts import MISSING, FactSpec
from notary.gateway.policy.rules import Rule

__all__ = ["Decision", "Policy", "ToolPolicy"]


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
            if value is not MISSING:
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
        return self.judge(tool, facts, problems)

    def judge(self, tool: str, facts: Mapping[str, Any], problems: Sequence[str] = ()
              ) -> Decision:
        """The decision on facts already extracted (and, for a local upstream, resolved on
        the host by the gateway); ``problems`` are the extraction's, for the log."""
        allowed, failures = self.evaluate(tool, facts)
        return Decision(allowed, tool, dict(facts), facts_sha256(facts),
                        (*problems, *failures))

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
        facts: dict[str, Any] = {"tool": tool}
        if agent is not None:
            facts["agent"] = agent
        return all(r.failure(facts) is None for r in spec.rules
                   if r.fact == "tool" or (r.fact == "agent" and agent is not None))
