"""Gateway policies, pure: parsing, facts, rules, commitments, explain, projection, CLI."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import unicodedata
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
    normalize_path,
    policy_commitment,
    sha256_jcs,
)
from notary.gateway.policy.explain import PATH_NOTE
from notary.gateway.policy.patterns import MAX_MATCH_CHARS
from notary.gateway.projection import OutputSchemas, project_result

REPO = Path(__file__).resolve().parents[3]
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
    assert code == 0 and "echo  [non-idempotent]" in out
    assert "city  constrained" in out
    code, out, _ = cli("gateway", "explain", "--policy", str(EXAMPLE), "--json")
    assert code == 0 and json.loads(out)[0]["tool"] == "add"
    # Without --salt-file the salt goes beside the state file, never beside the policy.
    state = tmp_path / "state" / "gw.db"
    code, out, err = cli("gateway", "commit-policy", "--policy", str(EXAMPLE),
                         "--state", str(state))
    assert code == 0 and "created" in err and (tmp_path / "state" / "gw.salt").is_file()
    assert not (EXAMPLE.parent / (EXAMPLE.name + ".salt")).exists()
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "gw.salt").st_mode) == 0o600
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
    from notary.gateway.authorization import Authorized
    from notary.gateway.runtime import GatewayRuntime
    from notary.gateway.toolcalls import forward, run

    runtime = GatewayRuntime.__new__(GatewayRuntime)  # no upstream at all: must not be needed
    decision = policy().decide("open", {}, None)
    forged = Authorized("open", decision, {}, object())
    with pytest.raises(PermissionError):
        await forward(runtime, forged, {}, None)
    with pytest.raises(PermissionError):
        await run(runtime, forged, {}, None)


# Strings and paths: prefix, glob, regex, length, the path normal form -----------------------

FS_POLICY = """
version = 1
[tools.read]
facts.path = { from = "path", type = "path" }
rules = [
  { fact = "path", op = "prefix", value = ["/allowed/", "/srv/shared"] },
  { fact = "path", op = "not glob", value = ["**/.*", "**/.*/**"] },  # no hidden names
]
[tools.read_many]
facts.paths = { from = "paths", type = "paths" }
rules = [
  { fact = "paths", op = "prefix", value = "/allowed" },
  { fact = "paths", op = "length", value = { min = 1, max = 3 } },
]
[tools.name]
facts.name = { from = "name", type = "string" }
rules = [
  { fact = "name", op = "regex", value = "[a-z][a-z0-9_-]{0,31}" },
  { fact = "name", op = "not prefix", value = "tmp" },
  { fact = "name", op = "length", value = { max = 10 } },
]
[tools.txt]
facts.file = { from = "file", type = "path" }
rules = [{ fact = "file", op = "glob", value = ["/data/*.txt", "/data/**/keep/*"] }]
[tools.evil]
facts.s = { from = "s", type = "string" }
rules = [{ fact = "s", op = "regex", value = "(a+)+$" }]
"""


@pytest.mark.parametrize(("raw", "normal"), [
    ("/allowed/../secret", "/secret"),
    ("/allowed/x/../../secret", "/secret"),
    ("//allowed///x/./y/", "/allowed/x/y"),
    ("/../../etc/passwd", "/etc/passwd"),
    ("/", "/"),
    ("/.", "/"),
    ("a/b/../c", "a/c"),
    ("../a", "../a"),
    ("a/../..", ".."),
    (".", "."),
    ("./", "."),
    ("/allowed/.../x", "/allowed/.../x"),  # "..." is a name, not a step up
])
def test_path_normal_form(raw: str, normal: str) -> None:
    assert normalize_path(raw) == normal


@pytest.mark.parametrize("bad", ["", "/a\x00b", "/x\ud800", 7, None, ["/a"], "/" * 5000])
def test_paths_refused_as_facts(bad: object) -> None:
    with pytest.raises(CoercionError):
        normalize_path(bad)


@pytest.mark.parametrize(("path", "allowed"), [
    ("/allowed/file.txt", True),
    ("/allowed//sub/./file", True),
    ("/allowed", True),                     # the directory itself: "/allowed/" is a path
    ("/srv/shared/x", True),
    ("/allowed/../secret", False),          # normalized before any rule sees it
    ("/allowed/sub/../../secret", False),
    ("/allowedness/file", False),           # path prefixes compare whole segments
    ("/srv/sharedfoo", False),
    ("allowed/file", False),                # relative: never under an absolute prefix
    ("../allowed/file", False),
    ("/allowed/.git/config", False),        # not glob **/.*
    ("/allowed/sub/.env", False),
    ("/allowed/a.b/c", True),
    (7, False),                             # not a path: the fact is absent
])
def test_path_prefix_rules(path: object, allowed: bool) -> None:
    p = policy(FS_POLICY)
    assert p.decide("read", {"path": path}, None).allowed is allowed, path


def test_paths_rules_hold_for_every_item() -> None:
    p = policy(FS_POLICY)
    assert p.decide("read_many", {"paths": ["/allowed/a", "/allowed//b"]}, None).allowed
    assert not p.decide("read_many", {"paths": ["/allowed/a", "/allowed/../b"]}, None).allowed
    assert not p.decide("read_many", {"paths": []}, None).allowed          # length min 1
    assert not p.decide("read_many", {"paths": ["/allowed/x"] * 4}, None).allowed
    assert not p.decide("read_many", {"paths": "/allowed/a"}, None).allowed  # not a list
    facts = p.decide("read_many", {"paths": ["/allowed/./a"]}, None).facts
    assert facts["paths"] == ["/allowed/a"]  # the facts (and their digest) hold the normal form


@pytest.mark.parametrize(("name", "allowed"), [
    ("report", True), ("a", True), ("a_1-b", True),
    ("Report", False),          # regex is anchored at both ends: the whole value must match
    ("report!", False), ("x report", False), ("", False),
    ("tmpfile", False),         # not prefix
    ("abcdefghijk", False),     # length max 10
    (["report"], False), (3, False),
])
def test_regex_prefix_and_length_on_strings(name: object, allowed: bool) -> None:
    assert policy(FS_POLICY).decide("name", {"name": name}, None).allowed is allowed, name


@pytest.mark.parametrize(("file", "allowed"), [
    ("/data/a.txt", True), ("/data/sub/a.txt", False),   # * stops at /
    ("/data/keep/x", True), ("/data/a/b/keep/x", True),  # **/ spans zero or more segments
    ("/data/.txt", True), ("/data/a.txt/", True),         # normalized: trailing / dropped
    ("/data/a.tx", False), ("/other/a.txt", False),
])
def test_glob_rules(file: str, allowed: bool) -> None:
    assert policy(FS_POLICY).decide("txt", {"file": file}, None).allowed is allowed, file


def test_regex_matching_takes_linear_time() -> None:
    # (a+)+$ against a^n b backtracks for 2^n steps in a backtracking engine; RE2 answers at
    # once (and a hang here would be caught by the test timeout, not by a timing assertion).
    p = policy(FS_POLICY)
    assert not p.decide("evil", {"s": "a" * 60_000 + "b"}, None).allowed
    assert p.decide("evil", {"s": "a" * 60_000}, None).allowed
    # Past MAX_MATCH_CHARS nothing is matched at all: the rule fails closed.
    assert not p.decide("evil", {"s": "a" * (MAX_MATCH_CHARS + 1)}, None).allowed


@pytest.mark.parametrize(("rule", "where"), [
    ("{ fact = 's', op = 'regex', value = '(a)\\1' }", "RE2"),           # backreference
    ("{ fact = 's', op = 'regex', value = '(?=a)' }", "RE2"),              # lookahead
    ("{ fact = 's', op = 'regex', value = '(' }", "RE2"),
    ("{ fact = 's', op = 'regex', value = ['a', 'b'] }", "one pattern"),
    ("{ fact = 's', op = 'regex', value = '" + "a" * 2000 + "' }", "at most"),
    ("{ fact = 's', op = 'glob', value = '[abc' }", "closing"),
    ("{ fact = 's', op = 'prefix', value = [] }", "non-empty"),
    ("{ fact = 's', op = 'prefix', value = 3 }", "non-empty"),
    ("{ fact = 'p', op = 'prefix', value = 'relative/' }", "absolute"),
    ("{ fact = 's', op = 'length', value = 3 }", "min"),
    ("{ fact = 's', op = 'length', value = { max = -1 } }", "non-negative"),
    ("{ fact = 's', op = 'length', value = { min = 3, max = 2 } }", "greater"),
    ("{ fact = 's', op = 'length', value = { most = 2 } }", "unknown"),
    ("{ fact = 'n', op = 'glob', value = '*' }", "string or path fact"),
    ("{ fact = 'n', op = 'length', value = { max = 2 } }", "string or list fact"),
])
def test_malformed_string_rules_are_refused(rule: str, where: str) -> None:
    text = ("version = 1\n[tools.t]\nfacts.s = { from = 's', type = 'string' }\n"
            "facts.p = { from = 'p', type = 'path' }\n"
            "facts.n = { from = 'n', type = 'integer' }\n"
            f"rules = [{rule}]\n")
    with pytest.raises(PolicyError) as e:
        load_policy_text(text)
    assert where in str(e.value), str(e.value)


SECRET = "S3CR3T-value-9917"


def test_denial_reasons_never_quote_an_argument() -> None:
    p = policy(POLICY + FS_POLICY.replace("version = 1", ""))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("payments.transfer", {"amount": SECRET}),                        # not an integer
        ("payments.transfer", {"amount": 9917, "approval": {"approved": SECRET}}),
        ("payments.transfer", {"amount": 2**60 + 9917}),                  # beyond 2^53
        ("read", {"path": f"/{SECRET}"}),                                 # prefix fails
        ("read", {"path": f"/allowed/.{SECRET}"}),                        # not glob fails
        ("read", {"path": f"/allowed/{SECRET}\x00"}),                     # NUL
        ("read_many", {"paths": [f"/allowed/{SECRET}", f"/{SECRET}"]}),
        ("name", {"name": SECRET}),                                       # regex fails
        ("name", {"name": f"tmp{SECRET}".lower()}),
        ("open", {SECRET: SECRET}),                                       # no facts read
        ("evil", {"s": [SECRET]}),                                        # not a string
    ]
    any_policy = load_policy_text("version = 1\n[tools.a]\nfacts.x = 'x'\n"
                                  "rules = [{ fact = 'x', op = '==', value = 1 }]\n")
    for tool, arguments in calls:
        reasons = " | ".join(p.decide(tool, arguments, "Mallory").reasons)
        assert SECRET not in reasons and SECRET.lower() not in reasons, (tool, reasons)
        assert "9917" not in reasons, (tool, reasons)
    for value in ({SECRET: 2**60 + 9917}, [f"\ud800{SECRET}"], {SECRET: float("nan")}):
        reasons = " | ".join(any_policy.decide("a", {"x": value}, None).reasons)
        assert reasons and SECRET not in reasons and "9917" not in reasons, reasons


def test_could_allow_decides_what_tools_list_offers() -> None:
    p = policy()
    assert p.could_allow("payments.transfer", "LegalAgent")
    assert not p.could_allow("payments.transfer", "Mallory")   # agent rule fails for all calls
    assert p.could_allow("payments.transfer", None)      # no agent known: it could be admitted
    assert p.could_allow("open", None)
    assert not p.could_allow("admin.delete", "LegalAgent")     # not in the policy


# Unicode normal forms of paths ------------------------------------------------------------------

COMPOSED = "Vertr\u00e4ge"                             # "Verträge", NFC
DECOMPOSED = unicodedata.normalize("NFD", COMPOSED)    # the same name, a combining diaeresis


def _nfc_policy(spelling: str) -> Policy:
    """Deny rules of every operator on one folder, its name spelled ``spelling``."""
    folder = f"/srv/public/{spelling}"
    return load_policy_text(f"""
