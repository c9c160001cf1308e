"""Where the publisher (:mod:`ledger.jobs.publish`) writes: a local directory or an S3 bucket.

One publishing loop, two sinks. A sink stores objects at tlog-tiles paths (``checkpoint``,
``tile/L/N[.p/W]``, ``tile/entries/N[.p/W]``) and promises three things the loop relies on:

- a tile or bundle is created once; if its path already holds the same bytes that is fine (a
  restart redoing a round), other bytes raise :class:`ObjectConflict` and are never replaced;
- :meth:`Sink.commit` returns only when everything written so far is durable, so the checkpoint
  written after it never names a missing object;
- nothing but those paths is left behind (the directory's temporary files are swept at start;
  an S3 PUT is atomic and needs none).

The S3 sink uses aiobotocore (botocore's configuration chain: ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL``, keys, ``AWS_REGION``, ``AWS_PROFILE`` and the shared files) and creates
objects with ``If-None-Match: *``; docs/object-storage.md says why this client.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.publish_target import BucketTarget
from ledger.core.tiles import Tile
from ledger.jobs.export import ExportError, write_tile_once
from ledger.process.atomic import fsync_dir, write_atomic

if TYPE_CHECKING:
    from prometheus_client import Counter

__all__ = ["CHECKPOINT_CACHE", "IMMUTABLE_CACHE", "DirectorySink", "ObjectConflict", "S3Sink",
           "Sink", "s3_client_missing"]

IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
"""Cache-Control of tiles and bundles, full and partial: tlog-tiles makes both immutable (a
partial tile is named by its width, and the tile at that width never changes)."""

CHECKPOINT_CACHE = "public, max-age=5"
"""Cache-Control of the checkpoint: the one mutable object; caches keep it a few seconds."""

# :func:`ledger.process.atomic.write_atomic`'s temporary files: ``.<name>.*.tmp``
_TMP_SUFFIX = ".tmp"


def s3_client_missing() -> str | None:
    """Why ``s3://`` cannot be used here (the ``s3`` extra is not installed), or None."""
    if importlib.util.find_spec("aiobotocore") is None:
        return ("s3:// needs the S3 client: pip install 'mcp-notary[s3]' "
                "(or NOTARY_EXTRAS=s3 with ./scripts/serve)")
    return None


class ObjectConflict(ExportError):
    """A tile or bundle is already stored with other bytes: another log's tree or damage.

    Never overwritten: an operator must look (the object, the log, the prefix)."""

    def __init__(self, where: str, path: str) -> None:
        super().__init__(f"{where}{path} already exists with different bytes; a tile never "
                         "changes, so this holds another log's tiles or a damaged copy")
        self.path = path


class Sink(Protocol):
    """A place a log's static tree is published to."""

    where: str  # for messages: the directory, or s3://bucket/prefix/

    async def start(self) -> None:
        """Ready to write (the directory made, a crashed round's temporary files removed)."""
        ...

    async def read(self, path: str) -> bytes | None:
        """The object at ``path``, or None if there is none."""
        ...

    async def write_tiles(self, pairs: list[tuple[Tile, bytes]]) -> int:
        """Create each tile once (see the module doc); how many were new."""
        ...

    async def commit(self) -> None:
        """Return once every tile written so far is durable."""
        ...

    async def write_checkpoint(self, note: bytes) -> None: ...

    async def prune(self, written: list[Tile], grace: float) -> None:
        """Remove partial tiles that ``written`` made redundant (a sink may keep them)."""
        ...

    async def close(self) -> None: ...


