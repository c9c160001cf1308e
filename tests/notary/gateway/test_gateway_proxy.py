"""The gateway as an MCP proxy: resources, prompts, completions, input_required, relays.

The upstream is the conformance fixture (``tests/conformance_fixture.py``), in process, with a
middleware that records every request it receives, so "the upstream saw nothing" is checked
where it would happen. The notary is the real application on loopback (the ``rig`` fixture,
``tests/gateway_rig.py``). Two concurrent clients over streamable HTTP check that sampling and
elicitation requests reach only the client whose call made them.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from notary.core.records import hashed_result
from notary.gateway import GatewayConfig, build_gateway, codes
from notary.sdk import verify_tool_result
from tests.conformance_fixture import allow_all_policy, build
from tests.gateway_rig import GATEWAY, Rig, assert_notarized, spawn, stop
from tests.notary_server import REPO_ROOT, free_port

POLICY = f"""
version = 1
[gateway]
name = "{GATEWAY}"

[tools.test_simple_text]
[tools.test_input_required_result_elicitation]
[tools.test_sampling]
[tools.test_elicitation]
[tools.ask]

[prompts.test_simple_prompt]
[prompts.test_prompt_with_arguments]
facts.arg1 = {{ from = "arg1", type = "string" }}
rules = [{{ fact = "arg1", op = "==", value = "ok" }}]

