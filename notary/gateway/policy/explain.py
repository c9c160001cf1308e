"""``notary gateway explain``: per tool and prompt, which argument fields the policy
constrains, and what it says about resources (pure).

A field no fact reads is forwarded unchecked; a field a fact reads but no rule judges is only
recorded. The operator should know both before trusting a policy, so ``explain`` lists every
field of each tool's input schema (from the upstream's ``tools/list``) with its status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from notary.gateway.policy.evaluation import Kind, Policy, ToolPolicy
from notary.gateway.policy.facts import CONTEXT_FACTS, FactSpec

__all__ = ["PATH_NOTE", "URI_NOTE", "FieldReport", "ToolExplanation", "explain",
           "render_explanation", "schema_fields"]

URI_NOTE = ("uri facts are judged in their normal form (scheme and authority lower-cased, "
            "dot segments removed, unreserved and UTF-8 escapes decoded, every escape of a "
            "file: path decoded, file://localhost/ and file:/ read as file:///; an escaped /, "
            "\\ or control character is refused); prefix compares whole segments")
PATH_NOTE = ("path facts are judged in lexical normal form and NFC (a path not in NFC fails "
             "every rule on it; rule values are compared in NFC), resolved through symlinks "
             "on the gateway's host when the upstream is a local command; a remote upstream "
             "must confine symlinks itself")


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
    """What :func:`explain` says about one tool (``offered``: None without an upstream)."""

    tool: str
    in_policy: bool
    offered: bool | None
    idempotent: bool
    fields: tuple[FieldReport, ...] = ()
    context_rules: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    kind: Kind = "tool"

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "tool": self.tool, "in_policy": self.in_policy, "offered_by_upstream": self.offered,
            "idempotent": self.idempotent,
            "fields": [{"path": f.path, "status": f.status, "facts": list(f.facts),
                        "rules": list(f.rules)} for f in self.fields],
            "context_rules": list(self.context_rules), "notes": list(self.notes),
        }


def schema_fields(schema: Mapping[str, object] | None) -> list[str]:
    """Leaf argument paths of an input schema: nested object properties, dotted.

    Arrays, combinators (``anyOf``...) and ``$ref`` count as leaves: the explanation is
    about which part of the payload a fact reads, and a fact reading inside such a field
    makes it "partly constrained".
    """
    out: list[str] = []

    def walk(node: Mapping[str, object], prefix: str) -> None:
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


def _explain_tool(spec: ToolPolicy | None, tool: str, schema: Mapping[str, object] | None,
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
    context = tuple(r for fact in (*CONTEXT_FACTS, "prompt")
                    for r in rules_by_fact.get(fact, ()))
    notes: list[str] = []
    if not spec.rules:
        notes.append("no rules: every call is allowed")
    if offered is False:
        notes.append("not offered by the upstream")
    if not spec.idempotent:
        notes.append("non-idempotent: calls need an idempotency key")
    if any(f.type in ("path", "paths") for f in spec.facts):
        notes.append(PATH_NOTE)
    return ToolExplanation(tool, True, offered, spec.idempotent, tuple(reports), context,
                           tuple(notes))


def explain(policy: Policy, input_schemas: Mapping[str, Mapping[str, object] | None] | None = None
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
    for name, spec in policy.prompts.items():
        item = _explain_tool(spec, name, None, None)
        out.append(replace(item, kind="prompt", notes=tuple(
            n.replace("every call", "every prompts/get") for n in item.notes)))
    out.append(_explain_resources(policy.resources))
    return out


def _explain_resources(spec: ToolPolicy | None) -> ToolExplanation:
    """The ``[resources]`` table: its rules judge the ``uri``, ``method`` and ``agent`` facts
    of resources/read, resources/subscribe and unsubscribe, and of template completions."""
    if spec is None:
        return ToolExplanation("resources", False, None, True, kind="resource", notes=(
            "no [resources] table: every resource request is denied",))
    notes = [URI_NOTE]
    if not spec.rules:
        notes.insert(0, "no rules: every resource is allowed")
    return ToolExplanation("resources", True, None, True, (),
                           tuple(r.describe() for r in spec.rules), tuple(notes), "resource")


def render_explanation(items: Sequence[ToolExplanation], *, with_upstream: bool) -> str:
    """The human-readable form of :func:`explain`."""
    lines: list[str] = []
    if not with_upstream:
        lines += ["(only the fields the policy reads are listed; pass --upstream to list every "
                  "argument field and the upstream's tools)", ""]
    for item in items:
        head = {"tool": "", "prompt": "prompt ", "resource": "[resources]"}[item.kind]
        head += item.tool if item.kind != "resource" else ""
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
