"""``ledger serve --mirror URL=VKEY``: the log served by ``ledger serve`` is pushed to a real
tlog-mirror as ``ledger add`` grows it, and /checkpoint serves the mirror-cosigned checkpoint."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier, open_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import tiles_for_size
from ledger.cosigner.cosigner import origin_hash
from tests.ledger.cli.command import ORIGIN, fails, ledger, lines, ok
from tests.witness_servers import MirrorProc


async def test_ledger_serve_pushes_to_a_mirror(tmp_path: Path) -> None:
    d = tmp_path / "log"
    ok(ledger("init", d, "--origin", ORIGIN))
    vkey = (d / "log.vkey").read_text().strip()
    log_verifier = Ed25519Verifier.from_vkey(vkey)
    signer = SubtreeCosignatureSigner.generate("mirror.test/ledger")
    mirror = MirrorProc(signer, tmp_path / "mirror", ORIGIN, vkey)
    await mirror.start()
    ok(ledger("add", d, stdin=lines("before", 300)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "serve", str(d), "--listen", "127.0.0.1:0",
         "--mirror", mirror.spec, "--mirror-interval", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        url = (await asyncio.to_thread(proc.stdout.readline)).decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        ok(ledger("add", d, stdin=lines("after", 20)))
        async with aiohttp.ClientSession() as http:
            for _ in range(400):
                async with http.get(url + "/checkpoint") as r:
                    note = await r.read()
                    witnessed = r.headers.get("Notary-Witnessed") == "true"
                cp, _ = open_checkpoint(note, log_verifier)
                if witnessed and cp.size == 320:
                    break
                await asyncio.sleep(0.05)
            assert witnessed and cp.size == 320
            open_checkpoint(note, log_verifier, [signer.verifier()], 1)
            prefix = f"{mirror.url}/{origin_hash(ORIGIN)}"
            async with http.get(prefix + "/checkpoint") as r:
                open_note(await r.read(), [signer.verifier()])
            for tile in tiles_for_size(320, entries=True):
                async with http.get(f"{prefix}/{tile.path()}") as r, \
                        http.get(f"{url}/{tile.path()}") as o:
                    assert r.status == o.status == 200
                    assert await r.read() == await o.read(), tile.path()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=20)
        await mirror.stop()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_ledger_serve_refuses_a_bad_mirror(tmp_path: Path) -> None:
    d = tmp_path / "log"
    ok(ledger("init", d, "--origin", ORIGIN))
    err = fails(ledger("serve", d, "--listen", "127.0.0.1:0", "--mirror", "http://x=nonsense"))
    assert "--mirror" in err
    pq = SubtreeCosignatureSigner.generate("m.test/x").verifier_key_text()
    err = fails(ledger("serve", d, "--listen", "127.0.0.1:0", "--mirror", f"http://a={pq}",
                       "--mirror", f"http://b={pq}"))
    assert "twice" in err
