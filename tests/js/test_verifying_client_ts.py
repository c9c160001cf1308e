"""The Python verifying client against the TypeScript notarized fixture server (honest, and
lying after it notarized), and the JavaScript CLI reading the evidence the Python client kept:
the same store and bundle in both languages, the same verdicts.

Needs ``node`` and js/node_modules, as tests/js/test_js_server.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from notary.verifier.evidence import EvidenceStore
from notary.verifier.mcp_client import ReceiptCheckError, VerifyingClient
from tests.notary_server import LiveNotary, capture_cli

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "js"
CALLS = [("add", {"a": 2, "b": 40}), ("echo", {"text": "héllo \u2028"}), ("boom", {})]


@pytest.fixture(scope="module")
def server_script() -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: the JavaScript package needs Node 20+")
    out = subprocess.run([node, "test/support/build-fixture.mjs"], cwd=JS, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())


def params(script: Path, notary: LiveNotary, **env: str) -> StdioServerParameters:
    node = shutil.which("node")
    assert node is not None
    return StdioServerParameters(command=node, args=[str(script)], cwd=str(JS), env={
        "NOTARY_URL": notary.url, "NOTARY_API_KEY": notary.key, "FIXTURE_SDK": "v1", **env})


def js_verify(*argv: str) -> tuple[int, str]:
    node = shutil.which("node")
    assert node is not None
    out = subprocess.run([node, str(JS / "bin" / "mcp-notary.js"), "verify", *argv],
                         capture_output=True, text=True, timeout=120, check=False)
    return out.returncode, out.stdout + out.stderr


async def test_kept_by_python_verified_by_both_clis(notary: LiveNotary, server_script: Path,
                                                    tmp_path: Path) -> None:
    store = tmp_path / "evidence"
    async with VerifyingClient(Client(params(server_script, notary), mode="legacy"),
                               notary.trust(), evidence=store, server="ts-fixture") as client:
        for tool, arguments in CALLS:
            result = await client.call_tool(tool, arguments)
            assert result.meta is not None
            assert result.meta["com.rightshold/verification"]["status"] == "verified"
    bundle = tmp_path / "evidence.jsonl"
    assert EvidenceStore(store).export_bundle(bundle) == len(CALLS)
    flags = [*notary.trust_args(), "--offline", "--no-state", "--json"]
    for target in (store, bundle):
        code, out, _ = await capture_cli("verify", str(target), *flags)
        assert code == 0, out
        js_code, js_out = js_verify(str(target), *flags)
        assert js_code == 0, js_out
        py, js = json.loads(out), json.loads(js_out)
        assert [c["levels"] for c in py["calls"]] == [c["levels"] for c in js["calls"]]
        assert [c["source"] for c in py["calls"]] == [c["source"] for c in js["calls"]]


@pytest.mark.parametrize(("lie", "status"), [("changed", "invalid"), ("missing", "missing"),
                                             ("other", "invalid")])
async def test_a_lying_ts_server_is_caught(notary: LiveNotary, server_script: Path, lie: str,
                                           status: str) -> None:
    async with VerifyingClient(Client(params(server_script, notary, FIXTURE_LIE=lie),
                                      mode="legacy"), notary.trust()) as client:
        if lie == "other":
            await client.call_tool("add", {"a": 1, "b": 1})
        with pytest.raises(ReceiptCheckError) as caught:
            await client.call_tool("add", {"a": 2, "b": 3})
    assert caught.value.status == status
