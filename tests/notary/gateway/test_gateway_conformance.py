"""The official MCP conformance suite against the fixture servers, directly and via the gateway.

Two fixtures serve what the suite's server scenarios call, each as a child process on streamable
HTTP: ``tests/conformance_fixture.py`` on the Python ``mcp`` SDK, and
``js/test/fixtures/conformance-server.ts`` on the official TypeScript SDK
(``@modelcontextprotocol/server``, compiled with the esbuild that ``js/`` pins). The suite
(npm ``@modelcontextprotocol/conformance``, on the Node 22 that ``js/`` pins) runs every scenario
a spec revision requires, for 2025-11-25 and 2026-07-28, and each must pass for each fixture:
first against the fixture itself (the harness works), then through ``notary gateway --http``
with an allow-all policy (the gateway is faithful).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from tests.conformance import (
    REQUIREMENT_SETS,
    ScenarioResult,
    node22,
    required_scenarios,
    run_suite,
)
from tests.conformance_fixture import allow_all_policy
from tests.gateway_rig import spawn, stop
from tests.notary_server import NotaryProcess, free_port

REPO = Path(__file__).resolve().parents[3]


TS_FIXTURE = REPO / "js" / "test" / "fixtures" / "conformance-server.ts"
TS_ONLY_TOOLS = ("test_streaming_elicitation", "test_logging_tool")
"""Probe tools of the suite's ``server-stateless`` scenario that only the TypeScript fixture
serves (the Python SDK answers an unknown tool with an ``isError`` result, which the scenario
takes as served; the TypeScript SDK answers ``-32602``, so its fixture implements them)."""


def ts_fixture_program() -> str:
    """The TypeScript fixture compiled next to its source (js/test/fixtures/.build/, ignored by
    git, so its SDK imports resolve in js/node_modules) with the esbuild that js/ pins."""
    esbuild = REPO / "js" / "node_modules" / ".bin" / "esbuild"
    if not esbuild.is_file():
        raise AssertionError(f"{esbuild} is missing: run `npm ci` in js/ (scripts/test does)")
    out = TS_FIXTURE.parent / ".build" / "conformance-server.mjs"
    subprocess.run([str(esbuild), str(TS_FIXTURE), f"--outfile={out}", "--format=esm",
                    "--platform=node", "--target=node20", "--log-level=warning"],
                   check=True, capture_output=True, timeout=120)
    return str(out)


@pytest.fixture(scope="module", params=["python", "typescript"])
def fixture_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[str]:
    """The fixture server named by the parameter, on streamable HTTP."""
    port = free_port()
    log = tmp_path_factory.mktemp("fixture") / "fixture.log"
    if request.param == "python":
        proc = spawn(["-m", "tests.conformance_fixture", "--port", str(port)], port, log)
    else:
        proc = spawn([ts_fixture_program(), "--port", str(port)], port, log,
                     program=node22()[0])
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def assert_all_pass(results: dict[str, ScenarioResult], required: list[str], output: str
                    ) -> None:
    missing = [s for s in required if s not in results]
    failing = {s: results[s].failures for s in required if s in results and not results[s].ok}
    assert not missing and not failing, (f"missing: {missing}\nfailing: {failing}\n"
                                         f"{output[-4000:]}")


@pytest.mark.parametrize("requirements", REQUIREMENT_SETS)
def test_fixture_passes_every_required_scenario_directly(
        fixture_url: str, requirements: str, tmp_path: Path) -> None:
    required = required_scenarios(requirements)
    assert len(required) >= 30  # the suite's list was read (30 and 37 at 0.2.0-alpha.12)
    results, output = run_suite(fixture_url, requirements, tmp_path / "out")
    assert_all_pass(results, required, output)


@pytest.fixture(scope="module")
def conformance_notary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """One ``notary serve`` for the module's suite runs: its URL and an API key."""
    with NotaryProcess(tmp_path_factory.mktemp("notary") / "data") as server:
        yield server.url, server.create_api_key("conformance-gateway")