class DirectorySink:
    """A local directory, for any web server to serve: files renamed into place and fsynced."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.where = f"{out}/"
        self._dirs: set[Path] = set()

    async def start(self) -> None:
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        # Temporary files of a round that did not finish (a crash, a kill): only the one
        # publisher holding the directory writes there, and it has not started yet.
        for root, _dirs, names in os.walk(self.out):
            for name in names:
                if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(root, name))

    async def read(self, path: str) -> bytes | None:
        try:
            return await asyncio.to_thread((self.out / path).read_bytes)
        except FileNotFoundError:
            return None

    async def write_tiles(self, pairs: list[tuple[Tile, bytes]]) -> int:
        return await asyncio.to_thread(self._write, pairs)

    def _write(self, pairs: list[tuple[Tile, bytes]]) -> int:
        new = 0
        for tile, data in pairs:
            path = self.out / tile.path()
            try:
                new += write_tile_once(path, data)
            except ExportError:
                raise ObjectConflict(self.where, tile.path()) from None
            self._dirs.add(path.parent)
        return new

    async def commit(self) -> None:
        dirs, self._dirs = self._dirs, set()
        await asyncio.to_thread(self._fsync, dirs)

    def _fsync(self, dirs: set[Path]) -> None:
        # Tile renames made durable, parents too (new directories), before the checkpoint.
        more: set[Path] = set()
        for d in dirs:
            more.update(p for p in d.parents if p == self.out or self.out in p.parents)
        for d in sorted(dirs | more, key=lambda p: -len(p.parts)):
            fsync_dir(d)

    async def write_checkpoint(self, note: bytes) -> None:
        await asyncio.to_thread(write_atomic, self.out / "checkpoint", note, mode=0o644)

    async def prune(self, written: list[Tile], grace: float) -> None:
        await asyncio.to_thread(self._prune, written, grace)

    def _prune(self, written: list[Tile], grace: float) -> None:
        """Once a tile's full tile is out its partial tiles go (tlog-tiles clients fall back
        to the full tile); a partial of the right edge goes once the next wider one has been
        out for ``grace`` seconds, time enough for a client of the older checkpoint."""
        cutoff = time.time() - grace
        for tile in written:
            if tile.is_full:
                shutil.rmtree(self.out / f"{tile.path()}.p", ignore_errors=True)
                continue
            partials = (self.out / tile.path()).parent
            widths: list[tuple[int, Path]] = []
            with contextlib.suppress(FileNotFoundError):
                widths = sorted((int(f.name), f) for f in partials.iterdir() if f.name.isdigit())
            for (width, path), (_, wider) in itertools.pairwise(widths):
                if width < tile.width:
                    with contextlib.suppress(FileNotFoundError):
                        if wider.stat().st_mtime <= cutoff:
                            path.unlink()

    async def close(self) -> None:
        return None


class S3Sink:
    """A prefix of an S3-compatible bucket; ``requests`` counts the S3 requests made."""

    def __init__(self, target: BucketTarget, *, concurrency: int = 16,
                 requests: Counter | None = None) -> None:
        self.target = target
        self.where = target.url()
        self._limit = asyncio.Semaphore(concurrency)
        self.requests = requests
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None

    async def start(self) -> None:
        if self._client is not None:
            return
        # deferred: botocore takes a while to import, and only --publish s3:// needs it
        from aiobotocore.session import get_session
        from botocore.config import Config

        # botocore's own retries are kept short: the publisher retries whole rounds with
        # its own backoff, and must notice an outage (to report the lag) rather than hang.
        config = Config(connect_timeout=5, read_timeout=30,
                        retries={"max_attempts": 2, "mode": "standard"})
        self._client = await self._stack.enter_async_context(
            get_session().create_client("s3", config=config))

    def _count(self, op: str) -> None:
        if self.requests is not None:
            self.requests.labels(op).inc()

    async def read(self, path: str) -> bytes | None:
        # deferred: botocore, only for s3:// (imported by start() already)
        from botocore.exceptions import ClientError

        self._count("get")
        try:
            resp = await self._client.get_object(Bucket=self.target.bucket,
                                                 Key=self.target.key(path))
        except ClientError as e:
            if _status(e) == 404 and _code(e) != "NoSuchBucket":
                return None
            raise
        async with resp["Body"] as body:
            data: bytes = await body.read()
        return data

    async def write_tiles(self, pairs: list[tuple[Tile, bytes]]) -> int:
        async def one(tile: Tile, data: bytes) -> bool:
            async with self._limit:
                return await self._create(tile.path(), data)

        return sum(await asyncio.gather(*(one(t, d) for t, d in pairs)))

    async def _create(self, path: str, data: bytes) -> bool:
        # deferred: botocore, only for s3:// (imported by start() already)
        from botocore.exceptions import ClientError

        self._count("put")
        try:
            await self._client.put_object(
                Bucket=self.target.bucket, Key=self.target.key(path), Body=data,
                IfNoneMatch="*", CacheControl=IMMUTABLE_CACHE,
                ContentType="application/octet-stream")
            return True
        except ClientError as e:
            if _status(e) != 412:
                raise  # a 409 (a concurrent conditional write) too: the round is retried
        if await self.read(path) == data:
            return False  # there already: a restart redoing a round
        raise ObjectConflict(self.where, path)

    async def commit(self) -> None:
        return None  # a PUT answered 200 is stored

    async def write_checkpoint(self, note: bytes) -> None:
        self._count("put")
        await self._client.put_object(
            Bucket=self.target.bucket, Key=self.target.key("checkpoint"), Body=note,
            CacheControl=CHECKPOINT_CACHE, ContentType="text/plain; charset=utf-8")

    async def prune(self, written: list[Tile], grace: float) -> None:
        # Partial tiles stay: each is immutable at its width, and deleting them would cost a
        # LIST and a DELETE per tile for little space (docs/object-storage.md).
        return None

    async def close(self) -> None:
        await self._stack.aclose()
        self._client = None


def _code(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: Any) -> int | None:
    if _code(error) in ("NoSuchKey", "NoSuchBucket", "404"):
        return 404
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None
