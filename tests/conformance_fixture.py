"""The MCP server the official conformance suite is run against (directly and via the gateway).

The npm package ``@modelcontextprotocol/conformance`` ships no server: its server scenarios call
tools, resources and prompts by fixed names (``test_simple_text``, ``test://static-text``,
``test_prompt_with_arguments``, ...) and check what comes back. This module serves them on the
Python ``mcp`` SDK (``MCPServer``), for both protocol eras the SDK speaks (2025-11-25 sessions,
2026-07-28 stateless with ``input_required`` results).

Run as ``python -m tests.conformance_fixture --port N`` (streamable HTTP at
``http://127.0.0.1:N/mcp``) or ``--stdio``. :func:`build` gives the server in process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJ"
           "RU5ErkJggg==")
WAV_TINY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
STATE_KEY = b"conformance-fixture-request-state-key-0123456789"
"""A fixed key for the SDK's sealed ``requestState`` (a test fixture, not a secret)."""

_NAME_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}},
                                "required": ["name"]}


def _ask(message: str, schema: dict[str, Any] | None = None) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message, requested_schema=schema or _NAME_SCHEMA))


def _sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user",
                                        content=types.TextContent(type="text", text=text))],
        max_tokens=max_tokens))


def _answer(responses: Any, key: str, field: str) -> Any:
    got = (responses or {}).get(key)
    if isinstance(got, types.ElicitResult) and got.content:
        return got.content.get(field)
    return None


