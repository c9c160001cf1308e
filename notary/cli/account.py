"""``notary account set-allowance``: change an account's monthly allowance, for all its keys.

The allowance is the account's, shared by every key of it; ``notary apikey create`` sets it
only for a new account and refuses a different one for an existing account, so adding a key
never changes what the others may spend. This command is the one way to change it.
"""

from __future__ import annotations

import argparse

from notary.cli import store_args

__all__ = ["register"]


def _allowance(value: str) -> int | None:
    if value == "unlimited":
        return None
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("a number of writes, or 'unlimited'") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the monthly allowance must be zero or more")
    return n


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary account set-allowance``."""
    account = subparsers.add_parser("account", help="manage accounts").add_subparsers(
        dest="action", required=True)
    p = account.add_parser("set-allowance", help="set an account's monthly allowance (writes "
                           "per UTC month) for all its API keys")
    store_args.add_store_flags(p)
    p.add_argument("account")
    p.add_argument("allowance", type=_allowance, metavar="N|unlimited")

    def run(args: argparse.Namespace) -> int:
        # deferred: the store and key code, not for `--help`
        from notary.operator import admin

        try:
            store_args.with_store(args, lambda store: admin.set_monthly_allowance(
                store, args.account, args.allowance))
        except admin.AdminError as e:
            raise store_args.refused(args, e) from e
        shown = "unlimited" if args.allowance is None else args.allowance
        print(f"Account {args.account!r}: monthly allowance {shown}, for all its keys "
              "(in effect at once).")
        return 0

    p.set_defaults(func=run)
