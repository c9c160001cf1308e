"""``ledger mirror serve --publish s3://BUCKET/PREFIX`` against a real object store (SeaweedFS
on loopback): each copy is a complete tlog-tiles log under ``PREFIX/<origin hash>/`` that a
monitor audits with no mirror running; a size is cosigned only once the bucket stores it (the
bucket stopped: add-entries is a 503 and nothing is cosigned; back: the push goes through); an
object planted with other bytes is an alarm, never overwritten; bad ``--publish`` values are
usage errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from ledger.cli.main import main as ledger_main
from ledger.cli.mirror import close_mirror, open_mirror
from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient, MirrorUnavailable
from ledger.core.note import Ed25519Signer, open_note
from ledger.core.publish_target import BucketTarget
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import tiles_for_size
from ledger.cosigner.cosigner import origin_hash
from ledger.jobs.sinks import DirectorySink
from ledger.log.facade import Log
from ledger.mirror.bucket import MirrorBucket
from ledger.mirror.server import create_mirror_app
from ledger.storage.memory import MemoryStore
from tests.seaweed import Seaweed
from tests.servers import Serve

ORIGIN = "example.test/bucket-log"
PREFIX = "mirrors/m1"
HASHED = origin_hash(ORIGIN)
REPO = Path(__file__).resolve().parents[3]


async def grown_log(n: int) -> tuple[Log, Ed25519Signer]:
    key = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=key)
    await log.append_many([b"entry %d" % i for i in range(n)])
    return log, key


async def push(http: aiohttp.ClientSession, url: str, signer: SubtreeCosignatureSigner,
               log: Log) -> None:
    head = await log.head(0)
    assert head is not None
    client = MirrorClient(url, [signer.verifier()], HttpClient(http))
    await client.push(head.note, LogReaderSource(log.reader))


async def test_the_bucket_holds_a_copy_a_monitor_audits_with_no_mirror_running(
        seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seaweed.configure(monkeypatch)
    signer = SubtreeCosignatureSigner.generate("mirror.test/bucket")
    (tmp_path / "m.key").write_text(signer.private_key_text())
    (tmp_path / "m.key").chmod(0o600)
    log, log_key = await grown_log(300)  # a full tile and bundle, and partial ones
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "mirror", "serve", "--key",
         str(tmp_path / "m.key"), "--log", f"{ORIGIN}={log_key.verifier().vkey}",
         "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"),
         "--publish", f"s3://{seaweed.bucket}/{PREFIX}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, env=seaweed.env())
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
               ).decode().strip()
        async with aiohttp.ClientSession() as http:
            await push(http, url, signer, log)
            async with http.get(f"{url}/{HASHED}/checkpoint") as r:
                served = await r.read()
    finally:
        proc.kill()
        proc.wait(10)
    # The mirror is gone: the bucket holds its cosigned checkpoint and every tile, the log's.
    status, headers, note = seaweed.get(f"{PREFIX}/{HASHED}/checkpoint")
    assert status == 200 and note == served
    assert "max-age=5" in headers["Cache-Control"]
    open_note(note, [signer.verifier()])
    open_note(note, [log_key.verifier()])
    for tile in tiles_for_size(300, entries=True):
        status, headers, data = seaweed.get(f"{PREFIX}/{HASHED}/{tile.path()}")
        assert status == 200, tile.path()
        assert data == await log.reader.tile(tile.level, tile.index, tile.width), tile.path()
        assert "immutable" in headers["Cache-Control"]
    assert all(k.startswith(f"{PREFIX}/{HASHED}/") for k in seaweed.keys(PREFIX))
    audit = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ledger.cli.main", "monitor", "--log",
         f"{seaweed.public_url}/{PREFIX}/{HASHED}", "--vkey", log_key.verifier().vkey,
         "--witness", signer.verifier_key_text(), "--audit", "--once", "--no-state",
         "--evidence-dir", str(tmp_path / "evidence")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    await log.close()


async def test_nothing_is_cosigned_while_the_bucket_is_down(
        seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        serve: Serve) -> None:
    seaweed.configure(monkeypatch)
    signer = SubtreeCosignatureSigner.generate("mirror.test/outage")
    log, log_key = await grown_log(10)
    mirror = await open_mirror([signer], {ORIGIN: [log_key.verifier()]}, tmp_path / "data",
                               publish=BucketTarget(seaweed.bucket, PREFIX + "/"))
    try:
        served = await serve(create_mirror_app(mirror))
        async with aiohttp.ClientSession() as http:
            await push(http, served.url, signer, log)
            assert await mirror.state.served(ORIGIN) is not None
            await asyncio.to_thread(seaweed.stop)
            await log.append_many([b"later %d" % i for i in range(300)])
            with pytest.raises(MirrorUnavailable, match="503"):
                await push(http, served.url, signer, log)
            # The copy has the entries, but the mirror checkpoint did not move.
            mirrored = await mirror.state.mirrored(ORIGIN)
            assert mirrored is not None and mirrored.size == 10
            async with http.get(f"{served.url}/healthz") as r:
                assert r.status == 503 and "bucket" in await r.text()
            await asyncio.to_thread(seaweed.start)  # back, with what it had
            await push(http, served.url, signer, log)
            mirrored = await mirror.state.mirrored(ORIGIN)
            assert mirrored is not None and mirrored.size == 310
            async with http.get(f"{served.url}/healthz") as r:
                assert r.status == 200
        status, _, note = seaweed.get(f"{PREFIX}/{HASHED}/checkpoint")
        assert status == 200 and note == mirrored.note
        for tile in tiles_for_size(310, entries=True):
            status, _, data = seaweed.get(f"{PREFIX}/{HASHED}/{tile.path()}")
            assert status == 200, tile.path()
            assert data == await log.reader.tile(tile.level, tile.index, tile.width)
    finally:
        await close_mirror(mirror)
        await log.close()


async def test_an_object_with_other_bytes_is_an_alarm_and_nothing_is_cosigned(
        seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        serve: Serve) -> None:
    seaweed.configure(monkeypatch)
    signer = SubtreeCosignatureSigner.generate("mirror.test/planted")
    log, log_key = await grown_log(300)
    planted = f"{PREFIX}/{HASHED}/tile/entries/000"
    seaweed.put(planted, b"not the log's bundle")
    mirror = await open_mirror([signer], {ORIGIN: [log_key.verifier()]}, tmp_path / "data",
                               publish=BucketTarget(seaweed.bucket, PREFIX + "/"))
    try:
        served = await serve(create_mirror_app(mirror))
        async with aiohttp.ClientSession() as http:
            for _ in range(2):  # refused again on a retry: stopped until an operator looks
                with pytest.raises(MirrorUnavailable, match="other bytes"):
                    await push(http, served.url, signer, log)
            async with http.get(f"{served.url}/healthz") as r:
                assert r.status == 503 and "other bytes" in await r.text()
            async with http.get(f"{served.url}/{HASHED}/checkpoint") as r:
                assert r.status == 404  # nothing cosigned
        assert await mirror.state.mirrored(ORIGIN) is None
        assert seaweed.get(planted)[2] == b"not the log's bundle"  # never overwritten
        assert seaweed.get(f"{PREFIX}/{HASHED}/checkpoint")[0] == 404
    finally:
        await close_mirror(mirror)
        await log.close()


async def test_a_directory_holds_the_copy_too(tmp_path: Path, serve: Serve,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Steps of 16 entries (65,536 in use): the copy written in three steps is the same.
    monkeypatch.setattr("ledger.mirror.bucket._STEP", 16)
    signer = SubtreeCosignatureSigner.generate("mirror.test/dir")
    log, log_key = await grown_log(40)
    out = tmp_path / "published"
    mirror = await open_mirror([signer], {ORIGIN: [log_key.verifier()]}, tmp_path / "data",
                               publish=out)
    try:
        served = await serve(create_mirror_app(mirror))
        async with aiohttp.ClientSession() as http:
            await push(http, served.url, signer, log)
        mirrored = await mirror.state.mirrored(ORIGIN)
        assert mirrored is not None
        assert (out / HASHED / "checkpoint").read_bytes() == mirrored.note
        for tile in tiles_for_size(40, entries=True):
            assert (out / HASHED / tile.path()).read_bytes() == await log.reader.tile(
                tile.level, tile.index, tile.width)
        assert (out / HASHED / "tile/entries/000.p/16").exists()  # the first step's
    finally:
        await close_mirror(mirror)
        await log.close()


def test_bad_publish_values_are_usage_errors(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "m.key"
    assert ledger_main(["mirror", "keygen", "--name", "mirror.test/m", "--out", str(key)]) == 0
    vkey = Ed25519Signer.generate(ORIGIN).verifier().vkey
    base = ["mirror", "serve", "--key", str(key), "--log", f"{ORIGIN}={vkey}",
            "--data", str(tmp_path / "d"), "--listen", "127.0.0.1:0"]
    capsys.readouterr()
    for bad, why in (("s3://", "needs a bucket name"), ("s3:///prefix", "needs a bucket name"),
                     ("gs://bucket/p", "unknown scheme gs://"),
                     ("s3://Not_A_Bucket/p", "not a valid S3 bucket name")):
        assert ledger_main([*base, "--publish", bad]) == 2, bad
        err = capsys.readouterr().err
        assert "--publish" in err and why in err, err
    assert not (tmp_path / "d").exists()  # refused before anything was created


class CheckpointFailsOnce(DirectorySink):
    """A directory whose first checkpoint write fails (the bucket went away just then)."""

    failed = False

    async def write_checkpoint(self, note: bytes) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("the bucket went away")
        await super().write_checkpoint(note)


async def test_a_cosignature_whose_checkpoint_was_not_stored_is_sent_on_the_retry(
        tmp_path: Path, serve: Serve) -> None:
    """Cosigned, then the bucket's checkpoint failed: not sent (503); the retry stores the
    checkpoint and sends the same cosignature. A mirror given --publish later catches up the
    same way, at the log's next push."""
    signer = SubtreeCosignatureSigner.generate("mirror.test/retry")
    log, log_key = await grown_log(40)
    logs = {ORIGIN: [log_key.verifier()]}
    out = tmp_path / "published"
    sink = CheckpointFailsOnce(out / HASHED)
    mirror = await open_mirror([signer], logs, tmp_path / "data")
    mirror.bucket = MirrorBucket({ORIGIN: sink}, logs)
    try:
        served = await serve(create_mirror_app(mirror))
        async with aiohttp.ClientSession() as http:
            with pytest.raises(MirrorUnavailable, match="503"):
                await push(http, served.url, signer, log)
            first = await mirror.state.mirrored(ORIGIN)
            assert first is not None and not (out / HASHED / "checkpoint").exists()
            await push(http, served.url, signer, log)
        assert (out / HASHED / "checkpoint").read_bytes() == first.note
    finally:
        await close_mirror(mirror)
    # The same state, now with --publish to an empty directory: the next push fills it.
    later = tmp_path / "later"
    mirror = await open_mirror([signer], logs, tmp_path / "data", publish=later)
    try:
        served = await serve(create_mirror_app(mirror))
        async with aiohttp.ClientSession() as http:
            await push(http, served.url, signer, log)
        assert (later / HASHED / "checkpoint").read_bytes() == first.note
        for tile in tiles_for_size(40, entries=True):
            assert (later / HASHED / tile.path()).exists(), tile.path()
    finally:
        await close_mirror(mirror)
        await log.close()
