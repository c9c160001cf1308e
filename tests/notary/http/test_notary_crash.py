"""``notary serve`` killed with SIGKILL under load: every receipt a client got still verifies."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path
from typing import Any

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier
from ledger.core.proofs import verify_consistency
from ledger.core.tlog_proof import decode_proof_bundle
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from tests.notary_server import NotaryProcess, notarize_under_load

ROUNDS = 4


async def test_sigkill_under_load_loses_no_receipt(tmp_path: Path,
                                                   seeded_rng: random.Random) -> None:
    rng = seeded_rng
    server = NotaryProcess(tmp_path / "notary-data").start()
    try:
        key = server.create_api_key("crash")
        received: list[dict[str, Any]] = []
        for _ in range(ROUNDS):
            stop = asyncio.Event()
            load = asyncio.create_task(notarize_under_load(server.url, key, received, stop))
            before = len(received)
            for _ in range(400):  # bounded: until some receipts arrived in this round
                await asyncio.sleep(0.02)
                if len(received) - before > rng.randint(20, 400):
                    break
            await asyncio.to_thread(server.kill9)
            stop.set()
            await load
            await asyncio.to_thread(server.start)
        assert len(received) > 100, "the load produced too few receipts to mean anything"

        jwks = Jwks(server.get("/.well-known/jwks.json").json())
        vkey = Ed25519Verifier.from_vkey(server.get("/v1/ledger").json()["vkey"])
        latest = server.get("/v1/ledger").json()
        latest_root = base64.b64decode(latest["root"])
        sizes: dict[int, bytes] = {}
        for receipt in received:
            verdict = verify_receipt(receipt, record=None, jwks=jwks, log_verifier=vkey)
            assert verdict.levels["signature"].status == "passed", verdict.to_json()
            assert verdict.levels["inclusion"].status == "passed", verdict.to_json()
            stored = server.get(f"/v1/tool-calls/{receipt['id']}")
            assert stored.status == 200, f"receipt {receipt['id']} was lost"
            assert stored.json()["signature"] == receipt["signature"]
            cp, _ = open_checkpoint(decode_proof_bundle(receipt["proof"].encode()).checkpoint,
                                    vkey)
            sizes[cp.size] = cp.root_hash
        # Every checkpoint handed out is consistent with the log as it stands now.
        for size, root in sizes.items():
            proof = server.get(f"/v1/ledger/proofs/consistency?old={size}&new={latest['size']}")
            hashes = [base64.b64decode(h) for h in proof.json()["proof"]]
            verify_consistency(size, latest["size"], root, latest_root, hashes)
    finally:
        server.stop()
