"""The cross-language corpus (tests/corpus/generate.py) against the Python verifier itself.

The generator writes each case's expected verdicts from its hand-written tables; here the Python
verifier must give exactly those, so the corpus the JavaScript suite checks against cannot drift
from what Python does. Cases marked ``python_diverges`` hold the documented expectation
(docs/formats.md) where the Python code does not follow it yet; for them the divergence itself
is asserted, so the marker is removed as soon as Python catches up (none today).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.generate import build, python_cose, python_ed25519, python_jcs, python_verdict


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("corpus")
    asyncio.run(build(out))
    index = json.loads((out / "index.json").read_text())
    cases = [json.loads((out / f"{name}.json").read_text()) for name in index["cases"]]
    return out, cases


def outcome(case: dict[str, Any], workdir: Path) -> Any:
    if case["kind"] == "cose":
        return python_cose(case)
    if case["kind"] == "jcs":
        return python_jcs(case)
    if case["kind"] == "ed25519":
        return python_ed25519(case)
    return python_verdict(case, workdir)


def test_corpus_covers_every_kind(corpus: tuple[Path, list[dict[str, Any]]]) -> None:
    _, cases = corpus
    names = [c["name"] for c in cases]
    for prefix in (
        "valid-",
        "python-sdk-auto-",
        "python-sdk-legacy-",
        "tamper-receipt-",
        "tamper-record-",
        "input-",
        "trust-",
        "witness-",
        "policy-",
        "state-",
        "jcs-refuse-",
        "hostile-",
        "ed25519-",
        "cose-",
    ):
        assert any(n.startswith(prefix) for n in names), prefix
    assert len(cases) >= 150
    # the tamper table of tests/notary/verifier/test_verifier.py is there in full
    for field in (
        "id",
        "server",
        "tool",
        "call_sha256",
        "issued_at",
        "ledger-index",
        "ledger-origin",
        "ledger-entry-url",
        "signature-sig",
        "signature-kid",
        "proof-hash",
        "checkpoint-root",
        "checkpoint-signature",
    ):
        assert f"tamper-receipt-{field}" in names


def test_python_gives_the_recorded_verdicts(
    corpus: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, cases = corpus
    mismatches = []
    for case in cases:
        if case.get("python_diverges"):
            continue
        got = outcome(case, tmp_path)
        if got != case["expect"]:
            mismatches.append(f"{case['name']}: expected {case['expect']}, Python gives {got}")
    assert not mismatches, "\n".join(mismatches)


def test_every_hashable_record_has_its_digest(corpus: tuple[Path, list[dict[str, Any]]]) -> None:
    _, cases = corpus
    verify = [c for c in cases if c["kind"] == "verify"]
    with_digest = [c for c in verify if c["call_sha256"] is not None]
    assert len(with_digest) > 80
    for c in verify:  # a record that verifies hashes to its receipt's digest
        if c["expect"]["levels"] and c["expect"]["levels"]["record"] == "passed":
            assert c["call_sha256"] is not None, c["name"]


def test_known_divergences_are_still_there(
    corpus: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, cases = corpus
    diverging = [c for c in cases if c.get("python_diverges")]
    caught_up = [c["name"] for c in diverging if outcome(c, tmp_path) == c["expect"]]
    assert not caught_up, (
        f"Python now follows docs/formats.md for {caught_up}: remove their "
        "python_diverges marker in tests/corpus/generate.py"
    )


def test_refusals_are_refused_and_digests_are_jcs(
    corpus: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, cases = corpus
    jcs = {c["name"]: c for c in cases if c["kind"] == "jcs"}
    for name, case in jcs.items():
        if name.startswith("jcs-refuse-"):
            assert case["expect"]["refused"] is True, name
        elif not case.get("python_diverges"):
            assert case["expect"]["refused"] is False, name
    traps = jcs["jcs-big-integers-exact"]["expect"]["canonical"]
    assert (
        '"a":9007199254740992,"b":9007199254740994,"c":1000000000000000000,'
        '"d":1152921504606847000,"e":1e+21,"f":18446744073709552000,'
        '"g":-9007199254740992'
    ) in traps
    numbers = jcs["jcs-numbers"]["expect"]["canonical"]
    assert (
        '"a":1e+21,"b":1e-7,"c":0.1,"d":0,"e":5e-324,"f":1.7976931348623157e+308,"g":100,'
        '"h":100,"i":0.000001,"j":1.23e-18,"k":-1.5e-9'
    ) in numbers
    assert jcs["jcs-strings"]["expect"]["canonical"].count("\\u2028") == 0  # raw U+2028
