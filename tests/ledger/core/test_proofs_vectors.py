"""RFC 9162 proof verification against transparency-dev/merkle's test data and the 8-leaf
reference tree of docs/formats.md."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ledger.core.compact import TreeState, integrate
from ledger.core.hashing import EMPTY_ROOT, leaf_hash, merkle_root
from ledger.core.proofs import ProofError, verify_consistency, verify_inclusion

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "rfc9162"
INCLUSION = sorted((VECTORS / "inclusion").rglob("*.json"))
CONSISTENCY = sorted((VECTORS / "consistency").rglob("*.json"))

REFERENCE_LEAVES = [
    bytes.fromhex(h)
    for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f"]
]
REFERENCE_ROOT = "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"


def _b64(s: str) -> bytes:
    return base64.b64decode(s)


def test_vectors_are_present() -> None:
    # A fresh clone must test itself: missing vectors are a failure, not a skip.
    assert len(INCLUSION) >= 50
    assert len(CONSISTENCY) >= 50


@pytest.mark.parametrize("path", INCLUSION, ids=lambda p: str(p.relative_to(VECTORS)))
def test_inclusion_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    proof = [_b64(p) for p in v["proof"] or []]
    args = (v["leafIdx"], v["treeSize"], _b64(v["leafHash"]), proof, _b64(v["root"]))
    if v["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize("path", CONSISTENCY, ids=lambda p: str(p.relative_to(VECTORS)))
def test_consistency_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    proof = [_b64(p) for p in v["proof"] or []]
    args = (v["size1"], v["size2"], _b64(v["root1"]), _b64(v["root2"]), proof)
    if v["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


def test_reference_tree_root() -> None:
    hashes = [leaf_hash(x) for x in REFERENCE_LEAVES]
    assert merkle_root(hashes).hex() == REFERENCE_ROOT
    assert integrate(TreeState(), REFERENCE_LEAVES).state.root().hex() == REFERENCE_ROOT


def test_empty_tree_root() -> None:
    assert TreeState().root() == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
