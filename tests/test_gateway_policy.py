"""Gateway policies, pure: parsing, facts, rules, commitments, explain, projection, CLI."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from notary.cli.main import main as notary_cli
from notary.gateway.policy import (
    CoercionError,
    Policy,
    PolicyError,
    coerce,
    explain,
    facts_sha256,
    load_policy_text,
    policy_commitment,
    sha256_jcs,
)
from notary.gateway.projection import OutputSchemas, project_result

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "gateway-policy.toml"

POLICY = """
version = 1
[gateway]
name = "gw"

[tools."payments.transfer"]
idempotent = false
facts.amount = { from = "amount", type = "integer" }
facts.approved = { from = "approval.approved", type = "boolean", default = false }
facts.first = "items.0.sku"
rules = [
  { fact = "amount", op = "<=", value = 5000 },
  { fact = "amount", op = ">", value = 0 },
  { fact = "approved", op = "==", value = true },
  { fact = "agent", op = "in", value = ["LegalAgent"] },
]

[tools.open]
"""


def policy(text: str = POLICY) -> Policy:
    return load_policy_text(text)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = notary_cli(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_decisions_and_facts() -> None:
    p = policy()
    ok = p.decide("payments.transfer", {"amount": 2750, "recipient": "x",
                                        "approval": {"approved": True}}, "LegalAgent")
    assert ok.allowed and ok.value == "allow"
    assert ok.facts == {"tool": "payments.transfer", "agent": "LegalAgent", "amount": 2750,
                        "approved": True}
    assert ok.facts_sha256 == facts_sha256(ok.facts) == sha256_jcs(ok.facts)
    # Coercion: a numeric string is an integer fact; "true" is a boolean.
    assert p.decide("payments.transfer", {"amount": "2750", "approval": {"approved": "true"}},
                    "LegalAgent").allowed
    # Each rule can deny; the reasons say which (for the operator only).
    cases: list[tuple[dict[str, Any], str | None, str]] = [
        ({"amount": 9000, "approval": {"approved": True}}, "LegalAgent", "amount <= 5000"),
        ({"amount": 0, "approval": {"approved": True}}, "LegalAgent", "amount > 0"),
        ({"amount": 10}, "LegalAgent", "approved == true"),            # default false
        ({"amount": 10, "approval": {"approved": True}}, "Other", "agent in"),
        ({"amount": 10, "approval": {"approved": True}}, None, "'agent' is absent"),
        ({"approval": {"approved": True}}, "LegalAgent", "'amount' is absent"),
        ({"amount": "lots", "approval": {"approved": True}}, "LegalAgent", "not an integer"),
        ({"amount": True, "approval": {"approved": True}}, "LegalAgent", "boolean"),
        ({"amount": 2**60, "approval": {"approved": True}}, "LegalAgent", "2^53"),
    ]
    for arguments, agent, reason in cases:
        d = p.decide("payments.transfer", arguments, agent)
        assert not d.allowed, arguments
        assert any(reason in r for r in d.reasons), (reason, d.reasons)
    # List paths; an unknown tool has only its context facts and is denied.
    d = p.decide("payments.transfer", {"amount": 1, "items": [{"sku": "A1"}],
                                       "approval": {"approved": True}}, "LegalAgent")
    assert d.allowed and d.facts["first"] == "A1"
    unknown = p.decide("admin.delete", {"what": "all"}, "LegalAgent")
    assert not unknown.allowed and unknown.facts == {"tool": "admin.delete", "agent": "LegalAgent"}
    assert p.decide("open", None, None).allowed  # listed without rules
    # Evaluation is a pure function of the facts (what an auditor re-runs).
    assert p.evaluate("payments.transfer", ok.facts) == (True, [])
    assert not p.evaluate("open", {"tool": "payments.transfer"})[0]


def test_operators_are_type_strict() -> None:
    text = """
