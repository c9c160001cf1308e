"""``notary verify``: the command line of the verifier (rs-tool-call/1 and AER-1).

The verifier is imported by the functions that run it, not for ``notary verify --help``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import UsageError
from notary.cli.trust_args import (
    _read_json,
    add_trust_arguments,
    check_network_args,
    cose_from_args,
    state_from_args,
    trust_from_args,
)

if TYPE_CHECKING:
    from notary.verifier.inputs import ToolCall
    from notary.verifier.report import Report


def _load_call(args: argparse.Namespace) -> ToolCall:
    # deferred: the verifier package, not for `--help`
    from notary.verifier.inputs import (
        VerifierInputError,
        _object,
        call_from_document,
        call_from_receipt_and_record,
    )

    receipt = _object(_read_json(args.receipt, "the receipt"), "the receipt") \
        if args.receipt else None
    if args.call is None:
        if args.record is None or receipt is None:
            raise VerifierInputError("give a tool call file, or --receipt FILE and --record FILE")
        if args.tool or args.arguments:
            raise VerifierInputError("--tool and --arguments go with a bare tool result")
        return call_from_receipt_and_record(receipt, _read_json(args.record, "the record"))
    if args.record is not None:
        raise VerifierInputError("--record goes with --receipt, not with a tool call file")
    arguments = (_object(_read_json(args.arguments, "the arguments"), "the arguments")
                 if args.arguments is not None else None)
    return call_from_document(_read_json(args.call, "the tool call"), tool=args.tool,
                              arguments=arguments, receipt=receipt)


async def _run_verify(args: argparse.Namespace) -> Report:
    # deferred: the verifier package, not for `--help` (aiohttp: only when an HttpClient is made)
    from ledger.client.http import HttpClient
    from notary.verifier.inputs import VerifierInputError
    from notary.verifier.verify import verify_tool_call

    check_network_args(args)
    if not (args.jwks or args.notary):
        raise VerifierInputError("no receipt keys to trust: pass --jwks FILE|URL (or --notary URL)")
    if not (args.log_key or args.notary or args.witness_policy):
        raise VerifierInputError("no log key to trust: pass --log-key VKEY (or --notary URL, or "
                                 "a --witness-policy with a log line)")
    call = _load_call(args)
    cose = cose_from_args(args)
    state = state_from_args(args)
    if args.offline:
        if args.upgrade:
            raise VerifierInputError("--upgrade fetches the receipt's proof, which --offline "
                                     "forbids")
        trust = await trust_from_args(args, None)
        return await verify_tool_call(call, trust, fetcher=None, state=state,
                                      log_url=args.log_url, cose=cose)
    async with HttpClient(timeout=args.timeout) as fetcher:
        trust = await trust_from_args(args, fetcher)
        return await verify_tool_call(call, trust, fetcher=fetcher, state=state,
                                      log_url=args.log_url, upgrade=args.upgrade, cose=cose)


def cmd_verify(args: argparse.Namespace) -> int:
    # deferred: the verifier package and the event loop, not for `--help`
    from ledger.process import event_loop
    from notary.cli.aer1 import verify_command as verify_aer1_command
    from notary.cli.verify_evidence import verify_entries
    from notary.verifier.evidence import read_evidence
    from notary.verifier.inputs import VerifierInputError
    from notary.verifier.state import VerifierStateError

    if args.call not in (None, "-") and not args.call.lstrip().startswith("{"):
        try:
            entries = read_evidence(args.call)
        except VerifierInputError as e:
            raise UsageError(str(e)) from e
        if entries is not None:  # an evidence store (a directory) or bundle
            if args.cose is not None:
                raise UsageError("--cose goes with one tool call (a saved call, a tool result, "
                                 "or --receipt and --record), not an evidence store or bundle")
            return verify_entries(args, entries)
    if args.export is not None:
        raise UsageError("--export goes with an evidence store or bundle")
    aer1_code = verify_aer1_command(args)  # AER-1 receipts (result._receipt); None otherwise
    if aer1_code is not None:
        return aer1_code
    try:
        report = event_loop.run(_run_verify(args))
    except (VerifierInputError, VerifierStateError) as e:
        raise UsageError(str(e)) from e
    if args.save_receipt is not None:
        upgraded = report.receipt_with_proof()
        if upgraded is not None:
            # deferred: tempfile and its random source only to save a receipt
            from ledger.process.atomic import write_atomic

            try:
                write_atomic(Path(args.save_receipt),
                             (json.dumps(upgraded, indent=2, ensure_ascii=False) + "\n").encode(),
                             mode=0o644)  # a receipt is public: it is meant to be shared
            except OSError as e:
                raise UsageError(f"cannot write --save-receipt {args.save_receipt}: {e}") from e
            report.notes.append(f"receipt with the proof used saved to {args.save_receipt}")
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    return report.exit_code


_VERIFY_EPILOG = """\
inputs (one of):
  CALL                      saved tool call {"tool", "arguments", "result", "server"?}
  DIR | BUNDLE              every saved call of an evidence store (a directory of them, as a
                            verifying client keeps) or of its bundle (JSON Lines); --export
                            FILE writes the calls that verified as one bundle
  CALL --tool T [--arguments A]
                            bare CallToolResult (wire JSON with _meta), or a JSON-RPC response
  --receipt R --record C    receipt (with proof) and rs-tool-call/1 call record
  (CALL --receipt R: use R instead of, or for want of, the receipt embedded in _meta)
  ... --cose F              also check F, the call's RFC 9942 COSE receipt (receipt.cose)

