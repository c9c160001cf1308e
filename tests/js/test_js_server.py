"""The TypeScript MCP server of js/test/fixtures/server.ts, notarized with the npm package,
called over stdio by the Python ``mcp.Client`` and verified by the Python verifier.

The server runs on ``@modelcontextprotocol/sdk`` 1.x (which speaks the 2025 protocol, so the
client runs in ``legacy`` mode) and on ``@modelcontextprotocol/server`` 2.x (both modes). Its
notary is the real notary application on a 127.0.0.1 socket. Needs ``node`` and the package's
dependencies (``npm ci`` in js/, which ./scripts/test runs before pytest).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from mcp import Client, MCPError, StdioServerParameters
from mcp_types import INTERNAL_ERROR, CallToolResult

from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.records import SPEC
from notary.sdk import Notarizer, NotaryClient, notarization_of, verify_tool_result
from notary.verifier.inputs import call_from_document
from notary.verifier.trust import Trust
from notary.verifier.verify import verify_tool_call
from tests.notary_server import LiveNotary, app_notary, closed_url
from tests.servers import serving

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "js"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("add", {"a": 2, "b": 40}),
    ("echo", {"text": "héllo \u2028 \U0001f600", "n": 9007199254740991}),
    ("boom", {}),
    ("traps", {}),
]


@pytest.fixture(scope="module")
def server_script() -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: the JavaScript package needs Node 20+")
    if not (JS / "node_modules" / "esbuild").exists():
        pytest.fail("js/node_modules is missing: run `npm ci` in js/ (./scripts/test does)")
    out = subprocess.run(
        [node, "test/support/build-fixture.mjs"],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())


def params(script: Path, url: str, key: str, **env: str) -> StdioServerParameters:
    node = shutil.which("node")
    assert node is not None
    return StdioServerParameters(
        command=node,
        args=[str(script)],
        cwd=str(JS),
        env={"NOTARY_URL": url, "NOTARY_API_KEY": key, **env},
    )


def statuses(report: Any) -> dict[str, str]:
    return {n: r["status"] for n, r in report.to_json()["levels"].items()}


@pytest.mark.parametrize(
    ("sdk", "kind", "mode"),
    [
        ("v1", "mcp", "legacy"),
        ("v1", "lowlevel", "legacy"),
        ("v2", "mcp", "auto"),
        ("v2", "mcp", "legacy"),
        ("v2", "lowlevel", "auto"),
    ],
)
async def test_typescript_server_results_verify_in_python(
    server_script: Path, notary: LiveNotary, sdk: str, kind: str, mode: str
) -> None:
    env = {"FIXTURE_SDK": sdk, "FIXTURE_KIND": kind, "FIXTURE_ORDER": "after"}
    trust = Trust(notary.jwks, (notary.log_key,))
    async with Client(params(server_script, notary.url, notary.key, **env), mode=mode) as client:
        calls = [*CALLS, ("list", {})] if (sdk, kind) == ("v2", "mcp") else CALLS
        for tool, arguments in calls:
            result: CallToolResult = await client.call_tool(tool, arguments)
            block = notarization_of(result)
            assert block is not None, (tool, result)
            assert set(block) == {
                "spec",
                "id",
                "call_sha256",
                "salt",
                "receipt_url",
                "verify_url",
                "receipt",
            }
            assert block["spec"] == SPEC and block["receipt"]["server"] == "ts-fixture"
            assert block["receipt_url"] == f"{notary.url}/v1/tool-calls/{block['id']}"
            assert result.is_error is (tool == "boom")
            # the SDK's client-side check (levels 1-3)
            verdict = verify_tool_result(
                tool, arguments, result, jwks=notary.jwks, log_verifier=notary.log_key
            )
            assert verdict.valid, (tool, verdict.to_json())
            # the full verifier on the call as a client saves it
            saved = {
                "tool": tool,
                "arguments": arguments,
                "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"),
            }
            report = await verify_tool_call(call_from_document(saved), trust)
            assert report.valid, (tool, report.to_json())
            assert statuses(report) == {
                "record": "passed",
                "signature": "passed",
                "inclusion": "passed",
                "witnesses": "skipped",
                "consistency": "skipped",
            }
            changed = {**saved, "arguments": {**arguments, "extra": 1}}
            bad = await verify_tool_call(call_from_document(changed), trust)
            assert statuses(bad)["record"] == "failed"
        echo = await client.call_tool("echo", {"text": "meta"})
        assert (echo.meta or {})["example.com/trace"] == "t-1"  # existing _meta is kept


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_unreachable_notary_fails_the_call_loudly(
    server_script: Path, notary: LiveNotary, sdk: str
) -> None:
    dead = closed_url()
    async with Client(
        params(server_script, dead, notary.key, FIXTURE_SDK=sdk), mode="legacy"
    ) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
    assert "could not be notarized" in info.value.message
    assert info.value.data[TOOL_CALL_META_KEY] == {
        "spec": SPEC,
        "notarized": False,
        "tool_executed": True,
        "reason": info.value.data[TOOL_CALL_META_KEY]["reason"],
    }
    async with Client(
        params(server_script, dead, notary.key, FIXTURE_SDK=sdk, NOTARY_ON_UNREACHABLE="mark"),
        mode="legacy",
    ) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
    block = notarization_of(result)
    assert block is not None and block["notarized"] is False and "unavailable" in block["reason"]


def _python_example_server() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_example_notarized_server_js", REPO / "examples" / "notarized_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _withheld(reason: str) -> tuple[int, str, Any]:
    """The documented error for a result of ``add`` that could not be notarized."""
    return (
        INTERNAL_ERROR,
        f'tool "add" ran but its result could not be notarized ({reason}); the result is '
        "withheld. Its side effects, if any, have happened: do not blindly retry a "
        "non-idempotent call.",
        {TOOL_CALL_META_KEY: {"spec": SPEC, "notarized": False, "reason": reason,
                              "tool_executed": True}},
    )


async def _both_servers(stack: AsyncExitStack, script: Path, url: str, keys: tuple[str, str],
                        sdk: str, mode: str) -> dict[str, Client]:
    """The Python example server (in process) and the TypeScript fixture server (over stdio),
    notarizing through ``url`` under one server name, each with its ``mcp.Client``."""
    notarizer = Notarizer(NotaryClient(url, keys[0], retries=1, backoff=0.01), "ts-fixture")
    return {
        "python": await stack.enter_async_context(
            Client(_python_example_server().build_server(notarizer), mode=mode)),
        "js": await stack.enter_async_context(
            Client(params(script, url, keys[1], FIXTURE_SDK=sdk), mode=mode)),
    }


async def _errors(servers: dict[str, Client]) -> dict[str, tuple[int, str, Any]]:
    errors = {}
    for name, client in servers.items():
        with pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
        errors[name] = (info.value.error.code, info.value.error.message, info.value.error.data)
    return errors


SDK_MODES = [("v1", "legacy"), ("v2", "auto"), ("v2", "legacy")]


@pytest.mark.parametrize(("sdk", "mode"), SDK_MODES)
async def test_both_sdks_answer_a_failed_notarization_identically(
    server_script: Path, tmp_path: Path, sdk: str, mode: str
) -> None:
    """A key revoked meanwhile, then a stopped notary: the same error from both SDKs' servers.

    Both servers notarize through one real notary and are called by the Python ``mcp.Client``;
    each failure reaches it as the same JSON-RPC error, code, message and data alike.
    """
    async with app_notary(tmp_path / "data") as app, AsyncExitStack() as stack:
        # One account: a server name belongs to one account, and both servers use one name.
        keys = (await app.new_api_key("sdks"), await app.new_api_key("sdks"))
        servers = await _both_servers(stack, server_script, app.url, keys, sdk, mode)
        for client in servers.values():
            first = await client.call_tool("add", {"a": 1, "b": 2})
            assert notarization_of(first) is not None
        for key in keys:
            await app.revoke_api_key(key)
        revoked = "notary answered 401 unauthorized: this API key has been revoked"
        errors = await _errors(servers)
        assert errors["python"] == errors["js"] == _withheld(revoked)
        await app.stop()
        stopped = (f"notary at {app.url} unavailable after 2 attempt(s): "
                   "connection failed (ECONNREFUSED)")
        errors = await _errors(servers)
        assert errors["python"] == errors["js"] == _withheld(stopped)


@pytest.mark.parametrize(("sdk", "mode"), SDK_MODES)
async def test_both_sdks_answer_a_proxys_5xx_and_4xx_identically(
    server_script: Path, sdk: str, mode: str
) -> None:
    """A front (load balancer, proxy) answering 502, then 413, in plain text: the same error."""
    answers: list[int] = [502]

    async def front(request: web.Request) -> web.Response:
        status = answers[0]
        return web.Response(status=status, text=f"front says {status}\n")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", front)
    async with serving(app) as served, AsyncExitStack() as stack:
        servers = await _both_servers(stack, server_script, served.url, ("nk_a", "nk_b"), sdk,
                                      mode)
        errors = await _errors(servers)
        assert errors["python"] == errors["js"] == _withheld(
            f"notary at {served.url} unavailable after 2 attempt(s): "
            "HTTP 502 http_502: front says 502")
        answers[0] = 413
        errors = await _errors(servers)
        assert errors["python"] == errors["js"] == _withheld(
            "notary answered 413 http_413: front says 413")
