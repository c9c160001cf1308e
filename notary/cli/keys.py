"""``notary keys rotate|list``: the receipt signing keys, and the log's verifier keys.

Rotating adds a key and signs new receipts with it; old keys stay in the JWKS, so receipts they
signed still verify. A running notary picks up the new key within a few seconds.
"""

from __future__ import annotations

import argparse
import json

from ledger.core.timestamps import rfc3339
from ledger.process.exitcodes import UsageError
from notary.cli import store_args

__all__ = ["register"]


def cmd_keys_rotate(args: argparse.Namespace) -> int:
    # deferred: the store and key code, not for `--help`
    from notary.operator import admin
    from notary.serving.keys import Paths

    paths = Paths(store_args.settings(args).data)
    key = store_args.with_store(args, lambda store: admin.rotate_receipt_key(paths, store))
    print(f"New receipt key {key.kid}; old keys stay in the JWKS. A running notary switches "
          "within a few seconds.")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    """The keys that verify this notary's output: the log's (Ed25519, and the ML-DSA-44 key
    derived from it), and every receipt key the store knows, the one that signs marked."""
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.note import NoteError
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
    from ledger.process.keyfile import KeyFileError
    from notary.serving.keys import Paths, current_receipt_key, load_log_key

    paths = Paths(store_args.settings(args).data)
    records = store_args.with_store(args, lambda store: store.receipt_keys())
    logs = store_args.with_store(args, lambda store: store.logs())
    try:
        signer = load_log_key(paths)
    except (OSError, KeyFileError, NoteError) as e:
        raise UsageError(f"cannot read the log key in {paths.root}: {e}") from None
    log_keys = [("Ed25519", signer.verifier_key_text()),
                ("ML-DSA-44", SubtreeCosignatureSigner.derived_from(signer).verifier_key_text())]
    if logs:  # log 0's, as registered: after a compromised roll log.key is a new root
        log_keys = list(zip(("Ed25519", "ML-DSA-44"), logs[0].vkeys, strict=False))
    try:
        current = current_receipt_key(paths, records).kid
    except KeyFileError:
        current = None
    if args.json:
        print(json.dumps({
            "log_keys": [{"algorithm": a, "vkey": v} for a, v in log_keys],
            "receipt_keys": [{"kid": r.kid, "created": rfc3339(r.created),
                              "signs": r.kid == current} for r in records]}, indent=2))
        return 0
    for algorithm, vkey in log_keys:
        print(f"log key ({algorithm}): {vkey}")
    for r in records:
        mark = "  (signs new receipts)" if r.kid == current else ""
        print(f"receipt key {r.kid}  created {rfc3339(r.created)}{mark}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary keys`` and its actions."""
    keys = subparsers.add_parser("keys", help="manage receipt signing keys").add_subparsers(
        dest="action", required=True)
    p = keys.add_parser("rotate", help="start signing receipts with a new key")
    store_args.add_store_flags(p)
    p.set_defaults(func=cmd_keys_rotate)
    p = keys.add_parser("list", help="the log's verifier keys and the receipt keys (which signs)")
    store_args.add_store_flags(p)
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=cmd_keys_list)
