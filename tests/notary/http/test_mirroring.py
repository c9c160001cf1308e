"""``notary serve --mirror URL=VKEY`` on loopback: the witnessing job pushes every grown
checkpoint and its entries to a real tlog-mirror (run in process), merges the mirror's
cosignature into the published checkpoint, resumes after the mirror restarts, and never makes a
receipt wait for a slow mirror."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Verifier, open_note, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import tiles_for_size
from ledger.cosigner.cosigner import WitnessSigner, origin_hash
from ledger.http.routes import LOG
from ledger.jobs.witnessing import WitnessConfigError, parse_mirror_spec
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from notary.http.app import create_app
from notary.serving.config import ConfigError, Settings
from notary.serving.startup import init_data_dir
from tests.node_tools import REPO_ROOT, node_binary
from tests.notary_server import (
    CALL_RECORDS,
    ServedNotary,
    capture_cli_sync,
    checkpoint_size,
    start_notary,
)
from tests.servers import bound_socket, start_server
from tests.waiting import eventually
from tests.witness_servers import Hanging, MirrorProc


async def mirrored_tiles_match(http: aiohttp.ClientSession, notary: ServedNotary,
                               mirror: MirrorProc, size: int) -> None:
    """The mirror's tiles up to ``size``, byte for byte the notary's."""
    prefix = f"{mirror.url}/{origin_hash(notary.settings.default_origin)}"
    for tile in tiles_for_size(size, entries=True):
        async with http.get(f"{prefix}/{tile.path()}") as r:
            assert r.status == 200, tile.path()
            mirrored = await r.read()
        status, body, _ = await notary.get(f"/{tile.path()}")
        assert status == 200 and bytes(body) == mirrored, tile.path()


def test_mirror_spec_parsing() -> None:
    pq = SubtreeCosignatureSigner.generate("m.test/pq").verifier_key_text()
    spec = parse_mirror_spec(f"http://127.0.0.1:7390/m?a=b={pq}")
    assert spec.mirror and spec.url == "http://127.0.0.1:7390/m?a=b" and spec.vkey == pq
    ed = CosignatureSigner.generate("m.test/ed").verifier_key_text()
    assert parse_mirror_spec(f"http://127.0.0.1:7390/={ed}").url == "http://127.0.0.1:7390"
    for bad in (pq, f"ftp://x={pq}", "http://x=nonsense"):
        with pytest.raises(WitnessConfigError, match="mirror"):
            parse_mirror_spec(bad)


def test_bad_mirror_configuration_is_refused(tmp_path: Path) -> None:
    """Refused when the settings are made, before anything is opened."""
    vkey = CosignatureSigner.generate("m.test/1").verifier_key_text()
    cases: list[dict[str, Any]] = [
        {"mirrors": ("http://127.0.0.1:1=nonsense",)},
        {"mirrors": (f"http://127.0.0.1:1={vkey}",), "witness_quorum": 2},
        {"mirrors": (f"http://127.0.0.1:1={vkey}", f"http://127.0.0.1:2={vkey}")},
        {"mirrors": (f"http://127.0.0.1:1={vkey}",), "witnesses": (f"http://127.0.0.1:2={vkey}",)},
    ]
    for case in cases:
        with pytest.raises(ConfigError):
            create_app(Settings(data=tmp_path / "notary", **case))
    code, _, err = capture_cli_sync("serve", "--data", str(tmp_path / "n2"),
                                   "--mirror", "http://x=bad")
    assert code == 2 and "--mirror" in err and "mirror" in err


async def test_a_mirror_alone_cosigns_and_resumes_after_a_restart(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = SubtreeCosignatureSigner.generate("mirror.test/pq")
    mirror = MirrorProc(signer, tmp_path / "mirror", base.default_origin, first.vkey)
    await mirror.start()
    # No witness at all: the job runs for the mirror alone (quorum: 1 of 1).
    settings = Settings(data=base.data, listen=base.listen, mirrors=(mirror.spec,),
                        witness_interval=0.05, witness_timeout=5.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    log_verifier = Ed25519Verifier.from_vkey(first.vkey)
    mirror_verifier = signer.verifier()
    try:
        key = await notary.new_api_key("a")
        receipts = [await notary.issue(key, n) for n in range(300)]  # two entry packages

        async def cosigned(min_size: int) -> bytes | None:
            status, body, headers = await notary.get("/checkpoint")
            assert status == 200
            if headers["Notary-Witnessed"] != "true" or checkpoint_size(body) < min_size:
                return None
            return bytes(body)

        note = await eventually(lambda: cosigned(300), "the mirror's cosignature")
        open_checkpoint(note, log_verifier, [mirror_verifier], 1)
        await mirrored_tiles_match(http, notary, mirror, 300)
        state = tmp_path / "monitor.json"
        first_audit = await monitor(mirror, base.default_origin, first.vkey, signer, state)
        assert first_audit.returncode == 0, first_audit.stdout + first_audit.stderr
        _, jwks, _ = await notary.get("/.well-known/jwks.json")
        _, body, _ = await notary.get(f"/v1/tool-calls/{receipts[7]['id']}")
        verdict = verify_receipt(json.loads(body), record=CALL_RECORDS[receipts[7]["id"]],
                                 jwks=Jwks(json.loads(jwks)), log_verifier=log_verifier,
                                 witnesses=[mirror_verifier], quorum=1)
        assert verdict.valid and verdict.levels["witnesses"].status == "passed", \
            verdict.to_json()

        # The mirror restarts (its state kept) while receipts go on: the job resumes from
        # where the mirror is, and the mirror ends with every entry.
        await mirror.stop()
        more = [await notary.issue(key, n) for n in range(300, 320)]
        assert more[-1]["ledger"]["index"] == 319
        mirror.sock = bound_socket(mirror.port)
        await mirror.start()
        note = await eventually(lambda: cosigned(320), "mirroring to resume")
        cp, _ = open_checkpoint(note, log_verifier, [mirror_verifier], 1)
        assert cp.size == 320
        await mirrored_tiles_match(http, notary, mirror, 320)
        async with http.get(f"{mirror.url}/{origin_hash(base.default_origin)}/checkpoint") as r:
            served = await r.read()
        open_note(served, [mirror_verifier])
        open_note(served, [log_verifier])

        async def persisted() -> int | None:
            state = await notary.runner.app[LOG].store.witness_state()
            size = None if state is None else state.sizes.get(signer.verifier_key_text())
            return size if size == 320 else None

        await eventually(persisted, "the mirror's size to be persisted")
        # The notary goes away: a monitor with state verifies the growth 300 -> 320 (a
        # consistency proof from the mirror's tiles: a mirror has no JSON API) and audits it.
        await notary.runner.cleanup()
        audit = await monitor(mirror, base.default_origin, first.vkey, signer, state)
        assert audit.returncode == 0, audit.stdout + audit.stderr
        kept = json.loads(state.read_text())["checkpoint"].encode()
        assert checkpoint_size(kept) == 320
        # The JS verifier too: --log-url the mirror; the receipt's checkpoint is proved
        # consistent with the mirror's from the mirror's tiles.
        receipt, record, keys = (tmp_path / "receipt.json", tmp_path / "record.json",
                                 tmp_path / "jwks.json")
        receipt.write_text(json.dumps(receipts[7]))
        record.write_text(json.dumps(CALL_RECORDS[receipts[7]["id"]]))
        keys.write_bytes(jwks)
        js = await asyncio.to_thread(
            subprocess.run,
            [node_binary(), str(REPO_ROOT / "js" / "bin" / "mcp-notary.js"), "verify",
             "--receipt", str(receipt), "--record", str(record), "--jwks", str(keys),
             "--log-key", first.vkey, "--log-url",
             f"{mirror.url}/{origin_hash(base.default_origin)}", "--no-state", "--json"],
            capture_output=True, text=True, timeout=60, check=False)
        consistency = json.loads(js.stdout)["levels"]["consistency"]
        assert consistency["status"] == "passed", js.stdout + js.stderr
        assert "size 320" in consistency["reason"], consistency
        code, out, err = await asyncio.to_thread(
            capture_cli_sync, "verify", "--receipt", str(receipt), "--record", str(record),
            "--jwks", str(keys), "--log-key", first.vkey, "--log-url",
            f"{mirror.url}/{origin_hash(base.default_origin)}", "--no-state", "--json")
        consistency = json.loads(out)["levels"]["consistency"]
        assert code == 0 and consistency["status"] == "passed", out + err
        assert "size 320" in consistency["reason"], consistency
        # --upgrade with the notary gone: the proof into the mirror's cosigned checkpoint,
        # computed from the mirror's tiles, meets the witness rule; saved, it verifies offline.
        upgraded = tmp_path / "upgraded.json"
        trust = ("--receipt", str(receipt), "--record", str(record), "--jwks", str(keys),
                 "--log-key", first.vkey, "--witness", signer.verifier_key_text())
        code, out, err = await asyncio.to_thread(
            capture_cli_sync, "verify", *trust, "--upgrade", "--log-url",
            f"{mirror.url}/{origin_hash(base.default_origin)}", "--no-state", "--json",
            "--save-receipt", str(upgraded))
        assert code == 0, out + err
        assert json.loads(out)["levels"]["witnesses"]["status"] == "passed", out
        assert "computed from the tiles" in out + err
        # The JS verifier upgrades the same way (from the receipt as issued).
        js = await asyncio.to_thread(
            subprocess.run,
            [node_binary(), str(REPO_ROOT / "js" / "bin" / "mcp-notary.js"), "verify", *trust,
             "--upgrade", "--log-url", f"{mirror.url}/{origin_hash(base.default_origin)}",
             "--no-state", "--json"],
            capture_output=True, text=True, timeout=60, check=False)
        assert js.returncode == 0, js.stdout + js.stderr
        assert json.loads(js.stdout)["levels"]["witnesses"]["status"] == "passed", js.stdout
        assert "computed from the tiles" in js.stdout
        receipt.write_text(upgraded.read_text())
        code, out, err = await asyncio.to_thread(
            capture_cli_sync, "verify", *trust, "--offline", "--no-state", "--json")
        assert code == 0 and json.loads(out)["levels"]["witnesses"]["status"] == "passed", out
    finally:
        await notary.runner.cleanup()
        await mirror.stop()


async def monitor(mirror: MirrorProc, origin: str, vkey: str, signer: WitnessSigner,
                  state: Path) -> subprocess.CompletedProcess[str]:
    """``notary monitor --audit --once`` reading only the mirror's monitoring prefix."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "notary.cli.main", "monitor", "--log",
         f"{mirror.url}/{origin_hash(origin)}", "--vkey", vkey,
         "--witness", signer.verifier_key_text(), "--audit", "--once", "--state", str(state),
         "--evidence-dir", str(state.parent / "evidence")],
        capture_output=True, text=True, timeout=120, cwd=state.parent, check=False)


