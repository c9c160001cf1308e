"""End to end on loopback: the notary with three witnesses and a 2-of-3 quorum.

The notary app runs in process (as in test_notary_api.py), the witnesses are real witness apps
with their own SQLite stores, one of them down or hanging. Only functional behaviour is asserted:
issuance keeps working whatever the witnesses do, and receipts end up verifying under the
witness policy.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import CosignatureSigner, CosignatureVerifier, cosignature_timestamp
from ledger.core.note import Ed25519Signer, Ed25519Verifier, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner, SubtreeCosignatureVerifier
from ledger.core.tlog_policy import parse_tlog_policy
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.cosigner.cosigner import WitnessSigner
from ledger.http.routes import LOG
from ledger.jobs.witnessing import STATE_FILE, WitnessConfigError, Witnessing, parse_witness_spec
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from notary.http.app import create_app
from notary.serving.config import ConfigError, Settings
from notary.serving.keys import Paths, load_log_key
from notary.serving.startup import init_data_dir
from tests.notary_server import (
    CALL_RECORDS,
    ServedNotary,
    capture_cli,
    capture_cli_sync,
    checkpoint_size,
    start_notary,
)
from tests.servers import bound_socket
from tests.waiting import eventually
from tests.witness_servers import Hanging, MirrorProc, WitnessProc


def test_witness_spec_parsing() -> None:
    signer = CosignatureSigner.generate("w.test/1")
    vkey = signer.verifier_key_text()
    spec = parse_witness_spec(f"http://127.0.0.1:7380/sub?a=b={vkey}")
    assert spec.url == "http://127.0.0.1:7380/sub?a=b" and spec.verifier.vkey == vkey
    pq = SubtreeCosignatureSigner.generate("w.test/pq").verifier_key_text()
    assert pq.endswith("=")  # the split must not stop at the base64 padding
    spec = parse_witness_spec(f"http://127.0.0.1:7380={pq}")
    assert spec.url == "http://127.0.0.1:7380" and spec.verifier.vkey == pq
    with pytest.raises(WitnessConfigError):  # a log key is not a witness key
        parse_witness_spec(f"http://x={Ed25519Signer.generate('l').verifier_key_text()}")
    for bad in (vkey, f"ftp://x={vkey}", "http://x=not-a-key"):
        with pytest.raises(WitnessConfigError):
            parse_witness_spec(bad)


async def test_two_of_three_with_one_witness_down(tmp_path: Path,
                                                  http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signers = [CosignatureSigner.generate(f"witness.test/w{i}") for i in range(3)]
    verifiers: list[CosignatureVerifier] = [s.verifier() for s in signers]
    w = [WitnessProc(s, tmp_path / f"w{i}.db", first.vkey)
         for i, s in enumerate(signers)]
    await w[0].start()
    await w[1].start()  # w[2] is down: nothing listens on its port
    settings = Settings(data=base.data, listen=base.listen, witnesses=tuple(x.spec for x in w),
                        witness_quorum=2, witness_interval=0.05, witness_timeout=0.5)
    notary = await start_notary(settings, http, first.vkey, sock)
    log_verifier = Ed25519Verifier.from_vkey(first.vkey)
    try:
        key = await notary.new_api_key("a")
        receipts = [await notary.issue(key, n) for n in range(5)]

        async def witnessed_checkpoint(min_size: int) -> bytes | None:
            status, body, headers = await notary.get("/checkpoint")
            assert status == 200
            if headers["Notary-Witnessed"] != "true" or checkpoint_size(body) < min_size:
                return None
            assert headers["Notary-Witness-Quorum"] == "2"
            return bytes(body)

        note = await eventually(lambda: witnessed_checkpoint(5), "a witnessed checkpoint")
        open_checkpoint(note, log_verifier, verifiers, 2)
        _, jwks, _ = await notary.get("/.well-known/jwks.json")

        async def upgraded(receipt: dict[str, Any]) -> dict[str, Any]:
            _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
            fetched: dict[str, Any] = json.loads(body)
            return fetched

        for receipt in receipts:
            # Born complete with the log-signed checkpoint: valid, but not witnessed.
            born = verify_receipt(receipt, record=CALL_RECORDS[receipt["id"]],
                                  jwks=Jwks(json.loads(jwks)), log_verifier=log_verifier,
                                  witnesses=verifiers, quorum=2)
            assert born.levels["witnesses"].status == "failed"
            # Fetched again: the proof now leads to the witnessed checkpoint.
            fetched = await upgraded(receipt)
            verdict = verify_receipt(fetched, record=CALL_RECORDS[receipt["id"]],
                                     jwks=Jwks(json.loads(jwks)), log_verifier=log_verifier,
                                     witnesses=verifiers, quorum=2)
            assert verdict.valid, verdict.to_json()
            assert verdict.levels["witnesses"].status == "passed"

        # A second witness goes down: writes go on, /checkpoint never goes backwards.
        await w[1].stop()
        more = [await notary.issue(key, n) for n in range(5, 10)]
        assert [r["ledger"]["index"] for r in more] == list(range(5, 10))
        for _ in range(5):
            _, body, headers = await notary.get("/checkpoint")
            assert headers["Notary-Witnessed"] == "true"
            assert checkpoint_size(body) >= checkpoint_size(note)
            await asyncio.sleep(0.05)
        fetched = await upgraded(more[-1])  # beyond the witnessed size: the log-signed head
        bundle = decode_proof_bundle(fetched["proof"].encode())
        assert checkpoint_size(bundle.checkpoint) >= 10

        # The witness that was down from the start comes up, and catches up from old 0.
        await w[2].start()
        note = await eventually(lambda: witnessed_checkpoint(10), "witnessing to resume")
        cp, _ = open_checkpoint(note, log_verifier, verifiers, 2)
        assert cp.size == 10
        fetched = await upgraded(more[-1])
        verdict = verify_receipt(fetched, record=CALL_RECORDS[more[-1]["id"]],
                                 jwks=Jwks(json.loads(jwks)), log_verifier=log_verifier,
                                 witnesses=verifiers, quorum=2)
        assert verdict.valid, verdict.to_json()

        async def persisted() -> int | None:
            state = await notary.runner.app[LOG].store.witness_state()
            size = None if state is None else state.sizes.get(w[2].signer.verifier_key_text())
            return size if size == 10 else None

        await eventually(persisted, "the witness's size to be persisted")
    finally:
        await notary.runner.cleanup()
        for x in w:
            await x.stop()

    # Restart with every witness unreachable: the witnessed checkpoint is served at once.
    notary = await start_notary(settings, http, first.vkey)
    try:
        status, body, headers = await notary.get("/checkpoint")
        assert status == 200 and headers["Notary-Witnessed"] == "true"
        assert bytes(body) == note
        await notary.issue(key, 99)  # writes still work with no witness at all
    finally:
        await notary.runner.cleanup()


async def test_hanging_witness_never_blocks_writes(tmp_path: Path,
                                                   http: aiohttp.ClientSession) -> None:
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = CosignatureSigner.generate("witness.test/slow")
    hanging = Hanging()
    await hanging.start()
    settings = Settings(data=base.data, listen=base.listen,
                        witnesses=(f"http://127.0.0.1:{hanging.port}="
                                   f"{signer.verifier_key_text()}",),
                        witness_interval=0.05, witness_timeout=30.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        # The witness holds its request for 30 s; issuance must not wait for it.
        receipts = await asyncio.wait_for(
            asyncio.gather(*(notary.issue(key, n) for n in range(20))), 10)
        assert sorted(r["ledger"]["index"] for r in receipts) == list(range(20))
        status, body, headers = await notary.get("/checkpoint")
        assert status == 200 and headers["Notary-Witnessed"] == "false"
        assert headers["Notary-Witness-Cosignatures"] == "0"
        open_checkpoint(body, Ed25519Verifier.from_vkey(first.vkey))
    finally:
        await notary.runner.cleanup()
        await hanging.stop()


def test_bad_witness_configuration_is_refused(tmp_path: Path) -> None:
    """Refused when the settings are made, before anything is opened (no half-started
    notary)."""
    vkey = CosignatureSigner.generate("w.test/1").verifier_key_text()
    for witnesses, quorum in [(("http://127.0.0.1:1=nonsense",), 0),
                              ((f"http://127.0.0.1:1={vkey}",), 2),
                              ((f"http://127.0.0.1:1={vkey}", f"http://127.0.0.1:2={vkey}"), 1)]:
        with pytest.raises(ConfigError):
            create_app(Settings(data=tmp_path / "notary", witnesses=witnesses,
                                witness_quorum=quorum))


async def test_two_processes_on_one_log_submit_from_one_and_serve_from_both(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """Two notaries on one data directory (``--workers``): one holds the witnessing lease and
    submits, the other serves what it stored; when the holder stops, the other takes over."""
    base = Settings(data=tmp_path / "notary")
    first = init_data_dir(base)
    assert first is not None
    signers = [CosignatureSigner.generate(f"witness.test/w{i}") for i in range(2)]
    w = [WitnessProc(s, tmp_path / f"w{i}.db", first.vkey)
         for i, s in enumerate(signers)]
    for x in w:
        await x.start()
    notaries = []
    for _ in range(2):
        sock = bound_socket()
        settings = Settings(data=base.data, listen=f"127.0.0.1:{sock.getsockname()[1]}",
                            witnesses=tuple(x.spec for x in w), witness_quorum=2,
                            witness_interval=0.05, witness_timeout=2.0)
        notaries.append(await start_notary(settings, http, first.vkey, sock))
    a, b = notaries
    try:
        key = await a.new_api_key("a")
        for n in range(3):
            await a.issue(key, n)

        def witnessed(notary: ServedNotary, size: int) -> Callable[[], Awaitable[bytes | None]]:
            async def probe() -> bytes | None:
                status, body, headers = await notary.get("/checkpoint")
                ok = headers["Notary-Witnessed"] == "true" and checkpoint_size(body) >= size
                return bytes(body) if status == 200 and ok else None
            return probe

        await eventually(witnessed(a, 3), "a witnessed checkpoint on the first notary")
        await eventually(witnessed(b, 3), "the same served by the second")

        async def submitted(notary: ServedNotary) -> float:
            _, body, _ = await notary.get("/metrics")
            return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
                       if line.startswith("notary_witness_requests_total{"))

        counts = [await submitted(a), await submitted(b)]
        assert sorted(c > 0 for c in counts) == [False, True], counts  # exactly one submits
        leader, other = (a, b) if counts[0] else (b, a)
        await leader.runner.cleanup()
        for n in range(3, 6):
            await other.issue(key, n)
        note = await eventually(witnessed(other, 6), "the survivor to take witnessing over")
        open_checkpoint(note, Ed25519Verifier.from_vkey(first.vkey),
                        [s.verifier() for s in signers], 2)
        assert await submitted(other) > 0
    finally:
        for started in notaries:
            await started.runner.cleanup()
        for x in w:
            await x.stop()
async def test_witness_policy_file_counts_truthfully_and_verify_upgrades(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """``notary serve --witness-policy``: a C2SP tlog-policy decides what is published; counts
    are the real ones everywhere; ``notary verify --upgrade`` turns a receipt embedded at call
    time (which can never meet a quorum) into one that does, verifiable offline."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signers = [CosignatureSigner.generate(f"witness.test/p{i}") for i in range(3)]
    w = [WitnessProc(s, tmp_path / f"p{i}.db", first.vkey)
         for i, s in enumerate(signers)]
    for x in w:
        await x.start()
    policy = tmp_path / "witnesses.policy"
    policy.write_text(f"log {first.vkey}\n" + "".join(
        f"witness p{i} {x.signer.verifier_key_text()} {x.url}\n" for i, x in enumerate(w))
        + "group two-of-three 2 p0 p1 p2\nquorum two-of-three\n")
    settings = Settings(data=base.data, listen=base.listen, witness_policy=str(policy),
                        witness_interval=0.05, witness_timeout=2.0)
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        notary = await start_notary(settings, http, first.vkey, sock)
        try:
            key = await notary.new_api_key("a")
            receipt = await notary.issue(key, 1)

            async def all_three() -> Any:
                _, body, headers = await notary.get("/checkpoint")
                if headers["Notary-Witnessed"] != "true" or \
                        headers["Notary-Witness-Cosignatures"] != "3":
                    return None
                return body, headers

            body, headers = await eventually(all_three, "three cosignatures")
            assert headers["Notary-Witness-Quorum"] == "two-of-three"
            # The log's two (Ed25519 and ML-DSA-44) and three more.
            assert len(parse_note(bytes(body)).signatures) == 5
            # The log says what /checkpoint carries (a late third cosignature is logged too).
            published = [e for e in logs if e.get("event") == "witnessed_checkpoint"]
            assert published and published[-1]["cosignatures"] == 3, published

            jwks = tmp_path / "jwks.json"
            jwks.write_text(json.dumps(json.loads((await notary.get(
                "/.well-known/jwks.json"))[1])))
            receipt_file, record_file = tmp_path / "receipt.json", tmp_path / "record.json"
            receipt_file.write_text(json.dumps(receipt))
            record_file.write_text(json.dumps(CALL_RECORDS[receipt["id"]]))
            inputs = ["--receipt", str(receipt_file), "--record", str(record_file),
                      "--jwks", str(jwks), "--json"]
            state = tmp_path / "verifier-state.json"

            # Embedded at call time: the checkpoint predates every cosignature.
            code, out, _ = await asyncio.to_thread(
                capture_cli_sync, "verify", *inputs, "--witness-policy", str(policy),
                "--offline", "--state", str(state))
            report = json.loads(out)
            assert code == 1 and report["levels"]["witnesses"]["status"] == "failed"
            assert "0 of 3 witnesses cosigned" in report["levels"]["witnesses"]["reason"]
            assert not state.exists()  # --offline writes no state file

            # The receipt endpoint picks up the witnessed checkpoint from the witnessing task,
            # which may publish it a moment after /checkpoint: wait until it serves it.
            async def cosigned_proof() -> bool | None:
                _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
                note = decode_proof_bundle(json.loads(body)["proof"].encode()).checkpoint
                return True if len(parse_note(note).signatures) == 5 else None

            await eventually(cosigned_proof, "the receipt served with a witnessed proof")

            # --upgrade fetches the proof into the witnessed checkpoint; saved, it verifies
            # offline. The log key comes from the policy's log line.
            upgraded = tmp_path / "upgraded.json"
            code, out, _ = await asyncio.to_thread(
                capture_cli_sync, "verify", *inputs, "--witness-policy", str(policy),
                "--upgrade", "--save-receipt", str(upgraded), "--state", str(state))
            report = json.loads(out)
            assert code == 0, out
            reason = report["levels"]["witnesses"]["reason"]
            assert "3 of 3 witnesses cosigned (p0, p1, p2)" in reason, reason
            assert any(n.startswith("upgraded:") for n in report["notes"]), report["notes"]
            assert state.exists()  # online, the newest checkpoint is remembered
            code, out, _ = await asyncio.to_thread(
                capture_cli_sync, "verify", "--receipt", str(upgraded), "--record",
                str(record_file), "--jwks", str(jwks), "--witness-policy", str(policy),
                "--offline", "--no-state", "--json")
            assert code == 0, out

            # The simple form reports the truth as well: --quorum 2 with three valid says 3.
            wkeys = [a for x in w for a in ("--witness", x.signer.verifier_key_text())]
            code, out, _ = await asyncio.to_thread(
                capture_cli_sync, "verify", "--receipt", str(upgraded), "--record",
                str(record_file), "--jwks", str(jwks), "--log-key", first.vkey, *wkeys,
                "--quorum", "2", "--offline", "--no-state", "--json")
            reason = json.loads(out)["levels"]["witnesses"]["reason"]
            assert code == 0 and reason.startswith("3 of 3 witnesses cosigned"), reason
            assert "quorum 2 of 3" in reason
        finally:
            await notary.runner.cleanup()
            for x in w:
                await x.stop()


