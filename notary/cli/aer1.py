"""``notary verify`` on an AER-1 receipt: bytes and hash here, the anchor by the regular verifier.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from ledger.client.http import HttpClient
from ledger.core.boundedjson import JsonError
from ledger.process import event_loop
from ledger.process.exitcodes import UsageError
from notary.cli.trust_args import (
    check_network_args,
    cose_from_args,
    state_from_args,
    trust_from_args,
)
from notary.core.aer1 import (
    AER1_LEVELS,
    Aer1Verdict,
    extract_aer1,
    is_aer1_receipt,
    summarize_anchor,
    verify_aer1,
)
from notary.core.verification import failed, skipped
from notary.verifier.inputs import ToolCall, VerifierInputError, parse_input_json
from notary.verifier.report import Report
from notary.verifier.state import VerifierStateError
from notary.verifier.verify import verify_tool_call


def _render(receipt: Mapping[str, object], verdict: Aer1Verdict, anchor_lines: list[str]) -> str:
    lines = [f"AER-1 receipt {receipt.get('id')}: tool {receipt.get('tool')!r}, "
             f"{receipt.get('provenance_class')}, {receipt.get('timestamp')}"]
    for i, name in enumerate(AER1_LEVELS, 1):
        result = verdict.levels.get(name, skipped("not checked"))
        reason = f": {result.reason}" if result.reason else ""
        lines.append(f"  {i}. {name:<7} {result.status.upper():<8}{reason}")
    if anchor_lines:
        lines.append("  anchor (the notary receipt of output_hash):")
        lines.extend("  " + ln for ln in anchor_lines)
    lines.append("VALID: bytes, hash and anchor check out." if verdict.valid
                 else "NOT VALID: " + ", ".join(
                     n for n in AER1_LEVELS
                     if verdict.levels.get(n, skipped("")).status != "passed") + " did not pass.")
    return "\n".join(lines)


def verify_command(args: argparse.Namespace) -> int | None:
    """``notary verify`` on an AER-1 document; None when the input is not one.

    Called first by ``notary verify``. The input counts as AER-1 when it is an AER-1 receipt,
    or a tool result / JSON-RPC response carrying one and no ``--tool`` was given (with
    ``--tool`` the rs-tool-call/1 path verifies the same result from its ``_meta``). Levels:
    bytes and hash here; the anchor is the notary receipt, verified by the regular verifier
    (all five levels, with the decoded bytes as its call record), so the trust flags, state
    file and ``--offline`` mean exactly what they mean for rs-tool-call/1.
    """


    if args.call is None or args.record is not None:
        return None
    value: str = args.call
    try:
        if value == "-":
            value = sys.stdin.read()
            # Hand the text on: the regular verifier reads inline JSON that starts with "{".
            args.call = value
            doc = parse_input_json(value)
        elif value.lstrip().startswith("{"):
            doc = parse_input_json(value)
        else:
            doc = parse_input_json(Path(value).expanduser().read_bytes())
    except (OSError, JsonError):
        return None  # not readable JSON: the regular verifier reports it
    receipt = extract_aer1(doc)
    if receipt is None or (args.tool is not None and not is_aer1_receipt(doc)):
        return None

    async def run() -> tuple[Aer1Verdict, Report | None]:
        check_network_args(args)
        if not (args.jwks or args.notary):
            raise VerifierInputError("no receipt keys to trust: pass --jwks FILE|URL "
                                     "(or --notary URL)")
        if not (args.log_key or args.notary):
            raise VerifierInputError("no log key to trust: pass --log-key VKEY (or --notary URL)")
        verdict = verify_aer1(receipt, jwks=None, log_verifier=None)
        anchor = receipt.get("anchor")
        if verdict.levels["anchor"].status == "failed" or not isinstance(anchor, Mapping):
            return verdict, None
        call = ToolCall(anchor["receipt"], verdict.record, None, "AER-1 anchor")
        if args.offline:
            trust = await trust_from_args(args, None)
            report = await verify_tool_call(call, trust, fetcher=None,
                                            state=state_from_args(args), log_url=args.log_url,
                                            cose=cose_from_args(args))
        else:
            async with HttpClient(timeout=args.timeout) as fetcher:
                trust = await trust_from_args(args, fetcher)
                report = await verify_tool_call(call, trust, fetcher=fetcher,
                                                state=state_from_args(args),
                                                log_url=args.log_url, cose=cose_from_args(args))
        verdict.anchor_verdict = report.verdict
        level = summarize_anchor(report.verdict)
        if level.status == "passed" and not report.valid:
            lines = {**report.verdict.levels,
                     **({"cose": report.cose} if report.cose is not None else {})}
            level = failed("the notary receipt does not verify: " + "; ".join(
                f"{n}: {r.reason}" for n, r in lines.items() if r.status == "failed"))
        verdict.levels["anchor"] = level
        return verdict, report

    try:
        verdict, report = event_loop.run(run())
    except (VerifierInputError, VerifierStateError) as e:
        raise UsageError(str(e)) from e
    if args.json:
        out = verdict.to_json()
        if report is not None:
            out["anchor_report"] = report.to_json()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        anchor_lines = report.render().splitlines() if report is not None else []
        print(_render(receipt, verdict, anchor_lines))
    return 0 if verdict.valid else 1
