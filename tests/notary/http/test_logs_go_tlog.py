"""Go's ``golang.org/x/mod/sumdb/tlog`` and ``sumdb/note`` read a notary's logs after a roll.

An independent tlog-tiles client (``go_tlog/main.go``) reads ``/logs/<n>/`` of the frozen log
and of the active one, each under the key ``/v1/ledger``'s ``logs`` lists for it: it opens the
checkpoint, checks every hash tile it reads against that checkpoint's root, and proves each
receipt's entry, read from its entry bundle, in the tree from those tiles alone. The entry must
be the one the receipt commits to (rebuilt from the receipt's own fields), and the frozen log's
last entry the successor record naming the active log (docs/lifecycle.md). On SQLite and
PostgreSQL.

Needs Go and Debian's ``golang-golang-x-mod-dev`` (``scripts/test`` installs both as root): the
test fails, never skips, without them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from notary.core.entry import LogEntry
from notary.core.records import CallRecord, new_salt
from notary.core.successor import decode_successor
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import roll
from tests.notary_server import AppNotary, app_notary

SOURCE = Path(__file__).parent / "go_tlog" / "main.go"
GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put their sources


@pytest.fixture(scope="module")
def tlogread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.fail("Go and golang.org/x/mod are needed: apt-get install golang-go "
                    "golang-golang-x-mod-dev (./scripts/test does it as root)")
    out = tmp_path_factory.mktemp("go") / "tlogread"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH),
           "GOCACHE": str(out.parent / "cache"), "GOFLAGS": ""}
    subprocess.run([go, "build", "-o", str(out), str(SOURCE)], check=True, env=env,
                   capture_output=True, timeout=300)
    return out


async def _read(tlogread: Path, log: dict[str, Any], *indexes: int) -> tuple[int, dict[int, bytes]]:
    """(size, entry by index) as the Go client read and proved them from ``log``'s tiles."""
    proc = await asyncio.create_subprocess_exec(
        str(tlogread), log["url"], log["vkeys"][0], log["origin"], *map(str, indexes),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    head, *lines = out.decode().splitlines()
    entries = {int(i): bytes.fromhex(data) for i, data in (line.split() for line in lines)}
    return int(head.split()[0]), entries


async def _issue(http: aiohttp.ClientSession, url: str, key: str, n: int) -> dict[str, Any]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
    body = {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}
    async with http.post(url + "/v1/tool-calls", json=body,
                         headers={"Authorization": f"Bearer {key}"}) as r:
        assert r.status == 201, await r.text()
        receipt: dict[str, Any] = await r.json()
    return receipt


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_go_reads_the_frozen_and_the_active_log_from_their_own_tiles(
        backend: str, tmp_path: Path, tlogread: Path, request: pytest.FixtureRequest) -> None:
    database = request.getfixturevalue("pg_url") if backend == "postgres" else ""
    notary: AppNotary
    async with app_notary(tmp_path / "data", database=database) as notary, \
            aiohttp.ClientSession() as http:
        key = await notary.new_api_key()
        before = [await _issue(http, notary.url, key, n) for n in range(3)]
        await roll(notary.store, load_log_key(Paths(notary.data)))
        after = [await _issue(http, notary.url, key, n) for n in range(3, 5)]
        async with http.get(notary.url + "/v1/ledger") as r:
            frozen, active = (await r.json())["logs"]
        assert (frozen["state"], active["state"]) == ("frozen", "active")
        assert {x["ledger"]["origin"] for x in before} == {frozen["origin"]}
        assert {x["ledger"]["origin"] for x in after} == {active["origin"]}

        indexes = [x["ledger"]["index"] for x in before]
        size, entries = await _read(tlogread, frozen, *indexes, frozen["size"] - 1)
        assert size == frozen["size"] == 4  # 3 receipts and the successor record
        for receipt in before:
            assert entries[receipt["ledger"]["index"]] == LogEntry.from_receipt(receipt).encode()
        successor = decode_successor(entries[3])
        assert (successor.origin, list(successor.vkeys)) == (active["origin"], active["vkeys"])

        size, entries = await _read(tlogread, active, *(x["ledger"]["index"] for x in after))
        assert size == 2
        for receipt in after:
            assert entries[receipt["ledger"]["index"]] == LogEntry.from_receipt(receipt).encode()
        # Each log under the other's key is refused: a client trusts one key per log.
        with pytest.raises(AssertionError, match="checkpoint"):
            await _read(tlogread, {**frozen, "vkeys": active["vkeys"]})