def gateway(upstream: str, notary: tuple[str, str], tmp: Path) -> tuple[subprocess.Popen[bytes],
                                                                         str]:
    """``notary gateway --http`` in front of ``upstream`` with an allow-all policy."""
    (tmp / "policy.toml").write_text(allow_all_policy(extra_tools=TS_ONLY_TOOLS))
    (tmp / "key").write_text(notary[1])
    port = free_port()
    cwd = [] if upstream.startswith("http") else ["--upstream-cwd", str(REPO),
                                                 "--upstream-env", f"PYTHONPATH={REPO}"]
    proc = spawn(["-m", "notary.cli.main", "gateway", "--upstream", upstream, *cwd,
                  "--policy", str(tmp / "policy.toml"),
                  "--state", str(tmp / "state.db"), "--notary", notary[0],
                  "--api-key-file", str(tmp / "key"), "--http", f"127.0.0.1:{port}"],
                 port, tmp / "gateway.log")
    return proc, f"http://127.0.0.1:{port}/mcp"


SESSION_SCENARIOS = ("tools-call-sampling", "tools-call-elicitation", "resources-subscribe")
"""Requests a 2025-era session relays over its own upstream session. Through a command
upstream each suite session starts an upstream process of its own (~2 s here, and the suite
opens one session per scenario): the whole 2025 set passes that way too, in about a minute,
so the test suite runs these three, and the HTTP upstream runs the whole set."""


@pytest.mark.parametrize(("fixture_url", "requirements", "upstream_transport"), [
    ("python", "2025-11-25", "http"), ("python", "2025-11-25", "stdio"),
    ("python", "2026-07-28", "http"), ("python", "2026-07-28", "stdio"),
    ("typescript", "2025-11-25", "http"), ("typescript", "2026-07-28", "http")],
    indirect=["fixture_url"])
def test_every_scenario_passes_through_the_gateway(
        fixture_url: str, conformance_notary: tuple[str, str], requirements: str,
        upstream_transport: str, tmp_path: Path) -> None:
    upstream = (fixture_url if upstream_transport == "http"
                else f"{sys.executable} -m tests.conformance_fixture --stdio")
    only = SESSION_SCENARIOS if (requirements, upstream_transport) == ("2025-11-25",
                                                                        "stdio") else ()
    proc, url = gateway(upstream, conformance_notary, tmp_path)
    try:
        results, output = run_suite(url, requirements, tmp_path / "out", scenarios=only)
    finally:
        stop(proc)
    required = [s for s in required_scenarios(requirements) if not only or s in only]
    passing = sorted(s for s in required if s in results and results[s].ok)
    print(f"{requirements} via {upstream_transport}: {len(passing)}/{len(required)}")
    assert_all_pass(results, required, output + (tmp_path / "gateway.log").read_text()[-3000:])
    # Every decision the gateway took for the suite is in the ledger and re-checks against
    # the revealed policy (receipt signature, inclusion, facts, decision).
    audit = subprocess.run(
        [sys.executable, "-m", "notary.cli.main", "gateway", "audit", "--policy",
         str(tmp_path / "policy.toml"), "--salt-file", str(tmp_path / "state.salt"),
         "--decisions", str(tmp_path / "state.db"), "--notary", conformance_notary[0],
         "--json"],
        cwd=str(REPO), capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stderr[-2000:]
    summary = json.loads(audit.stdout)["summary"]
    assert summary["decisions"] >= len(required) // 2, summary  # calls, reads, prompts
    assert summary["valid"] == summary["decisions"], summary
    assert_every_receipt_verifies(conformance_notary[0])


def assert_every_receipt_verifies(notary_url: str) -> None:
    """Every receipt the notary issued (decisions, and the tool results the suite's client got
    with their receipts) verifies: its signature under the notary's JWKS and its inclusion
    under the log key (the call records stay with the client, so level 1 is not asked)."""
    def get(path: str) -> Any:
        with urllib.request.urlopen(notary_url + path, timeout=30) as r:
            return json.loads(r.read())

    jwks, log_key = Jwks(get("/.well-known/jwks.json")), get("/v1/ledger")["vkey"]
    receipts: list[dict[str, Any]] = []
    cursor: str | None = ""
    while cursor is not None:
        page = get("/v1/tool-calls?limit=100" + (f"&cursor={cursor}" if cursor else ""))
        receipts += page["tool_calls"]
        cursor = page["next_cursor"]
    assert receipts
    for listed in receipts:
        receipt = get(f"/v1/tool-calls/{listed['id']}")
        verdict = verify_receipt(receipt, record=None, jwks=jwks,
                                 log_verifier=Ed25519Verifier.from_vkey(log_key))
        levels = {k: v.status for k, v in verdict.levels.items()}
        assert levels["signature"] == levels["inclusion"] == "passed", (listed["id"], levels)