[resources]
rules = [{{ fact = "uri", op = "prefix", value = ["test://static-text", "test://template/"] }}]
"""


def recording(server: MCPServer[Any]) -> list[tuple[str, Any]]:
    """Every request ``server`` receives: (method, params), appended before it is handled."""
    seen: list[tuple[str, Any]] = []

    async def record(ctx: Any, call_next: Any) -> Any:
        seen.append((ctx.method, ctx.params))
        return await call_next(ctx)

    server._lowlevel_server.middleware.append(record)
    return seen


def config(rig: Rig, upstream: Any, **kwargs: Any) -> GatewayConfig:
    return GatewayConfig(upstream=upstream, policy_path=rig.policy, salt_path=rig.salt,
                         state_path=rig.state, notary_url=rig.url, api_key=rig.key, **kwargs)


def denied(error: MCPError) -> None:
    """The one generic denial: a code and nothing about the policy or the resource."""
    assert error.error.code == types.INVALID_PARAMS
    assert error.error.message == (f"{codes.AUTHORIZATION_DENIED}: this request is not "
                                   "authorized by the gateway's policy")
    assert error.error.data == {codes.AUTH_ERROR_META_KEY: {"code": codes.AUTHORIZATION_DENIED}}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_and_prompts_are_authorized_and_denials_leak_nothing(
        rig: Rig, mode: str) -> None:
    rig.policy.write_text(POLICY)
    upstream = build()
    seen = recording(upstream)
    async with Client(build_gateway(config(rig, upstream)), mode=mode) as client:
        before = await rig.size()
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert listed == {"test://static-text"}  # binary and watched are filtered out
        read = await client.read_resource("test://static-text")
        assert read.contents[0].text.startswith("This is the content")  # type: ignore[union-attr]
        if mode == "auto":  # the upstream's serverInfo is kept aside, never passed as ours
            meta = read.meta or {}
            assert meta[codes.SERVER_INFO_META_KEY]["name"] == GATEWAY
            assert meta[codes.UPSTREAM_SERVER_INFO_META_KEY]["name"] == "conformance-fixture"
        templated = await client.read_resource("test://template/7/data")
        assert '"id": "7"' in templated.contents[0].text  # type: ignore[union-attr]
        assert await rig.size() == before + 2  # each read's decision is in the ledger
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {"test_simple_prompt", "test_prompt_with_arguments"}
        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "ok", "arg2": "x"})
        assert "arg1='ok'" in got.messages[0].content.text  # type: ignore[union-attr]

        reads_before = [m for m, _ in seen].count("resources/read")
        errors = []
        for uri in ("test://static-binary", "test://no-such-resource", "TEST://STATIC-BINARY",
                    "test://x/a%2F..%2Fstatic-text", "not a uri"):
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri)
            denied(info.value)
            errors.append((info.value.error.message, info.value.error.data))
        for name, args in (("test_prompt_with_arguments", {"arg1": "no", "arg2": "x"}),
                           ("test_prompt_with_image", None), ("no_such_prompt", None)):
            with pytest.raises(MCPError) as info:
                await client.get_prompt(name, args)
            denied(info.value)
            errors.append((info.value.error.message, info.value.error.data))
        with pytest.raises(MCPError) as info:
            await client.complete(types.PromptReference(type="ref/prompt",
                                                        name="test_prompt_with_image"),
                                  {"name": "arg1", "value": "a"})
        denied(info.value)
        # An existing resource and a missing one, a prompt denied by its rules and one not
        # in the policy: the same answer, so a caller learns nothing by probing.
        assert len(set(map(repr, errors))) == 1
        assert [m for m, _ in seen].count("resources/read") == reads_before
        assert not any(m == "prompts/get" and p.get("name") != "test_prompt_with_arguments"
                       for m, p in seen)
        # Only values the policy could allow are offered: arg1 must be "ok", arg2 is free.
        prompt = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        completion = await client.complete(prompt, {"name": "arg1", "value": "a"})
        assert completion.completion.values == []  # the upstream offered "alpha"
        completion = await client.complete(prompt, {"name": "arg2", "value": "g"})
        assert completion.completion.values == ["gamma"]
        template = types.ResourceTemplateReference(type="ref/resource",
                                                   uri="test://template/{id}/data")
        completion = await client.complete(template, {"name": "id", "value": "1"})
        assert completion.completion.values == ["123"]


async def test_a_policy_without_resources_denies_every_resource(rig: Rig) -> None:
    rig.policy.write_text(f'version = 1\n[gateway]\nname = "{GATEWAY}"\n[tools.echo]\n')
    upstream = build()
    seen = recording(upstream)
    async with Client(build_gateway(config(rig, upstream)), mode="auto") as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        assert (await client.list_prompts()).prompts == []
        with pytest.raises(MCPError) as info:
            await client.read_resource("test://static-text")
        denied(info.value)
    assert "resources/read" not in [m for m, _ in seen]


async def test_input_required_passes_through_and_only_the_final_result_is_notarized(
        rig: Rig) -> None:
    rig.policy.write_text(POLICY)
    upstream = build()
    seen = recording(upstream)
    async with Client(build_gateway(config(rig, upstream)), mode="auto") as client:
        before = await rig.size()
        first = await client.session.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(
                name="test_input_required_result_elicitation", arguments={})),
            types.InputRequiredResult)  # type: ignore[arg-type]
        assert set(first.input_requests) == {"user_name"}
        meta = first.meta or {}
        assert "com.rightshold/tool-call" not in meta and codes.AUTH_RECEIPT_META_KEY not in meta
        assert await rig.size() == before + 1  # the decision only: no notarization

        answer = types.ElicitResult(action="accept", content={"name": "Ada"})
        final = await client.session.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(
                name="test_input_required_result_elicitation", arguments={},
                input_responses={"user_name": answer})),
            types.CallToolResult)
        assert final.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
        assert await rig.size() == before + 3  # authorized again, and notarized
        assert_notarized(rig, final, "test_input_required_result_elicitation", {})
    calls = [p for m, p in seen if m == "tools/call"]
    assert len(calls) == 2 and "inputResponses" in calls[1]


def _asking_upstream() -> MCPServer[Any]:
    """An upstream whose tool falls back to a degraded answer when sampling fails."""
    server: MCPServer[Any] = MCPServer("asking")

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks the client's model; says so when it cannot."""
        try:
            result = await ctx.session.create_message(  # type: ignore[attr-defined]
                messages=[types.SamplingMessage(role="user", content=types.TextContent(
                    type="text", text="capital of France?"))],
                max_tokens=10, related_request_id=ctx.request_id)
        except Exception:
            return "sampling not supported, guessed: Lyon"
        return f"the model said {result.content.text}"

    return server


