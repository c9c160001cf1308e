"""``notary``: serve the notary, manage API keys and receipt keys, hash call records."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from ledger.cli import monitor, witness
from ledger.core.boundedjson import JsonError
from ledger.exitcodes import ExitCode, UsageError
from ledger.keyfile import KeyFileError
from ledger.logs import configure
from ledger.sequencer import LogIntegrityError
from ledger.storage.base import StoreError
from ledger.storage.damage import corruption_in, damage_message
from notary import admin
from notary.cli import check, gateway, mcp, verify
from notary.cli.trust_args import parse_input_json
from notary.config import ConfigError, Settings, resolve
from notary.core.accounts import month_of
from notary.core.canonical import CanonicalizationError
from notary.core.records import RecordError, record_from_json
from notary.http.app import create_app, init_data_dir
from notary.keys import Paths
from notary.startup import entry_url_bases
from notary.store import MEMORY, is_memory, open_store
from notary.store.base import NotaryStore
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_schema import MigrationReport
from notary.watch import server_filter

_T = TypeVar("_T")


def _settings(args: argparse.Namespace) -> Settings:
    flags = {k: v for k, v in vars(args).items()
             if k in ("data", "database", "listen", "public_url", "origin", "max_body",
                      "log_format", "witnesses", "witness_quorum", "witness_interval",
                      "scrub_rate")}
    return resolve(flags, config_file=getattr(args, "config", None))


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    configure(settings.log_format, settings.log_level)
    first = init_data_dir(settings)
    base = settings.base_url
    if first is not None:
        print(f"Created a new notary in {settings.data}/ (keys are 0600; back them up).")
        print(f"Log verifier key:  {first.vkey}")
        print(f"Receipt keys:      {base}/.well-known/jwks.json (kid {first.kid})")
        if not is_memory(settings.database):
            print(f"Create an API key: notary apikey create --data {settings.data} "
                  "--account NAME")
    if is_memory(settings.database):
        print(f"The store is in memory ({MEMORY}): nothing outlives this process, and API keys "
              "can only be added in process (notary.admin).")
    host, port = settings.host_port
    print(f"Serving on {base} (listening on {host}:{port})", flush=True)
    web.run_app(create_app(settings), host=host, port=port, print=None, access_log=None,
                handle_signals=True, shutdown_timeout=30)
    return 0


def _log_origin(paths: Paths) -> str | None:
    """The log's origin, from its verifier key file (``<origin>+<key id>+<key>``)."""
    try:
        return paths.log_vkey.read_text().strip().split("+", 1)[0] or None
    except OSError:
        return None


