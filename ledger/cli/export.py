"""``ledger export``: write a log's static tlog-tiles tree to a directory."""

from __future__ import annotations

import argparse
from pathlib import Path


async def _export(directory: Path, out: Path, pq_checkpoints: bool) -> str:
    # deferred: the log, the export job and the progress bar, not for `--help`
    from ledger.cli.logdir import open_readonly, post_quantum
    from ledger.jobs.export import export_log
    from ledger.process.progress import progress_reporter

    log = await open_readonly(directory)
    update, close = progress_reporter("export", "file")
    try:
        pq = post_quantum(directory) if pq_checkpoints else None
        result = await export_log(log, out, progress=update, pq=pq)
    finally:
        close()
        await log.close()
    return (f"exported tree size {result.size} to {out}: {result.written} files written, "
            f"{result.unchanged} unchanged")


def cmd_export(args: argparse.Namespace) -> int:
    # deferred: the event loop, not for `--help`
    from ledger.process import event_loop

    print(event_loop.run(_export(Path(args.dir), Path(args.out), args.pq_checkpoints == "on")))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("export", help="write the static tlog-tiles tree to a directory")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--pq-checkpoints", choices=["on", "off"], default="on",
                   help="add the log's ML-DSA-44 signature to the exported checkpoint (default "
                        "on, when DIR holds log.key)")
    s.set_defaults(func=cmd_export)
