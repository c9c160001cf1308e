"""``ledger mirror keygen`` and ``ledger mirror serve`` as commands, and a real mirror process
SIGKILLed at seeded moments while a log pushes to it: after each restart its first answer for
the log's checkpoint is cosigned and at least as large as anything it cosigned before, every
tile up to it is the log's byte for byte, and the pushes resume until the copy is complete."""

from __future__ import annotations

import asyncio
import random
import stat
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from ledger.cli.main import main as ledger_main
from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient, MirrorError
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import (
    KEY_TYPE_COSIGNATURE_V1,
    KEY_TYPE_SUBTREE_V1,
    Ed25519Signer,
    open_note,
    parse_note,
    parse_vkey_text,
)
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from ledger.core.tiles import tiles_for_size
from ledger.cosigner.cosigner import origin_hash
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore

ORIGIN = "example.test/crash-log"
REPO = Path(__file__).resolve().parents[3]


def test_keygen_writes_a_0600_key_and_prints_its_vkey(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert ledger_main(["mirror", "keygen", "--name", "mirror.test/m1",
                        "--out", str(tmp_path / "pq.key")]) == 0
    vkey = capsys.readouterr().out.strip().splitlines()[-1]
    name, _, key_type, _ = parse_vkey_text(vkey)
    assert (name, key_type) == ("mirror.test/m1", KEY_TYPE_SUBTREE_V1)  # ML-DSA-44 by default
    assert stat.S_IMODE((tmp_path / "pq.key").stat().st_mode) == 0o600
    assert ledger_main(["mirror", "keygen", "--name", "mirror.test/m2", "--algorithm",
                        "ed25519", "--out", str(tmp_path / "ed.key")]) == 0
    vkey = capsys.readouterr().out.strip().splitlines()[-1]
    assert parse_vkey_text(vkey)[2] == KEY_TYPE_COSIGNATURE_V1


def test_notary_mirror_is_the_same_command(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from notary.cli.main import main as notary_main  # deferred: the one notary test here

    assert notary_main(["mirror", "keygen", "--name", "mirror.test/n", "--out",
                        str(tmp_path / "n.key")]) == 0
    vkey = capsys.readouterr().out.strip().splitlines()[-1]
    assert parse_vkey_text(vkey)[:3:2] == ("mirror.test/n", KEY_TYPE_SUBTREE_V1)


def test_serve_refuses_bad_arguments_with_a_usage_error(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    key = tmp_path / "m.key"
    assert ledger_main(["mirror", "keygen", "--name", "mirror.test/m", "--out", str(key)]) == 0
    vkey = Ed25519Signer.generate(ORIGIN).verifier().vkey
    base = ["mirror", "serve", "--key", str(key), "--data", str(tmp_path / "d"),
            "--listen", "127.0.0.1:0"]
    assert ledger_main([*base, "--log", f"{ORIGIN}=not-a-key"]) == 2
    assert ledger_main([*base, "--log", f"{ORIGIN}={vkey}", "--min-index", f"{ORIGIN}=256"]
                       ) == 2
    assert ledger_main([*base, "--log", f"{ORIGIN}={vkey}", "--min-index", "other.test=0"]
                       ) == 2
    assert ledger_main([*base, "--log", f"{ORIGIN}={vkey}", "--database", "mirror.db"]) == 2
    err = capsys.readouterr().err
    assert "bad log verifier key" in err and "minimum index" in err and "postgresql://" in err
    assert not (tmp_path / "d").exists()  # refused before anything was created


class MirrorProcess:
    def __init__(self, key: Path, log_vkey: str, data: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", "mirror", "serve", "--key", str(key),
             "--log", f"{ORIGIN}={log_vkey}", "--min-index", f"{ORIGIN}=0",
             "--listen", "127.0.0.1:0", "--data", str(data), "--log-format", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
        self.url = ""

    async def started(self) -> MirrorProcess:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 30)
        self.url = line.decode().strip()
        assert self.url.startswith("http://127.0.0.1:"), line
        return self

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL
        self.proc.wait(10)


async def check_served(http: aiohttp.ClientSession, url: str, log: Log,
                       verifier: SubtreeCosignatureVerifier, log_key: Ed25519Signer) -> int:
    """The mirror's checkpoint (cosigned, signed by the log) and its tiles, all the log's."""
    prefix = f"{url}/{origin_hash(ORIGIN)}"
    async with http.get(prefix + "/checkpoint") as r:
        if r.status == 404:
            return 0
        assert r.status == 200
        note = await r.read()
    open_note(note, [verifier])
    open_note(note, [log_key.verifier()])
    size = parse_checkpoint_text(parse_note(note).text).size
    for tile in tiles_for_size(size, entries=True):
        async with http.get(f"{prefix}/{tile.path()}") as r:
            assert r.status == 200, tile.path()
            assert await r.read() == await log.reader.tile(tile.level, tile.index, tile.width)
    return size


async def test_kill_9_during_add_entries_loses_nothing_cosigned(
        tmp_path: Path, seeded_rng: random.Random, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "m.key"
    assert ledger_main(["mirror", "keygen", "--name", "mirror.test/crash", "--out", str(key)]
                       ) == 0
    verifier = SubtreeCosignatureVerifier.from_vkey(
        capsys.readouterr().out.strip().splitlines()[-1])
    log_key = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=log_key)
    data = tmp_path / "data"
    cosigned: list[int] = []
    counter = 0

    async def pusher(client: MirrorClient) -> None:
        nonlocal counter
        while True:
            n = seeded_rng.randint(1, 1500)
            await log.append_many([b"crash entry %d" % (counter + i) for i in range(n)])
            counter += n
            head = await log.head(0)
            assert head is not None
            await client.push(head.note, LogReaderSource(log.reader))
            cosigned.append(head.size)

    mirror = await MirrorProcess(key, log_key.verifier().vkey, data).started()
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(5):
                client = MirrorClient(mirror.url, [verifier], HttpClient(http),
                                      packages_per_request=seeded_rng.choice([1, 2, 4, 32]))
                task = asyncio.create_task(pusher(client))
                await asyncio.sleep(seeded_rng.uniform(0.05, 1.5))
                mirror.kill()
                with pytest.raises(MirrorError):
                    await task
                largest = max(cosigned, default=0)
                mirror = await MirrorProcess(key, log_key.verifier().vkey, data).started()
                # The first answer after the restart: cosigned, at least the largest size
                # cosigned before the kill, and every tile up to it stored.
                served = await check_served(http, mirror.url, log, verifier, log_key)
                assert served >= largest
            # Resumed to the end: the whole log, byte for byte.
            head = await log.head(0)
            assert head is not None
            client = MirrorClient(mirror.url, [verifier], HttpClient(http))
            await client.push(head.note, LogReaderSource(log.reader))
            assert await check_served(http, mirror.url, log, verifier, log_key) == head.size
    finally:
        mirror.kill()
        await log.close()
    assert cosigned, "no push finished between the kills"
