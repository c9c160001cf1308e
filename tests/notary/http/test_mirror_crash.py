"""A real ``notary serve --mirror`` under load feeding a real ``ledger mirror serve``, each
SIGKILLed at seeded moments: the mirror ends with tiles byte-identical to the log's, every
mirror cosignature seen verifies and covers only entries the mirror serves, and with the notary
stopped, ``notary monitor`` audits the log through the mirror alone and every receipt's entry
is found there."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.compact import decode_bundle
from ledger.core.note import Ed25519Verifier, open_note, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner, SubtreeCosignatureVerifier
from ledger.core.tiles import ENTRIES_LEVEL, TILE_WIDTH, Tile, tiles_for_size
from ledger.cosigner.cosigner import origin_hash
from ledger.process.keyfile import write_secret
from notary.core.receipts import Receipt
from notary.serving.config import Settings
from notary.serving.keys import Paths, load_log_key
from notary.serving.startup import init_data_dir
from tests.notary_server import NotaryProcess, free_port, notarize_under_load

REPO = Path(__file__).resolve().parents[3]
ROUNDS = 4


class MirrorProcess:
    """``ledger mirror serve`` on a fixed loopback port (the notary is configured with it)."""

    def __init__(self, key: Path, origin: str, log_vkeys: list[str], data: Path) -> None:
        self.port = free_port()
        logs = [a for vkey in log_vkeys for a in ("--log", f"{origin}={vkey}")]
        self.args = [sys.executable, "-m", "ledger.cli.main", "mirror", "serve", "--key",
                     str(key), *logs, "--listen", f"127.0.0.1:{self.port}", "--data", str(data),
                     "--log-format", "json"]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=REPO)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 30)
        assert line.decode().strip() == self.url, line

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # SIGKILL
            self.proc.wait(10)
            self.proc = None


async def fetch(http: aiohttp.ClientSession, url: str) -> tuple[int, bytes]:
    async with http.get(url) as r:
        return r.status, await r.read()


async def check_mirror(http: aiohttp.ClientSession, prefix: str, log_url: str | None,
                       log_verifier: Ed25519Verifier,
                       mirror_verifier: SubtreeCosignatureVerifier) -> int:
    """The mirror's checkpoint: signed by the log and cosigned by the mirror, and every tile up
    to its size served (stored); byte for byte the log's when ``log_url`` is given."""
    status, note = await fetch(http, prefix + "/checkpoint")
    if status == 404:
        return 0
    assert status == 200
    open_note(note, [log_verifier])
    open_note(note, [mirror_verifier])
    size = parse_checkpoint_text(parse_note(note).text).size
    for tile in tiles_for_size(size, entries=True):
        status, body = await fetch(http, f"{prefix}/{tile.path()}")
        assert status == 200, tile.path()
        if log_url is not None:
            assert (await fetch(http, f"{log_url}/{tile.path()}")) == (200, body), tile.path()
    return size


