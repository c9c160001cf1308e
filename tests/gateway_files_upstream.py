"""An upstream MCP server of files, completions and log messages, for the gateway tests.

Run as ``python -m tests.gateway_files_upstream --root DIR`` (stdio); :func:`build` gives the
same server in process. It behaves like a real file server would, so that what the gateway
judges can be compared with what a server does:

- ``resources/read`` of ``file:`` URIs under ``file:///srv/data/``, served from DIR. The URI is
  turned into a path as Node's ``fileURLToPath`` and Python's ``unquote`` do: any host, every
  percent-escape decoded, repeated slashes read as one (as the file system reads them);
- ``resources/templates/list``: ``file:///srv/data/{+path}``, and ``completion/complete`` of
  its ``path`` argument: every file and folder under DIR that starts with the value typed
  (folders end with ``/``);
- the tool ``whisper`` {who, n}: ``n`` log messages "secret of WHO #i", 0.3 s apart, each
  related to the call (as a server does for a 2025-era session), then a text result.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SERVED = "/srv/data/"
TEMPLATE = "file:///srv/data/{+path}"


def file_of(root: Path, uri: str) -> Path:
    """The file ``uri`` names to a decoding server, or an MCP error."""
    parts = urlsplit(uri)
    path = re.sub("/+", "/", unquote(parts.path))
    if parts.scheme != "file" or not path.startswith(SERVED):
        raise MCPError(code=types.INVALID_PARAMS, message="not served here")
    file = root / path[len(SERVED):]
    if not file.is_file():
        raise MCPError(code=types.INVALID_PARAMS, message="no such file")
    return file


def build(root: Path) -> Server[Any]:
    async def templates(ctx: Any, params: types.PaginatedRequestParams | None
                        ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(name="data", uri_template=TEMPLATE)])

    async def read(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = file_of(root, uri).read_text("utf-8")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/plain", text=text)])

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        names = sorted(p.relative_to(root).as_posix() + ("/" if p.is_dir() else "")
                       for p in root.rglob("*"))
        values = [n for n in names if n.startswith(params.argument.value)]
        return types.CompleteResult(completion=types.Completion(
            values=values, total=len(values), has_more=False))

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="whisper", input_schema={
            "type": "object", "properties": {"who": {"type": "string"},
                                             "n": {"type": "integer"}}})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        for i in range(int(args.get("n", 3))):
            await ctx.session.send_log_message("info", f"secret of {args.get('who')} #{i}",
                                               related_request_id=ctx.request_id)
            await anyio.sleep(0.3)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    return Server("files-upstream", version="1.0.0", on_list_resource_templates=templates,
                  on_read_resource=read, on_completion=complete, on_list_tools=list_tools,
                  on_call_tool=call_tool)


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="the files served")
    args = parser.parse_args(argv)
    anyio.run(_serve_stdio, build(args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
