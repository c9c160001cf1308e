"""``notary mcp`` on the command line, kept apart from the server so that every other ``notary``
command starts without importing the MCP SDK (which costs most of a second)."""

from __future__ import annotations

import argparse

from .verifier import add_trust_arguments


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import cmd_mcp as run

    return run(args)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary mcp`` to the CLI."""
    p = subparsers.add_parser(
        "mcp", help="run the verifier as an MCP server (stdio, or --http)",
        description="An MCP server with the tools verify_tool_call, get_receipt and "
                    "get_checkpoint. The trust flags are the defaults for verify_tool_call.")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    add_trust_arguments(p, notary_help="the notary get_receipt and get_checkpoint read; also ")
    p.set_defaults(func=cmd_mcp)