def _with_store(args: argparse.Namespace, use: Callable[[NotaryStore], Awaitable[_T]], *,
                bases: tuple[str, ...] = ()) -> _T:
    """Run ``use`` on the store the settings select, beside a running server if there is one.

    Opening migrates a store of an older layout, as ``notary serve`` would (``bases``: more
    base URLs older receipts may have been signed with, tried first).
    """
    settings = _settings(args)
    if is_memory(settings.database):
        raise UsageError(f"database {MEMORY!r} lives inside one `notary serve` process; there "
                         "is nothing to administer from the command line")
    paths = Paths(settings.data)
    if not paths.db.exists():
        raise UsageError(f"no notary database at {paths.db}; run `notary serve` once first")
    origin = _log_origin(paths)
    candidates = [*bases, *(entry_url_bases(settings, origin) if origin else [settings.base_url])]

    async def run() -> _T:
        store = await open_store(settings.database, paths.db, entry_url_bases=candidates)
        try:
            return await use(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreError as e:
        raise UsageError(f"the store at {paths.db}: {e}") from e


def cmd_apikey_create(args: argparse.Namespace) -> int:
    try:
        key = _with_store(args, lambda store: admin.create_api_key(
            store, args.account, args.monthly_allowance))
    except admin.AdminError as e:
        raise UsageError(str(e)) from e
    allowance = "unlimited" if args.monthly_allowance is None else args.monthly_allowance
    print(f"Created API key {key.key_id} for account {args.account!r} "
          f"(monthly allowance: {allowance}). It is shown once; store it now:", file=sys.stderr)
    print(key.token)
    return 0


def cmd_apikey_list(args: argparse.Namespace) -> int:
    month = month_of(datetime.now(UTC))
    rows = _with_store(args, lambda store: store.list_api_keys(month))
    if args.json:
        print(json.dumps([
            {"key_id": r.key_id, "account": r.account, "monthly_allowance": r.monthly_allowance,
             "used_this_month": r.used_this_month, "created": r.created, "revoked": r.revoked}
            for r in rows], indent=2))
        return 0
    print(f"{'KEY ID':<14}{'ACCOUNT':<24}{'ALLOWANCE':>10}{'USED':>8}  STATUS")
    for r in rows:
        status = "revoked" if r.revoked else "active"
        allowance = r.monthly_allowance if r.monthly_allowance is not None else "-"
        print(f"{r.key_id:<14}{r.account:<24}{allowance:>10}{r.used_this_month:>8}  {status}")
    return 0


def cmd_apikey_revoke(args: argparse.Namespace) -> int:
    try:
        key_id = _with_store(args, lambda store: admin.revoke_api_key(store, args.key_id))
    except admin.AdminError as e:
        raise UsageError(str(e)) from e
    print(f"Revoked API key {key_id}")
    return 0


def cmd_keys_rotate(args: argparse.Namespace) -> int:
    paths = Paths(_settings(args).data)
    key = _with_store(args, lambda store: admin.rotate_receipt_key(paths, store))
    print(f"New receipt key {key.kid}; old keys stay in the JWKS. A running notary switches "
          "within a few seconds.")
    return 0


def _report_migration(report: MigrationReport | None) -> int:
    if report is None:
        return ExitCode.OK
    moved = f"{report.migrated} receipt(s) moved to the current layout"
    if report.prefixes:
        moved += " (signed under " + ", ".join(p.removesuffix("/v1/ledger/entries/")
                                              for p in report.prefixes) + ")"
    print(f"Store was at schema version {report.from_version}; {moved}.")
    if not report.withheld:
        print("Every receipt is served exactly as it was signed.")
        return ExitCode.OK
    print(f"{len(report.withheld)} receipt(s) are withheld (never served) until the base URL "
          "they were issued under is given with --base-url:")
    for receipt_id, problem in report.withheld:
        print(f"  {receipt_id}: {problem}")
    return ExitCode.CHECK_FAILED


def cmd_migrate(args: argparse.Namespace) -> int:
    bases = tuple(args.base_urls or ())
    for url in bases:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--base-url {url!r} is not an http(s) URL")

    async def report(store: NotaryStore) -> MigrationReport | None:
        return store.migration if isinstance(store, SqliteNotaryStore) else None

    return _report_migration(_with_store(args, report, bases=bases))


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


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="data directory (default ./notary-data)")
    p.add_argument("--database", help="the store: empty (default) for the SQLite file in "
                   f"--data, {MEMORY!r} for a throwaway one (serve only)")
    p.add_argument("--config", type=Path, help="TOML settings file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="notary", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the notary HTTP service")
    _common(p)
    p.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:8080)")
    p.add_argument("--public-url", help="URL clients use to reach this notary")
    p.add_argument("--origin", help="log origin (fixed at first run)")
    p.add_argument("--max-body", type=int, help="request body limit in bytes")
    p.add_argument("--log-format", choices=["auto", "json", "console"])
    p.add_argument("--witness", dest="witnesses", action="append", metavar="URL=VKEY",
                   help="a witness to collect cosignatures from (repeatable)")
    p.add_argument("--witness-quorum", type=int, metavar="K",
                   help="cosignatures a published checkpoint needs (default: a majority)")
    p.add_argument("--witness-interval", type=float, metavar="S",
                   help="seconds between submissions of a grown tree (default 2)")
    p.add_argument("--scrub-rate", type=float, metavar="N",
                   help="stored tiles and bundles the background scrub re-verifies per second "
                        "(default 20; 0 turns it off)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("hash", help="print the call_sha256 of a call record file ('-': stdin)")
    p.add_argument("record")
    p.add_argument("--show-canonical", action="store_true",
                   help="also print the canonical JSON bytes to stderr")
    p.set_defaults(func=cmd_hash)

    apikey = sub.add_parser("apikey", help="manage API keys").add_subparsers(
        dest="action", required=True)
    p = apikey.add_parser("create", help="create a key (printed once, alone on the last line)")
    _common(p)
    p.add_argument("--account", required=True)
    p.add_argument("--monthly-allowance", type=int, help="writes per UTC month (default unlimited)")
    p.set_defaults(func=cmd_apikey_create)
    p = apikey.add_parser("list", help="list keys and this month's usage")
    _common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_apikey_list)
    p = apikey.add_parser("revoke", help="revoke a key by its id (or the key itself)")
    _common(p)
    p.add_argument("key_id")
    p.set_defaults(func=cmd_apikey_revoke)

    p = sub.add_parser("migrate", help="bring the store to the current layout; recover "
                       "receipts issued under other base URLs")
    _common(p)
    p.add_argument("--base-url", dest="base_urls", action="append", metavar="URL",
                   help="a public URL older receipts were issued under (repeatable)")
    p.set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="manage receipt signing keys").add_subparsers(
        dest="action", required=True)
    p = keys.add_parser("rotate", help="start signing receipts with a new key")
    _common(p)
    p.set_defaults(func=cmd_keys_rotate)

    for module in (verify, check, mcp, witness, gateway):
        module.register(sub)
    monitor.register(sub, watch=server_filter)
    return parser


def _database(args: argparse.Namespace) -> tuple[Path | None, str | None]:
    """The notary database a command uses, and the command that checks it (for messages)."""
    if not hasattr(args, "data"):
        return None, None
    try:
        data = _settings(args).data
    except (ConfigError, UsageError):
        return None, None
    return Paths(data).db, f"notary check --data {data}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (UsageError, ConfigError, KeyFileError, StoreError) as e:
        print(f"notary: error: {e}", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as e:
        # A damaged store: not a bug to show as a traceback, nor worth retrying.
        db, check_command = _database(args)
        if isinstance(e, LogIntegrityError):
            print(f"notary: error: the log in {db} does not match its signed checkpoint ({e}). "
                  f"Restore the newest backup and run `{check_command}` before serving it.",
                  file=sys.stderr)
            return ExitCode.USAGE
        if corruption_in(e) is None:
            raise
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
