"""``notary serve --workers N``: N processes on one SQLite log behind one port, a worker that
is SIGKILLed is replaced, and the log they write together is one log."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledger.core.note import Ed25519Verifier
from notary.core.receipts import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from tests.notary_server import NotaryProcess


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def notarize(server: NotaryProcess, key: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    record = CallRecord(server="srv", tool="t", arguments={"n": n}, result={"content": []},
                        salt=new_salt())
    body = {"server": "srv", "tool": "t", "call_sha256": record.call_sha256()}
    for _ in range(50):  # a connection to a worker that was just killed: try again
        try:
            resp = server.post("/v1/tool-calls", json_body=body, api_key=key)
        except OSError:
            time.sleep(0.1)
            continue
        if resp.status == 503:
            time.sleep(0.1)
            continue
        assert resp.status in (200, 201), resp.body
        return resp.json(), record.to_json()
    raise AssertionError("no answer")


def test_workers_share_one_log_and_replace_a_killed_one(tmp_path: Path) -> None:
    with NotaryProcess(tmp_path / "data", args=("--workers", "2")) as server:
        assert server.proc is not None
        deadline = time.monotonic() + 30
        while len(children(server.proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        workers = children(server.proc.pid)
        key = server.create_api_key("w")
        with ThreadPoolExecutor(16) as pool:
            first = list(pool.map(lambda n: notarize(server, key, n), range(200)))
            os.kill(workers[0], signal.SIGKILL)
            second = list(pool.map(lambda n: notarize(server, key, n), range(200, 400)))
        deadline = time.monotonic() + 30  # the supervisor starts a new worker
        while len(now := children(server.proc.pid)) < 2 or workers[0] in now:
            assert time.monotonic() < deadline, now
            time.sleep(0.05)
        got = first + second
        assert sorted(r["ledger"]["index"] for r, _ in got) == list(range(400))
        jwks = Jwks(server.get("/.well-known/jwks.json").json())
        vkey = Ed25519Verifier.from_vkey(server.get("/v1/ledger").json()["vkey"])
        for receipt, record in got:
            verdict = verify_receipt(receipt, record=record, jwks=jwks, log_verifier=vkey)
            assert verdict.valid, json.dumps(verdict.to_json())
        assert server.stop() == 0


def test_workers_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """The same on a PostgreSQL store: the workers share the database's log, one receipt key."""
    with NotaryProcess(tmp_path / "data", args=("--workers", "2", "--database", pg_url)) as server:
        out = server.cli("apikey", "create", "--data", str(server.data_dir), "--database", pg_url,
                         "--account", "w").stdout
        key = out.strip().splitlines()[-1]
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda n: notarize(server, key, n), range(100)))
        assert sorted(r["ledger"]["index"] for r, _ in got) == list(range(100))
        jwks = Jwks(server.get("/.well-known/jwks.json").json())
        vkey = Ed25519Verifier.from_vkey(server.get("/v1/ledger").json()["vkey"])
        for receipt, record in got:
            verdict = verify_receipt(receipt, record=record, jwks=jwks, log_verifier=vkey)
            assert verdict.valid, json.dumps(verdict.to_json())
        assert server.stop() == 0
