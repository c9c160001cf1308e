"""``notary serve --mirror`` with a real ``ledger mirror serve --publish s3://…`` process and a
real object store (SeaweedFS on loopback): the mirror cosigns for the notary only what the
bucket stores; with the bucket down the notary's newer checkpoint goes uncosigned and the
notary retries until the bucket is back; and with the notary and the mirror both gone, the
bucket alone serves `notary monitor --audit` and both verifiers' `--log-url` (Python, JS)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.cosigner.cosigner import origin_hash
from notary.serving.config import Settings
from notary.serving.startup import init_data_dir
from tests.node_tools import REPO_ROOT, node_binary
from tests.notary_server import (
    CALL_RECORDS,
    ServedNotary,
    capture_cli_sync,
    checkpoint_size,
    start_notary,
)
from tests.seaweed import Seaweed
from tests.servers import bound_socket
from tests.waiting import eventually

PREFIX = "mirrors/m1"


async def mirror_process(tmp_path: Path, signer: SubtreeCosignatureSigner, log_vkey: str,
                         seaweed: Seaweed) -> tuple[subprocess.Popen[bytes], str]:
    """``ledger mirror serve --publish s3://…`` on a free port: the process and its URL."""
    key = tmp_path / "mirror.key"
    key.write_text(signer.private_key_text())
    key.chmod(0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "mirror", "serve", "--key", str(key),
         "--log", log_vkey, "--listen", "127.0.0.1:0", "--data", str(tmp_path / "mirror"),
         "--publish", f"s3://{seaweed.bucket}/{PREFIX}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT, env=seaweed.env())
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    return proc, line.decode().strip()


async def cosigned_size(notary: ServedNotary) -> int:
    """The size of the checkpoint the notary serves as witnessed (0 before any)."""
    status, body, headers = await notary.get("/checkpoint")
    assert status == 200
    return checkpoint_size(body) if headers["Notary-Witnessed"] == "true" else 0


async def test_the_mirror_cosigns_what_its_bucket_stores_and_the_bucket_outlives_both(
        tmp_path: Path, http: aiohttp.ClientSession, seaweed: Seaweed) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = SubtreeCosignatureSigner.generate("mirror.test/bucket")
    proc, url = await mirror_process(tmp_path, signer, first.vkey, seaweed)
    settings = Settings(data=base.data, listen=base.listen,
                        mirrors=(f"{url}={signer.verifier_key_text()}",),
                        witness_interval=0.05, witness_timeout=10.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    hashed = origin_hash(base.default_origin)
    try:
        key = await notary.new_api_key("a")
        receipts = [await notary.issue(key, n) for n in range(260)]

        async def cosigned(size: int) -> bool | None:
            return True if await cosigned_size(notary) >= size else None

        await eventually(lambda: cosigned(260), "the mirror's cosignature", 60)
        bucket_note = seaweed.get(f"{PREFIX}/{hashed}/checkpoint")[2]
        assert checkpoint_size(bucket_note) == 260

        # The bucket away: the notary's newer checkpoint is not cosigned (nothing the bucket
        # does not hold), receipts go on; once the bucket is back the retries get through.
        await asyncio.to_thread(seaweed.stop)
        more = [await notary.issue(key, n) for n in range(260, 270)]
        await asyncio.sleep(1.0)  # many pushes, each refused with a 503
        assert await cosigned_size(notary) == 260
        await asyncio.to_thread(seaweed.start)
        await eventually(lambda: cosigned(270), "the mirror to cosign after the outage", 150)
        assert more[-1]["ledger"]["index"] == 269
        _, jwks, _ = await notary.get("/.well-known/jwks.json")
    finally:
        await notary.runner.cleanup()
        proc.kill()
        proc.wait(10)
    # Nothing of the notary or the mirror runs: the bucket is the log.
    log_url = f"{seaweed.public_url}/{PREFIX}/{hashed}"
    note = seaweed.get(f"{PREFIX}/{hashed}/checkpoint")[2]
    open_checkpoint(note, Ed25519Verifier.from_vkey(first.vkey), [signer.verifier()], 1)
    assert checkpoint_size(note) == 270
    audit = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "notary.cli.main", "monitor", "--log", log_url, "--vkey",
         first.vkey, "--witness", signer.verifier_key_text(), "--audit", "--once",
         "--no-state", "--evidence-dir", str(tmp_path / "evidence")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    receipt, record, keys = (tmp_path / "receipt.json", tmp_path / "record.json",
                             tmp_path / "jwks.json")
    receipt.write_text(json.dumps(receipts[7]))
    record.write_text(json.dumps(CALL_RECORDS[receipts[7]["id"]]))
    keys.write_bytes(jwks)
    code, out, err = await asyncio.to_thread(
        capture_cli_sync, "verify", "--receipt", str(receipt), "--record", str(record),
        "--jwks", str(keys), "--log-key", first.vkey, "--witness",
        signer.verifier_key_text(), "--upgrade", "--log-url", log_url, "--no-state", "--json")
    assert code == 0, out + err
    assert json.loads(out)["levels"]["witnesses"]["status"] == "passed", out
    js = await asyncio.to_thread(
        subprocess.run,
        [node_binary(), str(REPO_ROOT / "js" / "bin" / "mcp-notary.js"), "verify",
         "--receipt", str(receipt), "--record", str(record), "--jwks", str(keys),
         "--log-key", first.vkey, "--witness", signer.verifier_key_text(), "--upgrade",
         "--log-url", log_url, "--no-state", "--json"],
        capture_output=True, text=True, timeout=60, check=False)
    assert js.returncode == 0, js.stdout + js.stderr
    assert json.loads(js.stdout)["levels"]["witnesses"]["status"] == "passed", js.stdout