async def test_a_degraded_upstream_is_never_notarized_as_ok(rig: Rig) -> None:
    """A 2026-era client shares the upstream connection: its sampling request cannot be
    relayed to anyone, and the upstream's fallback answer is not passed off as the result."""
    rig.policy.write_text(POLICY)
    gateway = build_gateway(config(rig, _asking_upstream(), upstream_mode="legacy"))
    async with Client(gateway, mode="auto") as client:
        result = await client.call_tool("ask", {})
    assert result.is_error
    assert (result.meta or {})[codes.AUTH_ERROR_META_KEY] == {
        "code": codes.UPSTREAM_INPUT_UNAVAILABLE}
    assert "Lyon" not in str(result.model_dump())
    assert_notarized(rig, result, "ask", {})  # notarized as the error it is
    verdict = verify_tool_result("ask", {}, result, jwks=rig.jwks, log_verifier=rig.log_key,
                                 server=GATEWAY)
    assert verdict.valid and hashed_result(result.model_dump(by_alias=True,
                                                             exclude_none=True))["isError"]


async def test_a_2025_client_gets_the_upstreams_sampling_request(rig: Rig) -> None:
    rig.policy.write_text(POLICY)
    asked: list[str] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="Paris"))

    gateway = build_gateway(config(rig, _asking_upstream(), upstream_mode="legacy"))
    async with Client(gateway, mode="legacy", sampling_callback=sampling) as client:
        result = await client.call_tool("ask", {})
    assert result.content[0].text == "the model said Paris"  # type: ignore[union-attr]
    assert asked == ["capital of France?"]
    assert_notarized(rig, result, "ask", {})


async def test_two_clients_never_see_each_others_sampling_or_elicitation(rig: Rig) -> None:
    up_port, gw_port = free_port(), free_port()
    upstream = await asyncio.to_thread(
        spawn, ["-m", "tests.conformance_fixture", "--port", str(up_port)], up_port,
        rig.tmp / "fixture.log")
    rig.policy.write_text(await asyncio.to_thread(allow_all_policy, GATEWAY))
    (rig.tmp / "key").write_text(rig.key)
    gateway = await asyncio.to_thread(spawn, [
        "-m", "notary.cli.main", "gateway", "--upstream", f"http://127.0.0.1:{up_port}/mcp",
        "--policy", str(rig.policy), "--salt-file", str(rig.salt), "--state", str(rig.state),
        "--notary", rig.url, "--api-key-file", str(rig.tmp / "key"),
        "--http", f"127.0.0.1:{gw_port}"], gw_port, rig.tmp / "gateway.log")
    seen: dict[str, list[str]] = {"alice": [], "bob": []}

    def callbacks(who: str) -> dict[str, Any]:
        async def sampling(ctx: Any, params: types.CreateMessageRequestParams
                           ) -> types.CreateMessageResult:
            seen[who].append(params.messages[0].content.text)  # type: ignore[union-attr]
            await anyio.sleep(0.2)  # both calls are in flight at once
            return types.CreateMessageResult(role="assistant", model=who,
                                             content=types.TextContent(type="text", text=who))

        async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            seen[who].append(params.message)
            await anyio.sleep(0.2)
            return types.ElicitResult(action="accept", content={"response": who})

        return {"sampling_callback": sampling, "elicitation_callback": elicitation}

    results: dict[str, list[str]] = {}

    async def session(who: str) -> None:
        url = f"http://127.0.0.1:{gw_port}/mcp"
        async with Client(url, mode="legacy", **callbacks(who)) as client:
            sampled = await client.call_tool("test_sampling", {"prompt": f"for {who}"})
            elicited = await client.call_tool("test_elicitation", {"message": f"ask {who}"})
            results[who] = [c.content[0].text for c in (sampled, elicited)]  # type: ignore[union-attr]
            assert not sampled.is_error and not elicited.is_error

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(session, "alice")
            tg.start_soon(session, "bob")
    finally:
        await asyncio.to_thread(stop, gateway)
        await asyncio.to_thread(stop, upstream)
    for who in ("alice", "bob"):
        assert seen[who] == [f"for {who}", f"ask {who}"]
        assert results[who][0] == f"LLM response: {who}"
        assert f'"response":"{who}"' in results[who][1]



