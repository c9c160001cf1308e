"""ML-DSA-44 against Ed25519: the cost of a post-quantum checkpoint, per operation and in bytes.

Per operation, one run, so the ratios hold whatever the machine is doing:

- Python: Ed25519 sign and verify of a checkpoint line (PyNaCl/libsodium, what the sequencer and
  the verifiers use) and ML-DSA-44 sign and verify of a subtree/v1 checkpoint line (OpenSSL 3.5
  through ``cryptography``), each through our own key classes, so the message building counts;
- Node: the same verifications in the JS package's classes (``@noble/curves`` Ed25519 is not
  what Node uses: ``node:crypto`` is; ML-DSA-44 is ``@noble/post-quantum``, pure JavaScript,
  which is also what a browser runs).

Bytes: a checkpoint with the log's Ed25519 line only, with both lines, and with one Ed25519 and
one ML-DSA-44 witness cosignature more; and a receipt's tlog-proof bundle at a million entries
with each checkpoint.

    .venv/bin/python -m benchmarks.mldsa_bench [--seconds S] [--save]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import (
    command_line,
    machine_info,
    now_utc,
    result_path,
    shown,
    table,
    write_json,
)
from ledger.core.checkpoint import Checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, sign_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tlog_proof import ProofBundle

REPO = Path(__file__).resolve().parents[1]
ORIGIN = "bench.example/log"
SIZE = 1_000_000

NODE_SCRIPT = r"""
import { Ed25519Verifier, parseNote } from "./src/note.js";
import { SubtreeCosignatureVerifier } from "./src/mldsa.js";
const input = JSON.parse(process.argv[1]);
const seconds = input.seconds;
async function timeit(fn) {
  let n = 0;
  const start = process.hrtime.bigint();
  for (;;) {
    for (let i = 0; i < 10; i++) if (!(await fn())) throw new Error("did not verify");
    n += 10;
    const ns = Number(process.hrtime.bigint() - start);
    if (ns >= seconds * 1e9) return ns / n / 1000;
  }
}
const note = parseNote(input.note);
const text = new TextEncoder().encode(note.text);
const ed = Ed25519Verifier.fromVkey(input.ed);
const pq = SubtreeCosignatureVerifier.fromVkey(input.pq);
const edSig = note.signatures.find((s) => s.keyId === ed.keyId).signature;
const pqSig = note.signatures.find((s) => s.keyId === pq.keyId).signature;
const out = {
  ed25519_verify_us: await timeit(() => ed.verify(text, edSig)),
  mldsa44_verify_us: await timeit(() => pq.verify(text, pqSig)),
};
console.log(JSON.stringify(out));
"""


def per_op_us(fn: Callable[[], object], seconds: float) -> float:
    """Mean µs per call of ``fn`` over at least ``seconds`` (after a warm-up call)."""
    fn()
    n = 0
    start = time.perf_counter()
    while True:
        for _ in range(10):
            fn()
        n += 10
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n * 1e6


def python_costs(seconds: float) -> tuple[dict[str, float], dict[str, Any]]:
    ed, pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    text = Checkpoint(ORIGIN, SIZE, bytes(range(32))).text()
    message = text.encode()
    ed_sig = ed.sign(message)
    pq_line = pq.cosign(text, 1_700_000_000)
    ed_v, pq_v = ed.verifier(), pq.verifier()
    assert ed_v.verify(message, ed_sig) and pq_v.verify(message, pq_line.signature)
    costs = {
        "ed25519_sign_us": per_op_us(lambda: ed.sign(message), seconds),
        "ed25519_verify_us": per_op_us(lambda: ed_v.verify(message, ed_sig), seconds),
        "mldsa44_sign_us": per_op_us(lambda: pq.cosign(text, 1_700_000_000), seconds),
        "mldsa44_verify_us": per_op_us(lambda: pq_v.verify(message, pq_line.signature),
                                       seconds),
    }
    note = merge_signatures(sign_note(text, ed), [pq_line])
    keys = {"note": note.decode(), "ed": ed_v.vkey, "pq": pq_v.vkey}
    return costs, keys


def node_costs(keys: dict[str, Any], seconds: float) -> dict[str, float] | None:
    try:
        done = subprocess.run(
            ["node", "--input-type=module", "-e", NODE_SCRIPT,
             json.dumps({**keys, "seconds": seconds})],
            cwd=REPO / "js", capture_output=True, text=True, timeout=120 + 10 * seconds)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"node: not measured ({e})")
        return None
    if done.returncode != 0:
        print(f"node: not measured ({done.stderr.strip()[-300:]})")
        return None
    costs: dict[str, float] = json.loads(done.stdout)
    return costs


def sizes() -> dict[str, int]:
    """Bytes of checkpoints and of one proof bundle with each, at a tree of SIZE leaves."""
    ed, pq = Ed25519Signer.generate(ORIGIN), SubtreeCosignatureSigner.generate(ORIGIN)
    text = Checkpoint(ORIGIN, SIZE, bytes(range(32))).text()
    ed_only = sign_note(text, ed)
    dual = merge_signatures(ed_only, [pq.cosign(text, 1_700_000_000)])
    witnessed = merge_signatures(dual, [
        CosignatureSigner.generate("witness.example/ed").cosign(text, 1_700_000_001),
        SubtreeCosignatureSigner.generate("witness.example/pq").cosign(text, 1_700_000_002)])
    proof = tuple(bytes([i]) * 32 for i in range(SIZE.bit_length()))  # a path's length
    return {
        "checkpoint_ed25519": len(ed_only),
        "checkpoint_dual": len(dual),
        "checkpoint_dual_two_witnesses": len(witnessed),
        "bundle_ed25519": len(ProofBundle(123_456, proof, ed_only).encode()),
        "bundle_dual": len(ProofBundle(123_456, proof, dual).encode()),
        "bundle_dual_two_witnesses": len(ProofBundle(123_456, proof, witnessed).encode()),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    p.add_argument("--save", action="store_true",
                   help="write benchmarks/results/mldsa_bench.json (else results/local/)")
    p.add_argument("--out", help="write the JSON here instead")
    args = p.parse_args()
    py, keys = python_costs(args.seconds)
    node = node_costs(keys, args.seconds)
    size = sizes()
    rows = [
        ["Python sign", f"{py['ed25519_sign_us']:.1f} µs", f"{py['mldsa44_sign_us']:.1f} µs",
         f"{py['mldsa44_sign_us'] / py['ed25519_sign_us']:.1f}×"],
        ["Python verify", f"{py['ed25519_verify_us']:.1f} µs",
         f"{py['mldsa44_verify_us']:.1f} µs",
         f"{py['mldsa44_verify_us'] / py['ed25519_verify_us']:.1f}×"],
    ]
    if node is not None:
        rows.append(["Node verify", f"{node['ed25519_verify_us']:.1f} µs",
                     f"{node['mldsa44_verify_us']:.1f} µs",
                     f"{node['mldsa44_verify_us'] / node['ed25519_verify_us']:.1f}×"])
    print(table(["operation (a checkpoint line)", "Ed25519", "ML-DSA-44", "ratio"], rows))
    print()
    print(table(["bytes", "Ed25519 only", "dual-signed", "dual + 2 witnesses"], [
        ["checkpoint", size["checkpoint_ed25519"], size["checkpoint_dual"],
         size["checkpoint_dual_two_witnesses"]],
        [f"tlog-proof bundle at {SIZE:,} entries", size["bundle_ed25519"], size["bundle_dual"],
         size["bundle_dual_two_witnesses"]],
    ]))
    out = write_json(result_path("mldsa_bench", save=args.save, out=args.out), {
        "benchmark": "mldsa_bench", "date": now_utc(), "command": command_line(),
        "machine": machine_info(), "seconds_per_measurement": args.seconds,
        "python": py, "node": node, "bytes": size,
    })
    print(f"\nwrote {shown(out)}")


if __name__ == "__main__":
    main()
