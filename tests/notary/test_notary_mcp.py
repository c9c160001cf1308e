"""``notary mcp``: the verifier MCP server, through ``mcp.Client`` in process, over stdio and
over streamable HTTP, in both protocol modes (``auto`` = 2026-07-28, ``legacy`` = 2025-11-25).

The notary it talks to is the real app on 127.0.0.1 (the ``notary`` fixture: LiveNotary).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.receipts import ReceiptKey
from notary.mcp_server import ServerConfig, build_server
from notary.verifier.state import StateFile
from notary.verifier.trust import parse_log_keys
from tests.notary_server import Call, LiveNotary, capture_cli, free_port
from tests.verifying import json_out

MODES = ["auto", "legacy"]
REPO = Path(__file__).resolve().parents[2]


def levels(structured: dict[str, Any] | None) -> dict[str, str]:
    assert structured is not None
    return {k: v["status"] for k, v in structured["levels"].items()}


async def exercise(client: Client, notary: LiveNotary, call: Call) -> None:
    """List the tools and call all three, checking the structured results."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"verify_tool_call", "get_receipt", "get_checkpoint"}
    assert tools["verify_tool_call"].output_schema is not None

    # A tool result plus tool name and arguments; keys from the configured notary and log key.
    r = await client.call_tool("verify_tool_call", {
        "result": call.result, "tool": call.tool, "arguments": call.arguments})
    assert not r.is_error, r.content
    assert r.structured_content is not None and r.structured_content["valid"] is True
    assert levels(r.structured_content) == {
        "record": "passed", "signature": "passed", "inclusion": "passed",
        "witnesses": "skipped", "consistency": "passed"}
    assert "record" in r.content[0].text  # type: ignore[union-attr]

    # A tampered call is a normal result that says why it is not valid.
    r = await client.call_tool("verify_tool_call", {
        "result": call.result, "tool": call.tool, "arguments": {"x": "forged"}})
    assert not r.is_error and r.structured_content is not None
    assert r.structured_content["valid"] is False
    assert levels(r.structured_content)["record"] == "failed"

    # A saved call with explicit trust, offline.
    r = await client.call_tool("verify_tool_call", {
        "call": call.saved, "jwks": notary.jwks_json, "log_keys": [notary.vkey], "offline": True})
    assert not r.is_error and r.structured_content is not None
    assert r.structured_content["valid"] is True
    # Receipt and record.
    r = await client.call_tool("verify_tool_call", {
        "receipt": call.receipt, "record": call.record.to_json(), "jwks": notary.jwks_json})
    assert r.structured_content is not None and r.structured_content["valid"] is True
    # Receipt keys that did not sign it: level 2 fails, the rest stands.
    r = await client.call_tool("verify_tool_call", {
        "call": call.saved, "jwks": {"keys": [ReceiptKey.generate().public_jwk()]}})
    assert not r.is_error and r.structured_content is not None
    assert r.structured_content["valid"] is False
    assert levels(r.structured_content)["signature"] == "failed"
    assert levels(r.structured_content)["inclusion"] == "passed"
    # A malformed JWKS is unusable input: an error result.
    r = await client.call_tool("verify_tool_call", {
        "call": call.saved, "jwks": {"keys": [{**notary.jwks_json["keys"][0], "kid": "x"}]}})
    assert r.is_error
    r = await client.call_tool("verify_tool_call", {})
    assert r.is_error and "exactly one" in r.content[0].text  # type: ignore[union-attr]
    r = await client.call_tool("verify_tool_call", {"call": call.saved, "log_keys": ["@/etc/x"]})
    assert r.is_error

    # get_receipt: the receipt with a proof to the latest checkpoint.
    r = await client.call_tool("get_receipt", {"id": call.receipt["id"]})
    assert not r.is_error and r.structured_content is not None
    assert r.structured_content["signature"] == call.receipt["signature"]
    assert r.structured_content["proof"].startswith("c2sp.org/tlog-proof@v1\n")
    r = await client.call_tool("get_receipt", {"id": "tc_AAAAAAAAAAAAAAAAAAAAAA"})
    assert r.is_error and "404" in r.content[0].text  # type: ignore[union-attr]
    r = await client.call_tool("get_receipt", {"id": "nope"})
    assert r.is_error

    # get_checkpoint: parsed and verified under the configured log key.
    r = await client.call_tool("get_checkpoint", {})
    assert not r.is_error and r.structured_content is not None
    cp = r.structured_content
    assert cp["origin"] == call.receipt["ledger"]["origin"] and cp["size"] >= 1
    assert cp["verified"] is True and cp["checkpoint"].startswith(cp["origin"] + "\n")
    assert len(bytes.fromhex(cp["root_hex"])) == 32


