"""``ledger mirror keygen`` and ``ledger mirror serve``: a C2SP tlog-mirror.

A mirror key is an ML-DSA-44 subtree/v1 key (type 0x06, the default; it can also sign
subtrees) or an Ed25519 cosignature/v1 key (type 0x04, ``--algorithm ed25519``): ``keygen``
writes its private form to a new 0600 file and prints, as its last line, the verifier key that
logs and readers configure. ``serve`` runs the mirror's endpoints (``POST /add-checkpoint``,
``POST /add-entries``, ``POST /sign-subtree`` with an ML-DSA-44 key) and serves each mirrored
log as tlog-tiles at ``/<origin hash>/checkpoint`` and ``/<origin hash>/tile/…``, for the logs
given with ``--log ORIGIN=VKEY`` (split at the first ``=``; the log key is Ed25519 or
ML-DSA-44; once per key the log signs with, since the mirror serves the log signature lines
it verified and no others). State: ``--data DIR/mirror.db`` (checkpoints) and
``DIR/logs/<origin hash>.db`` (each log's copy), or with ``--database postgresql://…`` a schema
per log in that database. ``--publish s3://BUCKET/PREFIX`` (or a directory) keeps each copy
there too, under ``PREFIX/<origin hash>/``, and a size is cosigned only once the bucket holds it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli import cosigner_args as shared
from ledger.process.exitcodes import UsageError
from ledger.process.netaddr import parse_host_port

if TYPE_CHECKING:
    from ledger.core.note import NoteVerifier
    from ledger.core.publish_target import BucketTarget
    from ledger.cosigner.cosigner import WitnessSigner
    from ledger.mirror.server import Mirror

__all__ = ["close_mirror", "open_mirror", "register"]

STATE_NAME = "mirror.db"
DEFAULT_LISTEN = "127.0.0.1:7390"


def parse_min_index(text: str, origins: set[str]) -> tuple[str, int]:
    """``ORIGIN=N`` (split at the last ``=``: an origin holds none, a number neither)."""
    origin, sep, value = text.rpartition("=")
    if not sep or origin not in origins:
        raise UsageError(f"--min-index {text!r}: want ORIGIN=N for an origin given with --log")
    if not value.isascii() or not value.isdigit():
        raise UsageError(f"--min-index {text!r}: N must be a non-negative decimal")
    n = int(value)
    if n:
        # A copy that starts at N needs the hashes of the tiles below N to serve and grow its
        # tree, which entry packages do not carry (tlog-mirror, "Pruning").
        raise UsageError(f"--min-index {text!r}: this mirror keeps whole logs (minimum index 0)")
    return origin, n


async def open_mirror(signers: Sequence[WitnessSigner],
                      logs: Mapping[str, Sequence[NoteVerifier]], data: Path,
                      database: str | None = None,
                      publish: BucketTarget | Path | None = None) -> Mirror:
    """The mirror over ``data``: its state and a copy per log (a SQLite file, or a schema in
    the PostgreSQL ``database``), created if missing; each copy published under ``publish``
    too (a bucket prefix or a directory), when given."""
    # deferred: the mirror's stores and server, not for `--help`
    from ledger.mirror.bucket import MirrorBucket
    from ledger.mirror.copy import LogCopy
    from ledger.mirror.server import Mirror
    from ledger.mirror.state import MirrorState
    from ledger.mirror.stores import open_copy_store

    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    state = await MirrorState.open(data / STATE_NAME, [s.verifier_key_text() for s in signers])
    copies: dict[str, LogCopy] = {}
    try:
        for origin in logs:
            store = await open_copy_store(origin, data, database)
            copies[origin] = await LogCopy.open(origin, store)
    except BaseException:
        for copy in copies.values():
            await copy.close()
        await state.close()
        raise
    bucket = None if publish is None else MirrorBucket.at(publish, logs)
    return Mirror(signers, logs, state, copies, bucket=bucket)


async def close_mirror(mirror: Mirror) -> None:
    for copy in mirror.copies.values():
        await copy.close()
    if mirror.bucket is not None:
        await mirror.bucket.close()
    await mirror.state.close()


async def _serve(signers: list[WitnessSigner], logs: dict[str, list[NoteVerifier]],
                 data: Path, database: str | None, publish: BucketTarget | Path | None,
                 host: str, port: int) -> None:
    # deferred: the mirror's server, not for `--help`
    from ledger.mirror.server import create_mirror_app

    mirror = await open_mirror(signers, logs, data, database, publish)
    try:
        await shared.serve(create_mirror_app(mirror), "mirror", signers, logs, host, port)
    finally:
        await close_mirror(mirror)


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred: the logging stack, the stores and the event loop, not for `--help`
    from ledger.mirror.stores import is_postgres_url
    from ledger.process import event_loop
    from ledger.process.structured_logs import configure

    configure(args.log_format, args.log_level)
    signers, logs = shared.keys_and_logs(args)
    for spec in args.min_index:
        parse_min_index(spec, set(logs))
    if args.database is not None and not is_postgres_url(args.database):
        raise UsageError(f"--database {args.database[:40]!r}: want a postgresql:// URL")
    # deferred: the target parser, not for `--help`
    from ledger.cli.publish_arg import publish_target

    publish = None if args.publish is None else publish_target(args.publish)
    host, port = parse_host_port(args.listen, what="--listen")
    event_loop.run(_serve(signers, logs, Path(args.data), args.database, publish, host, port))
    return 0


def _expected() -> tuple[type[Exception], ...]:
    # deferred: imported only when a command fails
    from ledger.mirror.state import MirrorStateError
    from ledger.process.keyfile import KeyFileError
    from ledger.storage.base import StoreError

    return UsageError, MirrorStateError, StoreError, KeyFileError


_run = shared.reporting("ledger", _expected, STATE_NAME)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mirror keygen`` and ``mirror serve``."""
    sub = shared.add_command(subparsers, "mirror", "run a C2SP tlog-mirror that stores and "
                             "cosigns copies of logs", __doc__)
    shared.add_keygen(sub, "mirror", "mirror.example.com/m1", "ml-dsa-44",
                      "ml-dsa-44 (subtree/v1, the default) or ed25519 (cosignature/v1)", _run)
    p = sub.add_parser("serve", help="serve add-checkpoint, add-entries, sign-subtree and the "
                                     "mirrored logs as tlog-tiles")
    shared.add_serve_arguments(p, "mirror", "a log to mirror and one of its keys (repeatable: "
                                            "give every key the log signs with, e.g. its "
                                            "Ed25519 and ML-DSA-44 keys; the mirror serves "
                                            "only the log lines it can verify)", DEFAULT_LISTEN)
    p.add_argument("--min-index", action="append", default=[], metavar="ORIGIN=N",
                   help="the log's minimum index (only 0: the mirror keeps whole logs)")
    p.add_argument("--database", metavar="URL",
                   help="keep the logs' copies in this PostgreSQL database (a schema per log) "
                        "instead of SQLite files under DIR/logs/")
    p.add_argument("--publish", metavar="s3://BUCKET/PREFIX|DIR",
                   help="keep each log's copy in this bucket prefix (or directory) too, as "
                        "tlog-tiles under PREFIX/<origin hash>/; a size is cosigned only once "
                        "the bucket stores it (AWS_* environment; docs/object-storage.md)")
    p.set_defaults(func=_run(cmd_serve))
