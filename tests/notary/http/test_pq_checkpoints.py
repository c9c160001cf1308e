"""``notary serve`` signs what it publishes twice: Ed25519 and ML-DSA-44 (the key derived from
log.key). A just-issued receipt carries the Ed25519-signed checkpoint (the write path signs no
ML-DSA-44), the same receipt fetched again carries the dual-signed one, ``/checkpoint`` and
``/v1/ledger``'s ``vkeys`` show both, and ``--pq-checkpoints off`` turns it all off."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from dilithium_py.ml_dsa import ML_DSA_44

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import Ed25519Signer, Ed25519Verifier, open_note, parse_note
from ledger.core.subtree_cosignature import (
    SubtreeCosignatureSigner,
    SubtreeCosignatureVerifier,
    subtree_message,
)
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.log.pq_checkpoints import DEFAULT_MIN_INTERVAL
from notary.core.records import CallRecord, new_salt
from notary.serving.keys import Paths, load_log_key
from tests.notary_server import app_notary


async def issue(http: aiohttp.ClientSession, url: str, key: str, n: int) -> dict[str, Any]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
    body = {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}
    async with http.post(url + "/v1/tool-calls", json=body,
                         headers={"Authorization": f"Bearer {key}"}) as r:
        assert r.status == 201, await r.text()
        receipt: dict[str, Any] = await r.json()
    return receipt


def proof_note(receipt: dict[str, Any]) -> bytes:
    return decode_proof_bundle(receipt["proof"].encode()).checkpoint


async def test_published_checkpoints_carry_both_signatures(tmp_path: Path) -> None:
    async with app_notary(tmp_path / "data") as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        async with http.get(notary.url + "/v1/ledger") as r:
            info = await r.json()
        ed_vkey, pq_vkey = info["vkeys"]
        assert ed_vkey == info["vkey"] == notary.vkey
        pq = SubtreeCosignatureVerifier.from_vkey(pq_vkey)
        assert pq.name == info["origin"]
        # The key is the one derived from log.key (no other file holds it).
        log_signer = load_log_key(Paths(notary.data))
        assert pq == SubtreeCosignatureSigner.derived_from(log_signer).verifier()

        receipt = await issue(http, notary.url, key, 1)
        born = parse_note(proof_note(receipt))
        assert [s.name for s in born.signatures] == [info["origin"]]  # Ed25519 only, at once

        async def dual_signed() -> dict[str, Any] | None:
            async with http.get(f"{notary.url}/v1/tool-calls/{receipt['id']}") as r:
                fetched: dict[str, Any] = await r.json()
            return fetched if len(parse_note(proof_note(fetched)).signatures) == 2 else None

        fetched = None
        for _ in range(100):  # within the one-second interval (and a little more)
            fetched = await dual_signed()
            if fetched is not None:
                break
            await asyncio.sleep(0.05)
        assert fetched is not None, "the receipt never got its dual-signed checkpoint"
        note = proof_note(fetched)
        open_note(note, [pq])  # the ML-DSA-44 line alone
        open_note(note, [Ed25519Verifier.from_vkey(ed_vkey)])
        text, sigs = parse_note(note).text, parse_note(note).signatures
        cp = parse_checkpoint_text(text)
        line = next(s for s in sigs if s.key_id == pq.key_id)
        message = subtree_message(cp.origin, int.from_bytes(line.signature[:8], "big"),
                                  cp.origin, 0, cp.size, cp.root_hash)
        assert ML_DSA_44.verify(pq.public_key, message, line.signature[8:])

        async with http.get(notary.url + "/checkpoint") as r:
            served = await r.read()
        _, verified = open_note(served, [pq, Ed25519Verifier.from_vkey(ed_vkey)])
        assert len(verified) == 2


async def test_pq_checkpoints_off(tmp_path: Path) -> None:
    async with app_notary(tmp_path / "data", pq_checkpoints="off") as notary, \
            aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")
        receipt = await issue(http, notary.url, key, 1)
        async with http.get(notary.url + "/v1/ledger") as r:
            info = await r.json()
        assert info["vkeys"] == [info["vkey"]]
        async with http.get(notary.url + "/checkpoint") as r:
            assert len(parse_note(await r.read()).signatures) == 1
        # No event to wait for: nothing signs. Past the interval in which a notary that
        # dual-signs would have signed this checkpoint, it still has its one signature.
        await asyncio.sleep(DEFAULT_MIN_INTERVAL + 0.1)
        async with http.get(f"{notary.url}/v1/tool-calls/{receipt['id']}") as r:
            assert len(parse_note(proof_note(json.loads(await r.read()))).signatures) == 1


def test_the_derived_key_is_not_the_ed25519_seed_reused() -> None:
    ed = Ed25519Signer.generate("o")
    pq = SubtreeCosignatureSigner.derived_from(ed)
    assert pq.public_key != SubtreeCosignatureSigner("o", ed.seed).public_key
