"""The MCP SDK integration end to end: mcp.Client ↔ notarized server ↔ the real notary app.

Every test runs the real notary application on a loopback socket in this process, and talks
to notarized MCP servers through the real ``mcp.Client``: in process and over stdio (the
example server as a subprocess), in both protocol modes (``auto`` = 2026-07-28, ``legacy`` =
2025-11-25). Results are verified offline with ``notary.core.verification.verify_receipt``.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import anyio
import pytest
from mcp import Client, MCPError
from mcp.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from notary.core.records import SPEC, hashed_result
from notary.core.verification import Verdict, verify_receipt
from notary.sdk import (
    TOOL_CALL_META_KEY,
    NotarizationFailedError,
    Notarizer,
    NotaryClient,
    NotaryUnavailableError,
    notarization_of,
    notarize_server,
    record_for,
    structured_for,
    verify_tool_result,
)
from tests.notary_server import LiveNotary, closed_url
from tests.tamper import checkpoint_root, checkpoint_signature, proof_hash

REPO = Path(__file__).resolve().parents[3]
LEVELS = ("record", "signature", "inclusion")


def _load(name: str) -> ModuleType:
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example_server = _load("notarized_server")
example_client = _load("verifying_client")
SAMPLE_CALLS: list[tuple[str, dict[str, Any] | None]] = example_client.SAMPLE_CALLS


# Modes and verdicts --------------------------------------------------------------------------


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def statuses(verdict: Verdict) -> dict[str, str]:
    return {name: verdict.levels[name].status for name in LEVELS}


ALL_PASSED = dict.fromkeys(LEVELS, "passed")


def assert_verifies(notary: LiveNotary, tool: str, arguments: dict[str, Any] | None,
                    result: CallToolResult, **kwargs: Any) -> dict[str, Any]:
    """Verify a received result offline; its notarization block."""
    verdict = verify_tool_result(tool, arguments, result, jwks=notary.jwks,
                                 log_verifier=notary.log_key, **kwargs)
    assert statuses(verdict) == ALL_PASSED, (tool, verdict.to_json())
    assert verdict.valid
    block = notarization_of(result)
    assert block is not None
    return block


# MCPServer, in process -----------------------------------------------------------------------


async def test_mcpserver_in_process(notary: LiveNotary, mode: str) -> None:
    server = example_server.build_server(notary.notarizer())
    async with Client(server, mode=mode) as client:
        results: dict[str, CallToolResult] = {}
        for tool, arguments in SAMPLE_CALLS:
            result = await client.call_tool(tool, arguments)
            block = assert_verifies(notary, tool, arguments, result)
            receipt = block["receipt"]
            assert set(block) == {"spec", "id", "call_sha256", "salt", "receipt_url",
                                  "verify_url", "receipt"}
            assert block["spec"] == SPEC and block["id"] == receipt["id"]
            assert block["call_sha256"] == receipt["call_sha256"]
            assert len(block["salt"]) >= 32
            assert block["receipt_url"] == f"{notary.url}/v1/tool-calls/{block['id']}"
            assert block["verify_url"] == f"{notary.url}/v1/tool-calls/verify"
            assert isinstance(receipt["proof"], str)
            assert (receipt["server"], receipt["tool"]) == ("example", tool)
            results[tool] = result
        # A tool's typed return: structuredContent is hashed exactly as the client sees it.
        assert results["add"].structured_content == {"result": 42}
        assert results["forecast"].structured_content == {
            "city": "Lisbon", "temperature_c": 19.5, "conditions": "sunny"}
        # isError results, raised and returned, are notarized like any final result.
        assert results["divide"].is_error and results["check_stock"].is_error
        # Existing _meta keys are kept (and the SDK's serverInfo stamp on 2026-07-28).
        meta = results["echo"].meta or {}
        assert meta["example.com/trace"] == {"tags": ["a", "b"]}
        if mode == "auto":
            for result in results.values():
                assert (result.meta or {})["io.modelcontextprotocol/serverInfo"]["name"] == \
                    "notarized-example"
        # Arguments that fail validation give an isError result, notarized with the
        # arguments exactly as sent.
        bad = {"a": "not a number", "b": 1}
        result = await client.call_tool("add", bad)
        assert result.is_error
        assert_verifies(notary, "add", bad, result)
        # The server name can be pinned by the verifier.
        assert_verifies(notary, "add", {"a": 2, "b": 40}, results["add"], server="example")
        verdict = verify_tool_result("add", {"a": 2, "b": 40}, results["add"], server="other",
                                     jwks=notary.jwks, log_verifier=notary.log_key)
        assert verdict.levels["record"].status == "failed"
    assert await notary.size() == len(SAMPLE_CALLS) + 1


# The low-level Server, through the middleware ----------------------------------------------


def lowlevel_server(notarizer: Notarizer) -> Server[Any]:
    tools = [Tool(name=n, input_schema={"type": "object"})
             for n in ("plain_dict", "structured", "failed", "protocol_error", "no_args")]

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> Any:
        args = params.arguments or {}
        if params.name == "plain_dict":
            # A bare dict without isError: the notarizer makes isError explicit so that
            # raw-JSON clients and model clients rebuild the same record. (2026-07-28 needs
            # resultType in a dict result; the 2025-11-25 sieve drops it.)
            return {"content": [{"type": "text", "text": f"n={args.get('n')}"}],
                    "resultType": "complete"}
        if params.name == "structured":
            return CallToolResult(
                content=[TextContent(type="text", text="see structuredContent")],
                structured_content={"price": 1.5, "qty": 3, "big": 2**53 - 1, "name": "é☃",
                                    "nested": {"b": [1, None, True], "a": {}}},
                _meta={"vendor/key": [1, 2]},
            )
        if params.name == "failed":
            return CallToolResult(content=[TextContent(type="text", text="nope")], is_error=True)
        if params.name == "protocol_error":
            raise MCPError(-32602, "refused before running")
        return CallToolResult(content=[])

    server: Server[Any] = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    return notarize_server(server, notarizer)


async def test_lowlevel_server_middleware(notary: LiveNotary, mode: str) -> None:
    server = lowlevel_server(notary.notarizer("lowlevel"))
    calls: list[tuple[str, dict[str, Any] | None]] = [
        ("plain_dict", {"n": 1}), ("plain_dict", {"n": 2.5}), ("structured", {"x": [1, "a"]}),
        ("failed", {}), ("no_args", None),
    ]
    async with Client(server, mode=mode) as client:
        assert len((await client.list_tools()).tools) == 5  # other methods pass through
        results: list[CallToolResult | None] = [None] * len(calls)

        async def call(i: int) -> None:
            results[i] = await client.call_tool(*calls[i])

        async with anyio.create_task_group() as tg:  # concurrent calls share a batch
            for i in range(len(calls)):
                tg.start_soon(call, i)
        for (tool, arguments), result in zip(calls, results, strict=True):
            assert result is not None
            assert_verifies(notary, tool, arguments, result)
        assert results[0] is not None and results[0].is_error is False
        structured = results[2]
        assert structured is not None and (structured.meta or {})["vendor/key"] == [1, 2]
        failed = results[3]
        assert failed is not None and failed.is_error
        size = await notary.size()
        with pytest.raises(MCPError, match="refused before running"):
            await client.call_tool("protocol_error", {})
    assert await notary.size() == size == len(calls)


async def test_notarize_server_refuses_a_second_notarizer(notary: LiveNotary) -> None:
    server = MCPServer("twice")
    notarize_server(server, notary.notarizer())
    with pytest.raises(ValueError, match="already"):
        notarize_server(server, notary.notarizer())


async def test_a_notarized_server_declares_the_receipt_extension(notary: LiveNotary,
                                                                  mode: str) -> None:
    """``com.rightshold/tool-call`` under extensions (2026-07-28) or experimental (2025)."""
    server = MCPServer("declaring")

    @server.tool()
    def hello() -> str:
        """Says hello."""
        return "hello"

    notarize_server(server, notary.notarizer("declaring"), log_keys=["example/log+1+AA"])
    async with Client(server, mode=mode) as client:
        caps = client.server_capabilities
        table = caps.extensions if mode == "auto" else caps.experimental
        assert table is not None
        assert table["com.rightshold/tool-call"] == {
            "spec": "rs-tool-call/1", "metaKey": "com.rightshold/tool-call",
            "notary": notary.url.rstrip("/"),
            "jwks": notary.url.rstrip("/") + "/.well-known/jwks.json",
            "logKeys": ["example/log+1+AA"]}
        assert not (await client.call_tool("hello", {})).is_error


# Over stdio: the example server as a subprocess ---------------------------------------------


async def test_stdio_example_server(notary: LiveNotary, mode: str) -> None:
    params = example_client.server_params(notary.url, notary.key)
    async with Client(params, mode=mode) as client:
        for tool, arguments in SAMPLE_CALLS:
            result = await client.call_tool(tool, arguments)
            block = notarization_of(result)
            assert block is not None and block["spec"] == SPEC
            # Exactly what the example client does: rebuild and check offline.
            verdict = verify_receipt(block["receipt"], record=record_for(tool, arguments, result),
                                     jwks=notary.jwks, log_verifier=notary.log_key)
            assert statuses(verdict) == ALL_PASSED, (tool, verdict.to_json())
            assert result.is_error == (tool in ("divide", "check_stock"))


async def test_verifying_client_example_end_to_end(notary: LiveNotary) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "examples" / "verifying_client.py"), "--notary", notary.url,
        "--api-key", notary.key, "--mode", "legacy",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text + err.decode()[-2000:]
    assert "all results verified" in text
    assert text.count("VALID") == len(SAMPLE_CALLS) and "INVALID" not in text


# input_required ----------------------------------------------------------------------------


async def test_input_required_passes_through_unnotarized(notary: LiveNotary) -> None:
    server: MCPServer[Any] = MCPServer("confirming")

    @server.tool()
    async def confirm(what: str, ctx: Context) -> CallToolResult | InputRequiredResult:
        if not ctx.input_responses:
            ask = ElicitRequest(params=ElicitRequestFormParams(
                message=f"really {what}?", requested_schema={"type": "object", "properties": {}}))
            return InputRequiredResult(input_requests={"ok": ask}, request_state="asked")
        return CallToolResult(content=[TextContent(type="text", text=f"done: {what}")])

    notarize_server(server, notary.notarizer())

    async def accept(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={})

    # input_required exists from protocol 2026-07-28 on (a legacy connection cannot carry it).
    async with Client(server, mode="auto", elicitation_callback=accept) as client:
        interim = await client.session.call_tool("confirm", {"what": "x"},
                                                 allow_input_required=True)
        assert isinstance(interim, InputRequiredResult)
        assert TOOL_CALL_META_KEY not in (interim.meta or {})
        assert await notary.size() == 0
        final = await client.call_tool("confirm", {"what": "y"})  # SDK drives the rounds
        assert_verifies(notary, "confirm", {"what": "y"}, final)
    assert await notary.size() == 1


async def test_notarize_result_directly(notary: LiveNotary) -> None:
    async with notary.client() as c:
        notarizer = Notarizer(c, "direct")
        original = CallToolResult(content=[TextContent(type="text", text="hi")],
                                  is_error=True, _meta={"mine": {"a": 1}})
        out = await notarizer.notarize_result("greet", None, original)
        assert isinstance(out, CallToolResult)
        assert out.meta is not None and out.meta["mine"] == {"a": 1}
        assert TOOL_CALL_META_KEY in out.meta
        assert original.meta == {"mine": {"a": 1}}  # the input is not modified
        assert_verifies(notary, "greet", None, out)
        assert_verifies(notary, "greet", {}, out)  # no arguments == {}
        pending = InputRequiredResult(request_state="s")
        assert await notarizer.notarize_result("greet", None, pending) is pending
        marked_pending = CallToolResult(content=[], result_type="input_required")
        assert await notarizer.notarize_result("greet", None, marked_pending) is marked_pending
    assert await notary.size() == 1


# Tampering: exactly the right level fails --------------------------------------------------


def _other_hex(h: str) -> str:
    return ("0" if h[0] != "0" else "1") + h[1:]


Mutation = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], None]
PPP, FPP, PFF, FFF, PFP, PPF = (
    ("passed", "passed", "passed"), ("failed", "passed", "passed"),
    ("passed", "failed", "failed"), ("failed", "failed", "failed"),
    ("passed", "failed", "passed"), ("passed", "passed", "failed"),
)


def _set(path: tuple[str | int, ...], value: Any) -> Mutation:
    """A mutation of the arguments (``a``), the result wire JSON (``r``) or the receipt."""
    def apply(args: dict[str, Any], result: dict[str, Any], receipt: dict[str, Any]) -> None:
        roots: dict[str | int, Any] = {"a": args, "r": result, "receipt": receipt}
        target: Any = roots[path[0]]
        for key in path[1:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value
    return apply


def _add_argument(args: dict[str, Any], result: dict[str, Any], receipt: dict[str, Any]) -> None:
    args["extra"] = True


TAMPERING: list[tuple[str, Mutation, tuple[str, str, str]]] = [
    ("nothing", lambda a, r, rc: None, PPP),
    ("argument value", _set(("a", "city"), "Porto"), FPP),
    ("argument added", _add_argument, FPP),
    ("argument type", _set(("a", "days"), 2.5), FPP),
    ("result text", _set(("r", "content", 0, "text"), lambda t: t + " "), FPP),
    ("result structuredContent", _set(("r", "structuredContent", "conditions"), "rain"), FPP),
    ("result isError", _set(("r", "isError"), True), FPP),
    ("salt", _set(("r", "_meta", TOOL_CALL_META_KEY, "salt"), _other_hex), FPP),
    ("receipt id", _set(("receipt", "id"), lambda i: i[:5] + ("B" if i[5] != "B" else "C")
                        + i[6:]), PFF),
    ("receipt server", _set(("receipt", "server"), "example2"), FFF),
    ("receipt tool", _set(("receipt", "tool"), "add"), FFF),
    ("receipt call_sha256", _set(("receipt", "call_sha256"), _other_hex), FFF),
    ("receipt issued_at", _set(("receipt", "issued_at"), lambda t: t[:-2] + (
        "1" if t[-2] != "1" else "2") + "Z"), PFF),
    ("receipt ledger.index", _set(("receipt", "ledger", "index"), lambda i: i + 1), PFF),
    ("receipt ledger.entry_url", _set(("receipt", "ledger", "entry_url"),
                                      lambda u: u + "0"), PFP),
    ("proof hash", _set(("receipt", "proof"), proof_hash), PPF),
    ("checkpoint root", _set(("receipt", "proof"), checkpoint_root), PPF),
    ("checkpoint signature", _set(("receipt", "proof"), checkpoint_signature), PPF),
]


async def test_tampering_fails_exactly_the_right_level(notary: LiveNotary) -> None:
    server = example_server.build_server(notary.notarizer())
    arguments = {"city": "Lisbon", "days": 1}
    async with Client(server, mode="auto") as client:
        for _ in range(3):  # earlier entries, so the inclusion proof has hashes
            await client.call_tool("server_time", None)
        received = await client.call_tool("forecast", arguments)
    wire = received.model_dump(by_alias=True, exclude_none=True, mode="json")
    for name, mutate, expected in TAMPERING:
        args, result = copy.deepcopy(arguments), copy.deepcopy(wire)
        receipt = copy.deepcopy(result["_meta"][TOOL_CALL_META_KEY]["receipt"])
        mutate(args, result, receipt)
        verdict = verify_receipt(receipt, record=record_for("forecast", args, result),
                                 jwks=notary.jwks, log_verifier=notary.log_key)
        got = tuple(verdict.levels[n].status for n in LEVELS)
        assert got == expected, (name, verdict.to_json())
        assert verdict.valid == (expected == PPP), name


async def test_verification_is_offline(notary: LiveNotary) -> None:
    server = example_server.build_server(notary.notarizer())
    async with Client(server, mode="legacy") as client:
        received = [(tool, arguments, await client.call_tool(tool, arguments))
                    for tool, arguments in SAMPLE_CALLS]
    url = notary.url
    await notary.stop()
    with pytest.raises(NotaryUnavailableError):
        async with NotaryClient(url, retries=0) as c:
            await c.ledger()
    for tool, arguments, result in received:
        assert_verifies(notary, tool, arguments, result)


async def test_receipt_not_embedded_is_fetched_from_receipt_url(notary: LiveNotary) -> None:
    server = example_server.build_server(notary.notarizer(embed_receipt=False))
    async with Client(server, mode="auto") as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
    block = notarization_of(result)
    assert block is not None and "receipt" not in block
    with pytest.raises(ValueError, match="embeds no receipt"):
        verify_tool_result("add", {"a": 1, "b": 2}, result, jwks=notary.jwks,
                           log_verifier=notary.log_key)
    async with aiohttp.ClientSession() as http, http.get(block["receipt_url"]) as resp:
        assert resp.status == 200
        receipt = await resp.json()
    assert_verifies(notary, "add", {"a": 1, "b": 2}, result, receipt=receipt)
    # The online endpoint agrees.
    async with NotaryClient(block["verify_url"].rsplit("/v1/", 1)[0]) as c:
        online = await c.verify(block["id"], record_for("add", {"a": 1, "b": 2}, result))
    assert online["valid"] is True


# When notarization fails -------------------------------------------------------------------


def unreachable_notarizer(policy: str, **kwargs: Any) -> Notarizer:
    client = NotaryClient(closed_url(), "nk_unused", retries=1, backoff=0.01, timeout=2.0)
    return Notarizer(client, "example", on_unavailable=policy, **kwargs)  # type: ignore[arg-type]


async def test_unreachable_notary_fail_policy_withholds_the_result(mode: str) -> None:
    server = example_server.build_server(unreachable_notarizer("fail"))
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
    error = info.value
    assert "could not be notarized" in error.message and "unavailable" in error.message
    assert error.data[TOOL_CALL_META_KEY] == {
        "spec": SPEC, "notarized": False, "tool_executed": True,
        "reason": error.data[TOOL_CALL_META_KEY]["reason"]}


async def test_unreachable_notary_mark_policy_marks_the_result(mode: str) -> None:
    server = example_server.build_server(unreachable_notarizer("mark"))
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert not result.is_error and result.content[0].text == "hi"  # type: ignore[union-attr]
    meta = result.meta or {}
    assert meta["example.com/trace"] == {"tags": []}
    block = meta[TOOL_CALL_META_KEY]
    assert set(block) == {"spec", "notarized", "reason"}
    assert block["spec"] == SPEC and block["notarized"] is False
    assert "unavailable after 2 attempt(s)" in block["reason"]
    with pytest.raises(ValueError, match="not notarized"):
        record_for("echo", {"text": "hi"}, result)


async def test_refusals_follow_the_policy(notary: LiveNotary) -> None:
    # A key with an allowance of one call: the second distinct call is refused (429).
    small = await notary.new_key("small", allowance=1)
    limited = Notarizer(notary.client(api_key=small), "example", on_unavailable="mark")
    async with Client(example_server.build_server(limited), mode="auto") as client:
        first = await client.call_tool("add", {"a": 1, "b": 1})
        assert_verifies(notary, "add", {"a": 1, "b": 1}, first)
        second = await client.call_tool("add", {"a": 1, "b": 2})
    block = notarization_of(second)
    assert block is not None and block["notarized"] is False
    assert "429 quota_exceeded" in block["reason"]
    # A wrong key under "fail": a JSON-RPC error, never an unmarked result.
    wrong = Notarizer(notary.client(api_key="nk_000000000000_" + "A" * 43), "example")
    async with Client(example_server.build_server(wrong), mode="legacy") as client:
        with pytest.raises(MCPError, match="401 unauthorized"):
            await client.call_tool("add", {"a": 1, "b": 1})


async def test_results_that_cannot_be_hashed_follow_the_policy(notary: LiveNotary) -> None:
    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="huge", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[], structured_content={"n": 2**53 + 1})

    for policy in ("mark", "fail"):
        server: Server[Any] = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)
        notarize_server(server, notary.notarizer(on_unavailable=policy))
        async with Client(server, mode="auto") as client:
            if policy == "mark":
                huge = await client.call_tool("huge", {})
                assert "2^53" in (huge.meta or {})[TOOL_CALL_META_KEY]["reason"]
            else:
                with pytest.raises(MCPError, match="cannot be hashed"):
                    await client.call_tool("huge", {})
    assert await notary.size() == 0


# structuredContent of any JSON type (MCP 2026-07-28) -----------------------------------------

STRUCTURED_VALUES: dict[str, Any] = {
    "array": [1, "two", {"three": 3.5}, None],
    "string": "a plain string \u2028 with U+2028",
    "number": 1e21,
    "integer": 2**53 - 1,
    "boolean": False,
    "null": None,
    "object": {"b": 1, "a": [True]},
    "empty_array": [],
}
ARRAY_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}


def any_structured_server(notarizer: Notarizer) -> Server[Any]:
    """A low-level server returning each JSON type as ``structuredContent``.

    2026-07-28 clients get the value itself; 2025-era clients, whose schema allows only an
    object, get ``{"result": value}`` (``structured_for``), as the TypeScript SDK sends. The
    ``typed`` tool declares an output schema in the shape each protocol version allows. A
    ``null`` is put on the wire after the SDK's serializer (which drops None members) by a
    middleware running inside the notarizer, the way a TypeScript server sends ``null``.
    """
    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        typed = Tool(name="typed", input_schema={"type": "object"}, output_schema=(
            ARRAY_SCHEMA if modern else {"type": "object", "properties": {"result": ARRAY_SCHEMA},
                                         "required": ["result"]}))
        return ListToolsResult(tools=[Tool(name=n, input_schema={"type": "object"})
                                      for n in STRUCTURED_VALUES] + [typed])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        value = [3, 1, 2] if params.name == "typed" else STRUCTURED_VALUES[params.name]
        return CallToolResult(content=[TextContent(type="text", text=params.name)],
                              structured_content=structured_for(ctx.protocol_version, value))

    async def send_null(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if (ctx.method == "tools/call" and isinstance(result, dict)
                and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
                and (ctx.params or {}).get("name") == "null"):
            result = {**result, "structuredContent": None}
        return result

    server: Server[Any] = Server("any-json", on_list_tools=list_tools, on_call_tool=call_tool)
    notarize_server(server, notarizer)
    server.middleware.append(send_null)  # inside the notarizer: hashed as sent
    return server


async def test_structured_content_of_any_json_type(notary: LiveNotary, mode: str) -> None:
    server = any_structured_server(notary.notarizer("any-json"))
    async with Client(server, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["typed"].output_schema is not None
        for name in [*STRUCTURED_VALUES, "typed"]:
            # call_tool validates "typed" against its outputSchema, as any SDK client does.
            result = await client.call_tool(name, {"n": 1})
            value = [3, 1, 2] if name == "typed" else STRUCTURED_VALUES[name]
            if mode == "auto":
                expected = value
            else:  # what a 2025-era client receives, and so what it verifies
                expected = value if isinstance(value, dict) else {"result": value}
            assert result.structured_content == expected, name
            assert "structured_content" in result.model_fields_set, name  # null included
            assert_verifies(notary, name, {"n": 1}, result)
            # The record the client rebuilds holds the member exactly as received.
            record = record_for(name, {"n": 1}, result)
            assert "structuredContent" in record["result"], name
            assert record["result"]["structuredContent"] == expected, name
            # And the online endpoint (the same record as JSON) agrees.
            block = notarization_of(result)
            assert block is not None
            async with NotaryClient(notary.url) as c:
                online = await c.verify(block["id"], record)
            assert online["valid"] is True, (name, online)
    assert await notary.size() == len(STRUCTURED_VALUES) + 1


async def test_structured_content_null_and_absent_are_different_records(
        notary: LiveNotary) -> None:
    async with notary.client() as c:
        notarizer = Notarizer(c, "direct")
        with_null = await notarizer.notarize_wire(
            "t", {}, {"content": [], "structuredContent": None})
        absent = await notarizer.notarize_wire("t", {}, {"content": []})
    assert with_null["structuredContent"] is None and "structuredContent" not in absent
    for wire in (with_null, absent):
        received = CallToolResult.model_validate(wire)
        assert_verifies(notary, "t", {}, received)
        assert record_for("t", {}, received)["result"] == hashed_result(wire)
    # A result received without the member cannot pass for one that carried null.
    swapped = CallToolResult.model_validate({**absent, "structuredContent": None})
    verdict = verify_tool_result("t", {}, swapped, jwks=notary.jwks,
                                 log_verifier=notary.log_key)
    assert verdict.levels["record"].status == "failed"


async def test_notarization_failed_error_is_an_mcp_error() -> None:
    notarizer = unreachable_notarizer("fail")
    with pytest.raises(NotarizationFailedError) as info:
        await notarizer.notarize_result("t", {}, CallToolResult(content=[]))
    assert isinstance(info.value, MCPError) and info.value.tool == "t"
    await notarizer.client.close()


async def test_trust_anchors_as_the_notary_serves_them(notary: LiveNotary) -> None:
    """``verify_tool_result`` takes the JWKS document and the vkey text as fetched (or pinned),
    so a client needs nothing but ``notary.sdk``; malformed anchors are a ValueError."""
    server = example_server.build_server(notary.notarizer())
    async with Client(server, mode="auto") as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
    verdict = verify_tool_result("add", {"a": 1, "b": 2}, result, jwks=notary.jwks_json,
                                 log_verifier=notary.vkey)
    assert statuses(verdict) == ALL_PASSED and verdict.valid, verdict.to_json()
    # The log's ML-DSA-44 key parses too; the checkpoint of a 201 answer carries only the
    # Ed25519 line, so under that key alone inclusion fails (a verdict, not an error).
    async with notary.http.get(f"{notary.url}/v1/ledger") as resp:
        pq_vkey = (await resp.json())["vkeys"][1]
    verdict = verify_tool_result("add", {"a": 1, "b": 2}, result, jwks=notary.jwks_json,
                                 log_verifier=pq_vkey)
    assert verdict.levels["inclusion"].status == "failed" and not verdict.valid
    with pytest.raises(ValueError, match="bad log key"):
        verify_tool_result("add", {"a": 1, "b": 2}, result, jwks=notary.jwks_json,
                           log_verifier="not a vkey")
    private = {"keys": [{**notary.jwks_json["keys"][0], "d": "AAAA"}]}
    with pytest.raises(ValueError, match="private key"):
        verify_tool_result("add", {"a": 1, "b": 2}, result, jwks=private,
                           log_verifier=notary.vkey)
