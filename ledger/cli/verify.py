"""``ledger verify``: check a log's database pages, recompute every tile from the entries and
compare with what is stored."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.process.exitcodes import ExitCode


async def _verify(directory: Path) -> str:
    # deferred: the log, the audit, SQLite and the event loop, not for `--help`
    import asyncio

    from ledger.cli.logdir import find_db, verifier_of
    from ledger.jobs.check import AuditError, audit_log
    from ledger.process.progress import progress_reporter
    from ledger.storage.damage import corruption_in, describe_findings, integrity_errors
    from ledger.storage.sqlite import SqliteStore

    verifier = verifier_of(directory)
    db = find_db(directory)
    problems = await asyncio.to_thread(integrity_errors, db)
    if problems:
        raise AuditError(f"{db} is damaged: {describe_findings(problems)}")
    store = await SqliteStore.open(db)
    update, close = progress_reporter("verify", "entry")
    try:
        report = await audit_log(store, verifier, progress=update)
    except Exception as e:
        if corruption_in(e) is None:
            raise
        raise AuditError(f"{db} is damaged: {corruption_in(e)}") from None
    finally:
        close()
        await store.close()
    return (f"ok: {report.origin} size {report.size}: database pages sound; {report.tiles} "
            "tiles and bundles match the entries, and the root matches the signed checkpoint")


def cmd_verify(args: argparse.Namespace) -> int:
    # deferred: the audit and the event loop, not for `--help`
    from ledger.jobs.check import AuditError
    from ledger.process import event_loop

    try:
        print(event_loop.run(_verify(Path(args.dir))))
    except AuditError as e:
        print(f"ledger: verify FAILED: {e}. Restore the newest backup and verify it again.",
              file=sys.stderr)
        return ExitCode.CHECK_FAILED
    return ExitCode.OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("verify", help="check the database pages, recompute every tile from the "
                                      "entries and compare (a notary's data directory too)")
    s.add_argument("dir", metavar="DIR")
    s.set_defaults(func=cmd_verify)
