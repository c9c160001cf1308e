"""Gateway policies for prompts and resources (pure): ``[prompts.X]``, ``[resources]``, URIs."""

from __future__ import annotations

import pytest

from notary.gateway.policy import (
    CoercionError,
    PolicyError,
    coerce,
    decision_record,
    explain,
    load_policy_text,
    normalize_uri,
    render_explanation,
)
from notary.gateway.policy.explain import URI_NOTE

POLICY = """
version = 1

[tools.echo]

[prompts.greet]
facts.style = { from = "style", type = "string" }
rules = [{ fact = "style", op = "in", value = ["short", "long"] }]

[prompts.plain]

[prompts.ops_only]
rules = [{ fact = "agent", op = "==", value = "OpsAgent" }]

[resources]
rules = [
  { fact = "uri", op = "prefix", value = ["test://static-text", "FILE:///srv/data/"] },
  { fact = "uri", op = "not glob", value = "**/.*" },
]
"""


def test_a_policy_written_before_prompts_and_resources_denies_them() -> None:
    old = load_policy_text("version = 1\n[tools.echo]\n")
    assert old.prompts == {} and old.resources is None
    assert not old.decide("greet", {}, None, "prompt").allowed
    facts, problems = old.resource_facts("resources/read", "test://static-text", None)
    decision = old.judge("resources/read", facts, problems, "resource")
    assert not decision.allowed and decision.reasons == ("resources are not in the policy",)
    assert old.decide("echo", {}, None).allowed  # tools keep their meaning


def test_an_empty_resources_table_allows_every_resource() -> None:
    policy = load_policy_text("version = 1\n[resources]\n")
    assert policy.allows_resource("anything://at/all", None)
    # Not a URI: the fact is absent, and even a table without rules denies it.
    assert not policy.allows_resource("no scheme", None)
    facts, problems = policy.resource_facts("resources/read", "no scheme", None)
    assert "uri" not in facts and problems
    assert not policy.judge("resources/read", facts, problems, "resource").allowed


def test_prompts_are_judged_like_tools() -> None:
    policy = load_policy_text(POLICY)
    assert policy.decide("greet", {"style": "short"}, None, "prompt").allowed
    denied = policy.decide("greet", {"style": "rude"}, None, "prompt")
    assert not denied.allowed and denied.facts == {"prompt": "greet", "style": "rude"}
    assert policy.decide("plain", None, None, "prompt").allowed
    assert not policy.decide("unlisted", None, None, "prompt").allowed
    # A tool and a prompt of the same name are different things.
    assert not policy.decide("echo", None, None, "prompt").allowed
    assert not policy.decide("plain", None, None).allowed
    assert policy.could_allow_prompt("ops_only", None)
    assert policy.could_allow_prompt("ops_only", "OpsAgent")
    assert not policy.could_allow_prompt("ops_only", "LegalAgent")
    assert not policy.could_allow_prompt("unlisted", None)


@pytest.mark.parametrize(("uri", "allowed"), [
    ("test://static-text", True),
    ("TEST://static-text", True),
    ("test://static-text-evil", False),        # whole segments
    ("test://static-textual", False),
    ("file:///srv/data/a.txt", True),          # the rule's value is normalized too
    ("file:///srv/data/sub/../b.txt", True),
    ("file:///srv/data/../secret.txt", False),  # dot segments removed before the prefix
    ("file:///srv/data/%2e%2e/secret.txt", False),
    ("file:///srv/data/a%2F..%2F..%2Fsecret", False),  # an escaped separator is refused
    ("file:///srv/data/.env", False),
    ("file:///srv/data", False),
    (42, False),
])
def test_resource_rules_on_normalized_uris(uri: object, allowed: bool) -> None:
    policy = load_policy_text(POLICY)
    assert policy.allows_resource(uri, None) is allowed


@pytest.mark.parametrize(("raw", "normal"), [
    ("test://Host/A/./b/../c", "test://host/A/c"),
    ("file:///a/b/%7Euser/%41", "file:///a/b/~user/A"),
    ("urn:x:%3a", "urn:x:%3A"),
    ("test://x/a/..", "test://x/"),
    ("test://x/a?q=1#frag", "test://x/a?q=1#frag"),
])
def test_uri_normal_form(raw: str, normal: str) -> None:
    assert normalize_uri(raw) == normal
    assert coerce(raw, "uri") == normal


@pytest.mark.parametrize("bad", ["", "noscheme", "test://x/a b", "test://x/%zz", "test://x/\\a",
                                 "test://x/a%5cb", "test://x/cafe\u0301", None, ["test://x"]])