@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_gateway_advertises_the_upstream_and_the_receipt_extension(
        rig: Rig, mode: str) -> None:
    rig.policy.write_text(POLICY)
    async with Client(build_gateway(config(rig, build())), mode=mode) as client:
        caps = client.server_capabilities
        assert caps.tools and caps.prompts and caps.resources and caps.completions
        # Relayed on the 2025 session, or on a 2026 client's subscriptions/listen stream.
        assert caps.resources.subscribe and caps.tools.list_changed
        table = caps.extensions if mode == "auto" else caps.experimental
        assert table is not None
        assert table["com.rightshold/tool-call"] == {
            "spec": "rs-tool-call/1", "metaKey": "com.rightshold/tool-call",
            "notary": rig.url.rstrip("/"), "jwks": rig.url.rstrip("/") + "/.well-known/jwks.json",
            "logKeys": [rig.vkey]}
        assert client.server_info is not None and client.server_info.name == GATEWAY
    # An upstream without prompts or resources: the gateway claims none either.
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    tools_only: Server[Any] = Server("tools-only", on_list_tools=list_tools)
    async with Client(build_gateway(config(rig, tools_only)), mode=mode) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.prompts is None and caps.resources is None


def _children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (Linux /proc)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out |= {int(c) for c in text}
    return out


async def test_each_2025_session_has_its_own_upstream_closed_with_it(rig: Rig) -> None:
    """Over HTTP with a command upstream: a 2025-era client session starts an upstream
    process of its own (besides the gateway's shared one), which ends when the session does."""
    rig.policy.write_text(POLICY)
    (rig.tmp / "key").write_text(rig.key)
    port = free_port()
    gateway = await asyncio.to_thread(spawn, [
        "-m", "notary.cli.main", "gateway", "--upstream",
        f"{sys.executable} -m tests.conformance_fixture --stdio", "--upstream-cwd", str(REPO_ROOT),
        "--upstream-env", f"PYTHONPATH={REPO_ROOT}", "--policy", str(rig.policy),
        "--salt-file", str(rig.salt), "--state", str(rig.state), "--notary", rig.url,
        "--api-key-file", str(rig.tmp / "key"), "--http", f"127.0.0.1:{port}"],
        port, rig.tmp / "gateway.log")
    try:
        shared = _children(gateway.pid)
        assert len(shared) == 1
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy") as one, Client(url, mode="legacy") as two:
            for client in (one, two):
                assert not (await client.call_tool("test_simple_text", {})).is_error
            assert len(_children(gateway.pid) - shared) == 2  # one per session
        for _ in range(100):  # the sessions were closed (DELETE): so are their upstreams
            if _children(gateway.pid) == shared:
                break
            await anyio.sleep(0.1)
        assert _children(gateway.pid) == shared
    finally:
        await asyncio.to_thread(stop, gateway)


async def test_a_2026_client_listens_through_the_gateway(rig: Rig) -> None:
    """subscriptions/listen: the upstream's list changes reach the client's stream; a
    resource the policy does not allow is not honored (and its decision is logged)."""
    from mcp.shared.subscriptions import ToolsListChanged

    rig.policy.write_text(POLICY.replace("[tools.ask]",
                                         "[tools.ask]\n[tools.test_trigger_tool_change]"))
    async with Client(build_gateway(config(rig, build())), mode="auto") as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed
        before = await rig.size()
        async with client.listen(tools_list_changed=True, resource_subscriptions=[
                "test://static-text", "test://watched-resource"]) as subscription:
            assert subscription.honored.resource_subscriptions == ["test://static-text"]
            assert await rig.size() == before + 2  # both decisions, allowed and denied
            assert not (await client.call_tool("test_trigger_tool_change", {})).is_error
            with anyio.fail_after(10):
                event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
