"""``notary``: serve the notary, manage API keys and receipt keys, hash call records."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from ledger.cli import mirror, monitor, witness
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.client.http import FetchError, HttpClient
from ledger.core.boundedjson import JsonError
from ledger.core.note import NoteError
from ledger.core.paths import ENTRIES_PATH
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.timestamps import rfc3339
from ledger.http.run import serve_until_signalled
from ledger.http.server import ServerLimits
from ledger.log.sequencer import LogIntegrityError
from ledger.process import event_loop
from ledger.process.dirlock import DirectoryInUseError, ServingLock, exclusive
from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.keyfile import KeyFileError
from ledger.process.structured_logs import configure
from ledger.process.version import package_version
from ledger.storage.base import StoreError
from ledger.storage.damage import corruption_in, damage_message
from notary.cli import account, check, gateway, mcp, names, verify
from notary.cli.trust_args import parse_input_json
from notary.core.accounts import month_of
from notary.core.canonical import CanonicalizationError
from notary.core.records import RecordError, record_from_json
from notary.http.app import create_app, init_data_dir
from notary.operator import admin
from notary.operator.backup import BackupError, backup, restore
from notary.operator.watch_server import server_filter
from notary.serving.config import ConfigError, Settings, resolve
from notary.serving.keys import Paths, current_receipt_key, load_log_key
from notary.serving.startup import check_before_creating, entry_url_bases
from notary.serving.workers import bind, supervise
from notary.store import MEMORY, is_memory, is_postgres, open_store
from notary.store.base import NotaryStore
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_schema import MigrationReport

_T = TypeVar("_T")
_SETTING_NAMES = frozenset(f.name for f in fields(Settings))


def _settings(args: argparse.Namespace) -> Settings:
    flags = {k: v for k, v in vars(args).items() if k in _SETTING_NAMES}
    return resolve(flags, config_file=getattr(args, "config", None))


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    configure(settings.log_format, settings.log_level)
    if settings.workers < 1:
        raise UsageError("--workers must be 1 or more")
    if settings.workers > 1 and is_memory(settings.database):
        raise UsageError(f"--workers needs a store the workers share; {MEMORY} is one per "
                         "process")
    worker = args.listen_fd is not None
    host, port = settings.host_port
    sock: socket.socket | None = None
    if worker:
        sock = socket.socket(fileno=args.listen_fd)
    else:
        # Everything that can fail is tried before anything is created in --data: the
        # settings, the database (and whether it already holds a log this frontend lacks the
        # key of), the port.
        event_loop.run(check_before_creating(settings))
    app = create_app(settings)  # settings are checked here, before any worker starts
    if not worker:
        try:
            sock = bind(host, port)
        except OSError as e:
            raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    # Held while serving: `notary restore` refuses to replace a directory in use.
    serving = ServingLock(settings.data)
    if settings.data.is_dir():
        _hold(serving)
    first = None if worker else init_data_dir(settings)
    if not serving.held:
        _hold(serving)
    base = settings.base_url
    if first is not None and not first.new_log:
        print(f"Joined the log of {settings.data}/log.key with a receipt key of this "
              f"frontend's own (kid {first.kid}, 0600; back it up).")
    elif first is not None:
        print(f"Created a new notary in {settings.data}/ (keys are 0600; back them up).")
        print(f"Log verifier key:  {first.vkey}")
        print(f"Receipt keys:      {base}/.well-known/jwks.json (kid {first.kid})")
        if not is_memory(settings.database):
            command = command_name(shutil.which("notary"), sys.argv[0], Path.cwd())
            print(f"Create an API key: {command} apikey create --data {settings.data} "
                  "--account NAME")
    if is_memory(settings.database):
        print(f"The store is in memory ({MEMORY}): nothing outlives this process, and API keys "
              "can only be added in process (notary.operator.admin).")
    assert sock is not None
    if settings.workers > 1:
        print(f"Serving on {base} (listening on {host}:{port}, {settings.workers} workers)",
              flush=True)
        return supervise(sock, settings.workers, args.argv)
    limits = ServerLimits(max_connections=settings.max_connections,
                          keepalive_timeout=settings.keepalive_timeout,
                          header_timeout=settings.header_timeout,
                          body_timeout=settings.body_timeout)

    def announce(url: str) -> None:
        if not worker:
            print(f"Serving on {base} (listening on {url.split('://', 1)[1]})", flush=True)

    event_loop.run(serve_until_signalled(app, host, port, announce, limits=limits,
                                         shutdown_timeout=30, sock=sock))
    return 0


def command_name(on_path: str | None, argv0: str, cwd: Path) -> str:
    """How to call this command again from ``cwd``, for the lines it prints: ``notary`` when that
    is on PATH, else the path it was started by (``.venv/bin/notary`` from a clone: neither
    ./scripts/serve nor a venv not activated puts it on PATH)."""
    started = Path(argv0)
    if on_path is not None or started.name != "notary":  # on PATH, or `python -m …`
        return "notary"
    full = os.path.abspath(started)  # not resolved: a .venv may be a link, and is named so
    try:
        relative = os.path.relpath(full, cwd)
    except ValueError:  # another drive (Windows)
        return full
    return full if relative.startswith("..") else relative


def _hold(serving: ServingLock) -> None:
    try:
        serving.take()
    except DirectoryInUseError as e:
        raise UsageError(str(e)) from None


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
    pg = is_postgres(settings.database)
    if not pg and not paths.db.exists():
        raise UsageError(f"no notary database at {paths.db}; run `notary serve` once first")
    where = "the PostgreSQL store" if pg else f"the store at {paths.db}"  # never the URL
    origin = _log_origin(paths)
    candidates = [*bases, *(entry_url_bases(settings, origin) if origin else [settings.base_url])]

    async def run() -> _T:
        store = await open_store(settings.database, paths.db, entry_url_bases=candidates)
        try:
            return await use(store)
        finally:
            await store.close()

    try:
        return event_loop.run(run())
    except StoreError as e:
        raise UsageError(f"{where}: {e}") from e


def cmd_apikey_create(args: argparse.Namespace) -> int:
    try:
        key = _with_store(args, lambda store: admin.create_api_key(
            store, args.account, args.monthly_allowance))
    except admin.AdminError as e:
        raise UsageError(str(e)) from e
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
    rows = _with_store(args, lambda store: store.list_api_keys(month))
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


def cmd_keys_list(args: argparse.Namespace) -> int:
    """The keys that verify this notary's output: the log's (Ed25519, and the ML-DSA-44 key
    derived from it), and every receipt key the store knows, the one that signs marked."""
    paths = Paths(_settings(args).data)
    records = _with_store(args, lambda store: store.receipt_keys())
    try:
        signer = load_log_key(paths)
    except (OSError, KeyFileError, NoteError) as e:
        raise UsageError(f"cannot read the log key in {paths.root}: {e}") from None
    log_keys = [("Ed25519", signer.verifier_key_text()),
                ("ML-DSA-44", SubtreeCosignatureSigner.derived_from(signer).verifier_key_text())]
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


def _report_migration(report: MigrationReport | None) -> int:
    if report is None:
        return ExitCode.OK
    moved = f"{report.migrated} receipt(s) moved to the current layout"
    if report.prefixes:
        moved += " (signed under " + ", ".join(p.removesuffix(ENTRIES_PATH)
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

    settings = _settings(args)
    if is_postgres(settings.database) or not settings.data.is_dir():
        return _report_migration(_with_store(args, report, bases=bases))
    try:  # it rewrites receipts a running server reads and serves: not beside one
        with exclusive(settings.data, "notary migrate"):
            return _report_migration(_with_store(args, report, bases=bases))
    except DirectoryInUseError as e:
        raise UsageError(str(e)) from None


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


def _refuse_postgres(settings: Settings, command: str) -> None:
    if is_postgres(settings.database):
        raise UsageError(
            f"`notary {command}` copies the SQLite file in --data; a PostgreSQL store is backed "
            "up and restored with PostgreSQL's own tools (pg_dump / pg_restore, or "
            "pg_basebackup with WAL archiving for point-in-time recovery), and the key files "
            f"in {settings.data}/ (log.key, receipt-keys/) copied beside it")


def cmd_backup(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _refuse_postgres(settings, "backup")
    try:
        info = backup(settings.data, Path(args.dest))
    except BackupError as e:
        raise UsageError(str(e)) from e
    print(f"Backed up {settings.data}/ to {args.dest}/: {info.describe()}.")
    print("Keys and database are 0600, directories 0700. Keep the backup as private as the "
          "data directory: log.key is the log's identity.")
    return 0


MAX_CHECKPOINT_BYTES = 1 << 20
"""Largest --checkpoint fetched (a signed checkpoint with many cosignatures is a few KiB)."""


def _checkpoint_arg(value: str) -> tuple[str, bytes]:
    """A signed checkpoint from a file, or fetched from an http(s) URL (``.../checkpoint``)."""
    if value.startswith(("http://", "https://")):

        async def fetch() -> bytes:
            async with HttpClient(timeout=10.0) as http:
                return await http.get(value, limit=MAX_CHECKPOINT_BYTES)

        try:
            return value, event_loop.run(fetch())
        except FetchError as e:
            raise UsageError(f"cannot fetch --checkpoint {value}: {e}") from e
    try:
        return value, Path(value).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read --checkpoint {value}: {e}") from e


def cmd_restore(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _refuse_postgres(settings, "restore")
    extra = [_checkpoint_arg(v) for v in args.checkpoint]
    try:
        info, moved = restore(Path(args.backup), settings.data, extra)
    except BackupError as e:
        raise UsageError(str(e)) from e
    if moved is not None:
        print(f"Moved the replaced data directory to {moved}/ (delete it once the restore is "
              "verified).")
    print(f"Restored {args.backup}/ into {settings.data}/: {info.describe()}. Start the notary "
          "again; it checks the tiles against the signed checkpoint on start.")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="data directory (default ./notary-data)")
    p.add_argument("--database", help="the store: empty (default) for the SQLite file in "
                   f"--data, {MEMORY!r} for a throwaway one (serve only), or a "
                   "postgresql://host[,host2]/dbname URL shared by several frontends")
    p.add_argument("--config", type=Path, help="TOML settings file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="notary", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the notary HTTP service")
    _common(p)
    p.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:8080)")
    p.add_argument("--public-url", help="URL clients use to reach this notary")
    p.add_argument("--origin", help="log origin (fixed at first run)")
    p.add_argument("--max-body", type=int, help="request body limit in bytes (default 65536)")
    p.add_argument("--max-batch", type=int, metavar="N",
                   help="entries committed in one batch at most (default 4096)")
    p.add_argument("--log-format", choices=["auto", "json", "console"])
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--max-connections", type=int, metavar="N",
                   help="open connections at most (default 0: from RLIMIT_NOFILE, keeping a "
                   "reserve of descriptors for the database and files)")
    p.add_argument("--keepalive-timeout", type=float, metavar="S",
                   help="seconds an idle keep-alive connection stays open (default 5)")
    p.add_argument("--header-timeout", type=float, metavar="S",
                   help="seconds to receive a request's line and headers (default 10)")
    p.add_argument("--body-timeout", type=float, metavar="S",
                   help="seconds to receive a request's body (default 30)")
    p.add_argument("--verify-workers", type=int, metavar="N",
                   help="processes that run POST /v1/tool-calls/verify (default 1)")
    p.add_argument("--verify-queue", type=int, metavar="N",
                   help="verifies that may wait for a worker before 429 (default 8)")
    p.add_argument("--verify-per-client", type=int, metavar="N",
                   help="verifies in flight per client address before 429 (default 2)")
    p.add_argument("--verify-budget", type=float, metavar="S",
                   help="worker-seconds of verification per second one client address may "
                   "use on average (default 0.5)")
    p.add_argument("--witness", dest="witnesses", action="append", metavar="URL=VKEY",
                   help="a witness to collect cosignatures from (repeatable)")
    p.add_argument("--witness-quorum", type=int, metavar="K",
                   help="cosignatures a published checkpoint needs (default: a majority)")
    p.add_argument("--witness-policy", metavar="FILE",
                   help="a C2SP tlog-policy file naming the witnesses (with their submission "
                        "URLs) and the quorum, instead of --witness/--witness-quorum")
    p.add_argument("--mirror", dest="mirrors", action="append", metavar="URL=VKEY",
                   help="a C2SP tlog-mirror (submission URL and key) to push every grown "
                        "checkpoint and its entries to; its cosignature counts as a witness's "
                        "(repeatable)")
    p.add_argument("--witness-interval", type=float, metavar="S",
                   help="seconds between submissions of a grown tree (default 2)")
    p.add_argument("--witness-timeout", type=float, metavar="S",
                   help="seconds to wait for a witness's answer (default 5)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes serving the log behind one listening port (default 1)")
    p.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # a worker's socket
    p.add_argument("--publish", metavar="DIR",
                   help="keep the log's static tlog-tiles tree in DIR up to date, for a web "
                        "server or CDN to serve reads off the database")
    p.add_argument("--scrub-rate", type=float, metavar="N",
                   help="stored tiles and bundles the background scrub re-verifies per second "
                        "(default 20; 0 turns it off)")
    p.add_argument("--pq-checkpoints", choices=["on", "off"],
                   help="sign published checkpoints with the log's ML-DSA-44 key too (derived "
                        "from log.key) as well as Ed25519 (default on)")
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
    p.add_argument("--monthly-allowance", type=int,
                   help="a new account's writes per UTC month (default unlimited); an existing "
                        "account's allowance changes only with `notary account set-allowance`")
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
    p = keys.add_parser("list", help="the log's verifier keys and the receipt keys (which signs)")
    _common(p)
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=cmd_keys_list)

    p = sub.add_parser("backup", help="copy the data directory while the notary runs (SQLite "
                       "online backup, keys included, modes kept)")
    _common(p)
    p.add_argument("dest", help="a new (or empty) directory for the backup")
    p.set_defaults(func=cmd_backup)
    p = sub.add_parser("restore", help="restore a backup into the data directory, refusing one "
                       "older than the log has become (that would fork the log)")
    _common(p)
    p.add_argument("backup", help="a directory made by notary backup")
    p.add_argument("--checkpoint", action="append", default=[], metavar="FILE|URL",
                   help="a newer signed checkpoint seen elsewhere (a saved /checkpoint, a "
                        "monitor's or a witness's); the restore is refused if the backup is "
                        "older than it (repeatable)")
    p.set_defaults(func=cmd_restore)

    for module in (verify, check, mcp, witness, mirror, gateway):
        module.register(sub)
    for store_module in (account, names):
        store_module.register(sub, with_store=_with_store, common=_common)
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


def _uses_postgres(args: argparse.Namespace) -> bool:
    try:
        return hasattr(args, "data") and is_postgres(_settings(args).database)
    except (ConfigError, UsageError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what --workers passes on
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except BrokenPipeError as e:
        if stdout_reader_gone(e):  # `notary backup | head -1`: no traceback
            return STDOUT_CLOSED
        raise
    except (UsageError, ConfigError, KeyFileError, StoreError) as e:
        if corruption_in(e) is None:
            print(f"notary: error: {e}", file=sys.stderr)
            return ExitCode.USAGE
        db, check_command = _database(args)
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as e:
        # A damaged store: not a bug to show as a traceback, nor worth retrying.
        db, check_command = _database(args)
        if isinstance(e, LogIntegrityError):
            where = "the PostgreSQL store" if _uses_postgres(args) else db
            print(f"notary: error: the log in {where} does not match its signed checkpoint "
                  f"({e}). Restore the newest backup and run `{check_command}` before serving "
                  "it.", file=sys.stderr)
            return ExitCode.USAGE
        if corruption_in(e) is None:
            raise
        print(f"notary: error: {damage_message(db, e, check_command)}", file=sys.stderr)
        return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
