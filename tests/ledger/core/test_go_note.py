"""Go's ``golang.org/x/mod/sumdb/note`` opens our checkpoints by their Ed25519 line.

A checkpoint signed by the log twice (Ed25519, type 0x01, and ML-DSA-44 subtree/v1, type 0x06,
both named for the origin) and cosigned by Ed25519 and ML-DSA-44 witnesses must still open in
Go's note package with the log's Ed25519 vkey, the other lines ignored as unknown keys, as the
signed-note spec requires of clients; a tampered Ed25519 line must still be refused there.

Needs Go and Debian's ``golang-golang-x-mod-dev`` (``scripts/test`` installs both as root): the
test fails, never skips, without them.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore

SOURCE = Path(__file__).parent / "go_note" / "main.go"
GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put their sources


@pytest.fixture(scope="module")
def opennote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/golang.org/x/mod/sumdb/note").is_dir():
        pytest.fail("Go and golang.org/x/mod are needed: apt-get install golang-go "
                    "golang-golang-x-mod-dev (./scripts/test does it as root)")
    out = tmp_path_factory.mktemp("go") / "opennote"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH),
           "GOCACHE": str(out.parent / "cache"), "GOFLAGS": ""}
    subprocess.run([go, "build", "-o", str(out), str(SOURCE)], check=True, env=env,
                   capture_output=True, timeout=300)
    return out


def run(opennote: Path, note: bytes, *vkeys: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / "note"
    path.write_bytes(note)
    return subprocess.run([str(opennote), str(path), *vkeys], capture_output=True, text=True,
                          timeout=60)


def test_go_opens_a_dual_signed_cosigned_checkpoint(opennote: Path, tmp_path: Path) -> None:
    origin = "example.test/go-interop"
    log_ed = Ed25519Signer.generate(origin)

    async def checkpoint() -> bytes:
        log = await Log.open(MemoryStore(), signer=log_ed)
        await asyncio.gather(*(log.append(b"entry %d" % i) for i in range(5)))
        head = await log.head(0)
        assert head is not None
        return head.note

    note = asyncio.run(checkpoint())
    text = parse_note(note).text
    dual = merge_signatures(note, [
        SubtreeCosignatureSigner.generate(origin).cosign(text, 1_700_000_000),
        SubtreeCosignatureSigner.generate("witness.test/pq").cosign(text, 1_700_000_001),
        CosignatureSigner.generate("witness.test/ed").cosign(text, 1_700_000_002),
    ])
    got = run(opennote, dual, log_ed.verifier_key_text(), tmp=tmp_path)
    assert got.returncode == 0, got.stdout + got.stderr
    counts, opened = got.stdout.split("\n", 1)
    assert counts == "1 3"  # the Ed25519 line verified; the other three are unknown to Go
    assert opened == text
    # Go still refuses the note when the line it knows carries a bad signature.
    lines = dual.decode().split("\n")
    ed_line = next(i for i, line in enumerate(lines)
                   if line.startswith(f"\u2014 {origin} ") and len(line) < 200)
    head, b64 = lines[ed_line].rsplit(" ", 1)
    blob = bytearray(base64.b64decode(b64))
    blob[10] ^= 1
    lines[ed_line] = f"{head} {base64.b64encode(bytes(blob)).decode()}"
    bad = run(opennote, "\n".join(lines).encode(), log_ed.verifier_key_text(), tmp=tmp_path)
    assert (bad.returncode, bad.stdout.strip()) == (
        1, f"open: invalid signature for key {origin}+{log_ed.key_id:08x}")
