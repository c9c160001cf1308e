"""Call every tool of ``notarized_server.py`` over stdio and verify each result offline.

    python examples/verifying_client.py --notary http://127.0.0.1:8080 --api-key nk_... \
        [--mode auto|legacy|both] [--evidence DIR] [--save DIR]

The client fetches the notary's trust anchors once, before any call: the receipt keys
(``/.well-known/jwks.json``) and the log's verifier key (``/v1/ledger`` → ``vkey``). In a
real deployment pin these instead of fetching them (trust on first use is only as good as
that first fetch). Then it starts the server as a subprocess (``mcp.Client`` with
``StdioServerParameters``; the API key goes to the *server's* environment only), wrapped in
``notary.verifier.mcp_client.VerifyingClient``: every result is verified before this code sees
it, by rebuilding the call record from the arguments sent and the result received and checking
(1) it rebuilds ``call_sha256``, (2) the receipt signature verifies under the JWKS, (3) the entry
is included in a checkpoint signed by the log key. Failures are *marked* here (so the example
can print them; ``on_invalid="raise"``, the default, withholds such a result). No request
reaches the notary after the trust anchors are fetched. ``--evidence DIR`` keeps every verified
call in an evidence store that ``notary verify DIR`` checks again. Exit status 0 when every
result verified, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from notary.sdk import NotaryClient
from notary.verifier import Trust, load_jwks, parse_log_keys
from notary.verifier.mcp_client import VERIFICATION_META_KEY, VerifyingClient

SERVER_SCRIPT = Path(__file__).resolve().with_name("notarized_server.py")

#: Arguments for each tool of notarized_server.py (None: call without arguments).
SAMPLE_CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("add", {"a": 2, "b": 40}),
    ("forecast", {"city": "Lisbon", "days": 2}),
    ("divide", {"a": 1, "b": 0}),
    ("check_stock", {"sku": "nope"}),
    ("echo", {"text": "héllo ☃", "tags": ["a", "b"]}),
    ("server_time", None),
]


async def fetch_trust_anchors(notary_url: str) -> Trust:
    """The receipt keys and the log key, fetched once from the notary."""
    async with NotaryClient(notary_url) as notary:
        jwks = await notary.jwks()
        ledger = await notary.ledger()
    return Trust(await load_jwks(jwks, None), parse_log_keys([ledger["vkey"]]))


def server_params(notary_url: str, api_key: str, extra_env: dict[str, str] | None = None
                  ) -> StdioServerParameters:
    """How to start notarized_server.py with this Python, pointed at the notary."""
    env = {"NOTARY_URL": notary_url, "NOTARY_API_KEY": api_key, **(extra_env or {})}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(command=sys.executable, args=[str(SERVER_SCRIPT)], env=env)


def describe(tool: str, result: CallToolResult) -> str:
    kind = "isError" if result.is_error else "ok"
    if result.structured_content is not None:
        kind += " +structuredContent"
    return f"{tool:<12} {kind:<26}"


def save_call(directory: Path, mode: str, tool: str, arguments: dict[str, Any] | None,
              result: CallToolResult) -> Path:
    """Write the call as a "saved tool call" that ``notary verify CALL`` checks later."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{mode}-{tool}.json"
    doc = {"tool": tool, "arguments": arguments or {},
           "result": result.model_dump(by_alias=True, exclude_none=True, mode="json")}
    doc["result"].get("_meta", {}).pop(VERIFICATION_META_KEY, None)  # this client's, not sent
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


async def run(notary_url: str, api_key: str, mode: str, save: Path | None = None,
              evidence: Path | None = None) -> bool:
    trust = await fetch_trust_anchors(notary_url)
    all_valid = True
    async with VerifyingClient(Client(server_params(notary_url, api_key), mode=mode), trust,
                               on_missing="mark", on_invalid="mark",
                               evidence=evidence) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        for tool, arguments in SAMPLE_CALLS:
            if tool not in listed:
                print(f"{tool:<12} not offered by the server")
                all_valid = False
                continue
            result = await client.call_tool(tool, arguments)
            if save is not None:
                save_call(save, mode, tool, arguments, result)
            finding = (result.meta or {})[VERIFICATION_META_KEY]
            if finding["status"] == "missing":
                print(f"{describe(tool, result)} NOT NOTARIZED: {finding['reason']}")
                all_valid = False
                continue
            levels = " ".join(f"{name}={finding.get('levels', {}).get(name, 'failed')}"
                              for name in ("record", "signature", "inclusion"))
            valid = finding["status"] == "verified"
            print(f"{describe(tool, result)} {finding.get('id', '-')}  {levels}  "
                  f"{'VALID' if valid else 'INVALID: ' + finding['reason']}")
            all_valid = all_valid and valid
    return all_valid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notary", default=os.environ.get("NOTARY_URL"),
                        help="notary base URL (default: $NOTARY_URL)")
    parser.add_argument("--api-key", default=os.environ.get("NOTARY_API_KEY"),
                        help="API key handed to the server (default: $NOTARY_API_KEY)")
    parser.add_argument("--mode", choices=("auto", "legacy", "both"), default="auto",
                        help="MCP protocol: auto (2026-07-28), legacy (2025-11-25) or both")
    parser.add_argument("--save", metavar="DIR", type=Path,
                        help="also save each call as DIR/<mode>-<tool>.json for `notary verify`")
    parser.add_argument("--evidence", metavar="DIR", type=Path,
                        help="keep every verified call in this evidence store (`notary verify "
                             "DIR` checks them all again)")
    args = parser.parse_args(argv)
    if not args.notary or not args.api_key:
        parser.error("--notary and --api-key (or NOTARY_URL and NOTARY_API_KEY) are required")
    ok = True
    for mode in (("auto", "legacy") if args.mode == "both" else (args.mode,)):
        print(f"== mode {mode}")
        ok = asyncio.run(run(args.notary, args.api_key, mode, args.save, args.evidence)) and ok
    print("all results verified" if ok else "SOME RESULTS DID NOT VERIFY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
