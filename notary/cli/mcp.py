"""``notary mcp``: the verifier as an MCP server, on stdio or streamable HTTP.

The server module (and the ``mcp`` SDK behind it, most of a second to import), the verifier and
the ASGI server are imported only when this command runs, so every other ``notary`` command and
``notary mcp --help`` start fast.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ledger.process.exitcodes import UsageError
from ledger.process.netaddr import parse_host_port
from notary.cli.trust_args import (
    add_trust_arguments,
    check_network_args,
    state_from_args,
    witness_policy_from_args,
)

if TYPE_CHECKING:
    from notary.core.jwks import Jwks
    from notary.mcp_server import ServerConfig


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Validate the flags now, so a bad key or file fails at start (exit 2), not per call."""
    # deferred: the mcp SDK is heavy to import; the verifier and the event loop, not for --help
    from ledger.process import event_loop
    from notary.mcp_server import ServerConfig
    from notary.verifier.trust import (
        Trust,
        build_trust,
        load_jwks,
        parse_log_keys,
        parse_witness_keys,
        with_policy_logs,
    )

    check_network_args(args)
    jwks: Jwks | str | None = None
    if args.jwks and args.jwks.startswith(("http://", "https://")):
        jwks = args.jwks
    elif args.jwks:
        jwks = event_loop.run(load_jwks(args.jwks, None))
    policy = witness_policy_from_args(args)
    witnesses = parse_witness_keys(args.witness)
    log_keys = parse_log_keys(args.log_key)
    if policy is not None:
        log_keys = with_policy_logs(log_keys, policy)
        Trust(None, log_keys, policy=policy)
    else:
        build_trust(None, log_keys, witnesses, args.quorum)  # refuse an unmeetable quorum now
    return ServerConfig(notary_url=args.notary, jwks=jwks, log_keys=log_keys,
                        witnesses=witnesses, quorum=args.quorum, witness_policy=policy,
                        state=state_from_args(args), offline=args.offline,
                        log_url=args.log_url, timeout=args.timeout)


def cmd_mcp(args: argparse.Namespace) -> int:
    # deferred: the mcp SDK is heavy to import; the verifier, the event loop and uvicorn too
    from ledger.process import event_loop
    from notary.cli.asgi import serve_asgi
    from notary.mcp_server import build_server
    from notary.verifier.inputs import VerifierInputError
    from notary.verifier.state import VerifierStateError

    try:
        config = config_from_args(args)
        address = parse_host_port(args.http, what="--http") if args.http else None
    except (VerifierInputError, VerifierStateError) as e:
        raise UsageError(str(e)) from e
    server = build_server(config)
    if address is None:
        event_loop.run(server.run_stdio_async())
        return 0
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    serve_asgi(server.streamable_http_app(host=host), host, port,
               f"notary mcp: serving MCP (streamable HTTP) at http://{shown}:{port}/mcp")
    return 0


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
