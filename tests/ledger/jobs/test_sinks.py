"""``--publish s3://BUCKET/PREFIX``: the publisher's S3 sink against a real object store
(SeaweedFS on loopback): exactly the tlog-tiles keys, cache headers, create-once with
``If-None-Match: *``, and an object planted with other bytes raising the alarm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ledger.core.note import Ed25519Signer
from ledger.core.publish_target import BucketTarget
from ledger.core.tiles import tiles_for_size
from ledger.jobs.export import export_log
from ledger.jobs.publish import Publisher
from ledger.jobs.sinks import S3Sink
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from tests.seaweed import Seaweed

ORIGIN = "sinks.test/log"


@pytest.fixture
def aws(seaweed: Seaweed, monkeypatch: pytest.MonkeyPatch) -> Seaweed:
    """The standard AWS variables pointed at the test's SeaweedFS, and nothing else."""
    seaweed.configure(monkeypatch)
    return seaweed


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


async def test_objects_are_exactly_the_tlog_tiles_paths_with_their_cache_headers(
        aws: Seaweed, tmp_path: Path) -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    target = BucketTarget(aws.bucket, "logs/a/")
    publisher = Publisher(log, S3Sink(target))
    try:
        for size in (3, 300):
            have = (await log.head(0)).size  # type: ignore[union-attr]
            await log.append_many([b"e%d" % i for i in range(have, size)])
            assert await publisher.publish()
            assert not await publisher.publish()  # nothing new: nothing written
        keys = await asyncio.to_thread(aws.keys, "logs/a/")
        want = {t.path() for t in tiles_for_size(300, entries=True)} | {"checkpoint"}
        # The partial tiles of size 3 stay (immutable at their width); nothing else is there.
        assert want <= {k.removeprefix("logs/a/") for k in keys}
        assert all(k.removeprefix("logs/a/") in want or ".p/" in k for k in keys), keys
        # The same bytes as a directory export, read anonymously over plain HTTP.
        await export_log(log, tmp_path / "export")
        for path, data in files(tmp_path / "export").items():
            status, headers, body = await asyncio.to_thread(aws.get, f"logs/a/{path}")
            assert status == 200 and body == data, path
            cache = headers.get("Cache-Control", "")
            if path == "checkpoint":
                age = int(cache.split("max-age=")[1].split(",")[0])
                assert 0 < age <= 10 and "immutable" not in cache, cache
            else:
                assert "immutable" in cache and "max-age=31536000" in cache, (path, cache)
        _, headers, _ = await asyncio.to_thread(aws.get, "logs/a/tile/0/001.p/44")
        assert "immutable" in headers.get("Cache-Control", "")  # partials too
        assert publisher.m_requests.labels("put")._value.get() > 0
    finally:
        await publisher.close()
        await log.close()


async def test_a_restart_redoing_a_round_finds_its_own_objects_and_goes_on(
        aws: Seaweed) -> None:
    """A kill after the tiles but before the checkpoint: the next publisher's creates meet
    412 on objects with the same bytes, which is fine, and it writes the checkpoint."""
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    target = BucketTarget(aws.bucket, "")
    await log.append_many([b"x%d" % i for i in range(600)])
    first = S3Sink(target)
    await first.start()
    tiles = tiles_for_size(600, entries=True)
    pairs = [(t, (await log.store.read_tiles([(t.level, t.index)]))[(t.level, t.index)])
             for t in tiles if t.is_full]
    assert await first.write_tiles(pairs) == len(pairs)
    assert await first.write_tiles(pairs) == 0  # created once: the second time, same bytes
    await first.close()
    publisher = Publisher(log, S3Sink(target))
    try:
        assert await publisher.publish()
        status, _, body = await asyncio.to_thread(aws.get, "checkpoint")
        assert status == 200 and b"\n600\n" in body
    finally:
        await publisher.close()
        await log.close()


async def test_an_object_of_other_bytes_is_an_alarm_and_never_overwritten(
        aws: Seaweed) -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    await log.append_many([b"y%d" % i for i in range(256)])
    planted = b"\0" * 8192  # where tile/0/000 goes: 256 hashes, but not this log's
    await asyncio.to_thread(aws.put, "p/tile/0/000", planted)
    publisher = Publisher(log, S3Sink(BucketTarget(aws.bucket, "p/")), interval=0.01)
    try:
        await asyncio.wait_for(publisher.run(), 30)  # returns: publishing stops
        assert publisher.status.state == "stopped"
        assert "other bytes" in (publisher.status.problem or "")
        assert aws.endpoint not in (publisher.status.problem or "")  # a public page's words
        assert publisher.m_conflicts._value.get() == 1
        status, _, body = await asyncio.to_thread(aws.get, "p/tile/0/000")
        assert status == 200 and body == planted  # not overwritten
        status, _, _ = await asyncio.to_thread(aws.get, "p/checkpoint")
        assert status == 404  # no checkpoint naming a tile the bucket does not have
    finally:
        await publisher.close()
        await log.close()


async def test_a_publisher_overtaken_by_another_never_moves_the_checkpoint_back(
        aws: Seaweed) -> None:
    """Two publishers (one lost the lease mid-round): the one that is behind never replaces
    the bucket's newer checkpoint with its older one."""
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    target = BucketTarget(aws.bucket, "race/")
    behind, ahead = Publisher(log, S3Sink(target)), Publisher(log, S3Sink(target))
    try:
        await log.append_many([b"r%d" % i for i in range(10)])
        assert await behind.publish()
        await log.append_many([b"s%d" % i for i in range(5)])
        head15 = await log.head()
        assert head15 is not None and head15.size == 15
        await log.append_many([b"t%d" % i for i in range(5)])
        assert await ahead.publish()  # 20 in the bucket
        # ``behind`` still believes 10 is published, and rounds up to the size-15 checkpoint
        # it read before the other publisher took over.
        behind.choose = lambda head: head15.note
        assert not await behind.publish()
        status, _, body = await asyncio.to_thread(aws.get, "race/checkpoint")
        assert status == 200 and b"\n20\n" in body
    finally:
        await behind.close()
        await ahead.close()
        await log.close()
