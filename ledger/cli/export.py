"""``ledger export``: write a log's static tlog-tiles tree to a directory or an S3 bucket."""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger.cli.publish_arg import publish_target
from ledger.core.publish_target import BucketTarget


async def _export_to_bucket(directory: Path, target: BucketTarget, pq_checkpoints: bool) -> str:
    """The tree of the log's checkpoint into ``target``: what the bucket's checkpoint (of
    this log) already covers is not written again; tiles are created once (``If-None-Match``)."""
    # deferred: the log, the publisher and botocore, not for `--help`
    from ledger.cli.logdir import open_readonly, post_quantum
    from ledger.jobs.export import ExportError
    from ledger.jobs.publish import Publisher
    from ledger.jobs.sinks import S3Sink

    log = await open_readonly(directory)
    pq = post_quantum(directory) if pq_checkpoints else None
    publisher = Publisher(log, S3Sink(target), choose=pq.sign if pq is not None else None)
    try:
        head = await log.head()
        if head is None:
            raise ExportError("the log has no signed checkpoint yet")
        await publisher.check()
        assert publisher.size is not None
        if publisher.size > head.size:
            raise ExportError(f"{target.url()}checkpoint is for tree size {publisher.size}, "
                              f"newer than this log's {head.size}; refusing to roll it back")
        await publisher.publish()
    except ExportError:
        raise
    except Exception as e:  # botocore's: an endpoint away, refused credentials, no bucket
        raise ExportError(f"{target.url()}: {type(e).__name__}: {e}") from None
    finally:
        await publisher.close()
        await log.close()
    return f"exported tree size {head.size} to {target.url()}"


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

    target = publish_target(args.out, "OUT")
    pq = args.pq_checkpoints == "on"
    print(event_loop.run(_export(Path(args.dir), target, pq) if isinstance(target, Path)
                         else _export_to_bucket(Path(args.dir), target, pq)))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("export", help="write the static tlog-tiles tree to a directory or an "
                                      "S3 bucket")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("out", metavar="OUT",
                   help="a directory, or s3://BUCKET/PREFIX (the standard AWS environment and "
                        "files configure the client: docs/object-storage.md)")
    s.add_argument("--pq-checkpoints", choices=["on", "off"], default="on",
                   help="add the log's ML-DSA-44 signature to the exported checkpoint (default "
                        "on, when DIR holds log.key)")
    s.set_defaults(func=cmd_export)
