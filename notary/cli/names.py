"""``notary names grant|list|move``: which account holds which server name.

The first account to notarize under a server name holds it; another account's keys are refused
that name and every name confusable with it (``notary.core.server_names``). The operator gives
a free name to an account ahead of its first receipt (``grant``), sees who holds what
(``list``), and hands a name over, e.g. when a server changes hands (``move``). Names are
shown so that two different ones never print the same (``display_name``: as they are when plain
ASCII, else as an ASCII JSON string; ``--json`` escapes every non-ASCII character too).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ledger.core.timestamps import rfc3339
from notary.cli import store_args

if TYPE_CHECKING:
    from notary.store.base import NotaryStore

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary names`` and its actions."""
    names = subparsers.add_parser("names", help="which account holds which server name").\
        add_subparsers(dest="action", required=True)

    p = names.add_parser("grant", help="give a server name nobody holds to an account")
    store_args.add_store_flags(p)
    p.add_argument("name")
    p.add_argument("--account", required=True)

    def grant(args: argparse.Namespace) -> int:
        # deferred: the store code and ICU (display_name), not for `--help`
        from notary.core.server_names import display_name
        from notary.operator import admin

        try:
            new = store_args.with_store(args, lambda store: admin.grant_server_name(
                store, args.name, args.account))
        except admin.AdminError as e:
            raise store_args.refused(args, e) from e
        print(f"Server name {display_name(args.name)} is held by account {args.account!r}"
              + ("." if new else " (it was already)."))
        return 0

    p.set_defaults(func=grant)

    p = names.add_parser("list", help="held server names and their accounts")
    store_args.add_store_flags(p)
    p.add_argument("--account", help="only this account's names")
    p.add_argument("--json", action="store_true")

    def show(args: argparse.Namespace) -> int:
        # deferred: ICU (display_name), not for `--help`
        from notary.core.server_names import display_name

        rows = store_args.with_store(args, lambda store: store.server_names(args.account))
        if args.json:
            print(json.dumps([{"name": r.name, "account": r.account,
                               "since": rfc3339(r.since) if r.since else None}
                              for r in rows], indent=2))
            return 0
        print(f"{'SERVER NAME':<40}ACCOUNT")
        for r in rows:
            print(f"{display_name(r.name):<40}{r.account}")
        return 0

    p.set_defaults(func=show)

    p = names.add_parser("move", help="give a held server name to another account")
    store_args.add_store_flags(p)
    p.add_argument("name")
    p.add_argument("--to", dest="account", required=True, metavar="ACCOUNT")

    def move(args: argparse.Namespace) -> int:
        # deferred: the store code and ICU (display_name), not for `--help`
        from ledger.storage.base import StoreError
        from notary.core.server_names import display_name
        from notary.operator import admin

        async def run(store: NotaryStore) -> str:
            try:
                return await admin.move_server_name(store, args.name, args.account)
            except StoreError as e:  # no such name or account: the user's to fix
                raise admin.AdminError(str(e)) from None

        try:
            before = store_args.with_store(args, run)
        except admin.AdminError as e:
            raise store_args.refused(args, e) from e
        print(f"Server name {display_name(args.name)} moved from account {before!r} to "
              f"{args.account!r}.")
        return 0

    p.set_defaults(func=move)
