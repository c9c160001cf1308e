"""The gateway under test: a notary, a policy with its salt, an upstream, and the checks.

:class:`Rig` (the ``rig`` fixture) holds a notary served in the test's loop with two accounts'
keys, the policy the gateway enforces and where the gateway and the upstream
(``tests/gateway_upstream.py``) keep their state; ``assert_*`` check what a gateway answered
against the notary's keys. :func:`spawn` runs a gateway or an MCP fixture server as a child
process and waits until it listens; :func:`stop` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from ledger.core.note import Ed25519Verifier
from notary.core import aer1
from notary.core.jwks import Jwks
from notary.core.meta import AER1_META_KEY
from notary.core.verification import verify_receipt
from notary.gateway import GatewayConfig
from notary.gateway.policy import load_policy_text
from notary.gateway.salt import ensure_salt
from notary.sdk import NotaryClient, verify_tool_result
from tests.gateway_upstream import read_log
from tests.notary_server import REPO_ROOT, app_notary, run_cli

__all__ = ["AER1_VALIDATOR", "GATEWAY", "POLICY", "Rig", "assert_aer1", "assert_notarized",
           "assert_receipt_verifies", "gateway_rig", "spawn", "stop"]

AER1_SCHEMA = json.loads((REPO_ROOT / "notary" / "aer-1-receipt.schema.json").read_text())
AER1_VALIDATOR = Draft202012Validator(AER1_SCHEMA,
                                      format_checker=Draft202012Validator.FORMAT_CHECKER)
GATEWAY = "test-gateway"

POLICY = """\
version = 1

[gateway]
name = "test-gateway"

[tools.echo]

[tools."payments.transfer"]
idempotent = false
facts.amount = { from = "amount", type = "integer" }
facts.approved = { from = "approval.approved", type = "boolean", default = false }
rules = [
  { fact = "amount", op = "<=", value = LIMIT },
  { fact = "approved", op = "==", value = true },
  { fact = "agent", op = "in", value = ["LegalAgent"] },
]

[tools."weather.forecast"]
[tools."weather.legacy"]
[tools."weather.broken"]
[tools.crash]
[tools.fail]
idempotent = false
"""


@dataclass
class Rig:
    """A notary, a policy with its salt, and where the gateway and the upstream keep state."""

    url: str
    data: Path
    key: str
    jwks: Jwks
    log_key: Ed25519Verifier
    vkey: str
    tmp: Path
    other_key: str = ""  # another account's key (another tenant of the same notary)
    policy: Path = field(init=False)
    salt: Path = field(init=False)
    state: Path = field(init=False)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.policy = self.tmp / "policy.toml"
        self.salt = self.tmp / "policy.salt"
        self.state = self.tmp / "gateway.db"
        self.log = self.tmp / "upstream-calls.jsonl"
        self.write_policy(5000)
        ensure_salt(self.salt)

    def write_policy(self, limit: int | str) -> None:
        self.policy.write_text(POLICY.replace("LIMIT", str(limit)))

    @property
    def commitment(self) -> str:
        return load_policy_text(self.policy.read_text()).commitment(
            self.salt.read_text().strip())

    def upstream_command(self) -> list[str]:
        return [sys.executable, "-m", "tests.gateway_upstream", "--log", str(self.log)]

    def config(self, **kwargs: Any) -> GatewayConfig:
        upstream = StdioServerParameters(command=sys.executable,
                                         args=self.upstream_command()[1:], cwd=str(REPO_ROOT))
        return GatewayConfig(upstream=upstream, policy_path=self.policy, salt_path=self.salt,
                             state_path=self.state, notary_url=self.url, api_key=self.key,
                             **kwargs)

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        return [c for c in read_log(self.log) if tool is None or c["tool"] == tool]

    async def size(self) -> int:
        async with NotaryClient(self.url) as c:
            size = (await c.ledger())["size"]
        assert isinstance(size, int)
        return size

    async def cli(self, *argv: str) -> tuple[int, str]:
        """``notary ARGV`` in a thread (the CLI runs its own event loop)."""
        return await asyncio.to_thread(run_cli, *argv)


@contextlib.asynccontextmanager
async def gateway_rig(tmp: Path) -> AsyncIterator[Rig]:
    """A notary served in this loop with two accounts' keys, and a policy in ``tmp``."""
    async with app_notary(tmp / "notary-data") as app:
        async with NotaryClient(app.url) as c:
            jwks = Jwks(await c.jwks())
        yield Rig(app.url, app.data, await app.new_api_key("gateway"), jwks,
                  Ed25519Verifier.from_vkey(app.vkey), app.vkey, tmp,
                  await app.new_api_key("tenant-b"))


def assert_receipt_verifies(rig: Rig, receipt: dict[str, Any]) -> None:
    verdict = verify_receipt(receipt, record=None, jwks=rig.jwks, log_verifier=rig.log_key)
    assert verdict.levels["signature"].status == "passed", verdict.to_json()
    assert verdict.levels["inclusion"].status == "passed", verdict.to_json()


def assert_aer1(rig: Rig, receipt: dict[str, Any], tool: str, provenance: str,
                status: str = "success") -> None:
    AER1_VALIDATOR.validate(receipt)
    assert receipt["provenance_class"] == provenance
    assert (receipt["tool"], receipt["status"], receipt["receipt_schema_version"]) == (
        tool, status, "0.3")
    verdict = aer1.verify_aer1(receipt, jwks=rig.jwks, log_verifier=rig.log_key)
    assert verdict.valid, verdict.to_json()
    assert receipt["output_hash"] == "sha256:" + receipt["anchor"]["receipt"]["call_sha256"]


def assert_notarized(rig: Rig, result: CallToolResult, tool: str,
                     arguments: dict[str, Any] | None) -> None:
    """The rs-tool-call/1 notarization of the final result, and its AER-1 view."""
    verdict = verify_tool_result(tool, arguments, result, jwks=rig.jwks,
                                 log_verifier=rig.log_key, server=GATEWAY)
    assert verdict.valid, verdict.to_json()
    receipt = (result.meta or {})[AER1_META_KEY]
    status = "error" if result.is_error else "success"
    assert_aer1(rig, receipt, tool, aer1.PROVENANCE_GATEWAY, status)
    block = (result.meta or {})["com.rightshold/tool-call"]
    assert receipt["output_hash"] == "sha256:" + block["call_sha256"]


# Child processes -----------------------------------------------------------------------------


def _wait_for_port(proc: subprocess.Popen[bytes], port: int, errlog: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {errlog.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}: {errlog.read_text()[-3000:]}")


def spawn(argv: list[str], port: int, errlog: Path, *, program: str = sys.executable
          ) -> subprocess.Popen[bytes]:
    """A child process (Python unless ``program``) serving on ``port``; output to ``errlog``."""
    with errlog.open("wb") as err:
        proc = subprocess.Popen([program, *argv], cwd=str(REPO_ROOT),
                                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                                stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        _wait_for_port(proc, port, errlog)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
