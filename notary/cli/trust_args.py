"""The trust and network flags that ``notary verify``, ``notary mcp`` and ``notary gateway audit``
share, and turning them into trust anchors and a state file.

Adding the flags imports nothing of the verifier, so that ``--help`` of those commands does not
pay for it: the functions that turn flags into trust import it when a command runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.client.http import HttpClient
    from ledger.core.tlog_policy import TlogPolicy
    from notary.verifier.state import StateFile
    from notary.verifier.trust import Trust

__all__ = ["DEFAULT_STATE_TEXT", "add_trust_arguments", "check_network_args",
           "cose_from_args", "state_from_args", "trust_from_args", "witness_policy_from_args"]

DEFAULT_STATE_TEXT = "~/.config/mcp-notary/verifier-state.json"
"""``notary.verifier.state.DEFAULT_STATE_PATH`` as ``--help`` shows it, without importing the
verifier (``tests/notary/cli/test_command_loading.py`` checks that they agree)."""


def _read_json(value: str, what: str) -> Any:
    """JSON from a file path, ``-`` (stdin), or inline text starting with ``{``."""
    # deferred: the verifier package, not for `--help`
    from ledger.core.boundedjson import JsonError
    from notary.verifier.inputs import VerifierInputError, parse_input_json

    try:
        if value.lstrip().startswith("{"):
            return parse_input_json(value)
        data = (sys.stdin.buffer.read() if value == "-"
                else Path(value).expanduser().read_bytes())
        return parse_input_json(data)
    except (OSError, JsonError) as e:
        raise VerifierInputError(f"cannot read {what} {value!r}: {e}") from e


def add_trust_arguments(p: argparse.ArgumentParser, notary_help: str = "") -> None:
    """The trust and network flags shared by ``notary verify`` and ``notary mcp``."""
    p.add_argument("--jwks", metavar="FILE|URL",
                   help="trusted receipt keys: a JWKS file or URL (a URL needs the network)")
    p.add_argument("--log-key", action="append", default=[], metavar="VKEY|@FILE",
                   help="trusted log verifier key <origin>+<id>+<key> (repeatable; @FILE reads "
                        "one key a line)")
    p.add_argument("--witness", action="append", default=[], metavar="VKEY|@FILE",
                   help="witness cosignature key (repeatable; @FILE reads one key a line)")
    p.add_argument("--quorum", type=int, metavar="K",
                   help="witnesses that must have cosigned (default: all given witnesses; "
                        "0 when none)")
    p.add_argument("--witness-policy", metavar="FILE",
                   help="a C2SP tlog-policy file (log, witness, group and quorum lines) "
                        "instead of --witness/--quorum; its log keys are trusted too")
    p.add_argument("--notary", metavar="URL",
                   help=notary_help + "fetch the receipt keys and log key from this notary when "
                        "--jwks or --log-key is not given (trusts that notary for its own keys)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--state", type=Path, metavar="FILE",
                       help=f"checkpoints seen so far, per log (default {DEFAULT_STATE_TEXT})")
    group.add_argument("--no-state", action="store_true",
                       help="neither read nor write a state file")
    p.add_argument("--offline", action="store_true",
                   help="never use the network; checks that need it are skipped")
    p.add_argument("--log-url", metavar="URL",
                   help="the log's base URL for level 5 (default: from the receipt's entry_url)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="per HTTP request (default 10)")


def state_from_args(args: argparse.Namespace) -> StateFile | None:
    if args.no_state:
        return None
    # deferred: the verifier package, not for `--help`
    from notary.verifier.state import DEFAULT_STATE_PATH, StateFile

    return StateFile(args.state if args.state is not None else DEFAULT_STATE_PATH)


def cose_from_args(args: argparse.Namespace) -> bytes | None:
    """The COSE receipt of ``notary verify --cose FILE`` (``-``: stdin), as bytes.

    Read up to one byte past the largest receipt, so an oversized file is a failed verdict
    that says so (:func:`ledger.core.cose_receipt.parse_receipt`), not a read of any size.
    """
    if args.cose is None:
        return None
    # deferred: the COSE codec and the verifier package, not for `--help`
    from ledger.core.cose_receipt import MAX_RECEIPT_SIZE
    from notary.verifier.inputs import VerifierInputError

    try:
        if args.cose == "-":
            return sys.stdin.buffer.read(MAX_RECEIPT_SIZE + 1)
        with Path(args.cose).expanduser().open("rb") as f:
            return f.read(MAX_RECEIPT_SIZE + 1)
    except OSError as e:
        raise VerifierInputError(f"cannot read the COSE receipt {args.cose!r}: {e}") from e


def check_network_args(args: argparse.Namespace) -> None:
    """Flag combinations that would need the network while ``--offline`` forbids it."""
    # deferred: the verifier package, not for `--help`
    from notary.verifier.inputs import VerifierInputError, check_http_url

    if args.offline and args.notary:
        raise VerifierInputError("--notary fetches keys, which --offline forbids; pass --jwks "
                                 "FILE and --log-key")
    if args.offline and args.jwks and args.jwks.startswith(("http://", "https://")):
        raise VerifierInputError("--jwks is a URL, which --offline forbids; pass a JWKS file")
    for url in (args.notary, args.log_url):
        if url is not None:
            check_http_url(url)
    if not 0 < args.timeout < math.inf:  # nan and inf too, as the JavaScript CLI
        raise VerifierInputError("--timeout must be positive")


async def trust_from_args(args: argparse.Namespace, fetcher: HttpClient | None) -> Trust:
    """The trust anchors the flags name; the notary's own keys fill in only what is missing."""
    # deferred: the verifier package, not for `--help`
    from notary.verifier.trust import (
        Trust,
        build_trust,
        complete_from_notary,
        load_jwks,
        notary_retirements,
        parse_log_keys,
        parse_witness_keys,
        with_policy_logs,
    )

    jwks = await load_jwks(args.jwks, fetcher) if args.jwks else None
    policy = witness_policy_from_args(args)
    # The policy's log lines are pinned keys, as --log-key: the notary's fill in only when
    # neither names any.
    pinned = with_policy_logs(parse_log_keys(args.log_key), policy)
    jwks, log_keys, _ = await complete_from_notary(jwks, pinned, args.notary, fetcher)
    # Which logs' keys the notary retired: only ever a stricter verdict, so asked even when
    # every key is pinned.
    retired = await notary_retirements(args.notary, fetcher) if args.notary and fetcher \
        else {}
    if policy is not None:
        return Trust(jwks, log_keys, policy=policy, retired=retired)
    return replace(build_trust(jwks, log_keys, parse_witness_keys(args.witness), args.quorum),
                   retired=retired)


def witness_policy_from_args(args: argparse.Namespace) -> TlogPolicy | None:
    """The ``--witness-policy`` file, which replaces ``--witness`` and ``--quorum``."""
    if getattr(args, "witness_policy", None) is None:
        return None
    # deferred: the verifier package, not for `--help`
    from notary.verifier.inputs import VerifierInputError
    from notary.verifier.trust import load_witness_policy

    if args.witness or args.quorum is not None:
        raise VerifierInputError("--witness-policy replaces --witness and --quorum; give one "
                                 "or the other")
    return load_witness_policy(args.witness_policy)
