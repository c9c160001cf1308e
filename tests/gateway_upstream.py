"""A recording upstream MCP server for the gateway tests and benchmark.

Run as ``python -m tests.gateway_upstream --log FILE`` (stdio). Every ``tools/call`` it receives
is appended to FILE as one JSON line ``{"tool", "arguments", "meta_keys"}`` and flushed
*before* the tool runs, so a test can prove what the upstream saw, and what it never saw.
``build_server(log_path)`` gives the same server in process.

Tools (a low-level ``Server``, so output schemas and results are exactly as written here):

- ``payments.transfer`` {amount, recipient, memo, approval?}: structured result with an id;
  with the memo ``HOLD`` it never answers: it waits until the gateway that started it dies
  (its parent changes), then exits (a gateway killed while a call is upstream)
- ``echo`` {text}: text, with an upstream ``_meta`` key of its own
- ``weather.forecast`` {city}: structured content only, empty ``content`` (projection adds text)
- ``weather.legacy`` {city}: declares an output schema, returns it only as JSON text
- ``weather.broken`` {city}: structured content that breaks its own output schema
- ``fail`` {}: an ``isError`` result
- ``crash`` {}: a JSON-RPC error
- ``admin.delete`` {what}: offered upstream, absent from the test policy
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

FORECAST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
    "required": ["city", "temperature_c"],
}
TRANSFER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"transfer_id": {"type": "string"}, "amount": {"type": "integer"},
                   "recipient": {"type": "string"}},
    "required": ["transfer_id", "amount", "recipient"],
}

HOLD = "hold until the gateway dies"

TOOLS = [
    types.Tool(name="payments.transfer", description="Move money.", input_schema={
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "recipient": {"type": "string"},
                       "memo": {"type": "string"},
                       "approval": {"type": "object",
                                    "properties": {"approved": {"type": "boolean"},
                                                   "by": {"type": "string"}}}},
        "required": ["amount", "recipient"]}, output_schema=TRANSFER_SCHEMA),
    types.Tool(name="echo", input_schema={"type": "object",
                                          "properties": {"text": {"type": "string"}}}),
    types.Tool(name="weather.forecast", input_schema={
        "type": "object", "properties": {"city": {"type": "string"}}},
        output_schema=FORECAST_SCHEMA),
    types.Tool(name="weather.legacy", input_schema={
        "type": "object", "properties": {"city": {"type": "string"}}},
        output_schema=FORECAST_SCHEMA),
    types.Tool(name="weather.broken", input_schema={
        "type": "object", "properties": {"city": {"type": "string"}}},
        output_schema=FORECAST_SCHEMA),
    types.Tool(name="fail", input_schema={"type": "object"}),
    types.Tool(name="crash", input_schema={"type": "object"}),
    types.Tool(name="admin.delete", input_schema={
        "type": "object", "properties": {"what": {"type": "string"}}}),
]


def build_server(log_path: Path | None) -> Server[Any]:
    """The recording upstream; ``log_path`` None records nothing (benchmarks)."""
    counter = {"transfers": 0}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if log_path is not None:
            line = {"tool": params.name, "arguments": args,
                    "meta_keys": sorted((ctx.meta or {}).keys())}
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
                f.flush()
        name = params.name
        if name == "payments.transfer" and args.get("memo") == HOLD:
            parent = os.getppid()
            while os.getppid() == parent:
                await anyio.sleep(0.05)
            os._exit(0)
        if name == "payments.transfer":
            counter["transfers"] += 1
            tid = f"tr_{counter['transfers']}"
            amount = args.get("amount")
            out = {"transfer_id": tid, "amount": int(amount) if isinstance(amount, str) else amount,
                   "recipient": args.get("recipient")}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"transferred {args.get('amount')} "
                                           f"to {args.get('recipient')} ({tid})")],
                structured_content=out)
        if name == "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(args.get("text", "")))],
                _meta={"example.com/trace": "t-1"})
        if name == "weather.forecast":
            return types.CallToolResult(content=[], structured_content={
                "city": args.get("city", "?"), "temperature_c": 19.5})
        if name == "weather.legacy":
            text = json.dumps({"city": args.get("city", "?"), "temperature_c": 7})
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        if name == "weather.broken":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="hot")],
                structured_content={"city": args.get("city", "?"), "temperature_c": "hot"})
        if name == "fail":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="disk on fire")], is_error=True)
        if name == "crash":
            raise MCPError(code=types.INTERNAL_ERROR, message="the upstream crashed")
        if name == "admin.delete":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"deleted {args.get('what')}")])
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name}")

    return Server("recording-upstream", version="1.2.3", on_list_tools=list_tools,
                  on_call_tool=call_tool)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The calls the upstream received, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, help="append every tools/call here (JSON lines)")
    args = parser.parse_args(argv)
    anyio.run(_serve_stdio, build_server(args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