def config(notary: LiveNotary, tmp_path: Path) -> ServerConfig:
    return ServerConfig(notary_url=notary.url, log_keys=parse_log_keys([notary.vkey]),
                        state=StateFile(tmp_path / "state.json"))


@pytest.mark.parametrize("mode", MODES)
async def test_in_process(notary: LiveNotary, tmp_path: Path, mode: str) -> None:
    call = await notary.notarize(q="in-process")
    async with Client(build_server(config(notary, tmp_path)), mode=mode) as client:
        await exercise(client, notary, call)


async def test_unconfigured_and_offline_server(notary: LiveNotary, tmp_path: Path) -> None:
    call = await notary.notarize(q="bare")
    async with Client(build_server(ServerConfig(offline=True))) as client:
        r = await client.call_tool("get_receipt", {"id": call.receipt["id"]})
        assert r.is_error and "--notary" in r.content[0].text  # type: ignore[union-attr]
        r = await client.call_tool("get_checkpoint", {})
        assert r.is_error
        # No trust at all: levels 2-3 are skipped, so the call is not valid (never a silent pass).
        r = await client.call_tool("verify_tool_call", {"call": call.saved})
        assert not r.is_error and r.structured_content is not None
        assert r.structured_content["valid"] is False
        assert levels(r.structured_content)["signature"] == "skipped"
        # The result without an embedded receipt cannot be fetched offline.
        result = copy.deepcopy(call.result)
        del result["_meta"][TOOL_CALL_META_KEY]["receipt"]
        r = await client.call_tool("verify_tool_call", {**{"call": {**call.saved,
                                                                    "result": result}}})
        assert r.is_error and "offline" in r.content[0].text  # type: ignore[union-attr]


def _argv(notary: LiveNotary, tmp_path: Path) -> list[str]:
    return ["-m", "notary.cli.main", "mcp", "--notary", notary.url, "--log-key", notary.vkey,
            "--state", str(tmp_path / "state.json")]


def _env() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "NO_COLOR": "1"}


@pytest.mark.parametrize("mode", MODES)
async def test_stdio(notary: LiveNotary, tmp_path: Path, mode: str) -> None:
    call = await notary.notarize(q="stdio")
    params = StdioServerParameters(command=sys.executable, args=_argv(notary, tmp_path),
                                   env=_env(), cwd=str(tmp_path))
    async with Client(params, mode=mode) as client:
        await exercise(client, notary, call)


async def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        assert proc.poll() is None, "notary mcp --http exited early"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


async def test_streamable_http(notary: LiveNotary, tmp_path: Path) -> None:
    call = await notary.notarize(q="http")
    port = free_port()
    log = (tmp_path / "mcp-http.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, *_argv(notary, tmp_path), "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
        env={**os.environ, **_env()})
    try:
        await _wait_port(port, proc)
        for mode in MODES:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                await exercise(client, notary, call)
        log.flush()
        # It says where it listens (the operator should not have to guess the path).
        assert f"http://127.0.0.1:{port}/mcp" in (tmp_path / "mcp-http.log").read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.mark.parametrize("mode", MODES)