def test_uris_refused_as_facts(bad: object) -> None:
    with pytest.raises(CoercionError):
        coerce(bad, "uri")


@pytest.mark.parametrize(("text", "where"), [
    ("version = 1\n[resources]\nfacts.x = 'x'\n", "resources"),
    ("version = 1\n[resources]\nidempotent = false\n", "resources"),
    ("version = 1\n[resources]\nrules = [{ fact = 'path', op = '==', value = 1 }]\n",
     "resources.rules[0].fact"),
    ("version = 1\n[resources]\nrules = [{ fact = 'uri', op = 'prefix', value = 'x y' }]\n",
     "resources.rules[0].value"),
    ("version = 1\n[prompts.p]\nfacts.prompt = 'x'\n", "prompts.p.facts.prompt"),
    ("version = 1\n[prompts.p]\nidempotent = false\n", "prompts.p"),
    ("version = 1\nresources = 3\n", "resources"),
])
def test_malformed_prompt_and_resource_tables_are_refused(text: str, where: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy_text(text)
    assert info.value.path == where


def test_decision_records_name_their_kind_and_tools_stay_as_they_were() -> None:
    tool = decision_record("allow", "echo", "f" * 64, "c" * 64, "t", "s")
    assert "kind" not in tool
    prompt = decision_record("deny", "greet", "f" * 64, "c" * 64, "t", "s", "prompt")
    assert prompt["kind"] == "prompt"


def test_the_commitment_covers_prompts_and_resources() -> None:
    base = load_policy_text(POLICY)
    other = load_policy_text(POLICY.replace('"long"', '"longer"'))
    assert base.commitment("00" * 16) != other.commitment("00" * 16)
    no_resources = load_policy_text(POLICY.split("[resources]")[0])
    assert base.commitment("00" * 16) != no_resources.commitment("00" * 16)


def test_explain_lists_prompts_and_the_resources_table() -> None:
    items = {(i.kind, i.tool): i for i in explain(load_policy_text(POLICY))}
    greet = items[("prompt", "greet")]
    assert greet.fields[0].status == "constrained"
    assert items[("prompt", "plain")].notes == ("no rules: every prompts/get is allowed",)
    assert items[("prompt", "ops_only")].context_rules == ('agent == "OpsAgent"',)
    resources = items[("resource", "resources")]
    assert resources.in_policy and len(resources.context_rules) == 2
    assert URI_NOTE in resources.notes
    text = render_explanation(list(items.values()), with_upstream=False)
    assert "prompt greet" in text and "[resources]" in text
    bare = explain(load_policy_text("version = 1\n"))
    assert [i.to_json()["kind"] for i in bare] == ["resource"]
    assert not bare[0].in_policy


FILES_POLICY = """
version = 1

[tools.fetch]
facts.target = { from = "uri", type = "uri" }
rules = [
  { fact = "target", op = "prefix", value = "file:///srv/data/" },
  { fact = "target", op = "not prefix", value = ["file:///srv/data/données/private/",
                                                  "file:///srv/data/team@corp/secret/"] },
]

[resources]
rules = [
  { fact = "uri", op = "prefix", value = "file:///srv/data/" },
  { fact = "uri", op = "not prefix", value = ["file:///srv/data/données/private/",
                                               "file:///srv/data/team@corp/secret/"] },
]
"""


@pytest.mark.parametrize("uri", [
    "file:///srv/data/données/private/plan.txt",
    "file:///srv/data/donn%C3%A9es/private/plan.txt",   # escaped UTF-8
    "file:///srv/data/donn%c3%a9es/private/plan.txt",
    "file:///srv/data/team%40corp/secret/k.txt",        # an escaped reserved character
    "file:///srv/data/team@corp/%73ecret/k.txt",
    "file://localhost/srv/data/team@corp/secret/k.txt",
    "FILE://LOCALHOST/srv/data/team@corp/secret/k.txt",
    "file:/srv/data/team@corp/secret/k.txt",
    "file:///srv/data//team@corp//secret/k.txt",        # repeated slashes are one
    "file:///srv/data/x/..//team@corp/secret/k.txt",
    "file:////srv/data/team@corp/secret/k.txt",         # refused: an empty first segment
    "file://server/srv/data/team@corp/secret/k.txt",    # refused: another host
    "file:///srv/data/team%40corp%2Fsecret/k.txt",      # refused: an escaped /
    "file:///srv/data/team%40corp/secret%00/k.txt",     # refused: an escaped control
    "file:///srv/data/donne%CC%81es/private/plan.txt",  # refused: not NFC once decoded
    "file:///srv/data/%FF/plan.txt",                    # refused: not UTF-8
])
def test_every_spelling_of_a_denied_file_is_denied(uri: str) -> None:
    """Item 2 of issue 32: escapes, file://localhost/, file:/ and file://// name the same
    file to a server that decodes them; each is judged as that file, or refused."""
    policy = load_policy_text(FILES_POLICY)
    assert not policy.allows_resource(uri, None)
    assert not policy.decide("fetch", {"uri": uri}, None).allowed  # tool uri facts alike


@pytest.mark.parametrize(("uri", "normal"), [
    ("file:///srv/data/caf%C3%A9/a%20b.txt", "file:///srv/data/café/a%20b.txt"),
    ("file://localhost/srv/data/%41%3F%23%25", "file:///srv/data/A%3F%23%25"),
    ("file:/srv/data/a", "file:///srv/data/a"),
    ("file:///srv/data/a?x=%C3%A9%26", "file:///srv/data/a?x=é%26"),
])
def test_allowed_file_spellings_keep_their_meaning(uri: str, normal: str) -> None:
    policy = load_policy_text(FILES_POLICY)
    assert normalize_uri(uri) == normal
    assert policy.allows_resource(uri, None)
    assert policy.decide("fetch", {"uri": uri}, None).allowed


def test_rule_values_written_with_escapes_or_localhost_mean_the_same() -> None:
    escaped = FILES_POLICY.replace("file:///srv/data/données/private/",
                                   "file://localhost/srv/data/donn%C3%A9es/private/")
    escaped = escaped.replace("team@corp", "team%40corp")
    policy = load_policy_text(escaped)
    for uri in ("file:///srv/data/données/private/plan.txt",
                "file:///srv/data/team@corp/secret/k.txt"):
        assert not policy.allows_resource(uri, None)
    assert policy.allows_resource("file:///srv/data/données/public/a.txt", None)


def test_completion_values_are_only_those_the_policy_could_allow() -> None:
    """Issue 32 item 4 (pure): each value is put into the template and judged as a read."""
    policy = load_policy_text(FILES_POLICY)
    ref = {"type": "ref/resource", "uri": "file:///srv/data/{+path}"}
    offered = ["données/", "données/private/", "données/private/plan.txt", "team@corp/",
               "team%40corp/secret/k.txt", "../etc/passwd", "readme.txt", 7]
    assert policy.completion_values(ref, {"name": "path"}, {}, offered, None) == [
        "données/", "team@corp/", "readme.txt"]
    # A variable after the completed one: judged on the start every URI from it has.
    ref = {"type": "ref/resource", "uri": "file:///srv/data/{dir}/{name}/{file}"}
    assert policy.completion_values(ref, {"name": "dir"}, {}, ["team@corp", "other"],
                                    None) == ["team@corp", "other"]
    assert policy.completion_values(ref, {"name": "name"}, {"dir": "team@corp"},
                                    ["secret", "open"], None) == ["open"]
    ref = {"type": "ref/resource", "uri": "file:///srv/{area}/{name}"}
    assert policy.completion_values(ref, {"name": "area"}, {}, ["data", "etc"], None) == [
        "data"]
    ref = {"type": "ref/resource", "uri": "file:///srv/data/{+path}{?q}"}
    assert policy.completion_values(ref, {"name": "path"}, {}, ["données/private/x", "a"],
                                    None) == ["a"]
    assert policy.completion_values(ref, {"name": 3}, {}, ["a"], None) == []
    assert load_policy_text("version = 1\n").completion_values(
        ref, {"name": "path"}, {}, ["a"], None) == []


def test_prompt_completion_values_follow_the_rules_on_that_argument() -> None:
    policy = load_policy_text(POLICY)
    ref = {"type": "ref/prompt", "name": "greet"}
    assert policy.completion_values(ref, {"name": "style"}, {}, ["short", "rude", "long"],
                                    None) == ["short", "long"]
    assert policy.completion_values(ref, {"name": "other"}, {}, ["x"], None) == ["x"]
    ops = {"type": "ref/prompt", "name": "ops_only"}
    assert policy.completion_values(ops, {"name": "x"}, {}, ["x"], "LegalAgent") == []
    unlisted = {"type": "ref/prompt", "name": "unlisted"}
    assert policy.completion_values(unlisted, {"name": "x"}, {}, ["x"], None) == []
