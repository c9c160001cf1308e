"""``notary apikey create|list|revoke``: the API keys clients notarize with.

A key is shown once, when it is created; the store keeps only its SHA-256. Its account's monthly
allowance is set by the first key of that account (``notary account set-allowance`` changes it).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from ledger.core.timestamps import rfc3339
from notary.cli import store_args
from notary.core.accounts import month_of

__all__ = ["register"]


def cmd_apikey_create(args: argparse.Namespace) -> int:
    # deferred: the store and key code, not for `--help`
    from notary.operator import admin

    try:
        key = store_args.with_store(args, lambda store: admin.create_api_key(
            store, args.account, args.monthly_allowance))
    except admin.AdminError as e:
        raise store_args.refused(args, e) from e
    allowance = "unlimited" if args.monthly_allowance is None else args.monthly_allowance
    # Everything on stdout, the key alone on the last line: `| tail -1` gives just the key,
    # and the note never ends in a colon with nothing after it when the key is captured.
    print(f"Created API key {key.key_id} for account {args.account!r} (monthly allowance: "
          f"{allowance}).")
    print("The key is on the next line and is shown only once (only its SHA-256 is stored); "
          "`notary apikey create ... | tail -1` prints the key alone.")
    print(key.token, flush=True)
    return 0


def cmd_apikey_list(args: argparse.Namespace) -> int:
    month = month_of(datetime.now(UTC))
    rows = store_args.with_store(args, lambda store: store.list_api_keys(month))
    if args.json:
        print(json.dumps([
            {"key_id": r.key_id, "account": r.account, "monthly_allowance": r.monthly_allowance,
             "used_this_month": r.used_this_month, "created": rfc3339(r.created),
             "revoked": None if r.revoked is None else rfc3339(r.revoked)}
            for r in rows], indent=2))
        return 0
    print(f"{'KEY ID':<14}{'ACCOUNT':<24}{'ALLOWANCE':>10}{'USED':>8}  STATUS")
    for r in rows:
        status = "revoked" if r.revoked else "active"
        allowance = r.monthly_allowance if r.monthly_allowance is not None else "-"
        print(f"{r.key_id:<14}{r.account:<24}{allowance:>10}{r.used_this_month:>8}  {status}")
    return 0


def cmd_apikey_revoke(args: argparse.Namespace) -> int:
    # deferred: the store and key code, not for `--help`
    from notary.operator import admin

    try:
        key_id = store_args.with_store(args, lambda store: admin.revoke_api_key(
            store, args.key_id))
    except admin.AdminError as e:
        raise store_args.refused(args, e) from e
    print(f"Revoked API key {key_id}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary apikey`` and its actions."""
    apikey = subparsers.add_parser("apikey", help="manage API keys").add_subparsers(
        dest="action", required=True)
    p = apikey.add_parser("create", help="create a key (printed once, alone on the last line)")
    store_args.add_store_flags(p)
    p.add_argument("--account", required=True)
    p.add_argument("--monthly-allowance", type=int,
                   help="a new account's writes per UTC month (default unlimited); an existing "
                        "account's allowance changes only with `notary account set-allowance`")
    p.set_defaults(func=cmd_apikey_create)
    p = apikey.add_parser("list", help="list keys and this month's usage")
    store_args.add_store_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_apikey_list)
    p = apikey.add_parser("revoke", help="revoke a key by its id (or the key itself)")
    store_args.add_store_flags(p)
    p.add_argument("key_id")
    p.set_defaults(func=cmd_apikey_revoke)
