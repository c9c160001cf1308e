"""An MCP server (mcp 2.x ``MCPServer``) whose every tool result carries a notary receipt.

Run it over stdio (the way an MCP host or ``examples/verifying_client.py`` starts it)::

    NOTARY_URL=http://127.0.0.1:8080 NOTARY_API_KEY=nk_... python examples/notarized_server.py

Environment:
  NOTARY_URL             the notary's base URL (required)
  NOTARY_API_KEY         an API key from ``notary apikey create`` (required)
  NOTARY_SERVER_NAME     the server name receipts carry (default: notarized-example)
  NOTARY_ON_UNAVAILABLE  ``fail`` (default: withhold results that cannot be notarized) or
                         ``mark`` (return them marked ``notarized: false``)
  NOTARY_EMBED_RECEIPT   ``1`` (default) to embed receipt and proof in each result, ``0`` not to

The tools show each kind of result: plain text, ``structuredContent`` from typed returns, an
``isError`` result (both raised and returned), a result that already has ``_meta`` keys, and
a tool without arguments. Notarization itself is one line: ``notarize_server(mcp, notarizer)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from notary.sdk import Notarizer, NotaryClient, OnUnavailable, notarize_server

DEFAULT_SERVER_NAME = "notarized-example"


class Forecast(BaseModel):
    """A typed return value: MCPServer sends it as ``structuredContent`` (and as text)."""

    city: str
    temperature_c: float
    conditions: str


def build_server(notarizer: Notarizer, *, name: str = DEFAULT_SERVER_NAME) -> MCPServer[Any]:
    """The example server with ``notarizer`` installed (also used by the tests, in process).

    The notary client's HTTP session is closed when the server's lifespan ends; the client
    reopens one if the server is entered again (in-process tests open several connections).
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            await notarizer.client.close()

    mcp: MCPServer[Any] = MCPServer(name, version="0.1.0", lifespan=lifespan)

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers (structured output ``{"result": a + b}``)."""
        return a + b

    @mcp.tool()
    def forecast(city: str, days: int = 1) -> Forecast:
        """A made-up forecast, returned as a typed object (structuredContent)."""
        return Forecast(city=city, temperature_c=21.5 - days, conditions="sunny")

    @mcp.tool()
    def divide(a: float, b: float) -> float:
        """Divide; dividing by zero raises a ToolError, which MCPServer sends as ``isError``."""
        if b == 0:
            raise ToolError("division by zero")
        return a / b

    @mcp.tool()
    def check_stock(sku: str) -> CallToolResult:
        """Returns an ``isError`` result itself (no exception), for an unknown SKU."""
        if not sku.startswith("SKU-"):
            return CallToolResult(
                content=[TextContent(type="text", text=f"unknown sku {sku!r}")], is_error=True
            )
        return CallToolResult(content=[TextContent(type="text", text=f"{sku}: 7 in stock")])

    @mcp.tool()
    def echo(text: str, tags: list[str] | None = None) -> CallToolResult:
        """Echo with a ``_meta`` key of its own, which notarization keeps."""
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            _meta={"example.com/trace": {"tags": tags or []}},
        )

    @mcp.tool()
    def server_time() -> str:
        """No arguments: the record holds ``arguments: {}``."""
        return "2026-01-01T00:00:00Z"  # fixed, so runs are reproducible

    return notarize_server(mcp, notarizer)


def notarizer_from_env(env: dict[str, str] | None = None) -> Notarizer:
    """A Notarizer configured from NOTARY_* environment variables (see the module doc)."""
    env = dict(os.environ) if env is None else env
    missing = [k for k in ("NOTARY_URL", "NOTARY_API_KEY") if not env.get(k)]
    if missing:
        raise SystemExit(f"notarized_server: set {' and '.join(missing)}")
    policy = env.get("NOTARY_ON_UNAVAILABLE", "fail")
    if policy not in ("fail", "mark"):
        raise SystemExit("notarized_server: NOTARY_ON_UNAVAILABLE must be 'fail' or 'mark'")
    on_unavailable: OnUnavailable = "fail" if policy == "fail" else "mark"
    client = NotaryClient(env["NOTARY_URL"], env["NOTARY_API_KEY"])
    return Notarizer(
        client,
        env.get("NOTARY_SERVER_NAME", DEFAULT_SERVER_NAME),
        embed_receipt=env.get("NOTARY_EMBED_RECEIPT", "1") != "0",
        on_unavailable=on_unavailable,
    )


def main() -> None:
    notarizer = notarizer_from_env()
    server = build_server(notarizer, name=notarizer.server_name)
    print(f"notarized_server: receipts from {notarizer.client.base_url} as "
          f"{notarizer.server_name!r}", file=sys.stderr)
    server.run()  # stdio


if __name__ == "__main__":
    main()