def test_witness_policy_settings_are_checked(tmp_path: Path) -> None:
    vkey = CosignatureSigner.generate("w.test/1").verifier_key_text()
    no_url = tmp_path / "no-url.policy"
    no_url.write_text(f"witness w {vkey}\nquorum w\n")
    good = tmp_path / "good.policy"
    good.write_text(f"witness w {vkey} http://127.0.0.1:1\nquorum w\n")
    # Settings check what one value can say alone (a missing file) when they are made; the
    # rest (a policy without URLs, a policy and --witness together) when the app is built.
    makers: list[Callable[[], Settings]] = [
        lambda: Settings(data=tmp_path / "n", witness_policy=str(no_url)),
        lambda: Settings(data=tmp_path / "n", witness_policy=str(tmp_path / "missing")),
        lambda: Settings(data=tmp_path / "n", witness_policy=str(good),
                         witnesses=(f"http://127.0.0.1:1={vkey}",))]
    for make in makers:
        with pytest.raises(ConfigError):
            create_app(make())


async def test_a_state_file_of_an_older_release_moves_into_the_store(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate("example.com/log")
    log = await Log.open(MemoryStore(), signer=signer)
    witness = CosignatureSigner.generate("witness.test/old")
    vkey = witness.verifier_key_text()
    old = tmp_path / STATE_FILE
    old.write_text(json.dumps({"version": 1, "origin": log.origin, "published": None,
                               "witnesses": {vkey: {"size": 0}}}))
    down = bound_socket()  # bound, never listening: a witness that is down
    endpoint = parse_witness_spec(f"http://127.0.0.1:{down.getsockname()[1]}={vkey}")
    witnessing = Witnessing(log, [endpoint], quorum=1, interval=30, state_path=old)
    await witnessing.start()
    await witnessing.close()
    state = await log.store.witness_state()
    assert state is not None and dict(state.sizes) == {vkey: 0} and state.published is None
    # From now on the store is what counts: the file is not read again.
    old.write_text(json.dumps({"version": 1, "origin": log.origin, "published": None,
                               "witnesses": {vkey: {"size": 7}}}))
    again = Witnessing(log, [endpoint], quorum=1, interval=30, state_path=old)
    await again.start()
    await again.close()
    state = await log.store.witness_state()
    assert state is not None and dict(state.sizes) == {vkey: 0}
    down.close()
    await log.close()


async def test_an_ml_dsa_witness_cosigns_the_published_checkpoint(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """``--witness URL=VKEY`` with an ML-DSA-44 witness key: its subtree/v1 cosignature is
    collected, counted in the quorum and served, and a receipt verifies against it."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signers: list[WitnessSigner] = [SubtreeCosignatureSigner.generate("witness.test/pq"),
                                    CosignatureSigner.generate("witness.test/ed")]
    w = [WitnessProc(s, tmp_path / f"w{i}.db", first.vkey) for i, s in enumerate(signers)]
    for x in w:
        await x.start()
    settings = Settings(data=base.data, listen=base.listen, witnesses=tuple(x.spec for x in w),
                        witness_quorum=2, witness_interval=0.05, witness_timeout=2.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    log_verifier = Ed25519Verifier.from_vkey(first.vkey)
    verifiers = [s.verifier() for s in signers]
    try:
        key = await notary.new_api_key("a")
        receipt = await notary.issue(key, 1)

        async def witnessed() -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            done = headers["Notary-Witnessed"] == "true" and checkpoint_size(body) >= 1
            return bytes(body) if done else None

        note = await eventually(witnessed, "a checkpoint cosigned by both witnesses")
        open_checkpoint(note, log_verifier, verifiers, 2)
        open_checkpoint(note, log_verifier, verifiers[:1], 1)  # the ML-DSA-44 line alone
        _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
        _, jwks, _ = await notary.get("/.well-known/jwks.json")
        verdict = verify_receipt(json.loads(body), record=CALL_RECORDS[receipt["id"]],
                                 jwks=Jwks(json.loads(jwks)), log_verifier=log_verifier,
                                 witnesses=verifiers[:1], quorum=1)
        assert verdict.valid, verdict.to_json()
    finally:
        await notary.runner.cleanup()
        for x in w:
            await x.stop()


def test_serve_refuses_a_policy_nested_too_deep_cleanly(tmp_path: Path) -> None:
    """``notary serve --witness-policy`` with groups nested 400 deep: a configuration error
    (exit 2, one line saying why) at start-up, not a RecursionError."""
    witness = CosignatureSigner.generate("witness.test/a").verifier_key_text()
    groups = ["group G1 any A", *(f"group G{i} any G{i - 1}" for i in range(2, 401))]
    policy = tmp_path / "deep.policy"
    policy.write_text("\n".join([f"witness A {witness} http://127.0.0.1:9", *groups,
                                 "quorum G400", ""]))
    code, out, err = capture_cli_sync("serve", "--data", str(tmp_path / "notary"),
                                     "--listen", "127.0.0.1:0", "--witness-policy", str(policy))
    assert code == 2, (out, err)
    assert "nests 33 deep" in err and "Traceback" not in err, err


async def test_a_witness_that_knows_only_the_logs_ml_dsa_key_cosigns(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """The notary submits dual-signed checkpoints: a witness configured with the log's ML-DSA-44
    key alone (as a post-quantum deployment would) verifies and cosigns them; the notary's own
    witness policy may name the log by that key alone."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    pq_vkey = SubtreeCosignatureSigner.derived_from(
        load_log_key(Paths(base.data))).verifier_key_text()
    signer = SubtreeCosignatureSigner.generate("witness.test/pq")
    w = WitnessProc(signer, tmp_path / "w.db", pq_vkey)
    await w.start()
    policy = tmp_path / "pq.policy"
    policy.write_text(f"log {pq_vkey}\nwitness w {signer.verifier_key_text()} {w.url}\n"
                      "quorum w\n")
    settings = Settings(data=base.data, listen=base.listen, witness_policy=str(policy),
                        witness_interval=0.05, witness_timeout=2.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        await notary.issue(key, 1)

        async def witnessed() -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            done = headers["Notary-Witnessed"] == "true" and checkpoint_size(body) >= 1
            return bytes(body) if done else None

        note = await eventually(witnessed, "a checkpoint cosigned by the ML-DSA-only witness")
        parse_tlog_policy(policy.read_bytes()).verify(note)  # met: ML-DSA-44 keys alone
        log_pq = SubtreeCosignatureVerifier.from_vkey(pq_vkey)
        open_checkpoint(note, log_pq, [signer.verifier()], 1)
    finally:
        await notary.runner.cleanup()
        await w.stop()


async def test_an_idle_logs_checkpoint_is_cosigned_again_every_refresh(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """Nothing is appended, yet the checkpoint served (by /checkpoint, in a receipt's proof and
    in the --publish directory) carries ever newer cosignatures: the unchanged checkpoint goes
    to the witness again every witness_refresh seconds (``old`` = its size, no proof)."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signer = CosignatureSigner.generate("witness.test/fresh")
    witness = WitnessProc(signer, tmp_path / "w.db", first.vkey)
    await witness.start()
    published = tmp_path / "published"
    settings = Settings(data=base.data, listen=base.listen, witnesses=(witness.spec,),
                        witness_quorum=1, witness_interval=0.05, witness_timeout=2,
                        witness_refresh=1.0, publish=str(published))
    notary = await start_notary(settings, http, first.vkey, sock)
    verifier = signer.verifier()

    def cosigned_at(note: bytes) -> int | None:
        """The witness's cosignature time on ``note``, None if it carries none."""
        for sig in parse_note(note).signatures:
            if sig.name == verifier.name and sig.key_id == verifier.key_id:
                return cosignature_timestamp(sig)
        return None

    try:
        # In a thread, not blocking this loop: the notary's jobs write to the store meanwhile.
        code, out, _ = await capture_cli("apikey", "create", "--data", str(settings.data),
                                         "--account", "a")
        assert code == 0, out
        receipt = await notary.issue(out.strip().splitlines()[-1], 0)

        async def witnessed() -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            witnessed = headers["Notary-Witnessed"] == "true" and checkpoint_size(body) == 1
            return bytes(body) if witnessed else None

        note = await eventually(witnessed, "a witnessed checkpoint of the receipt")
        first_time = cosigned_at(note)
        assert first_time is not None and checkpoint_size(note) == 1

        async def refreshed() -> bytes | None:
            _, body, _ = await notary.get("/checkpoint")
            seen = cosigned_at(bytes(body))
            return bytes(body) if seen is not None and seen > first_time else None

        fresh = await eventually(refreshed, "a fresher cosignature on the same checkpoint", 15)
        open_checkpoint(fresh, Ed25519Verifier.from_vkey(first.vkey), [verifier], 1)
        assert parse_note(fresh).text == parse_note(note).text  # the same checkpoint
        status, ledger, _ = await notary.get("/v1/ledger")
        assert status == 200 and json.loads(ledger)["size"] == 1  # nothing was appended
        # A receipt's proof and the published directory carry the fresh cosignature too.
        _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
        proof = decode_proof_bundle(json.loads(body)["proof"].encode())
        assert (cosigned_at(proof.checkpoint) or 0) > first_time

        async def published_fresh() -> bool | None:
            data = (published / "checkpoint").read_bytes()
            return True if (cosigned_at(data) or 0) > first_time else None

        await eventually(published_fresh, "the published checkpoint to be cosigned again", 15)
    finally:
        await notary.runner.cleanup()
        await witness.stop()


async def test_a_roll_while_witnessed_feeds_both_logs_to_the_witnesses(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """``notary log roll`` under a witnessed ``notary serve`` (docs/lifecycle.md): the frozen
    log's final checkpoint is cosigned by the witness of log 0, the new log's checkpoints by
    the witness given log 1's key once ``/v1/ledger`` lists it; the witness that does not know
    log 1 (404) holds nothing up, and a restart serves log 1's witnessed checkpoint at once."""
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    signers = [CosignatureSigner.generate(f"witness.test/r{i}") for i in range(2)]
    old = WitnessProc(signers[0], tmp_path / "old.db", first.vkey)  # knows log 0 only
    new = WitnessProc(signers[1], tmp_path / "new.db", first.vkey)  # started after the roll
    mirror_signer = SubtreeCosignatureSigner.generate("mirror.test/r")
    mirror = MirrorProc(mirror_signer, tmp_path / "mirror", base.default_origin, first.vkey)
    await old.start()
    await mirror.start()
    settings = Settings(data=base.data, listen=base.listen, witnesses=(old.spec, new.spec),
                        mirrors=(mirror.spec,),
                        witness_quorum=1, witness_interval=0.05, witness_timeout=1.0)
    notary = await start_notary(settings, http, first.vkey, sock)
    try:
        key = await notary.new_api_key("a")
        for n in range(3):
            await notary.issue(key, n)

        async def witnessed(origin: str, size: int) -> bytes | None:
            _, body, headers = await notary.get("/checkpoint")
            note = bytes(body)
            done = (headers["Notary-Witnessed"] == "true" and checkpoint_size(note) >= size
                    and note.startswith(origin.encode() + b"\n"))
            return note if done else None

        origin0 = parse_note(await eventually(lambda: witnessed(
            first.vkey.split("+")[0], 3), "log 0 witnessed")).text.split("\n")[0]
        code, _, err = await capture_cli("log", "roll", "--data", str(settings.data))
        assert code == 0, err
        code, out, err = await capture_cli("log", "list", "--data", str(settings.data),
                                           "--json")
        assert code == 0, err
        logs = json.loads(out)["logs"]  # as the operator reads it, to configure the witness
        final, origin1, vkey1 = logs[0]["final_size"], logs[1]["origin"], logs[1]["vkeys"][0]
        assert logs[0]["origin"] == origin0 and final == 4  # 3 receipts, the successor record
        new.more_logs = (vkey1,)
        await new.start()
        receipt = await notary.issue(key, 3)
        assert receipt["ledger"]["origin"] == origin1

        async def final_cosigned(url: str) -> bytes | None:
            digest = hashlib.sha256(origin0.encode()).hexdigest()
            async with http.get(f"{url}/{digest}/checkpoint") as r:
                note = await r.read()
            return note if r.status == 200 and checkpoint_size(note) == final else None

        log0 = Ed25519Verifier.from_vkey(first.vkey)
        note0 = await eventually(lambda: final_cosigned(old.url), "the final checkpoint cosigned")
        open_checkpoint(note0, log0, [signers[0].verifier()], 1)
        # The mirror of log 0 got the final checkpoint and the entries up to it.
        note0 = await eventually(lambda: final_cosigned(mirror.url), "the final one mirrored")
        open_checkpoint(note0, log0, [mirror_signer.verifier()], 1)
        note1 = await eventually(lambda: witnessed(origin1, 1), "log 1 witnessed")
        log1 = Ed25519Verifier.from_vkey(vkey1)
        open_checkpoint(note1, log1, [signers[1].verifier()], 1)
        _, body, _ = await notary.get(f"/v1/tool-calls/{receipt['id']}")
        bundle = decode_proof_bundle(json.loads(body)["proof"].encode())
        open_checkpoint(bundle.checkpoint, log1, [signers[1].verifier()], 1)

        async def saved() -> bool | None:
            state = await notary.runner.app[LOG].store.witness_state()
            return True if state is not None and state.published == note1 else None

        await eventually(saved, "log 1's witnessed checkpoint saved")
    finally:
        await notary.runner.cleanup()
        for x in (old, new, mirror):
            await x.stop()

    notary = await start_notary(settings, http, first.vkey)  # every witness down
    try:
        status, body, headers = await notary.get("/checkpoint")
        assert status == 200 and headers["Notary-Witnessed"] == "true"
        assert bytes(body) == note1
    finally:
        await notary.runner.cleanup()
