"""``notary hash``: the ``call_sha256`` of a call record (the SHA-256 of its canonical JSON),
which a client sends to be notarized in place of the record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.core.boundedjson import JsonError
from ledger.process.exitcodes import UsageError
from notary.core.canonical import CanonicalizationError
from notary.core.input_json import parse_input_json
from notary.core.records import RecordError, record_from_json

__all__ = ["register"]


def cmd_hash(args: argparse.Namespace) -> int:
    try:
        raw = sys.stdin.buffer.read() if args.record == "-" else Path(args.record).read_bytes()
        obj = parse_input_json(raw)
    except (OSError, JsonError) as e:
        raise UsageError(f"cannot read {args.record}: {e}") from e
    try:
        record = record_from_json(obj)
        print(record.call_sha256())
        if args.show_canonical:
            sys.stderr.write(record.canonical_bytes().decode() + "\n")
    except (RecordError, CanonicalizationError) as e:
        raise UsageError(f"not a valid call record: {e}") from e
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary hash``."""
    p = subparsers.add_parser("hash", help="print the call_sha256 of a call record file ('-': "
                              "stdin)")
    p.add_argument("record")
    p.add_argument("--show-canonical", action="store_true",
                   help="also print the canonical JSON bytes to stderr")
    p.set_defaults(func=cmd_hash)
