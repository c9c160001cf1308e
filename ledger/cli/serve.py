"""``ledger serve``: the tlog-tiles and JSON read API of a log directory, optionally publishing
its static tree and pushing it to mirrors."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.publish_arg import publish_target
from ledger.core.publish_target import BucketTarget
from ledger.process.dirlock import DirectoryInUseError, ServingLock
from ledger.process.exitcodes import UsageError
from ledger.process.netaddr import parse_host_port

if TYPE_CHECKING:
    from ledger.jobs.publish import Publisher
    from ledger.jobs.witnessing import WitnessEndpoint, Witnessing


def _mirrors(specs: Sequence[str]) -> list[WitnessEndpoint]:
    # deferred: the witnessing job (HTTP clients, metrics), not for `--help`
    from ledger.jobs.witnessing import WitnessConfigError, parse_mirror_spec

    try:
        mirrors = [parse_mirror_spec(s) for s in specs]
    except WitnessConfigError as e:
        raise UsageError(f"--mirror: {e}") from None
    if len({m.verifier.public_key for m in mirrors}) != len(mirrors):
        raise UsageError("--mirror: the same mirror key is given twice")
    return mirrors


async def _serve(directory: Path, host: str, port: int, publish: Path | BucketTarget | None,
                 pq_checkpoints: bool, mirrors: Sequence[WitnessEndpoint] = (),
                 mirror_interval: float = 2.0) -> None:
    # deferred: the HTTP server, the log and its jobs, not for `--help`
    import asyncio

    from ledger.cli.logdir import open_readonly, post_quantum
    from ledger.http.routes import PUBLISHED_CHECKPOINT, create_ledger_app
    from ledger.http.run import serve_until_signalled
    from ledger.jobs.publish import Publisher
    from ledger.jobs.sinks import S3Sink
    from ledger.jobs.witnessing import Witnessing

    log = await open_readonly(directory)
    publisher = task = None
    witnessing: Witnessing | None = None
    try:  # a failure to listen is a ListenError, a usage error with its message
        pq = post_quantum(directory) if pq_checkpoints else None
        app = create_ledger_app(log, pq)
        if mirrors:
            # The witnessing job, with mirrors as its only cosigners (a majority must cosign
            # what /checkpoint serves); this process is the log's only server (ServingLock).
            witnessing = Witnessing(log, mirrors, quorum=len(mirrors) // 2 + 1,
                                    interval=mirror_interval, pq=pq)
            await witnessing.start()
            app[PUBLISHED_CHECKPOINT] = witnessing.checkpoint_for
        if publish is not None:
            publisher = Publisher(log, publish if isinstance(publish, Path) else S3Sink(publish),
                                  choose=(lambda head: pq.latest(head)[1])
                                  if pq is not None else None)
            await _first_round(publisher)
            task = asyncio.create_task(publisher.run(), name="publish")
        await serve_until_signalled(app, host, port, lambda url: print(url, flush=True))
    finally:
        if witnessing is not None:
            await witnessing.close()
        if publisher is not None and task is not None:
            await publisher.stop_after_final_round(task)
        if publisher is not None:
            await publisher.close()
        await log.close()


async def _first_round(publisher: Publisher) -> None:
    """A directory or bucket of another log stops us before serving; a bucket that cannot be
    reached yet does not (the publisher retries it, and says so)."""
    # deferred: the jobs, not for `--help`
    from ledger.jobs.export import ExportError
    from ledger.jobs.sinks import DirectorySink

    try:
        await publisher.publish()
    except ExportError:
        raise
    except Exception:
        if isinstance(publisher.sink, DirectorySink):
            raise


def _publish_target(value: str | None) -> Path | BucketTarget | None:
    return publish_target(value) if value else None


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred: the event loop, not for `--help`
    from ledger.process import event_loop

    host, port = parse_host_port(args.listen, what="--listen")
    publish = _publish_target(args.publish)
    mirrors = _mirrors(args.mirror or ())
    if not 0.01 <= args.mirror_interval <= 86400:
        raise UsageError("--mirror-interval: want 0.01 to 86400 seconds")
    serving = ServingLock(Path(args.dir))  # a restore must not replace what is served
    if Path(args.dir).is_dir():  # else _serve says there is no log there
        try:
            serving.take()
        except DirectoryInUseError as e:
            raise UsageError(str(e)) from None
    try:
        event_loop.run(_serve(Path(args.dir), host, port,
                              publish,
                              args.pq_checkpoints == "on", mirrors, args.mirror_interval))
    finally:
        serving.release()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="serve the tlog-tiles and JSON read API")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    s.add_argument("--publish", metavar="DIR|s3://BUCKET/PREFIX",
                   help="also keep a static tlog-tiles tree in DIR, or in an S3 bucket, up to "
                        "date as the log grows, for any web server, the bucket or a CDN to "
                        "serve (docs/object-storage.md)")
    s.add_argument("--pq-checkpoints", choices=["on", "off"], default="on",
                   help="add the log's ML-DSA-44 signature (derived from DIR/log.key) to the "
                        "checkpoints served (default on, when DIR holds log.key)")
    s.add_argument("--mirror", action="append", metavar="URL=VKEY",
                   help="a C2SP tlog-mirror (submission URL and key) to push every grown "
                        "checkpoint and its entries to; /checkpoint then serves the checkpoint "
                        "a majority of mirrors cosigned (repeatable)")
    s.add_argument("--mirror-interval", type=float, default=2.0, metavar="S",
                   help="seconds between pushes of a grown tree (default 2)")
    s.set_defaults(func=cmd_serve)