version = 1
[tools.read]
facts.path = {{ from = "path", type = "path" }}
facts.many = {{ from = "many", type = "paths", default = ["/srv/public/{spelling}-ok"] }}
rules = [
  {{ fact = "path", op = "prefix", value = "/srv/public" }},
  {{ fact = "path", op = "not prefix", value = "{folder}" }},
  {{ fact = "path", op = "not glob", value = "**/{spelling}/**" }},
  {{ fact = "path", op = "not regex", value = ".*/{spelling}/.*" }},
  {{ fact = "path", op = "!=", value = "{folder}/a" }},
  {{ fact = "path", op = "not in", value = ["{folder}/b"] }},
  {{ fact = "many", op = "prefix", value = "/srv/public/{spelling}-ok" }},
]
[tools.own]
facts.path = {{ from = "path", type = "path" }}
rules = [{{ fact = "path", op = "prefix", value = "{folder}" }}]
""")


def test_a_path_not_in_nfc_is_refused() -> None:
    assert normalize_path(f"/srv/{COMPOSED}/x") == f"/srv/{COMPOSED}/x"
    with pytest.raises(CoercionError, match="NFC"):
        normalize_path(f"/srv/{DECOMPOSED}/x")
    with pytest.raises(CoercionError, match="NFC"):
        coerce(["/srv/ok", f"/srv/{DECOMPOSED}"], "paths")


@pytest.mark.parametrize("written", [COMPOSED, DECOMPOSED], ids=["nfc-policy", "nfd-policy"])
def test_path_rules_compare_in_nfc(written: str) -> None:
    """However the policy spells the folder, no spelling of a path in it passes a deny rule,
    and a spelling that is not NFC is denied outright."""
    p = _nfc_policy(written)
    assert p.decide("read", {"path": "/srv/public/other/file"}, None).allowed
    for spelling in (COMPOSED, DECOMPOSED):
        for inner in ("secret.txt", "a", "b"):
            decision = p.decide("read", {"path": f"/srv/public/{spelling}/{inner}"}, None)
            assert not decision.allowed, (spelling, inner)
    # Each deny rule holds on its own: a path in the folder fails every one of them.
    inside = p.decide("read", {"path": f"/srv/public/{COMPOSED}/a/x"}, None)
    assert sum("does not hold" in r for r in inside.reasons) == 3, inside.reasons
    assert not p.decide("read", {"path": f"/srv/public/{COMPOSED}/a"}, None).allowed   # !=
    assert not p.decide("read", {"path": f"/srv/public/{COMPOSED}/b"}, None).allowed   # not in
    # An allow rule written in either form admits the NFC spelling, never the NFD one.
    assert p.decide("own", {"path": f"/srv/public/{COMPOSED}/x"}, None).allowed
    denied = p.decide("own", {"path": f"/srv/public/{DECOMPOSED}/x"}, None)
    assert not denied.allowed and any("NFC" in r for r in denied.reasons)
    # The default of a path fact is the operator's value too: put in NFC.
    assert p.decide("read", {"path": "/srv/public/x"}, None).facts["many"] == [
        f"/srv/public/{COMPOSED}-ok"]


def test_nfc_rules_keep_the_commitment_and_explain_says_so() -> None:
    """The commitment is of the document as written (NFC is a function of it, so the
    revealed document still decides every call the same way), and explain says how paths
    are judged."""
    salt = "00" * 32
    nfc_policy, nfd_policy = _nfc_policy(COMPOSED), _nfc_policy(DECOMPOSED)
    assert nfc_policy.commitment(salt) == policy_commitment(nfc_policy.document, salt)
    assert nfd_policy.commitment(salt) != nfc_policy.commitment(salt)
    for item in explain(nfd_policy):
        if item.kind == "resource":  # the resources entry (none in this policy)
            assert item.notes == ("no [resources] table: every resource request is denied",)
            continue
        assert PATH_NOTE in item.notes
        # Rules are shown as the policy wrote them (what the commitment covers).
        if item.tool == "own":
            assert item.fields[0].rules == (f'path prefix "/srv/public/{DECOMPOSED}"',)
    assert PATH_NOTE not in explain(policy())[0].notes
