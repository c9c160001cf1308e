"""The gateway in front of a real third-party MCP server: @modelcontextprotocol/server-filesystem.

The npm package (pinned) is installed with ``npm install`` into a throwaway prefix, or taken
from ``js/node_modules`` when the JS package has it, and run with ``node`` over stdio; the test
fails (never skips) without Node. As the example says, the server is given only the ``public``
folder, and the gateway, with ``examples/gateway-filesystem.toml`` pointed at it, narrows that
further. Denials carry the gateway's own code (``policy.AUTHORIZATION_DENIED``), so they show
that the gateway decided before anything was forwarded, not that the server refused.

The test policy also denies ``public/Verträge`` (written in NFC), a folder the server itself
would serve: spelled decomposed (NFD), or reached through a symlink inside an allowed
folder, the server hands out what is in it unless the gateway refuses first.
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, RequestParamsMeta, TextContent

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.gateway import GatewayConfig, build_gateway, codes
from notary.gateway.store import read_decisions
from notary.sdk import NotaryClient, verify_tool_result
from tests.node_tools import REPO_ROOT, node_binary, npm_package
from tests.notary_server import app_notary

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"
EXAMPLE = REPO_ROOT / "examples" / "gateway-filesystem.toml"
PLACEHOLDER = "/srv/mcp-files"
CONTRACTS = "Vertr\u00e4ge"                          # NFC, as the policy writes it
CONTRACTS_NFD = unicodedata.normalize("NFD", CONTRACTS)
OVERVIEW = "\u00dcbersicht"                          # "Übersicht"
OVERVIEW_NFD = unicodedata.normalize("NFD", OVERVIEW)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


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
    public = root / "public"
    (public / "docs").mkdir(parents=True)
    (public / "inbox").mkdir()
    (public / ".git").mkdir()
    (public / CONTRACTS).mkdir()
    (root / "private").mkdir()
    (public / "docs" / "readme.txt").write_text("public words\n")
    (public / "docs" / "pic.png").write_bytes(PNG)
    (public / ".git" / "logo.png").write_bytes(PNG)
    (public / ".env").write_text("TOKEN=hidden\n")
    (public / CONTRACTS / "secret.txt").write_text("contract terms\n")
    (root / "private" / "secret.txt").write_text("do not leak\n")
    (public / "docs" / "alias.txt").symlink_to("readme.txt")            # allowed to allowed
    (public / "docs" / "link").symlink_to(public / CONTRACTS)           # allowed to denied
    (public / "inbox" / "drop").symlink_to(public / CONTRACTS)
    (public / OVERVIEW_NFD).mkdir()                                     # decomposed on disk
    (public / OVERVIEW_NFD / "l").symlink_to(public / CONTRACTS)
    text = EXAMPLE.read_text().replace(PLACEHOLDER, str(root))
    for fact in ("path", "paths"):  # every public rule also denies the contracts folder
        allow = f'{{ fact = "{fact}", op = "prefix", value = "{public}" }}'
        deny = f'{{ fact = "{fact}", op = "not prefix", value = "{public / CONTRACTS}" }}'
        assert allow in text
        text = text.replace(allow, f"{allow}, {deny}")
    policy = tmp_path / "gateway-filesystem.toml"
    policy.write_text(text)
    async with app_notary(tmp_path / "notary-data") as app:
        async with NotaryClient(app.url) as c:
            jwks = Jwks(await c.jwks())
        upstream = StdioServerParameters(command=node_binary(),
                                         args=[str(server_script), str(public)])
        config = GatewayConfig(upstream=upstream, policy_path=policy,
                               salt_path=tmp_path / "gw.salt", state_path=tmp_path / "gw.db",
                               notary_url=app.url, api_key=await app.new_api_key("fs"))
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
    # Offered: what the policy lists; edit_file, create_directory, move_file are not, nor the
    # listings that would show hidden names.
    assert {"read_text_file", "directory_tree", "write_file", "read_multiple_files"} <= listed
    assert not listed & {"edit_file", "create_directory", "move_file", "list_directory",
                         "list_directory_with_sizes"}

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
    tree = await client.call_tool("directory_tree", {"path": str(public / "docs"),
                                                      "excludePatterns": ["**/.*"]})
    assert not tree.is_error and "readme.txt" in text_of(tree)

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


async def test_equivalent_spellings_symlinks_and_hidden_names(tmp_path: Path,
                                                             server_script: Path) -> None:
    """What the server would serve from the denied folder, and every way a tool could reveal
    a hidden name, is refused by the gateway itself."""
    async with filesystem_gateway(tmp_path, server_script) as (client, root, trust):
        public = root / "public"
        config: GatewayConfig = trust[2]
        readme = str(public / "docs" / "readme.txt")
        key = 0

        async def call(tool: str, arguments: dict[str, Any]) -> CallToolResult:
            nonlocal key
            key += 1
            return await client.call_tool(tool, arguments, meta=cast(
                RequestParamsMeta, {codes.IDEMPOTENCY_META_KEY: f"k-{key}"}))

        leaks = ("contract terms", "TOKEN", ".env", ".git", "logo")
        denied: list[tuple[str, dict[str, Any]]] = [
            # The denied folder, spelled composed (as the rule) and decomposed.
            ("read_text_file", {"path": f"{public}/{CONTRACTS}/secret.txt"}),
            ("read_text_file", {"path": f"{public}/{CONTRACTS_NFD}/secret.txt"}),
            ("get_file_info", {"path": f"{public}/{CONTRACTS_NFD}/secret.txt"}),
            ("read_multiple_files", {"paths": [readme,
                                               f"{public}/{CONTRACTS_NFD}/secret.txt"]}),
            # Through a symlink inside an allowed folder; a new file below one, too.
            ("read_text_file", {"path": f"{public}/docs/link/secret.txt"}),
            ("read_multiple_files", {"paths": [readme, f"{public}/docs/link/secret.txt"]}),
            ("write_file", {"path": f"{public}/inbox/drop/planted.txt", "content": "x"}),
            # A folder named decomposed on disk, asked for composed: the server maps the name
            # to the entry, and so does the gateway before it follows the symlink inside.
            ("read_text_file", {"path": f"{public}/{OVERVIEW}/l/secret.txt"}),
            # Hidden names, on every tool that could show one.
            ("get_file_info", {"path": f"{public}/.env"}),
            ("read_media_file", {"path": f"{public}/.git/logo.png"}),
            ("list_directory", {"path": str(public)}),
            ("list_directory_with_sizes", {"path": str(public)}),
            ("search_files", {"path": str(public), "pattern": "**/.env"}),
            ("search_files", {"path": str(public), "pattern": "**/*",
                              "excludePatterns": ["*.txt", "**/.*"]}),
            ("directory_tree", {"path": str(public)}),
            ("directory_tree", {"path": f"{public}/.git", "excludePatterns": ["**/.*"]}),
        ]
        for tool, arguments in denied:
            result = await call(tool, arguments)
            assert_denied(result)
            assert not any(leak in text_of(result) for leak in leaks), (tool, arguments)
        assert not (public / CONTRACTS / "planted.txt").exists()

        # What stays allowed: a symlink to an allowed file, media outside hidden folders,
        # searches and trees that leave hidden names out.
        allowed: list[tuple[str, dict[str, Any], str]] = [
            ("read_text_file", {"path": f"{public}/docs/alias.txt"}, "public words"),
            ("read_media_file", {"path": f"{public}/docs/pic.png"}, ""),
            ("get_file_info", {"path": readme}, "size"),
            ("search_files", {"path": str(public), "pattern": "**/*.png",
                              "excludePatterns": ["**/.*"]}, "pic.png"),
            ("directory_tree", {"path": str(public), "excludePatterns": ["**/.*"]}, "docs"),
        ]
        for tool, arguments, expected in allowed:
            result = await call(tool, arguments)
            assert not result.is_error, (tool, result)
            assert expected in text_of(result), (tool, text_of(result))
            assert not any(leak in text_of(result) for leak in (".env", ".git", "logo")), tool

    # The decision was made, logged and audited on the resolved path.
    decisions = [e async for e in read_decisions(config.state_path)]
    paths = [e.facts.get("path") for e in decisions if e.record["tool"] == "read_text_file"]
    assert f"{public}/{CONTRACTS}/secret.txt" in paths
    assert f"{public}/docs/link/secret.txt" not in paths
    assert f"{public}/docs/readme.txt" in paths  # alias.txt, where it leads
