"""``notary verify`` with a tlog-policy that names only ML-DSA-44 keys (the log's derived key and
an ML-DSA-44 witness), against a real notary and witness on loopback: the receipt fetched again
(``--upgrade``) verifies end to end, saved and offline too; the receipt as issued (its checkpoint
has only the Ed25519 line) and one whose ML-DSA-44 line is corrupted are NOT VALID (exit 1), not
input errors."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.note import parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_proof import ProofBundle, decode_proof_bundle
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore
from notary.core.records import CallRecord, new_salt
from notary.serving.keys import Paths, load_log_key
from tests.notary_server import app_notary, run_cli
from tests.servers import bound_socket, serving


def verify(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = run_cli("verify", *args, "--json")
    return code, json.loads(out)


async def test_a_policy_of_ml_dsa_keys_verifies_a_receipt_end_to_end(tmp_path: Path) -> None:
    witness_signer = SubtreeCosignatureSigner.generate("witness.test/pq")
    wsock = bound_socket()
    wurl = f"http://127.0.0.1:{wsock.getsockname()[1]}"
    spec = f"{wurl}={witness_signer.verifier_key_text()}"
    async with app_notary(tmp_path / "data", witnesses=(spec,), witness_quorum=1,
                          witness_interval=0.05, witness_timeout=2.0) as notary, \
            aiohttp.ClientSession() as http:
        log_pq = SubtreeCosignatureSigner.derived_from(load_log_key(Paths(notary.data)))
        store = await WitnessStore.open(tmp_path / "w.db", witness_signer.verifier_key_text())
        witness = Witness(witness_signer, {log_pq.name: [log_pq.verifier()]}, store)
        async with serving(create_witness_app(witness), sock=wsock):
            # Through the app's store, not `notary apikey create`: the CLI would block this
            # event loop, whose notary may hold SQLite's write lock (its witnessing job runs
            # every 50 ms), until the CLI's busy timeout.
            key = await notary.new_api_key("a")
            record = CallRecord(server="srv", tool="echo", arguments={"n": 1},
                                result={"content": [{"type": "text", "text": "1"}]},
                                salt=new_salt())
            body = {"server": "srv", "tool": "echo", "call_sha256": record.call_sha256()}
            async with http.post(notary.url + "/v1/tool-calls", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as r:
                assert r.status == 201
                receipt = await r.json()
            async with http.get(notary.url + "/.well-known/jwks.json") as r:
                (tmp_path / "jwks.json").write_bytes(await r.read())
            policy = tmp_path / "pq.policy"
            policy.write_text(f"log {log_pq.verifier_key_text()}\n"
                              f"witness w {witness_signer.verifier_key_text()} {wurl}\n"
                              "quorum w\n")
            (tmp_path / "record.json").write_text(json.dumps(record.to_json()))
            inputs = ["--record", str(tmp_path / "record.json"), "--jwks",
                      str(tmp_path / "jwks.json"), "--witness-policy", str(policy),
                      "--state", str(tmp_path / "state.json")]

            def save(r: dict[str, Any], name: str) -> str:
                (tmp_path / name).write_text(json.dumps(r))
                return str(tmp_path / name)

            # As issued: only the Ed25519 line, which this policy does not trust.
            code, report = verify("--receipt", save(receipt, "born.json"), *inputs, "--offline")
            assert code == 1, report
            assert report["levels"]["inclusion"]["status"] == "failed"

            # Fetched again once the witness cosigned: dual-signed and cosigned.
            async def witnessed() -> dict[str, Any] | None:
                async with http.get(f"{notary.url}/v1/tool-calls/{receipt['id']}") as r:
                    fetched: dict[str, Any] = await r.json()
                note = decode_proof_bundle(fetched["proof"].encode()).checkpoint
                return fetched if len(parse_note(note).signatures) == 3 else None

            fetched = None
            for _ in range(300):
                fetched = await witnessed()
                if fetched is not None:
                    break
                await asyncio.sleep(0.05)
            assert fetched is not None, "the receipt never got its witnessed proof"
            code, report = verify("--receipt", save(fetched, "fetched.json"), *inputs,
                                  "--offline")
            assert code == 0, report
            assert report["levels"]["witnesses"]["status"] == "passed"

            # The same with the ML-DSA-44 log line corrupted: NOT VALID, not an input error.
            bundle = decode_proof_bundle(fetched["proof"].encode())
            note = parse_note(bundle.checkpoint)
            lines = bundle.checkpoint.decode().split("\n")
            i = next(n for n, line in enumerate(lines)
                     if line.startswith(f"\u2014 {log_pq.name} ") and len(line) > 500)
            head, b64 = lines[i].rsplit(" ", 1)
            blob = bytearray(base64.b64decode(b64))
            blob[100] ^= 1
            lines[i] = f"{head} {base64.b64encode(bytes(blob)).decode()}"
            bad = ProofBundle(bundle.index, bundle.proof, "\n".join(lines).encode())
            assert len(note.signatures) == 3
            tampered = {**fetched, "proof": bad.encode().decode()}
            code, report = verify("--receipt", save(tampered, "bad.json"), *inputs, "--offline")
            assert code == 1, report
        await store.close()
