"""``notary log roll|list|prune``: the notary's sequence of logs (docs/lifecycle.md).

Rolling freezes the active log (its last entry names the next log and its keys) and starts
the next one, in one transaction; a running notary switches to it at its next commit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from ledger.core.timestamps import rfc3339
from ledger.process.exitcodes import UsageError
from notary.cli import store_args

if TYPE_CHECKING:
    from ledger.core.note import Ed25519Signer
    from ledger.storage.base import LogRecord
    from notary.serving.keys import Paths
    from notary.serving.lifecycle import Rolled
    from notary.store.base import NotaryStore

__all__ = ["OPERATOR_REASONS", "register"]

OPERATOR_REASONS = ("operator", "compromised")
"""The reasons an operator gives `notary log roll` (``notary.core.successor.REASONS`` but
``scheduled``, which only a period roll writes; kept here so that ``--help`` loads no CBOR:
tests/notary/cli/test_command_loading.py checks that the two agree)."""


async def _root_key(paths: Paths, store: NotaryStore) -> Ed25519Signer:
    """``log.key``: the root every log's key is derived from (a compromised roll killed
    after it committed is finished first: notary.serving.root_key)."""
    # deferred: the key code and the store, not for `--help`
    from ledger.core.note import NoteError
    from ledger.process.keyfile import KeyFileError
    from notary.serving.root_key import recover_root

    try:
        return recover_root(paths, await store.logs())
    except (OSError, KeyFileError, NoteError) as e:
        raise UsageError(f"cannot read the log key in {paths.root}: {e}") from None


def _paths(args: argparse.Namespace) -> Paths:
    # deferred: the key code, not for `--help`
    from notary.serving.keys import Paths

    return Paths(store_args.settings(args).data)


def cmd_log_roll(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (store, sequencer, keys), not for `--help`
    from notary.core.logs import COMPROMISED
    from notary.serving.lifecycle import RootKeyMismatch, roll
    from notary.serving.root_key import emergency_roll

    paths = _paths(args)

    async def run(store: NotaryStore) -> Rolled:
        root = await _root_key(paths, store)
        if args.reason == COMPROMISED:  # a new log.key (notary.serving.root_key)
            return await emergency_roll(store, paths, root)
        return await roll(store, root, reason=args.reason)

    try:
        rolled = store_args.with_store(args, run)
    except RootKeyMismatch as e:
        raise UsageError(str(e)) from None
    print(f"Froze log {rolled.frozen.n} ({rolled.frozen.origin}) at size "
          f"{rolled.frozen.final_size}; log {rolled.active.n} ({rolled.active.origin}) is "
          "active. A running notary switches at its next commit, within a few seconds.")
    if args.reason == COMPROMISED:
        print(f"The keys of every log up to {rolled.frozen.origin} are retired. {paths.log_key} "
              f"is a new root key (the old one is kept as log.key.retired-*: delete it when "
              f"you wish). Copy {paths.log_key} to every other frontend's data directory (mode "
              "0600): until then it refuses to sign.")
    return 0


class _Progress:
    """``--reclaim``'s progress on stderr: at most a line a second, and the last one."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.shown = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if done < total and time.monotonic() - self.shown < 1.0:
            return
        self.shown = time.monotonic()
        print(f"reclaiming {self.origin}: entries {done:,} of {total:,} "
              f"({100 * done // max(total, 1)}%)", file=sys.stderr, flush=True)