async def test_results_of_the_sdk_verify(notary: LiveNotary, tmp_path: Path, mode: str) -> None:
    """End to end: a tool notarized by notary.sdk, called through mcp.Client, then verified
    from what the client received, by the CLI and by the verifier MCP server."""
    from notary.sdk import mcp as sdk
    from notary.sdk.client import NotaryClient

    app: MCPServer = MCPServer("calc")

    @app.tool()
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    async with NotaryClient(notary.url, notary.key) as nc:
        sdk.notarize_server(app, sdk.Notarizer(nc, "calc-server"))
        async with Client(app, mode=mode) as client:
            received = await client.call_tool("add", {"a": 2, "b": 3})
    wire = received.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert TOOL_CALL_META_KEY in wire["_meta"]
    saved = tmp_path / "call.json"
    saved.write_text(json.dumps({"tool": "add", "arguments": {"a": 2, "b": 3}, "result": wire}))
    code, out, _ = await capture_cli("verify", str(saved), *notary.trust_args(), "--state",
                                 str(tmp_path / "state.json"), "--json")
    assert code == 0, out
    assert json_out(out)["receipt"]["server"] == "calc-server"
    async with Client(build_server(config(notary, tmp_path))) as verifier:
        r = await verifier.call_tool("verify_tool_call", {
            "result": wire, "tool": "add", "arguments": {"a": 2, "b": 3}})
        assert r.structured_content is not None and r.structured_content["valid"] is True
        r = await verifier.call_tool("verify_tool_call", {
            "result": wire, "tool": "add", "arguments": {"a": 2, "b": 4}})
        assert r.structured_content is not None and r.structured_content["valid"] is False


async def test_cli_flag_errors(tmp_path: Path) -> None:
    for argv in (["mcp", "--http", "nope"], ["mcp", "--log-key", "bad"],
                 ["mcp", "--quorum", "1"], ["mcp", "--offline", "--notary", "http://x"],
                 ["mcp", "--jwks", str(tmp_path / "missing.json")]):
        code, _, err = await capture_cli(*argv)
        assert code == 2, (argv, err)
        if argv[1] == "--http":
            assert "--http must be HOST:PORT, got 'nope'" in err


async def test_checkpoint_verified_with_the_notarys_key_and_server_version(
        notary: LiveNotary, tmp_path: Path) -> None:
    """Without --log-key, get_checkpoint verifies under the key the notary publishes (the
    trust verify_tool_call falls back on too), never ``verified: null``; serverInfo carries
    the package version."""
    import importlib.metadata

    from ledger.core.cosignature import CosignatureSigner

    await notary.notarize(q="tofu")
    async with Client(build_server(ServerConfig(notary_url=notary.url)), mode="legacy") as c:
        assert c.server_info is not None
        assert c.server_info.version == importlib.metadata.version("mcp-notary")
        r = await c.call_tool("get_checkpoint", {})
        cp = r.structured_content
        assert cp is not None and cp["verified"] is True, cp
        assert "fetched from" in cp["verification"]
    # A witness policy: the count is the real one (no cosignature yet on this log).
    w = CosignatureSigner.generate("w.example")
    policy = f"witness w {w.verifier_key_text()}\nquorum w\n"
    from ledger.core.tlog_policy import parse_tlog_policy

    cfg = ServerConfig(notary_url=notary.url, log_keys=parse_log_keys([notary.vkey]),
                       witness_policy=parse_tlog_policy(policy))
    async with Client(build_server(cfg)) as c:
        cp = (await c.call_tool("get_checkpoint", {})).structured_content
        assert cp is not None and cp["verified"] is False
        assert "0 of 1 witness cosigned" in cp["verification"], cp
        call = await notary.notarize(q="policy")
        r = await c.call_tool("verify_tool_call", {"call": call.saved, "offline": True,
                                                   "witness_policy": policy})
        out = r.structured_content
        assert out is not None and levels(out)["witnesses"] == "failed"
        r = await c.call_tool("verify_tool_call", {"call": call.saved, "offline": True,
                                                   "witness_policy": "quorum nobody\n"})
        assert r.is_error  # a malformed policy is an input error, not a verdict


@pytest.mark.parametrize("mode", MODES)
async def test_only_tools_are_advertised_and_an_unknown_tool_is_invalid_params(
        mode: str) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND

    async with Client(build_server(), mode=mode) as client:
        caps = client.server_capabilities
        assert caps.tools is not None
        assert (caps.prompts, caps.resources, caps.completions) == (None, None, None)
        with pytest.raises(MCPError) as info:
            await client.call_tool("no_such_tool", {})
        assert info.value.error.code == INVALID_PARAMS
        for call in (client.list_prompts(), client.list_resources()):
            with pytest.raises(MCPError) as missing:
                await call
            assert missing.value.error.code == METHOD_NOT_FOUND