async def test_a_mirror_fed_by_a_notary_under_load_survives_sigkills_of_both(
        tmp_path: Path, seeded_rng: random.Random) -> None:
    rng = seeded_rng
    server = NotaryProcess(tmp_path / "notary-data")
    first = init_data_dir(Settings(data=server.data_dir, listen=f"127.0.0.1:{server.port}"))
    assert first is not None
    origin = first.vkey.split("+", 1)[0]
    log_verifier = Ed25519Verifier.from_vkey(first.vkey)
    signer = SubtreeCosignatureSigner.generate("mirror.test/crash")
    mirror_verifier = signer.verifier()
    key = tmp_path / "mirror.key"
    write_secret(key, signer.private_key_text())
    # Both log keys, as docs/witnesses.md says: the mirror serves both log lines.
    pq_vkey = SubtreeCosignatureSigner.derived_from(
        load_log_key(Paths(server.data_dir))).verifier_key_text()
    mirror = MirrorProcess(key, origin, [first.vkey, pq_vkey], tmp_path / "mirror-data")
    prefix = f"{mirror.url}/{origin_hash(origin)}"
    server.args = ["--mirror", f"{mirror.url}={signer.verifier_key_text()}",
                   "--witness-interval", "0.1", "--witness-timeout", "5"]
    await mirror.start()
    server.start()
    received: list[dict[str, Any]] = []
    cosigned: dict[int, bytes] = {}  # mirror-cosigned checkpoints the notary published

    async def published(http: aiohttp.ClientSession) -> None:
        async with http.get(server.url + "/checkpoint") as r:
            if r.status == 200 and r.headers.get("Notary-Witnessed") == "true":
                note = await r.read()
                cosigned[parse_checkpoint_text(parse_note(note).text).size] = note

    try:
        async with aiohttp.ClientSession() as http:
            api_key = server.create_api_key("mirror")
            for n in range(ROUNDS):
                stop = asyncio.Event()
                load = asyncio.create_task(notarize_under_load(server.url, api_key, received, stop))
                before = len(received)
                for _ in range(500):  # bounded: until some receipts arrived in this round
                    await asyncio.sleep(0.02)
                    if len(received) - before > rng.randint(50, 600):
                        break
                kill_mirror = n % 2 == 0 if n < 2 else rng.random() < 0.5
                if kill_mirror:
                    mirror.kill()
                    await published(http)  # the notary still answers, the mirror is gone
                    largest = max(cosigned, default=0)
                    await mirror.start()
                    # Its first answer: cosigned, at least as large as any checkpoint it
                    # cosigned before, every tile stored and the log's own.
                    served = await check_mirror(http, prefix, server.url, log_verifier,
                                                mirror_verifier)
                    assert served >= largest
                else:
                    await published(http)
                    await asyncio.to_thread(server.kill9)
                    await check_mirror(http, prefix, None, log_verifier, mirror_verifier)
                    await asyncio.to_thread(server.start)
                stop.set()
                await load
            assert len(received) > 100, "the load produced too few receipts to mean anything"

            # Quiet: the mirror catches up with the whole log and the notary publishes that.
            size = server.get("/v1/ledger").json()["size"]
            assert size > max(r["ledger"]["index"] for r in received)
            for _ in range(600):
                await published(http)
                if size in cosigned:
                    break
                await asyncio.sleep(0.05)
            assert size in cosigned, f"the mirror did not cosign size {size}"
            assert await check_mirror(http, prefix, server.url, log_verifier,
                                      mirror_verifier) == size
            for cp_size, note in cosigned.items():  # every cosignature seen verifies
                open_note(note, [mirror_verifier])
                open_note(note, [log_verifier])
                assert cp_size <= size

            # The operator is gone: the monitor audits through the mirror alone, trusting
            # either log key.
            server.stop()
            for vkey in (first.vkey, pq_vkey):
                audit = await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-m", "notary.cli.main", "monitor", "--log", prefix,
                     "--vkey", vkey, "--witness", signer.verifier_key_text(), "--audit",
                     "--no-state", "--once", "--evidence-dir", str(tmp_path / "evidence")],
                    capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
                assert audit.returncode == 0, audit.stdout + audit.stderr
            # And every receipt's entry is there, byte for byte.
            bundles: dict[int, list[bytes]] = {}
            for receipt in received:
                index = receipt["ledger"]["index"]
                b = index // TILE_WIDTH
                if b not in bundles:
                    path = Tile(ENTRIES_LEVEL, b, min(TILE_WIDTH, size - b * TILE_WIDTH)).path()
                    status, body = await fetch(http, f"{prefix}/{path}")
                    assert status == 200, path
                    bundles[b] = decode_bundle(body)
                entry = Receipt.from_json(receipt).entry().encode()
                assert bundles[b][index % TILE_WIDTH] == entry, index
    finally:
        server.kill9()
        mirror.kill()

