"""The benchmarks that issue receipts through the SDK and verify them run to the end in their
smallest sizes, against a real notary on loopback.

Importing a benchmark (test_benchmarks.py) does not run it: after the typed ``Receipt``
replaced receipt dicts, ``js_verify`` failed to write its cases and ``mcp_notarize`` its
per-level costs, and nothing noticed until a benchmark run. No figure is checked here
(figures are for the pages under benchmarks/docs/); only that every stage ran and wrote its part.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._common import REPO

_RUNS = {
    "js_verify": ["--receipts", "20", "--seconds", "0.2", "--calls", "5"],
    "mcp_notarize": ["--quick", "--no-http", "--no-tmpfs", "--calls", "10", "--warmup", "2",
                     "--receipts", "40", "--verify-seconds", "0.2", "--profile-calls", "10"],
    "mldsa_bench": ["--seconds", "0.05"],
    "mirror_bench": ["--entries", "600", "--rate", "20", "--seconds", "0.5"],
    "gateway_bench": ["--calls", "5", "--warmup", "1", "--no-tmpfs"],
    "cose_receipts": ["--seconds", "0.5", "--warmup", "0.2", "--rounds", "1", "--connections",
                      "4", "--receipts", "20"],
}


def _run(name: str, out: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *_RUNS[name],
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {out}" in done.stdout
    result: dict[str, object] = json.loads(out.read_text())
    assert result["benchmark"] == name
    return result


def test_js_verify_runs_both_verifiers_over_the_issued_receipts(tmp_path: Path) -> None:
    result = _run("js_verify", tmp_path / "js.json")
    assert result["receipts"] == 20
    verify = result["verify"]
    assert isinstance(verify, dict)
    assert {"python", "node_sequential", "node_64_in_flight"} <= set(verify)
    assert all(v["verifications"] > 0 for v in verify.values())


def test_mcp_notarize_measures_every_verification_level(tmp_path: Path) -> None:
    result = _run("mcp_notarize", tmp_path / "mcp.json")
    verification = result["verification"]
    assert isinstance(verification, dict)
    for checkpoints in ("stages_us_shared", "stages_us_one_checkpoint_each"):
        stages = verification[checkpoints]
        assert list(stages) == ["receipt shape", "level 1 record (rebuild call_sha256)",
                                "level 2 signature (JCS + Ed25519)",
                                "level 3 inclusion (bundle, checkpoint, path)"]
        assert all(us > 0 for us in stages.values())


def test_mldsa_bench_measures_both_languages_and_the_sizes(tmp_path: Path) -> None:
    result = _run("mldsa_bench", tmp_path / "mldsa.json")
    for side in ("python", "node"):
        costs = result[side]
        assert isinstance(costs, dict) and costs and all(us > 0 for us in costs.values())
    sizes = result["bytes"]
    assert isinstance(sizes, dict)
    assert sizes["checkpoint_ed25519"] < sizes["checkpoint_dual"] < sizes[
        "checkpoint_dual_two_witnesses"]


def test_mirror_bench_ingests_and_measures_the_lag(tmp_path: Path) -> None:
    result = _run("mirror_bench", tmp_path / "mirror.json")
    ingest = result["ingest"]
    assert isinstance(ingest, dict) and ingest["entries"] == 600
    assert ingest["entries_per_second"] > 0 and ingest["mirror_disk_bytes_per_entry"] > 0
    assert ingest["origin_disk_bytes_per_entry"] > 0 and ingest["mirror_cpu_us_per_entry"] > 0
    lag = result["lag"]
    assert isinstance(lag, dict) and lag["receipts"] > 0
    assert 0 < lag["lag_ms"]["p50"] <= lag["lag_ms"]["max"]


def test_gateway_bench_measures_tools_resources_and_prompts(tmp_path: Path) -> None:
    result = _run("gateway_bench", tmp_path / "gateway.json")
    results = result["results"]
    assert isinstance(results, list) and len(results) == 1  # --no-tmpfs: the disk setting
    disk: dict[str, Any] = results[0]
    for kind in ("idempotent_tool", "non_idempotent_tool", "resource_read", "prompt_get"):
        timings = disk[kind]
        assert timings["direct_p50_ms"] > 0 and timings["gateway_p50_ms"] > 0
        assert timings["parts_p50_ms"]["notarize decision"] > 0
        assert timings["parts_p50_ms"]["upstream call"] > 0  # timed for every kind
        # What no part covers, split: inside the gateway's handler, and outside it.
        assert timings["gateway_cpu_in_handler_p50_ms"] > 0
        assert timings["mcp_plumbing_p50_ms"] > 0


def test_cose_receipts_compares_the_signer_on_and_off_and_serves_cose_receipts(
        tmp_path: Path) -> None:
    result = _run("cose_receipts", tmp_path / "cose.json")
    notarize = result["notarize"]
    assert isinstance(notarize, dict)
    for mode in ("on", "off"):
        assert notarize[mode]["receipts_per_s"] > 0
    # The reader got COSE receipts from the one notary and 404 from the other.
    assert set(notarize["on"]["runs"][0]["cose_reads"]) == {"200"}
    assert set(notarize["off"]["runs"][0]["cose_reads"]) == {"404"}
    serve = result["serve"]
    assert isinstance(serve, dict) and serve["cose_receipts_per_s"] > 0 and serve["errors"] == 0
    sizes = result["bytes"]
    assert isinstance(sizes, dict)
    assert 0 < sizes["cose_eddsa"]["mean"] < sizes["cose_ml_dsa_44"]["mean"]
    signed = result["roots_signed_total"]
    assert isinstance(signed, dict) and signed["EdDSA"] >= 1 and signed["ML-DSA-44"] >= 1
