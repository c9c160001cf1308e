"""End to end on loopback: a frozen log's final checkpoint gets cosigned by a witness and a
mirror that were down at the roll, once they are up, and by one up only after a restart;
``/logs/<n>/checkpoint`` and the frozen log's receipts then carry the cosignatures, over the
same signed text (docs/lifecycle.md, "Witnesses and mirrors")."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import aiohttp

from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Verifier, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.http.routes import LOG
from notary.serving.config import Settings
from notary.serving.startup import init_data_dir
from tests.notary_server import (
    ServedNotary,
    capture_cli,
    checkpoint_size,
    start_notary,
)
from tests.servers import bound_socket
from tests.waiting import eventually
from tests.witness_servers import MirrorProc, WitnessProc

FINAL = 4


async def _final_at(http: aiohttp.ClientSession, witness: WitnessProc | MirrorProc,
                    origin: str, size: int) -> bytes | None:
    """The checkpoint ``witness`` holds for ``origin``, once it is at ``size``."""
    digest = hashlib.sha256(origin.encode()).hexdigest()
    try:
        async with http.get(f"{witness.url}/{digest}/checkpoint") as r:
            note = await r.read()
    except aiohttp.ClientError:
        return None
    return note if r.status == 200 and checkpoint_size(note) == size else None


async def _served_final(notary: ServedNotary, log0: Ed25519Verifier,
                        *witnesses: CosignatureSigner | SubtreeCosignatureSigner
                        ) -> tuple[bytes, dict[str, str]] | None:
    """``/logs/0/checkpoint`` once it is the final one (size 4: 3 receipts and the successor
    record) and carries a cosignature of each of ``witnesses``."""
    status, body, headers = await notary.get("/logs/0/checkpoint")
    if status != 200 or checkpoint_size(bytes(body)) != FINAL:
        return None
    try:
        open_checkpoint(bytes(body), log0, [w.verifier() for w in witnesses], len(witnesses))
    except ValueError:
        return None
    return bytes(body), dict(headers)


async def test_a_witness_down_at_the_roll_cosigns_the_final_checkpoint_later(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signers = [CosignatureSigner.generate(f"witness.test/f{i}") for i in range(3)]
    up = WitnessProc(signers[0], tmp_path / "up.db", first.vkey)
    late = WitnessProc(signers[1], tmp_path / "late.db", first.vkey)  # down at the roll
    later = WitnessProc(signers[2], tmp_path / "later.db", first.vkey)  # up after a restart
    log0 = Ed25519Verifier.from_vkey(first.vkey)
    origin0 = log0.name
    mirror_signer = SubtreeCosignatureSigner.generate("mirror.test/f")
    mirror = MirrorProc(mirror_signer, tmp_path / "mirror", origin0, first.vkey)  # down too
    await up.start()
    settings = Settings(data=base.data, listen=base.listen,
                        witnesses=(up.spec, late.spec, later.spec), mirrors=(mirror.spec,),
                        witness_quorum=1, witness_interval=0.1, witness_timeout=1.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        receipt = await notary.issue(key, 0)
        for n in range(1, 3):
            await notary.issue(key, n)
        code, _, err = await capture_cli("log", "roll", "--data", str(settings.data))
        assert code == 0, err
        final = FINAL
        await notary.issue(key, 3)  # the notary has moved to log 1: log 0 is served frozen
        signed = await eventually(lambda: _served_final(notary, log0, signers[0]),
                                  "the final checkpoint cosigned by the witness that is up")
        # The witness and the mirror that were down come up, knowing log 0 only: the retries
        # bring them the final checkpoint (the mirror, the entries too) and they cosign it.
        await late.start()
        await mirror.start()
        held = await eventually(lambda: _final_at(http, late, origin0, final),
                                "the late witness to cosign the final checkpoint", 30)
        open_checkpoint(held, log0, [signers[1].verifier()], 1)
        held = await eventually(lambda: _final_at(http, mirror, origin0, final),
                                "the mirror to hold the final checkpoint", 30)
        open_checkpoint(held, log0, [mirror_signer.verifier()], 1)
        cosigners = (signers[0], signers[1], mirror_signer)
        note, headers = await eventually(
            lambda: _served_final(notary, log0, *cosigners),
            "/logs/0/checkpoint to carry the three cosignatures")
        assert parse_note(note).text == parse_note(signed[0]).text
        assert checkpoint_size(note) == final
        assert headers["Notary-Witnessed"] == "true"
        assert headers["Notary-Witness-Cosignatures"] == "3"
        # A receipt of the frozen log comes with its proof to the cosigned final checkpoint.
        _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
        bundle = decode_proof_bundle(json.loads(body)["proof"].encode())
        open_checkpoint(bundle.checkpoint, log0, [s.verifier() for s in cosigners], 3)
        stored = await notary.runner.app[LOG].store.witnessed_finals()
        assert stored[origin0] == note
    finally:
        await notary.runner.cleanup()

    # Restarted as two processes of one data directory (``--workers``): both serve it at
    # once; the third witness, up now, is brought it by the one holding the witnessing lease.
    await later.start()
    notaries = [await start_notary(settings, http, first.vkey)]
    sock = bound_socket()
    notaries.append(await start_notary(
        replace(settings, listen=f"127.0.0.1:{sock.getsockname()[1]}"), http, first.vkey, sock))
    try:
        for notary in notaries:
            status, body, _ = await notary.get("/logs/0/checkpoint")
            assert status == 200
            open_checkpoint(bytes(body), log0, [s.verifier() for s in cosigners], 3)
        await eventually(lambda: _final_at(http, later, origin0, final),
                         "the third witness to cosign it after the restart", 30)
        for notary in notaries:
            note, headers = await eventually(
                partial(_served_final, notary, log0, *cosigners, signers[2]),
                "all four cosignatures served by both")
            assert parse_note(note).text == parse_note(signed[0]).text
            assert headers["Notary-Witness-Cosignatures"] == "4"
        counts = [await _submitted(notary) for notary in notaries]
        assert sorted(c > 0 for c in counts) == [False, True], counts  # exactly one submits
    finally:
        for notary in notaries:
            await notary.runner.cleanup()
        for w in (up, late, later, mirror):
            await w.stop()


async def _submitted(notary: ServedNotary) -> float:
    _, body, _ = await notary.get("/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
               if line.startswith("notary_witness_requests_total{"))
