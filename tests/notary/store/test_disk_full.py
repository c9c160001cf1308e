"""A full disk: 503 with Retry-After, unhealthy, one log line per interval, back by itself when
space returns, nothing acknowledged lost.

Two ways to fill the disk: SQLite's own size limit (``PRAGMA max_page_count`` on the writer's
connection), which gives the real SQLITE_FULL error path anywhere; and, where the tests may
mount filesystems (root), a small tmpfs that a filler file fills up for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ledger.core.note import Ed25519Verifier
from ledger.http.routes import LOG
from ledger.log.facade import Log
from ledger.storage.sqlite import SqliteStore
from notary.core.jwks import Jwks
from notary.core.verification import verify_receipt
from tests.notary_server import NotaryProcess, app_notary


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


async def _set_max_pages(store: SqliteStore, pages: int | None) -> None:
    """Limit the database to its current size (None) or lift the limit, on the writer's own
    connection (the limit is per connection)."""
    def apply() -> None:
        conn = store._wconn
        current = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {current if pages is None else pages}")

    async with store._wlock:
        await asyncio.to_thread(apply)


async def test_sqlite_full_is_503_then_recovers(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    async with app_notary(tmp_path / "data") as served, aiohttp.ClientSession() as http:
        key = await served.new_api_key("full")
        auth = {"Authorization": f"Bearer {key}"}
        store = served.app[LOG].store
        assert isinstance(store, SqliteStore)

        async def issue(seed: str) -> tuple[int, dict[str, Any], Any]:
            body = {"server": "s", "tool": "t", "call_sha256": _digest(seed)}
            async with http.post(f"{served.url}/v1/tool-calls", json=body, headers=auth) as r:
                return r.status, dict(r.headers), await r.json()

        acknowledged = []
        for i in range(5):
            status, _, receipt = await issue(f"before-{i}")
            assert status == 201
            acknowledged.append(receipt)

        await _set_max_pages(store, None)
        refusals = []
        for i in range(300):  # until the free space left in the database's pages runs out
            status, headers, body = await issue(f"full-{i}")
            if status == 201:
                acknowledged.append(body)
                continue
            refusals.append((status, headers, body))
            if len(refusals) == 20:
                break
        assert len(refusals) == 20, "the database never filled up"
        for status, headers, body in refusals:
            assert status == 503 and body["error"]["code"] == "storage_full", body
            assert int(headers["Retry-After"]) > 0
        async with http.get(f"{served.url}/healthz") as r:
            health = await r.json()
            assert r.status == 503 and health["error"]["code"] == "storage_full"
            assert health["status"] == "unhealthy" and "Retry-After" in r.headers
            assert health["writes"] == "stopped" and "disk is full" in health["problem"]

        await _set_max_pages(store, 1 << 30)  # space is back: healthy within a probe or two
        for _ in range(100):
            async with http.get(f"{served.url}/healthz") as r:
                if r.status == 200:
                    health = await r.json()
                    assert (health["status"], health["writes"]) == ("ok", "accepted")
                    break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("still unhealthy after space came back")
        status, _, receipt = await issue("after")
        assert status == 201
        acknowledged.append(receipt)

        async with http.get(f"{served.url}/.well-known/jwks.json") as r:
            jwks = Jwks(await r.json())
        for receipt in acknowledged:  # nothing acknowledged was lost, all still verifies
            async with http.get(f"{served.url}/v1/tool-calls/{receipt['id']}") as r:
                stored = await r.json()
            assert {k: v for k, v in stored.items() if k != "proof"} == {
                k: v for k, v in receipt.items() if k != "proof"}
            verdict = verify_receipt(stored, record=None, jwks=jwks,
                                     log_verifier=Ed25519Verifier.from_vkey(served.vkey))
            assert verdict.levels["signature"].status == "passed"
            assert verdict.levels["inclusion"].status == "passed", verdict.to_json()

    out = capsys.readouterr()
    logged = (out.out + out.err).splitlines()
    full_lines = [line for line in logged if "storage_full" in line]
    assert 1 <= len(full_lines) <= 2, full_lines  # 20 refusals, one line per interval
    assert not [line for line in logged if "unhandled_error" in line or "Traceback" in line]
    # The store still opens, with its integrity check, and holds every acknowledged entry.
    reopened = await Log.open(await SqliteStore.open(tmp_path / "data" / "notary.store.sqlite"),
                              verifier=Ed25519Verifier.from_vkey(served.vkey))
    head = await reopened.head()
    assert head is not None and head.size == len(acknowledged)
    await reopened.close()


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                        str(path)], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot mount a tmpfs here ({e}); test_sqlite_full_is_503_then_recovers "
                    "covers the same path")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True,
                       timeout=30)


def _fill(directory: Path) -> Path:
    """A file that takes every byte left on ``directory``'s filesystem."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (65536, 512, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * chunk):
                    pass
    finally:
        os.close(fd)
    return filler


def test_a_real_full_filesystem(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "mnt", "6m") as mnt:
        # The daemon's output goes outside the small filesystem, as to a journal.
        server = NotaryProcess(mnt / "notary-data", split_stderr=True, log_dir=tmp_path)
        with server:
            key = server.create_api_key("tmpfs")
            acknowledged = []
            for i in range(10):
                resp = server.post("/v1/tool-calls", api_key=key, json_body={
                    "server": "s", "tool": "t", "call_sha256": _digest(f"t-{i}")})
                assert resp.status == 201
                acknowledged.append(resp.json())
            filler = _fill(mnt)
            statuses = []
            for i in range(200):
                resp = server.post("/v1/tool-calls", api_key=key, json_body={
                    "server": "s", "tool": "t", "call_sha256": _digest(f"full-{i}")})
                statuses.append(resp.status)
                if resp.status == 201:
                    acknowledged.append(resp.json())
                else:
                    assert resp.status == 503, resp.body
                    assert resp.json()["error"]["code"] == "storage_full"
                    assert resp.header("Retry-After")
                if statuses.count(503) >= 10:
                    break
            assert statuses.count(503) >= 10, statuses
            assert server.get("/healthz").status == 503
            os.unlink(filler)
            deadline = time.monotonic() + 10
            while server.get("/healthz").status != 200:
                assert time.monotonic() < deadline, "still unhealthy after space came back"
                time.sleep(0.1)
            resp = server.post("/v1/tool-calls", api_key=key, json_body={
                "server": "s", "tool": "t", "call_sha256": _digest("after")})
            assert resp.status == 201
            acknowledged.append(resp.json())
            for receipt in acknowledged:
                assert server.get(f"/v1/tool-calls/{receipt['id']}").status == 200
        stderr = server.stderr_bytes().decode()
        records = [json.loads(line) for line in stderr.splitlines()]
        assert len([r for r in records if r.get("event") == "storage_full"]) <= 2
        assert "Traceback" not in stderr
        server.start()  # the start-up integrity check passes on what the full disk left
        assert server.get("/healthz").json()["size"] == len(acknowledged)
        server.stop()