version = 1
[tools.t]
facts.x = "x"
rules = [{ fact = "x", op = "!=", value = 1 }, { fact = "x", op = "not in", value = [2, "3"] }]
"""
    p = policy(text)
    assert p.decide("t", {"x": True}, None).allowed       # true is not 1
    assert not p.decide("t", {"x": 1.0}, None).allowed    # 1.0 is 1
    assert not p.decide("t", {"x": "3"}, None).allowed
    assert p.decide("t", {"x": 3}, None).allowed
    assert not p.decide("t", {}, None).allowed            # absent fails even for != / not in


@pytest.mark.parametrize(("text", "where"), [
    ("version = 2", "version"),
    ("version = 1\n[tools.t]\nrule = []", "tools.t"),
    ("version = 1\n[tools.t]\nfacts.agent = 'a'", "context fact"),
    ("version = 1\n[tools.t]\nrules = [{ fact = 'nope', op = '==', value = 1 }]", "not a fact"),
    ("version = 1\n[tools.t]\nfacts.x = 'x'\nrules = [{ fact = 'x', op = '~', value = 1 }]",
     "op"),
    ("version = 1\n[tools.t]\nfacts.x = { from = 'x', type = 'string' }\n"
     "rules = [{ fact = 'x', op = '<', value = 1 }]", "numeric fact"),
    ("version = 1\n[tools.t]\nfacts.x = { from = 'x', type = 'integer', default = 'no' }",
     "default"),
    ("version = 1\n[tools.t]\nfacts.x = 'x'\nrules = [{ fact = 'x', op = 'in', value = 1 }]",
     "list"),
    ("version = 1\nwhen = 2024-01-01", "dates"),
    ("version = 1\n[tools.t]\nfacts.x = 'a..b'", "empty segment"),
    ("version = [", "TOML"),
])
def test_malformed_policies_are_refused(text: str, where: str) -> None:
    with pytest.raises(PolicyError) as e:
        load_policy_text(text)
    assert where in str(e.value)


def test_coercion() -> None:
    assert coerce(3.0, "integer") == 3 and isinstance(coerce(3.0, "integer"), int)
    assert coerce(" -12 ", "integer") == -12
    assert coerce("1.5e2", "number") == 150.0 and coerce("7", "number") == 7
    assert coerce("false", "boolean") is False
    for value, kind in [(3.5, "integer"), ("1e400", "number"), (5, "string"), (1, "boolean"),
                        (float("nan"), "number"), (2**63 + 1, "any")]:
        with pytest.raises(CoercionError):
            coerce(value, kind)  # type: ignore[arg-type]


def test_commitment_covers_values_not_layout() -> None:
    salt = "00" * 32
    a = policy(POLICY).commitment(salt)
    relaid = "# a comment\n" + POLICY.replace("idempotent = false", "idempotent   =   false")
    assert policy(relaid).commitment(salt) == a
    assert policy(POLICY.replace("5000", "5001")).commitment(salt) != a
    assert policy(POLICY).commitment("11" * 32) != a
    assert a == policy_commitment(policy(POLICY).document, salt)


def test_explain() -> None:
    p = policy()
    schema = {"type": "object", "properties": {
        "amount": {"type": "integer"}, "recipient": {"type": "string"},
        "approval": {"type": "object", "properties": {"approved": {"type": "boolean"},
                                                      "by": {"type": "string"}}},
        "items": {"type": "array"}}}
    items = {i.tool: i for i in explain(p, {"payments.transfer": schema, "admin": None})}
    fields = {f.path: f.status for f in items["payments.transfer"].fields}
    assert fields == {"amount": "constrained", "recipient": "unconstrained",
                      "approval.approved": "constrained", "approval.by": "unconstrained",
                      "items": "extracted, not constrained",
                      "items.0.sku": "extracted, not constrained"}
    assert items["payments.transfer"].context_rules == ('agent in ["LegalAgent"]',)
    assert not items["admin"].in_policy and items["admin"].offered
    assert items["open"].offered is False
    # Without the upstream only the policy's own paths are known.
    alone = {i.tool: i for i in explain(p)}
    assert {f.path for f in alone["payments.transfer"].fields} == {
        "amount", "approval.approved", "items.0.sku"}


def test_cli_explain_and_commit_policy(tmp_path: Path) -> None:
    code, out, _ = cli("gateway", "explain", "--policy", str(EXAMPLE))
    assert code == 0 and "payments.transfer  [non-idempotent]" in out
    assert "approval.approved  constrained" in out
    code, out, _ = cli("gateway", "explain", "--policy", str(EXAMPLE), "--json")
    assert code == 0 and json.loads(out)[0]["tool"] == "payments.transfer"
    salt_file = tmp_path / "policy.salt"
    code, out, err = cli("gateway", "commit-policy", "--policy", str(EXAMPLE),
                         "--salt-file", str(salt_file))
    assert code == 0 and "created" in err
    assert stat.S_IMODE(os.stat(salt_file).st_mode) == 0o600
    salt = salt_file.read_text().strip()
    assert out.strip() == load_policy_text(EXAMPLE.read_text()).commitment(salt)
    code, again, err = cli("gateway", "commit-policy", "--policy", str(EXAMPLE),
                           "--salt-file", str(salt_file))
    assert code == 0 and again == out and "created" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[tools.t]\nrulez = []\n")
    code, _, err = cli("gateway", "commit-policy", "--policy", str(bad))
    assert code == 2 and "rulez" in err


def test_projection() -> None:
    schemas = OutputSchemas()
    schemas.record("t", {"type": "object"}, {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    v = schemas.validator("t")
    assert v is not None and schemas.validator("t") is v  # compiled once
    out, problem = project_result({"content": [], "structuredContent": {"n": 1}}, v)
    assert problem is None and json.loads(out["content"][0]["text"]) == {"n": 1}
    out, problem = project_result({"content": [{"type": "text", "text": '{"n": 2}'}]}, v)
    assert problem is None and out["structuredContent"] == {"n": 2}
    _, problem = project_result({"content": [{"type": "text", "text": "two"}]}, v)
    assert problem is not None and "no structured content" in problem
    _, problem = project_result({"content": [], "structuredContent": {"n": "x"}}, v)
    assert problem is not None and "does not match" in problem
    err = {"content": [{"type": "text", "text": "boom"}], "isError": True}
    assert project_result(err, v) == (err, None)
    assert project_result({"content": []}, schemas.validator("unknown")) == ({"content": []}, None)


async def test_only_an_authorization_reaches_the_upstream() -> None:
    from notary.gateway.server import Authorized, GatewayRuntime

    runtime = GatewayRuntime.__new__(GatewayRuntime)  # no upstream at all: must not be needed
    decision = policy().decide("open", {}, None)
    forged = Authorized("open", decision, {}, object())
    with pytest.raises(PermissionError):
        await runtime._forward(forged, {}, None)
    with pytest.raises(PermissionError):
        await runtime._run(forged, {}, None)
