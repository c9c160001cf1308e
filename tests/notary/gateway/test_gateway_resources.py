"""Resources, completions and log messages through ``notary gateway --http``, end to end.

The upstream is ``tests/gateway_files_upstream.py`` run by the gateway as a command: a file
server that decodes URIs as real ones do, so a spelling the gateway judged differently from
the server would hand over a file the policy denies. The clients are the official SDK's, in
both protocol eras (``mode="auto"`` speaks 2026-07-28, ``mode="legacy"`` 2025-11-25).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from notary.gateway import codes
from tests.gateway_rig import GATEWAY, Rig, spawn, stop
from tests.notary_server import REPO_ROOT, free_port

POLICY = f"""
version = 1
[gateway]
name = "{GATEWAY}"

[tools.whisper]

[resources]
rules = [
  {{ fact = "uri", op = "prefix", value = "file:///srv/data/" }},
  {{ fact = "uri", op = "not prefix", value = ["file:///srv/data/données/private/",
                                                "file:///srv/data/team@corp/secret/"] }},
]
"""

SECRETS = {"données/private/plan.txt": "the plan", "team@corp/secret/k.txt": "the key"}
PUBLIC = {"données/public/a.txt": "public a", "readme.txt": "read me"}


async def gateway(rig: Rig, root: Path) -> AsyncIterator[str]:
    """``notary gateway --http`` in front of the file server (a 2025-era upstream link)."""
    for name, text in {**SECRETS, **PUBLIC}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    rig.policy.write_text(POLICY)
    (rig.tmp / "key").write_text(rig.key)
    port = free_port()
    proc = await asyncio.to_thread(spawn, [
        "-m", "notary.cli.main", "gateway", "--upstream-mode", "legacy", "--upstream",
        f"{sys.executable} -m tests.gateway_files_upstream --root {root}",
        "--upstream-cwd", str(REPO_ROOT), "--upstream-env", f"PYTHONPATH={REPO_ROOT}",
        "--policy", str(rig.policy), "--salt-file", str(rig.salt), "--state", str(rig.state),
        "--notary", rig.url, "--api-key-file", str(rig.tmp / "key"),
        "--http", f"127.0.0.1:{port}"], port, rig.tmp / "gateway.log")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await asyncio.to_thread(stop, proc)


@pytest.fixture
async def url(rig: Rig, tmp_path: Path) -> AsyncIterator[str]:
    async for u in gateway(rig, tmp_path / "files"):
        yield u


def assert_denied(error: MCPError) -> None:
    assert error.error.code == types.INVALID_PARAMS
    assert error.error.data == {codes.AUTH_ERROR_META_KEY: {"code": codes.AUTHORIZATION_DENIED}}


SPELLINGS = [
    "file:///srv/data/données/private/plan.txt",
    "file:///srv/data/donn%C3%A9es/private/plan.txt",
    "file:///srv/data/team%40corp/secret/k.txt",
    "file://localhost/srv/data/team@corp/secret/k.txt",
    "FILE://LOCALHOST/srv/data/team@corp/secret/k.txt",
    "file:/srv/data/team@corp/secret/k.txt",
    "file:////srv/data/team@corp/secret/k.txt",
    "file:///srv/data//team%40corp/secret/k.txt",
    "file://elsewhere/srv/data/team@corp/secret/k.txt",
]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_no_spelling_of_a_denied_file_reaches_it(rig: Rig, url: str, mode: str) -> None:
    """Issue 32 item 2: every spelling naming a denied file is denied (or refused), in both
    eras; the same files under allowed names are served."""
    async with Client(url, mode=mode) as client:
        read = await client.read_resource("file:///srv/data/donn%C3%A9es/public/a.txt")
        assert read.contents[0].text == "public a"  # type: ignore[union-attr]
        for uri in SPELLINGS:
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri)
            assert_denied(info.value)


async def test_completion_offers_only_what_the_policy_could_allow(rig: Rig, url: str) -> None:
    """Issue 32 item 4: completing a resource template lists no name under a denied prefix."""
    ref = types.ResourceTemplateReference(type="ref/resource", uri="file:///srv/data/{+path}")
    for mode in ("auto", "legacy"):
        async with Client(url, mode=mode) as client:
            got = await client.complete(ref, {"name": "path", "value": ""})
            values = got.completion.values
            assert values == ["données/", "données/public/", "données/public/a.txt",
                              "readme.txt", "team@corp/"], values
            got = await client.complete(ref, {"name": "path", "value": "team@corp/s"})
            assert got.completion.values == []


async def test_log_messages_never_reach_another_client(rig: Rig, url: str) -> None:
    """Issue 32 item 3: two 2026-era clients share the gateway's upstream link; a log message
    the gateway cannot attribute to a client's own request reaches no client at all."""
    heard: dict[str, list[str]] = {"ALICE": [], "BOB": [], "CAROL": []}

    def listener(who: str) -> Any:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard[who].append(str(params.data))
        return on_log

    async def call(who: str, delay: float, mode: str = "auto") -> None:
        await anyio.sleep(delay)
        async with Client(url, mode=mode, log_level="debug",
                          logging_callback=listener(who)) as client:
            result = await client.call_tool("whisper", {"who": who, "n": 4})
            assert not result.is_error

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "ALICE", 0.0)
        tg.start_soon(call, "BOB", 0.4)  # while ALICE's call is still whispering
        tg.start_soon(call, "CAROL", 0.2, "legacy")  # on an upstream session of her own
    assert not any("ALICE" in m for m in heard["BOB"] + heard["CAROL"]), heard
    assert not any("BOB" in m for m in heard["ALICE"] + heard["CAROL"]), heard
    # A 2025-era client's upstream session is its own: its call's messages reach it.
    assert heard["CAROL"] == [f"secret of CAROL #{i}" for i in range(4)]