class _Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(default="active", description="User status",
                        json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = Field(default=True, description="Verification status")


class _Enums(BaseModel):
    untitledSingle: str = Field(description="plain enum",
                                json_schema_extra={"enum": ["active", "inactive", "pending"]})
    titledSingle: str = Field(description="titled enum", json_schema_extra={
        "oneOf": [{"const": "low", "title": "Low Priority"},
                  {"const": "medium", "title": "Medium Priority"},
                  {"const": "high", "title": "High Priority"}]})
    untitledMulti: list[str] = Field(description="multi-select", json_schema_extra={
        "items": {"type": "string", "enum": ["read", "write", "execute"]}})
    titledMulti: list[str] = Field(description="titled multi-select", json_schema_extra={
        "items": {"anyOf": [{"const": "feature", "title": "New Feature"},
                            {"const": "bug", "title": "Bug Fix"},
                            {"const": "docs", "title": "Documentation"}]}})
    legacyEnum: str = Field(description="enum with enumNames", json_schema_extra={
        "enum": ["small", "medium", "large"],
        "enumNames": ["Small Size", "Medium Size", "Large Size"]})


class _Reply(BaseModel):
    response: str = Field(description="the user's answer")


def build(name: str = "conformance-fixture") -> MCPServer[Any]:
    """A fresh fixture server (its own subscriptions and dynamic tools)."""
    mcp: MCPServer[Any] = MCPServer(
        name=name, version="1.0.0",
        request_state_security=RequestStateSecurity(keys=[STATE_KEY]))
    subscribed: set[str] = set()

    # Tools: content kinds ---------------------------------------------------------------
    @mcp.tool()
    def test_simple_text() -> str:
        """Text content."""
        return "This is a simple text response for testing."

    @mcp.tool()
    def test_image_content() -> list[types.ImageContent]:
        """Image content."""
        return [types.ImageContent(type="image", data=PNG_1PX, mime_type="image/png")]

    @mcp.tool()
    def test_audio_content() -> list[types.AudioContent]:
        """Audio content."""
        return [types.AudioContent(type="audio", data=WAV_TINY, mime_type="audio/wav")]

    @mcp.tool()
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        """An embedded text resource."""
        return [types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain",
            text="This is an embedded resource content."))]

    @mcp.tool()
    def test_multiple_content_types() -> list[types.TextContent | types.ImageContent
                                              | types.EmbeddedResource]:
        """Text, image and resource together."""
        return [types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(type="image", data=PNG_1PX, mime_type="image/png"),
                types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                    uri="test://mixed-content-resource", mime_type="application/json",
                    text=json.dumps({"test": "data", "value": 123})))]

    @mcp.tool()
    def test_error_handling() -> str:
        """Always fails (an isError result)."""
        raise RuntimeError("This tool intentionally returns an error for testing")

    # Tools: notifications and server-to-client requests ----------------------------------
    @mcp.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Three log notifications, then a result."""
        for text in ("Tool execution started", "Tool processing data",
                     "Tool execution completed"):
            await ctx.log("info", text)
            await asyncio.sleep(0.02)
        return "Tool with logging executed successfully"

    @mcp.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Three progress notifications, then a result."""
        for step in (0, 50, 100):
            await ctx.report_progress(progress=step, total=100,
                                      message=f"Completed step {step} of 100")
            await asyncio.sleep(0.02)
        return "progress reported"

    @mcp.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Asks the client's model (sampling/createMessage)."""
        result = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(
                type="text", text=prompt))],
            max_tokens=100, related_request_id=ctx.request_id)
        text = result.content.text if result.content.type == "text" else "(not text)"
        return f"LLM response: {text}"

    @mcp.tool()
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Asks the user (elicitation/create)."""
        result = await ctx.elicit(message=message, schema=_Reply)
        content = result.data.model_dump_json() if result.action == "accept" else "{}"
        return f"User response: action={result.action}, content={content}"

    @mcp.tool()
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Elicitation whose schema has a default for every primitive type."""
        result = await ctx.elicit(message="Please provide user information", schema=_Defaults)
        content = result.data.model_dump_json() if result.action == "accept" else "{}"
        return f"Elicitation result: action={result.action}, content={content}"

    @mcp.tool()
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Elicitation with every enum schema shape."""
        result = await ctx.elicit(message="Please select values", schema=_Enums)
        content = result.data.model_dump_json() if result.action == "accept" else "{}"
        return f"Elicitation completed: action={result.action}, content={content}"

    @mcp.tool()
    async def test_missing_capability(ctx: Context) -> str:
        """A JSON-RPC error when the client did not declare sampling."""
        caps = ctx.client_capabilities
        if caps is None or caps.sampling is None:
            raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                           message="This tool requires the client 'sampling' capability",
                           data={"requiredCapabilities": {"sampling": {}}})
        return "sampling declared"

    # Tools: input_required (2026-07-28) ----------------------------------------------------
    @mcp.tool()
    async def test_input_required_result_elicitation(ctx: Context
                                                     ) -> str | types.InputRequiredResult:
        """One elicitation round."""
        name = _answer(ctx.input_responses, "user_name", "name")
        if ctx.input_responses and "user_name" in ctx.input_responses:
            return f"Hello, {name or '?'}!"
        return types.InputRequiredResult(input_requests={"user_name": _ask("What is your name?")})

    @mcp.tool()
    async def test_input_required_result_sampling(ctx: Context
                                                  ) -> str | types.InputRequiredResult:
        """One sampling round."""
        got = (ctx.input_responses or {}).get("capital_question")
        if isinstance(got, types.CreateMessageResult):
            text = got.content.text if got.content.type == "text" else "?"
            return f"Model said: {text}"
        return types.InputRequiredResult(input_requests={
            "capital_question": _sample("What is the capital of France?", 100)})

    @mcp.tool()
    async def test_input_required_result_list_roots(ctx: Context
                                                    ) -> str | types.InputRequiredResult:
        """One roots/list round."""
        got = (ctx.input_responses or {}).get("client_roots")
        if isinstance(got, types.ListRootsResult):
            return f"Client exposed {len(got.roots)} root(s)."
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})

    @mcp.tool()
    async def test_input_required_result_request_state(ctx: Context
                                                       ) -> str | types.InputRequiredResult:
        """requestState echoed back with the answer."""
        if ctx.input_responses and "confirm" in ctx.input_responses \
                and ctx.request_state == "state-nonce":
            return "state-ok: confirmation received"
        return types.InputRequiredResult(
            input_requests={"confirm": _ask("Please confirm", {
                "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})},
            request_state="state-nonce")

    @mcp.tool()
    async def test_input_required_result_multiple_inputs(ctx: Context
                                                         ) -> str | types.InputRequiredResult:
        """Elicitation, sampling and roots in one round."""
        if ctx.input_responses and {"user_name", "greeting", "client_roots"} \
                <= ctx.input_responses.keys():
            return "All inputs received."
        return types.InputRequiredResult(input_requests={
            "user_name": _ask("What is your name?"),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": types.ListRootsRequest()}, request_state="multiple-inputs")

    @mcp.tool()
    async def test_input_required_result_multi_round(ctx: Context
                                                     ) -> str | types.InputRequiredResult:
        """Three rounds, the state carried in requestState."""
        state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
        responses = ctx.input_responses or {}
        if state.get("round") == 1 and "step1" in responses:
            return types.InputRequiredResult(
                input_requests={"step2": _ask("Step 2: What is your favorite color?", {
                    "type": "object", "properties": {"color": {"type": "string"}},
                    "required": ["color"]})},
                request_state=json.dumps({"round": 2,
                                          "name": _answer(responses, "step1", "name")}))
        if state.get("round") == 2 and "step2" in responses:
            return f"{state.get('name')} likes {_answer(responses, 'step2', 'color')}."
        return types.InputRequiredResult(
            input_requests={"step1": _ask("Step 1: What is your name?")},
            request_state=json.dumps({"round": 1}))

    @mcp.tool()
    async def test_input_required_result_tampered_state(ctx: Context
                                                        ) -> str | types.InputRequiredResult:
        """The SDK rejects a requestState it did not seal."""
        if ctx.request_state is None:
            return types.InputRequiredResult(
                input_requests={"confirm": _ask("Please confirm", {
                    "type": "object", "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"]})}, request_state="round-1")
        return f"state-ok: {ctx.request_state}"

    @mcp.tool()
    async def test_input_required_result_capabilities(ctx: Context) -> types.InputRequiredResult:
        """Asks only for what the client declared."""
        caps = ctx.client_capabilities
        wanted: dict[str, types.InputRequest] = {}
        if caps is None or caps.sampling is not None:
            wanted["sample"] = _sample("Say hello", 50)
        if caps is None or caps.elicitation is not None:
            wanted["ask"] = _ask("What is your name?")
        return types.InputRequiredResult(input_requests=wanted, request_state="capability-gated")

    # Tools: list changes -----------------------------------------------------------------
    def _dynamic() -> str:
        """Added and removed again by the trigger tools."""
        return "dynamic"

    @mcp.tool()
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Changes the tool list and says so."""
        mcp.add_tool(_dynamic, name="test_dynamic_tool")
        mcp.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return "tool list changed"

    @mcp.tool()
    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Changes the prompt list and says so."""
        mcp.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt",
                                            description="dynamic"))
        mcp.remove_prompt("test_dynamic_prompt")
        await ctx.notify_prompts_changed()
        return "prompt list changed"

    # Resources -----------------------------------------------------------------------------
    @mcp.resource("test://static-text")
    def static_text() -> str:
        """Static text."""
        return "This is the content of the static text resource."

    @mcp.resource("test://static-binary")
    def static_binary() -> bytes:
        """Static bytes (a PNG)."""
        return base64.b64decode(PNG_1PX)

    @mcp.resource("test://template/{id}/data")
    def templated(id: str) -> str:
        """A resource template."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @mcp.resource("test://watched-resource")
    def watched() -> str:
        """A resource clients subscribe to."""
        return "Watched resource content"

    # Prompts ---------------------------------------------------------------------------------
    @mcp.prompt()
    def test_simple_prompt() -> list[UserMessage]:
        """No arguments."""
        return [UserMessage(role="user", content=types.TextContent(
            type="text", text="This is a simple prompt for testing."))]

    @mcp.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        """Two required arguments."""
        return [UserMessage(role="user", content=types.TextContent(
            type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]

    @mcp.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        """An embedded resource."""
        return [UserMessage(role="user", content=types.EmbeddedResource(
                    type="resource", resource=types.TextResourceContents(
                        uri=resourceUri, mime_type="text/plain",
                        text="Embedded resource content for testing."))),
                UserMessage(role="user", content=types.TextContent(
                    type="text", text="Please process the embedded resource above."))]

    @mcp.prompt()
    def test_prompt_with_image() -> list[UserMessage]:
        """An image."""
        return [UserMessage(role="user", content=types.ImageContent(
                    type="image", data=PNG_1PX, mime_type="image/png")),
                UserMessage(role="user", content=types.TextContent(
                    type="text", text="Please analyze the image above."))]

    @mcp.prompt()
    async def test_input_required_result_prompt(ctx: Context
                                                ) -> list[UserMessage] | types.InputRequiredResult:
        """A prompts/get that needs an elicitation first."""
        if ctx.input_responses and "user_context" in ctx.input_responses:
            text = _answer(ctx.input_responses, "user_context", "context") or "?"
            return [UserMessage(role="user", content=types.TextContent(
                type="text", text=f"Use the following context: {text}"))]
        return types.InputRequiredResult(input_requests={"user_context": _ask(
            "What context should the prompt use?", {
                "type": "object", "properties": {"context": {"type": "string"}},
                "required": ["context"]})})

    # Logging level, subscriptions, completion ------------------------------------------------
    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
                        ) -> types.EmptyResult:
        return types.EmptyResult()

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
                        ) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    low = mcp._lowlevel_server  # MCPServer has no public hook for these three
    low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)

    @mcp.completion()  # type: ignore[untyped-decorator,no-untyped-call]
    async def complete(ref: types.PromptReference | types.ResourceTemplateReference,
                       argument: types.CompletionArgument,
                       context: types.CompletionContext | None) -> types.Completion:
        options = {"arg1": ["alpha", "beta"], "arg2": ["gamma"], "id": ["123", "456"]}
        values = [v for v in options.get(argument.name, []) if v.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)

    return mcp


def allow_all_policy(name: str = "conformance-gateway", extra_tools: tuple[str, ...] = ()) -> str:
    """A gateway policy allowing every tool and prompt of the fixture (and ``extra_tools``, for
    another fixture that serves more), and every resource."""
    from mcp import Client  # deferred: only the gateway tests need a client

    async def names() -> tuple[list[str], list[str]]:
        async with Client(build(), mode="legacy") as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            prompts = [p.name for p in (await client.list_prompts()).prompts]
        return tools, prompts

    tools, prompts = anyio.run(names)
    tools += [t for t in extra_tools if t not in tools]
    lines = ["version = 1", "", "[gateway]", f'name = "{name}"', "", "[resources]", ""]
    lines += [f'[tools."{t}"]' for t in tools] + [f'[prompts."{p}"]' for p in prompts]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stdio", action="store_true")
    args = parser.parse_args(argv)
    server = build()
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port, retry_interval=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