levels: 1 record, 2 signature, 3 inclusion, 4 witnesses, 5 consistency; with --cose a sixth
line, cose, required (leaf index, issuer, log key signature, inclusion path; no network).
exit status: 0 every required level passed (1-3 always; 4 with a quorum; 5 when a checkpoint
of the log was stored before and the check could be made), 1 a level failed or a required
level did not pass (a fork or rollback always fails), 2 usage or input error.
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary verify`` to the CLI."""
    p = subparsers.add_parser(
        "verify", help="verify a notarized tool call (five levels)",
        description="Verify a notarized MCP tool call: the call record, the receipt signature,\n"
                    "inclusion in the log, witness cosignatures, and consistency with the\n"
                    "checkpoints seen before (see the notary.verifier package for the formats).",
        epilog=_VERIFY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("call", nargs="?", metavar="CALL",
                   help="tool call JSON file ('-': stdin), or an evidence store or bundle")
    p.add_argument("--tool", help="tool name, for a bare tool result")
    p.add_argument("--arguments", metavar="FILE|JSON",
                   help="the call's arguments object, for a bare tool result (default {})")
    p.add_argument("--receipt", metavar="FILE", help="receipt JSON (with its proof)")
    p.add_argument("--record", metavar="FILE", help="rs-tool-call/1 call record JSON")
    p.add_argument("--cose", metavar="FILE",
                   help="the call's RFC 9942 COSE receipt (GET /v1/tool-calls/{id}/receipt.cose;"
                        " '-': stdin), checked as the report's cose line under the trusted log "
                        "keys")
    add_trust_arguments(p)
    p.add_argument("--upgrade", action="store_true",
                   help="fetch the receipt's current proof from the notary first (into its "
                        "newest witnessed checkpoint: a receipt embedded at call time never "
                        "carries cosignatures) and verify with it")
    p.add_argument("--save-receipt", metavar="FILE",
                   help="write the receipt with the proof used (after --upgrade: the "
                        "witnessed one, verifiable offline with --witness later)")
    p.add_argument("--export", metavar="FILE",
                   help="with an evidence store or bundle: write the calls that verified to "
                        "FILE as one bundle")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_verify)
