"""The gateway in front of a real third-party MCP server: @modelcontextprotocol/server-filesystem.

The npm package (pinned) is installed with ``npm install`` into a throwaway prefix, or taken
from ``js/node_modules`` when the JS package has it, and run with ``node`` over stdio; the test
fails (never skips) without Node. The server is given a whole directory; the gateway, with
``examples/gateway-filesystem.toml`` pointed at it, narrows that to its ``public`` part, so a
call the server itself would have served (``public/../private/secret.txt``) shows that the
gateway decided, in normalized form, before anything was forwarded.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, RequestParamsMeta, TextContent

from ledger.core.note import Ed25519Verifier
from notary.core.receipts import Jwks
from notary.gateway import GatewayConfig, build_gateway, codes
from notary.gateway.store import read_decisions
from notary.sdk import NotaryClient, verify_tool_result
from tests.node_tools import REPO_ROOT, node_binary, npm_package
from tests.notary_server import app_notary

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"
EXAMPLE = REPO_ROOT / "examples" / "gateway-filesystem.toml"
PLACEHOLDER = "/srv/mcp-files"


@pytest.fixture(scope="module")
def server_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    package = npm_package(PACKAGE, VERSION, tmp_path_factory.mktemp("npm-fs"))
    script = package / "dist" / "index.js"
    assert script.is_file(), f"{PACKAGE} has no dist/index.js in {package}"
    return script


@contextlib.asynccontextmanager
async def filesystem_gateway(tmp_path: Path, server_script: Path
                             ) -> AsyncIterator[tuple[Client, Path, Any]]:
    """The gateway (in process, as mcp.Client sees it) in front of the filesystem server.

    A context manager rather than a fixture: the client's task group must be entered and
    left in the same task.
    """
    root = (tmp_path / "files").resolve()
    (root / "public" / "docs").mkdir(parents=True)
    (root / "public" / "inbox").mkdir()
    (root / "private").mkdir()
    (root / "public" / "docs" / "readme.txt").write_text("public words\n")
    (root / "public" / ".env").write_text("TOKEN=hidden\n")
    (root / "private" / "secret.txt").write_text("do not leak\n")
    policy = tmp_path / "gateway-filesystem.toml"
    policy.write_text(EXAMPLE.read_text().replace(PLACEHOLDER, str(root)))
    async with app_notary(tmp_path / "notary-data") as app:
        async with NotaryClient(app.url) as c:
            jwks = Jwks(await c.jwks())
        upstream = StdioServerParameters(command=node_binary(),
                                         args=[str(server_script), str(root)])
        config = GatewayConfig(upstream=upstream, policy_path=policy,
                               salt_path=tmp_path / "gw.salt", state_path=tmp_path / "gw.db",
                               notary_url=app.url, api_key=app.create_api_key("fs"))
        from notary.gateway.salt import ensure_salt

        ensure_salt(config.salt_path)
        async with Client(build_gateway(config), mode="auto") as client:
            yield client, root, (jwks, Ed25519Verifier.from_vkey(app.vkey), config)


def text_of(result: CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def assert_denied(result: CallToolResult) -> None:
    assert result.is_error
    assert (result.meta or {})[codes.AUTH_ERROR_META_KEY] == {
        "code": codes.AUTHORIZATION_DENIED}


async def test_filesystem_server_behind_the_example_policy(tmp_path: Path,
                                                          server_script: Path) -> None:
    async with filesystem_gateway(tmp_path, server_script) as (client, root, trust):
        await _exercise(client, root, *trust)


async def _exercise(client: Client, root: Path, jwks: Jwks, log_key: Ed25519Verifier,
                    config: GatewayConfig) -> None:
    listed = {t.name for t in (await client.list_tools()).tools}
    # Offered: what the policy lists; edit_file, create_directory, move_file are not.
    assert {"read_text_file", "list_directory", "write_file", "read_multiple_files"} <= listed
    assert not listed & {"edit_file", "create_directory", "move_file"}

    public = root / "public"
    readme = str(public / "docs" / "readme.txt")
    result = await client.call_tool("read_text_file", {"path": readme})
    assert not result.is_error and "public words" in text_of(result)
    assert verify_tool_result("read_text_file", {"path": readme}, result, jwks=jwks,
                              log_verifier=log_key, server="filesystem-gateway").valid
    # Odd spellings of an allowed path are judged in normal form, and forwarded as sent.
    odd = f"{public}//docs/./readme.txt"
    assert "public words" in text_of(await client.call_tool("read_text_file", {"path": odd}))

    denied: list[tuple[str, dict[str, Any]]] = [
        # The server would serve this one (it is inside its directory): the gateway does not.
        ("read_text_file", {"path": f"{public}/../private/secret.txt"}),
        ("read_text_file", {"path": f"{public}/docs/../../private/secret.txt"}),
        ("read_text_file", {"path": str(root / "private" / "secret.txt")}),
        ("read_text_file", {"path": f"{public}/.env"}),                    # hidden name
        ("read_text_file", {"path": f"{root}/publicity/x.txt"}),           # segment prefix
        ("read_text_file", {"path": "public/docs/readme.txt"}),            # relative
        ("read_multiple_files", {"paths": [readme, f"{public}/../private/secret.txt"]}),
        ("list_directory", {"path": str(root)}),
        ("edit_file", {"path": readme, "edits": []}),                      # not in the policy
        ("move_file", {"source": readme, "destination": f"{public}/inbox/x.txt"}),
    ]
    for tool, arguments in denied:
        result = await client.call_tool(tool, arguments)
        assert_denied(result)
        assert "do not leak" not in text_of(result) and "TOKEN" not in text_of(result)

    both = await client.call_tool("read_multiple_files", {"paths": [readme, odd]})
    assert not both.is_error and text_of(both).count("public words") == 2
    listing = await client.call_tool("list_directory", {"path": str(public / "docs")})
    assert "readme.txt" in text_of(listing)

    # Writes: only into the inbox, only with an idempotency key, never twice.
    key = cast(RequestParamsMeta, {codes.IDEMPOTENCY_META_KEY: "write-1"})
    target = public / "inbox" / "note.txt"
    args = {"path": str(target), "content": "hello"}
    assert_denied(await client.call_tool("write_file", {**args, "path": f"{public}/note.txt"},
                                         meta=cast(RequestParamsMeta, {
                                             codes.IDEMPOTENCY_META_KEY: "write-0"})))
    written = await client.call_tool("write_file", args, meta=key)
    assert not written.is_error, written
    assert target.read_text() == "hello"
    target.write_text("changed meanwhile")
    again = await client.call_tool("write_file", args, meta=key)
    assert (again.meta or {})[codes.REPLAY_META_KEY] is True
    assert target.read_text() == "changed meanwhile"  # the retry never reached the server
    assert (root / "private" / "secret.txt").read_text() == "do not leak\n"

    # Every decision is evidence, with the path facts in normal form.
    decisions = [e async for e in read_decisions(config.state_path)]
    paths = [e.facts.get("path") for e in decisions if e.record["tool"] == "read_text_file"]
    assert f"{root}/private/secret.txt" in paths and odd not in paths
