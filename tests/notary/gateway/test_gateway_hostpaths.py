"""Path facts resolved through symlinks on the gateway's host (``notary.gateway.hostpaths``).

Real files and symlinks in a temporary directory; the end-to-end counterpart, against the
reference filesystem server, is in ``test_gateway_filesystem.py``.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from mcp.client.stdio import StdioServerParameters

from notary.gateway import GatewayConfig
from notary.gateway.hostpaths import (
    has_path_facts,
    resolve_path,
    resolve_path_facts,
    symlinked_rule_paths,
)
from notary.gateway.policy import load_policy_text
from notary.gateway.salt import ensure_salt
from notary.gateway.store import GatewayStore
from notary.sdk import NotaryClient

POLICY = """
version = 1
[tools.read]
facts.path = { from = "path", type = "path" }
facts.many = { from = "many", type = "paths" }
facts.note = { from = "note", type = "string" }
rules = [
  { fact = "path", op = "prefix", value = "ROOT/public" },
  { fact = "path", op = "not prefix", value = "ROOT/public/private" },
]
[tools.plain]
facts.note = { from = "note", type = "string" }
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path.resolve()
    (root / "public" / "docs").mkdir(parents=True)
    (root / "public" / "private").mkdir()
    (root / "public" / "docs" / "a.txt").write_text("a")
    (root / "public" / "docs" / "alias").symlink_to("a.txt")
    (root / "public" / "docs" / "link").symlink_to(root / "public" / "private")
    (root / "public" / "docs" / "up").symlink_to("../private")
    (root / "public" / "docs" / "dangling").symlink_to(root / "public" / "private" / "new")
    (root / "public" / "docs" / "loop").symlink_to("loop")
    return root


def test_resolve_path_follows_what_exists_and_appends_the_rest(tree: Path) -> None:
    docs = tree / "public" / "docs"
    private = tree / "public" / "private"
    assert resolve_path(f"{docs}/a.txt") == f"{docs}/a.txt"
    assert resolve_path(f"{docs}/alias") == f"{docs}/a.txt"
    assert resolve_path(f"{docs}/link/secret.txt") == f"{private}/secret.txt"
    assert resolve_path(f"{docs}/up/x/y") == f"{private}/x/y"          # relative target
    assert resolve_path(f"{docs}/link/new/dir/f") == f"{private}/new/dir/f"  # missing tail
    assert resolve_path(f"{docs}/dangling") == f"{private}/new"         # target not there yet
    assert resolve_path(f"{tree}/nothing/here") == f"{tree}/nothing/here"
    assert resolve_path("relative/link") == "relative/link"             # left alone
    assert resolve_path(f"{docs}/loop/x").startswith(f"{docs}/loop")   # never hangs


def test_names_on_disk_are_matched_and_compared_in_nfc(tree: Path) -> None:
    """A name that does not exist as spelled is matched to its one canonically equivalent
    entry, as the reference filesystem server does, so a symlink below a decomposed folder
    is followed too; the result is in NFC, the form rules compare in."""
    composed = "Vertr\u00e4ge"
    decomposed = unicodedata.normalize("NFD", composed)
    (tree / decomposed).mkdir()
    (tree / decomposed / "link").symlink_to(tree / "public" / "private")
    (tree / "public" / "docs" / "odd").symlink_to(tree / decomposed)
    assert resolve_path(f"{tree}/{composed}/link/x") == f"{tree}/public/private/x"
    assert resolve_path(f"{tree}/public/docs/odd/y") == f"{tree}/{composed}/y"
    assert resolve_path(f"{tree}/public/docs/odd/link") == f"{tree}/public/private"
    # Two entries equivalent to the name: none is chosen (the server refuses such a path).
    (tree / "e\u0301t\u00e9").mkdir()
    (tree / "\u00e9te\u0301").mkdir()
    assert resolve_path(f"{tree}/\u00e9t\u00e9/z") == f"{tree}/\u00e9t\u00e9/z"


def test_resolve_path_facts_before_the_rules(tree: Path) -> None:
    policy = load_policy_text(POLICY.replace("ROOT", str(tree)))
    docs = tree / "public" / "docs"
    spec = policy.tools["read"]
    assert has_path_facts(spec) and not has_path_facts(policy.tools["plain"])
    assert not has_path_facts(None)

    facts, problems = policy.facts_for("read", {"path": f"{docs}/link/s", "note": "n",
                                                "many": [f"{docs}/alias", f"{docs}/up"]}, None)
    assert facts["path"] == f"{docs}/link/s" and not problems  # lexical, as extracted
    resolved, problems = resolve_path_facts(spec, facts)
    assert resolved["path"] == f"{tree}/public/private/s" and not problems
    assert resolved["many"] == [f"{docs}/a.txt", f"{tree}/public/private"]
    assert resolved["note"] == "n" and facts["path"] == f"{docs}/link/s"  # input unchanged
    assert not policy.judge("read", resolved, problems).allowed
    assert policy.judge("read", facts, problems).allowed  # what a lexical check concluded

    # A path fact that cannot be resolved is dropped: every rule on it fails.
    (docs / "long").symlink_to("/" + "/".join(["y" * 200] * 19))  # resolves past PATH_MAX
    far = f"{docs}/long/{'z' * 250}/{'z' * 250}"
    resolved, problems = resolve_path_facts(spec, {"tool": "read", "path": far})
    assert "path" not in resolved and problems == [
        "fact 'path': the path is longer than 4096 characters"]
    assert resolve_path_facts(None, {"tool": "x"}) == ({"tool": "x"}, [])


def test_paths_are_resolved_for_a_local_upstream_only(tmp_path: Path) -> None:
    from notary.gateway.runtime import GatewayRuntime  # deferred: the mcp SDK is heavy

    ensure_salt(tmp_path / "s.salt")

    def runtime(upstream: object, flag: bool | None = None) -> GatewayRuntime:
        config = GatewayConfig(upstream=upstream, policy_path=tmp_path / "p.toml",  # type: ignore[arg-type]
                               salt_path=tmp_path / "s.salt", state_path=tmp_path / "g.db",
                               notary_url="http://127.0.0.1:9", api_key="k",
                               resolve_paths=flag)
        notary = NotaryClient("http://127.0.0.1:9", "k")  # never called here
        return GatewayRuntime(config, "gw", GatewayStore(tmp_path / "g.db"), notary)

    local = StdioServerParameters(command="node", args=["server.js"])
    assert runtime(local).resolve_paths
    assert not runtime("http://127.0.0.1:9/mcp").resolve_paths
    assert not runtime(local, False).resolve_paths
    assert runtime("http://127.0.0.1:9/mcp", True).resolve_paths


def test_a_prefix_written_through_a_symlink_is_refused(tree: Path) -> None:
    """Facts are resolved, so a rule through a symlink would never match: an allow rule would
    deny everything, and a deny rule (here on ``docs/link``, which is ``private``) nothing."""
    text = POLICY.replace("ROOT/public/private", "ROOT/public/docs/link")
    problems = symlinked_rule_paths(load_policy_text(text.replace("ROOT", str(tree))))
    assert len(problems) == 1 and f"{tree}/public/private" in problems[0], problems
    assert symlinked_rule_paths(load_policy_text(POLICY.replace("ROOT", str(tree)))) == []
    # Where the policy's folders do not exist (yet) there is nothing to resolve.
    assert symlinked_rule_paths(load_policy_text(POLICY.replace("ROOT", "/nonexistent"))) == []
