"""``notary verify DIR|BUNDLE``: every saved call of an evidence store or bundle
(:mod:`notary.verifier.evidence`), each verified as ``notary verify CALL`` verifies one, and
``--export FILE`` to write the calls that verified as one bundle.

The JavaScript CLI (``mcp-notary verify DIR|BUNDLE``) reads the same inputs and prints the same
reports: a report per call behind ``== <source>``, then ``<n> of <m> saved calls verified``; as
JSON ``{"valid", "calls": [{"source", ...report}]}``. An entry that cannot be read is a failed
entry (``error``), not a usage error, so one damaged file does not hide the others.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ledger.client.http import HttpClient
from ledger.process import event_loop
from ledger.process.atomic import write_atomic
from ledger.process.exitcodes import UsageError
from notary.cli.trust_args import check_network_args, state_from_args, trust_from_args
from notary.verifier.evidence import EvidenceEntry, bundle_text
from notary.verifier.inputs import VerifierInputError, call_from_document
from notary.verifier.report import Report
from notary.verifier.state import VerifierStateError
from notary.verifier.trust import Trust
from notary.verifier.verify import verify_tool_call

_SINGLE_CALL_FLAGS = ("tool", "arguments", "receipt", "record", "save_receipt")


async def _verify_all(args: argparse.Namespace, entries: list[EvidenceEntry]
                      ) -> list[tuple[EvidenceEntry, Report | str]]:
    check_network_args(args)
    state = state_from_args(args)

    async def each(trust: Trust, fetcher: HttpClient | None
                   ) -> list[tuple[EvidenceEntry, Report | str]]:
        out: list[tuple[EvidenceEntry, Report | str]] = []
        for entry in entries:
            if entry.error is not None:
                out.append((entry, entry.error))
                continue
            try:
                call = call_from_document(entry.doc)
                out.append((entry, await verify_tool_call(call, trust, fetcher=fetcher,
                                                          state=state, log_url=args.log_url,
                                                          upgrade=args.upgrade)))
            except VerifierInputError as e:
                out.append((entry, str(e)))
        return out

    if args.offline:
        if args.upgrade:
            raise VerifierInputError("--upgrade fetches the receipt's proof, which --offline "
                                     "forbids")
        return await each(await trust_from_args(args, None), None)
    async with HttpClient(timeout=args.timeout) as fetcher:
        return await each(await trust_from_args(args, fetcher), fetcher)


def verify_entries(args: argparse.Namespace, entries: list[EvidenceEntry]) -> int:
    """Verify every entry; print the reports; exit 0 only when each one is valid."""
    for flag in _SINGLE_CALL_FLAGS:
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} goes with one saved call, not with an "
                             "evidence store or bundle")
    if not entries:
        raise UsageError(f"{args.call} holds no saved calls")
    if not (args.jwks or args.notary):
        raise UsageError("no receipt keys to trust: pass --jwks FILE|URL (or --notary URL)")
    if not (args.log_key or args.notary or args.witness_policy):
        raise UsageError("no log key to trust: pass --log-key VKEY (or --notary URL, or a "
                         "--witness-policy with a log line)")
    try:
        results = event_loop.run(_verify_all(args, entries))
    except (VerifierInputError, VerifierStateError) as e:
        raise UsageError(str(e)) from e
    good = [entry for entry, r in results if isinstance(r, Report) and r.valid]
    if args.export is not None:
        try:
            write_atomic(Path(args.export), bundle_text(e.doc for e in good).encode(),
                         mode=0o600)
        except OSError as exc:
            raise UsageError(f"cannot write --export {args.export}: {exc}") from exc
    if args.json:
        calls = [{"source": entry.source, **(r.to_json() if isinstance(r, Report)
                                             else {"valid": False, "error": r})}
                 for entry, r in results]
        print(json.dumps({"valid": len(good) == len(results), "calls": calls}, indent=2,
                         ensure_ascii=False))
    else:
        for entry, r in results:
            print(f"== {entry.source}")
            print(r.render() if isinstance(r, Report) else f"NOT VALID: {r}")
        print(f"{len(good)} of {len(results)} saved calls verified")
        if args.export is not None:
            print(f"{len(good)} verified call(s) written to {args.export}")
    return 0 if len(good) == len(results) else 1
