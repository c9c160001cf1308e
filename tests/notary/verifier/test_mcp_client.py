"""The verifying client end to end: the real ``mcp.Client`` ↔ a notarized MCP server (in
process) ↔ the real notary app on loopback; and servers that lie about their results.

A lying server is the honest one with a middleware *outside* the notarizer (registered before
it), so it rewrites what the client receives after the receipt was made: a changed result, a
missing receipt, the receipt of another call, an old result replayed. Each must be caught, and
handled as the caller configured (raise, mark, log); only verified calls reach the evidence
store, which ``notary verify`` reads as a directory and as a bundle.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from ledger.core.cosignature import CosignatureSigner
from notary.core.meta import TOOL_CALL_META_KEY, VERIFICATION_META_KEY
from notary.sdk import notarize_server
from notary.sdk import received_wire as sdk_received_wire
from notary.verifier.evidence import BUNDLE_FORMAT, EvidenceStore, read_evidence
from notary.verifier.mcp_client import ReceiptCheckError, VerifyingClient, received_wire
from notary.verifier.trust import parse_witness_keys
from tests.notary_server import LiveNotary, capture_cli

CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("add", {"a": 2, "b": 40}),
    ("greet", {"name": "héllo ☃"}),
    ("fail", None),
]


def build(notary: LiveNotary, lie: str | None = None) -> MCPServer[Any]:
    """A notarized server; with ``lie``, one that rewrites results after notarization."""
    server: MCPServer[Any] = MCPServer("honest")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    def greet(name: str) -> str:
        return f"hello {name}"

    @server.tool()
    def fail() -> str:
        raise ValueError("no")

    if lie is not None:
        kept: list[Mapping[str, Any]] = []

        async def liar(ctx: Any, call_next: Any) -> Any:
            result = await call_next(ctx)
            if ctx.method != "tools/call" or not isinstance(result, Mapping):
                return result
            out = copy.deepcopy(dict(result))
            meta = out.get("_meta", {})
            if lie == "changed":
                out["content"] = [{"type": "text", "text": "something else"}]
            elif lie == "missing":
                meta.pop(TOOL_CALL_META_KEY, None)
            elif lie in ("other", "replay"):
                kept.append(copy.deepcopy(dict(result)))
                if len(kept) > 1:  # the previous call's receipt (and, replayed, its result)
                    if lie == "replay":
                        return kept[0]
                    meta[TOOL_CALL_META_KEY] = kept[0]["_meta"][TOOL_CALL_META_KEY]
            return out

        server.middleware.append(liar)  # before the notarizer: outside it
    return notarize_server(server, notary.notarizer("honest"))


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def finding(result: CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    out: dict[str, Any] = result.meta[VERIFICATION_META_KEY]
    return out


async def test_every_result_verified_kept_and_reverified(notary: LiveNotary, mode: str,
                                                         tmp_path: Path) -> None:
    store = tmp_path / "evidence"
    async with VerifyingClient(Client(build(notary), mode=mode), notary.trust(),
                               evidence=store, server="honest") as client:
        assert (await client.list_tools()).tools  # everything else is the client's
        for tool, arguments in CALLS:
            result = await client.call_tool(tool, arguments)
            got = finding(result)
            assert got["status"] == "verified", got
            assert got["levels"] == {"record": "passed", "signature": "passed",
                                     "inclusion": "passed", "witnesses": "skipped",
                                     "consistency": "skipped"}
            assert result.meta is not None and TOOL_CALL_META_KEY in result.meta
            assert (store / f"{got['id']}.json").is_file()
    assert len(EvidenceStore(store).files()) == len(CALLS)

    code, out, _ = await capture_cli("verify", str(store), *notary.trust_args(), "--offline",
                                     "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["valid"] and len(doc["calls"]) == len(CALLS)
    assert all(c["levels"]["record"]["status"] == "passed" for c in doc["calls"])

    bundle = tmp_path / "evidence.jsonl"
    assert EvidenceStore(store).export_bundle(bundle) == len(CALLS)
    lines = bundle.read_text().splitlines()
    assert json.loads(lines[0]) == {"format": BUNDLE_FORMAT, "calls": len(CALLS)}
    code, out, _ = await capture_cli("verify", str(bundle), *notary.trust_args(), "--offline")
    assert code == 0, out
    assert out.rstrip().endswith(f"{len(CALLS)} of {len(CALLS)} saved calls verified")

    # A call changed in the store, and a truncated bundle, are caught when read back.
    first = EvidenceStore(store).files()[0]
    saved = json.loads(first.read_text())
    saved["arguments"] = {"tampered": True}
    first.write_text(json.dumps(saved))
    again = tmp_path / "again.jsonl"
    code, out, _ = await capture_cli("verify", str(store), *notary.trust_args(), "--offline",
                                     "--export", str(again))
    assert code == 1, out
    assert f"{len(CALLS) - 1} of {len(CALLS)} saved calls verified" in out
    entries = read_evidence(again)
    assert entries is not None and len(entries) == len(CALLS) - 1
    bundle.write_text("\n".join(lines[:-1]) + "\n")
    code, _, err = await capture_cli("verify", str(bundle), *notary.trust_args(), "--offline")
    assert code == 2 and "truncated" in err, err


LIES = {
    "changed": ("invalid", "record"),
    "missing": ("missing", "no _meta"),
    "other": ("invalid", "record"),
    "replay": ("invalid", "replayed"),
}


@pytest.mark.parametrize("lie", sorted(LIES))
async def test_a_lying_server_is_caught_and_raised(notary: LiveNotary, mode: str, lie: str,
                                                   tmp_path: Path) -> None:
    store = tmp_path / "evidence"
    status, why = LIES[lie]
    async with Client(build(notary, lie), mode=mode) as raw:
        client = VerifyingClient(raw, notary.trust(), evidence=store)
        if lie in ("other", "replay"):  # the first call is honest; the lie comes second
            first = await client.call_tool("add", {"a": 1, "b": 1})
            assert finding(first)["status"] == "verified"
        arguments = {"a": 1, "b": 1} if lie == "replay" else {"a": 2, "b": 3}
        with pytest.raises(ReceiptCheckError) as caught:
            await client.call_tool("add", arguments)
    assert caught.value.status == status
    assert why in str(caught.value), str(caught.value)
    assert len(EvidenceStore(store).files()) == (1 if lie in ("other", "replay") else 0)


@pytest.mark.parametrize("lie", ["changed", "missing"])
async def test_mark_and_log_return_the_result_with_the_finding(
        notary: LiveNotary, lie: str, caplog: pytest.LogCaptureFixture) -> None:
    status, _ = LIES[lie]
    async with Client(build(notary, lie)) as raw:
        marked = VerifyingClient(raw, notary.trust(), on_missing="mark", on_invalid="mark")
        logged = VerifyingClient(raw, notary.trust(), on_missing="log", on_invalid="log")
        with caplog.at_level(logging.WARNING, "notary.verifier.mcp_client"):
            result = await marked.call_tool("greet", {"name": "secret-arg"})
            assert finding(result)["status"] == status
            assert not caplog.records
            result = await logged.call_tool("greet", {"name": "secret-arg"})
            assert finding(result)["status"] == status
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert status in caplog.text and "greet" in caplog.text
    assert "secret-arg" not in caplog.text and "something else" not in caplog.text


async def test_a_witness_policy_is_applied(notary: LiveNotary) -> None:
    """A receipt fresh from the call carries no cosignature: a quorum of one fails it."""
    witness = parse_witness_keys(
        [CosignatureSigner.generate("witness.example").verifier_key_text()])[0]
    async with Client(build(notary)) as raw:
        client = VerifyingClient(raw, notary.trust(witnesses=(witness,), quorum=1),
                                 on_invalid="mark")
        got = finding(await client.call_tool("add", {"a": 1, "b": 2}))
    assert got["status"] == "invalid" and got["levels"]["witnesses"] == "failed", got


def test_received_wire_is_the_sdks() -> None:
    result = CallToolResult.model_validate(
        {"content": [], "structuredContent": None, "isError": False, "_meta": {"k": 1}})
    assert received_wire(result) == sdk_received_wire(result)
    assert received_wire(result)["structuredContent"] is None
    plain = CallToolResult.model_validate({"content": []})
    assert received_wire(plain) == sdk_received_wire(plain)


def test_bad_actions_are_refused(notary: LiveNotary) -> None:
    with pytest.raises(ValueError, match="on_invalid"):
        VerifyingClient(object(), notary.trust(), on_invalid="ignore")  # type: ignore[arg-type]