async def test_a_policy_counts_a_mirror_named_by_its_key(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = CosignatureSigner.generate("mirror.test/ed")
    other = CosignatureSigner.generate("witness.test/never")
    mirror = MirrorProc(signer, tmp_path / "mirror", base.default_origin, first.vkey)
    await mirror.start()
    policy = tmp_path / "policy"
    # The mirror's line has no URL: it comes with --mirror. The other witness is down.
    policy.write_text(f"witness m {signer.verifier_key_text()}\n"
                      f"witness w {other.verifier_key_text()} http://127.0.0.1:1\n"
                      "group g any m w\nquorum g\n")
    settings = Settings(data=base.data, listen=base.listen, mirrors=(mirror.spec,),
                        witness_policy=str(policy), witness_interval=0.05)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        for n in range(3):
            await notary.issue(key, n)

        async def witnessed() -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            ok = headers["Notary-Witnessed"] == "true" and checkpoint_size(body) == 3
            return bytes(body) if ok else None

        note = await eventually(witnessed, "the policy to count the mirror")
        open_checkpoint(note, Ed25519Verifier.from_vkey(first.vkey), [signer.verifier()], 1)
        _, body, _ = await notary.get("/v1/witnesses")
        assert signer.verifier_key_text() in [w["vkey"] for w in json.loads(body)["witnesses"]]
    finally:
        await notary.runner.cleanup()
        await mirror.stop()
    # A policy line with the mirror's key but another URL is a mistake, refused at startup.
    policy.write_text(f"witness m {signer.verifier_key_text()} http://127.0.0.1:2\nquorum m\n")
    with pytest.raises(ConfigError, match="mirror"):
        create_app(Settings(data=base.data, mirrors=(mirror.spec,), witness_policy=str(policy)))


async def test_hanging_mirror_never_blocks_writes(tmp_path: Path,
                                                  http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = SubtreeCosignatureSigner.generate("mirror.test/slow")
    hanging = Hanging()
    await hanging.start()
    settings = Settings(data=base.data, listen=base.listen,
                        mirrors=(f"http://127.0.0.1:{hanging.port}="
                                 f"{signer.verifier_key_text()}",),
                        witness_interval=0.05, witness_timeout=30.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        # The mirror holds its request for 30 s; issuance must not wait for it.
        receipts = await asyncio.wait_for(
            asyncio.gather(*(notary.issue(key, n) for n in range(20))), 10)
        assert sorted(r["ledger"]["index"] for r in receipts) == list(range(20))
        status, body, headers = await notary.get("/checkpoint")
        assert status == 200 and headers["Notary-Witnessed"] == "false"
        open_checkpoint(body, Ed25519Verifier.from_vkey(first.vkey))
        assert parse_note(body).signatures  # the log's own signature, no cosignature
    finally:
        await notary.runner.cleanup()
        await hanging.stop()


async def test_a_lying_mirror_is_never_merged(tmp_path: Path,
                                              http: aiohttp.ClientSession) -> None:
    """A "mirror" that accepts everything and answers a signature line that does not verify,
    then 70 kB of garbage: nothing it says reaches /checkpoint, and receipts go on."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = SubtreeCosignatureSigner.generate("mirror.test/liar")
    answers = [b"\xe2\x80\x94 mirror.test/liar " + b"A" * 80 + b"\n", b"\xff" * 70_000]
    calls: list[str] = []

    async def add_checkpoint(request: web.Request) -> web.Response:
        calls.append("add-checkpoint")
        await request.read()
        return web.Response(status=200)

    async def add_entries(request: web.Request) -> web.Response:
        calls.append("add-entries")
        await request.read()
        return web.Response(status=200, body=answers[len(calls) % 2])

    app = web.Application()
    app.router.add_post("/add-checkpoint", add_checkpoint)
    app.router.add_post("/add-entries", add_entries)
    liar = await start_server(app)
    spec = f"http://127.0.0.1:{liar.port}={signer.verifier_key_text()}"
    settings = Settings(data=base.data, listen=base.listen, mirrors=(spec,),
                        witness_interval=0.02, witness_timeout=2.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        for n in range(5):
            await notary.issue(key, n)

        async def tried() -> bool | None:
            return True if calls.count("add-entries") >= 2 else None

        await eventually(tried, "the job to push to the lying mirror")
        status, body, headers = await notary.get("/checkpoint")
        assert status == 200 and headers["Notary-Witnessed"] == "false"
        assert headers["Notary-Witness-Cosignatures"] == "0"
        # The log's own signatures (Ed25519 and ML-DSA-44), nothing merged.
        assert {sig.name for sig in parse_note(body).signatures} == {base.default_origin}
        await notary.issue(key, 99)
    finally:
        await notary.runner.cleanup()
        await liar.runner.cleanup()


async def test_a_mirror_the_policy_does_not_name_is_pushed_but_not_counted(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    named = SubtreeCosignatureSigner.generate("mirror.test/named")
    unnamed = SubtreeCosignatureSigner.generate("mirror.test/unnamed")
    mirror = MirrorProc(unnamed, tmp_path / "mirror", base.default_origin, first.vkey)
    await mirror.start()
    hanging = Hanging()  # the mirror the policy counts never answers
    await hanging.start()
    policy = tmp_path / "policy"
    policy.write_text(f"witness m {named.verifier_key_text()}\nquorum m\n")
    settings = Settings(data=base.data, listen=base.listen, witness_policy=str(policy),
                        mirrors=(f"http://127.0.0.1:{hanging.port}={named.verifier_key_text()}",
                                 mirror.spec),
                        witness_interval=0.05, witness_timeout=30.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        for n in range(4):
            await notary.issue(key, n)

        async def cosigned_by_unnamed() -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            if headers["Notary-Witness-Cosignatures"] != "1":
                return None
            assert headers["Notary-Witnessed"] == "false"  # served, but not counted
            return bytes(body)

        # (The target stays put while the counted mirror hangs: a round waits for it.)
        note = await eventually(cosigned_by_unnamed, "the unnamed mirror's cosignature")
        open_note(note, [unnamed.verifier()])
        await mirrored_tiles_match(http, notary, mirror, checkpoint_size(note))
    finally:
        await notary.runner.cleanup()
        await mirror.stop()
        await hanging.stop()