def cmd_log_prune(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (store, sequencer, keys), not for `--help`
    from notary.serving.lifecycle import PruneRefused, prune
    from notary.serving.reclaim import Reclaimed, reclaim

    async def run(store: NotaryStore) -> tuple[LogRecord, Reclaimed | None]:
        record = await prune(store, args.origin, args.min_index)
        if not args.reclaim or not record.min_index:
            return record, None
        return record, await reclaim(store, args.origin, progress=_Progress(args.origin))

    try:
        record, reclaimed = store_args.with_store(args, run)
    except PruneRefused as e:
        raise UsageError(str(e)) from None
    if record.min_index:
        print(f"Log {record.n} ({record.origin}): tiles and entries below index "
              f"{record.min_index} now answer 404 (still stored; `--min-index 0` serves them "
              "again). A running notary follows within a few seconds.")
    else:
        print(f"Log {record.n} ({record.origin}) is served whole again.")
    if reclaimed is not None:
        free = ("" if reclaimed.free_bytes is None else
                f"; the store file now holds {reclaimed.free_bytes:,} bytes free for new rows")
        vacuum = " (PostgreSQL: VACUUM makes their space reusable)" if \
            reclaimed.free_bytes is None else ""
        print(f"Reclaimed the rows of {reclaimed.receipts:,} receipts below index "
              f"{record.min_index} of log {record.n}{vacuum}{free}. They keep verifying "
              "offline; the notary no longer serves them.")
    elif args.reclaim:
        print("Nothing to reclaim: the minimum index is 0.")
    return 0


def _min_index(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"a non-negative integer, not {text!r}")
    return int(text)


def _as_json(r: LogRecord, keys: dict[str, object]) -> dict[str, object]:
    return {"n": r.n, "origin": r.origin, "state": r.state, "vkeys": list(r.vkeys),
            "started": rfc3339(r.started) if r.started else None,
            "frozen_at": None if r.frozen_at is None else rfc3339(r.frozen_at),
            "final_size": r.final_size, "min_index": r.min_index, "reason": r.reason, **keys}


def cmd_log_list(args: argparse.Namespace) -> int:
    # deferred: the lifecycle (store, sequencer, keys), not for `--help`
    from notary.serving.lifecycle import all_logs, key_status

    paths = _paths(args)

    async def run(store: NotaryStore) -> list[LogRecord]:
        return all_logs(await _root_key(paths, store), await store.logs())

    logs = store_args.with_store(args, run)
    status = key_status(logs)
    if args.json:
        print(json.dumps({"logs": [_as_json(r, k) for r, k in zip(logs, status, strict=True)]},
                         indent=2))
        return 0
    for r, k in zip(logs, status, strict=True):
        size = "" if r.final_size is None else f"  size {r.final_size}"
        frozen = "" if r.frozen_at is None else f"  frozen {rfc3339(r.frozen_at)} ({r.reason})"
        gen = f"  root {k['key_generation']}"
        retired = k["retired"]
        keys = "" if not isinstance(retired, dict) else \
            f"  KEYS RETIRED ({retired['reason']}, {retired['at']})"
        print(f"log {r.n}  {r.state:6}  {r.origin}{size}{frozen}{gen}{keys}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary log`` and its actions."""
    log = subparsers.add_parser("log", help="the notary's sequence of logs").add_subparsers(
        dest="action", required=True)
    p = log.add_parser("roll", help="freeze the active log and start the next one")
    store_args.add_store_flags(p)
    p.add_argument("--reason", choices=OPERATOR_REASONS,
                   default="operator", help="why (written in the frozen log's last entry)")
    p.set_defaults(func=cmd_log_roll)
    p = log.add_parser("list", help="every log of this notary, oldest first")
    store_args.add_store_flags(p)
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=cmd_log_list)
    p = log.add_parser("prune", help="deny a frozen log's tiles and entries below an index")
    store_args.add_store_flags(p)
    p.add_argument("origin", metavar="ORIGIN", help="the frozen log's origin (`notary log list`)")
    p.add_argument("--min-index", type=_min_index, required=True, metavar="N",
                   help="its minimum index, at most its size; 0 serves it whole again")
    p.add_argument("--reclaim", action="store_true",
                   help="also delete the receipt and search rows below the minimum index "
                   "(not undone by 0: those receipts are no longer served)")
    p.set_defaults(func=cmd_log_prune)
